package uring

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestTimedWaitInterrupted checks that a timed wait interrupted by signals
// over and over still ends when its timeout passes: a wait that started its
// timeout again after each EINTR would never end under a steady stream of
// signals (the Go runtime's preemption requests are one: with them the
// engine's dial timeouts once did not fire).
func TestTimedWaitInterrupted(t *testing.T) {
	needFeatures(t, configFeatures(ownerConfig)...)
	const timeout = 100 * time.Millisecond
	type outcome struct {
		err     error
		elapsed time.Duration
		eintr   uint64
	}
	done := make(chan outcome, 1)
	owner := startOwner(t, func(r *Ring) {
		start := time.Now()
		_, err := r.SubmitAndWait(1, timeout)
		done <- outcome{err: err, elapsed: time.Since(start), eintr: r.eintr.Load()}
	})
	if owner.err != nil {
		t.Fatal(owner.err)
	}
	var o outcome
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * timeout)
wait:
	for {
		select {
		case o = <-done:
			break wait
		case <-giveUp:
			// The runtime's own preemption signals would keep a broken
			// wait going: end it with a message from another ring.
			sender := newRing(t, nil)
			sqe(t, sender).PrepMsgRing(owner.fd, 0, 77, 0, 1)
			reap(t, sender, 1)
			o = <-done
			break wait
		case <-tick.C:
			unix.Tgkill(unix.Getpid(), owner.tid, unix.SIGURG)
		}
	}
	if !errors.Is(o.err, unix.ETIME) {
		t.Fatalf("timed wait ended with %v, want ETIME", o.err)
	}
	if o.eintr == 0 {
		t.Fatal("no signal interrupted the wait: the test did not exercise the retry")
	}
	if o.elapsed < timeout || o.elapsed >= 10*timeout {
		t.Errorf("a %v wait interrupted %d times ended after %v", timeout, o.eintr, o.elapsed)
	}
}

// ownerConfig is the configuration of startOwner's rings.
var ownerConfig = &Config{Entries: 4, SingleIssuer: true, DeferTaskrun: true}

// ringOwner is a ring owner started by startOwner.
type ringOwner struct {
	fd, tid int   // the ring's fd and the owner thread's id
	err     error // New's error; then body never ran
}

// startOwner starts a goroutine locked to its thread that creates a
// SINGLE_ISSUER|DEFER_TASKRUN ring, runs body with it and closes it. It
// returns once the ring exists. The test's cleanup waits for the ring's
// Close: unmapping its rings while a later test runs would upset that
// test's count of live mappings.
func startOwner(t *testing.T, body func(r *Ring)) ringOwner {
	ready := make(chan ringOwner, 1)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := New(ownerConfig)
		if err != nil {
			ready <- ringOwner{err: err}
			return
		}
		defer r.Close()
		ready <- ringOwner{fd: r.Fd(), tid: unix.Gettid()}
		body(r)
	}()
	t.Cleanup(func() {
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Error("ring owner still running 30s after the test ended")
		}
	})
	return <-ready
}

// TestMinWaitInterruptedNearTimeout: a minimum wait interrupted by a signal
// is resumed for what is left of its overall timeout, which may by then be
// shorter than minWait: the resumed wait asked the kernel for the whole
// minWait again, which it waits out before it looks at the timeout, so a
// 2.1 s wait interrupted at 1.9 s ended after about 3.9 s. Found in review.
func TestMinWaitInterruptedNearTimeout(t *testing.T) {
	needFeatures(t, append(configFeatures(ownerConfig), "IORING_FEAT_MIN_TIMEOUT")...)
	const minWait, timeout = 2 * time.Second, 2100 * time.Millisecond
	type outcome struct {
		err     error
		elapsed time.Duration
		eintr   uint64
	}
	rfd, _ := pipe(t) // the write end stays open until cleanup: the poll stays parked
	done := make(chan outcome, 1)
	owner := startOwner(t, func(r *Ring) {
		if !r.HasMinWait() {
			done <- outcome{err: ErrNotSupported}
			return
		}
		// Submitted first: the wait then has nothing to submit, and its
		// interruption is an EINTR, counted.
		r.GetSQE().PrepPollAdd(rfd, unix.POLLIN, false, 3)
		if _, err := r.Submit(); err != nil {
			done <- outcome{err: err}
			return
		}
		start := time.Now()
		_, err := r.SubmitAndWaitMin(1, minWait, timeout)
		done <- outcome{err: err, elapsed: time.Since(start), eintr: r.eintr.Load()}
	})
	if owner.err != nil {
		t.Fatal(owner.err)
	}
	time.Sleep(1900 * time.Millisecond) // the signal's time, not a synchronisation
	unix.Tgkill(unix.Getpid(), owner.tid, unix.SIGURG)
	o := <-done
	if !errors.Is(o.err, unix.ETIME) {
		t.Fatalf("minimum wait ended with %v, want ETIME", o.err)
	}
	if o.eintr == 0 {
		t.Skip("no signal interrupted the wait: the retry was not exercised")
	}
	if o.elapsed >= timeout+minWait/2 {
		t.Errorf("a %v wait (minimum %v) interrupted %d times ended after %v", timeout, minWait, o.eintr, o.elapsed)
	}
}

