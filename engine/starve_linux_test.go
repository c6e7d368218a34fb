package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStarvedReceiveRearms echoes bursts through a receive ring of two
// 512-byte buffers, so that receives keep ending with ENOBUFS: each must be
// re-armed, including one whose ENOBUFS the SQPOLL thread posted just before
// the loop gave buffers back (handled after that, it used to wait for a
// buffer release that never came, and the connection stopped reading).
func TestStarvedReceiveRearms(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.ReadBuffers, cfg.ReadBufferSize = 2, 512
			cfg.CPUs = []int{runtime.NumCPU() - 1}
			e, addr := startEngine(t, cfg, &echoHandler{})
			for i := range 20 {
				if err := burstEcho(e.Loops()[0], addr, uint64(i), 1000, 1024, 5*time.Second); err != nil {
					t.Fatalf("connection %d: %v (%d receives ran out of buffers)", i, err, e.Stats().NoBufs)
				}
			}
			t.Logf("%d receives ran out of buffers", e.Stats().NoBufs)
		})
	}
}

// burstEcho writes msgs messages of size bytes with uneven gaps (up to 40
// µs of spinning) while reading the echo back from l's connection, and
// checks it. It fails when the echo stops: nothing read for silence of the
// time l's thread could run (loopWatch), asleep or running, as opposed to
// runnable and kept off a CPU, which a loaded machine can do to a loop
// pinned to one (or for a minute whatever the loop did); its error then
// says what the loop was doing (loopWatch.String). The whole burst has no
// deadline: through two 512-byte buffers a 1 MiB echo is some 2,000
// receives, each a round trip through the loop (and SQPOLL's thread), and
// on a loaded 2-CPU machine one took 6.4 s, never waiting a second for its
// next bytes (a 5 s deadline on the whole burst failed there now and
// then). A write blocked by a server that stopped reading ends with the
// deferred Close.
func burstEcho(l *Loop, addr string, seed uint64, msgs, size int, silence time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	msg := pattern(seed, size)
	werr := make(chan error, 1)
	var wrote atomic.Int64
	go func() {
		for k := range msgs {
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
			wrote.Add(1)
			for t0 := time.Now(); time.Since(t0) < time.Duration(k%40)*time.Microsecond; {
			}
		}
		werr <- nil
	}()
	got := make([]byte, msgs*size)
	w := newLoopWatch(l)
	for n := 0; n < len(got); {
		c.SetReadDeadline(time.Now().Add(time.Second))
		m, err := c.Read(got[n:])
		n += m
		if m > 0 && time.Since(w.at) > 100*time.Millisecond {
			w.restart() // at most 100 ms before the last bytes came
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && m == 0 && w.silent() < silence && time.Since(w.at) < time.Minute {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the echo, %d of %d bytes read, %d of %d messages written: %w; %v", n, len(got), wrote.Load(), msgs, err, w)
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	for k := range msgs {
		if !bytes.Equal(got[k*size:(k+1)*size], msg) {
			return fmt.Errorf("message %d garbled", k)
		}
	}
	return nil
}

// keepOrForward keeps every buffer a message starting with 'K' comes in
// (acknowledging each with a byte written, from the send slab) until its
// connection's FIN, and sends any other message back with WriteBuffer.
type keepOrForward struct {
	BaseHandler
}

func (keepOrForward) OnOpen(c *Conn) { c.SetContext(&[]Buffer{}) }

func (keepOrForward) OnData(c *Conn, b Buffer) bool {
	if b.Bytes()[0] == 'K' {
		kept := c.Context().(*[]Buffer)
		*kept = append(*kept, b)
		c.Write([]byte{'k'})
		return true
	}
	c.WriteBuffer(b)
	return true
}

func (keepOrForward) OnEOF(c *Conn) {
	for _, b := range *c.Context().(*[]Buffer) {
		b.Release()
	}
	c.Close()
}

// TestStarvedReceiveRearmsAfterQuietSend: a receive that found the ring
// empty (ENOBUFS) waits for a buffer to come back; here the only one to
// come back is another connection's, which went out with WriteBuffer as a
// quiet SEND (MSG_DONTWAIT, its completion not waited for: Stats.QuietWaits)
// submitted after the ENOBUFS was handled. The handler keeps the ring's
// other buffers. The SEND completed inside the loop's enter, which then
// slept on, waiting for a completion that nothing would bring, the buffer
// given back only once something woke it: the starved connection never
// read again (with CloseTimeout on, the sweep woke the loop a quarter of
// it later, 7.5 s by default). The uring backends; epoll has no ring.
func TestStarvedReceiveRearmsAfterQuietSend(t *testing.T) {
	for _, b := range testBackends {
		if !b.isURing() {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.ReadBuffers, cfg.ReadBufferSize = 4, 512
			cfg.CloseTimeout = -1 // no sweep to wake the loop
			e, addr := startEngine(t, cfg, keepOrForward{})
			k, a, s := mustDial(t, "tcp", addr), mustDial(t, "tcp", addr), mustDial(t, "tcp", addr)
			// Three of the ring's four buffers kept.
			for range 3 {
				k.SetDeadline(time.Now().Add(5 * time.Second))
				if err := roundTrip(k, []byte{'K'}); err != nil {
					t.Fatal(err)
				}
			}
			// a's message takes the last buffer and s's receive finds the
			// ring empty, both handled in one iteration: the loop is held
			// while they arrive.
			hold := make(chan struct{})
			e.Loops()[0].Post(func() { <-hold })
			a.Write([]byte("a's message"))
			time.Sleep(50 * time.Millisecond)
			s.Write([]byte("s's message"))
			time.Sleep(50 * time.Millisecond)
			close(hold)
			for i, c := range []net.Conn{a, s} {
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				buf := make([]byte, 11)
				if _, err := io.ReadFull(c, buf); err != nil {
					st := e.Stats()
					t.Fatalf("%s's echo %q: %v (%d receives found the ring empty, %d quiet waits)", []string{"a", "s"}[i], buf, err, st.NoBufs, st.QuietWaits)
				}
			}
			k.(*net.TCPConn).CloseWrite()
		})
	}
}

// onLoop runs f on l's goroutine and waits for it to return.
func onLoop(t *testing.T, l *Loop, f func()) {
	t.Helper()
	done := make(chan struct{})
	l.Post(func() { f(); close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a posted function did not run within 10s")
	}
}

// TestEpollSlabExhaustedParksReads: on the epoll backends receive buffers
// are chunks of the loop's slab. Here the slab cannot grow (its mapping
// fails with ENOMEM) and every chunk is in the write queue of a
// connection whose peer does not read; another connection's data then
// finds no chunk. Its socket, level-triggered, was reported again by
// every epoll_wait: the loop spun (tens of thousands of waits in 300 ms)
// until a chunk came back. Its input is no longer watched until then
// (a handful of waits), nor after a pause and resume meanwhile, and one
// closed meanwhile leaves the list; once the slow peer reads, the chunks
// its queue gives back let the data be read and echoed, and with no chunk
// given back, once the slab can grow again a starved read finds it out
// (starveRetry) and the data is echoed too.
func TestEpollSlabExhaustedParksReads(t *testing.T) {
	for _, b := range testBackends {
		if b.isURing() {
			continue
		}
		for _, mode := range []string{"reader reads", "slab grows"} {
			t.Run(string(b)+"/"+mode, func(t *testing.T) {
				opened := make(chan *Conn, 4)
				h := &BaseHandlerFunc{
					open: func(c *Conn) { opened <- c },
					data: func(c *Conn, b Buffer) bool {
						c.WriteBuffer(b)
						return true
					},
				}
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				cfg.ReadBufferSize = 4 << 10
				cfg.CloseTimeout = -1 // no sweep to wake the loop
				e, addr := startEngine(t, cfg, h)
				l := e.Loops()[0]
				slow, err := slowDialer().Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer slow.Close()
				mapf := fillSlab(t, l, <-opened)

				// Three connections send: one is left alone, one paused and
				// resumed while starved, one closed while starved.
				var clients []net.Conn
				var conns []*Conn
				for range 3 {
					clients = append(clients, mustDial(t, "tcp", addr))
					conns = append(conns, <-opened)
				}
				msg := pattern(3, 1000)
				for _, c := range clients {
					if _, err := c.Write(msg); err != nil {
						t.Fatal(err)
					}
				}
				waitFor(t, "the reads to find the slab empty", func() bool { return l.Stats().NoBufs >= 3 })
				onLoop(t, l, func() {
					conns[1].PauseRead()
					conns[1].ResumeRead()
					conns[2].Close()
				})
				starved, closed := 0, false
				onLoop(t, l, func() { // after the iteration's flush, where Close closes
					starved, closed = len(l.be.(*epollBackend).starved), conns[2].Closed()
				})
				if !closed || starved != 2 {
					t.Errorf("%d connections listed as starved, want 2 (one closed: %v)", starved, closed)
				}
				w0 := l.Stats().Waits
				time.Sleep(300 * time.Millisecond)
				if w := l.Stats().Waits - w0; w >= 50 {
					t.Errorf("%d waits in 300 ms with the slab empty and sockets readable (%d reads found no chunk): the loop spins", w, l.Stats().NoBufs)
				}

				if mode == "reader reads" {
					go io.Copy(io.Discard, slow)
				} else {
					// No chunk of the loop's comes back: the slab can
					// grow again, and a starved read must find that out.
					onLoop(t, l, func() { l.chunks.mapf = mapf })
				}
				for i, c := range clients[:2] {
					got := make([]byte, len(msg))
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if _, err := io.ReadFull(c, got); err != nil {
						t.Fatalf("connection %d: the echo once the %s: %v (%d reads found no chunk)", i, mode, err, l.Stats().NoBufs)
					}
					if !bytes.Equal(got, msg) {
						t.Errorf("connection %d: the echo differs from the message", i)
					}
				}
			})
		}
	}
}

// slowDialer dials with a small receive buffer: a peer that does not read
// then leaves its connection's write queue what the socket buffers cannot
// take (fillSlab).
func slowDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10)
		})
	}}
}

