package engine

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// keepUntilEOF keeps what a TLS connection delivers until its peer's end of
// stream, then writes it back and closes; plain connections it only hands
// to opened, and closes at their end of stream (the slow reader's, once
// it has read all and the test's deferred Close runs before the engine
// stops).
type keepUntilEOF struct {
	BaseHandlerFunc
	opened chan *Conn
}

func (h *keepUntilEOF) OnOpen(c *Conn) {
	if c.TLS() != nil {
		c.SetContext(&[]Buffer{})
	}
	h.opened <- c
}

func (h *keepUntilEOF) OnData(c *Conn, b Buffer) bool {
	kept := c.Context().(*[]Buffer)
	*kept = append(*kept, b)
	return true
}

func (h *keepUntilEOF) OnEOF(c *Conn) {
	kept, ok := c.Context().(*[]Buffer)
	if !ok {
		c.Close()
		return
	}
	for _, b := range *kept {
		c.Write(b.Bytes())
		b.Release()
	}
	*kept = nil
	c.Close()
}

func (h *keepUntilEOF) OnClose(c *Conn, err error) {
	if kept, ok := c.Context().(*[]Buffer); ok {
		for _, b := range *kept {
			b.Release()
		}
		*kept = nil
	}
	h.BaseHandlerFunc.OnClose(c, err)
}

// TestTLSReadWaitsForSlabChunk: a TLS connection decrypts into chunks of
// its loop's send slab. Here the slab cannot grow (its mapping fails with
// ENOMEM) and a slow reader's write queue holds every chunk but one, which
// the first decryption (on epoll, the first read) takes; three TLS clients
// then send a message, close_notify and their FIN, which find no chunk. The
// connection that found none was reset ("cannot allocate memory"), where
// a plain one waits. Each now waits, the loop not spinning meanwhile (a
// handful of waits in 300 ms), nor after a pause and resume, and one
// closed meanwhile leaves the list; once the slow reader reads, or with no
// chunk given back once the slab can grow again (a try every
// starveRetry), the two still open decrypt the rest and echo the message.
func TestTLSReadWaitsForSlabChunk(t *testing.T) {
	for _, b := range testBackends {
		for _, mode := range []string{"reader reads", "slab grows"} {
			t.Run(string(b)+"/"+mode, func(t *testing.T) {
				h := &keepUntilEOF{opened: make(chan *Conn, 4)}
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				cfg.ReadBufferSize = 4 << 10
				cfg.CloseTimeout = -1 // no sweep to wake the loop
				e := newEngine(t, cfg, h)
				plain, err := e.Listen("tcp", "127.0.0.1:0", nil)
				if err != nil {
					t.Fatal(err)
				}
				secure, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: serverTLS()})
				if err != nil {
					t.Fatal(err)
				}
				runEngine(t, e)
				l := e.Loops()[0]

				// The handshakes first: they need chunks too.
				var clients []*tls.Conn
				var conns []*Conn
				for range 3 {
					c, err := dialTLS(secure.Addr().String(), clientTLS(tls.VersionTLS13))
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					clients = append(clients, c)
					conns = append(conns, <-h.opened)
				}
				slow, err := slowDialer().Dial("tcp", plain.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer slow.Close()
				sc := <-h.opened
				var spare int32
				onLoop(t, l, func() { spare, _ = l.chunks.get() })
				mapf := fillSlab(t, l, sc)
				onLoop(t, l, func() { l.chunks.put(spare) })

				msg := pattern(4, 1000)
				for _, c := range clients {
					if _, err := c.Write(msg); err != nil {
						t.Fatal(err)
					}
					// close_notify, then the socket's FIN: both come while
					// the connection waits.
					if err := c.CloseWrite(); err != nil {
						t.Fatal(err)
					}
					c.NetConn().(*net.TCPConn).CloseWrite()
				}
				waitFor(t, "the connections to find the slab empty", func() bool {
					return l.Stats().NoBufs >= 3 || h.closes.Load() > 0
				})
				if n := h.closes.Load(); n > 0 {
					t.Fatalf("%d connections closed as the slab ran out (%d found no chunk)", n, l.Stats().NoBufs)
				}
				onLoop(t, l, func() {
					conns[1].PauseRead()
					conns[1].ResumeRead()
					conns[2].Close()
				})
				waitFor(t, "the closed connection's OnClose", func() bool { return h.closes.Load() == 1 })
				listed, closedListed := 0, 0
				onLoop(t, l, func() {
					for _, c := range l.tlsStarved {
						switch {
						case c == nil:
						case c.Closed():
							closedListed++
						default:
							listed++
						}
					}
				})
				if closedListed > 0 {
					t.Errorf("%d closed connections still listed as waiting for a chunk", closedListed)
				}
				t.Logf("%d connections wait for a chunk", listed)
				w0 := l.Stats().Waits
				time.Sleep(300 * time.Millisecond)
				if w := l.Stats().Waits - w0; w >= 50 {
					t.Errorf("%d waits in 300 ms with the slab empty (%d found no chunk): the loop spins", w, l.Stats().NoBufs)
				}
				if n := h.closes.Load(); n != 1 {
					t.Fatalf("%d connections closed while the slab was empty, want the one closed", n)
				}

				if mode == "reader reads" {
					go io.Copy(io.Discard, slow)
				} else {
					onLoop(t, l, func() { l.chunks.mapf = mapf })
				}
				for i, c := range clients[:2] {
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					got, err := io.ReadAll(c)
					if err != nil {
						t.Fatalf("connection %d: the echo once the %s: %v (%d found no chunk)", i, mode, err, l.Stats().NoBufs)
					}
					if !bytes.Equal(got, msg) {
						t.Errorf("connection %d: the echo is %d bytes, want the %d-byte message", i, len(got), len(msg))
					}
				}
			})
		}
	}
}

