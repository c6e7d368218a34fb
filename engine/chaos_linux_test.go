package engine

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// chaosHandler does random things to its connections from every callback,
// timers and posted functions, and records what breaks the API's promises:
// a callback off the loop thread, a callback after OnClose, OnClose twice.
type chaosHandler struct {
	seed   uint64
	mu     sync.Mutex
	bad    []string
	opens  atomic.Int64
	closes atomic.Int64
	failed atomic.Int64 // dials closed before OnOpen
	seq    atomic.Uint64
	addr   atomic.Pointer[string] // dialed by the handler itself
}

type chaosConn struct {
	rng    *rand.Rand
	closed bool
	wrote  bool // CloseWrite called
}

func (h *chaosHandler) fail(format string, args ...any) {
	h.mu.Lock()
	if len(h.bad) < 20 {
		h.bad = append(h.bad, fmt.Sprintf(format, args...))
	}
	h.mu.Unlock()
}

func (h *chaosHandler) check(c *Conn, cb string) *chaosConn {
	if tid := unix.Gettid(); tid != c.Loop().ThreadID() {
		h.fail("%s on thread %d, loop thread %d", cb, tid, c.Loop().ThreadID())
	}
	s, _ := c.Context().(*chaosConn)
	if s == nil {
		h.fail("%s before OnOpen", cb)
		return &chaosConn{rng: rand.New(rand.NewPCG(1, 2)), closed: true}
	}
	if s.closed {
		h.fail("%s after OnClose", cb)
	}
	return s
}

func (h *chaosHandler) OnOpen(c *Conn) {
	h.opens.Add(1)
	if c.Context() != nil {
		h.fail("OnOpen twice")
	}
	s := &chaosConn{rng: rand.New(rand.NewPCG(h.seed, h.seq.Add(1)))}
	c.SetContext(s)
	h.check(c, "OnOpen")
	if c.Listener() == nil {
		// Dialed by act: say something, then end one way or another.
		c.Write(pattern(s.rng.Uint64(), 1+s.rng.IntN(64<<10)))
		later(s, c, func() {
			if !c.Closed() {
				h.act(c, s)
				c.CloseWrite()
			}
		})
	}
}

// later runs f on c's loop after a random short time, from a timer or a
// posted function.
func later(s *chaosConn, c *Conn, f func()) {
	if s.rng.IntN(2) == 0 {
		c.Loop().AfterFunc(time.Duration(s.rng.IntN(3000))*time.Microsecond, f)
	} else {
		c.Loop().Post(f)
	}
}

func (h *chaosHandler) act(c *Conn, s *chaosConn) {
	switch r := s.rng.IntN(100); {
	case r < 4:
		c.Close()
	case r < 7:
		c.CloseLinger(time.Duration(s.rng.IntN(20))*time.Millisecond, s.rng.IntN(64<<10))
	case r < 9:
		c.Reset()
	case r < 12:
		c.CloseWrite()
		s.wrote = true
		if _, err := c.Write([]byte("x")); err == nil {
			h.fail("Write after CloseWrite succeeded")
		}
	case r < 15:
		later(s, c, func() {
			if !c.Closed() {
				c.Close()
			}
		})
	case r < 30:
		c.PauseRead()
		later(s, c, func() { c.ResumeRead() })
	case r < 33:
		// A dial to the engine's own listener, its timeout racing the
		// connect at times.
		timeouts := []time.Duration{0, time.Nanosecond, time.Microsecond, time.Millisecond}
		if addr := h.addr.Load(); addr != nil && c.Listener() != nil {
			d, err := c.Loop().Dial("tcp", *addr, timeouts[s.rng.IntN(len(timeouts))])
			if err == nil && s.rng.IntN(4) == 0 {
				d.Close() // before it connects
			}
		}
	}
}

func (h *chaosHandler) OnData(c *Conn, b Buffer) bool {
	s := h.check(c, "OnData")
	if b.Len() <= 0 || len(b.Bytes()) != b.Len() {
		h.fail("OnData with %d bytes", b.Len())
	}
	keep := false
	switch r := s.rng.IntN(10); {
	case r < 4:
		c.Write(b.Bytes())
	case r < 7:
		c.WriteBuffer(b)
		keep = true
	case r < 9:
		keep = true
		later(s, c, func() {
			if s.rng.IntN(2) == 0 && !c.Closed() {
				c.WriteBuffer(b)
			} else {
				b.Release()
			}
		})
	}
	h.act(c, s)
	return keep
}