// fillSlab makes l's send slab unable to grow (its mapping fails with
// ENOMEM) and fills it with the write queue of sc, a plain connection
// whose peer, dialed with slowDialer, does not read: with a small send
// buffer it writes until the slab has no chunk free, again after the
// flushes have moved what the socket took, until none has freed a chunk
// for 150 ms. It returns the slab's mapping function, with which the slab
// grows again.
func fillSlab(t *testing.T, l *Loop, sc *Conn) func(int, bool) ([]byte, string, error) {
	t.Helper()
	var mapf func(int, bool) ([]byte, string, error)
	onLoop(t, l, func() {
		mapf = l.chunks.mapf
		l.chunks.mapf = func(int, bool) ([]byte, string, error) { return nil, "", unix.ENOMEM }
		unix.SetsockoptInt(sc.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
	})
	block := make([]byte, 64<<10)
	free, full := -1, 0
	for i := 0; i < 100 && full < 3; i++ {
		onLoop(t, l, func() {
			for {
				if _, err := sc.Write(block); err != nil {
					break
				}
			}
		})
		time.Sleep(50 * time.Millisecond)
		onLoop(t, l, func() { free = len(l.chunks.free) })
		full++
		if free != 0 {
			full = 0
		}
	}
	if full < 3 {
		t.Fatalf("the slow reader's queue leaves %d chunks free", free)
	}
	return mapf
}

// TestStarvedReceiveRearmsWhenQuietSendOfSameReapingFreesBuffer: a receive
// that finds the ring empty (ENOBUFS) in a reaping that has prepared a
// quiet SEND, which quietSends could not refuse for it, is re-armed once
// that SEND gives its receive buffer back. Here three of the ring's four
// buffers are kept, and the fourth, forwarded by WriteBuffer, waits in
// p's write queue behind a lone quiet SEND of a byte from the slab, which
// the test flushes before queueing the buffer (as sendDone flushes while
// the loop reaps, before a later handler writes). The enter that takes
// that SEND posts s's ENOBUFS: settle sends the buffer as another lone
// quiet SEND before the ENOBUFS is handled. Sent whole, it
// posts no completion, and the next wait slept past it with the buffer as
// good as free: s's message was not delivered 5 s later. Now a wait that
// submits quiet SENDs while receives starve and write queues hold receive
// buffers does not sleep. The uring backends; epoll has no ring.
func TestStarvedReceiveRearmsWhenQuietSendOfSameReapingFreesBuffer(t *testing.T) {
	for _, b := range testBackends {
		if !b.isURing() {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			opened := make(chan *Conn, 4)
			var delivered atomic.Int64
			var fwd Buffer
			h := &BaseHandlerFunc{
				open: func(c *Conn) {
					c.SetContext(&[]Buffer{})
					opened <- c
				},
				// A message starting with 'K' is kept, and
				// acknowledged with a byte; one starting with 'F' is
				// kept for the test to forward, and its connection
				// closed (its receive, which then finds the ring
				// empty, does not starve); any other is counted.
				data: func(c *Conn, buf Buffer) bool {
					switch buf.Bytes()[0] {
					case 'K':
						kept := c.Context().(*[]Buffer)
						*kept = append(*kept, buf)
						c.Write([]byte{'k'})
						return true
					case 'F':
						fwd = buf
						c.Close()
						return true
					}
					delivered.Add(1)
					return false
				},
				closed: func(c *Conn, _ error) {
					for _, buf := range *c.Context().(*[]Buffer) {
						buf.Release()
					}
				},
			}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.ReadBuffers, cfg.ReadBufferSize = 4, 4<<10
			cfg.CloseTimeout = -1 // no sweep to wake the loop
			e, addr := startEngine(t, cfg, h)
			l := e.Loops()[0]
			k := mustDial(t, "tcp", addr)
			<-opened
			p := mustDial(t, "tcp", addr)
			pc := <-opened
			s := mustDial(t, "tcp", addr)
			<-opened
			k.SetDeadline(time.Now().Add(5 * time.Second))
			for range 3 {
				if err := roundTrip(k, []byte("K")); err != nil {
					t.Fatal(err)
				}
			}
			// Longer than joinLast copies into the slab chunk before it.
			msg := bytes.Repeat([]byte("F"), 3000)
			a := mustDial(t, "tcp", addr)
			<-opened
			a.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := a.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(a); err != nil {
				t.Fatalf("a's close: %v", err)
			}
			onLoop(t, l, func() {
				if _, err := s.Write([]byte("s's message")); err != nil {
					t.Errorf("s's message: %v", err)
				}
				// Its receive's ENOBUFS waits in the kernel's task work
				// for the loop's next enter.
				time.Sleep(20 * time.Millisecond)
				pc.Write([]byte("x"))
				l.be.flush(pc)
				if err := pc.WriteBuffer(fwd); err != nil {
					t.Errorf("forwarding a's buffer: %v", err)
				}
			})
			got := make([]byte, 1+len(msg))
			p.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(p, got); err != nil {
				t.Fatalf("the byte and a's forwarded buffer: %v", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for delivered.Load() == 0 {
				if time.Now().After(deadline) {
					st := l.Stats()
					t.Fatalf("s's message not delivered 5 s after the buffer holding it back was sent (%d receives found the ring empty, %d quiet waits, %d settled without a completion)", st.NoBufs, st.QuietWaits, st.QuietSkipped)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
}

// TestBurstEchoSaysStall: burstEcho fails where the loop could run and
// left the echo, and says what it was doing: here the handler keeps every
// buffer, the ring's two, so that the receive finds the ring empty and
// starves, and the loop sleeps with the rest of the burst unread in its
// socket. burstEcho counts as silence only the time the loop's thread was
// not kept off a CPU (TestStarvedReceiveRearms, which under load had a
// read wait 5 s where nothing said whether the loop slept or was not run):
// a sleeping loop's is all of it.
func TestBurstEchoSaysStall(t *testing.T) {
	cfg := testConfig(BackendURing)
	cfg.ReadBuffers, cfg.ReadBufferSize = 2, 512
	cfg.CPUs = []int{runtime.NumCPU() - 1}
	var kept []Buffer
	keep := true
	h := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
		c.Write(b.Bytes())
		if keep {
			kept = append(kept, b)
		}
		return keep
	}}
	e, addr := startEngine(t, cfg, h)
	l := e.Loops()[0]
	t0 := time.Now()
	err := burstEcho(l, addr, 0, 1000, 1024, 3*time.Second)
	took := time.Since(t0)
	onLoop(t, l, func() {
		keep = false
		for _, b := range kept {
			b.Release()
		}
	})
	if err == nil {
		t.Fatal("the echo of a loop whose handler keeps every buffer came whole")
	}
	t.Log(err)
	for _, want := range []string{"1024 of 1024000 bytes read", "S in io_cqring_wait", "starved 1,", "out 2,"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("burstEcho's error does not say %q", want)
		}
	}
	// Asleep from the first message on, until CloseTimeout's sweep
	// wakes it (7.5 s after the start): a watch that took the sleep for
	// time kept off a CPU would fail only after that.
	if took > 6*time.Second {
		t.Errorf("burstEcho failed %v after its start, for a loop asleep from the first message on, 3s of silence allowed", took.Round(time.Millisecond))
	}
}
