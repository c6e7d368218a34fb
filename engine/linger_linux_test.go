package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lingerHandler answers a connection's first data with reply and then calls
// end (CloseLinger, or Close to see what it prevents), open in OnOpen and
// onEOF instead of Close in OnEOF, where set; it counts OnData,
// OnEOF and OnClose and keeps OnClose's last error.
type lingerHandler struct {
	BaseHandler
	reply   []byte
	open    func(c *Conn)
	end     func(c *Conn)
	onEOF   func(c *Conn) // instead of Close
	reads   atomic.Int64
	eofs    atomic.Int64
	closes  atomic.Int64
	errs    atomic.Int64
	lastErr atomic.Value
}

func (h *lingerHandler) OnOpen(c *Conn) {
	if h.open != nil {
		h.open(c)
	}
}

func (h *lingerHandler) OnData(c *Conn, b Buffer) bool {
	if h.reads.Add(1) == 1 {
		c.Write(h.reply)
		h.end(c)
	}
	return false
}

func (h *lingerHandler) OnEOF(c *Conn) {
	h.eofs.Add(1)
	if h.onEOF != nil {
		h.onEOF(c)
		return
	}
	c.Close()
}

func (h *lingerHandler) OnClose(c *Conn, err error) {
	if err != nil {
		h.errs.Add(1)
		h.lastErr.Store(err)
	}
	h.closes.Add(1)
}

// readReply reads from c to EOF and reports what it read and the error that
// ended it (nil at EOF).
func readReply(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return io.ReadAll(c)
}

// TestCloseLingerKeepsReply: a reply larger than the socket buffers, then
// CloseLinger while the client goes on sending: the client reads the whole
// reply and a FIN. A plain Close stops reading, and closing a socket with
// unread data sends a reset that throws away what the kernel had not sent
// yet (the "close" round checks that it does here, so that the "linger"
// round proves something).
func TestCloseLingerKeepsReply(t *testing.T) {
	reply := pattern(3, 8<<20)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, mode := range []string{"linger", "close"} {
				h := &lingerHandler{reply: reply, end: func(c *Conn) {
					if mode == "close" {
						c.Close()
					} else if err := c.CloseLinger(10*time.Second, 64<<20); err != nil {
						t.Errorf("CloseLinger: %v", err)
					}
				}}
				_, addr := startEngine(t, testConfig(b), h)
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				// The request, then more than the server's receive buffer
				// can hold unread, sent while the reply is read.
				sent := make(chan error, 1)
				go func() {
					if _, err := c.Write([]byte("request")); err != nil {
						sent <- err
						return
					}
					for range 64 {
						if _, err := c.Write(make([]byte, 64<<10)); err != nil {
							sent <- err
							return
						}
					}
					sent <- nil
				}()
				got, rerr := readReply(c)
				serr := <-sent
				c.Close()
				switch mode {
				case "linger":
					if rerr != nil || len(got) != len(reply) {
						t.Fatalf("lingering close: read %d of %d reply bytes, then %v", len(got), len(reply), rerr)
					}
					if serr != nil {
						t.Errorf("lingering close: the client's writes failed: %v", serr)
					}
					waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
					if h.errs.Load() != 0 || h.reads.Load() != 1 || h.eofs.Load() != 0 {
						t.Errorf("OnClose errors %d, OnData %d (want 1), OnEOF %d (want 0)", h.errs.Load(), h.reads.Load(), h.eofs.Load())
					}
				case "close":
					// The control: Close leaves the client's data unread,
					// so the kernel resets the connection, which one of
					// the client's reads or writes sees (whichever takes
					// the socket error), or a reply cut short.
					if serr == nil && rerr == nil && len(got) == len(reply) {
						t.Errorf("plain Close: the whole reply and a FIN, no reset: this test does not exercise what CloseLinger avoids")
					}
				}
			}
		})
	}
}

// lingerClient dials addr, sends the request and reads the reply to the
// server's FIN.
func lingerClient(t *testing.T, addr string, want string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if got, err := readReply(c); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q and the server's FIN", got, err, want)
	}
	return c
}

