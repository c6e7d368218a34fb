package uring

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/proctask"
	"github.com/spindlenet/spindle/internal/sys"
)

// onFreshThread runs fn on a locked thread that has no io-wq workers yet
// (none named iou-wrk-<its id>), which exits afterwards with whatever fn
// did to its io-wq. A worker started before a registration keeps its
// affinity and would take the next punted request: a thread the runtime
// used for another test's ring may have one, and is kept aside (locked,
// released at the end) while another is tried.
func onFreshThread(t *testing.T, fn func(tid int)) {
	t.Helper()
	var aside []chan struct{}
	defer func() {
		for _, c := range aside {
			close(c)
		}
	}()
	for range 8 {
		ran, release := make(chan bool, 1), make(chan struct{})
		go sys.LockedThread(func() {
			tid := unix.Gettid()
			if len(proctask.IOWorkers(tid)) > 0 {
				ran <- false
				<-release
				return
			}
			fn(tid)
			ran <- true
		})
		if <-ran {
			return
		}
		aside = append(aside, release)
	}
	t.Fatal("8 threads in a row had io-wq workers already")
}

// puntNopWait bounds puntNop's wait. The worker that runs the NOP may run
// on the one CPU the test registered alone: on a loaded host it waits its
// turn behind everything else there, and with a dozen CPU hogs on that CPU
// a probe's bound (probeWait, 1 s) passed before it ran in 5 of 40 runs of
// TestIOWQAffinitySQPoll.
const puntNopWait = 10 * time.Second

// puntNop runs a NOP forced to io-wq (FlagAsync) and waits for it.
func puntNop(r *Ring) error {
	s := r.GetSQE()
	s.PrepNop(7)
	s.SetFlags(FlagAsync)
	var c [1]CQE
	for deadline := time.Now().Add(puntNopWait); ; {
		left := time.Until(deadline)
		if _, err := r.SubmitAndWait(1, max(left, time.Nanosecond)); err != nil && !errors.Is(err, unix.ETIME) {
			return err
		}
		if r.PeekCQEs(c[:]) == 1 {
			break
		}
		if left <= 0 {
			return fmt.Errorf("no completion within %v", puntNopWait)
		}
	}
	if c := c[0]; c.UserData != 7 || c.Res != 0 {
		return fmt.Errorf("NOP completed with %+v", c)
	}
	return nil
}

// TestIOWQAffinity registers io-wq affinity to one CPU on a thread that may
// run on every allowed CPU, forces a NOP to io-wq, and checks that the
// worker that ran it (iou-wrk-<tid>) may run on that CPU alone; without the
// registration it may run on every CPU of the cpuset.
func TestIOWQAffinity(t *testing.T) {
	needFeatures(t, FeatIOWQAff)
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs to tell one from all: allowed %v", cpus)
	}
	want := cpus[len(cpus)-1]
	onFreshThread(t, func(tid int) {
		r, err := New(&Config{Entries: 4})
		if err != nil {
			t.Error(err)
			return
		}
		defer r.Close()
		if err := r.RegisterIOWQAffinity([]int{want}); err != nil {
			t.Errorf("RegisterIOWQAffinity(%d): %v", want, err)
			return
		}
		if err := puntNop(r); err != nil {
			t.Error(err)
			return
		}
		workers := proctask.IOWorkers(tid)
		if len(workers) == 0 {
			t.Errorf("no iou-wrk-%d thread after a NOP with IOSQE_ASYNC", tid)
		}
		for _, w := range workers {
			got, err := proctask.CPUsAllowed(w)
			if err != nil {
				t.Error(err)
			} else if got != strconv.Itoa(want) {
				t.Errorf("io-wq worker %d may run on CPUs %s, want %d", w, got, want)
			}
		}
		if err := r.UnregisterIOWQAffinity(); err != nil {
			t.Errorf("UnregisterIOWQAffinity: %v", err)
		}
	})
}

