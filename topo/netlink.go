package topo

import (
	"errors"
	"fmt"
	"sort"

	"github.com/mdlayher/netlink"
)

// Constants of the netdev generic netlink family, from
// include/uapi/linux/netdev.h (Linux 6.18).
const (
	netdevFamily = "netdev"

	netdevCmdQueueGet  = 10
	netdevCmdNAPIGet   = 11
	netdevCmdQStatsGet = 12
	netdevCmdNAPISet   = 14

	netdevAQStatsIfindex   = 1
	netdevAQStatsQueueType = 2
	netdevAQStatsQueueID   = 3
	netdevAQStatsScope     = 4
	netdevQStatsScopeQueue = 1

	netdevANAPIIfindex           = 1
	netdevANAPIID                = 2
	netdevANAPIIRQ               = 3
	netdevANAPIPID               = 4
	netdevANAPIDeferHardIRQs     = 5
	netdevANAPIGROFlushTimeout   = 6
	netdevANAPIIRQSuspendTimeout = 7
	netdevANAPIThreaded          = 8

	netdevAQueueID      = 1
	netdevAQueueIfindex = 2
	netdevAQueueType    = 3
	netdevAQueueNAPIID  = 4
)

// Constants of the ethtool generic netlink family, from
// include/uapi/linux/ethtool_netlink_generated.h (Linux 6.18).
const (
	ethtoolFamily = "ethtool"

	ethtoolMsgRingsGet    = 15
	ethtoolMsgChannelsGet = 17
	ethtoolMsgCoalesceGet = 19
	ethtoolMsgCoalesceSet = 20

	// ethtoolAHeader is the request header attribute, 1 in every ethtool
	// message (ETHTOOL_A_RINGS_HEADER, ETHTOOL_A_COALESCE_HEADER, ...).
	ethtoolAHeader         = 1
	ethtoolAHeaderDevIndex = 1

	ethtoolARingsRxMax = 2
	ethtoolARingsTxMax = 5
	ethtoolARingsRx    = 6
	ethtoolARingsTx    = 9

	ethtoolAChannelsRxMax         = 2
	ethtoolAChannelsTxMax         = 3
	ethtoolAChannelsOtherMax      = 4
	ethtoolAChannelsCombinedMax   = 5
	ethtoolAChannelsRxCount       = 6
	ethtoolAChannelsTxCount       = 7
	ethtoolAChannelsOtherCount    = 8
	ethtoolAChannelsCombinedCount = 9
)

// coalesceAttrs names the ethtool coalescing attributes spindle reads and
// may write (ETHTOOL_A_COALESCE_*). The adaptive switches are u8 (bool),
// the others u32. Names follow `ethtool -c`.
var coalesceAttrs = []struct {
	name string
	typ  uint16
	u8   bool
}{
	{"rx-usecs", 2, false},
	{"rx-frames", 3, false},
	{"rx-usecs-irq", 4, false},
	{"rx-frames-irq", 5, false},
	{"tx-usecs", 6, false},
	{"tx-frames", 7, false},
	{"tx-usecs-irq", 8, false},
	{"tx-frames-irq", 9, false},
	{"stats-block-usecs", 10, false},
	{"adaptive-rx", 11, true},
	{"adaptive-tx", 12, true},
	{"pkt-rate-low", 13, false},
	{"rx-usecs-low", 14, false},
	{"rx-frames-low", 15, false},
	{"tx-usecs-low", 16, false},
	{"tx-frames-low", 17, false},
	{"pkt-rate-high", 18, false},
	{"rx-usecs-high", 19, false},
	{"rx-frames-high", 20, false},
	{"tx-usecs-high", 21, false},
	{"tx-frames-high", 22, false},
	{"sample-interval", 23, false},
}

// CoalesceAttrNames lists the coalescing parameter names Coalesce uses.
func CoalesceAttrNames() []string {
	out := make([]string, len(coalesceAttrs))
	for i, a := range coalesceAttrs {
		out[i] = a.name
	}
	return out
}

// ErrNetlinkAbsent means a generic netlink family is not registered in
// this kernel (or netlink sockets are not available at all).
var ErrNetlinkAbsent = errors.New("generic netlink family not available")

