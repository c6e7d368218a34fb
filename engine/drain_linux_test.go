package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// drainHandler echoes and, as a Drainer, writes "bye" and closes each
// connection a graceful Shutdown tells it about.
type drainHandler struct {
	BaseHandlerFunc
	drained atomic.Int64
	offLoop atomic.Int64 // OnDrain calls not on the connection's loop
}

func (h *drainHandler) OnDrain(c *Conn) {
	l := c.Loop()
	if !onAnyLoop() || l.tid.Load() != int32(unix.Gettid()) {
		h.offLoop.Add(1)
	}
	h.drained.Add(1)
	c.Write([]byte("bye"))
	c.Close()
}

// TestDrainer: a graceful Shutdown calls a Drainer handler's OnDrain once
// for each open connection, on its loop, after the listeners closed; here
// OnDrain closes them, so the drain ends without the clients closing and
// well before Shutdown's deadline.
func TestDrainer(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &drainHandler{}
			h.data = func(c *Conn, buf Buffer) bool { c.Write(buf.Bytes()); return false }
			e, addr, done := listenAndRun(t, testConfig(b), h)
			const n = 5
			conns := make([]net.Conn, n)
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.Write([]byte("x"))
				if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
					t.Fatal(err)
				}
				conns[i] = c
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v (the connections were not drained)", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := h.drained.Load(); got != n {
				t.Fatalf("OnDrain called %d times, want %d", got, n)
			}
			if got := h.offLoop.Load(); got != 0 {
				t.Fatalf("OnDrain called off the connection's loop %d times", got)
			}
			for _, c := range conns {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if b, err := io.ReadAll(c); err != nil || string(b) != "bye" {
					t.Fatalf("client read %q, %v; want \"bye\" then EOF", b, err)
				}
			}
		})
	}
}

// TestShutdownCutResets: a connection its handler has not ended when
// Shutdown's context is done is reset, its queue empty: its peer reads
// what was sent and then ECONNRESET. A FIN told the peer the stream was
// whole where it was cut (a proxy's tunnel, its server mid-stream).
func TestShutdownCutResets(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &BaseHandlerFunc{}
			h.data = func(c *Conn, buf Buffer) bool { c.Write(buf.Bytes()); return false }
			e, addr, done := listenAndRun(t, testConfig(b), h)
			c := mustDial(t, "tcp", addr)
			c.Write([]byte("x"))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := e.Shutdown(ctx); err == nil {
				t.Error("Shutdown: nil, want the context's error (a connection was cut)")
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n, err := io.Copy(io.Discard, c); !errors.Is(err, unix.ECONNRESET) {
				t.Errorf("the client read %d more bytes, then %v; want a reset", n, err)
			}
		})
	}
}

// TestShutdownCutKeepsHalfClosedStream: a connection whose handler has
// sent all it had to send and CloseWrite (a proxy's tunnel whose server
// has ended its stream, the client still sending) is still open when
// Shutdown's context is done, its queue empty but the socket's not (the
// peer reads slowly): the peer must read the whole stream and then EOF,
// as the handler ended it. Resetting it (as one cut mid-stream) dropped
// what the socket still held: the peer read part of a stream its sender
// had ended, then ECONNRESET.
func TestShutdownCutKeepsHalfClosedStream(t *testing.T) {
	want := make([]byte, 64<<10)
	for i := range want {
		want[i] = byte(i * 7)
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			conns := make(chan *Conn, 1)
			h := &BaseHandlerFunc{open: func(c *Conn) {
				c.Write(want)
				c.CloseWrite()
				conns <- c
			}}
			e, addr, done := listenAndRun(t, testConfig(b), h)
			// A small receive buffer: most of the stream waits in the
			// sender's socket until the client reads.
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
			}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sc := recv(t, conns, "OnOpen")
			waitFor(t, "the write queue to empty into the socket", func() bool {
				q := make(chan int)
				sc.Loop().Post(func() { q <- sc.Buffered() })
				return <-q == 0
			})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := e.Shutdown(ctx); err == nil {
				t.Error("Shutdown: nil, want the context's error (a connection was cut)")
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("the client read %d of the %d bytes its peer sent before CloseWrite, then %v; want all, then EOF", len(got), len(want), err)
			}
		})
	}
}
