package engine

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
)

// keepHandler keeps the first buffer each connection receives, breaks its
// loop's ring (runBreakable), and in OnClose reads the buffer and releases
// it.
type keepHandler struct {
	BaseHandler
	closes atomic.Int64
	bad    atomic.Value // what went wrong reading the kept buffer in OnClose
}

type kept struct {
	b    Buffer
	want []byte
}

func (h *keepHandler) OnData(c *Conn, b Buffer) bool {
	if c.Context() != nil {
		return false
	}
	c.SetContext(&kept{b, bytes.Clone(b.Bytes())})
	fillSQ(c.Loop().be.(*uringBackend))
	return true
}

func (h *keepHandler) OnClose(c *Conn, err error) {
	defer h.closes.Add(1)
	k, _ := c.Context().(*kept)
	if k == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			h.bad.Store(fmt.Sprintf("Bytes panicked: %v", r))
		}
	}()
	if !bytes.Equal(k.b.Bytes(), k.want) {
		h.bad.Store(fmt.Sprintf("the kept buffer holds %q, want %q", k.b.Bytes(), k.want))
	}
	k.b.Release()
}

// TestKeptBufferValidInOnCloseAfterRingBreaks: a uring loop whose ring
// broke closed its receive ring and then called OnClose for its
// connections, so a buffer the handler kept could not be read there
// (Bytes panicked). As on a normal close, a kept buffer must stay valid
// until OnClose returns.
func TestKeptBufferValidInOnCloseAfterRingBreaks(t *testing.T) {
	h := &keepHandler{}
	e := runBreakable(t, h)
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := mustDial(t, "tcp", ln.Addr().String())
	if _, err := c.Write([]byte("kept until OnClose")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnClose after the ring broke", func() bool { return h.closes.Load() == 1 })
	if bad := h.bad.Load(); bad != nil {
		t.Error(bad)
	}
}
