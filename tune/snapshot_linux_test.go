//go:build linux

package tune

import (
	"context"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// TestSampleLive samples this machine for a short period: every online CPU
// has a /proc/stat line, a softirq and a softnet column, and counters never
// go backwards.
func TestSampleLive(t *testing.T) {
	h, err := topo.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := topo.DialNetlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	a, b, err := Sample(context.Background(), "/", h, 50*time.Millisecond, nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h.Online {
		if _, ok := b.Stat[c]; !ok {
			t.Errorf("no /proc/stat line for CPU %d", c)
		}
		if _, ok := b.Softirqs.PerCPU("NET_RX")[c]; !ok {
			t.Errorf("no NET_RX column for CPU %d", c)
		}
	}
	if len(b.Softnet) != h.Online.Len() {
		t.Errorf("softnet has %d lines for %d online CPUs", len(b.Softnet), h.Online.Len())
	}
	for cpu, tb := range b.Stat {
		if tb.Total() < a.Stat[cpu].Total() {
			t.Errorf("CPU %d time went backwards", cpu)
		}
	}
	for name, qs := range b.QStats {
		t.Logf("%s: per-queue counters for %d queues", name, len(qs))
	}
	// Diagnose must run on live data without panicking and give each
	// finding its evidence.
	for _, f := range Diagnose(h, a, b, Options{}) {
		if len(f.Evidence) == 0 {
			t.Errorf("%s without evidence", f.ID)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Sample(ctx, "/", h, time.Hour, nil); err == nil {
		t.Error("Sample ignored a cancelled context")
	}
}
