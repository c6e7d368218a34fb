//go:build linux

package topo

import (
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NetlinkClient queries (and, for package tune, sets) the netdev and
// ethtool generic netlink families. Create it with DialNetlink; it is
// used from one goroutine at a time. A family that is absent is not an
// error at dial time: its queries return an error wrapping
// ErrNetlinkAbsent, and Status says so.
type NetlinkClient struct {
	c          *genetlink.Conn
	netdev     genetlink.Family
	ethtool    genetlink.Family
	netdevErr  error
	ethtoolErr error
}

// DialNetlink opens a generic netlink socket in the calling thread's
// network namespace and resolves the netdev and ethtool families.
func DialNetlink() (*NetlinkClient, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: generic netlink: %v", ErrNetlinkAbsent, err)
	}
	nc := &NetlinkClient{c: c}
	if nc.netdev, err = c.GetFamily(netdevFamily); err != nil {
		nc.netdevErr = fmt.Errorf("%w: %s: %v", ErrNetlinkAbsent, netdevFamily, err)
	}
	if nc.ethtool, err = c.GetFamily(ethtoolFamily); err != nil {
		nc.ethtoolErr = fmt.Errorf("%w: %s: %v", ErrNetlinkAbsent, ethtoolFamily, err)
	}
	return nc, nil
}

// Close closes the socket. Call it from the goroutine that uses the client.
func (nc *NetlinkClient) Close() error { return nc.c.Close() }

// Status reports which families are usable: "ok" or the reason not.
func (nc *NetlinkClient) Status() NetlinkStatus {
	s := NetlinkStatus{Netdev: "ok", Ethtool: "ok"}
	if nc.netdevErr != nil {
		s.Netdev = nc.netdevErr.Error()
	}
	if nc.ethtoolErr != nil {
		s.Ethtool = nc.ethtoolErr.Error()
	}
	return s
}

func mapErr(what string, err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%s: %w (EOPNOTSUPP)", what, ErrNotSupported)
	}
	var oe *netlink.OpError
	if errors.As(err, &oe) && errors.Is(oe.Err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%s: %w (EOPNOTSUPP)", what, ErrNotSupported)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (nc *NetlinkClient) netdevDump(cmd uint8, ifindexAttr uint16, ifindex int) ([]genetlink.Message, error) {
	if nc.netdevErr != nil {
		return nil, nc.netdevErr
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(ifindexAttr, uint32(ifindex))
	b, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return nc.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: nc.netdev.Version},
		Data:   b,
	}, nc.netdev.ID, netlink.Request|netlink.Dump)
}

// Queues implements NetlinkSource.
func (nc *NetlinkClient) Queues(ifindex int) ([]QueueNAPI, error) {
	msgs, err := nc.netdevDump(netdevCmdQueueGet, netdevAQueueIfindex, ifindex)
	if err != nil {
		return nil, mapErr("netdev queue-get", err)
	}
	return decodeFor(msgs, ifindex, DecodeQueue, func(q QueueNAPI) int { return q.Ifindex })
}

// NAPIs implements NetlinkSource.
func (nc *NetlinkClient) NAPIs(ifindex int) ([]NAPI, error) {
	msgs, err := nc.netdevDump(netdevCmdNAPIGet, netdevANAPIIfindex, ifindex)
	if err != nil {
		return nil, mapErr("netdev napi-get", err)
	}
	return decodeFor(msgs, ifindex, DecodeNAPI, func(n NAPI) int { return n.Ifindex })
}

// QStats returns the per-queue counters of ifindex (netdev qstats-get,
// Linux 6.10+; drivers report what they count).
func (nc *NetlinkClient) QStats(ifindex int) ([]QueueStats, error) {
	if nc.netdevErr != nil {
		return nil, nc.netdevErr
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAQStatsIfindex, uint32(ifindex))
	ae.Uint32(netdevAQStatsScope, netdevQStatsScopeQueue)
	b, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := nc.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: netdevCmdQStatsGet, Version: nc.netdev.Version},
		Data:   b,
	}, nc.netdev.ID, netlink.Request|netlink.Dump)
	if err != nil {
		return nil, mapErr("netdev qstats-get", err)
	}
	return decodeFor(msgs, ifindex, DecodeQStats, func(q QueueStats) int { return q.Ifindex })
}

