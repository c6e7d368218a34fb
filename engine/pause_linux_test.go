package engine

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// pauseCycleHandler pauses and resumes each connection's reading n times
// when it opens, recording the epoll_ctl calls that cost, then echoes what
// it receives behind a one-byte prefix written separately (two queued
// segments per message).
type pauseCycleHandler struct {
	BaseHandler
	n    int
	ctls chan uint64
}

func (h *pauseCycleHandler) OnOpen(c *Conn) {
	b := c.Loop().be.(*epollBackend)
	before := b.ctls
	for range h.n {
		c.PauseRead()
		c.ResumeRead()
	}
	h.ctls <- b.ctls - before
}

func (h *pauseCycleHandler) OnData(c *Conn, b Buffer) bool {
	c.Write([]byte{'>'})
	c.WriteBuffer(b)
	return true
}

// TestEpollLazyPause: a pause undone before the peer sends anything costs
// the epoll backend no epoll_ctl (it cost two: EPOLL_CTL_MOD out and back),
// and a message queued as two segments goes out in one writev.
func TestEpollLazyPause(t *testing.T) {
	for _, be := range []Backend{BackendEpoll, BackendEpollBusyPoll} {
		t.Run(string(be), func(t *testing.T) {
			if be == BackendEpollBusyPoll {
				if err := sys.EpollBusyPollUsable(); err != nil {
					t.Skipf("epoll busy-poll parameters (EPIOCSPARAMS, Linux 6.9): %v", err)
				}
			}
			h := &pauseCycleHandler{n: 100, ctls: make(chan uint64, 1)}
			e, addr := startEngine(t, testConfig(be), h)
			c := mustDial(t, "tcp", addr)
			if n := <-h.ctls; n != 0 {
				t.Errorf("%d pause/resume cycles made %d epoll_ctl calls, want 0", h.n, n)
			}
			w0 := e.Stats().Writes
			const msgs = 50
			buf := make([]byte, 6)
			for i := range msgs {
				if _, err := c.Write([]byte("hello")); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					t.Fatal(err)
				}
				if string(buf) != ">hello" {
					t.Fatalf("message %d: got %q", i, buf)
				}
			}
			// The loop counts a write after the client may have read it.
			settle(t, e)
			if w := e.Stats().Writes - w0; w != msgs {
				t.Errorf("%d two-segment replies took %d writes, want one each", msgs, w)
			}
		})
	}
}

// hangUpHandler keeps its connections paused and half-closed.
type hangUpHandler struct {
	BaseHandler
	open chan *Conn
}

func (h *hangUpHandler) OnOpen(c *Conn) {
	c.PauseRead()
	c.CloseWrite()
	h.open <- c
}

// TestEpollPausedHangUp: a paused connection whose peer sends and then
// hangs up (so that epoll reports EPOLLIN and EPOLLHUP, level-triggered,
// whatever the interest) does not make the loop spin in epoll_wait while it
// stays paused.
func TestEpollPausedHangUp(t *testing.T) {
	h := &hangUpHandler{open: make(chan *Conn, 1)}
	cfg := testConfig(BackendEpoll)
	cfg.CPUs = []int{0}
	e, addr := startEngine(t, cfg, h)
	c := mustDial(t, "tcp", addr)
	sc := <-h.open
	// The handler never closes it: Shutdown would wait for it.
	defer sc.Loop().Post(func() { sc.Close() })
	if _, err := c.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The data and the FIN after it have reached the server's socket: it
	// reports the peer's shutdown (poll does not consume anything, and
	// the loop's epoll sees the same).
	fd := make(chan int, 1)
	sc.Loop().Post(func() { fd <- sc.Fd() })
	fds := []unix.PollFd{{Fd: int32(<-fd), Events: unix.POLLRDHUP}}
	_, err := unix.Poll(fds, 5000)
	for err == unix.EINTR {
		_, err = unix.Poll(fds, 5000)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fds[0].Revents&unix.POLLRDHUP == 0 {
		t.Fatalf("the server's socket reports %#x, not the peer's FIN (POLLRDHUP), after 5 s", fds[0].Revents)
	}
	w0 := e.Stats().Waits
	time.Sleep(300 * time.Millisecond)
	if w := e.Stats().Waits - w0; w > 50 {
		t.Errorf("the loop waited %d times in 300ms with one paused, hung-up connection: spinning", w)
	}
}

// postEchoHandler echoes each message from a posted function (a later
// loop iteration); with pause set it pauses the connection's reading until
// then, as an HTTP proxy pauses a client while its response is
// outstanding.
type postEchoHandler struct {
	BaseHandler
	pause bool
}

func (h *postEchoHandler) OnData(c *Conn, b Buffer) bool {
	if h.pause {
		c.PauseRead()
	}
	c.Loop().Post(func() {
		c.WriteBuffer(b)
		if h.pause {
			c.ResumeRead()
		}
	})
	return true
}

// TestLazyPauseCostsNothing: pausing and resuming a connection's reading
// around each message, with nothing arriving while paused, adds no
// submission per message (uring cancelled its multishot receive and armed
// a new one: two more SQEs per message; epoll made two epoll_ctl calls,
// TestEpollLazyPause). The SQEs are counted against the same echo without
// the pause.
func TestLazyPauseCostsNothing(t *testing.T) {
	for _, be := range []Backend{BackendURing, BackendURingNAPI} {
		t.Run(string(be), func(t *testing.T) {
			const msgs = 50
			var sqes [2]uint64
			for i, pause := range []bool{false, true} {
				e, addr := startEngine(t, testConfig(be), &postEchoHandler{pause: pause})
				c := mustDial(t, "tcp", addr)
				buf := make([]byte, 5)
				var s0 uint64
				for k := range msgs + 1 {
					if k == 1 {
						s0 = e.Stats().SQEs
					}
					if _, err := c.Write([]byte("hello")); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						t.Fatal(err)
					}
				}
				sqes[i] = e.Stats().SQEs - s0
			}
			// A recv re-armed at times (ENOBUFS, a receive limit
			// reached) is allowed for.
			if extra := int64(sqes[1]) - int64(sqes[0]); extra > msgs/10 {
				t.Errorf("%d messages took %d SQEs paused and resumed, %d without: %.2f more each", msgs, sqes[1], sqes[0], float64(extra)/msgs)
			}
		})
	}
}

// pausedForever pauses every connection's reading as it opens, saying so
// on paused, and records how each one ends.
type pausedForever struct {
	BaseHandler
	paused chan struct{}
	closed chan error
}

func (h *pausedForever) OnOpen(c *Conn) {
	c.PauseRead()
	h.paused <- struct{}{}
}

func (h *pausedForever) OnClose(c *Conn, err error) { h.closed <- err }

// TestPausedSeesReset: a connection whose reading is paused learns that its
// peer reset it (the armed receive or the epoll interest stays while
// nothing arrives), and ends with the error, instead of holding its slot
// until it resumes.
func TestPausedSeesReset(t *testing.T) {
	for _, be := range testBackends {
		t.Run(string(be), func(t *testing.T) {
			h := &pausedForever{paused: make(chan struct{}, 1), closed: make(chan error, 1)}
			_, addr := startEngine(t, testConfig(be), h)
			c := mustDial(t, "tcp", addr)
			// Accepted and paused before the reset: a reset that came
			// first would end a connection never paused.
			select {
			case <-h.paused:
			case <-time.After(5 * time.Second):
				t.Fatal("the connection was not accepted in 5 s")
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			select {
			case err := <-h.closed:
				if !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("OnClose(%v), want ECONNRESET", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the paused connection did not see its peer's reset in 5 s")
			}
		})
	}
}
