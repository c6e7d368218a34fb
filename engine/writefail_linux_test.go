package engine

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteFailureDeliversWhatCameBefore: a peer that answers while the
// connection's writes to it are blocked (it reads none of them) and then
// resets the connection, its answer and reset both received before the
// loop looks, gets its answer delivered (OnData) before the connection
// ends, on every backend, as an HTTP server's early 413 to an upload it
// stopped reading must reach the proxy.
//
// The epoll backend flushed the queue before reading the same event: the
// write met the reset and closed the connection with the answer unread
// in its socket (the proxy's client got 502 for the server's 413). The
// uring backends lost it the same way: the SEND's ECONNRESET was reaped
// before the receive's data, and the abort dropped that. The loop is held
// (Post) until the kernel has taken the reset (TCP_INFO's state), so that
// the answer and the reset come in one wait.
func TestWriteFailureDeliversWhatCameBefore(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e := peerAnswersAndResets(t, b, nil, nil)
			if e.got != resetAnswer {
				t.Errorf("the connection ended (%v) with %q delivered, want the peer's answer %q", e.err, e.got, resetAnswer)
			}
		})
	}
}

// TestWriteFailureStopsReadingInOnData: a handler that closes or resets
// the connection in the OnData of what came before the reset ends it, with
// the write's error (Close: the queue is lost) or nil (Reset, as its doc
// says), on every backend. On the uring backends the connection waited,
// writes refused, for its receive's last completion to end it: one closed
// in that OnData, its receive ended at its limit (WriteHighWater) and not
// armed again, was never ended (until CloseTimeout reset it); and a Reset
// gave OnClose the SEND's error, kept for the end, where epoll gave nil.
// (A pause there keeps the connection until ResumeRead:
// TestWriteFailurePaused.)
func TestWriteFailureStopsReadingInOnData(t *testing.T) {
	for _, b := range testBackends {
		for _, tc := range []struct {
			name    string
			stop    func(c *Conn)
			wantErr bool
		}{
			{"close", func(c *Conn) { c.Close() }, true},
			{"reset", func(c *Conn) { c.Reset() }, false},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.ReadPastHighWater = true
				// The receive's limit (6.17) ends it at its first
				// completion, with part of the answer.
				cfg.WriteHighWater = 16
				cfg.CloseTimeout = time.Minute
				e := peerAnswersAndResets(t, b, cfg, tc.stop)
				if e.got == "" || !strings.HasPrefix(resetAnswer, e.got) || (e.err != nil) != tc.wantErr || tc.wantErr && !isWriteReset(e.err) {
					want := "nil"
					if tc.wantErr {
						want = "the write's error"
					}
					t.Errorf("the connection ended (%v) with %q delivered, want a part of %q and %s", e.err, e.got, resetAnswer, want)
				}
			})
		}
	}
}

// isWriteReset reports whether err is the peer's reset, as the write (or
// SEND) that met it says it (ECONNRESET, or EPIPE where the receive took
// the socket's error first), or the receive that met it does (the order
// of a uring SEND's and receive's is the kernel's).
func isWriteReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && (oe.Op == "write" || oe.Op == "read") && (errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE))
}

