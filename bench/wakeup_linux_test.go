package bench

import (
	"context"
	"fmt"
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
			// A mode may be missing only on a kernel too old for it.
			need := map[string][2]int{WakeURing: {6, 1}, WakeURingNAPI: {6, 9}}[r.Mode]
			if kernelAtLeast(t, need[0], need[1]) {
				t.Errorf("%s skipped on kernel %s (new enough): %s", r.Mode, kernelRelease(), r.Skipped)
			} else {
				t.Logf("%s skipped (kernel %s older than %d.%d): %s", r.Mode, kernelRelease(), need[0], need[1], r.Skipped)
			}
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

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var maj, min int
	if _, err := fmt.Sscanf(kernelRelease(), "%d.%d", &maj, &min); err != nil {
		t.Fatalf("kernel release %q: %v", kernelRelease(), err)
	}
	return maj > major || maj == major && min >= minor
}
