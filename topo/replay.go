package topo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ReplayNetlink is a NetlinkSource that answers from a captured JSON file
// (netlink.json in a fixture tree), so that a host captured elsewhere can
// be inspected and planned offline, and tests can cover the netlink part.
// Its methods only read it and may be called from any goroutine.
type ReplayNetlink struct {
	// Status is the captured NetlinkStatus.
	Status NetlinkStatus `json:"status"`
	// Ifaces maps an ifindex (as a decimal string) to its answers.
	Ifaces map[string]ReplayIface `json:"ifaces"`
}

// ReplayIface holds the captured netlink answers for one interface. An
// *Err field, when set, is returned as the error of that query.
type ReplayIface struct {
	Queues    []QueueNAPI `json:"queues"`
	QueuesErr string      `json:"queues_err,omitempty"`
	NAPIs     []NAPI      `json:"napis"`
	NAPIsErr  string      `json:"napis_err,omitempty"`
	EthtoolInfo
}

// LoadReplayNetlink reads a netlink.json file. Unknown fields are errors.
func LoadReplayNetlink(path string) (*ReplayNetlink, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var r ReplayNetlink
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func (r *ReplayNetlink) iface(ifindex int) (ReplayIface, error) {
	v, ok := r.Ifaces[fmt.Sprint(ifindex)]
	if !ok {
		return v, fmt.Errorf("replay: ifindex %d: %w", ifindex, ErrNotSupported)
	}
	return v, nil
}

func replayErr(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// Queues implements NetlinkSource.
func (r *ReplayNetlink) Queues(ifindex int) ([]QueueNAPI, error) {
	return replayed(r, ifindex, func(v ReplayIface) ([]QueueNAPI, string) { return v.Queues, v.QueuesErr })
}

// NAPIs implements NetlinkSource.
func (r *ReplayNetlink) NAPIs(ifindex int) ([]NAPI, error) {
	return replayed(r, ifindex, func(v ReplayIface) ([]NAPI, string) { return v.NAPIs, v.NAPIsErr })
}

// replayed returns one answer of ifindex: its value, or its recorded
// error.
func replayed[T any](r *ReplayNetlink, ifindex int, get func(ReplayIface) (T, string)) (T, error) {
	var zero T
	v, err := r.iface(ifindex)
	if err != nil {
		return zero, err
	}
	val, errText := get(v)
	if err := replayErr(errText); err != nil {
		return zero, err
	}
	return val, nil
}

// Coalesce implements NetlinkSource.
func (r *ReplayNetlink) Coalesce(ifindex int) (Coalesce, error) {
	return replayed(r, ifindex, func(v ReplayIface) (Coalesce, string) { return v.Coalesce, v.CoalesceErr })
}

// Rings implements NetlinkSource.
func (r *ReplayNetlink) Rings(ifindex int) (*Rings, error) {
	return replayed(r, ifindex, func(v ReplayIface) (*Rings, string) { return v.Rings, v.RingsErr })
}

// Channels implements NetlinkSource.
func (r *ReplayNetlink) Channels(ifindex int) (*Channels, error) {
	return replayed(r, ifindex, func(v ReplayIface) (*Channels, string) { return v.Channels, v.ChannelsErr })
}

// RecordNetlink asks src about every interface of h and returns the
// answers in replayable form (what testdata/*/netlink.json holds).
func RecordNetlink(src NetlinkSource, status NetlinkStatus, h *Host) *ReplayNetlink {
	r := &ReplayNetlink{Status: status, Ifaces: map[string]ReplayIface{}}
	for _, n := range h.NICs {
		ri := ReplayIface{EthtoolInfo: readEthtool(src, n.Ifindex)}
		var err error
		ri.Queues, err = src.Queues(n.Ifindex)
		ri.QueuesErr = errString(err)
		ri.NAPIs, err = src.NAPIs(n.Ifindex)
		ri.NAPIsErr = errString(err)
		r.Ifaces[fmt.Sprint(n.Ifindex)] = ri
	}
	return r
}

// ReadFixture reads a captured tree: root plus, when root/netlink.json
// exists, its replayed netlink answers.
func ReadFixture(root string) (*Host, error) {
	p := root + "/netlink.json"
	if _, err := os.Stat(p); err != nil {
		return Read(root, nil)
	}
	r, err := LoadReplayNetlink(p)
	if err != nil {
		return nil, err
	}
	return Read(root, &Config{Netlink: r, NetlinkStatus: r.Status})
}
