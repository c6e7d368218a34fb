//go:build linux

package tune

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/topo"
)

// virtio feature bits that make virtio_net accept interrupt coalescing
// (include/uapi/linux/virtio_net.h): VIRTIO_NET_F_VQ_NOTF_COAL and
// VIRTIO_NET_F_NOTF_COAL.
const (
	virtioNetFVQNotfCoal = 52
	virtioNetFNotfCoal   = 53
)

// refusesCoalescing reports whether n is a virtio_net device without the
// coalescing features, whose driver therefore refuses any rx-usecs value
// other than 0 with EOPNOTSUPP before it changes anything
// (virtnet_coal_params_supported). Only such a device is safe to send a
// real coalesce-set to from a test on a shared host.
func refusesCoalescing(n *topo.NIC) (bool, string) {
	if n.Driver != "virtio_net" {
		return false, "driver " + n.Driver + " may accept the write"
	}
	b, err := os.ReadFile(filepath.Join("/sys/class/net", n.Name, "device/features"))
	if err != nil {
		return false, err.Error()
	}
	f := strings.TrimSpace(string(b))
	if len(f) <= virtioNetFNotfCoal {
		return false, "feature string too short: " + f
	}
	if f[virtioNetFVQNotfCoal] != '0' || f[virtioNetFNotfCoal] != '0' {
		return false, "the device negotiated NOTF_COAL: it would accept the write"
	}
	return true, ""
}

// TestApplyCoalesceRefusedLive sends a real ethtool coalesce-set over
// netlink through Apply to a NIC whose driver refuses it (virtio_net
// without NOTF_COAL, this VM's eth0): the refusal must surface as
// ErrNotSupported, the state file must be gone, and the device's
// coalescing must read back unchanged. This is the live counterpart of
// TestApplyRollsBackOnFailure, whose fixture tree has no device behind it.
func TestApplyCoalesceRefusedLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: ethtool coalesce-set requires CAP_NET_ADMIN")
	}
	h, err := topo.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	var nic *topo.NIC
	var why []string
	for _, name := range h.TuningCandidates() {
		n := h.NIC(name)
		if n.Coalesce == nil {
			why = append(why, name+": no coalescing over netlink ("+n.CoalesceErr+")")
			continue
		}
		if ok, reason := refusesCoalescing(n); !ok {
			why = append(why, name+": "+reason)
			continue
		}
		nic = n
		break
	}
	if nic == nil {
		t.Skipf("no NIC that refuses coalescing writes, so none is safe to write to: %s", strings.Join(why, "; "))
	}
	nc, err := topo.DialNetlink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	before, err := nc.Coalesce(nic.Ifindex)
	if err != nil {
		t.Fatal(err)
	}
	cur, ok := before["rx-usecs"]
	if !ok || cur != 0 {
		t.Skipf("%s rx-usecs is %d (present %v); the driver refuses only a change from 0", nic.Name, cur, ok)
	}
	// Should the driver take a write after all (features misread), the
	// test fails and the host's rx-usecs is put back, whatever step
	// failed.
	t.Cleanup(func() {
		if now, err := nc.Coalesce(nic.Ifindex); err == nil && now["rx-usecs"] != cur {
			if err := nc.SetCoalesce(nic.Ifindex, map[string]uint32{"rx-usecs": cur}); err != nil {
				t.Errorf("%s rx-usecs left at %d: %v", nic.Name, now["rx-usecs"], err)
			}
		}
	})

	// Directly: the kernel answers the encoded request with EOPNOTSUPP.
	err = nc.SetCoalesce(nic.Ifindex, map[string]uint32{"rx-usecs": 8})
	if !errors.Is(err, topo.ErrNotSupported) {
		t.Fatalf("SetCoalesce(%s rx-usecs 8) = %v, want ErrNotSupported", nic.Name, err)
	}
	// A request for another device fails differently: the ifindex in the
	// header is what the kernel acted on.
	if err := nc.SetCoalesce(1<<30, map[string]uint32{"rx-usecs": 8}); err == nil || errors.Is(err, topo.ErrNotSupported) {
		t.Errorf("SetCoalesce on a missing ifindex = %v, want ENODEV", err)
	}

	// Through Apply: the write fails, nothing before it needs undoing,
	// and the state file is removed.
	p := &Plan{Policy: Inline, Interfaces: []string{nic.Name}, Writes: []Write{{
		Kind: KindCoalesce, Iface: nic.Name, Ifindex: nic.Ifindex, Param: "rx-usecs", Format: FormatInt,
		Old: strconv.FormatUint(uint64(cur), 10), New: "8", Reason: "test: the driver refuses this",
	}}}
	state := filepath.Join(t.TempDir(), "state.json")
	_, err = Apply(p, Target{Root: "/", Netlink: nc}, state)
	if !errors.Is(err, topo.ErrNotSupported) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Apply = %v, want ErrNotSupported and nothing changed", err)
	}
	t.Logf("apply on %s: %v", nic.Name, err)
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left after a refused write: %v", err)
	}
	after, err := nc.Coalesce(nic.Ifindex)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("%s coalescing changed: %v -> %v", nic.Name, before, after)
	}
}