// TestCloseLingerEnds checks each way a lingering close ends: the bytes
// cap, the timeout counted from the server's FIN (also when CloseWrite had
// sent it before), and the peer's FIN, also when it came while reading was
// paused, with data held.
func TestCloseLingerEnds(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			t.Run("bytes", func(t *testing.T) {
				const limit = 100 << 10
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) { c.CloseLinger(time.Hour, limit) }}
				_, addr := startEngine(t, testConfig(b), h)
				c := lingerClient(t, addr, "ok")
				// The server closes past limit, long before its timeout,
				// and the client's writes then fail.
				c.SetWriteDeadline(time.Now().Add(20 * time.Second))
				sent := 0
				var err error
				for err == nil && sent < 64<<20 {
					var n int
					n, err = c.Write(make([]byte, 16<<10))
					sent += n
				}
				if err == nil {
					t.Fatalf("the server took %d bytes without closing (limit %d)", sent, limit)
				}
				if sent <= limit {
					t.Errorf("the server closed after %d bytes, before its limit of %d", sent, limit)
				}
				waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
				if h.reads.Load() != 1 || h.errs.Load() != 0 {
					t.Errorf("OnData %d (want 1), OnClose errors %d", h.reads.Load(), h.errs.Load())
				}
			})
			t.Run("timeout", func(t *testing.T) {
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) { c.CloseLinger(50*time.Millisecond, 1<<20) }}
				_, addr := startEngine(t, testConfig(b), h)
				start := time.Now()
				c := lingerClient(t, addr, "ok")
				// The client neither sends nor closes: the timer ends it.
				waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
				if d := time.Since(start); d < 50*time.Millisecond {
					t.Errorf("closed %v after the request, before the 50ms timeout", d)
				}
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
					t.Errorf("after the server closed: read %d, %v", n, err)
				}
			})
			t.Run("after-closewrite", func(t *testing.T) {
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) {
					c.CloseWrite()
					c.Loop().AfterFunc(20*time.Millisecond, func() { c.CloseLinger(50*time.Millisecond, 1<<20) })
				}}
				_, addr := startEngine(t, testConfig(b), h)
				lingerClient(t, addr, "ok")
				waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
			})
			t.Run("peer-fin-while-paused", func(t *testing.T) {
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) {
					c.PauseRead()
					c.Loop().AfterFunc(100*time.Millisecond, func() {
						if err := c.CloseLinger(time.Hour, 1<<20); err != nil {
							t.Errorf("CloseLinger: %v", err)
						}
					})
				}}
				_, addr := startEngine(t, testConfig(b), h)
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				// The request; once it is answered (reading paused), more
				// data and the client's FIN, all before CloseLinger.
				if _, err := c.Write([]byte("request")); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "OnData", func() bool { return h.reads.Load() == 1 })
				if _, err := c.Write(make([]byte, 8<<10)); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				if got, err := readReply(c); err != nil || string(got) != "ok" {
					t.Fatalf("read %q, %v; want ok and the server's FIN", got, err)
				}
				waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
				if h.reads.Load() != 1 || h.eofs.Load() != 0 || h.errs.Load() != 0 {
					t.Errorf("OnData %d (want 1), OnEOF %d (want 0), OnClose errors %d", h.reads.Load(), h.eofs.Load(), h.errs.Load())
				}
			})
		})
	}
}