func (h *chaosHandler) OnEOF(c *Conn) {
	s := h.check(c, "OnEOF")
	switch s.rng.IntN(4) {
	case 0:
		c.Close()
	case 1:
		c.Write([]byte("bye"))
		c.Close()
	case 2:
		later(s, c, func() { c.Close() })
	case 3:
		c.CloseLinger(5*time.Millisecond, 100)
	}
}

func (h *chaosHandler) OnWritable(c *Conn) {
	s := h.check(c, "OnWritable")
	h.act(c, s)
}

func (h *chaosHandler) OnClose(c *Conn, err error) {
	h.closes.Add(1)
	if tid := unix.Gettid(); tid != c.Loop().ThreadID() {
		h.fail("OnClose on thread %d, loop thread %d", tid, c.Loop().ThreadID())
	}
	s, _ := c.Context().(*chaosConn)
	switch {
	case s == nil:
		h.failed.Add(1) // a dial that never opened
	case s.closed:
		h.fail("OnClose twice")
	}
	if s != nil {
		s.closed = true
	}
}

// chaosClient talks to addr in one of several ways: sends and reads all,
// sends without reading, resets mid-stream, half-closes early.
func chaosClient(addr string, rng *rand.Rand) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	size := 1 + rng.IntN(256<<10)
	data := pattern(rng.Uint64(), size)
	mode := rng.IntN(4)
	wrng := rand.New(rand.NewPCG(rng.Uint64(), 2))
	go func() {
		for p := data; len(p) > 0; {
			n := min(len(p), 1+wrng.IntN(32<<10))
			if _, err := c.Write(p[:n]); err != nil {
				return
			}
			p = p[n:]
		}
		if mode != 3 {
			c.(*net.TCPConn).CloseWrite()
		}
	}()
	switch mode {
	case 0, 3:
		io.Copy(io.Discard, c)
	case 1:
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	case 2:
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		c.(*net.TCPConn).SetLinger(0)
	}
}

// ringFree reports what is wrong, on each uring loop, with its receive
// buffers: all must be back in the ring and none held ("" if so).
func ringFree(e *Engine) string {
	for _, l := range e.Loops() {
		res := make(chan string)
		l.Post(func() {
			if l.ringHeld != 0 {
				res <- fmt.Sprintf("loop %d: ringHeld %d with no connection open", l.ID(), l.ringHeld)
				return
			}
			b, ok := l.be.(*uringBackend)
			if !ok {
				res <- ""
				return
			}
			b.br.Commit()
			n, err := b.br.Available()
			switch {
			case err != nil:
				res <- err.Error()
			case b.out != 0:
				res <- fmt.Sprintf("loop %d: %d receive buffers counted out with no connection open", l.ID(), b.out)
			case n != b.br.Entries():
				res <- fmt.Sprintf("loop %d: %d of %d receive buffers in the ring with no connection open", l.ID(), n, b.br.Entries())
			default:
				res <- ""
			}
		})
		if msg := <-res; msg != "" {
			return msg
		}
	}
	return ""
}

// checkBuffersBack waits until the buffers that timers and late SEND_ZC
// notifications still hold are back, then checks that every receive
// buffer and send-slab chunk is.
func checkBuffersBack(t *testing.T, e *Engine) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ringFree(e) != "" && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if msg := ringFree(e); msg != "" {
		t.Error(msg)
	}
	checkChunksFree(t, e)
}

// crampedConfig is be with a ring of buffers buffers of size bytes, a
// high-water mark of hwm, at most two receive buffers in a write queue, and
// SEND_ZC from half a buffer on uring: the conditions under which the
// engine holds, copies and runs out of buffers.
func crampedConfig(be Backend, buffers, size, hwm int) *Config {
	cfg := testConfig(be)
	cfg.ReadBuffers, cfg.ReadBufferSize, cfg.WriteHighWater = buffers, size, hwm
	cfg.MaxQueuedReadBuffers = 2
	if be == BackendURing {
		cfg.SendZCThreshold = size / 2
	}
	return cfg
}

