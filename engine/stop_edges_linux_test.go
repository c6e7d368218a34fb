package engine

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseTimeoutUnderLongWriteTimeout: the sweep that checks
// CloseTimeout came every 200th of WriteTimeout at the most often (its
// stall count keeps to a byte), so with a WriteTimeout of an hour a Close
// to a peer that reads nothing waited 18 s for a CloseTimeout of 300 ms,
// and with math.MaxInt64 (its arithmetic overflowing) 533 days. A Close's
// queue must be reset at CloseTimeout within its own sweep period (here
// bounded at 5 s: what counts is that it happens), and with no
// CloseTimeout a huge WriteTimeout must not reset anything.
func TestCloseTimeoutUnderLongWriteTimeout(t *testing.T) {
	for _, wto := range []time.Duration{time.Hour, math.MaxInt64} {
		t.Run(wto.String(), func(t *testing.T) {
			testPeerNotReading(t, func(c *Conn) { c.Close() }, func(cfg *Config, bound bool) {
				cfg.WriteTimeout = wto
				cfg.CloseTimeout = -1
				if bound {
					cfg.CloseTimeout = 300 * time.Millisecond
				}
			})
		})
	}
}

// TestShutdownDoneContextNoDrain: a Shutdown whose ctx is done already
// has no time for a graceful drain: it closes every connection at once
// (OnClose gets ErrClosed) and calls no Drainer's OnDrain. It called
// OnDrain for each and then closed the connections in the same loop
// iteration, dropping whatever OnDrain had queued (here "bye").
func TestShutdownDoneContextNoDrain(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &drainHandler{}
			var closedErrs atomic.Int64
			h.closed = func(c *Conn, err error) {
				if errors.Is(err, ErrClosed) {
					closedErrs.Add(1)
				}
			}
			e, addr, done := listenAndRun(t, testConfig(b), h)
			const n = 3
			for range n {
				mustDial(t, "tcp", addr)
			}
			waitFor(t, "the connections to open", func() bool { return e.Stats().Open == n })
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := e.Shutdown(ctx); err != context.Canceled {
				t.Errorf("Shutdown with a done ctx returned %v, want context.Canceled (connections closed)", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := h.drained.Load(); got != 0 {
				t.Errorf("OnDrain called %d times by a Shutdown whose ctx was done, want 0", got)
			}
			if got, all := closedErrs.Load(), h.closes.Load(); got != n || all != n {
				t.Errorf("%d OnClose calls, %d with ErrClosed; want %d with ErrClosed", all, got, n)
			}
		})
	}
}

// TestNoDrainOnceStopped: a drain whose context ended before the loop got
// to the OnDrain calls Shutdown posted (the loop busy meanwhile) called
// OnDrain for each connection as the loop stopped, and closed them in the
// same iteration, OnDrain's writes dropped. Once the engine stops, OnDrain
// is not called.
func TestNoDrainOnceStopped(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &drainHandler{}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, addr, done := listenAndRun(t, cfg, h)
			const n = 3
			for range n {
				mustDial(t, "tcp", addr)
			}
			waitFor(t, "the connections to open", func() bool { return e.Stats().Open == n })
			busy, release := make(chan struct{}), make(chan struct{})
			e.Loops()[0].Post(func() {
				close(busy)
				<-release
			})
			<-busy
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- e.Shutdown(ctx) }()
			waitFor(t, "the engine to stop", e.stopped.Load)
			close(release)
			if err := <-shut; err != context.DeadlineExceeded {
				t.Errorf("Shutdown returned %v, want context.DeadlineExceeded", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := h.drained.Load(); got != 0 {
				t.Errorf("OnDrain called %d times on a loop that was stopping, want 0", got)
			}
		})
	}
}
