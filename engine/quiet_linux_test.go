package engine

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/uring"
)

// quietBackends send with MSG_DONTWAIT and wait past their sends' own
// completions (uringBackend.quiet); the others do not.
func quietBackend(b Backend) bool { return b == BackendURing || b == BackendURingNAPI }

// TestQuietSends: a request answered at once costs the uring loop one
// io_uring_enter, not two. The reply's SEND completes inside the enter
// that submits it, and that enter's wait no longer ends on it: before,
// every reply was an enter that returned at once with the SEND's
// completion and a second one to sleep (2.0 waits per request; the C
// liburing server does the same). On the other backends nothing changes.
func TestQuietSends(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, addr := startEngine(t, cfg, &echoHandler{})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			msg, got := bytes.Repeat([]byte("q"), 64), make([]byte, 64)
			pingPong := func(n int) {
				t.Helper()
				for range n {
					if _, err := nc.Write(msg); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(nc, got); err != nil {
						t.Fatal(err)
					}
				}
			}
			pingPong(20)
			s0 := e.Stats()
			const n = 400
			pingPong(n)
			s1 := e.Stats()
			waits, quiet := s1.Waits-s0.Waits, s1.QuietWaits-s0.QuietWaits
			t.Logf("%d requests: %d waits, %d quiet, %d cut", n, waits, quiet, s1.QuietCut-s0.QuietCut)
			if !quietBackend(b) {
				if quiet != 0 {
					t.Errorf("%d quiet waits on %s", quiet, b)
				}
				return
			}
			// One wait per request, and a few more for what else wakes
			// the loop (a signal, the runtime's preemption).
			if quiet < n*9/10 || waits > n*5/4 {
				t.Errorf("%d requests answered at once took %d waits, %d of them quiet: want about one quiet wait each", n, waits, quiet)
			}
		})
	}
}

// TestQuietSendAloneNoCompletion: a reply that is one segment goes as one
// quiet SEND that posts no completion when it sends all
// (FlagCQESkipSuccess), settled once the kernel has taken it and the CQ
// is drained: per request one SQE (the SEND) and one completion (the
// receive's). Before, the SEND was ended by a NOP (two SQEs) and posted
// its completion, which the loop handled (two).
func TestQuietSendAloneNoCompletion(t *testing.T) {
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, addr := startEngine(t, cfg, &echoHandler{})
			nc := mustDial(t, "tcp", addr)
			msg, got := bytes.Repeat([]byte("s"), 64), make([]byte, 64)
			pingPong := func(n int) {
				t.Helper()
				for range n {
					if _, err := nc.Write(msg); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(nc, got); err != nil {
						t.Fatal(err)
					}
				}
			}
			pingPong(20)
			s0 := e.Stats()
			const n = 400
			pingPong(n)
			s1 := e.Stats()
			skipped, sqes, cqes := s1.QuietSkipped-s0.QuietSkipped, s1.SQEs-s0.SQEs, s1.CQEs-s0.CQEs
			t.Logf("%d requests: %d settled without a completion, %d SQEs, %d CQEs, %d waits", n, skipped, sqes, cqes, s1.Waits-s0.Waits)
			// A few more for what else wakes the loop (a signal, the
			// runtime's preemption) or cuts a SEND.
			if waits := s1.Waits - s0.Waits; skipped < n*9/10 || sqes > n*5/4 || cqes > n*5/4 || waits > n*5/4 {
				t.Errorf("%d one-segment replies: %d settled without a completion, %d SQEs, %d CQEs, %d waits; want about one of each a request", n, skipped, sqes, cqes, waits)
			}
		})
	}
}

// quietCutHandler writes a pattern of total bytes, write bytes at a time
// (1000 if 0), each once the last has gone (Buffered 0), to a connection
// whose first byte is 'A', from a timer: every flush sends the whole queue,
// quiet, until the socket's buffer fills because the peer does not read.
// With sndbuf set, that connection's send buffer is that small. Any other
// connection gets an echo.
type quietCutHandler struct {
	BaseHandler
	total, write, sndbuf int
}

func (h *quietCutHandler) OnData(c *Conn, b Buffer) bool {
	p := b.Bytes()
	if c.Context() == nil && len(p) > 0 && p[0] == 'A' {
		if h.sndbuf > 0 {
			if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, h.sndbuf); err != nil {
				panic(err)
			}
		}
		c.SetContext(0)
		h.feed(c)
		return false
	}
	if c.Context() == nil {
		c.Write(p)
	}
	return false
}

