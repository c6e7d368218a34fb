package engine

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
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
				if err := burstEcho(addr, uint64(i), 1000, 1024); err != nil {
					t.Fatalf("connection %d: %v (%d receives ran out of buffers)", i, err, e.Stats().NoBufs)
				}
			}
			t.Logf("%d receives ran out of buffers", e.Stats().NoBufs)
		})
	}
}

// burstEcho writes msgs messages of size bytes with uneven gaps (up to 40
// µs of spinning) while reading the echo back, and checks it. It fails when
// the echo stops: nothing read for 5 s. The whole burst has no deadline:
// through two 512-byte buffers a 1 MiB echo is some 2,000 receives, each a
// round trip through the loop (and SQPOLL's thread), and on a loaded 2-CPU
// machine one took 6.4 s, never waiting a second for its next bytes (a 5 s
// deadline on the whole burst failed there now and then). A write blocked
// by a server that stopped reading ends with the deferred Close.
func burstEcho(addr string, seed uint64, msgs, size int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	msg := pattern(seed, size)
	werr := make(chan error, 1)
	go func() {
		for k := range msgs {
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
			for t0 := time.Now(); time.Since(t0) < time.Duration(k%40)*time.Microsecond; {
			}
		}
		werr <- nil
	}()
	got := make([]byte, msgs*size)
	for n := 0; n < len(got); {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		m, err := c.Read(got[n:])
		n += m
		if err != nil {
			return fmt.Errorf("reading the echo, %d of %d bytes read: %w", n, len(got), err)
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
