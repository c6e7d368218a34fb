package engine

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goTLSPeer is a server of Go's net and crypto/tls on loopback: each
// connection runs serve on a goroutine of its own, and the handshake's
// outcome (the server's view) goes to states. Closing the test closes the
// listener and every connection and waits for the goroutines.
type goTLSPeer struct {
	addr   string
	states chan tlsServed
}

// tlsServed is what a goTLSPeer saw of one connection's handshake.
type tlsServed struct {
	state tls.ConnectionState
	err   error
}

func startGoTLSPeer(t *testing.T, cfg *tls.Config, serve func(c *tls.Conn)) *goTLSPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &goTLSPeer{addr: ln.Addr().String(), states: make(chan tlsServed, 64)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, raw)
			mu.Unlock()
			wg.Go(func() {
				defer raw.Close()
				c := tls.Server(raw, cfg)
				err := c.Handshake()
				select {
				case p.states <- tlsServed{c.ConnectionState(), err}:
				default:
				}
				if err == nil && serve != nil {
					serve(c)
				}
			})
		}
	})
	return p
}

// goEcho echoes to the client's close_notify, then sends its own.
func goEcho(c *tls.Conn) {
	if _, err := io.Copy(c, c); err == nil {
		c.CloseWrite()
	}
}

// dialJob is one DialTLS connection of tlsDialer: it sends data in writes
// of at most 16 KiB, keeping at most window bytes not yet echoed, then
// CloseWrite; it checks the echo as it comes and closes at the peer's
// end.
type dialJob struct {
	data        []byte
	window      int
	sent, got   int
	shut        bool
	opened, eof bool
	early       int    // bytes written before OnOpen
	version     uint16 // the TLS version to expect, if not 0
	state       *tls.ConnectionState
	bad         error // the echo differs
	err         error // OnClose's
}

func (j *dialJob) pump(c *Conn) {
	for j.sent < len(j.data) && j.sent-j.got < j.window {
		n := min(len(j.data)-j.sent, 16<<10, j.window-(j.sent-j.got))
		if _, err := c.Write(j.data[j.sent : j.sent+n]); err != nil {
			j.bad = fmt.Errorf("write: %w", err)
			c.Close()
			return
		}
		j.sent += n
	}
	if j.sent == len(j.data) && !j.shut {
		j.shut = true
		if err := c.CloseWrite(); err != nil {
			j.bad = fmt.Errorf("CloseWrite: %w", err)
		}
	}
}

// tlsDialer is the handler of an engine dialing with DialTLS: each Conn's
// context is its *dialJob, given to done at OnClose.
type tlsDialer struct {
	opens atomic.Int64
	done  chan *dialJob
}

func newTLSDialer() *tlsDialer { return &tlsDialer{done: make(chan *dialJob, 64)} }

func (h *tlsDialer) OnOpen(c *Conn) {
	h.opens.Add(1)
	j := c.Context().(*dialJob)
	j.opened = true
	j.state = c.TLS()
	j.pump(c)
}

func (h *tlsDialer) OnData(c *Conn, b Buffer) bool {
	j := c.Context().(*dialJob)
	p := b.Bytes()
	if j.bad == nil && (j.got+len(p) > len(j.data) || !bytes.Equal(p, j.data[j.got:j.got+len(p)])) {
		j.bad = fmt.Errorf("echo differs at byte %d of %d", j.got, len(j.data))
	}
	j.got += len(p)
	j.pump(c)
	return false
}

func (h *tlsDialer) OnEOF(c *Conn) {
	c.Context().(*dialJob).eof = true
	c.Close()
}

func (h *tlsDialer) OnWritable(*Conn) {}

func (h *tlsDialer) OnClose(c *Conn, err error) {
	j, _ := c.Context().(*dialJob)
	if j == nil {
		return // DialTLS failed inside its call
	}
	j.err = err
	h.done <- j
}