// TestWriteFailurePaused: a connection whose write meets the peer's reset
// while its reading is paused, with some of the peer's answer still to
// deliver, is kept, writes refused, until its handler
// resumes reading (then it delivers what the socket holds and ends with
// the write's error) or closes it (at once: Close with the write's error,
// sending nothing; Reset with nil; CloseLinger as Close), or CloseTimeout
// after the failure if it does neither; the engine's Shutdown closing it
// gives OnClose the write's error too, not ErrClosed; a pause for
// WriteHighWater ends at the failure, since the queue will not drain. On
// every backend.
//
// Both backends ended such a connection at once, the answer lost: epoll's
// write read nothing while paused, and uring ended a SEND's failure at
// once when no receive was armed or reading was paused.
func TestWriteFailurePaused(t *testing.T) {
	const later = 100 * time.Millisecond
	for _, b := range testBackends {
		for _, tc := range []struct {
			name string
			// then runs on the loop, later after the pause.
			then     func(c *Conn)
			hwm      bool // paused by WriteHighWater, not by the handler
			cto      time.Duration
			wantErr  bool
			wantAll  bool // the whole answer delivered
			wantLate bool // ended after then, or CloseTimeout
		}{
			{name: "resume", then: (*Conn).ResumeRead, wantErr: true, wantAll: true, wantLate: true},
			{name: "close", then: func(c *Conn) { c.Close() }, wantErr: true, wantLate: true},
			{name: "linger", then: func(c *Conn) { c.CloseLinger(time.Minute, 1<<20) }, wantErr: true, wantLate: true},
			{name: "reset", then: func(c *Conn) { c.Reset() }, wantLate: true},
			{name: "never", cto: 300 * time.Millisecond, wantErr: true, wantLate: true},
			// The engine's shutdown closing it (abortAll: a ctx done
			// already, no drain): still the reset's error, not ErrClosed,
			// as after a Close or CloseTimeout; the peer went before
			// the shutdown.
			{name: "shutdown", then: func(c *Conn) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				c.l.e.Shutdown(ctx) // on the loop: closes in a goroutine
			}, wantErr: true, wantLate: true},
			{name: "hwm", hwm: true, wantErr: true, wantAll: true},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.CloseTimeout = time.Minute // the end must not wait for it
				// An answer of several buffers: the first delivery leaves
				// some to deliver after the pause, whichever of the
				// receive and the failing write the loop sees first (a
				// paused connection with nothing left ends at once:
				// TestWriteFailurePausedNothingLeft).
				cfg.ReadBufferSize = 512
				answer := resetAnswer + strings.Repeat("x", 1500)
				if tc.cto > 0 {
					cfg.CloseTimeout = tc.cto
				}
				if !tc.hwm {
					cfg.ReadPastHighWater = true
					// The receive's limit (6.17) ends it at its
					// first completion, with part of the answer.
					cfg.WriteHighWater = 16
				}
				var paused, then, closed time.Time // loop goroutine
				var writes, writesThen uint64
				var queuedThen, qmemThen int // loop goroutine
				hk := resetHooks{
					answer: answer,
					closed: func(c *Conn) {
						closed = time.Now()
						writes = c.Loop().Stats().Writes
					},
				}
				if !tc.hwm {
					hk.stop = func(c *Conn) {
						c.PauseRead()
						paused = time.Now()
						if tc.then != nil {
							c.Loop().AfterFunc(later, func() {
								then = time.Now()
								writesThen = c.Loop().Stats().Writes
								queuedThen, qmemThen = c.Buffered(), c.QueuedMemory()
								tc.then(c)
							})
						}
					}
				}
				e := peerAnswersAndResetsWith(t, b, cfg, hk)
				switch {
				case tc.wantAll && e.got != answer:
					t.Errorf("the connection ended (%v) with %d bytes delivered (%.40q...), want the peer's answer (%d bytes)", e.err, len(e.got), e.got, len(answer))
				case e.got == "" || !strings.HasPrefix(answer, e.got):
					t.Errorf("the connection ended (%v) with %d bytes delivered (%.40q...), want a part of the answer", e.err, len(e.got), e.got)
				}
				switch {
				case tc.wantErr && !isWriteReset(e.err):
					t.Errorf("OnClose(%v), want the write's error (ECONNRESET)", e.err)
				case !tc.wantErr && e.err != nil:
					t.Errorf("OnClose(%v), want nil (Reset)", e.err)
				}
				switch {
				case !tc.wantLate:
				case tc.then == nil && closed.Sub(paused) < tc.cto*9/10:
					t.Errorf("ended %v after the pause, want CloseTimeout (%v)", closed.Sub(paused), tc.cto)
				case tc.then != nil && (then.IsZero() || closed.Before(then)):
					t.Errorf("ended %v after the pause, before the handler's %s %v after it", closed.Sub(paused), tc.name, later)
				}
				if queuedThen > 0 || qmemThen > 0 {
					// Kept, c holds a queue nothing will send: its memory,
					// and a stalled queue for WriteTimeout's sweep.
					t.Errorf("%d bytes queued in %d bytes of buffers at the %s of a connection whose write met the reset, want none", queuedThen, qmemThen, tc.name)
				}
				if !then.IsZero() && writes != writesThen {
					t.Errorf("%d writes after the %s of a connection whose write met the reset, want none", writes-writesThen, tc.name)
				}
			})
		}
	}
}

