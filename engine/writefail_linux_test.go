package engine

import (
	"errors"
	"net"
	"strings"
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

// TestWriteFailureStopsReadingInOnData: a handler that pauses, closes or
// resets the connection in the OnData of what came before the reset ends
// it, with the write's error or nil (Reset, as its doc says), on every
// backend. On the uring backends the connection waited, writes refused,
// for its receive's last completion to end it (uringBackend.sendFailed):
// a receive whose last completion brings data (its limit reached,
// WriteHighWater) is armed again only while c is open and not paused, so
// one paused or closed in that OnData was never ended (a pause, until
// ResumeRead; a Close, until CloseTimeout reset it); and a Reset gave
// OnClose the SEND's error, kept for the end, where epoll gave nil.
func TestWriteFailureStopsReadingInOnData(t *testing.T) {
	for _, b := range testBackends {
		for _, tc := range []struct {
			name    string
			stop    func(c *Conn)
			wantErr bool
		}{
			{"pause", (*Conn).PauseRead, true},
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
	var c *Conn
	select {
	case c = <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("OnOpen not called")
	}
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
	if _, err := nc.Write([]byte(hk.answer)); err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).SetLinger(0)
	nc.Close()
	waitFor(t, "the reset to reach the loop's socket", func() bool {
		ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err == nil && ti.State == unix.BPF_TCP_CLOSE
	})
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