// TestIOWQAffinitySQPoll: on an SQPoll ring the registration is the SQ
// thread's io-wq, which runs the requests the SQ thread punts: the worker
// of a NOP forced to io-wq (iou-wrk-<SQ thread id>) may run on the CPU
// given alone, not on the whole cpuset nor only where the SQ thread is.
func TestIOWQAffinitySQPoll(t *testing.T) {
	needFeatures(t, FeatIOWQAff, "IORING_SETUP_SQPOLL", "IORING_SETUP_SQ_AFF")
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs to tell one from all: allowed %v", cpus)
	}
	sqCPU, want := cpus[0], cpus[len(cpus)-1]
	r := newRing(t, &Config{Entries: 4, SQPoll: true, SQAffinity: true, SQThreadCPU: sqCPU, SQThreadIdle: time.Millisecond})
	if r.sqThread == 0 {
		t.Fatal("no SQ thread id")
	}
	if err := r.RegisterIOWQAffinity([]int{want}); err != nil {
		t.Fatalf("RegisterIOWQAffinity(%d): %v", want, err)
	}
	if err := puntNop(r); err != nil {
		t.Fatal(err)
	}
	workers := proctask.IOWorkers(r.sqThread)
	if len(workers) == 0 {
		t.Fatalf("no iou-wrk-%d thread after a NOP with IOSQE_ASYNC", r.sqThread)
	}
	for _, w := range workers {
		if got, err := proctask.CPUsAllowed(w); err != nil {
			t.Error(err)
		} else if got != strconv.Itoa(want) {
			t.Errorf("io-wq worker %d of the SQ thread may run on CPUs %s, want %d", w, got, want)
		}
	}
}

// TestIOWQAffinityRefused checks the errors: an empty set or a CPU outside
// 0..1023 before the kernel; a CPU outside the thread's cpuset is the
// kernel's EINVAL, not a missing feature; a closed ring os.ErrClosed.
func TestIOWQAffinityRefused(t *testing.T) {
	needFeatures(t, FeatIOWQAff)
	r, err := New(&Config{Entries: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, cpus := range [][]int{nil, {-1}, {1024}} {
		if err := r.RegisterIOWQAffinity(cpus); !errors.Is(err, unix.EINVAL) {
			t.Errorf("RegisterIOWQAffinity(%v) = %v, want EINVAL", cpus, err)
		}
	}
	r.Close()
	if err := r.RegisterIOWQAffinity([]int{0}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("RegisterIOWQAffinity after Close: %v, want os.ErrClosed", err)
	}
	if err := r.UnregisterIOWQAffinity(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("UnregisterIOWQAffinity after Close: %v, want os.ErrClosed", err)
	}
	if _, _, err := r.RegisterIOWQMaxWorkers(1, 1); !errors.Is(err, os.ErrClosed) {
		t.Errorf("RegisterIOWQMaxWorkers after Close: %v, want os.ErrClosed", err)
	}

	// CPU 0 from a cpuset of another CPU: the ring's io-wq is the thread's,
	// in that cpuset. The kernel refuses it, the mask staying as it was.
	inCpuset(t, func() {
		r, err := New(&Config{Entries: 4})
		if err != nil {
			t.Error(err)
			return
		}
		defer r.Close()
		err = r.RegisterIOWQAffinity([]int{0})
		if !errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNotSupported) {
			t.Errorf("RegisterIOWQAffinity(0) outside the cpuset: %v, want EINVAL and not ErrNotSupported", err)
		}
	})
}

// TestIOWQMaxWorkers sets the limits and reads them back through the
// previous values the kernel returns, 0 leaving one unchanged.
func TestIOWQMaxWorkers(t *testing.T) {
	needFeatures(t, FeatIOWQMaxWorkers)
	onFreshThread(t, func(int) {
		r, err := New(&Config{Entries: 4})
		if err != nil {
			t.Error(err)
			return
		}
		defer r.Close()
		steps := []struct{ set, wantPrev [2]uint32 }{
			{[2]uint32{1, 2}, [2]uint32{0, 0}}, // prev: the defaults, not checked
			{[2]uint32{0, 0}, [2]uint32{1, 2}},
			{[2]uint32{3, 0}, [2]uint32{1, 2}},
			{[2]uint32{0, 0}, [2]uint32{3, 2}},
		}
		for i, s := range steps {
			b, u, err := r.RegisterIOWQMaxWorkers(s.set[0], s.set[1])
			if err != nil {
				t.Errorf("RegisterIOWQMaxWorkers(%d, %d): %v", s.set[0], s.set[1], err)
				return
			}
			if i == 0 {
				if b == 0 || u == 0 {
					t.Errorf("default limits %d, %d: want both above 0", b, u)
				}
				continue
			}
			if [2]uint32{b, u} != s.wantPrev {
				t.Errorf("RegisterIOWQMaxWorkers(%d, %d) returned %d, %d; want %v", s.set[0], s.set[1], b, u, s.wantPrev)
			}
		}
		if _, _, err := r.RegisterIOWQMaxWorkers(1<<31, 0); !errors.Is(err, unix.EINVAL) {
			t.Errorf("RegisterIOWQMaxWorkers(1<<31, 0) = %v, want EINVAL", err)
		}
	})
}
