package engine

import (
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

// TestWriteFailureStopsReadingInOnData: a handler that pauses or closes
// in the OnData of what came before the reset ends the connection
// with the write's error, on every backend, as one that does not. On the
// uring backends the connection waited, writes refused, for its receive's
// last completion to end it (uringBackend.sendFailed): a receive whose last
// completion brings data (its limit reached, WriteHighWater) is armed again
// only while c is open and not paused, so one paused or closed in that
// OnData was never ended (a pause, until ResumeRead; a Close, until
// CloseTimeout reset it).
func TestWriteFailureStopsReadingInOnData(t *testing.T) {
	for _, b := range testBackends {
		for _, tc := range []struct {
			name string
			stop func(c *Conn)
		}{
			{"pause", (*Conn).PauseRead},
			{"close", func(c *Conn) { c.Close() }},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(b)
				// The receive's limit (6.17) ends it at its first
				// completion, with part of the answer.
				cfg.WriteHighWater = 16
				cfg.CloseTimeout = time.Minute
				e := peerAnswersAndResets(t, b, cfg, tc.stop)
				if e.got == "" || !strings.HasPrefix(resetAnswer, e.got) || e.err == nil {
					t.Errorf("the connection ended (%v) with %q delivered, want a part of %q and the write's error", e.err, e.got, resetAnswer)
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

// peerAnswersAndResets runs an engine on backend b (with cfg, or
// testConfig's) whose connection writes more than the socket buffers take
// to a peer that reads none of it, answers (resetAnswer) and resets the
// connection, answer and reset both received before the loop looks. The
// connection's OnData calls stop (if not nil) after the first data. It
// returns what OnData got and OnClose's error.
func peerAnswersAndResets(t *testing.T, b Backend, cfg *Config, stop func(c *Conn)) writeFailEnd {
	t.Helper()
	opened := make(chan *Conn, 1)
	ended := make(chan writeFailEnd, 1)
	var got []byte // loop goroutine
	h := &BaseHandlerFunc{
		open: func(c *Conn) {
			c.Write(make([]byte, 16<<20)) // more than the socket buffers take
			opened <- c
		},
		data: func(c *Conn, b Buffer) bool {
			got = append(got, b.Bytes()...)
			if stop != nil {
				stop(c)
			}
			return false
		},
		closed: func(c *Conn, err error) { ended <- writeFailEnd{string(got), err} },
	}
	if cfg == nil {
		cfg = testConfig(b)
	}
	cfg.ReadPastHighWater = true // as the proxy: the full side is read
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
	if _, err := nc.Write([]byte(resetAnswer)); err != nil {
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
	select {
	case e := <-ended:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the reset connection did not end")
	}
	return writeFailEnd{}
}