func (h *quietCutHandler) feed(c *Conn) {
	if c.Closed() {
		return
	}
	off := c.Context().(int)
	if c.Buffered() == 0 && off < h.total {
		chunk := make([]byte, min(cmp.Or(h.write, 1000), h.total-off))
		for i := range chunk {
			chunk[i] = patternByte(off + i)
		}
		c.Write(chunk)
		c.SetContext(off + len(chunk))
	}
	if off < h.total {
		c.Loop().AfterFunc(50*time.Microsecond, func() { h.feed(c) })
	}
}

func patternByte(i int) byte { return byte(i%251) ^ byte(i>>16) }

// TestQuietSendsCut: a quiet SEND that finds the socket's buffer full (the
// peer stopped reading) ends with EAGAIN or short instead of waiting in the
// kernel; the rest goes again without MSG_DONTWAIT, in order, and the loop
// goes on serving its other connections meanwhile. The stream must arrive
// whole and in order once the peer reads, after at least one cut.
func TestQuietSendsCut(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			if !quietBackend(b) {
				t.Skipf("%s sends without MSG_DONTWAIT: no quiet SEND to cut", b)
			}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			const total = 8 << 20
			e, addr := startEngine(t, cfg, &quietCutHandler{total: total})
			a, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if _, err := a.Write([]byte("A")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a quiet SEND cut by a full socket buffer", func() bool { return e.Stats().QuietCut > 0 })

			// The loop serves another connection while A's peer does not read.
			bc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer bc.Close()
			bc.SetDeadline(time.Now().Add(20 * time.Second))
			got := make([]byte, 64)
			for i := range 50 {
				msg := bytes.Repeat([]byte{byte('a' + i%26)}, 64)
				if _, err := bc.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(bc, got); err != nil {
					t.Fatalf("echo %d beside the full socket: %v", i, err)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("echo %d: got %q", i, got)
				}
			}

			a.SetDeadline(time.Now().Add(60 * time.Second))
			buf := make([]byte, 64<<10)
			for off := 0; off < total; {
				n, err := a.Read(buf[:min(len(buf), total-off)])
				for i := range n {
					if buf[i] != patternByte(off+i) {
						t.Fatalf("byte %d of the stream is %#x, want %#x", off+i, buf[i], patternByte(off+i))
					}
				}
				off += n
				if err != nil {
					t.Fatal(fmt.Errorf("after %d of %d bytes: %w", off, total, err))
				}
			}
			t.Logf("stats: %+v", e.Stats())
		})
	}
}

// TestQuietSendsSpareRing: while write queues hold more than a quarter of
// the receive ring, replies are not sent quiet. A quiet SEND's segments go
// back to the ring only at the loop's next wake-up, and the receives that
// arrive meanwhile need buffers: without the bound BenchmarkEcho at 1,000
// connections ran the ring dry, up to 1.75 ENOBUFS per request. Here a
// connection whose peer does not read holds about 48 of 64 receive buffers
// in its queue (zero-copy echo, no MaxQueuedReadBuffers): another
// connection's replies are not quiet then, and are once it has drained.
func TestQuietSendsSpareRing(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			if !quietBackend(b) {
				t.Skipf("%s sends without MSG_DONTWAIT: no quiet SEND", b)
			}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.ReadBufferSize, cfg.ReadBuffers = 4096, 64
			cfg.MaxQueuedReadBuffers = -1
			cfg.WriteHighWater = 8 << 20
			h := &echoHandler{zeroCopy: true, onOpen: func(c *Conn) {
				unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
			}}
			e, addr := startEngine(t, cfg, h)
			a := dialRcvBuf(t, addr, 4096)
			const total = 48 * 4096
			stream := make([]byte, total)
			for i := range stream {
				stream[i] = patternByte(i)
			}
			if _, err := a.Write(stream); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the stream received", func() bool { return e.Stats().BytesRead >= total })

			bc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer bc.Close()
			msg, got := bytes.Repeat([]byte("r"), 64), make([]byte, 64)
			quietDuring := func(n int) uint64 {
				t.Helper()
				q0 := e.Stats().QuietWaits
				for range n {
					if _, err := bc.Write(msg); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(bc, got); err != nil {
						t.Fatal(err)
					}
				}
				return e.Stats().QuietWaits - q0
			}
			if q := quietDuring(50); q != 0 {
				t.Errorf("%d of 50 replies quiet while a queue held most of the receive ring", q)
			}

			back := make([]byte, total)
			if _, err := io.ReadFull(a, back); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, stream) {
				t.Fatal("the stream came back changed")
			}
			settle(t, e)
			if q := quietDuring(50); q < 45 {
				t.Errorf("%d of 50 replies quiet once the queue drained, want about all", q)
			}
		})
	}
}

