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
