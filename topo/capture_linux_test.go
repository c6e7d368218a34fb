//go:build linux

package topo

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var captureNetlink = flag.String("capture-netlink", "", "write this host's netlink answers to `DIR`/netlink.json (after testdata/capture.sh DIR; DIR absolute)")

// TestCaptureNetlink records the live netlink answers next to a tree
// captured by testdata/capture.sh, when run with -capture-netlink.
func TestCaptureNetlink(t *testing.T) {
	if *captureNetlink == "" {
		t.Skip("run with -capture-netlink DIR to record this host's netlink answers")
	}
	if err := captureNetlinkTo(*captureNetlink); err != nil {
		t.Fatal(err)
	}
}

// captureNetlinkTo writes this host's netlink answers to dir/netlink.json.
// dir must be absolute, since go test runs the test in the package's
// directory (topo/), not where it was started, and hold a tree of
// capture.sh.
func captureNetlinkTo(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("-capture-netlink %s: give the capture's absolute path (go test runs this test in topo/, not where it was started)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "sys", "class", "net")); err != nil {
		return fmt.Errorf("-capture-netlink %s: not a tree of testdata/capture.sh: %w", dir, err)
	}
	h, err := Read("/", nil)
	if err != nil {
		return err
	}
	nc, err := DialNetlink()
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := json.MarshalIndent(RecordNetlink(nc, nc.Status(), h), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "netlink.json"), append(b, '\n'), 0o644)
}

// TestCaptureNetlinkDir: a relative -capture-netlink DIR, which go test
// would take from topo/ and not from where the documented command
// (docs/TUNING.md) runs capture.sh, is refused saying so, and a directory
// capture.sh did not write is refused by name; the relative one failed
// with "open DIR/netlink.json: no such file or directory", or wrote into
// topo/DIR where that existed.
func TestCaptureNetlinkDir(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"capture", "absolute path"},
		{t.TempDir(), "not a tree of testdata/capture.sh"},
	} {
		err := captureNetlinkTo(tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("captureNetlinkTo(%q) = %v, want an error saying %q", tc.dir, err, tc.want)
		}
	}
	if _, err := os.Stat("capture"); err == nil {
		t.Errorf("topo/capture exists after the refusal")
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