// dialTLSJob dials address with DialTLS on loop l for j, writing its first
// window at once (before OnOpen); an error of the call itself is j's.
func dialTLSJob(h *tlsDialer, l *Loop, address string, timeout time.Duration, cfg *tls.Config, j *dialJob) {
	l.Post(func() {
		c, err := l.DialTLS("tcp", address, timeout, cfg)
		if err != nil {
			j.err = err
			h.done <- j
			return
		}
		c.SetContext(j)
		j.pump(c)
		j.early = j.sent
	})
}

// waitJob returns the next job h is done with, failing the test after 20 s
// (an OnClose that does not come).
func waitJob(t *testing.T, h *tlsDialer) *dialJob {
	t.Helper()
	return recv(t, h.done, "OnClose")
}

// recv returns what ch gives, failing the test when nothing comes in 20 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}

// silentServer listens on loopback and says nothing: connects succeed (the
// kernel completes them), handshakes wait. It closes when the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// startDialer runs an engine with a tlsDialer and no listener.
func startDialer(t *testing.T, b Backend) (*Engine, *tlsDialer) {
	t.Helper()
	h := newTLSDialer()
	e := newEngine(t, testConfig(b), h)
	runEngine(t, e)
	return e, h
}

// TestDialTLSEchoIntegrity: DialTLS connections, TLS 1.3 and 1.2,
// concurrently, each sending a random size from 1 B to 1 MB (the first
// window written before OnOpen, and all of it with its CloseWrite for
// the small ones) to an echo server, a Go net and crypto/tls one or
// another engine's TLS listener: the echo comes back exactly, then the
// server's close_notify (OnEOF), and OnClose gets nil.
func TestDialTLSEchoIntegrity(t *testing.T) {
	for _, b := range testBackends {
		for _, peer := range []string{"go", "engine"} {
			t.Run(string(b)+"/"+peer, func(t *testing.T) {
				var addr string
				if peer == "go" {
					addr = startGoTLSPeer(t, serverTLS(), goEcho).addr
				} else {
					cfg := testConfig(b)
					cfg.ReadBufferSize = 4 << 10 // records span receive buffers
					_, addr = startTLSEngine(t, cfg, &echoHandler{}, &ListenConfig{TLS: serverTLS()})
				}
				e, h := startDialer(t, b)
				const conns = 16
				jobs := make([]*dialJob, conns)
				for i := range jobs {
					size := 1 + (i*7919*131)%(1<<20)
					if i%4 == 0 {
						size = 1 + i
					}
					version := uint16(tls.VersionTLS13)
					if i%2 == 1 {
						version = tls.VersionTLS12
					}
					jobs[i] = &dialJob{data: pattern(uint64(i), size), window: 64 << 10, version: version}
					l := e.Loops()[i%len(e.Loops())]
					dialTLSJob(h, l, addr, 10*time.Second, clientTLS(version), jobs[i])
				}
				for range conns {
					j := waitJob(t, h)
					switch {
					case j.err != nil || j.bad != nil:
						t.Errorf("%d bytes: OnClose %v, %v", len(j.data), j.err, j.bad)
					case !j.opened || !j.eof || j.got != len(j.data):
						t.Errorf("%d bytes: opened %v, eof %v, echoed %d", len(j.data), j.opened, j.eof, j.got)
					case j.state == nil || j.state.Version != j.version:
						t.Errorf("%d bytes: TLS state %+v", len(j.data), j.state)
					}
				}
				if h.opens.Load() != conns {
					t.Errorf("%d OnOpen, want %d", h.opens.Load(), conns)
				}
				if jobs[0].early != len(jobs[0].data) || !jobs[0].shut {
					t.Errorf("the first connection wrote %d of %d bytes before OnOpen (shut %v)", jobs[0].early, len(jobs[0].data), jobs[0].shut)
				}
				if s := e.Stats(); s.Dialed != conns {
					t.Errorf("Dialed %d, want %d", s.Dialed, conns)
				}
			})
		}
	}
}