// decodeFor decodes the replies of a dump and keeps those of ifindex
// (the request's filter is checked again here).
func decodeFor[T any](msgs []genetlink.Message, ifindex int, decode func([]byte) (T, error), index func(T) int) ([]T, error) {
	var out []T
	for _, m := range msgs {
		v, err := decode(m.Data)
		if err != nil {
			return nil, err
		}
		if index(v) == ifindex {
			out = append(out, v)
		}
	}
	return out, nil
}

// NAPI returns one NAPI instance by id (netdev napi-get).
func (nc *NetlinkClient) NAPI(id uint32) (NAPI, error) {
	if nc.netdevErr != nil {
		return NAPI{}, nc.netdevErr
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevANAPIID, id)
	b, err := ae.Encode()
	if err != nil {
		return NAPI{}, err
	}
	msgs, err := nc.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: netdevCmdNAPIGet, Version: nc.netdev.Version},
		Data:   b,
	}, nc.netdev.ID, netlink.Request)
	if err != nil {
		return NAPI{}, mapErr("netdev napi-get", err)
	}
	if len(msgs) != 1 {
		return NAPI{}, fmt.Errorf("netdev napi-get: %d replies, want 1", len(msgs))
	}
	return DecodeNAPI(msgs[0].Data)
}

// SetNAPI sets one parameter (see NAPIParams) of one NAPI instance
// (netdev napi-set, Linux 6.13+).
func (nc *NetlinkClient) SetNAPI(id uint32, param string, value uint64) error {
	if nc.netdevErr != nil {
		return nc.netdevErr
	}
	b, err := EncodeNAPISet(id, param, value)
	if err != nil {
		return err
	}
	_, err = nc.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: netdevCmdNAPISet, Version: nc.netdev.Version},
		Data:   b,
	}, nc.netdev.ID, netlink.Request|netlink.Acknowledge)
	if err != nil {
		return mapErr("netdev napi-set", err)
	}
	return nil
}

func (nc *NetlinkClient) ethtoolGet(cmd uint8, ifindex int) ([]byte, error) {
	if nc.ethtoolErr != nil {
		return nil, nc.ethtoolErr
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ethtoolAHeader|netlink.Nested, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(ethtoolAHeaderDevIndex, uint32(ifindex))
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := nc.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: nc.ethtool.Version},
		Data:   b,
	}, nc.ethtool.ID, netlink.Request)
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("ethtool: %d replies, want 1", len(msgs))
	}
	return msgs[0].Data, nil
}

// Coalesce implements NetlinkSource.
func (nc *NetlinkClient) Coalesce(ifindex int) (Coalesce, error) {
	b, err := nc.ethtoolGet(ethtoolMsgCoalesceGet, ifindex)
	if err != nil {
		return nil, mapErr("ethtool coalesce-get", err)
	}
	return DecodeCoalesce(b)
}

// SetCoalesce sets the given coalescing parameters of ifindex
// (ethtool coalesce-set).
func (nc *NetlinkClient) SetCoalesce(ifindex int, values map[string]uint32) error {
	if nc.ethtoolErr != nil {
		return nc.ethtoolErr
	}
	b, err := EncodeCoalesceSet(ifindex, values)
	if err != nil {
		return err
	}
	_, err = nc.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: ethtoolMsgCoalesceSet, Version: nc.ethtool.Version},
		Data:   b,
	}, nc.ethtool.ID, netlink.Request|netlink.Acknowledge)
	if err != nil {
		return mapErr("ethtool coalesce-set", err)
	}
	return nil
}

// Rings implements NetlinkSource.
func (nc *NetlinkClient) Rings(ifindex int) (*Rings, error) {
	b, err := nc.ethtoolGet(ethtoolMsgRingsGet, ifindex)
	if err != nil {
		return nil, mapErr("ethtool rings-get", err)
	}
	return DecodeRings(b)
}

// Channels implements NetlinkSource.
func (nc *NetlinkClient) Channels(ifindex int) (*Channels, error) {
	b, err := nc.ethtoolGet(ethtoolMsgChannelsGet, ifindex)
	if err != nil {
		return nil, mapErr("ethtool channels-get", err)
	}
	return DecodeChannels(b)
}
