package engine

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// refused dials address and reports whether the server reset the
// connection: the dial, or a read after it, gets ECONNRESET (the reset may
// come before Go's connect has checked the socket).
func refused(t *testing.T, address string) error {
	c, err := net.Dial("tcp", address)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			return nil
		}
		return err
	}
	defer c.Close()
	return readsReset(c)
}

// readsReset reports whether c's peer reset it: a read gets ECONNRESET
// (within 20 s) rather than data, an orderly end or nothing.
func readsReset(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := c.Read(make([]byte, 1))
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return nil
	case n > 0:
		return errors.New("read data")
	case err == io.EOF:
		return errors.New("read an orderly end (FIN), not a reset")
	}
	return fmt.Errorf("read: %v, want ECONNRESET", err)
}

// waiting reports whether c is still open with nothing to read: a read
// with a short deadline times out.
func waiting(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestTLSMaxHandshakes: a TLS listener with MaxHandshakes n holds n
// handshakes at most, across the engine's loops: of n+k clients that
// connect and send nothing, the first n wait in their handshakes and the
// other k are reset at once, counted in Stats.TLSHandshakesRefused, with
// no handshake goroutine and nothing for the handler; once a handshake
// ends (it succeeds, the client goes away, or it times out) the next
// client is admitted.
func TestTLSMaxHandshakes(t *testing.T) {
	const n, k = 4, 6
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &tlsFailHandler{errs: make(chan error, 64)}
			lc := &ListenConfig{TLS: serverTLS(), HandshakeTimeout: time.Minute, MaxHandshakes: n}
			e, addr := startTLSEngine(t, testConfig(b), h, lc)
			// in reports the handshakes in progress and those refused.
			in := func() (int64, uint64) {
				s := e.Stats()
				return s.TLSHandshakes, s.TLSHandshakesRefused
			}
			var held []net.Conn
			for i := range n {
				held = append(held, mustDial(t, "tcp", addr))
				waitFor(t, "the accept", func() bool { hs, _ := in(); return hs == int64(i+1) })
			}
			for i := range k {
				if err := refused(t, addr); err != nil {
					t.Errorf("client %d, past the cap: %v", n+i, err)
				}
			}
			if hs, refused := in(); hs != n || refused != k {
				t.Errorf("%d handshakes in progress, %d refused; want %d, %d", hs, refused, n, k)
			}
			if g := handshakeGoroutines(); g != n {
				t.Errorf("%d handshake goroutines, want %d", g, n)
			}
			for i, c := range held {
				if !waiting(c) {
					t.Errorf("client %d, within the cap, was not left waiting", i)
				}
			}
			if s := e.Stats(); s.Accepted != n {
				t.Errorf("Stats.Accepted %d, want %d: a refused connection is not accepted", s.Accepted, n)
			}

			// A handshake that succeeds frees its place.
			tc := tls.Client(held[0], clientTLS(0))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the handshake's end", func() bool { hs, _ := in(); return hs == n-1 })
			// The count falls before the loop opens the connection (a
			// post, run late when the loop's CPU is busy).
			waitFor(t, "OnOpen", func() bool { return h.opens.Load() == 1 })
			next := mustDial(t, "tcp", addr)
			waitFor(t, "the next client admitted", func() bool { hs, _ := in(); return hs == n })
			if !waiting(next) {
				t.Error("the client after a handshake succeeded was not admitted")
			}
			// So does one whose client goes away.
			held[1].Close()
			waitFor(t, "OnClose", func() bool { return len(h.errs) == 1 })
			waitFor(t, "the handshake's end", func() bool { hs, _ := in(); return hs == n-1 })
			mustDial(t, "tcp", addr)
			waitFor(t, "the next client admitted", func() bool { hs, _ := in(); return hs == n })
			// And one past the cap is still refused.
			if err := refused(t, addr); err != nil {
				t.Errorf("past the cap again: %v", err)
			}
			if _, refused := in(); refused != k+1 {
				t.Errorf("%d refused, want %d", refused, k+1)
			}
			if o := h.opens.Load(); o != 1 {
				t.Errorf("%d OnOpen, want 1", o)
			}
		})
	}
}

