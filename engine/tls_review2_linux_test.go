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
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
					errs := make(chan error, 4)
					h := &BaseHandlerFunc{
						data: func(c *Conn, b Buffer) bool {
							c.Write(b.Bytes())
							return false
						},
						closed: func(c *Conn, err error) { errs <- err },
					}
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