// ErrNotSupported means the device's driver does not implement the
// requested netlink operation (EOPNOTSUPP), or the system is not Linux.
var ErrNotSupported = errors.New("not supported")

// NAPI is one NAPI instance as reported by the netdev family's napi-get.
// Its method is pure and may be called from any goroutine.
type NAPI struct {
	// ID is the NAPI id (≥ 257; what SO_INCOMING_NAPI_ID returns).
	ID uint32 `json:"id"`
	// Ifindex is the interface the instance belongs to.
	Ifindex int `json:"ifindex"`
	// IRQ is the instance's interrupt, or -1 if it has none.
	IRQ int `json:"irq"`
	// PID is the kernel thread polling it in threaded mode, or 0.
	PID int `json:"pid,omitempty"`
	// DeferHardIRQs is napi_defer_hard_irqs for this instance.
	DeferHardIRQs uint32 `json:"defer_hard_irqs"`
	// GROFlushTimeout is gro_flush_timeout in nanoseconds.
	GROFlushTimeout uint64 `json:"gro_flush_timeout_ns"`
	// IRQSuspendTimeout is irq_suspend_timeout in nanoseconds (6.13+).
	IRQSuspendTimeout uint64 `json:"irq_suspend_timeout_ns"`
	// Threaded is 1 when the instance is polled by a kernel thread.
	Threaded uint32 `json:"threaded"`
}

// QueueNAPI is one queue as reported by the netdev family's queue-get.
type QueueNAPI struct {
	// ID is the queue index.
	ID int `json:"id"`
	// Ifindex is the interface.
	Ifindex int `json:"ifindex"`
	// Type is "rx" or "tx".
	Type string `json:"type"`
	// NAPIID is the NAPI instance serving the queue, 0 if none.
	NAPIID uint32 `json:"napi_id"`
}

// Coalesce holds the interrupt-coalescing parameters a driver reports;
// only the parameters the driver supports are present.
type Coalesce map[string]uint32

// Rings holds ring sizes (ethtool -g).
type Rings struct {
	RxMax uint32 `json:"rx_max"`
	TxMax uint32 `json:"tx_max"`
	Rx    uint32 `json:"rx"`
	Tx    uint32 `json:"tx"`
}

// Channels holds channel counts (ethtool -l).
type Channels struct {
	RxMax         uint32 `json:"rx_max"`
	TxMax         uint32 `json:"tx_max"`
	OtherMax      uint32 `json:"other_max"`
	CombinedMax   uint32 `json:"combined_max"`
	RxCount       uint32 `json:"rx"`
	TxCount       uint32 `json:"tx"`
	OtherCount    uint32 `json:"other"`
	CombinedCount uint32 `json:"combined"`
}

// DecodeNAPI decodes the attributes of one napi-get reply.
func DecodeNAPI(b []byte) (NAPI, error) {
	n := NAPI{IRQ: -1}
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return n, fmt.Errorf("napi: %w", err)
	}
	for ad.Next() {
		switch ad.Type() {
		case netdevANAPIIfindex:
			n.Ifindex = int(ad.Uint32())
		case netdevANAPIID:
			n.ID = ad.Uint32()
		case netdevANAPIIRQ:
			n.IRQ = int(ad.Uint32())
		case netdevANAPIPID:
			n.PID = int(ad.Uint32())
		case netdevANAPIDeferHardIRQs:
			n.DeferHardIRQs = ad.Uint32()
		case netdevANAPIGROFlushTimeout:
			n.GROFlushTimeout = uintN(ad)
		case netdevANAPIIRQSuspendTimeout:
			n.IRQSuspendTimeout = uintN(ad)
		case netdevANAPIThreaded:
			n.Threaded = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return n, fmt.Errorf("napi: %w", err)
	}
	if n.ID == 0 {
		return n, fmt.Errorf("napi: reply without id")
	}
	return n, nil
}

// uintN reads a netlink "uint" attribute, which the kernel sends as 4 or
// 8 bytes depending on the value.
func uintN(ad *netlink.AttributeDecoder) uint64 {
	if len(ad.Bytes()) == 8 {
		return ad.Uint64()
	}
	return uint64(ad.Uint32())
}