// TestCloseLingerStates: CloseLinger in the states a connection may be in
// when a server gives up on it.
func TestCloseLingerStates(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, zc := range []bool{false, true} {
				name := "hwm-write"
				if zc {
					name = "hwm-writebuffer"
				}
				t.Run(name, func(t *testing.T) { lingerOverHWM(t, b, zc) })
			}
			t.Run("dial", func(t *testing.T) { lingerDial(t, b) })
			t.Run("post", func(t *testing.T) { lingerPost(t, b) })
			t.Run("after-eof", func(t *testing.T) {
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) {}}
				h.onEOF = func(c *Conn) {
					c.Write([]byte("bye"))
					if err := c.CloseLinger(time.Hour, 1<<20); err != nil {
						t.Errorf("CloseLinger after OnEOF: %v", err)
					}
				}
				_, addr := startEngine(t, testConfig(b), h)
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.Write([]byte("request"))
				waitFor(t, "OnData", func() bool { return h.reads.Load() == 1 })
				c.(*net.TCPConn).CloseWrite()
				if got, err := readReply(c); err != nil || string(got) != "okbye" {
					t.Fatalf("read %q, %v; want okbye and the server's FIN", got, err)
				}
				waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
				if h.errs.Load() != 0 {
					t.Errorf("OnClose with an error")
				}
			})
			t.Run("peer-reset", func(t *testing.T) {
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) { c.CloseLinger(time.Hour, 1<<20) }}
				_, addr := startEngine(t, testConfig(b), h)
				c := lingerClient(t, addr, "ok")
				c.Write([]byte("unread"))
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				// As after Close: the reset ends c, and OnClose has it.
				waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
				if err, _ := h.lastErr.Load().(error); !errors.Is(err, unix.ECONNRESET) {
					t.Errorf("OnClose after the peer's reset: %v, want ECONNRESET", err)
				}
			})
			t.Run("shutdown", func(t *testing.T) {
				h := &lingerHandler{reply: []byte("ok"), end: func(c *Conn) { c.CloseLinger(200*time.Millisecond, 1<<20) }}
				e, addr := startEngine(t, testConfig(b), h)
				lingerClient(t, addr, "ok")
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				if err := e.Shutdown(ctx); err != nil {
					t.Fatalf("Shutdown with a connection lingering: %v after %v", err, time.Since(start))
				}
				if h.closes.Load() != 1 || h.errs.Load() != 0 {
					t.Errorf("OnClose %d, errors %d", h.closes.Load(), h.errs.Load())
				}
			})
		})
	}
}