// TestTLSMaxHandshakesTimeout: handshakes that time out free their places
// too: a full listener admits new clients once its handshakes' timeout
// has passed.
func TestTLSMaxHandshakesTimeout(t *testing.T) {
	const n = 3
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &tlsFailHandler{errs: make(chan error, 64)}
			lc := &ListenConfig{TLS: serverTLS(), HandshakeTimeout: 200 * time.Millisecond, MaxHandshakes: n}
			e, addr := startTLSEngine(t, testConfig(b), h, lc)
			for round := range 3 {
				for range n {
					mustDial(t, "tcp", addr)
				}
				for range n {
					if err := <-h.errs; !errors.Is(err, os.ErrDeadlineExceeded) {
						t.Errorf("round %d: OnClose %v, want the handshake timeout", round, err)
					}
				}
				waitFor(t, "the handshakes' end", func() bool { return e.Stats().TLSHandshakes == 0 })
			}
			if s := e.Stats(); s.TLSHandshakesRefused != 0 || s.Accepted != 3*n {
				t.Errorf("%d refused, %d accepted; want 0, %d", s.TLSHandshakesRefused, s.Accepted, 3*n)
			}
		})
	}
}

// TestTLSMaxHandshakesDefault: 0 is 1024 a loop, for the listener as a
// whole; a negative MaxHandshakes sets no cap.
func TestTLSMaxHandshakesDefault(t *testing.T) {
	e := newEngine(t, testConfig(BackendEpoll), &BaseHandler{})
	runEngine(t, e)
	for _, tc := range []struct {
		set  int
		want int64
	}{{0, 1024 * int64(len(e.Loops()))}, {-1, -1}, {7, 7}} {
		ln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: serverTLS(), MaxHandshakes: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		if ln.maxHandshakes != tc.want {
			t.Errorf("MaxHandshakes %d: the cap is %d, want %d", tc.set, ln.maxHandshakes, tc.want)
		}
	}
	// Uncapped: 2n silent clients all wait in their handshakes.
	ln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: serverTLS(), MaxHandshakes: -1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 256
	before := heapInUse()
	for range n {
		mustDial(t, "tcp", ln.Addr().String())
	}
	waitFor(t, "the handshakes", func() bool { return e.Stats().TLSHandshakes == n })
	// What a place costs: the default's memory. The clients' net.Conns
	// are counted in it too.
	t.Logf("%d bytes of heap and stacks a stalled handshake", (heapInUse()-before)/n)
	if r := e.Stats().TLSHandshakesRefused; r != 0 {
		t.Errorf("%d refused without a cap", r)
	}
}

// heapInUse is the heap and goroutine stack memory in use after a GC.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// TestTLSCallbackPanic: a panic in a callback of a TLS listener's config,
// which runs on the handshake's goroutine, fails that handshake (OnClose
// alone, with a *HandshakePanicError saying the value and where it came
// from, counted in Stats.TLSHandshakePanics) rather than the process; the
// next client is served. Each callback panics on its first call.
func TestTLSCallbackPanic(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, cb := range []string{"GetCertificate", "GetConfigForClient", "VerifyPeerCertificate", "VerifyConnection"} {
				t.Run(cb, func(t *testing.T) {
					var calls atomic.Int64
					boom := func() {
						if calls.Add(1) == 1 {
							panic("boom in " + cb)
						}
					}
					scfg := serverTLS()
					ccfg := clientTLS(0)
					switch cb {
					case "GetCertificate":
						leaf := scfg.Certificates[0]
						scfg.Certificates = nil
						scfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
							boom()
							return &leaf, nil
						}
					case "GetConfigForClient":
						scfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
							boom()
							return nil, nil
						}
					case "VerifyPeerCertificate":
						scfg.ClientAuth = tls.RequireAnyClientCert
						ccfg.Certificates = []tls.Certificate{testCA().client}
						scfg.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error {
							boom()
							return nil
						}
					case "VerifyConnection":
						scfg.VerifyConnection = func(tls.ConnectionState) error {
							boom()
							return nil
						}
					}
					h, errs := echoErrs()
					e, addr := startTLSEngine(t, testConfig(b), h, &ListenConfig{TLS: scfg})
					if c, err := dialTLS(addr, ccfg); err == nil {
						// TLS 1.3: the client is done before the server
						// has read its Finished (VerifyPeerCertificate,
						// VerifyConnection); the server then closes.
						c.SetReadDeadline(time.Now().Add(20 * time.Second))
						if _, err := c.Read(make([]byte, 1)); err == nil {
							t.Error("the client read data from a handshake that panicked")
						}
						c.Close()
					}
					err := <-errs
					var pe *HandshakePanicError
					if !errors.As(err, &pe) || pe.Value != "boom in "+cb {
						t.Fatalf("OnClose: %v, want a *HandshakePanicError with the value", err)
					}
					msg := err.Error()
					t.Log(msg)
					if !strings.Contains(msg, "panic") || !strings.Contains(msg, "boom in "+cb) || !strings.Contains(msg, "TestTLSCallbackPanic") {
						t.Errorf("OnClose: %q, want the panic, its value and the function it came from", msg)
					}
					if !bytes.Contains(pe.Stack, []byte("crypto/tls")) {
						t.Errorf("the panic's stack does not show crypto/tls:\n%s", pe.Stack)
					}
					if n := h.reads.Load(); n != 0 {
						t.Errorf("%d OnData for the handshake that panicked", n)
					}
					c, err := dialTLS(addr, ccfg)
					if err != nil {
						t.Fatalf("the next client: %v", err)
					}
					defer c.Close()
					if err := roundTrip(c, []byte("ping")); err != nil {
						t.Fatal(err)
					}
					if s := e.Stats(); s.TLSHandshakePanics != 1 {
						t.Errorf("Stats.TLSHandshakePanics %d, want 1", s.TLSHandshakePanics)
					}
				})
			}
		})
	}
}

