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
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	t1 := ThreadCPUTime()
	if d := time.Duration(t1 - t0); d < 5*time.Millisecond {
		t.Errorf("20 ms of spinning advanced the thread clock by %v", d)
	}
	time.Sleep(20 * time.Millisecond)
	if d := time.Duration(ThreadCPUTime() - t1); d > 10*time.Millisecond {
		t.Errorf("20 ms of sleep advanced the thread clock by %v", d)
	}
}