// lingerOverHWM: CloseLinger once the write queue (of copies, or of the
// received buffers themselves) has paused reading at the high-water mark.
func lingerOverHWM(t *testing.T, b Backend, zc bool) {
	var echoed, lingered atomic.Int64
	h := &BaseHandlerFunc{
		open: func(c *Conn) {
			unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
		},
		data: func(c *Conn, buf Buffer) bool {
			keep := false
			n := buf.Len()
			if zc {
				c.WriteBuffer(buf)
				keep = true
			} else {
				c.Write(buf.Bytes())
			}
			echoed.Add(int64(n))
			if c.paused&pauseHWM != 0 {
				lingered.Store(1)
				if err := c.CloseLinger(10*time.Second, 64<<20); err != nil {
					t.Errorf("CloseLinger: %v", err)
				}
			}
			return keep
		},
	}
	cfg := testConfig(b)
	cfg.WriteHighWater = 64 << 10
	_, addr := startEngine(t, cfg, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(16 << 10)
	sent := pattern(5, 8<<20)
	werr := make(chan error, 1)
	go func() {
		for p := sent; len(p) > 0; {
			n := min(len(p), 64<<10)
			if _, err := c.Write(p[:n]); err != nil {
				werr <- err
				return
			}
			p = p[n:]
		}
		werr <- c.(*net.TCPConn).CloseWrite()
	}()
	waitFor(t, "the high-water mark", func() bool { return lingered.Load() == 1 })
	got, rerr := readReply(c)
	if err := <-werr; err != nil {
		t.Errorf("the client's writes: %v", err)
	}
	if rerr != nil || int64(len(got)) != echoed.Load() || !bytes.Equal(got, sent[:len(got)]) {
		t.Errorf("read %d bytes (%v), want the %d echoed before CloseLinger and FIN", len(got), rerr, echoed.Load())
	}
	waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
}

// lingerDial: CloseLinger on a dialed connection, before its OnOpen (a
// Close: the dial is abandoned) and in it, after its request: what the
// server sends then is dropped, and its FIN ends the connection.
func lingerDial(t *testing.T, b Backend) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	srv := make(chan error, 1)
	go func() {
		c, err := gl.Accept()
		if err != nil {
			srv <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		req, err := io.ReadAll(c) // to the client's FIN
		if err != nil || string(req) != "request" {
			srv <- errors.Join(err, errors.New("server read "+string(req)))
			return
		}
		_, err = c.Write(make([]byte, 256<<10))
		srv <- err
	}()
	opens := atomic.Int64{}
	errc := make(chan error, 4)
	h := &BaseHandlerFunc{
		open: func(c *Conn) {
			opens.Add(1)
			c.Write([]byte("request"))
			if err := c.CloseLinger(10*time.Second, 1<<20); err != nil {
				errc <- err
			}
		},
		closed: func(c *Conn, err error) {
			if err != nil {
				errc <- err
			}
		},
	}
	e, _ := startEngine(t, testConfig(b), h)
	l := e.Loops()[0]
	// Before OnOpen: abandoned, OnClose(nil), no OnOpen.
	cl, _ := net.Listen("tcp", "127.0.0.1:0")
	defer cl.Close()
	l.Post(func() {
		c, err := l.Dial("tcp", cl.Addr().String(), time.Second)
		if err != nil {
			errc <- err
			return
		}
		if err := c.CloseLinger(time.Second, 1); err != nil {
			errc <- err
		}
		if err := c.CloseLinger(time.Second, 1); err == nil {
			errc <- errors.New("CloseLinger after an abandoned dial: nil, want net.ErrClosed")
		}
	})
	waitFor(t, "the abandoned dial's OnClose", func() bool { return h.closes.Load() == 1 })
	if opens.Load() != 0 {
		t.Errorf("OnOpen for an abandoned dial")
	}
	l.Post(func() {
		if _, err := l.Dial("tcp", gl.Addr().String(), time.Second); err != nil {
			errc <- err
		}
	})
	if err := <-srv; err != nil {
		t.Fatalf("the peer: %v", err)
	}
	waitFor(t, "OnClose", func() bool { return h.closes.Load() == 2 })
	if h.reads.Load() != 0 {
		t.Errorf("OnData %d times while lingering", h.reads.Load())
	}
	select {
	case err := <-errc:
		t.Errorf("%v", err)
	default:
	}
}

// lingerPost: CloseLinger from a function posted from another goroutine
// on an idle connection, twice, then Close.
func lingerPost(t *testing.T, b Backend) {
	conns := make(chan *Conn, 1)
	h := &lingerHandler{}
	oh := &BaseHandlerFunc{
		open:   func(c *Conn) { conns <- c },
		closed: func(c *Conn, err error) { h.OnClose(c, err) },
	}
	_, addr := startEngine(t, testConfig(b), oh)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-conns
	errc := make(chan error, 3)
	sc.Loop().Post(func() {
		errc <- sc.CloseLinger(50*time.Millisecond, 1<<20)
		errc <- sc.CloseLinger(time.Hour, 0)
	})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("CloseLinger again: %v, want nil", err)
	}
	if got, err := readReply(c); err != nil || len(got) != 0 {
		t.Fatalf("read %q, %v; want the server's FIN", got, err)
	}
	c.Write([]byte("x")) // within maxBytes of the first call
	waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
	if h.errs.Load() != 0 {
		t.Errorf("OnClose: %v", h.lastErr.Load())
	}
}

