package bench

import (
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestSelfUsageCountsExitedThreads (passes): a server child's CPU is the
// process's getrusage, which keeps the CPU of threads that exited (an
// engine loop's thread exits with its loop; io_uring's io-wq workers come
// and go), so a thread that ran and exited between a window's two usage
// reads is in the window's server CPU; only the per-thread list, read
// from /proc/self/task, leaves it out.
func TestSelfUsageCountsExitedThreads(t *testing.T) {
	skipUnlessLinux(t)
	u0, err := selfUsage(nil)
	if err != nil {
		t.Fatal(err)
	}
	type burnt struct {
		tid int
		cpu int64 // ns of the thread's own CPU (RUSAGE_THREAD)
	}
	done := make(chan burnt)
	// Locked and never unlocked, off the main thread (which the runtime
	// parks instead of ending): the thread exits with the goroutine.
	// The thread may be one the runtime ran other goroutines on before:
	// what it burns here is the growth of its figure, not the figure.
	go sys.LockedThread(func() {
		cpu := func() int64 {
			var ru unix.Rusage
			if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
				t.Error(err)
				return math.MaxInt64
			}
			return unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)
		}
		start := cpu()
		now := start
		for now-start < 50e6 {
			now = cpu()
		}
		done <- burnt{unix.Gettid(), now - start}
	})
	b := <-done
	// The thread is gone once its task directory is.
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still in /proc/self/task 10 s after its goroutine ended", b.tid)
		}
		tasks, err := Proc{}.Tasks(0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(tasks, func(s TaskStat) bool { return s.TID == b.tid }) {
			break
		}
	}
	u1, err := selfUsage(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Counted, not to the µs: over 30 runs the process's growth fell up
	// to 4 ms short of the thread's own figure (RUSAGE_THREAD) in some;
	// a thread left out would leave it near 0.
	if got := (u1.UserNS + u1.SysNS) - (u0.UserNS + u0.SysNS); got < b.cpu/2 {
		t.Errorf("process CPU grew by %d ns while a thread that exited burnt %d ns", got, b.cpu)
	}
	if slices.ContainsFunc(u1.Threads, func(s TaskStat) bool { return s.TID == b.tid }) {
		t.Errorf("thread %d exited but is listed", b.tid)
	}
}