// DecodeQueue decodes the attributes of one queue-get reply.
func DecodeQueue(b []byte) (QueueNAPI, error) {
	var q QueueNAPI
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return q, fmt.Errorf("queue: %w", err)
	}
	typ := -1
	for ad.Next() {
		switch ad.Type() {
		case netdevAQueueID:
			q.ID = int(ad.Uint32())
		case netdevAQueueIfindex:
			q.Ifindex = int(ad.Uint32())
		case netdevAQueueType:
			typ = int(ad.Uint32())
		case netdevAQueueNAPIID:
			q.NAPIID = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return q, fmt.Errorf("queue: %w", err)
	}
	q.Type, err = queueType("queue", typ)
	return q, err
}

// qstatNames names the netdev qstats counters spindle reads
// (NETDEV_A_QSTATS_*); all are "uint" (4 or 8 bytes).
var qstatNames = map[uint16]string{
	8: "rx-packets", 9: "rx-bytes", 10: "tx-packets", 11: "tx-bytes",
	12: "rx-alloc-fail", 13: "rx-hw-drops", 14: "rx-hw-drop-overruns",
	23: "rx-hw-drop-ratelimits", 24: "tx-hw-drops", 25: "tx-hw-drop-errors",
	33: "tx-stop", 34: "tx-wake",
}

// QueueStats is one queue's counters from the netdev family's qstats-get
// (the netlink successor of per-queue `ethtool -S` counters). Only the
// counters the driver reports are present.
type QueueStats struct {
	Ifindex int               `json:"ifindex"`
	Type    string            `json:"type"`
	Queue   int               `json:"queue"`
	Values  map[string]uint64 `json:"values"`
}

// DecodeQStats decodes the attributes of one qstats-get reply with queue
// scope.
func DecodeQStats(b []byte) (QueueStats, error) {
	q := QueueStats{Values: map[string]uint64{}}
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return q, fmt.Errorf("qstats: %w", err)
	}
	typ := -1
	for ad.Next() {
		switch t := ad.Type(); t {
		case netdevAQStatsIfindex:
			q.Ifindex = int(ad.Uint32())
		case netdevAQStatsQueueType:
			typ = int(ad.Uint32())
		case netdevAQStatsQueueID:
			q.Queue = int(ad.Uint32())
		default:
			if name, ok := qstatNames[t]; ok {
				q.Values[name] = uintN(ad)
			}
		}
	}
	if err := ad.Err(); err != nil {
		return q, fmt.Errorf("qstats: %w", err)
	}
	q.Type, err = queueType("qstats", typ)
	return q, err
}

// queueType names a NETDEV_QUEUE_TYPE value (0 rx, 1 tx).
func queueType(what string, typ int) (string, error) {
	switch typ {
	case 0:
		return "rx", nil
	case 1:
		return "tx", nil
	}
	return "", fmt.Errorf("%s: queue type %d", what, typ)
}

// DecodeCoalesce decodes the attributes of a coalesce-get reply.
func DecodeCoalesce(b []byte) (Coalesce, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, fmt.Errorf("coalesce: %w", err)
	}
	c := Coalesce{}
	for ad.Next() {
		for _, a := range coalesceAttrs {
			if ad.Type() != a.typ {
				continue
			}
			if a.u8 {
				c[a.name] = uint32(ad.Uint8())
			} else {
				c[a.name] = ad.Uint32()
			}
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("coalesce: %w", err)
	}
	return c, nil
}

// EncodeCoalesceSet encodes a coalesce-set request for ifindex that sets
// only the given parameters. Unknown names are an error.
func EncodeCoalesceSet(ifindex int, values map[string]uint32) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ethtoolAHeader|netlink.Nested, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(ethtoolAHeaderDevIndex, uint32(ifindex))
		return nil
	})
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		found := false
		for _, a := range coalesceAttrs {
			if a.name != n {
				continue
			}
			found = true
			if a.u8 {
				if values[n] > 1 {
					return nil, fmt.Errorf("coalesce: %s is a switch (0 or 1), got %d", n, values[n])
				}
				ae.Uint8(a.typ, uint8(values[n]))
			} else {
				ae.Uint32(a.typ, values[n])
			}
		}
		if !found {
			return nil, fmt.Errorf("coalesce: unknown parameter %q", n)
		}
	}
	return ae.Encode()
}