// settle returns once every loop of e has handled what its kernel queue
// held when settle was called: a quiet SEND's completion waits there for
// the loop's next wake-up (and its Writes and BytesWritten with it). A Post
// wakes each loop, which reaps its completions before it runs posted
// functions.
func settle(t testing.TB, e *Engine) {
	t.Helper()
	for _, l := range e.Loops() {
		done := make(chan struct{})
		l.Post(func() { close(done) })
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("loop %d did not run a posted function", l.ID())
		}
	}
}

// TestQuietReapedBeforeWait: quiet SENDs prepared while the loop handles
// completions (handle flushes a queue written while its SEND was in
// flight) and submitted within that same handling, because the SQ filled
// (here with NOPs, standing for a handler that prepares many requests:
// dials, closes), complete inside that submission and are reaped by the
// same poll. The next wait must not count them again: it would wait for
// completions that never come, and a Post (or Shutdown, or a timer: one
// completion each) would not wake the loop. Replies of one segment go as
// lone SENDs, which the wait does not count and which post no completion:
// settled by that poll, their connections get them.
func TestQuietReapedBeforeWait(t *testing.T) {
	chain := string(bytes.Repeat([]byte("c"), defaultReadBufferSize+10)) // two segments
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		for _, tc := range []struct {
			name, reply   string
			quiet, listed int // SENDs the wait counts, lone ones listed
		}{{"chains", chain, 6, 0}, {"alone", "reply", 0, 3}} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				var (
					ys    []*Conn // loop goroutine
					opens atomic.Int64
					did   = make(chan [2]int, 1)
				)
				h := &BaseHandlerFunc{
					open: func(c *Conn) { opens.Add(1) },
					data: func(c *Conn, buf Buffer) bool {
						switch buf.Bytes()[0] {
						case 'y':
							ys = append(ys, c)
						case 'x':
							ub := c.Loop().be.(*uringBackend)
							for _, y := range ys {
								y.Write([]byte(tc.reply))
								ub.flush(y) // as handle does for a queue written meanwhile
							}
							q := [2]int{int(ub.quiet), len(ub.skipped) - ub.skipHead}
							for ub.r.SQReady() < ub.r.SQEntries() {
								ub.sqe().PrepNop(0)
							}
							ub.sqe().PrepNop(0) // the SQ is full: submits
							did <- q
						}
						return false
					},
				}
				e, addr := startEngine(t, cfg, h)
				l := e.Loops()[0]
				var yc []net.Conn
				for range 3 {
					c := mustDial(t, "tcp", addr)
					yc = append(yc, c)
					if _, err := c.Write([]byte("y")); err != nil {
						t.Fatal(err)
					}
					settle(t, e)
				}
				x := mustDial(t, "tcp", addr)
				if _, err := x.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				if q := <-did; q != [2]int{tc.quiet, tc.listed} {
					t.Fatalf("%d quiet SENDs counted, %d lone ones listed; want %d and %d", q[0], q[1], tc.quiet, tc.listed)
				}
				time.Sleep(50 * time.Millisecond) // the loop waits again
				ran := make(chan struct{})
				l.Post(func() { close(ran) })
				select {
				case <-ran:
				case <-time.After(3 * time.Second):
					t.Fatal("a posted function has not run after 3 s: the loop's wait counts quiet SENDs it has reaped already")
				}
				for _, c := range yc {
					got := make([]byte, len(tc.reply))
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
					if _, err := io.ReadFull(c, got); err != nil || string(got) != tc.reply {
						t.Fatalf("reply %.20q..., %v", got, err)
					}
				}
			})
		}
	}
}

// growHandler, on a connection whose first byte is 'A', writes 1000 bytes
// whenever the queue is empty until a SEND stays in flight (the peer does
// not read: the socket's buffers are full), then writes 10 bytes more
// once, which join the segment that SEND is sending (Write fills the last
// chunk), and stops.
type growHandler struct {
	BaseHandler
	written chan int // the bytes written in all, once the tail is queued
}

func (h *growHandler) OnData(c *Conn, b Buffer) bool {
	if c.Context() == nil && b.Len() > 0 && b.Bytes()[0] == 'A' {
		c.SetContext(0)
		h.feed(c, 0, 0)
	}
	return false
}

func (h *growHandler) feed(c *Conn, off, busy int) {
	if c.Closed() {
		return
	}
	switch {
	case c.Buffered() == 0:
		c.Write(make([]byte, 1000))
		off, busy = off+1000, 0
	case busy < 200:
		busy++ // ~10 ms with a SEND in flight
	default:
		if c.k.sends == 0 || len(c.wq)-int(c.wqHead) != 1 {
			busy = 0
			break
		}
		c.Write(make([]byte, 10)) // joins the segment in flight
		h.written <- off + 10
		return
	}
	c.Loop().AfterFunc(50*time.Microsecond, func() { h.feed(c, off, busy) })
}