// TestDialTLSVerification: a server whose certificate the client's roots
// do not trust, and one dialed under a name its certificate lacks, each
// end the dial with OnClose alone and the x509 error; a dial by IP
// address without ServerName verifies the certificate's IP address and
// sends no SNI, one by "localhost" sends it; a Unix address without
// ServerName is refused at the call.
func TestDialTLSVerification(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			peer := startGoTLSPeer(t, serverTLS(), goEcho)
			e, h := startDialer(t, b)
			l := e.Loops()[0]
			dial := func(addr string, cfg *tls.Config) *dialJob {
				j := &dialJob{data: []byte("ping"), window: 4}
				dialTLSJob(h, l, addr, 10*time.Second, cfg, j)
				j2 := waitJob(t, h)
				if j2 != j {
					t.Fatal("another dial's OnClose")
				}
				return j
			}
			t.Run("untrusted", func(t *testing.T) {
				cfg := clientTLS(0)
				cfg.RootCAs = newTestPKI().roots
				j := dial(peer.addr, cfg)
				var verr *tls.CertificateVerificationError
				var uerr x509.UnknownAuthorityError
				if j.opened || !errors.As(j.err, &verr) || !errors.As(j.err, &uerr) {
					t.Errorf("opened %v, OnClose %v; want no OnOpen, an unknown authority error", j.opened, j.err)
				}
				if s := recv(t, peer.states, "the server's handshake"); s.err == nil {
					t.Error("the server's handshake succeeded")
				}
			})
			t.Run("wrong-name", func(t *testing.T) {
				cfg := clientTLS(0)
				cfg.ServerName = "other.test"
				j := dial(peer.addr, cfg)
				var herr x509.HostnameError
				if j.opened || !errors.As(j.err, &herr) {
					t.Errorf("opened %v, OnClose %v; want no OnOpen, a hostname error", j.opened, j.err)
				}
				recv(t, peer.states, "the server's handshake")
			})
			_, port, _ := net.SplitHostPort(peer.addr)
			for _, host := range []string{"127.0.0.1", "localhost"} {
				t.Run("default-name-"+host, func(t *testing.T) {
					cfg := clientTLS(0)
					cfg.ServerName = ""
					j := dial(net.JoinHostPort(host, port), cfg)
					if j.err != nil || !j.opened || j.got != 4 {
						t.Fatalf("opened %v, echoed %d, OnClose %v", j.opened, j.got, j.err)
					}
					want := "" // no SNI for an IP address
					if host == "localhost" {
						want = host
					}
					if sni := recv(t, peer.states, "the server's handshake").state.ServerName; sni != want {
						t.Errorf("the server got SNI %q, want %q", sni, want)
					}
				})
			}
			t.Run("unix-no-name", func(t *testing.T) {
				res := make(chan error, 1)
				l.Post(func() {
					_, err := l.DialTLS("unix", "/nonexistent", time.Second, &tls.Config{RootCAs: testCA().roots})
					res <- err
				})
				if err := <-res; err == nil {
					t.Error("DialTLS to a Unix socket without ServerName: no error")
				}
			})
			if n := h.opens.Load(); n != 2 {
				t.Errorf("%d OnOpen, want 2 (the default names)", n)
			}
		})
	}
}