// TestChaos has 100 clients (reading all, not reading, resetting, not
// half-closing) talk to a handler that does random things from its
// callbacks, timers and posted functions (Write, WriteBuffer, buffers kept
// and written or released later, PauseRead and ResumeRead, CloseWrite and
// a Write after it, Close, CloseLinger, Reset), on every backend with a
// small ring, a small high-water mark, write and close timeouts, and
// SEND_ZC on uring. No callback may come off the loop thread, before
// OnOpen or after OnClose, no OnClose twice, and once every connection has
// closed every receive buffer and send-slab chunk must be back.
func TestChaos(t *testing.T) {
	for _, be := range testBackends {
		t.Run(string(be), func(t *testing.T) {
			h := &chaosHandler{seed: uint64(time.Now().UnixNano())}
			t.Logf("seed %d", h.seed)
			cfg := crampedConfig(be, 64, 4096, 32<<10)
			cfg.WriteTimeout = 300 * time.Millisecond
			cfg.CloseTimeout = 500 * time.Millisecond
			e, addr := startEngine(t, cfg, h)
			h.addr.Store(&addr)
			const conns = 100
			rng := rand.New(rand.NewPCG(h.seed, 0))
			seeds := make([]uint64, conns)
			for i := range seeds {
				seeds[i] = rng.Uint64()
			}
			sem := make(chan struct{}, 50)
			concurrently(conns, func(i int) error {
				sem <- struct{}{}
				defer func() { <-sem }()
				chaosClient(addr, rand.New(rand.NewPCG(seeds[i], 1)))
				return nil
			})
			waitFor(t, "every connection to close", func() bool { return e.Stats().Open == 0 })
			h.mu.Lock()
			for _, b := range h.bad {
				t.Error(b)
			}
			h.mu.Unlock()
			if o, c, f := h.opens.Load(), h.closes.Load(), h.failed.Load(); o+f != c {
				t.Errorf("%d OnOpen and %d failed dials, %d OnClose", o, f, c)
			}
			checkBuffersBack(t, e)
		})
	}
}

// orderHandler echoes in order through every path the engine has for
// data: Write, WriteBuffer, buffers kept and written later from a timer or
// a posted function (a FIFO keeps the order), reading paused and resumed at
// random.
type orderHandler struct {
	BaseHandler
	seed uint64
	seq  atomic.Uint64
}

type orderConn struct {
	rng     *rand.Rand
	pending []Buffer
	armed   bool
	paused  bool
}

func (h *orderHandler) OnOpen(c *Conn) {
	c.SetContext(&orderConn{rng: rand.New(rand.NewPCG(h.seed, h.seq.Add(1)))})
}

func (h *orderHandler) flushPending(c *Conn, s *orderConn) {
	s.armed = false
	for _, b := range s.pending {
		if c.Closed() {
			b.Release()
		} else {
			c.WriteBuffer(b)
		}
	}
	s.pending = s.pending[:0]
	if s.paused {
		s.paused = false
		c.ResumeRead()
	}
}

func (h *orderHandler) OnData(c *Conn, b Buffer) bool {
	s := c.Context().(*orderConn)
	if len(s.pending) > 0 {
		s.pending = append(s.pending, b)
		return true
	}
	switch r := s.rng.IntN(10); {
	case r < 3:
		c.Write(b.Bytes())
		return false
	case r < 6:
		c.WriteBuffer(b)
		return true
	}
	s.pending = append(s.pending, b)
	if !s.armed {
		s.armed = true
		if s.rng.IntN(2) == 0 {
			s.paused = true
			c.PauseRead()
		}
		later(&chaosConn{rng: s.rng}, c, func() { h.flushPending(c, s) })
	}
	return true
}

func (h *orderHandler) OnEOF(c *Conn) {
	s := c.Context().(*orderConn)
	if len(s.pending) == 0 {
		c.Close()
		return
	}
	c.Loop().AfterFunc(5*time.Millisecond, func() { h.OnEOF(c) })
}

// TestEchoOrderUnderPauses: 20 connections echo 256 KiB each, in writes
// of varied sizes, through orderHandler on every backend with a 32-buffer
// ring, a 16 KiB high-water mark and SEND_ZC on uring: every byte must come
// back in order, and every buffer be back at the end.
func TestEchoOrderUnderPauses(t *testing.T) {
	for _, be := range testBackends {
		t.Run(string(be), func(t *testing.T) {
			h := &orderHandler{seed: uint64(time.Now().UnixNano())}
			t.Logf("seed %d", h.seed)
			cfg := crampedConfig(be, 32, 2048, 16<<10)
			e, addr := startEngine(t, cfg, h)
			const conns = 20
			for _, err := range concurrently(conns, func(i int) error {
				if err := echoOnce(addr, uint64(i), 256<<10, 1+i*997%(64<<10), nil); err != nil {
					return fmt.Errorf("conn %d: %w", i, err)
				}
				return nil
			}) {
				t.Error(err)
			}
			waitFor(t, "every connection to close", func() bool { return e.Stats().Open == 0 })
			time.Sleep(20 * time.Millisecond)
			checkBuffersBack(t, e)
		})
	}
}
