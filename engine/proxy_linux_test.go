package engine

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// l4proxy forwards bytes between an accepted connection and one it dials
// upstream, handing received buffers to the other side without copying, with
// backpressure through PauseRead/ResumeRead and half-close propagated.
type l4proxy struct {
	BaseHandler
	upstream string
	hwm      int
	closed   atomic.Int64
	paused   atomic.Int64
}

type side struct {
	peer *Conn
	eof  bool
}

func (p *l4proxy) OnOpen(c *Conn) {
	if s, ok := c.Context().(*side); ok {
		// Upstream connected: start reading the client.
		s.peer.ResumeRead()
		return
	}
	c.PauseRead()
	up, err := c.Loop().Dial("tcp", p.upstream, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	up.SetContext(&side{peer: c})
	c.SetContext(&side{peer: up})
}

func (p *l4proxy) OnData(c *Conn, b Buffer) bool {
	dst := c.Context().(*side).peer
	dst.WriteBuffer(b) // dst owns b now, even on error
	if dst.Buffered() >= p.hwm {
		c.PauseRead()
		p.paused.Add(1)
	}
	return true
}

func (p *l4proxy) OnWritable(c *Conn) {
	c.Context().(*side).peer.ResumeRead()
}

func (p *l4proxy) OnEOF(c *Conn) {
	s := c.Context().(*side)
	s.eof = true
	s.peer.CloseWrite()
	if ps, ok := s.peer.Context().(*side); ok && ps.eof {
		c.Close()
		s.peer.Close()
	}
}

func (p *l4proxy) OnClose(c *Conn, err error) {
	p.closed.Add(1)
	if s, ok := c.Context().(*side); ok && !s.peer.Closed() {
		s.peer.Close()
	}
}

// TestProxyForward runs an L4 proxy on the engine in front of a Go echo
// server: data crosses two engine connections in each direction by
// WriteBuffer, with a write high-water mark small enough (two receive
// buffers) to force backpressure even where receives are single-shot
// (uring-sqpoll on kernels without the 6.17 receive limit).
func TestProxyForward(t *testing.T) {
	upstream := goEchoServer(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.WriteHighWater = 32 << 10
			p := &l4proxy{upstream: upstream, hwm: cfg.WriteHighWater}
			_, addr := startEngine(t, cfg, p)
			const conns = 10
			for _, err := range concurrently(conns, func(i int) error {
				if err := echoOnce(addr, uint64(100+i), 2<<20, 256<<10, nil); err != nil {
					return fmt.Errorf("conn %d: %w", i, err)
				}
				return nil
			}) {
				t.Error(err)
			}
			waitFor(t, "both sides of every proxied connection to close", func() bool { return p.closed.Load() == 2*conns })
			if p.paused.Load() == 0 {
				t.Error("the proxy never paused a reader: backpressure untested")
			}
		})
	}
}

// splitEcho echoes each received buffer in two parts: its first off bytes
// copied by Write, the rest by WriteBufferFrom (off cycling through 0, a
// middle and the whole buffer), as an HTTP proxy sends a rewritten head
// and then the body that followed it in the same buffer.
type splitEcho struct {
	BaseHandler
	n atomic.Int64
}

func (h *splitEcho) OnData(c *Conn, b Buffer) bool {
	var off int
	switch h.n.Add(1) % 3 {
	case 1:
		off = b.Len() / 2
	case 2:
		off = b.Len()
	}
	c.Write(b.Bytes()[:off])
	if err := c.WriteBufferFrom(b, off); err != nil {
		c.Close()
	}
	return true
}

// TestWriteBufferFrom: echoing every buffer as a copied head and a
// zero-copy tail from an offset gives back exactly what was sent, over 4 MB
// in writes of many sizes; an offset outside the buffer is refused and the
// buffer still released (the engine's close checks the ring is whole).
func TestWriteBufferFrom(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &splitEcho{}
			_, addr := startEngine(t, testConfig(b), h)
			for i, wsize := range []int{1, 700, 16 << 10, 100 << 10} {
				if err := echoOnce(addr, uint64(i), 1<<20, wsize, nil); err != nil {
					t.Fatalf("writes of %d: %v", wsize, err)
				}
			}
			if h.n.Load() < 3 {
				t.Fatalf("%d buffers echoed: every offset untested", h.n.Load())
			}
		})
	}
}

// badOffset answers each buffer with WriteBufferFrom's error for an offset
// past its end, after echoing a copy of it (the call releases the buffer).
type badOffset struct {
	BaseHandler
	errs atomic.Int64
}

func (h *badOffset) OnData(c *Conn, b Buffer) bool {
	c.Write(b.Bytes())
	if c.WriteBufferFrom(b, b.Len()+1) != nil {
		h.errs.Add(1)
	}
	return true
}

// TestWriteBufferFromOffset: an offset past the buffer is an error, and
// nothing of it is queued: the echo is exactly the copy.
func TestWriteBufferFromOffset(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &badOffset{}
			_, addr := startEngine(t, testConfig(b), h)
			if err := echoOnce(addr, 1, 64<<10, 4<<10, nil); err != nil {
				t.Fatal(err)
			}
			if h.errs.Load() == 0 {
				t.Error("WriteBufferFrom past the end returned no error")
			}
		})
	}
}

// joinEcho echoes each buffer as its first byte copied with Write and the
// rest with WriteBufferFrom, recording the most segments queued after it.
type joinEcho struct {
	BaseHandler
	maxSegs atomic.Int64
}

func (h *joinEcho) OnData(c *Conn, b Buffer) bool {
	c.Write(b.Bytes()[:1])
	c.WriteBufferFrom(b, 1)
	if n := int64(len(c.wq) - int(c.wqHead)); n > h.maxSegs.Load() {
		h.maxSegs.Store(n)
	}
	return true
}

// TestWriteBufferJoinsSmall: a small WriteBufferFrom after a Write joins the
// Write's chunk (one segment, one send or write per message), a large one
// is still queued as its own buffer, without a copy.
func TestWriteBufferJoinsSmall(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, tc := range []struct {
				size     int
				wantSegs int64
			}{{100, 1}, {joinMax + 2, 2}} { // the first byte is written apart
				h := &joinEcho{}
				e, addr := startEngine(t, testConfig(b), h)
				c := mustDial(t, "tcp", addr)
				msg := bytes.Repeat([]byte{'x'}, tc.size)
				got := make([]byte, tc.size)
				const msgs = 20
				for range msgs {
					if _, err := c.Write(msg); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(c, got); err != nil {
						t.Fatal(err)
					}
				}
				if n := h.maxSegs.Load(); n != tc.wantSegs {
					t.Errorf("%d-byte messages: up to %d segments queued per message, want %d", tc.size, n, tc.wantSegs)
				}
				if tc.wantSegs > 1 {
					continue
				}
				// The loop counts a send after the client may have read it.
				settle(t, e)
				if w := e.Stats().Writes; w != msgs {
					t.Errorf("%d-byte messages: %d sends for %d messages, want one each", tc.size, w, msgs)
				}
			}
		})
	}
}