// decodeU32s decodes the u32 attributes of b into the fields dst names by
// attribute type, ignoring the others.
func decodeU32s(what string, b []byte, dst map[uint16]*uint32) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for ad.Next() {
		if p, ok := dst[ad.Type()]; ok {
			*p = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// DecodeRings decodes the attributes of a rings-get reply.
func DecodeRings(b []byte) (*Rings, error) {
	r := &Rings{}
	err := decodeU32s("rings", b, map[uint16]*uint32{
		ethtoolARingsRxMax: &r.RxMax, ethtoolARingsTxMax: &r.TxMax,
		ethtoolARingsRx: &r.Rx, ethtoolARingsTx: &r.Tx,
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// DecodeChannels decodes the attributes of a channels-get reply.
func DecodeChannels(b []byte) (*Channels, error) {
	c := &Channels{}
	err := decodeU32s("channels", b, map[uint16]*uint32{
		ethtoolAChannelsRxMax: &c.RxMax, ethtoolAChannelsTxMax: &c.TxMax,
		ethtoolAChannelsOtherMax: &c.OtherMax, ethtoolAChannelsCombinedMax: &c.CombinedMax,
		ethtoolAChannelsRxCount: &c.RxCount, ethtoolAChannelsTxCount: &c.TxCount,
		ethtoolAChannelsOtherCount: &c.OtherCount, ethtoolAChannelsCombinedCount: &c.CombinedCount,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NAPIParams names the per-NAPI settings napi-set can change
// (netdev.h: defer-hard-irqs u32, gro-flush-timeout and
// irq-suspend-timeout uint in nanoseconds).
var NAPIParams = []string{"defer-hard-irqs", "gro-flush-timeout", "irq-suspend-timeout"}

// NAPIValue returns the named setting of n.
func (n NAPI) NAPIValue(param string) (uint64, error) {
	switch param {
	case "defer-hard-irqs":
		return uint64(n.DeferHardIRQs), nil
	case "gro-flush-timeout":
		return n.GROFlushTimeout, nil
	case "irq-suspend-timeout":
		return n.IRQSuspendTimeout, nil
	}
	return 0, fmt.Errorf("unknown NAPI parameter %q", param)
}

// EncodeNAPISet encodes a napi-set request that sets one parameter of one
// NAPI instance.
func EncodeNAPISet(id uint32, param string, value uint64) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevANAPIID, id)
	switch param {
	case "defer-hard-irqs":
		if value > 1<<31-1 {
			return nil, fmt.Errorf("defer-hard-irqs %d out of range", value)
		}
		ae.Uint32(netdevANAPIDeferHardIRQs, uint32(value))
	case "gro-flush-timeout":
		ae.Uint64(netdevANAPIGROFlushTimeout, value)
	case "irq-suspend-timeout":
		ae.Uint64(netdevANAPIIRQSuspendTimeout, value)
	default:
		return nil, fmt.Errorf("unknown NAPI parameter %q", param)
	}
	return ae.Encode()
}

// NetlinkSource answers the netlink part of discovery for one interface at
// a time. *NetlinkClient is the live implementation; tests supply fixtures.
type NetlinkSource interface {
	// Queues returns the queues of ifindex with their NAPI ids (netdev
	// queue-get).
	Queues(ifindex int) ([]QueueNAPI, error)
	// NAPIs returns the NAPI instances of ifindex (netdev napi-get).
	NAPIs(ifindex int) ([]NAPI, error)
	// Coalesce returns the coalescing parameters (ethtool coalesce-get).
	Coalesce(ifindex int) (Coalesce, error)
	// Rings returns the ring sizes (ethtool rings-get).
	Rings(ifindex int) (*Rings, error)
	// Channels returns the channel counts (ethtool channels-get).
	Channels(ifindex int) (*Channels, error)
}
