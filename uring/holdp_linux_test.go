package uring

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitHoldsPStopTheWorld checks that a ring owner blocked in a raw
// io_uring_enter (Config.WaitHoldsP: it keeps its P) does not hold up a
// garbage collection: the runtime's preemption signal must end the wait with
// EINTR and the retried enter must yield in its prologue. A TIMEOUT SQE
// ends the wait after watchdog anyway, so a broken preemption path fails the
// test (the collections then take the whole watchdog) instead of hanging it;
// otherwise a MSG_RING from another ring ends the wait.
func TestWaitHoldsPStopTheWorld(t *testing.T) {
	if n := runtime.GOMAXPROCS(0); n < 2 {
		// The owner holds one P; the collector needs another.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	const watchdog = 5 * time.Second
	type outcome struct {
		cqe   CQE
		eintr uint64
		err   error
	}
	done := make(chan outcome, 1)
	owner := startHoldPOwner(func(r *Ring) {
		s := r.GetSQE()
		if s == nil {
			done <- outcome{err: errors.New("no SQE in an empty ring")}
			return
		}
		s.PrepTimeout(r.Timespec(watchdog), 0, 0, 9)
		var c [1]CQE
		for r.PeekCQEs(c[:]) == 0 {
			if _, err := r.SubmitAndWait(1, 0); err != nil {
				done <- outcome{err: err}
				return
			}
		}
		done <- outcome{cqe: c[0], eintr: r.eintr.Load()}
	})
	if owner.err != nil {
		t.Fatal(owner.err)
	}
	// Let the owner reach the kernel's wait; an earlier collection is
	// legal too, it just would not test the wait.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	runtime.GC()
	runtime.GC()
	gc := time.Since(start)
	// End the wait from outside: a message from another ring.
	sender := newRing(t, nil)
	sqe(t, sender).PrepMsgRing(owner.fd, 0, 77, 0, 1)
	reap(t, sender, 1)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.cqe.UserData == 9 || gc >= watchdog {
		t.Fatalf("two collections took %v while the owner waited holding its P: only the watchdog (%v) ended the wait", gc, watchdog)
	}
	if o.cqe.UserData != 77 {
		t.Fatalf("completion %+v, want the message (user data 77)", o.cqe)
	}
	if o.eintr == 0 {
		t.Errorf("the collections (%v) never interrupted the owner's io_uring_enter: the test did not exercise the preemption path", gc)
	}
}

// TestTimedWaitInterrupted checks that a timed wait interrupted by signals
// over and over still ends when its timeout passes: a goroutine that holds
// its P (Config.WaitHoldsP) gets the runtime's preemption signal every
// 10 ms, and a wait that started its timeout again after each one never
// ended (the engine's dial timeouts did not fire).
func TestTimedWaitInterrupted(t *testing.T) {
	const timeout = 100 * time.Millisecond
	type outcome struct {
		err     error
		elapsed time.Duration
		eintr   uint64
	}
	done := make(chan outcome, 1)
	owner := startHoldPOwner(func(r *Ring) {
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

// holdPOwner is a ring owner started by startHoldPOwner.
type holdPOwner struct {
	fd, tid int   // the ring's fd and the owner thread's id
	err     error // New's error; then body never ran
}

// startHoldPOwner starts a goroutine locked to its thread that creates a
// SINGLE_ISSUER|DEFER_TASKRUN ring with WaitHoldsP, runs body with it and
// closes it. It returns once the ring exists.
func startHoldPOwner(body func(r *Ring)) holdPOwner {
	ready := make(chan holdPOwner, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := New(&Config{Entries: 4, SingleIssuer: true, DeferTaskrun: true, WaitHoldsP: true})
		if err != nil {
			ready <- holdPOwner{err: err}
			return
		}
		defer r.Close()
		ready <- holdPOwner{fd: r.Fd(), tid: unix.Gettid()}
		body(r)
	}()
	return <-ready
}
