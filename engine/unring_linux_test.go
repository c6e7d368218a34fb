package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unringHandler takes every buffer it receives off the receive ring
// (Buffer.Unring) and keeps it, answering each with its length (4 bytes,
// little-endian) so that the peer knows the buffers' bounds; at the peer's
// FIN it sends back what it kept (WriteBufferFrom from off(n) of each
// buffer of n bytes), or releases it all (release), then closes.
type unringHandler struct {
	BaseHandler
	copies   bool // Unring is to copy: a uring backend with MaxQueuedReadBuffers on
	slabFull bool // Unring runs with the send slab out of chunks and unable to grow
	release  bool
	off      func(n int) int
	kept     atomic.Int64 // buffers kept now
	bad      atomic.Value // the first thing that went wrong
}

func (h *unringHandler) fail(format string, args ...any) {
	h.bad.CompareAndSwap(nil, fmt.Sprintf(format, args...))
}

func (h *unringHandler) OnOpen(c *Conn) { c.SetContext(&[]Buffer{}) }

func (h *unringHandler) OnData(c *Conn, b Buffer) bool {
	l := c.Loop()
	want := bytes.Clone(b.Bytes())
	copies := l.Stats().RingCopies
	var u, v Buffer // v: a second Unring, of u
	unring := func() { u = b.Unring(); v = u.Unring() }
	if h.slabFull {
		withSlabFull(l, 0, unring)
	} else {
		unring()
	}
	if !bytes.Equal(u.Bytes(), want) || u.Len() != len(want) {
		h.fail("Unring of %d bytes gave %d bytes that differ", len(want), u.Len())
	}
	n := l.Stats().RingCopies - copies
	switch {
	case h.copies && (n != 1 || u.id >= 0):
		h.fail("Unring made %d copies, buffer id %d; want one, a send-slab chunk", n, u.id)
	case !h.copies && (n != 0 || u != b):
		h.fail("Unring made %d copies, buffer id %d from %d; want it returned as it is", n, u.id, b.id)
	}
	if u != b {
		// b went back to the ring: a handler that goes on using it
		// releases another receive's buffer.
		if p := panicOf(b.Release); p != "engine: Buffer released twice or not owned" {
			h.fail("the receive buffer released after its Unring: panic %q", p)
		}
	}
	if v != u {
		h.fail("a second Unring gave buffer id %d from %d", v.id, u.id)
	}
	kept := c.Context().(*[]Buffer)
	*kept = append(*kept, u)
	h.kept.Add(1)
	c.Write(binary.LittleEndian.AppendUint32(nil, uint32(u.Len())))
	return true
}

func (h *unringHandler) OnEOF(c *Conn) {
	kept := c.Context().(*[]Buffer)
	for _, u := range *kept {
		h.kept.Add(-1)
		if h.release {
			u.Release()
			if p := panicOf(u.Release); p != "engine: Buffer released twice or not owned" {
				h.fail("a second Release after Unring: panic %q", p)
			}
		} else if err := c.WriteBufferFrom(u, h.off(u.Len())); err != nil {
			h.fail("WriteBufferFrom: %v", err)
		}
	}
	*kept = nil
	c.Close()
}

// withSlabFull runs f with l's send slab down to keep free chunks (at
// most) and unable to grow, as when mapping another region fails, then
// gives the chunks back. Loop goroutine.
func withSlabFull(l *Loop, keep int, f func()) {
	s := &l.chunks
	keep = min(keep, len(s.free))
	held, mapf := slices.Clone(s.free[:len(s.free)-keep]), s.mapf
	s.free = slices.Clone(s.free[len(s.free)-keep:])
	s.mapf = func(int, bool) ([]byte, string, error) { return nil, "", unix.ENOMEM }
	defer func() { s.free, s.mapf = append(held, s.free...), mapf }()
	f()
}

