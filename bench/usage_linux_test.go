package bench

import (
	"fmt"
	"math"
	"os"
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
	b, err := burnExitingThread(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
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

// burnt is a thread that burnExitingThread ran: its id and the CPU it
// burnt, in ns of its own figure (RUSAGE_THREAD).
type burnt struct {
	tid int
	cpu int64
}

// burnExitingThread burns d of a thread's own CPU on a thread that then
// exits, and returns once that thread is gone from /proc/self/task.
// Locked and never unlocked, off the main thread (which the runtime parks
// instead of ending): the thread exits with the goroutine. The thread may
// be one the runtime ran other goroutines on before: what it burns here
// is the growth of its figure, not the figure.
func burnExitingThread(d time.Duration) (burnt, error) {
	done := make(chan burnt)
	errc := make(chan error, 1)
	go sys.LockedThread(func() {
		cpu := func() int64 {
			var ru unix.Rusage
			if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
				select {
				case errc <- os.NewSyscallError("getrusage", err):
				default:
				}
				return math.MaxInt64
			}
			return unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)
		}
		start := cpu()
		now := start
		for now-start < int64(d) {
			now = cpu()
		}
		done <- burnt{unix.Gettid(), now - start}
	})
	b := <-done
	select {
	case err := <-errc:
		return b, err
	default:
	}
	// The thread is gone once its task directory is.
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if time.Now().After(deadline) {
			return b, fmt.Errorf("thread %d still in /proc/self/task 10 s after its goroutine ended", b.tid)
		}
		tasks, err := Proc{}.Tasks(0)
		if err != nil {
			return b, err
		}
		if !slices.ContainsFunc(tasks, func(s TaskStat) bool { return s.TID == b.tid }) {
			return b, nil
		}
	}
}
