package uring

import (
	"errors"
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

// TestSubmitAndWaitMin checks the minimum wait (min_wait_usec): a wait for
// more completions than arrive ends once minWait has passed and one is
// there, not before and not at the overall timeout; a wait whose count is
// met ends at once.
func TestSubmitAndWaitMin(t *testing.T) {
	for _, name := range []string{"plain", "single-issuer+defer-taskrun"} {
		t.Run(name, func(t *testing.T) {
			var cfg *Config
			if name != "plain" {
				cfg = &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true}
			}
			r := newRing(t, cfg)
			if !r.HasMinWait() {
				if _, err := r.SubmitAndWaitMin(2, time.Millisecond, 0); !errors.Is(err, ErrNotSupported) {
					t.Fatalf("SubmitAndWaitMin without IORING_FEAT_MIN_TIMEOUT: %v, want ErrNotSupported", err)
				}
				if kver.AtLeast(kver.Release(), "6.12") {
					t.Fatal("kernel 6.12 or later without IORING_FEAT_MIN_TIMEOUT")
				}
				t.Skip("kernel lacks IORING_FEAT_MIN_TIMEOUT (6.12)")
			}
			var c [8]CQE
			// The count is met: no waiting at all.
			sqe(t, r).PrepNop(1)
			sqe(t, r).PrepNop(2)
			start := time.Now()
			if _, err := r.SubmitAndWaitMin(2, 200*time.Millisecond, 0); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("a wait for 2 completions with 2 ready took %v", d)
			}
			if n := r.PeekCQEs(c[:]); n != 2 {
				t.Fatalf("%d completions, want 2", n)
			}
			// One completion 5 ms in (a poll on a pipe another goroutine
			// writes to; a TIMEOUT would not do, its completion always
			// wakes the waiter), asked for 8 with a 50 ms minimum: back at
			// the minimum, with the one.
			const minWait = 50 * time.Millisecond
			wfd := pollPipe(t, r)
			wrote := writeAfter(wfd, 5*time.Millisecond)
			start = time.Now()
			_, err := r.SubmitAndWaitMin(8, minWait, 2*time.Second)
			d := time.Since(start)
			if err != nil {
				t.Fatalf("SubmitAndWaitMin: %v after %v", err, d)
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			if n := r.PeekCQEs(c[:]); n != 1 || c[0].UserData != 3 || c[0].Res&unix.POLLIN == 0 {
				t.Fatalf("completions %+v, want the poll's", c[:n])
			}
			t.Logf("asked for 8, one came at 5 ms, minimum %v: back after %v", minWait, d)
			if d < minWait-time.Millisecond || d > time.Second {
				t.Errorf("back after %v, want about the minimum wait %v", d, minWait)
			}
			// Nothing comes: the overall timeout ends it.
			start = time.Now()
			if _, err := r.SubmitAndWaitMin(8, 10*time.Millisecond, 100*time.Millisecond); !errors.Is(err, unix.ETIME) {
				t.Fatalf("a wait with nothing to come: %v, want ETIME", err)
			}
			if d := time.Since(start); d < 100*time.Millisecond {
				t.Errorf("the overall timeout (100ms) ended the wait after %v", d)
			}
		})
	}
}

// TestSubmitAndWaitMinNoTimeout checks a minimum wait without an overall
// timeout (0), or with one too long for the kernel (math.MaxInt64, which it
// clamps to KTIME_MAX, its "none"): once minWait has passed with nothing
// there, the wait goes on for the first completion, as with an overall
// timeout. The kernel ends such a wait at minWait with -ETIME
// (io_cqring_min_timer_wakeup: "no general timeout ... we are done"), which
// an idle loop would take for a wake-up every minWait.
func TestSubmitAndWaitMinNoTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{
		{"plain", 0},
		{"single-issuer+defer-taskrun", 0},
		{"plain, longest timeout", math.MaxInt64},
	} {
		name, timeout := tc.name, tc.timeout
		t.Run(name, func(t *testing.T) {
			var cfg *Config
			if name == "single-issuer+defer-taskrun" {
				cfg = &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true}
			}
			r := newRing(t, cfg)
			needFeatures(t, "IORING_FEAT_MIN_TIMEOUT")
			wfd := pollPipe(t, r)
			// The pipe is written well after the 1 ms minimum: the wait
			// must still be there to see it.
			wrote := writeAfter(wfd, 100*time.Millisecond)
			_, err := r.SubmitAndWaitMin(1, time.Millisecond, timeout)
			ready := r.CQReady()
			if werr := <-wrote; werr != nil {
				t.Fatal(werr)
			}
			if err != nil || ready != 1 {
				t.Fatalf("SubmitAndWaitMin(1, 1ms, %v) = %v with %d completions ready; want nil with the poll's", timeout, err, ready)
			}
			reap(t, r, 1)
		})
	}
}

// TestSubmitAndWaitMinTimeoutBelowMinWait: an overall timeout shorter than
// minWait, or one passed already (negative, as time.Until gives it), ends
// the wait as SubmitAndWait's does. The kernel looks at the overall
// timeout only once minWait has passed, so such a wait lasted minWait: a
// loop whose next timer was due in 1 ms slept its whole batching wait.
// Found in review.
func TestSubmitAndWaitMinTimeoutBelowMinWait(t *testing.T) {
	for _, timeout := range []time.Duration{-time.Second, time.Millisecond} {
		r := newRing(t, nil)
		needFeatures(t, "IORING_FEAT_MIN_TIMEOUT")
		wfd := pollPipe(t, r)
		done := make(chan error, 1)
		go func() {
			_, err := r.SubmitAndWaitMin(1, 10*time.Minute, timeout)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, unix.ETIME) {
				t.Errorf("SubmitAndWaitMin(1, 10m, %v) = %v, want ETIME", timeout, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("SubmitAndWaitMin(1, 10m, %v) still waiting after 30 s: waits for minWait", timeout)
			unix.Write(wfd, []byte{1}) // the poll completes: the wait ends
			<-done
		}
	}
}

// pollPipe prepares on r a poll for a pipe's read end becoming readable,
// with user data 3, and returns the pipe's write end. Both ends are closed
// at cleanup.
func pollPipe(t *testing.T, r *Ring) (wfd int) {
	t.Helper()
	rfd, wfd := pipe(t)
	sqe(t, r).PrepPollAdd(rfd, unix.POLLIN, false, 3)
	return wfd
}

// writeAfter writes a byte to fd after d, from another goroutine, and
// sends the write's error on the channel it returns.
func writeAfter(fd int, d time.Duration) <-chan error {
	wrote := make(chan error, 1)
	go func() {
		time.Sleep(d)
		_, err := unix.Write(fd, []byte{1})
		wrote <- err
	}()
	return wrote
}