// TestQuietCutOnlyQuiet: Stats.QuietCut counts quiet SENDs (MSG_DONTWAIT)
// that found the socket's buffer full. uring-sqpoll sends nothing quiet,
// so its count stays 0 whatever happens to its sends; here a SEND that
// sent all it was given, to a peer that read slowly, while a Write added
// to its segment.
func TestQuietCutOnlyQuiet(t *testing.T) {
	skipWithBatchWait(t, "uring-sqpoll")
	b := BackendURingSQPoll
	cfg := testConfig(b)
	cfg.CPUs = []int{0}
	h := &growHandler{written: make(chan int, 1)}
	e, addr := startEngine(t, cfg, h)
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Write([]byte("A")); err != nil {
		t.Fatal(err)
	}
	var total int
	select {
	case total = <-h.written:
	case <-time.After(60 * time.Second):
		t.Fatal("no SEND stayed in flight")
	}
	a.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.CopyN(io.Discard, a, int64(total)); err != nil {
		t.Fatal(err)
	}
	settle(t, e)
	if st := e.Stats(); st.QuietWaits != 0 || st.QuietCut != 0 {
		t.Errorf("%s (no quiet SENDs): QuietWaits %d, QuietCut %d, want 0 and 0", b, st.QuietWaits, st.QuietCut)
	}
}

// TestQuietSendWriteBehind: a connection written to after its queue went
// out as quiet SENDs, before the loop waited (handle flushes a queue once
// its SEND completes; a receive later in the same batch, or a Post, writes
// more), or closed or shut down then, has the rest (or its FIN) go only
// once those SENDs have completed, and the loop must not sleep through
// that. A chain's SENDs are counted by the wait, which went on sleeping
// past their completions; a lone SEND posts none when it sends all, and
// the loop learns it has only by looking after an enter (settle), which it
// did only at its next wake-up. Nothing else came: the peer waits for the
// rest.
func TestQuietSendWriteBehind(t *testing.T) {
	chain := string(bytes.Repeat([]byte("c"), defaultReadBufferSize+10)) // two segments
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		for _, tc := range []struct {
			name, first string
			quiet       uint32 // SENDs the wait counts
			skip        bool   // a lone SEND, which posts no completion sent whole
			then        func(c *Conn)
			want        string
			eof         bool
		}{
			{"chain/written", chain, 2, false, func(c *Conn) { c.Write([]byte("second")) }, chain + "second", false},
			{"alone/written", "first", 0, true, func(c *Conn) { c.Write([]byte("second")) }, "firstsecond", false},
			{"alone/CloseWrite", "first", 0, true, func(c *Conn) { c.CloseWrite() }, "first", true},
			{"alone/Close", "first", 0, true, func(c *Conn) { c.Close() }, "first", true},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				type sent struct {
					quiet uint32
					skip  bool
				}
				got1 := make(chan sent, 1)
				h := &BaseHandlerFunc{
					data: func(c *Conn, buf Buffer) bool {
						ub := c.Loop().be.(*uringBackend)
						c.Write([]byte(tc.first))
						ub.flush(c) // as handle does for a queue written meanwhile
						got1 <- sent{ub.quiet, c.bits&bitSendSkip != 0}
						tc.then(c)
						return false
					},
				}
				_, addr := startEngine(t, cfg, h)
				c := mustDial(t, "tcp", addr)
				if _, err := c.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				if s := <-got1; s.quiet != tc.quiet || s.skip != tc.skip {
					t.Fatalf("%d quiet SENDs counted, lone %v; want %d, %v", s.quiet, s.skip, tc.quiet, tc.skip)
				}
				got := make([]byte, len(tc.want))
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				if n, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read %d of %d bytes after 3 s: %v (the loop slept through the quiet SEND the rest waited for)", n, len(tc.want), err)
				}
				if string(got) != tc.want {
					t.Fatalf("read %.20q..., want %.20q...", got, tc.want)
				}
				if tc.eof {
					if n, err := c.Read(got[:1]); err != io.EOF {
						t.Fatalf("after the reply: %d bytes, %v; want EOF within 3 s", n, err)
					}
				}
			})
		}
	}
}