// TestDialTLSCallbackPanic: a panic in a DialTLS config's callback (the
// client's VerifyConnection) fails that dial alone, as on a listener.
func TestDialTLSCallbackPanic(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, h := startDialer(t, b)
			peer := startGoTLSPeer(t, serverTLS(), goEcho)
			var calls atomic.Int64
			cfg := clientTLS(0)
			cfg.VerifyConnection = func(tls.ConnectionState) error {
				if calls.Add(1) == 1 {
					panic(errors.New("boom"))
				}
				return nil
			}
			l := e.Loops()[0]
			dialTLSJob(h, l, peer.addr, 10*time.Second, cfg, &dialJob{data: []byte("ping"), window: 4})
			j := waitJob(t, h)
			var pe *HandshakePanicError
			if !errors.As(j.err, &pe) || j.opened || !strings.Contains(j.err.Error(), "boom") {
				t.Fatalf("OnClose: %v (opened %v), want a *HandshakePanicError with the value, no OnOpen", j.err, j.opened)
			}
			if errors.Unwrap(pe) == nil || errors.Unwrap(pe).Error() != "boom" {
				t.Errorf("the panic's error value is not unwrapped: %v", errors.Unwrap(pe))
			}
			j = &dialJob{data: []byte("ping"), window: 4}
			dialTLSJob(h, l, peer.addr, 10*time.Second, cfg, j)
			if j = waitJob(t, h); j.err != nil || !j.eof || j.got != 4 || j.bad != nil {
				t.Errorf("the next dial: OnClose %v, EOF %v, %d bytes echoed, %v", j.err, j.eof, j.got, j.bad)
			}
		})
	}
}

