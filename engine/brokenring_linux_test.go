package engine

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
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

// writeOnCloseHandler records the connections each loop opens and, in
// OnClose, writes to the others of its loop and dials, counting what was
// accepted.
type writeOnCloseHandler struct {
	BaseHandler
	mu       sync.Mutex
	byLoop   map[int][]*Conn
	closes   atomic.Int64
	accepted atomic.Int64 // Writes and Dials from OnClose that were taken
	addr     string
}

func (h *writeOnCloseHandler) OnOpen(c *Conn) {
	h.mu.Lock()
	h.byLoop[c.Loop().ID()] = append(h.byLoop[c.Loop().ID()], c)
	h.mu.Unlock()
}

func (h *writeOnCloseHandler) OnClose(c *Conn, err error) {
	defer h.closes.Add(1)
	h.mu.Lock()
	others := slices.Clone(h.byLoop[c.Loop().ID()])
	h.mu.Unlock()
	for _, o := range others {
		if _, err := o.Write(make([]byte, 64<<10)); err == nil {
			h.accepted.Add(1)
		}
	}
	if d, err := c.Loop().Dial("tcp", h.addr, 0); err == nil {
		h.accepted.Add(1)
		d.Reset()
	}
}

// TestOnCloseCannotWriteOnBrokenLoop: when a loop's ring breaks, the
// connections whose sends are in flight give their send-slab chunks back
// as the ring closes (uringBackend.close), before the kernel has let go of
// them. That is safe only because nothing can take a chunk by then: every
// connection of the loop is closing before any OnClose runs, so a Write
// from OnClose to another connection of that loop is refused, and so is a
// Dial (the loop is stopping). A peer whose send was in flight reads a
// prefix of what was written, nothing else.
func TestOnCloseCannotWriteOnBrokenLoop(t *testing.T) {
	h := &writeOnCloseHandler{byLoop: map[int][]*Conn{}}
	e := runBreakable(t, h)
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h.addr = ln.Addr().String()
	// Three connections on two loops: one loop has two.
	clients := map[netip.AddrPort]net.Conn{}
	for range 3 {
		c := mustDial(t, "tcp", h.addr)
		clients[c.LocalAddr().(*net.TCPAddr).AddrPort()] = c
	}
	waitFor(t, "the connections' OnOpen", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.byLoop[0])+len(h.byLoop[1]) == 3
	})
	var l *Loop
	var conns []*Conn
	h.mu.Lock()
	for id, cs := range h.byLoop {
		if len(cs) >= 2 {
			l, conns = e.Loops()[id], cs
		}
	}
	h.mu.Unlock()
	a := conns[0]
	payload := pattern(12, 8<<20)
	l.Post(func() { a.Write(payload) })
	// The peer reads nothing: a send stays in flight, the kernel taking
	// its chunk as the socket drains.
	waitFor(t, "a send in flight", func() bool {
		res := make(chan bool)
		l.Post(func() { res <- a.k.sends > 0 && a.Buffered() < len(payload) })
		return <-res
	})
	l.Post(func() { fillSQ(l.be.(*uringBackend)) })
	waitFor(t, "the broken loop's OnClose calls", func() bool { return h.closes.Load() == int64(len(conns)) })
	if n := h.accepted.Load(); n != 0 {
		t.Errorf("%d Writes and Dials from OnClose on the broken loop were taken, want none", n)
	}
	got, _ := readReply(clients[a.RemoteAddr()])
	if !bytes.Equal(got, payload[:len(got)]) {
		t.Errorf("the peer whose send was in flight read %d bytes that are not a prefix of what was written", len(got))
	}
}