// TestQuietSendCutEndsWait: a reply sent as quiet SENDs that the socket's
// full send buffer cuts short (EAGAIN, or short, the chain's rest
// cancelled) has its rest sent while nothing else happens on the loop.
// The cut's completions come inside the enter that submits the SENDs and,
// being the quiet ones the wait counted, did not end it: the rest went
// only at the loop's next wake-up, and the peer, waiting for the rest,
// brought none. Nothing here wakes the loop: no timer, no sweep
// (CloseTimeout off, no WriteTimeout), one connection. Also with the SQ
// left with room for the SENDs alone when the reply is flushed: the NOP
// that ends their chain must reach the kernel in the same submission.
func TestQuietSendCutEndsWait(t *testing.T) {
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		for _, tc := range []struct {
			name string
			size int
			pad  bool // fill the SQ but for the reply's SENDs
		}{
			{"SQ empty", 64 << 10, false},
			{"SQ with room for the SENDs", 64 << 10, true},
			// One segment: one SEND, which posts a completion only when
			// cut, and the wait does not count it.
			{"one SEND", defaultReadBufferSize, false},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				cfg.CloseTimeout = -1
				size := tc.size // below WriteHighWater: sent quiet
				reply := make([]byte, size)
				for i := range reply {
					reply[i] = patternByte(i)
				}
				h := &BaseHandlerFunc{
					open: func(c *Conn) {
						unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
					},
					data: func(c *Conn, buf Buffer) bool {
						c.Write(reply)
						if segs := len(c.wq) - int(c.wqHead); size == defaultReadBufferSize && segs != 1 {
							t.Errorf("the reply is %d segments, want 1", segs)
						}
						if tc.pad {
							ub := c.Loop().be.(*uringBackend)
							for ub.r.SQEntries()-ub.r.SQReady() > uint32(len(c.wq)-int(c.wqHead)) {
								q := ub.sqe()
								q.PrepNop(0)
								q.SetFlags(uring.FlagCQESkipSuccess) // their completions would end the wait
							}
						}
						return false
					},
				}
				e, addr := startEngine(t, cfg, h)
				// Small before connecting: shrunk after, the kernel may drop
				// the ACKs of data already in flight.
				c := dialRcvBuf(t, addr, 4096)
				if _, err := c.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				// Long enough for the SENDs to have been cut and the loop
				// to have gone to sleep.
				time.Sleep(200 * time.Millisecond)
				got := make([]byte, size)
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				if n, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read %d of %d bytes after 3 s: %v (the loop slept through the cut of its quiet SENDs; stats %+v)", n, size, err, e.Stats())
				}
				if !bytes.Equal(got, reply) {
					t.Fatal("the reply came changed")
				}
				if st := e.Stats(); st.QuietCut == 0 || st.QuietWaits == 0 {
					t.Errorf("no quiet SEND was cut (stats %+v): the test did not run the case", st)
				}
			})
		}
	}
}

// TestQuietSendCutOverflowed: a lone quiet SEND cut short while the CQ is
// full has its completion held in the kernel's overflow list, where the
// loop's reaping, which empties the CQ, does not see it: the SEND must not
// be settled as sent whole then (its unsent bytes would be dropped from
// the queue and the peer never get them), and the loop must not sleep
// before the completion comes (the peer waits for the rest).
func TestQuietSendCutOverflowed(t *testing.T) {
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.CloseTimeout = -1
			reply := make([]byte, defaultReadBufferSize) // one segment
			for i := range reply {
				reply[i] = patternByte(i)
			}
			h := &BaseHandlerFunc{
				open: func(c *Conn) {
					unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
				},
				data: func(c *Conn, buf Buffer) bool {
					ub := c.Loop().be.(*uringBackend)
					// Completions the loop handles after this handler.
					for ub.r.CQReady() < ub.r.CQEntries() {
						ub.sqe().PrepNop(0)
						if ub.r.SQReady() >= 64 {
							submitSQ(ub.r)
						}
					}
					c.Write(reply)
					ub.flush(c)
					if c.bits&bitSendSkip == 0 {
						t.Error("the reply did not go as a lone quiet SEND")
					}
					submitSQ(ub.r) // taken now, with the CQ full
					if !ub.r.CQOverflowPending() {
						t.Error("the CQ did not overflow")
					}
					return false
				},
			}
			e, addr := startEngine(t, cfg, h)
			c := dialRcvBuf(t, addr, 4096)
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			got := make([]byte, len(reply))
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if n, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read %d of %d bytes after 3 s: %v (stats %+v)", n, len(reply), err, e.Stats())
			}
			if !bytes.Equal(got, reply) {
				t.Fatal("the reply came changed")
			}
			if st := e.Stats(); st.QuietCut == 0 {
				t.Errorf("the reply's SEND was not cut (stats %+v): the test did not run the case", st)
			}
		})
	}
}

// readPattern reads total bytes of patternByte from nc, failing at the first
// byte out of place.
func readPattern(t *testing.T, nc net.Conn, total int) {
	t.Helper()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 64<<10)
	for off := 0; off < total; {
		n, err := nc.Read(buf[:min(len(buf), total-off)])
		for i := range n {
			if buf[i] != patternByte(off+i) {
				t.Fatalf("byte %d of the stream is %#x, want %#x", off+i, buf[i], patternByte(off+i))
			}
		}
		off += n
		if err != nil {
			t.Fatal(fmt.Errorf("after %d of %d bytes: %w", off, total, err))
		}
	}
}