// resetErr reports whether err says the peer reset the connection (a
// write after the reset may get EPIPE instead).
func resetErr(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// TestTLSFromOnOpen: Write, Close, CloseWrite and Reset called in a TLS
// connection's OnOpen do on TLS what they do on a plain one: the client
// reads what was written, then close_notify (Close, CloseWrite: it can
// still send after CloseWrite), or a reset (Reset: nothing more, OnClose
// nil, no OnData).
func TestTLSFromOnOpen(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, op := range []string{"Write", "Close", "CloseWrite", "Reset"} {
				t.Run(op, func(t *testing.T) {
					errs := make(chan error, 1)
					var writeAfter atomic.Value
					got := make(chan string, 1)
					h := &BaseHandlerFunc{
						open: func(c *Conn) {
							switch op {
							case "Write":
								c.Write([]byte("hello"))
							case "Close":
								c.Write([]byte("bye"))
								c.Close()
							case "CloseWrite":
								c.Write([]byte("half"))
								c.CloseWrite()
								_, err := c.Write([]byte("more"))
								writeAfter.Store(fmt.Sprint(err))
							case "Reset":
								c.Write([]byte("lost"))
								c.Reset()
							}
						},
						data: func(c *Conn, b Buffer) bool {
							got <- string(b.Bytes())
							if op == "Write" {
								c.Write(b.Bytes())
							}
							return false
						},
						closed: func(c *Conn, err error) { errs <- err },
					}
					_, addr := startTLSEngine(t, testConfig(b), &eofCounter{BaseHandlerFunc: h, n: new(atomic.Int64)}, &ListenConfig{TLS: serverTLS()})
					raw := mustDial(t, "tcp", addr)
					c := tls.Client(raw, clientTLS(tls.VersionTLS13))
					c.SetDeadline(time.Now().Add(20 * time.Second))
					switch op {
					case "Write":
						buf := make([]byte, 5)
						if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
							t.Fatalf("read %q, %v; want hello", buf, err)
						}
						if err := roundTrip(c, []byte("echo")); err != nil {
							t.Fatal(err)
						}
						c.Close()
					case "Close":
						if all, err := io.ReadAll(c); err != nil || string(all) != "bye" {
							t.Errorf("read %q, %v; want bye, then close_notify", all, err)
						}
					case "CloseWrite":
						if all, err := io.ReadAll(c); err != nil || string(all) != "half" {
							t.Errorf("read %q, %v; want half, then close_notify", all, err)
						}
						if _, err := c.Write([]byte("still")); err != nil {
							t.Fatal(err)
						}
						if s := <-got; s != "still" {
							t.Errorf("OnData %q after CloseWrite, want still", s)
						}
						c.CloseWrite() // OnEOF: Close
						if w := writeAfter.Load(); w != net.ErrClosed.Error() {
							t.Errorf("Write after CloseWrite: %v, want %v", w, net.ErrClosed)
						}
					case "Reset":
						// The client's handshake is over before the server's
						// OnOpen (TLS 1.3), or fails on the reset.
						err := c.Handshake()
						var all []byte
						if err == nil {
							all, err = io.ReadAll(c)
						}
						if len(all) > 0 || !resetErr(err) {
							t.Errorf("read %q, %v; want nothing, a reset", all, err)
						}
					}
					if err := <-errs; err != nil {
						t.Errorf("OnClose: %v, want nil", err)
					}
					if op == "Reset" && h.reads.Load() != 0 {
						t.Errorf("%d OnData after Reset in OnOpen", h.reads.Load())
					}
				})
			}
		})
	}
}

// TestTLSResetMidStream: Reset from OnData while the client is still
// sending megabytes: no OnData after it, OnClose nil once, and the client
// sees the reset.
func TestTLSResetMidStream(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.ReadBufferSize = 4 << 10
			var afterReset atomic.Int64
			closes := make(chan error, 2)
			h := &BaseHandlerFunc{
				data: func(c *Conn, b Buffer) bool {
					if c.Context() != nil {
						afterReset.Add(1)
						return false
					}
					c.Write(b.Bytes())
					if c.Context() == nil && b.Len() > 0 {
						c.SetContext(true)
						if err := c.Reset(); err != nil {
							t.Errorf("Reset: %v", err)
						}
					}
					return false
				},
				closed: func(c *Conn, err error) { closes <- err },
			}
			_, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS()})
			c := mustDialTLS(t, addr, clientTLS(0))
			c.SetDeadline(time.Now().Add(20 * time.Second))
			_, werr := c.Write(pattern(5, 8<<20))
			all, rerr := io.ReadAll(c)
			if !resetErr(werr) && !resetErr(rerr) {
				t.Errorf("the client's write: %v, read: %v (%d bytes); want a reset", werr, rerr, len(all))
			}
			if err := <-closes; err != nil {
				t.Errorf("OnClose: %v, want nil", err)
			}
			if n := afterReset.Load(); n != 0 {
				t.Errorf("%d OnData after Reset", n)
			}
			if n := h.closes.Load(); n != 1 {
				t.Errorf("%d OnClose, want 1", n)
			}
		})
	}
}

// TestTLSWritev: Writev of several buffers, empty ones and ones larger
// than a record among them, reaches the client as their concatenation.
func TestTLSWritev(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			bufs := [][]byte{[]byte("head:"), nil, pattern(1, 40<<10), {}, []byte(":"), pattern(2, 100), pattern(3, 17<<10)}
			want := bytes.Join(bufs, nil)
			h := &BaseHandlerFunc{open: func(c *Conn) {
				if n, err := c.Writev(bufs); n != len(want) || err != nil {
					t.Errorf("Writev: %d, %v; want %d", n, err, len(want))
				}
				c.Close()
			}}
			_, addr := startTLSEngine(t, testConfig(b), h, &ListenConfig{TLS: serverTLS()})
			c := mustDialTLS(t, addr, clientTLS(0))
			c.SetDeadline(time.Now().Add(20 * time.Second))
			if all, err := io.ReadAll(c); err != nil || !bytes.Equal(all, want) {
				t.Errorf("read %d bytes, %v; want the %d bytes written", len(all), err, len(want))
			}
		})
	}
}