// TestTLSStarvedPumpedWhenQuietSendFreesChunk: a TLS connection waiting
// for a send-slab chunk (tlsStarved) is pumped again before the wait that
// follows a chunk's return. A reply that went as a quiet SEND gives its
// chunk back only when the loop learns it was sent: a lone one, sent
// whole, posts no completion, and the wait does not end for a quiet
// chain's, so the loop slept with the chunk as good as free and the
// connection starved, until the next try with none free (starveRetry
// after the last) or anything else woke it. Here the slab cannot grow, a
// slow reader's queue holds every chunk, the TLS connection's message
// finds none, and the next try is put an hour away, so that only the
// reply's chunk can pump it: a plain connection is written a reply with
// the one chunk given back. The message was delivered only once that try
// came (the wait timed out here); now the wait that submits the reply does
// not sleep past it, and the chunk reaches the connection at once.
func TestTLSStarvedPumpedWhenQuietSendFreesChunk(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			opened := make(chan *Conn, 4)
			var delivered atomic.Int64
			h := &BaseHandlerFunc{
				open: func(c *Conn) { opened <- c },
				data: func(c *Conn, buf Buffer) bool {
					if c.TLS() != nil {
						delivered.Add(1)
					}
					return false
				},
			}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.ReadBufferSize = 4 << 10
			cfg.CloseTimeout = -1 // no sweep to wake the loop
			e := newEngine(t, cfg, h)
			plain, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			secure, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: serverTLS()})
			if err != nil {
				t.Fatal(err)
			}
			runEngine(t, e)
			l := e.Loops()[0]

			client, err := dialTLS(secure.Addr().String(), clientTLS(tls.VersionTLS13))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			<-opened
			peer := mustDial(t, "tcp", plain.Addr().String())
			pc := <-opened
			slow, err := slowDialer().Dial("tcp", plain.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			sc := <-opened
			var spare int32
			onLoop(t, l, func() { spare, _ = l.chunks.get() })
			fillSlab(t, l, sc)

			if _, err := client.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the TLS connection to find the slab empty", func() bool { return l.Stats().NoBufs > 0 })
			reply := []byte("reply")
			onLoop(t, l, func() {
				l.starvedTry = starveTry(nanotime() + int64(time.Hour))
				l.chunks.put(spare)
				if _, err := pc.Write(reply); err != nil {
					t.Errorf("the reply: %v", err)
				}
			})
			got := make([]byte, len(reply))
			peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(peer, got); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for delivered.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the TLS connection's message not delivered 5 s after the reply's chunk came back (quiet waits %d, settled without a completion %d)", l.Stats().QuietWaits, l.Stats().QuietSkipped)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
}