// TestQuietChainsOnlyWhereLinksFail: quiet SEND chains rest on the kernel
// failing the link of a MSG_DONTWAIT|MSG_WAITALL SEND cut short. Where it
// does not (a kernel patched so, or a probe that could not tell:
// shortSendLinkCut false), the next SEND would go after the bytes the cut
// one did not send and the NOP ending the chain would run, posting nothing,
// the loop sleeping past the cut. There a queue of several segments goes as
// a chain without MSG_DONTWAIT: writes of three segments to a peer that
// does not read, under a small send buffer, make no quiet wait and no cut,
// and arrive whole and in order once it reads. With the kernel's own answer
// (6.18 fails the link) the same writes go quiet and are cut.
func TestQuietChainsOnlyWhereLinksFail(t *testing.T) {
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		for _, linkCut := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/linkCut=%v", b, linkCut), func(t *testing.T) {
				if linkCut && !shortSendLinkCut() {
					t.Skip("the kernel does not fail the link of a SEND cut short (uring's TestProbeShortSend says whether it should)")
				}
				if !linkCut {
					saved := shortSendLinkCut
					shortSendLinkCut = func() bool { return false }
					t.Cleanup(func() { shortSendLinkCut = saved })
				}
				var logs logLines
				cfg := testConfig(b)
				cfg.CPUs, cfg.Logf = []int{0}, logs.logf
				// Every write three segments, the last too: a shorter last
				// write of one segment may go quiet where links do not fail
				// (one-segment replies do), and did where the client kept up
				// (the previous SEND not late): QuietWaits 1, QuietSkipped 1.
				const write = 2*defaultReadBufferSize + 1000
				const total = 128 * write
				h := &quietCutHandler{total: total, write: write, sndbuf: 4096}
				e, addr := startEngine(t, cfg, h)
				a := mustDial(t, "tcp", addr)
				if _, err := a.Write([]byte("A")); err != nil {
					t.Fatal(err)
				}
				if linkCut {
					waitFor(t, "a quiet SEND cut by a full socket buffer", func() bool { return e.Stats().QuietCut > 0 })
				} else {
					time.Sleep(200 * time.Millisecond) // the socket's buffers fill
				}
				readPattern(t, a, total)
				settle(t, e)
				st := e.Stats()
				t.Logf("QuietWaits %d, QuietCut %d, QuietSkipped %d, SQEs %d", st.QuietWaits, st.QuietCut, st.QuietSkipped, st.SQEs)
				if linkCut && (st.QuietWaits == 0 || st.QuietCut == 0) {
					t.Errorf("links fail: QuietWaits %d, QuietCut %d; want both > 0", st.QuietWaits, st.QuietCut)
				}
				if !linkCut && (st.QuietWaits != 0 || st.QuietCut != 0) {
					t.Errorf("links do not fail: QuietWaits %d, QuietCut %d; want 0 and 0", st.QuietWaits, st.QuietCut)
				}
				// The start-up report says it where links do not fail.
				const said = "quiet SENDs for one-segment replies only"
				if want := map[bool]int{true: 0, false: 1}[linkCut]; logs.count(said) != want {
					t.Errorf("%q said %d times, want %d; logs: %q", said, logs.count(said), want, logs.all())
				}
			})
		}
	}
}

// TestQuietSendsOnlyWhereShortSendPosts: a lone quiet SEND carries
// FlagCQESkipSuccess and no link, and rests on the kernel posting its
// result when it is cut short (failing it clears the skip): settle takes
// one that posted nothing as sent whole. Where the kernel does not
// (shortSendSkipCleared false) its tail would be lost, so nothing is sent
// quiet: one-segment replies make no quiet wait and none is settled
// without a completion, the start-up report says so, and writes to a peer
// that does not read, under a small send buffer, arrive whole and in order.
func TestQuietSendsOnlyWhereShortSendPosts(t *testing.T) {
	saved := shortSendSkipCleared
	shortSendSkipCleared = func() bool { return false }
	t.Cleanup(func() { shortSendSkipCleared = saved })
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			var logs logLines
			cfg := testConfig(b)
			cfg.CPUs, cfg.Logf = []int{0}, logs.logf
			const total = 2 << 20
			e, addr := startEngine(t, cfg, &quietCutHandler{total: total, sndbuf: 4096})
			bc := mustDial(t, "tcp", addr)
			bc.SetDeadline(time.Now().Add(20 * time.Second))
			msg, got := bytes.Repeat([]byte("s"), 64), make([]byte, 64)
			for range 100 {
				if _, err := bc.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(bc, got); err != nil {
					t.Fatal(err)
				}
			}
			a := mustDial(t, "tcp", addr)
			if _, err := a.Write([]byte("A")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the socket's buffers fill
			readPattern(t, a, total)
			settle(t, e)
			st := e.Stats()
			if st.QuietWaits != 0 || st.QuietSkipped != 0 || st.QuietCut != 0 {
				t.Errorf("a short SEND posting nothing: QuietWaits %d, QuietSkipped %d, QuietCut %d; want 0", st.QuietWaits, st.QuietSkipped, st.QuietCut)
			}
			const said = "no quiet SENDs"
			if logs.count(said) != 1 {
				t.Errorf("%q said %d times, want once; logs: %q", said, logs.count(said), logs.all())
			}
		})
	}
}