// TestDialTLSClientCertificate: a server that requires and verifies the
// client's certificate (mTLS) gets the one DialTLS's config carries, and
// the echo goes through; without one, the connection ends with an error
// (TLS 1.2: the handshake; TLS 1.3, whose client finishes first: the
// server's alert after OnOpen).
func TestDialTLSClientCertificate(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			scfg := serverTLS()
			scfg.ClientAuth = tls.RequireAndVerifyClientCert
			scfg.ClientCAs = testCA().roots
			peer := startGoTLSPeer(t, scfg, goEcho)
			e, h := startDialer(t, b)
			for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
				cfg := clientTLS(version)
				cfg.Certificates = []tls.Certificate{testCA().client}
				j := &dialJob{data: pattern(5, 100<<10), window: 32 << 10}
				dialTLSJob(h, e.Loops()[0], peer.addr, 10*time.Second, cfg, j)
				waitJob(t, h)
				if j.err != nil || j.bad != nil || j.got != len(j.data) || !j.eof {
					t.Errorf("TLS %x with a certificate: OnClose %v, %v, echoed %d of %d", version, j.err, j.bad, j.got, len(j.data))
				}
				s := recv(t, peer.states, "the server's handshake")
				if s.err != nil || len(s.state.VerifiedChains) == 0 || s.state.PeerCertificates[0].Subject.CommonName != "spindle test client" {
					t.Errorf("TLS %x: the server's handshake: %v, verified chains %d", version, s.err, len(s.state.VerifiedChains))
				}

				j = &dialJob{data: []byte("ping"), window: 4}
				dialTLSJob(h, e.Loops()[0], peer.addr, 10*time.Second, clientTLS(version), j)
				waitJob(t, h)
				if j.err == nil {
					t.Errorf("TLS %x without a certificate: OnClose nil (opened %v, echoed %d)", version, j.opened, j.got)
				}
				if s := recv(t, peer.states, "the server's handshake"); s.err == nil {
					t.Errorf("TLS %x without a certificate: the server's handshake succeeded", version)
				}
			}
		})
	}
}

// TestDialTLSHandshakeTimeout: a server that accepts and says nothing; the
// dial's timeout, which bounds connect and handshake together, ends the
// handshake: OnClose alone, with a tls handshake error wrapping
// os.ErrDeadlineExceeded.
func TestDialTLSHandshakeTimeout(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			silent := silentServer(t)
			e, h := startDialer(t, b)
			j := &dialJob{data: []byte("ping"), window: 4}
			dialTLSJob(h, e.Loops()[0], silent, 200*time.Millisecond, clientTLS(0), j)
			waitJob(t, h)
			var oerr *net.OpError
			if j.opened || !errors.Is(j.err, os.ErrDeadlineExceeded) || !errors.As(j.err, &oerr) || oerr.Op != "tls handshake" {
				t.Errorf("opened %v, OnClose %v; want no OnOpen, a tls handshake error wrapping os.ErrDeadlineExceeded", j.opened, j.err)
			}
			if e.Stats().Dialed != 1 {
				t.Errorf("Dialed %d: the connect did not succeed", e.Stats().Dialed)
			}
			waitFor(t, "the handshake goroutine to end", func() bool { return handshakeGoroutines() == 0 })
		})
	}
}

// TestDialTLSSessionResumption: two dials with one config, whose
// ClientSessionCache DialTLS's clone shares: the second resumes the
// first's session, TLS 1.3 and 1.2.
func TestDialTLSSessionResumption(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			peer := startGoTLSPeer(t, serverTLS(), goEcho)
			e, h := startDialer(t, b)
			for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
				cfg := clientTLS(version)
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
				for i, resumed := range []bool{false, true} {
					// A round trip: the client reads the session ticket.
					j := &dialJob{data: []byte("ping"), window: 4}
					dialTLSJob(h, e.Loops()[0], peer.addr, 10*time.Second, cfg, j)
					waitJob(t, h)
					if j.err != nil || j.state == nil {
						t.Fatalf("TLS %x, dial %d: OnClose %v, state %v", version, i, j.err, j.state)
					}
					s := recv(t, peer.states, "the server's handshake")
					if j.state.DidResume != resumed || s.state.DidResume != resumed {
						t.Errorf("TLS %x, dial %d: resumed %v (server: %v), want %v", version, i, j.state.DidResume, s.state.DidResume, resumed)
					}
				}
			}
		})
	}
}