// panicOf calls f and returns what it panicked with ("" if it did not).
func panicOf(f func()) (p string) {
	defer func() {
		if r := recover(); r != nil {
			p = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestUnring: a handler that keeps every buffer it receives, each taken
// off the receive ring with Buffer.Unring, goes on receiving well past the
// ring's 8 buffers, and once it holds them all the ring has every buffer
// back (uring); the bytes are those received, 1 byte to a full buffer, a
// second Unring copies nothing again, the receive buffer given back
// cannot be released again, and what it sends back with WriteBuffer, or
// WriteBufferFrom an offset, is what the peer sent. Released instead, each
// copy goes back to the send slab and a second Release panics. Where
// Unring has nothing to do (the epoll backends, whose buffers are the
// slab's; MaxQueuedReadBuffers -1; a send slab that cannot grow) it
// returns the buffer as it is, and the handler keeps fewer buffers than
// the ring has. Every receive buffer and send-slab chunk is back at the
// end, and none is owned.
func TestUnring(t *testing.T) {
	const size, ring = 4 << 10, 8
	for _, be := range testBackends {
		for _, tc := range []struct {
			name        string
			msgs        int
			maxQueued   int
			slabFull    bool
			release     bool
			off         func(n int) int
			ringRefills bool // the handler keeps more buffers than the ring has
		}{
			{name: "WriteBuffer", msgs: 5 * ring, ringRefills: true},
			{name: "WriteBufferFrom", msgs: 5 * ring, off: func(n int) int { return n / 2 }, ringRefills: true},
			{name: "Release", msgs: 5 * ring, release: true, ringRefills: true},
			{name: "slab-full", msgs: ring - 2, slabFull: true},
			{name: "MaxQueuedReadBuffers-1", msgs: ring - 2, maxQueued: -1},
		} {
			t.Run(string(be)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(be)
				cfg.CPUs = []int{0}
				cfg.ReadBuffers, cfg.ReadBufferSize = ring, size
				if tc.maxQueued != 0 {
					cfg.MaxQueuedReadBuffers = tc.maxQueued
				}
				off := tc.off
				if off == nil {
					off = func(int) int { return 0 }
				}
				h := &unringHandler{
					copies:   be.isURing() && tc.maxQueued == 0 && !tc.slabFull,
					slabFull: tc.slabFull,
					release:  tc.release,
					off:      off,
				}
				e, addr := startEngine(t, cfg, h)
				c := mustDial(t, "tcp", addr)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
				var sent []byte
				var lens []int // of the buffers the handler received
				for i := range tc.msgs {
					n := 1 + rng.IntN(size)
					switch i {
					case 0:
						n = 1
					case 1:
						n = size
					}
					msg := make([]byte, n)
					for j := range msg {
						msg[j] = byte(rng.Uint32())
					}
					if _, err := c.Write(msg); err != nil {
						t.Fatal(err)
					}
					sent = append(sent, msg...)
					for got := 0; got < n; {
						var ack [4]byte
						if _, err := io.ReadFull(c, ack[:]); err != nil {
							t.Fatalf("message %d of %d (%d bytes), %d bytes of it acknowledged, %d buffers kept: %v", i, tc.msgs, n, got, h.kept.Load(), err)
						}
						k := int(binary.LittleEndian.Uint32(ack[:]))
						lens = append(lens, k)
						got += k
					}
				}
				if k := h.kept.Load(); k != int64(len(lens)) {
					t.Errorf("the handler keeps %d buffers, want %d", k, len(lens))
				}
				if tc.ringRefills && h.copies {
					if len(lens) <= ring {
						t.Errorf("%d buffers kept, want more than the ring's %d", len(lens), ring)
					}
					if msg := ringFree(e); msg != "" {
						t.Errorf("with every buffer kept off the ring: %s", msg)
					}
				}
				if err := c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
				back, err := io.ReadAll(c)
				if err != nil {
					t.Fatal(err)
				}
				var want []byte
				if !tc.release {
					at := 0
					for _, k := range lens {
						want = append(want, sent[at+off(k):at+k]...)
						at += k
					}
				}
				if !bytes.Equal(back, want) {
					t.Errorf("got back %d bytes, want %d (%d buffers), and they differ", len(back), len(want), len(lens))
				}
				if bad := h.bad.Load(); bad != nil {
					t.Error(bad)
				}
				waitFor(t, "the connection to close", func() bool { return e.Stats().Open == 0 })
				checkBuffersBack(t, e)
				checkNoneOwned(t, e)
			})
		}
	}
}