// TestQuietWaitUncountedWhenReapingSubmittedItsSends: Stats.QuietWaits
// counts the waits that submit quiet SENDs and do not end at their
// completions. A lone quiet SEND that a handler prepares and that the
// kernel takes while the loop still reaps (the SQ filled, here with NOPs,
// and submitted) goes, and is settled, before the next wait: that wait
// submits no quiet SEND and is not a quiet one. It was counted: the count
// of lone SENDs prepared since the last enter was not cleared by that
// enter, made while reaping.
func TestQuietWaitUncountedWhenReapingSubmittedItsSends(t *testing.T) {
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			listed := make(chan bool, 1)
			h := &BaseHandlerFunc{
				data: func(c *Conn, buf Buffer) bool {
					ub := c.Loop().be.(*uringBackend)
					c.Write([]byte("reply"))
					ub.flush(c) // as handle does for a queue written meanwhile
					listed <- c.bits&bitSendSkip != 0
					for ub.r.SQReady() < ub.r.SQEntries() {
						ub.sqe().PrepNop(0)
					}
					ub.sqe().PrepNop(0) // the SQ is full: submits, the reply with it
					return false
				},
			}
			e, addr := startEngine(t, cfg, h)
			nc := mustDial(t, "tcp", addr)
			settle(t, e)
			s0 := e.Stats()
			if _, err := nc.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if !<-listed {
				t.Fatal("the reply did not go as a lone quiet SEND")
			}
			got := make([]byte, 5)
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(nc, got); err != nil || string(got) != "reply" {
				t.Fatalf("reply %q, %v", got, err)
			}
			settle(t, e)
			s1 := e.Stats()
			if n := s1.QuietWaits - s0.QuietWaits; n != 0 {
				t.Errorf("%d quiet waits after a reply the kernel took while the loop reaped (waits %d), want 0", n, s1.Waits-s0.Waits)
			}
		})
	}
}

// TestSkippedSendUnlistedInPlace: a lone quiet SEND whose completion comes
// (cut short, or failed) leaves the list of those settle completes
// (uringBackend.skipped) without the list being searched or shifted: with
// a thousand listed and many cut, each removal cost a walk to its entry
// and a shift of those after it, quadratic in all. Here 1,000 are listed
// and their completions come first listed first, the worst case for a
// shift: the entries each removal writes are counted, 499,500 before, none
// now (settle drops the entries once it walks past them, each once).
func TestSkippedSendUnlistedInPlace(t *testing.T) {
	const n = 1000
	l := &Loop{}
	b := &uringBackend{l: l}
	l.be = b
	conns := make([]*Conn, n)
	for i := range conns {
		c := &Conn{l: l}
		l.addConn(c)
		conns[i] = c
		b.listSkip(c, uint32(i), 100)
	}
	moved := 0
	before := make([]skipSend, 0, n)
	for _, c := range conns {
		before = append(before[:0], b.skipped...)
		b.clearSkip(c)
		if c.bits&bitSendSkip != 0 {
			t.Fatal("a connection still has its SEND listed after its completion")
		}
		for i := range min(len(before), len(b.skipped)) {
			if b.skipped[i] != before[i] {
				moved++
			}
		}
	}
	if moved != 0 {
		t.Errorf("%d SENDs unlisted first listed first wrote %d list entries, want none", n, moved)
	}
	for _, s := range b.skipped {
		if b.skipLive(s) != nil {
			t.Fatalf("an unlisted SEND (slot %d) still reads as listed", s.slot)
		}
	}
}

