package engine

import (
	"bytes"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// misuseHandler misuses the first buffer of each connection (how) and
// records what the misuse panicked with; then it echoes.
type misuseHandler struct {
	BaseHandler
	how    string // "Release twice", "WriteBuffer after Release", "Release after WriteBuffer", or an Unring after those (misuses)
	panics atomic.Int64
	wrong  atomic.Value // a panic that is not the one expected
}

func (h *misuseHandler) OnData(c *Conn, b Buffer) bool {
	if c.Context() != nil {
		c.Write(b.Bytes())
		return false
	}
	c.SetContext(true)
	first, second := b.Release, b.Release
	writeBuffer := func() { c.WriteBuffer(b) }
	switch h.how {
	case "WriteBuffer after Release":
		second = writeBuffer
	case "Release after WriteBuffer":
		first = writeBuffer
	case "Unring after Release":
		second = func() { b.Unring() }
	case "Unring after Unring and Release":
		first = func() { b = b.Unring(); b.Release() }
		second = func() { b.Unring() }
	case "Unring after Unring and WriteBuffer":
		first = func() { b = b.Unring(); c.WriteBuffer(b) }
		second = func() { b.Unring() }
	}
	if h.how != "Release after WriteBuffer" && h.how != "Unring after Unring and WriteBuffer" {
		c.Write(b.Bytes())
	}
	first()
	func() {
		defer func() {
			switch r := recover(); {
			case r == nil:
			case fmt.Sprint(r) == "engine: Buffer released twice or not owned":
				h.panics.Add(1)
			default:
				h.wrong.Store(fmt.Sprint(r))
			}
		}()
		second()
	}()
	return true
}

// TestBufferReleasedTwice: a Buffer released twice (or written with
// WriteBuffer after its Release, or released after WriteBuffer took it)
// put its receive buffer id back twice: two later receives shared one
// buffer's memory, each overwriting the other's data. The second must
// panic, on every backend, and leave the buffers as they were after the
// first: the echo that follows stays intact and every buffer comes back.
// So must an Unring of a buffer released or given to WriteBuffer: it
// panicked only for a receive buffer of a uring ring, and returned any
// other (one Unring copied already, every epoll one) as it was, its memory
// free for the next receive or write while the handler kept it.
func TestBufferReleasedTwice(t *testing.T) {
	for _, b := range testBackends {
		for _, how := range []string{"Release twice", "WriteBuffer after Release", "Release after WriteBuffer",
			"Unring after Release", "Unring after Unring and Release", "Unring after Unring and WriteBuffer"} {
			t.Run(string(b)+"/"+how, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				cfg.ReadBuffers = 8
				cfg.ReadBufferSize = 512
				h := &misuseHandler{how: how}
				e, addr := startEngine(t, cfg, h)
				const n = 3
				for i := range n {
					if err := echoOnce(addr, uint64(i), 64<<10, 700, nil); err != nil {
						t.Fatal(err)
					}
				}
				if w := h.wrong.Load(); w != nil {
					t.Fatalf("the misuse panicked with %q", w)
				}
				if got := h.panics.Load(); got != n {
					t.Errorf("%d of %d misused buffers panicked", got, n)
				}
				waitFor(t, "the connections to close", func() bool { return e.Stats().Open == 0 })
				checkChunksFree(t, e)
				checkNoneOwned(t, e)
			})
		}
	}
}

// checkNoneOwned checks, on each loop, that the handler owns no buffer:
// each it kept was released or given to WriteBuffer.
func checkNoneOwned(t *testing.T, e *Engine) {
	t.Helper()
	for _, l := range e.Loops() {
		res := make(chan bool)
		l.Post(func() {
			res <- slices.ContainsFunc(slices.Concat(l.owned, l.ownedCopies), func(n uint64) bool { return n&1 != 0 })
		})
		if <-res {
			t.Errorf("loop %d: buffers still owned with no connection open", l.ID())
		}
	}
}

// staleHandler releases the first buffer it receives, keeps the Buffer
// value, and releases it again once a later receive comes in the same
// buffer (its id given out again); it keeps that later buffer and checks,
// at each receive after, that its bytes are still what came in it. It
// echoes every message.
type staleHandler struct {
	BaseHandler
	stale, kept Buffer
	want        []byte
	state       int // 0: no stale buffer yet; 1: waiting for its id again; 2: released it again
	panicked    atomic.Value
	changed     atomic.Bool // the kept buffer's bytes changed under it
	done        atomic.Bool
}

func (h *staleHandler) OnData(c *Conn, b Buffer) bool {
	c.Write(b.Bytes())
	switch {
	case h.state == 0:
		h.stale = b
		b.Release()
		h.state = 1
		return true
	case h.state == 1 && b.id == h.stale.id:
		h.state = 2
		h.kept, h.want = b, bytes.Clone(b.Bytes())
		h.panicked.Store(panicOf(h.stale.Release))
		h.done.Store(true)
		return true
	case h.state == 2 && !bytes.Equal(h.kept.Bytes(), h.want):
		h.changed.Store(true)
	}
	return false
}

func (h *staleHandler) OnClose(c *Conn, err error) {
	if h.state == 2 {
		h.state = 3
		panicOf(h.kept.Release) // a second Release here, if the stale one took it
	}
}

// TestBufferReleasedTwiceAfterReuse: a Buffer released twice, the second
// time once its buffer has been given out again for a later receive (on
// epoll the next read, the slab's free list being last in, first out; on
// uring once the ring has come round), must panic as any second Release
// does. The ownership bit of the buffer id was set again by the later
// receive, so the stale Release took it: no panic, and the buffer the
// handler keeps went back to the ring or the slab, where the next receive
// wrote over it.
func TestBufferReleasedTwiceAfterReuse(t *testing.T) {
	for _, be := range testBackends {
		t.Run(string(be), func(t *testing.T) {
			cfg := testConfig(be)
			cfg.CPUs = []int{0}
			cfg.ReadBuffers = 8
			cfg.ReadBufferSize = 512
			h := &staleHandler{}
			e, addr := startEngine(t, cfg, h)
			c := mustDial(t, "tcp", addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for i := 0; i < 64 && !h.done.Load(); i++ {
				if err := roundTrip(c, []byte(fmt.Sprintf("message %d", i))); err != nil {
					t.Fatal(err)
				}
			}
			if !h.done.Load() {
				t.Fatal("no receive came in the first buffer again")
			}
			for i := 0; i < 16; i++ {
				if err := roundTrip(c, []byte(fmt.Sprintf("after %d", i))); err != nil {
					t.Fatal(err)
				}
			}
			if p := h.panicked.Load(); p != "engine: Buffer released twice or not owned" {
				t.Errorf("a Buffer released again after its id was reused: panic %q", p)
			}
			if h.changed.Load() {
				t.Errorf("the buffer kept since was written over by a later receive")
			}
			c.Close()
			waitFor(t, "the connection to close", func() bool { return e.Stats().Open == 0 })
			checkChunksFree(t, e)
			checkNoneOwned(t, e)
		})
	}
}
