package engine

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// lingerHandler answers a connection's first data with reply and then calls
// end (CloseLinger, or Close to see what it prevents); it counts OnData,
// OnEOF and OnClose and keeps OnClose's last error.
type lingerHandler struct {
	BaseHandler
	reply  []byte
	end    func(c *Conn)
	reads  atomic.Int64
	eofs   atomic.Int64
	closes atomic.Int64
	errs   atomic.Int64
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
	c.Close()
}

func (h *lingerHandler) OnClose(c *Conn, err error) {
	if err != nil {
		h.errs.Add(1)
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