// TestDialTLSHalfClose: the dialing side's CloseWrite is close_notify,
// after which the server still writes and the client reads it, then the
// server's end; and the server ending first (close_notify) is OnEOF,
// after which the client still writes and the server reads it.
func TestDialTLSHalfClose(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			got := make(chan string, 2)
			peer := startGoTLSPeer(t, serverTLS(), func(c *tls.Conn) {
				if c.ConnectionState().ServerName == "localhost" {
					// The client ends first.
					all, err := io.ReadAll(c)
					got <- fmt.Sprintf("%s %v", all, err)
					c.Write([]byte("bye"))
					c.CloseWrite()
					return
				}
				// The server ends first.
				c.Write([]byte("hello"))
				c.CloseWrite()
				all, err := io.ReadAll(c)
				got <- fmt.Sprintf("%s %v", all, err)
			})
			var eofs atomic.Int64
			data := make(chan string, 4)
			closed := make(chan error, 2)
			h := &eofCounter{BaseHandlerFunc: &BaseHandlerFunc{
				data: func(c *Conn, b Buffer) bool {
					data <- string(b.Bytes())
					return false
				},
				closed: func(c *Conn, err error) { closed <- err },
			}, n: &eofs}
			e := newEngine(t, testConfig(b), &halfCloser{eofCounter: h})
			runEngine(t, e)
			l := e.Loops()[0]

			// The client ends first: CloseWrite, even before OnOpen.
			l.Post(func() {
				c, err := l.DialTLS("tcp", peer.addr, 10*time.Second, clientTLS(0))
				if err != nil {
					closed <- err
					return
				}
				c.Write([]byte("hi"))
				c.CloseWrite()
				if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
					t.Errorf("Write after CloseWrite: %v, want net.ErrClosed", err)
				}
			})
			if s := recv(t, got, "what the server read"); s != "hi <nil>" {
				t.Errorf("the server read %q, want hi and the close_notify", s)
			}
			if s := recv(t, data, "OnData"); s != "bye" {
				t.Errorf("the client read %q after its CloseWrite, want bye", s)
			}
			if err := recv(t, closed, "OnClose"); err != nil || eofs.Load() != 1 {
				t.Errorf("OnClose %v after %d OnEOF; want nil after 1", err, eofs.Load())
			}

			// The server ends first: OnEOF, then the client writes.
			cfg := clientTLS(0)
			cfg.ServerName = "example.test"
			l.Post(func() {
				c, err := l.DialTLS("tcp", peer.addr, 10*time.Second, cfg)
				if err != nil {
					closed <- err
					return
				}
				c.SetContext("after")
			})
			if s := recv(t, data, "OnData"); s != "hello" {
				t.Errorf("the client read %q, want hello", s)
			}
			if s := recv(t, got, "what the server read"); s != "after <nil>" {
				t.Errorf("the server read %q after its CloseWrite, want after and the close_notify", s)
			}
			if err := recv(t, closed, "OnClose"); err != nil || eofs.Load() != 2 {
				t.Errorf("OnClose %v after %d OnEOF; want nil after 2", err, eofs.Load())
			}
		})
	}
}

// halfCloser answers the server's close_notify (OnEOF) on a connection
// whose context is "after" with that, then closes.
type halfCloser struct{ *eofCounter }

func (h *halfCloser) OnEOF(c *Conn) {
	if c.Context() == "after" {
		if _, err := c.Write([]byte("after")); err != nil {
			c.SetContext(err)
		}
	}
	h.eofCounter.OnEOF(c)
}

// TestDialTLSPauseBeforeOpen: PauseRead right after DialTLS does not hold
// the handshake; it takes effect at OnOpen, where reading is paused, and
// what the server sent comes once the handler resumes.
func TestDialTLSPauseBeforeOpen(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			peer := startGoTLSPeer(t, serverTLS(), func(c *tls.Conn) {
				c.Write([]byte("hello"))
				io.Copy(io.Discard, c)
			})
			paused := make(chan bool, 1)
			data := make(chan string, 1)
			h := &BaseHandlerFunc{
				open: func(c *Conn) {
					paused <- c.paused&pauseUser != 0
					c.ResumeRead()
				},
				data: func(c *Conn, b Buffer) bool {
					data <- string(b.Bytes())
					c.Close()
					return false
				},
				closed: func(c *Conn, err error) {
					select {
					case paused <- false: // (after OnOpen's: left unread)
					default:
					}
				},
			}
			e := newEngine(t, testConfig(b), h)
			runEngine(t, e)
			l := e.Loops()[0]
			l.Post(func() {
				c, err := l.DialTLS("tcp", peer.addr, 10*time.Second, clientTLS(0))
				if err != nil {
					t.Error(err)
					close(paused)
					return
				}
				c.PauseRead()
			})
			if !recv(t, paused, "OnOpen") {
				t.Error("reading not paused at OnOpen")
			}
			if s := recv(t, data, "OnData"); s != "hello" {
				t.Errorf("read %q, want hello", s)
			}
		})
	}
}