// TestSettleTakesSkippedWithoutShifting: settle takes the lone quiet SENDs
// the kernel has taken off the front of their list (uringBackend.skipped)
// without shifting those left each time: with a thousand listed and the
// kernel taking them a few per enter, each settle moved every entry after
// them, quadratic in all. Here 1,000 are listed (their completions came,
// so settle only drops them) and a real ring's SQ head passes one per
// settle, as it moves past each SQE: the entries each settle writes are
// counted, 499,500 before; now those left are moved to the front only once
// the taken reach half the list, no more than were taken in all.
func TestSettleTakesSkippedWithoutShifting(t *testing.T) {
	const n = 1000
	r, err := uring.New(&uring.Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := &Loop{}
	b := &uringBackend{l: l, r: r, dropped: cqDropped(r)}
	l.be = b
	tail := r.SQTail()
	for i := range n {
		c := &Conn{l: l}
		l.addConn(c)
		b.listSkip(c, tail+uint32(i), 100)
		b.clearSkip(c)
	}
	moved := 0
	before := make([]skipSend, 0, n)
	for i := range n {
		q := r.GetSQE()
		q.PrepNop(0)
		q.SetFlags(uring.FlagCQESkipSuccess) // no completion: the CQ stays empty
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		before = append(before[:0], b.skipped...)
		if !b.settle(nil) {
			t.Fatalf("settle took none of the %d listed after the SQ head passed SEND %d", n-i, i)
		}
		for j := range min(len(before), len(b.skipped)) {
			if b.skipped[j] != before[j] {
				moved++
			}
		}
	}
	if len(b.skipped) != 0 {
		t.Errorf("%d entries left in the list after settle took all", len(b.skipped))
	}
	if moved > n {
		t.Errorf("settling %d SENDs one at a time wrote %d list entries, want at most %d", n, moved, n)
	}
}

// TestQuietSendNotSettledAfterDroppedCompletion: a completion the kernel
// drops (the CQ full and no memory to keep it: it counts it in the ring's
// CQ overflow counter and posts nothing) may be a lone quiet SEND's cut
// short, which cannot be told from one sent whole: none may be settled as
// whole then, or the rest of its queue would follow a hole in the stream.
// The kernel cannot be made to drop one at will: the counter is moved
// through cqDropped, and what follows is the loop's own: no SEND settled,
// the connection reset with an error saying why, and the loop failed (as
// the kernel's EBADR would fail its next wait) saying so. Before, the SEND
// was settled and the connection echoed as if nothing was lost.
func TestQuietSendNotSettledAfterDroppedCompletion(t *testing.T) {
	var moved atomic.Uint32
	saved := cqDropped
	cqDropped = func(r *uring.Ring) uint32 { return r.CQOverflow() + moved.Load() }
	t.Cleanup(func() { cqDropped = saved })
	for _, b := range testBackends {
		if !quietBackend(b) {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			moved.Store(0)
			var logs logLines
			cfg := testConfig(b)
			cfg.CPUs, cfg.Logf = []int{0}, logs.logf
			closed := make(chan error, 1)
			h := &BaseHandlerFunc{
				data: func(c *Conn, buf Buffer) bool {
					c.Write(buf.Bytes())
					return false
				},
				closed: func(c *Conn, err error) { closed <- err },
			}
			e := newEngine(t, cfg, h)
			ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- e.Run(context.Background()) }()
			t.Cleanup(func() {
				if err := e.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
				if err := <-ran; err == nil || !strings.Contains(err.Error(), "dropped") {
					t.Errorf("Run returned %v, want the loop's error saying a completion was dropped", err)
				}
			})
			nc := mustDial(t, "tcp", ln.Addr().String())
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			msg, got := bytes.Repeat([]byte("d"), 64), make([]byte, 64)
			for range 20 {
				if _, err := nc.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(nc, got); err != nil {
					t.Fatal(err)
				}
			}
			settle(t, e)
			s0 := e.Stats()
			if s0.QuietSkipped == 0 {
				t.Fatal("no reply was settled without a completion: the test does not run the case")
			}
			moved.Store(1)
			if _, err := nc.Write(msg); err != nil {
				t.Fatal(err)
			}
			// The kernel sent this one whole: it is listed, and settle
			// looks at it once something wakes the loop (a Post).
			if _, err := io.ReadFull(nc, got); err != nil {
				t.Fatal(err)
			}
			e.Loops()[0].Post(func() {})
			select {
			case err = <-closed:
			case <-time.After(5 * time.Second):
				t.Fatalf("the connection is open 5 s after a completion was dropped with its reply listed (QuietSkipped %d, %d before)", e.Stats().QuietSkipped, s0.QuietSkipped)
			}
			if err == nil || !strings.Contains(err.Error(), "dropped") {
				t.Errorf("OnClose error %v, want one saying a completion was dropped", err)
			}
			if n := e.Stats().QuietSkipped - s0.QuietSkipped; n != 0 {
				t.Errorf("%d SENDs settled as sent whole after a completion was dropped, want none", n)
			}
			if logs.count("dropped") == 0 {
				t.Errorf("the loop did not say a completion was dropped; logs: %q", logs.all())
			}
		})
	}
}