// TestTLSWriteBufferFrom: WriteBufferFrom with an offset on a TLS
// connection encrypts the buffer's bytes from the offset on (decrypted
// chunks of a record, here from 1 to 16 KiB); an offset at the buffer's
// end queues nothing, one past it fails and releases the buffer.
func TestTLSWriteBufferFrom(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.ReadBufferSize = 4 << 10
			var mu sync.Mutex
			var want []byte // what the handler queued: the bytes from each offset
			var bad atomic.Value
			var pastEnd atomic.Bool
			errc := make(chan error, 1)
			h := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
				if pastEnd.Load() {
					// An offset past the end: an error, the buffer released.
					errc <- c.WriteBufferFrom(b, b.Len()+1)
					return true
				}
				mu.Lock()
				defer mu.Unlock()
				off := min(3, b.Len())
				if b.Len()%2 == 1 {
					off = b.Len() // nothing to send
				}
				want = append(want, b.Bytes()[off:]...)
				if err := c.WriteBufferFrom(b, off); err != nil {
					bad.Store(err.Error())
				}
				return true
			}}
			ho := &eofCounter{BaseHandlerFunc: h, n: new(atomic.Int64)}
			_, addr := startTLSEngine(t, cfg, ho, &ListenConfig{TLS: serverTLS()})
			c := mustDialTLS(t, addr, clientTLS(0))
			c.SetDeadline(time.Now().Add(20 * time.Second))
			for i, n := range []int{1, 2, 3, 4, 5, 1000, 16 << 10, 40 << 10, 7} {
				if _, err := c.Write(pattern(uint64(i), n)); err != nil {
					t.Fatal(err)
				}
			}
			c.CloseWrite()
			all, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if w := bad.Load(); w != nil {
				t.Errorf("WriteBufferFrom: %v", w)
			}
			mu.Lock()
			if !bytes.Equal(all, want) {
				t.Errorf("read %d bytes, want the %d queued", len(all), len(want))
			}
			mu.Unlock()
			pastEnd.Store(true)
			c2 := mustDialTLS(t, addr, clientTLS(0))
			c2.Write([]byte("x"))
			if err := <-errc; !errors.Is(err, errOffset) {
				t.Errorf("WriteBufferFrom past the end: %v, want %v", err, errOffset)
			}
		})
	}
}

// TestTLSOnWritable: a TLS connection whose OnOpen queues past the
// high-water mark (1 MiB of records, a 64 KiB mark) pauses reading; what
// the client sends meanwhile waits, and once the client reads and the
// queue drains below half the mark, reading resumes (the held bytes are
// echoed) and OnWritable comes, once; the client reads everything.
func TestTLSOnWritable(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.WriteHighWater = 64 << 10
			big := pattern(4, 1<<20)
			var writables atomic.Int64
			h := &writableHandler{BaseHandlerFunc: BaseHandlerFunc{
				open: func(c *Conn) {
					for p := big; len(p) > 0; p = p[min(len(p), 16<<10):] {
						c.Write(p[:min(len(p), 16<<10)])
					}
				},
				data: func(c *Conn, b Buffer) bool {
					c.Write(b.Bytes())
					return false
				},
			}, writable: func(c *Conn) {
				if writables.Add(1) == 1 {
					c.Write([]byte("tail"))
				}
			}}
			e, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS()})
			c := mustDialTLS(t, addr, clientTLS(0))
			c.SetDeadline(time.Now().Add(20 * time.Second))
			waitFor(t, "the mark", func() bool { return e.Stats().PausedReads > 0 })
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			all := make([]byte, len(big)+8)
			if _, err := io.ReadFull(c, all); err != nil {
				t.Fatal(err)
			}
			// The echo of ping comes before or after the tail: an
			// epoll loop reads it once reading resumes, after OnWritable.
			if end := string(all[len(big):]); !bytes.Equal(all[:len(big)], big) || end != "pingtail" && end != "tailping" {
				t.Errorf("read %d bytes (ending %q), want the 1 MiB, then ping and tail", len(all), end)
			}
			c.Close()
			if n := writables.Load(); n != 1 {
				t.Errorf("%d OnWritable, want 1", n)
			}
		})
	}
}