// TestWriteFailurePausedNothingLeft: a connection paused by its handler
// whose write meets the peer's reset with nothing received to deliver (an
// HTTP proxy's client, paused while its response is outstanding, that
// resets in the response) ends at once with the reset's error, on every
// backend, as it did before such connections were kept (PauseRead's doc:
// kept for what the peer sent before the reset). Kept, it waited for its
// handler, which had no reason to resume it, until CloseTimeout (a
// minute here): the proxy held the client and its server connection
// (proxy's TestHTTPGaugesAfterAborts, 22 s).
func TestWriteFailurePausedNothingLeft(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.ReadPastHighWater = true
			cfg.CloseTimeout = time.Minute
			var start time.Time
			e := peerAnswersAndResetsWith(t, b, cfg, resetHooks{
				open:   (*Conn).PauseRead,
				silent: true,
				after:  func(*Conn) { start = time.Now() },
			})
			if d := time.Since(start); e.got != "" || !isWriteReset(e.err) || d > 5*time.Second {
				t.Errorf("the connection ended (%v) %v after the reset reached the loop with %q delivered, want at once with the reset's error", e.err, d, e.got)
			}
		})
	}
}

// TestWriteFailureStarved: on the uring backends, a connection whose SEND
// meets the peer's reset while its receive finds the ring empty (ENOBUFS)
// waits for a buffer, as a starved receive does, and then delivers what
// came before the reset and ends with the reset's error. Another
// connection's handler keeps the ring's buffers until the failure has been
// handled: all of them ("empty": the receive ends with ENOBUFS at the
// answer, before the SEND's failure, which ended the connection at once
// when no receive was armed), or all but one, the answer taking more than
// one ("emptied": the receive ends with ENOBUFS after the SEND's failure,
// and its last completion ended a connection waiting so, bitSendFailed,
// whatever it was). Either way the answer was lost.
func TestWriteFailureStarved(t *testing.T) {
	for _, b := range testBackends {
		for _, tc := range []struct {
			name   string
			keep   int // of the ring's buffers
			answer string
		}{
			{"empty", 2, resetAnswer},
			{"emptied", 1, resetAnswer + strings.Repeat("x", 1500)},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				if b == BackendEpoll || b == BackendEpollBusyPoll {
					t.Skip("epoll reads into the send slab, which grows: it has no receive ring to run out of")
				}
				if b == BackendURingSQPoll && testNoRecvLimit && tc.keep < 2 {
					t.Skip("SQPOLL without the receive limit receives single-shot, a buffer each: no receive empties the ring under way")
				}
				cfg := testConfig(b)
				cfg.ReadPastHighWater = true
				cfg.ReadBuffers, cfg.ReadBufferSize = 2, 512
				cfg.CPUs = []int{0} // one loop: the other connection's buffers are of its ring
				cfg.CloseTimeout = time.Minute
				var kept []Buffer // loop goroutine
				var nkept atomic.Int32
				var noBufs uint64
				release := func(c *Conn) {
					done := make(chan struct{})
					c.Loop().Post(func() {
						for _, b := range kept {
							b.Release()
						}
						kept = nil
						close(done)
					})
					<-done
				}
				noBufsOf := func(c *Conn) uint64 {
					n := make(chan uint64, 1)
					c.Loop().Post(func() { n <- c.Loop().Stats().NoBufs })
					return <-n
				}
				hk := resetHooks{
					answer: tc.answer,
					other: func(c *Conn, b Buffer) bool {
						kept = append(kept, b)
						nkept.Add(1)
						return true
					},
					before: func(addr string, c *Conn) {
						k, err := net.Dial("tcp", addr)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { k.Close() })
						t.Cleanup(func() { release(c) }) // a failure before: before the engine's Shutdown
						for i := range int32(tc.keep) {
							// One at a time: each takes a buffer of its own.
							if _, err := k.Write([]byte("K")); err != nil {
								t.Fatal(err)
							}
							waitFor(t, "the other connection's buffer to be kept", func() bool { return nkept.Load() > i })
						}
						noBufs = noBufsOf(c)
					},
					after: func(c *Conn) {
						kept := make(chan bool, 1)
						waitFor(t, "the SEND's failure to be handled", func() bool {
							c.Loop().Post(func() { kept <- c.bits&bitSendFailed != 0 && c.k.recv == 0 || c.Closed() })
							return <-kept
						})
						if noBufsOf(c) == noBufs {
							t.Errorf("no receive ran out of buffers: the test does not test it")
						}
						release(c)
					},
				}
				e := peerAnswersAndResetsWith(t, b, cfg, hk)
				if e.got != tc.answer || !isWriteReset(e.err) {
					t.Errorf("the connection ended (%v) with %d bytes delivered (%.40q...), want the peer's answer (%d bytes) and the reset's error", e.err, len(e.got), e.got, len(tc.answer))
				}
			})
		}
	}
}

