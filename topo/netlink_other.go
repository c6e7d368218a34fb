//go:build !linux

package topo

// NetlinkClient is not available on systems other than Linux.
type NetlinkClient struct{}

// DialNetlink returns ErrNotSupported on systems other than Linux.
func DialNetlink() (*NetlinkClient, error) { return nil, ErrNotSupported }

// Close does nothing.
func (nc *NetlinkClient) Close() error { return nil }

// Status reports that netlink is unavailable.
func (nc *NetlinkClient) Status() NetlinkStatus {
	return NetlinkStatus{Netdev: ErrNotSupported.Error(), Ethtool: ErrNotSupported.Error()}
}

// Queues returns ErrNotSupported.
func (nc *NetlinkClient) Queues(int) ([]QueueNAPI, error) { return nil, ErrNotSupported }

// NAPIs returns ErrNotSupported.
func (nc *NetlinkClient) NAPIs(int) ([]NAPI, error) { return nil, ErrNotSupported }

// NAPI returns ErrNotSupported.
func (nc *NetlinkClient) NAPI(uint32) (NAPI, error) { return NAPI{}, ErrNotSupported }

// SetNAPI returns ErrNotSupported.
func (nc *NetlinkClient) SetNAPI(uint32, string, uint64) error { return ErrNotSupported }

// Coalesce returns ErrNotSupported.
func (nc *NetlinkClient) Coalesce(int) (Coalesce, error) { return nil, ErrNotSupported }

// SetCoalesce returns ErrNotSupported.
func (nc *NetlinkClient) SetCoalesce(int, map[string]uint32) error { return ErrNotSupported }

// Rings returns ErrNotSupported.
func (nc *NetlinkClient) Rings(int) (*Rings, error) { return nil, ErrNotSupported }

// Channels returns ErrNotSupported.
func (nc *NetlinkClient) Channels(int) (*Channels, error) { return nil, ErrNotSupported }

// QStats returns ErrNotSupported.
func (nc *NetlinkClient) QStats(int) ([]QueueStats, error) { return nil, ErrNotSupported }