// writableHandler is a BaseHandlerFunc with an OnWritable.
type writableHandler struct {
	BaseHandlerFunc
	writable func(c *Conn)
}

func (h *writableHandler) OnWritable(c *Conn) { h.writable(c) }

// connSet is a handler keeping its open connections, each loop's apart,
// to close them all; it counts OnOpen and OnClose with an error.
type connSet struct {
	BaseHandler
	mu     sync.Mutex
	open   map[*Loop][]*Conn
	opens  atomic.Int64
	closes atomic.Int64
	errs   atomic.Int64
}

func (h *connSet) OnOpen(c *Conn) {
	h.mu.Lock()
	h.open[c.Loop()] = append(h.open[c.Loop()], c)
	h.mu.Unlock()
	h.opens.Add(1)
}

func (h *connSet) OnClose(c *Conn, err error) {
	h.closes.Add(1)
	if err != nil {
		h.errs.Add(1)
	}
}

// closeAll closes every connection h has, on its loop.
func (h *connSet) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l, cs := range h.open {
		l.Post(func() {
			for _, c := range cs {
				c.Close()
			}
		})
	}
	h.open = map[*Loop][]*Conn{}
}

// idleClientEnv, set, makes TestHelperTLSIdleClient the client of
// TestTLSIdleConns: "address n mode", mode one of idleModes.
const idleClientEnv = "SPINDLE_TEST_IDLE_CLIENT"

// The idle clients' modes: plain TCP, TLS 1.3 with Go's default key
// exchange (X25519MLKEM768 first), and TLS 1.3 offering X25519 alone.
const (
	idlePlain  = "plain"
	idleTLS    = "tls"
	idleX25519 = "tls-x25519"
)

// TestHelperTLSIdleClient, in a child process of TestTLSIdleConns (whose
// process has too few descriptors for both ends of its connections),
// connects n clients, with a TLS 1.3 handshake each if asked, says
// "ready" and keeps their sockets open until its input ends.
func TestHelperTLSIdleClient(t *testing.T) {
	spec := os.Getenv(idleClientEnv)
	if spec == "" {
		t.Skip("helper process for TestTLSIdleConns")
	}
	var addr, mode string
	var n int
	if _, err := fmt.Sscan(spec, &addr, &n, &mode); err != nil {
		t.Fatal(err)
	}
	raws := make([]net.Conn, n)
	defer func() {
		for _, c := range raws {
			if c != nil {
				c.Close()
			}
		}
	}()
	const workers = 8
	for _, err := range concurrently(workers, func(w int) error {
		for i := w; i < n; i += workers {
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			raws[i] = raw
			if mode != idlePlain {
				// The parent's CA is not this process's (testCA).
				cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
				if mode == idleX25519 {
					cfg.CurvePreferences = []tls.CurveID{tls.X25519}
				}
				if err := tls.Client(raw, cfg).Handshake(); err != nil {
					return err
				}
			}
		}
		return nil
	}) {
		t.Fatal(err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
}

// idleConns has a child process connect n clients to addr, as mode says
// (idlePlain, idleTLS, idleX25519), and returns the heap grown by, per
// connection, once h has opened them all, and a function ending the
// child.
func idleConns(t *testing.T, h *connSet, addr string, n int, mode string) (int64, func()) {
	t.Helper()
	before := heapInUse()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTLSIdleClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s", idleClientEnv, addr, n, mode))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	ready := make(chan struct{})
	cmd.Stdout = &lineWatch{w: &out, line: "ready", seen: ready}
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	end := func() {
		stdin.Close()
		if err := <-exited; err != nil {
			t.Errorf("the client process: %v\n%s", err, out.String())
		}
	}
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("the client process ended before it was ready: %v\n%s", err, out.String())
	}
	waitFor(t, "OnOpen for all", func() bool { return h.opens.Load() == int64(n) })
	return (heapInUse() - before) / int64(n), end
}

// lineWatch passes what is written to w and closes seen when a line reads
// line.
type lineWatch struct {
	w    io.Writer
	line string
	seen chan struct{}
	buf  []byte
	once sync.Once
}

func (l *lineWatch) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if string(l.buf[:i]) == l.line {
			l.once.Do(func() { close(l.seen) })
		}
		l.buf = l.buf[i+1:]
	}
	return l.w.Write(p)
}

