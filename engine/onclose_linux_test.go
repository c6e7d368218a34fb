package engine

import (
	"net"
	"sync/atomic"
	"testing"
)

// resetState is what resetHandler keeps per connection: whether one of
// its callbacks is running, and whether OnClose came inside one.
type resetState struct {
	inCallback bool
	waits      uint64 // the loop's Waits when Reset was called
}

// resetHandler resets each connection from one place (where) and records
// OnClose calls that came while a callback of the same connection was
// still running, and, for epoll, OnClose calls that came in a later loop
// iteration than the Reset.
type resetHandler struct {
	BaseHandler
	where  string // "OnOpen", "OnData", "Post" or "timer"
	nested atomic.Int64
	later  atomic.Int64
	closes atomic.Int64
}

func (h *resetHandler) reset(c *Conn) {
	st := c.Context().(*resetState)
	st.inCallback = true
	st.waits = c.Loop().Stats().Waits
	c.Reset()
	// A handler touching its state after Reset: OnClose has not run yet.
	st.inCallback = false
}

func (h *resetHandler) OnOpen(c *Conn) {
	c.SetContext(&resetState{})
	switch h.where {
	case "OnOpen":
		h.reset(c)
	case "Post":
		c.Loop().Post(func() { h.reset(c) })
	case "timer":
		c.Loop().AfterFunc(0, func() { h.reset(c) })
	}
}

func (h *resetHandler) OnData(c *Conn, b Buffer) bool {
	if h.where == "OnData" {
		h.reset(c)
	}
	return false
}

func (h *resetHandler) OnClose(c *Conn, err error) {
	st := c.Context().(*resetState)
	if st.inCallback {
		h.nested.Add(1)
	}
	if c.Loop().Stats().Waits != st.waits && !c.Loop().e.backend.isURing() {
		h.later.Add(1)
	}
	c.SetContext(nil)
	h.closes.Add(1)
}

// TestOnCloseNotNested: a Reset inside a callback called OnClose before
// Reset returned on the epoll backends (they close the socket at once),
// while on the uring backends OnClose came after the callback, once the
// kernel had let go of the socket: a handler that touched its state after
// Reset (freed by its OnClose) worked on uring and broke on epoll. On
// every backend OnClose must come after the callback that closed the
// connection has returned; on epoll in the same loop iteration.
func TestOnCloseNotNested(t *testing.T) {
	for _, b := range testBackends {
		for _, where := range []string{"OnOpen", "OnData", "Post", "timer"} {
			t.Run(string(b)+"/"+where, func(t *testing.T) {
				h := &resetHandler{where: where}
				_, addr := startEngine(t, testConfig(b), h)
				const n = 4
				for range n {
					// A Reset in OnOpen may reach the client before its
					// connect returns: the dial fails, the engine had it.
					if c, err := net.Dial("tcp", addr); err == nil {
						defer c.Close()
						c.Write([]byte("x"))
					}
				}
				waitFor(t, "OnClose of every connection", func() bool { return h.closes.Load() == n })
				if got := h.nested.Load(); got != 0 {
					t.Errorf("OnClose ran inside the callback that called Reset for %d of %d connections", got, n)
				}
				if got := h.later.Load(); got != 0 {
					t.Errorf("OnClose came in a later loop iteration than Reset for %d of %d connections", got, n)
				}
			})
		}
	}
}
