package uring

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	owner := startOwner(func(r *Ring) {
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
// returns once the ring exists.
func startOwner(body func(r *Ring)) ringOwner {
	ready := make(chan ringOwner, 1)
	go func() {
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
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	done := make(chan outcome, 1)
	owner := startOwner(func(r *Ring) {
		if !r.HasMinWait() {
			done <- outcome{err: ErrNotSupported}
			return
		}
		// Submitted first: the wait then has nothing to submit, and its
		// interruption is an EINTR, counted.
		r.GetSQE().PrepPollAdd(p[0], unix.POLLIN, false, 3)
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