// idleConnsMany is how many connections TestTLSIdleConns opens on its
// first backend (10,000; 2,000 under -race), idleConnsFew on each of the
// others (2,000; 500 under -race, where the handshakes took most of the
// test's 2 to 3 minutes): what a connection keeps is the same on every backend,
// the handshake being the engine's one code (tls.go), and a kept record
// buffer (16 KiB) or handshake input (tlsKept) shows at 500 as at 2,000.
var idleConnsMany, idleConnsFew = func() (int, int) {
	if raceEnabled {
		return 2000, 500
	}
	return 10000, 2000
}()

// TestTLSIdleConns: 10,000 idle TLS 1.3 connections (2,000 under -race)
// on the first backend, 2,000 (500) on the others (idleConnsMany,
// idleConnsFew), their clients in a child process, are accepted and then
// closed by the server, cleanly (close_notify, OnClose nil for each, none
// left open); it logs the heap an idle one costs the server, and a plain
// one's (the same clients on a plain listener: about 0.3 KiB measured,
// with -race too). The clients of the first backend (uring, the default)
// make the handshakes real clients make, with an X25519MLKEM768 key share
// (a ClientHello of 1.5 KB); the others' offer X25519 alone (0.3 KB),
// cheaper under -race. The handshake is the engine's one code (tls.go)
// whatever the backend. Once open, no connection's transport keeps an
// input array (what fed the handshake) or the handshake's context. An
// idle one costs about 7 KiB more than a plain one with the default
// share, 4.4 KiB with X25519 (measured, with -race too): crypto/tls's two
// AES-GCM states and its Conn, and its record and handshake buffers,
// which keep the size of the largest record and handshake message read,
// the ClientHello's (3.4 KiB with the default share, 0.8 KiB with
// X25519), and which crypto/tls gives no way to release. The bounds, 10
// KiB and 7 KiB more (room for the allocator and for crypto/tls's own
// changes between Go releases), fail if a connection kept a record's
// buffer (16 KiB and more) or the handshake's state; the transport's
// handshake input (1.5 KiB with the default share) is checked directly.
func TestTLSIdleConns(t *testing.T) {
	for i, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			n, mode := idleConnsFew, idleX25519
			if i == 0 {
				n, mode = idleConnsMany, idleTLS
			}
			h := &connSet{open: map[*Loop][]*Conn{}}
			e := newEngine(t, testConfig(b), h)
			tln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: serverTLS()})
			if err != nil {
				t.Fatal(err)
			}
			pln, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			runEngine(t, e)
			plain, end := idleConns(t, h, pln.Addr().String(), n, idlePlain)
			h.closeAll()
			waitFor(t, "the plain ones closed", func() bool { return h.closes.Load() == int64(n) })
			end()
			h.opens.Store(0)
			tlsPer, end := idleConns(t, h, tln.Addr().String(), n, mode)
			t.Logf("%d idle connections: %d bytes of heap each for TLS 1.3 (clients %s), %d for plain TCP", n, tlsPer, mode, plain)
			if in, ctx := tlsKept(e); in != 0 || ctx != 0 {
				t.Errorf("of %d idle connections, %d keep an input array in their transport and %d their handshake's context; want none", n, in, ctx)
			}
			h.closeAll()
			waitFor(t, "all closed", func() bool { return h.closes.Load() == int64(2*n) })
			end()
			if s := e.Stats(); s.Open != 0 || h.errs.Load() != 0 || s.TLSHandshakes != 0 {
				t.Errorf("%d open, %d OnClose with an error, %d handshakes in progress; want none", s.Open, h.errs.Load(), s.TLSHandshakes)
			}
			bound := int64(7 << 10)
			if mode == idleTLS {
				bound = 10 << 10
			}
			if extra := tlsPer - plain; extra > bound {
				t.Errorf("an idle TLS connection (clients %s) costs %d bytes of heap more than a plain one, want at most %d more", mode, extra, bound)
			}
		})
	}
}

// tlsKept counts the TLS connections of e whose transport keeps an input
// array, and those that keep their handshake's context.
func tlsKept(e *Engine) (in, ctx int) {
	for _, l := range e.Loops() {
		done := make(chan struct{})
		l.Post(func() {
			for _, c := range l.conns {
				if c == nil || c.tls == nil {
					continue
				}
				c.tls.tr.mu.Lock()
				if cap(c.tls.tr.in) > 0 {
					in++
				}
				c.tls.tr.mu.Unlock()
				if c.tls.cancel != nil {
					ctx++
				}
			}
			close(done)
		})
		<-done
	}
	return in, ctx
}