// TestCancelAllSQPollFull checks Close's cancel on an SQPOLL ring whose SQ
// is full. cancelAll submits to make room, which with SQPOLL waits for the
// SQ thread to take entries (IORING_ENTER_SQ_WAIT); a signal ends that wait
// early, the SQ still full and no EINTR reported, and cancelAll gave up
// after one try: Close then unmapped buffers under requests it had not
// cancelled (found in review). The test freezes the SQ thread alone
// (cgroup v1 freezer) once it has taken a poll that stays parked, fills
// the SQ, signals the owner once it sleeps in the SQ wait (its wchan),
// waits until it either gave up or waits again, and thaws the thread: the
// cancel must still be made and reach the poll. It kept the SQ thread off
// its CPU with a SCHED_FIFO shell loop pinned there instead, which took
// that CPU from CI's other lane (the engine's tests) for up to 10 s.
func TestCancelAllSQPollFull(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL")
	cg := freezerCgroup(t)
	rfd, _ := pipe(t) // the write end stays open until cleanup: the poll stays parked

	type started struct {
		r   *Ring
		tid int
		err error
	}
	ready, fill, result := make(chan started, 1), make(chan bool, 1), make(chan int32, 1)
	go sys.LockedThread(func() {
		r, err := New(&Config{Entries: 4, SQPoll: true, SQThreadIdle: time.Millisecond})
		if err != nil {
			ready <- started{err: err}
			return
		}
		defer r.Close()
		r.GetSQE().PrepPollAdd(rfd, unix.POLLIN, false, 1)
		if _, err := r.Submit(); err != nil {
			ready <- started{err: err}
			return
		}
		for r.SQReady() > 0 { // until the SQ thread has taken it: parked
			time.Sleep(time.Millisecond)
		}
		ready <- started{r: r, tid: unix.Gettid()}
		if !<-fill {
			return
		}
		for s := r.GetSQE(); s != nil; s = r.GetSQE() {
			s.PrepNop(2)
		}
		result <- r.cancelAll(time.Now().Add(closeWait))
	})
	s := <-ready
	if s.err != nil {
		t.Fatal(s.err)
	}
	told := false // the owner, told whether to go on
	defer func() {
		cg.thaw() // before the owner's Close, which needs the SQ thread
		if !told {
			fill <- false
		}
	}()
	if s.r.sqThread == 0 {
		t.Fatal("the ring's SQ thread is unknown")
	}
	cg.freeze(t, s.r.sqThread)

	wchan := fmt.Sprintf("/proc/self/task/%d/wchan", s.tid)
	inSQWait := func() bool { // the owner sleeps in the kernel's SQ wait
		b, _ := os.ReadFile(wchan)
		return string(b) == "io_sqpoll_wait_sq"
	}
	res, got := int32(0), false
	until := func(what string, cond func() bool) bool {
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			select {
			case res = <-result:
				got = true
				return false
			default:
			}
			if cond() {
				return true
			}
		}
		t.Fatalf("%s: not within 5 s", what)
		return false
	}
	base := s.r.EnterCount()
	fill <- true
	told = true
	if until("the owner sleeping in the SQ wait", func() bool { return s.r.EnterCount() > base && inSQWait() }) {
		unix.Tgkill(unix.Getpid(), s.tid, unix.SIGURG)
		// Back from the wait: it gives up (got) or waits again.
		until("the owner sleeping in the SQ wait again", func() bool { return s.r.EnterCount() > base+1 && inSQWait() })
	}
	t.Logf("io_uring_enter calls by then: %d", s.r.EnterCount()-base)
	cg.thaw()
	if !got {
		res = <-result
	}
	if res != 1 {
		t.Fatalf("cancelAll after its SQ wait was cut short: %d, want 1 (the parked poll cancelled)", res)
	}
}

// TestWaitDeadlineSaturates: a timed wait's deadline (monotonic plus the
// timeout) stops at the largest Duration rather than wrapping negative,
// which would end a wait of a very long timeout with ETIME at its first
// retry; and the kernel takes a timeout that long.
func TestWaitDeadlineSaturates(t *testing.T) {
	now := monotonic()
	for _, tc := range []struct{ t, d, want time.Duration }{
		{now, time.Second, now + time.Second},
		{now, 0, now},
		{now, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 1, 2, math.MaxInt64},
	} {
		if got := addSat(tc.t, tc.d); got != tc.want {
			t.Errorf("addSat(%v, %v) = %v, want %v", tc.t, tc.d, got, tc.want)
		}
	}
	// The longest timeout goes to the kernel as a valid timespec: a wait
	// for no completion returns at once, without error.
	r := newRing(t, nil)
	start := time.Now()
	if _, err := r.SubmitAndWait(0, math.MaxInt64); err != nil {
		t.Fatalf("a wait for nothing with the longest timeout: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a wait for nothing took %v", d)
	}
}
