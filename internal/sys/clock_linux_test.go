package sys

import (
	"runtime"
	"testing"
	"time"
)

// TestThreadCPUTime checks that the thread clock advances with work on the
// thread and not with sleep.
func TestThreadCPUTime(t *testing.T) {
	runtime.LockOSThread() // the clock is the thread's
	defer runtime.UnlockOSThread()
	t0 := ThreadCPUTime()
	if t0 <= 0 {
		t.Fatalf("thread CPU time %d", t0)
	}
	// Spin until the clock shows 5 ms of work: a clock that does not
	// advance with work never gets there (5 s is for a crowded machine).
	start := time.Now()
	for ThreadCPUTime()-t0 < int64(5*time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("5 s of spinning advanced the thread clock by %v", time.Duration(ThreadCPUTime()-t0))
		}
	}
	t1 := ThreadCPUTime()
	time.Sleep(20 * time.Millisecond)
	if d := time.Duration(ThreadCPUTime() - t1); d > 10*time.Millisecond {
		t.Errorf("20 ms of sleep advanced the thread clock by %v", d)
	}
}