// tlsHeld is the most ciphertext a TLS connection of e holds in its
// transport (received, not yet decrypted).
func tlsHeld(e *Engine) int {
	held := 0
	for _, l := range e.Loops() {
		res := make(chan int)
		l.Post(func() {
			most := 0
			for _, c := range l.conns {
				if c != nil && c.tls != nil {
					c.tls.tr.mu.Lock()
					most = max(most, len(c.tls.tr.in)-c.tls.tr.off+len(c.tls.tr.cur))
					c.tls.tr.mu.Unlock()
				}
			}
			res <- most
		})
		held = max(held, <-res)
	}
	return held
}

// TestTLSPausedInputCapped: what a client sends to a TLS connection whose
// reading is paused (PauseRead), as ciphertext the transport keeps on the
// Go heap, stops at what the receive in flight took (about the high-water
// mark): the engine stops receiving for it (the rest waits in the socket,
// then in the client's writes), and once reading resumes everything
// comes, in order. Paused for good until
// the socket holds 32 KiB the engine left there, then paused at every
// OnData with a Post resuming it; and paused at every OnData from the
// start.
func TestTLSPausedInputCapped(t *testing.T) {
	for _, b := range testBackends {
		for _, mode := range []string{"paused", "every"} {
			t.Run(string(b)+"/"+mode, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.WriteHighWater = 64 << 10
				cfg.ReadBufferSize = 4 << 10
				const total = 16 << 20
				var got, most atomic.Int64
				var paused atomic.Pointer[Conn]
				var bad, resume atomic.Bool
				resume.Store(mode == "every")
				h := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
					if !bytes.Equal(b.Bytes(), testStream(int(got.Load()), b.Len())) {
						bad.Store(true)
					}
					got.Add(int64(b.Len()))
					c.PauseRead()
					paused.Store(c)
					tr := &c.tls.tr
					most.Store(max(most.Load(), int64(len(tr.in)-tr.off)))
					if resume.Load() {
						c.Loop().Post(c.ResumeRead)
					}
					return false
				}}
				e, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS()})
				c := mustDialTLS(t, addr, clientTLS(0))
				werr := make(chan error, 1)
				go func() {
					_, err := c.Write(testStream(0, total))
					werr <- err
				}()
				if mode == "paused" {
					waitFor(t, "the pause", func() bool { return paused.Load() != nil })
					pc := paused.Load()
					// The socket's unread bytes: what the engine left there.
					inq := func() int {
						res := make(chan int)
						pc.Loop().Post(func() {
							n, _ := unix.IoctlGetInt(pc.Fd(), unix.SIOCINQ)
							res <- n
						})
						return <-res
					}
					waitFor(t, "the socket to hold 32 KiB", func() bool { return inq() >= 32<<10 })
					held := tlsHeld(e)
					t.Logf("paused, the transport holds %d bytes, the socket %d, of %d received and sent", held, inq(), got.Load())
					most.Store(max(most.Load(), int64(held)))
					resume.Store(true)
					pc.Loop().Post(pc.ResumeRead)
				}
				if err := recv(t, werr, "the client's write"); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "everything", func() bool { return got.Load() == total })
				t.Logf("the transport held %d bytes at most while paused", most.Load())
				if bad.Load() {
					t.Error("the data differs")
				}
				// What the receive in flight at the pause takes: about the
				// mark with the receive limit (6.17), else up to the
				// ring's buffers on uring (a multishot's burst before its
				// cancel), a receive's on epoll.
				limit := 2 * int64(cfg.WriteHighWater)
				if strings.HasPrefix(string(b), "uring") && !recvLimitUsable() {
					limit = defaultReadBuffers * int64(cfg.ReadBufferSize)
				}
				if most.Load() > limit {
					t.Errorf("the transport held %d bytes while paused, cap %d", most.Load(), limit)
				}
			})
		}
	}
}

// testStream is bytes [off, off+n) of a stream of 64 MiB that repeats
// testData.
func testStream(off, n int) []byte {
	d := testData()
	out := make([]byte, n)
	for i := 0; i < n; {
		i += copy(out[i:], d[(off+i)%len(d):])
	}
	return out
}

// mustDialTLS dials addr with TLS (cfg), failing the test on an error; the
// connection is closed when the test ends.
func mustDialTLS(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := dialTLS(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
