package engine

import (
	"testing"
	"time"
)

// TestBatchWait runs concurrent echoes with Config.BatchWait on every
// backend: the data must come back intact, the uring loops that can batch
// (not uring-sqpoll) must have made batched waits, and the others none.
// How much batching saves or costs is a speed figure (docs/BENCHMARKS.md,
// "Minimum waits").
func TestBatchWait(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.BatchWait = 100 * time.Microsecond
			e, addr := startEngine(t, cfg, &echoHandler{zeroCopy: true})
			const conns = 50
			for _, err := range concurrently(conns, func(i int) error {
				return echoOnce(addr, uint64(i), 64<<10+i, 700, nil)
			}) {
				t.Fatal(err)
			}
			s := e.Stats()
			t.Logf("%d waits, %d of them batched, %d messages", s.Waits, s.BatchedWaits, s.Reads)
			batches := b == BackendURing || b == BackendURingNAPI
			if batches && s.BatchedWaits == 0 {
				t.Errorf("no batched wait in %d waits under %d concurrent echoes", s.Waits, conns)
			}
			if !batches && s.BatchedWaits != 0 {
				t.Errorf("%d batched waits on %s, which does not batch", s.BatchedWaits, b)
			}
		})
	}
}

// TestBatchWant checks how many completions a batched wait asks for: never
// more receives than the ring has free buffers, so the receives that
// complete while the loop waits do not run it dry (ENOBUFS).
func TestBatchWant(t *testing.T) {
	for _, tc := range []struct {
		last, room, free, quiet, want int
	}{
		{last: 3, room: 4096, free: 512, want: 0},                 // not busy
		{last: 4, room: 4096, free: 512, want: 8},                 // busy: twice last
		{last: 1000, room: 4096, free: 512, want: 512},            // the ring's free buffers
		{last: 1000, room: 4096, free: 100, quiet: 50, want: 150}, // quiet SENDs take none
		{last: 5000, room: 4096, free: 8192, want: 4096},          // the CQE array
		{last: 1000, room: 4096, free: 3, quiet: 50, want: 0},     // ring nearly dry
		{last: 1000, room: 4096, free: 0, want: 0},
	} {
		if got := batchWant(tc.last, tc.room, tc.free, tc.quiet); got != tc.want {
			t.Errorf("batchWant(last %d, room %d, free %d, quiet %d) = %d, want %d", tc.last, tc.room, tc.free, tc.quiet, got, tc.want)
		}
	}
}
