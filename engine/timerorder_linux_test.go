package engine

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTimerAfterArrivedIO: a timer whose deadline passes while the loop
// is busy in a handler (here, A's OnData holding the loop past it) runs
// after the data that arrived meanwhile (B's), not ahead of it: the loop
// reaps without waiting before it runs timers that became due while it
// was not waiting. On uring and uring-napi (DEFER_TASKRUN) such data is
// posted only inside the next io_uring_enter, on the epoll backends it is
// reported by the next epoll_wait; the loop ran its due timers first, so
// a proxy's per-try or idle timeout fired for a head that was there
// (those four failed before). uring-sqpoll's SQ thread posts completions
// as they come, and the poll that ran A's handler reads the CQ again
// after it: it ran B first already. With nothing arriving ("nothing") the
// timer still runs once A's handler returns, not before its deadline.
//
// B's bytes go over a Unix socket: its write puts them in the server
// socket's queue and wakes the loop's poll of it before it returns, so they
// have arrived when A's handler lets the loop go. With SQPOLL the SQ
// thread takes them from there on its own time: A's handler waits for
// their completion in the CQ, the earliest the loop can see them.
func TestTimerAfterArrivedIO(t *testing.T) {
	const d = 50 * time.Millisecond
	for _, b := range testBackends {
		for _, arrive := range []bool{true, false} {
			name := string(b) + "/arrived"
			if !arrive {
				name = string(b) + "/nothing"
			}
			t.Run(name, func(t *testing.T) {
				var (
					order    []string // loop goroutine
					deadline int64    // the timer's, nanotime; loop goroutine
					firedAt  int64    // when the timer ran, nanotime; loop goroutine
					opens    atomic.Int64
					stalled  = make(chan struct{})
					written  = make(chan struct{})
					done     = make(chan string, 1)
				)
				finish := func() {
					if len(order) == 2 || !arrive && len(order) == 1 {
						done <- strings.Join(order, " ")
					}
				}
				h := &BaseHandlerFunc{
					open: func(c *Conn) { opens.Add(1) },
					data: func(c *Conn, buf Buffer) bool {
						switch s := string(buf.Bytes()); s {
						case "ping":
							c.Write(buf.Bytes())
						case "A":
							// The timer is due while this handler holds
							// the loop: it returns once the test has
							// written B's bytes and the deadline has
							// passed.
							l := c.Loop()
							l.AfterFunc(d, func() {
								firedAt = nanotime()
								order = append(order, "timer")
								finish()
							})
							deadline = nanotime() + int64(d)
							close(stalled)
							<-written
							if ub, ok := l.be.(*uringBackend); ok && ub.sqpoll && arrive {
								for end := time.Now().Add(20 * time.Second); ub.r.CQReady() == 0; time.Sleep(time.Millisecond) {
									if time.Now().After(end) {
										t.Error("B's completion not in the CQ after 20 s")
										break
									}
								}
							}
							for now := nanotime(); now < deadline; now = nanotime() {
								time.Sleep(time.Duration(deadline - now))
							}
						case "B":
							order = append(order, "B")
							finish()
						default:
							t.Errorf("unexpected %q", s)
						}
						return false
					},
				}
				l, path := startUnixLoop(t, b, h)
				release := sync.OnceFunc(func() { close(written) })
				t.Cleanup(release) // before runEngine's: a failed test lets A's handler go
				ca, cb := mustDial(t, "unix", path), mustDial(t, "unix", path)
				waitFor(t, "both connections open", func() bool { return opens.Load() == 2 })
				// A round trip on B: its receive is armed.
				if err := roundTrip(cb, []byte("ping")); err != nil {
					t.Fatal(err)
				}
				if _, err := ca.Write([]byte("A")); err != nil {
					t.Fatal(err)
				}
				<-stalled
				if arrive {
					if _, err := cb.Write([]byte("B")); err != nil {
						t.Fatal(err)
					}
				}
				release()
				var got string
				select {
				case got = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("the timer did not run in 20 s")
				}
				want := "B timer"
				if !arrive {
					want = "timer"
				}
				if got != want {
					t.Errorf("ran %q, want %q", got, want)
				}
				res := make(chan int64, 1)
				l.Post(func() { res <- firedAt - deadline })
				if late := <-res; late < 0 {
					t.Errorf("the timer ran %v before its deadline", time.Duration(-late))
				}
			})
		}
	}
}

// startUnixLoop runs an engine of one loop (on CPU 0) with h listening on
// a Unix socket until the end of the test; it returns the loop and the
// socket's path.
func startUnixLoop(t *testing.T, b Backend, h Handler) (*Loop, string) {
	t.Helper()
	cfg := testConfig(b)
	cfg.CPUs = []int{0}
	path := filepath.Join(t.TempDir(), "s")
	e, _ := startListening(t, cfg, h, "unix", path)
	return e.Loops()[0], path
}

