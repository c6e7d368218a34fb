//go:build linux

package topo

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var captureNetlink = flag.String("capture-netlink", "", "write this host's netlink answers to `DIR`/netlink.json (after testdata/capture.sh DIR)")

// TestCaptureNetlink records the live netlink answers next to a tree
// captured by testdata/capture.sh, when run with -capture-netlink.
func TestCaptureNetlink(t *testing.T) {
	if *captureNetlink == "" {
		t.Skip("run with -capture-netlink DIR to record this host's netlink answers")
	}
	h, err := Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := DialNetlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := json.MarshalIndent(RecordNetlink(nc, nc.Status(), h), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*captureNetlink, "netlink.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordNetlinkLive checks that recording and replaying the live
// answers gives the same host as asking netlink directly.
func TestRecordNetlinkLive(t *testing.T) {
	nc, err := DialNetlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	live, err := Read("/", &Config{Netlink: nc, NetlinkStatus: nc.Status()})
	if err != nil {
		t.Fatal(err)
	}
	rec := RecordNetlink(nc, nc.Status(), live)
	replayed, err := Read("/", &Config{Netlink: rec, NetlinkStatus: rec.Status})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range live.NICs {
		r := replayed.NICs[i]
		if n.Name != r.Name || len(n.NAPIs) != len(r.NAPIs) || n.CoalesceErr != r.CoalesceErr || len(n.RxQueues) != len(r.RxQueues) {
			t.Errorf("%s: live and replayed differ:\n%+v\n%+v", n.Name, n, r)
			continue
		}
		for j := range n.RxQueues {
			if n.RxQueues[j].NAPIID != r.RxQueues[j].NAPIID || n.RxQueues[j].IRQ != r.RxQueues[j].IRQ {
				t.Errorf("%s rx-%d: live %+v, replayed %+v", n.Name, j, n.RxQueues[j], r.RxQueues[j])
			}
		}
	}
}
