package engine

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// quietCutHandler writes a pattern of total bytes, 8 KiB at a time, each
// once the last has gone (Buffered 0), to a connection whose first byte is
// 'A', from a timer: every flush sends the whole queue, quiet, until the
// socket's buffer fills because the peer does not read. Any other
// connection gets an echo.
type quietCutHandler struct {
	BaseHandler
	total int
}

func (h *quietCutHandler) OnData(c *Conn, b Buffer) bool {
	p := b.Bytes()
	if c.Context() == nil && len(p) > 0 && p[0] == 'A' {
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
		chunk := make([]byte, min(1000, h.total-off))
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
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
			}}
			a, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
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