// TestTimersIdleLoopWaits: an idle loop runs its timers from the waits
// that end at their deadlines, one wait each: a wait that returned at or
// after a timer's deadline has reaped what arrived before it, so the loop
// does not reap again before running the timer (TestTimerAfterArrivedIO's
// extra reap is only for timers that became due while it was not
// waiting), and it does not spin.
func TestTimersIdleLoopWaits(t *testing.T) {
	const n = 20
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			l, _ := startUnixLoop(t, b, &echoHandler{})
			waits := func() uint64 { s := l.Stats(); return s.Waits - s.Interrupted }
			res := make(chan uint64, 1)
			var w0 uint64
			fired := 0
			var tick func()
			tick = func() {
				fired++
				switch fired {
				case 1:
					w0 = waits()
				case n + 1:
					res <- waits() - w0
					return
				}
				l.AfterFunc(5*time.Millisecond, tick)
			}
			l.Post(func() { l.AfterFunc(5*time.Millisecond, tick) })
			got := <-res
			t.Logf("%d waits for %d timers", got, n)
			if got > n+n/4 {
				t.Errorf("%d waits for %d timers on an idle loop, want about one each", got, n)
			}
		})
	}
}

// TestTimerHeapDueAfter: dueAfter finds a due timer with its deadline after
// the last wait's return wherever it is in the heap, also behind due timers
// the wait covered, and none that is not due.
func TestTimerHeapDueAfter(t *testing.T) {
	tests := []struct {
		whens      []int64
		since, now int64
		want       bool
	}{
		{nil, 10, 20, false},
		{[]int64{30, 40}, 10, 20, false},   // none due
		{[]int64{5, 8, 30}, 10, 20, false}, // due, all covered by the wait
		{[]int64{15, 30}, 10, 20, true},
		{[]int64{20}, 10, 20, true},
		{[]int64{10}, 10, 20, false},                             // due at the wait's return: covered
		{[]int64{1, 2, 3, 4, 5, 6, 7, 30, 31, 19}, 10, 20, true}, // a leaf
		{[]int64{1, 2, 3, 4, 5, 6, 7, 30, 31, 21}, 10, 20, false},
	}
	for _, tt := range tests {
		var h timerHeap
		for _, w := range tt.whens {
			h.add(w, func() {})
		}
		if got := h.dueAfter(tt.since, tt.now); got != tt.want {
			t.Errorf("timers at %v: dueAfter(%d, %d) = %v, want %v", tt.whens, tt.since, tt.now, got, tt.want)
		}
	}
}

// TestTimerAfterManyArrivedIO is TestTimerAfterArrivedIO with the data of
// many connections arriving while A's handler holds the loop past the
// timer's deadline: every one of them arrived before the timer came due
// for the loop, so every OnData comes before the timer (AfterFunc's
// contract). The reap before the timer took one enter's worth on uring:
// an io_uring_enter waiting for no completion runs at most 20 items of
// DEFER_TASKRUN's task work (IO_LOCAL_TW_DEFAULT_MAX; 20 of 40 arrived
// before the timer on uring and uring-napi), and one epoll_wait's on epoll
// (256 events): hence 300 connections.
func TestTimerAfterManyArrivedIO(t *testing.T) {
	const d = 50 * time.Millisecond
	const nb = 300
	for _, b := range testBackends {
		if b == BackendURingSQPoll {
			continue // the SQ thread posts as they come: covered by TestTimerAfterArrivedIO
		}
		t.Run(string(b), func(t *testing.T) {
			var (
				bs       int // B's delivered before the timer; loop goroutine
				fired    bool
				deadline int64
				opens    atomic.Int64
				stalled  = make(chan struct{})
				written  = make(chan struct{})
				done     = make(chan int, 1)
			)
			h := &BaseHandlerFunc{
				open: func(c *Conn) { opens.Add(1) },
				data: func(c *Conn, buf Buffer) bool {
					switch s := string(buf.Bytes()); s {
					case "ping":
						c.Write(buf.Bytes())
					case "A":
						l := c.Loop()
						l.AfterFunc(d, func() {
							fired = true
							done <- bs
						})
						deadline = nanotime() + int64(d)
						close(stalled)
						<-written
						for now := nanotime(); now < deadline; now = nanotime() {
							time.Sleep(time.Duration(deadline - now))
						}
					case "B":
						if !fired {
							bs++
						}
					}
					return false
				},
			}
			_, path := startUnixLoop(t, b, h)
			release := sync.OnceFunc(func() { close(written) })
			t.Cleanup(release)
			ca := mustDial(t, "unix", path)
			cbs := make([]net.Conn, nb)
			for i := range cbs {
				cbs[i] = mustDial(t, "unix", path)
			}
			waitFor(t, "connections open", func() bool { return opens.Load() == nb+1 })
			for _, cb := range cbs {
				if err := roundTrip(cb, []byte("ping")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ca.Write([]byte("A")); err != nil {
				t.Fatal(err)
			}
			<-stalled
			for _, cb := range cbs {
				if _, err := cb.Write([]byte("B")); err != nil {
					t.Fatal(err)
				}
			}
			release()
			select {
			case got := <-done:
				if got != nb {
					t.Errorf("the timer ran after %d of the %d connections' data that had arrived before it came due, want all", got, nb)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the timer did not run in 20 s")
			}
		})
	}
}
