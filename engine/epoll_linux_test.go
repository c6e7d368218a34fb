package engine

import (
	"io"
	"testing"
	"time"
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
				if err := epollBusyPollUsable(); err != nil {
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
			w := e.Stats().Writes - w0
			for deadline := time.Now().Add(time.Second); w < msgs && time.Now().Before(deadline); w = e.Stats().Writes - w0 {
				time.Sleep(time.Millisecond)
			}
			if w != msgs {
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
	time.Sleep(50 * time.Millisecond) // the FIN and data arrive
	w0 := e.Stats().Waits
	time.Sleep(300 * time.Millisecond)
	if w := e.Stats().Waits - w0; w > 50 {
		t.Errorf("the loop waited %d times in 300ms with one paused, hung-up connection: spinning", w)
	}
}