// TestCloseLingerTimeoutFromFIN: the timeout counts from the server's FIN,
// sent once the reply has drained, not from the CloseLinger call. The
// client reads nothing for four timeouts and sends a few bytes after the
// second: a timer started at CloseLinger would have closed c by then,
// which stops its reading, so that these bytes stay unread and the close
// that follows the drain resets the connection, cutting the reply.
func TestCloseLingerTimeoutFromFIN(t *testing.T) {
	const timeout = 250 * time.Millisecond
	reply := pattern(9, 8<<20)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			// Small socket buffers: the reply must not fit in them, or
			// it would drain, and the FIN go out, before the client
			// reads.
			h := &lingerHandler{
				reply: reply,
				open:  func(c *Conn) { unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<10) },
				end:   func(c *Conn) { c.CloseLinger(timeout, 64<<20) },
			}
			_, addr := startEngine(t, testConfig(b), h)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
			if _, err := c.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * timeout)
			if _, err := c.Write(make([]byte, 1<<10)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * timeout)
			if h.closes.Load() != 0 {
				t.Fatalf("closed before the reply drained")
			}
			got, err := readReply(c)
			if err != nil || !bytes.Equal(got, reply) {
				t.Fatalf("read %d of %d reply bytes (equal: %v), then %v", len(got), len(reply), bytes.Equal(got, reply), err)
			}
			waitFor(t, "OnClose", func() bool { return h.closes.Load() == 1 })
			if h.errs.Load() != 0 || h.eofs.Load() != 0 || h.reads.Load() != 1 {
				t.Errorf("OnClose errors %d, OnEOF %d, OnData %d (want 1)", h.errs.Load(), h.eofs.Load(), h.reads.Load())
			}
		})
	}
}

// TestConnSize: a Conn fits the allocator's 256-byte size class, as it did
// before CloseLinger's fields; the next class is 288 bytes, 32 more for
// every connection (TestIdleConns).
func TestConnSize(t *testing.T) {
	if strconv.IntSize != 64 {
		t.Skip("the size is for 64-bit platforms")
	}
	if n := reflect.TypeFor[Conn]().Size(); n > 256 {
		t.Errorf("Conn is %d bytes, more than the 256-byte size class", n)
	}
}

// TestReset: Reset drops what is queued and the peer sees a reset, not the
// data and an end of stream; it also cuts short a Close still sending its
// queue to a peer that does not read, which a plain Close would wait on.
func TestReset(t *testing.T) {
	reply := pattern(5, 8<<20)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, after := range []string{"write", "close"} {
				var resetErr atomic.Value
				h := &lingerHandler{reply: reply, end: func(c *Conn) {
					if after == "close" {
						c.Close()
					}
					// Later, with the reply still queued (the client reads
					// nothing): the reset must not wait for it.
					c.Loop().AfterFunc(50*time.Millisecond, func() {
						if err := c.Reset(); err != nil {
							resetErr.Store(err)
						}
					})
				}}
				_, addr := startEngine(t, testConfig(b), h)
				c := mustDial(t, "tcp", addr)
				if _, err := c.Write([]byte("request")); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "OnClose after Reset", func() bool { return h.closes.Load() == 1 })
				if err, _ := resetErr.Load().(error); err != nil {
					t.Fatalf("after %s: Reset: %v", after, err)
				}
				if h.errs.Load() != 0 {
					t.Errorf("after %s: OnClose got an error after Reset", after)
				}
				got, err := readReply(c)
				if !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("after %s: the client read %d of %d bytes, then %v; want a reset", after, len(got), len(reply), err)
				}
			}
		})
	}
}

// TestQueuedMemory: a received buffer queued with WriteBuffer adds its
// bytes to Buffered and a whole buffer to QueuedMemory, the memory the
// high-water mark caps: a queue of small forwarded messages reaches the
// mark in memory long before it does in bytes (a proxy pausing on Buffered
// held 1.1 MiB of buffers under a 64 KiB mark).
func TestQueuedMemory(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.ReadBufferSize = 4 << 10
			type delta struct{ bytes, mem int }
			res := make(chan delta, 1)
			h := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
				q0, m0 := c.Buffered(), c.QueuedMemory()
				n := b.Len()
				c.WriteBuffer(b) // sent at the end of the iteration, not before
				res <- delta{c.Buffered() - q0 - n, c.QueuedMemory() - m0}
				return true
			}}
			_, addr := startEngine(t, cfg, h)
			c := mustDial(t, "tcp", addr)
			c.Write([]byte("x"))
			d := <-res
			if d.bytes != 0 {
				t.Errorf("Buffered grew by %d bytes more than the message", d.bytes)
			}
			if d.mem < cfg.ReadBufferSize {
				t.Errorf("a 1-byte received buffer adds %d bytes to QueuedMemory, want a whole buffer (%d)", d.mem, cfg.ReadBufferSize)
			}
		})
	}
}
