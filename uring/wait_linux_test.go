package uring

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestTimespecSlotsAcrossWrap checks Ring.Timespec's promise that a slot is
// reused only after TimespecSlots more calls, also where the call counter
// wraps: from a counter 100 calls short of 2^32 (where a ring that handed out
// one timespec a microsecond is after 72 minutes), 200 calls must give 200
// distinct slots. Counted modulo 2^32, the slot after 2^32-1 (slot 95) was
// slot 0 again, handed out 96 calls before.
func TestTimespecSlotsAcrossWrap(t *testing.T) {
	r := newRing(t, nil)
	r.tsNext = math.MaxUint32 - 99
	seen := make(map[*Timespec]int, sys.TimespecSlots)
	for i := range sys.TimespecSlots {
		ts := r.Timespec(time.Duration(i))
		if j, dup := seen[ts]; dup {
			t.Fatalf("call %d got the slot of call %d: reused after %d calls, want %d", i, j, i-j, sys.TimespecSlots)
		}
		seen[ts] = i
	}
}

// TestMinWaitClamped checks the min_wait_usec a minimum wait longer than the
// kernel's 32-bit microsecond field can hold (about 71.6 minutes) hands the
// kernel: the largest it takes, not the duration's low 32 bits (2 hours was
// 2,905,032,704 µs, 48 minutes). The NOP completes during the submit, so the
// wait ends at once; the field is read back from the EXT_ARG page before
// anything else waits.
func TestMinWaitClamped(t *testing.T) {
	r := newRing(t, nil)
	if !r.HasMinWait() {
		if kver.AtLeast(kver.Release(), "6.12") {
			t.Fatal("kernel 6.12 or later without IORING_FEAT_MIN_TIMEOUT")
		}
		t.Skip("kernel lacks IORING_FEAT_MIN_TIMEOUT (6.12)")
	}
	for _, c := range []struct {
		minWait time.Duration
		want    uint32
	}{
		{2 * time.Hour, math.MaxUint32},
		{math.MaxUint32 * time.Microsecond, math.MaxUint32},
		{1500 * time.Microsecond, 1500},
	} {
		sqe(t, r).PrepNop(1)
		if _, err := r.SubmitAndWaitMin(1, c.minWait, 3*time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := r.mem.Scratch.Wait.MinWaitUsec; got != c.want {
			t.Errorf("min wait %v: min_wait_usec %d, want %d", c.minWait, got, c.want)
		}
		reap(t, r, 1)
	}
}

// TestMinWaitResumedForWhatIsLeft: a minimum wait interrupted by a signal
// while no completion is there (the kernel's -EINTR) is resumed for what is
// left of minWait, not for the whole of it again (the kernel counts it from
// the start of each call): a 1 s minimum interrupted 300 ms in asked the
// kernel for 1 s once more, so a completion that came at 500 ms was
// returned at 1.3 s, not at 1 s, and every further signal before the first
// completion put the end off again. The min_wait_usec of the resumed call
// is read back from the EXT_ARG page.
func TestMinWaitResumedForWhatIsLeft(t *testing.T) {
	needFeatures(t, append(configFeatures(ownerConfig), "IORING_FEAT_MIN_TIMEOUT")...)
	const minWait = time.Second
	type outcome struct {
		err   error
		usec  uint32 // min_wait_usec of the last call
		eintr uint64
	}
	rfd, wfd := pipe(t)
	done := make(chan outcome, 1)
	owner := startOwner(t, func(r *Ring) {
		// Submitted first: the wait then has nothing to submit, and its
		// interruption is an EINTR, counted.
		r.GetSQE().PrepPollAdd(rfd, unix.POLLIN, false, 3)
		if _, err := r.Submit(); err != nil {
			done <- outcome{err: err}
			return
		}
		_, err := r.SubmitAndWaitMin(2, minWait, 0)
		done <- outcome{err: err, usec: r.mem.Scratch.Wait.MinWaitUsec, eintr: r.eintr.Load()}
	})
	if owner.err != nil {
		t.Fatal(owner.err)
	}
	time.Sleep(300 * time.Millisecond) // the signal's time, not a synchronisation
	unix.Tgkill(unix.Getpid(), owner.tid, unix.SIGURG)
	wrote := writeAfter(wfd, 200*time.Millisecond)
	o := <-done
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if o.err != nil {
		t.Fatalf("minimum wait: %v", o.err)
	}
	if o.eintr == 0 {
		t.Skip("no signal interrupted the wait: the retry was not exercised")
	}
	if o.usec >= uint32(minWait/time.Microsecond) {
		t.Errorf("the wait resumed after %d interruptions asked for a minimum of %d µs, the whole %v", o.eintr, o.usec, minWait)
	}
}

// TestTimedWaitWithCompletionReady: a timed wait for more completions than
// are ready ends with ETIME at its timeout, and a signal does not end it
// early, also when a completion is ready. The kernel reports both as a
// success when the CQ is not empty (io_cqring_wait: 0 then, whatever ended
// the wait), and SubmitAndWait(2) with one completion ready returned nil at
// the timeout, or at once on a signal.
func TestTimedWaitWithCompletionReady(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		r := newRing(t, nil)
		sqe(t, r).PrepNop(1)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.SubmitAndWait(2, 20*time.Millisecond); !errors.Is(err, unix.ETIME) {
			t.Errorf("SubmitAndWait(2) with one completion ready: %v, want ETIME", err)
		}
		if n := r.CQReady(); n != 1 {
			t.Errorf("%d completions ready, want 1", n)
		}
	})
	t.Run("signal", func(t *testing.T) {
		needFeatures(t, configFeatures(ownerConfig)...)
		done := make(chan error, 1)
		owner := startOwner(t, func(r *Ring) {
			r.GetSQE().PrepNop(1)
			if _, err := r.Submit(); err != nil {
				done <- err
				return
			}
			_, err := r.SubmitAndWait(2, time.Second)
			done <- err
		})
		if owner.err != nil {
			t.Fatal(owner.err)
		}
		time.Sleep(300 * time.Millisecond) // the signal's time, not a synchronisation
		unix.Tgkill(unix.Getpid(), owner.tid, unix.SIGURG)
		if err := <-done; !errors.Is(err, unix.ETIME) {
			t.Errorf("SubmitAndWait(2) with one completion ready, signalled: %v, want ETIME", err)
		}
	})
}