// TestDialTLSShutdownDuringHandshakes: dials whose server says nothing,
// connected and in their handshakes when Shutdown comes, end with OnClose
// and ErrClosed, without OnOpen, and no handshake goroutine outlives
// Shutdown (TestMain checks every goroutine and fd too).
func TestDialTLSShutdownDuringHandshakes(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			silent := silentServer(t)
			e, h := startDialer(t, b)
			const n = 6
			for i := range n {
				dialTLSJob(h, e.Loops()[i%len(e.Loops())], silent, 0, clientTLS(0), &dialJob{data: []byte("x"), window: 1})
			}
			waitFor(t, "the connects", func() bool { return e.Stats().Dialed == n })
			waitFor(t, "the handshake goroutines", func() bool { return handshakeGoroutines() == n })
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if err := e.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown: %v, want the drain cut short", err)
			}
			for range n {
				if j := waitJob(t, h); !errors.Is(j.err, ErrClosed) || j.opened {
					t.Errorf("opened %v, OnClose %v; want no OnOpen, ErrClosed", j.opened, j.err)
				}
			}
			checkHandshakesEnded(t)
		})
	}
}

// TestDialTLSOpensWhileDraining: a dial whose handshake ends while
// Shutdown drains opens (an accept's would be refused), as a plain dial
// connecting then does: a drain may need the connection, such as a
// proxy's to the upstream of a request in flight. Its handler closes it
// and the drain completes.
func TestDialTLSOpensWhileDraining(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			entered, release := make(chan struct{}, 1), make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			defer free()
			leaf := testCA().leaf
			peer := startGoTLSPeer(t, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				entered <- struct{}{}
				<-release
				return &leaf, nil
			}}, goEcho)
			e, h := startDialer(t, b)
			j := &dialJob{data: []byte("ping"), window: 4}
			dialTLSJob(h, e.Loops()[0], peer.addr, 20*time.Second, clientTLS(0), j)
			recv(t, entered, "the server's GetCertificate")
			shut := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				shut <- e.Shutdown(ctx)
			}()
			waitFor(t, "the drain", e.draining.Load)
			free()
			waitJob(t, h)
			if j.err != nil || !j.opened || j.got != 4 {
				t.Errorf("opened %v, echoed %d, OnClose %v; want an echo and nil", j.opened, j.got, j.err)
			}
			if err := recv(t, shut, "Shutdown"); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

// TestDialTLSCloseBeforeOpen: Close or CloseLinger before OnOpen, the
// connect done or not, abandons a TLS dial as a plain one: OnClose with
// nil, no OnOpen, no handshake goroutine left.
func TestDialTLSCloseBeforeOpen(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			silent := silentServer(t)
			e, h := startDialer(t, b)
			l := e.Loops()[0]
			for _, linger := range []bool{false, true} {
				for _, handshaking := range []bool{false, true} {
					j := &dialJob{data: []byte("x"), window: 1}
					dialTLSJob(h, l, silent, time.Hour, clientTLS(0), j)
					if handshaking {
						waitFor(t, "the handshake", func() bool { return handshakeGoroutines() == 1 })
					}
					l.Post(func() {
						for _, c := range l.conns {
							if c != nil && c.Context() == j {
								if linger {
									c.CloseLinger(time.Hour, 1<<20)
								} else {
									c.Close()
								}
							}
						}
					})
					waitJob(t, h)
					if j.opened || j.err != nil {
						t.Errorf("linger %v, in the handshake %v: opened %v, OnClose %v; want nil alone", linger, handshaking, j.opened, j.err)
					}
					waitFor(t, "no handshake", func() bool { return handshakeGoroutines() == 0 })
				}
			}
		})
	}
}
