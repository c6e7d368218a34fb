package proxy

import (
	"sync/atomic"
	"testing"
	"time"
)

// untilCalm runs try up to three times, until it passes or fails where
// the machine did not hold the test up: try returns what went wrong (""
// for nothing) and, where a pause of the test's own could account for it
// (a loaded machine's: the test's goroutines kept off the CPU past the
// timeout the proxy is tested against), what that pause was ("" for
// none). A fault with no such pause fails the test at once; one whose
// tries all paused skips it, saying so.
func untilCalm(t *testing.T, try func() (fault, paused string)) {
	t.Helper()
	var fault, paused string
	for i := range 3 {
		if fault, paused = try(); fault == "" {
			return
		}
		if paused == "" {
			t.Error(fault)
			return
		}
		t.Logf("try %d: %s, but %s: trying again", i+1, fault, paused)
	}
	t.Skipf("%s, but %s, three tries in a row (a loaded machine)", fault, paused)
}

// stallWatch starts a goroutine that sleeps 5 ms at a time and records
// the most it overslept; stop ends it and returns that: the longest the
// process's goroutines were kept waiting to run meanwhile (a loaded
// machine's pause: the proxy's loops, the test's clients and servers
// share the process).
func stallWatch() (stop func() time.Duration) {
	var most atomic.Int64
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			t0 := time.Now()
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if late := int64(time.Since(t0) - 5*time.Millisecond); late > most.Load() {
				most.Store(late)
			}
		}
	}()
	return func() time.Duration {
		close(done)
		<-ended
		return time.Duration(most.Load())
	}
}
