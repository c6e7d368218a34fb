package bench

import (
	"context"
	"testing"
	"time"
)

func TestWakeupModes(t *testing.T) {
	rep, err := Wakeup(context.Background(), WakeupConfig{Samples: 8, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(WakeupModes) || rep.Schema != WakeupSchema {
		t.Fatalf("results %+v", rep.Results)
	}
	byMode := map[string]WakeupResult{}
	for _, r := range rep.Results {
		byMode[r.Mode] = r
		if r.Skipped != "" {
			// This kernel (6.18) has every mode; a skip is a failure here.
			t.Errorf("%s skipped: %s", r.Mode, r.Skipped)
			continue
		}
		if r.Samples != 8 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P50 {
			t.Errorf("%s: %+v", r.Mode, r)
		}
	}
	// Spinning burns the reader's CPU between writes by construction;
	// blocking does not.
	spin, block := byMode[WakeSpin], byMode[WakeBlock]
	if spin.ReaderCPUPercent < 10 || spin.ReaderCPUPercent <= block.ReaderCPUPercent {
		t.Errorf("spin reader CPU %.1f%%, block %.1f%%: spin should burn its CPU", spin.ReaderCPUPercent, block.ReaderCPUPercent)
	}
	t.Logf("%+v", rep.Results)
}

func TestWakeupUnknownMode(t *testing.T) {
	if _, err := Wakeup(context.Background(), WakeupConfig{Modes: []string{"nap"}}); err == nil {
		t.Fatal("accepted an unknown mode")
	}
}