const resetAnswer = "HTTP/1.1 413 Content Too Large\r\n\r\n"

type writeFailEnd struct {
	got string
	err error
}

// resetHooks is what a test adds to peerAnswersAndResets's run.
type resetHooks struct {
	// stop, if not nil, runs in the OnData of the connection's first
	// data, after the data is recorded.
	stop func(c *Conn)
	// other is OnData for the engine's other connections (those before
	// dials); nil: released.
	other func(c *Conn, b Buffer) bool
	// before, if not nil, runs once the connection's writes are blocked,
	// before the peer answers; addr is the engine's.
	before func(addr string, c *Conn)
	// after, if not nil, runs once the loop has been released with the
	// answer and the reset in the connection's socket.
	after func(c *Conn)
	// closed, if not nil, runs in the connection's OnClose.
	closed func(c *Conn)
	// answer is the peer's answer; "": resetAnswer.
	answer string
	// silent: the peer resets without an answer.
	silent bool
	// open, if not nil, runs in the connection's OnOpen, after its write.
	open func(c *Conn)
}

// peerAnswersAndResets runs an engine on backend b (with cfg, or
// testConfig's with ReadPastHighWater, as the proxy) whose connection
// writes more than the socket buffers take to a peer that reads none of
// it, answers (resetAnswer) and resets the connection, answer and reset
// both received before the loop looks. The connection's OnData calls stop
// (if not nil) after the first data. It returns what OnData got and
// OnClose's error.
func peerAnswersAndResets(t *testing.T, b Backend, cfg *Config, stop func(c *Conn)) writeFailEnd {
	t.Helper()
	return peerAnswersAndResetsWith(t, b, cfg, resetHooks{stop: stop})
}

// peerAnswersAndResetsWith is peerAnswersAndResets with hooks.
func peerAnswersAndResetsWith(t *testing.T, b Backend, cfg *Config, hk resetHooks) writeFailEnd {
	t.Helper()
	opened := make(chan *Conn, 1)
	ended := make(chan writeFailEnd, 1)
	var first *Conn // loop goroutine
	var got []byte
	stopped := false
	h := &BaseHandlerFunc{
		open: func(c *Conn) {
			if first != nil {
				return
			}
			first = c
			c.Write(make([]byte, 16<<20)) // more than the socket buffers take
			if hk.open != nil {
				hk.open(c)
			}
			opened <- c
		},
		data: func(c *Conn, b Buffer) bool {
			if c != first {
				if hk.other != nil {
					return hk.other(c, b)
				}
				return false
			}
			got = append(got, b.Bytes()...)
			if hk.stop != nil && !stopped {
				stopped = true
				hk.stop(c)
			}
			return false
		},
		closed: func(c *Conn, err error) {
			if c == first {
				if hk.closed != nil {
					hk.closed(c)
				}
				ended <- writeFailEnd{string(got), err}
			}
		},
	}
	if cfg == nil {
		cfg = testConfig(b)
		cfg.ReadPastHighWater = true // as the proxy: the full side is read
	}
	_, addr := startEngine(t, cfg, h)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := awaitConn(t, opened, "OnOpen not called")
	queued := make(chan int, 1)
	var fd int
	waitFor(t, "the connection's writes to block", func() bool {
		c.Loop().Post(func() { fd = c.Fd(); queued <- c.Buffered() })
		return <-queued > 0
	})
	if hk.before != nil {
		hk.before(addr, c)
	}
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release) // a failure before: the engine must stop
		}
	}()
	held := make(chan struct{})
	c.Loop().Post(func() { close(held); <-release })
	<-held // before the answer: the loop could end c first, its fd closed
	if hk.answer == "" {
		hk.answer = resetAnswer
	}
	if hk.silent {
		hk.answer = ""
	} else if _, err := nc.Write([]byte(hk.answer)); err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).SetLinger(0)
	nc.Close()
	waitFor(t, "the reset to reach the loop's socket", func() bool { return tcpClosed(fd) })
	close(release)
	released = true
	if hk.after != nil {
		hk.after(c)
	}
	select {
	case e := <-ended:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the reset connection did not end")
	}
	return writeFailEnd{}
}

// awaitConn returns the connection ch brings within 10 s, or fails the
// test with what.
func awaitConn(t *testing.T, ch <-chan *Conn, what string) *Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal(what)
		return nil
	}
}