// TestWaitForMoreThanTheCQ waits for more completions than the CQ holds,
// which the kernel cuts to the CQ's size. Near 2^32 the kernel, whose
// io_cqring_wait takes the count as an int, read -1 and returned at once:
// the wait spun through io_uring_enter (some 50,000 calls in 50ms here)
// until its timeout, and without one until the CQ filled. It must sleep in
// one call (and the retries of signals), and end once the CQ is full.
func TestWaitForMoreThanTheCQ(t *testing.T) {
	r := newRing(t, &Config{Entries: 8, CQEntries: 16})
	for _, n := range []uint32{r.CQEntries() + 1, 1 << 31, 1<<32 - 2, 1<<32 - 1} {
		enters, signals := r.EnterCount(), r.InterruptCount()
		if _, err := r.SubmitAndWait(n, 50*time.Millisecond); !errors.Is(err, unix.ETIME) {
			t.Errorf("SubmitAndWait(%d) on an empty ring: %v, want ETIME", n, err)
		}
		if calls := r.EnterCount() - enters - (r.InterruptCount() - signals); calls > 2 {
			t.Errorf("SubmitAndWait(%d) on an empty ring: %d calls to io_uring_enter besides signals', want 1 or 2", n, calls)
		}
	}
	fillNops(t, r, int(r.CQEntries()))
	if _, err := r.SubmitAndWait(1<<32-1, 0); err != nil {
		t.Errorf("SubmitAndWait(2^32-1) on a full CQ: %v", err)
	}
}

// TestTimespecSlotUnreadNotReused holds an SQPOLL ring's SQ thread asleep
// (IORING_SQ_NEED_WAKEUP, and nothing wakes it: no Submit) while 200
// timeouts wait in the SQ, each with its timespec, which the kernel reads
// only when the thread prepares the SQE. Ring.Timespec handed out the first
// timeout's slot again, to be rewritten: woken, the thread would have armed
// that timeout for the new duration. It returns nil until the thread has
// consumed the SQE, and a slot once it has.
func TestTimespecSlotUnreadNotReused(t *testing.T) {
	r := newRing(t, &Config{Entries: 256, SQPoll: true, SQThreadIdle: 500 * time.Microsecond})
	for {
		waitFor(t, "the SQ thread to sleep", func() bool { return r.mem.SQFlags.Load()&sys.IORING_SQ_NEED_WAKEUP != 0 })
		for i := range sys.TimespecSlots {
			sqe(t, r).PrepTimeout(r.Timespec(time.Hour), 0, 0, uint64(i))
		}
		r.flush() // the tail published, the thread not woken
		if r.SQReady() == sys.TimespecSlots {
			break
		}
		// The thread took them: it had set the flag but looks at the
		// SQ once more before it sleeps. Again, once it sleeps.
		waitFor(t, "the SQ thread to consume the SQ", func() bool { return r.SQReady() == 0 })
	}
	if ts := r.Timespec(time.Nanosecond); ts != nil {
		t.Fatalf("Timespec handed out a slot (%p, the first timeout's is %p) whose SQE the SQ thread has not read", ts, &r.mem.Scratch.TS[0])
	}
	if _, err := r.Submit(); err != nil { // wakes the thread
		t.Fatal(err)
	}
	waitFor(t, "the SQ thread to consume the SQ", func() bool { return r.SQReady() == 0 })
	if r.Timespec(time.Nanosecond) == nil {
		t.Fatal("Timespec refused a slot after the SQ thread had consumed the SQ")
	}
	if n := r.CQReady(); n != 0 {
		t.Errorf("%d timeouts of an hour completed", n)
	}
}

// TestTimespecAbsolute checks what Ring.Timespec's documentation says d is:
// with TimeoutAbs, a CLOCK_MONOTONIC time as clock_gettime reads it, so one
// a millisecond ago fires at once; without, a timeout from now, so the same
// d (the time since boot) does not fire within 50ms.
func TestTimespecAbsolute(t *testing.T) {
	if b, err := os.ReadFile("/proc/self/timens_offsets"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "monotonic" && (f[1] != "0" || f[2] != "0") {
				t.Skipf("this time namespace moves CLOCK_MONOTONIC (%s): io_uring reads an absolute timeout as the host's time", strings.TrimSpace(line))
			}
		}
	}
	r := newRing(t, nil)
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		t.Fatal(os.NewSyscallError("clock_gettime", err))
	}
	passed := time.Duration(now.Nano()) - time.Millisecond

	sqe(t, r).PrepTimeout(r.Timespec(passed), 0, 0, 1)
	expectNone(t, r, 50*time.Millisecond)

	sqe(t, r).PrepTimeout(r.Timespec(passed), 0, TimeoutAbs, 2)
	if c := reap(t, r, 1)[0]; c.UserData != 2 || c.Res != -int32(unix.ETIME) {
		t.Errorf("absolute timeout a millisecond ago: %+v, want user_data 2 with -ETIME", c)
	}
}
