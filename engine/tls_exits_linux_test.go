package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runStoppable runs e and returns what stops it: Run's context cancelled,
// then Run waited for, 20 s at most. A Run that has not returned by then
// fails the test and is left running rather than hanging it (a handshake
// goroutine never accounted as done holds Run forever). The test's end
// stops e too.
func runStoppable(t *testing.T, e *Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
				if s := e.Stats(); s.Open != 0 || s.TLSHandshakes != 0 {
					t.Errorf("after Run: %d connections open, %d handshakes in progress", s.Open, s.TLSHandshakes)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("Run has not returned 20 s after its context was cancelled (%d handshakes in progress)", e.Stats().TLSHandshakes)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// echoErrs is a handler that echoes what it reads and sends OnClose's
// errors to errs.
func echoErrs() (h *BaseHandlerFunc, errs chan error) {
	errs = make(chan error, 4)
	h = &BaseHandlerFunc{
		data: func(c *Conn, b Buffer) bool {
			c.Write(b.Bytes())
			return false
		},
		closed: func(c *Conn, err error) { errs <- err },
	}
	return h, errs
}

// callbackExits are the ways a callback of a tls.Config can leave other
// than by returning, as exits runs them, and what the handshake's error
// must then be.
var callbackExits = []struct {
	name    string
	godebug string // GODEBUG while it runs
	exit    func()
	check   func(err error) bool
	panics  uint64 // Stats.TLSHandshakePanics it counts
}{
	{"Goexit", "", runtime.Goexit, func(err error) bool {
		return errors.Is(err, errHandshakeGoexit)
	}, 0},
	{"panic(nil)", "", func() { panic(nil) }, func(err error) bool {
		var pn *runtime.PanicNilError
		return errors.As(err, &pn)
	}, 1},
	// panic(nil) as Go before 1.21 has it: recover gives nil.
	{"panic(nil),panicnil=1", "panicnil=1", func() { panic(nil) }, func(err error) bool {
		var pe *HandshakePanicError
		return errors.As(err, &pe) && pe.Value == nil
	}, 1},
}

// TestTLSCallbackExits: a callback of a TLS listener's config that leaves
// its handshake's goroutine without returning, by runtime.Goexit (a
// t.FailNow in it, say) or by panic(nil), with or without GODEBUG
// panicnil=1 (under which recover gives nil), fails that handshake: OnClose
// alone with an error saying so, the place (MaxHandshakes 1) given back, so
// that the next client is served, and Run returns once stopped. Before,
// Goexit skipped the goroutine's end: no OnClose until the handshake
// timeout, the place held and Run waiting for the goroutine forever; and
// under panicnil=1 the handshake "succeeded" half-way: OnOpen.
func TestTLSCallbackExits(t *testing.T) {
	for _, b := range testBackends {
		for _, x := range callbackExits {
			t.Run(string(b)+"/"+x.name, func(t *testing.T) {
				if x.godebug != "" {
					t.Setenv("GODEBUG", x.godebug)
				}
				var calls atomic.Int64
				scfg := serverTLS()
				leaf := scfg.Certificates[0]
				scfg.Certificates = nil
				scfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
					if calls.Add(1) == 1 {
						x.exit()
					}
					return &leaf, nil
				}
				h, errs := echoErrs()
				var opens atomic.Int64
				h.open = func(*Conn) { opens.Add(1) }
				e := newEngine(t, testConfig(b), h)
				// Only the callback's exit ends the first handshake.
				ln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: scfg, HandshakeTimeout: time.Hour, MaxHandshakes: 1})
				if err != nil {
					t.Fatal(err)
				}
				addr := ln.Addr().String()
				runStoppable(t, e)
				if c, err := dialTLS(addr, clientTLS(0)); err == nil {
					c.Close()
					t.Error("the client's handshake succeeded")
				}
				if err := recv(t, errs, "OnClose"); !x.check(err) {
					t.Errorf("OnClose: %v", err)
				}
				if n := opens.Load(); n != 0 {
					t.Errorf("%d OnOpen for the handshake whose callback exited", n)
				}
				waitFor(t, "the handshake's end", func() bool { return e.Stats().TLSHandshakes == 0 })
				if n := ln.handshakes.Load(); n != 0 {
					t.Errorf("the listener holds %d places", n)
				}
				c, err := dialTLS(addr, clientTLS(0))
				if err != nil {
					t.Fatalf("the next client: %v", err)
				}
				defer c.Close()
				if err := roundTrip(c, []byte("ping")); err != nil {
					t.Fatal(err)
				}
				if s := e.Stats(); s.TLSHandshakePanics != x.panics || s.TLSHandshakesRefused != 0 {
					t.Errorf("Stats.TLSHandshakePanics %d, TLSHandshakesRefused %d; want %d, 0", s.TLSHandshakePanics, s.TLSHandshakesRefused, x.panics)
				}
			})
		}
	}
}

// TestDialTLSCallbackGoexit: runtime.Goexit in a DialTLS config's callback
// (the client's VerifyConnection) fails that dial at once, as a panic
// does: OnClose alone, not after the dial's timeout (an hour), and the
// handshake is no longer in progress.
func TestDialTLSCallbackGoexit(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := newTLSDialer()
			e := newEngine(t, testConfig(b), h)
			runStoppable(t, e)
			peer := startGoTLSPeer(t, serverTLS(), goEcho)
			var calls atomic.Int64
			cfg := clientTLS(0)
			cfg.VerifyConnection = func(tls.ConnectionState) error {
				if calls.Add(1) == 1 {
					runtime.Goexit()
				}
				return nil
			}
			l := e.Loops()[0]
			dialTLSJob(h, l, peer.addr, time.Hour, cfg, &dialJob{data: []byte("ping"), window: 4})
			if j := waitJob(t, h); !errors.Is(j.err, errHandshakeGoexit) || j.opened {
				t.Fatalf("OnClose: %v (opened %v), want the Goexit's error, no OnOpen", j.err, j.opened)
			}
			waitFor(t, "the handshake's end", func() bool { return e.Stats().TLSHandshakes == 0 })
			j := &dialJob{data: []byte("ping"), window: 4}
			dialTLSJob(h, l, peer.addr, time.Hour, cfg, j)
			if j = waitJob(t, h); j.err != nil || !j.eof || j.got != 4 || j.bad != nil {
				t.Errorf("the next dial: OnClose %v, EOF %v, %d bytes echoed, %v", j.err, j.eof, j.got, j.bad)
			}
		})
	}
}

// TestTLSCallbackExitWhileStopping: a callback that waits for its
// handshake's context and then leaves without returning (a panic,
// runtime.Goexit) while the engine stops, its loop closing the connection
// and then exiting: the goroutine's end is accounted for all the same, so
// that Run returns, with no handshake in progress and the listener's
// place given back; a panic is counted.
func TestTLSCallbackExitWhileStopping(t *testing.T) {
	for _, b := range testBackends {
		for _, x := range callbackExits[:2] {
			t.Run(string(b)+"/"+x.name, func(t *testing.T) {
				entered := make(chan struct{})
				scfg := closeHeldTLS(entered, x.exit)
				errs := make(chan error, 4)
				h := &BaseHandlerFunc{closed: func(c *Conn, err error) { errs <- err }}
				e := newEngine(t, testConfig(b), h)
				ln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: scfg, HandshakeTimeout: time.Hour, MaxHandshakes: 1})
				if err != nil {
					t.Fatal(err)
				}
				stop := runStoppable(t, e)
				c := mustDial(t, "tcp", ln.Addr().String())
				go tls.Client(c, clientTLS(0)).Handshake() // ends when c closes
				recv(t, entered, "GetCertificate")
				stop()
				if len(errs) != 1 {
					t.Errorf("%d OnClose, want 1", len(errs))
				}
				if n := ln.handshakes.Load(); n != 0 {
					t.Errorf("the listener holds %d places", n)
				}
				if n := e.Stats().TLSHandshakePanics; n != x.panics {
					t.Errorf("Stats.TLSHandshakePanics %d, want %d", n, x.panics)
				}
			})
		}
	}
}

// closeHeldTLS is a server config for one handshake (a second would close
// entered again): its GetCertificate closes entered, waits until the
// connection has closed (the handshake's context ends), then calls then
// and returns the leaf.
func closeHeldTLS(entered chan struct{}, then func()) *tls.Config {
	scfg := serverTLS()
	leaf := scfg.Certificates[0]
	scfg.Certificates = nil
	scfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		close(entered)
		<-hello.Context().Done()
		then()
		return &leaf, nil
	}
	return scfg
}

// TestShutdownWaitsForHandshakes: Shutdown, its ctx done at the call, and
// Run return only once every handshake goroutine has ended: one held in
// GetCertificate after its connection has closed keeps both waiting until
// the callback returns. The check that they have not returned meanwhile
// cannot fail wrongly; without the engine's wait for handshakes it fails
// unless the machine is too slow to reach it within half a second.
func TestShutdownWaitsForHandshakes(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			entered, ended, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
			scfg := closeHeldTLS(entered, func() {
				close(ended)
				<-release
			})
			errs := make(chan error, 4)
			h := &BaseHandlerFunc{closed: func(c *Conn, err error) { errs <- err }}
			e := newEngine(t, testConfig(b), h)
			ln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{TLS: scfg, HandshakeTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			run := make(chan error, 1)
			go func() { run <- e.Run(context.Background()) }()
			c := mustDial(t, "tcp", ln.Addr().String())
			go tls.Client(c, clientTLS(0)).Handshake() // ends when c closes
			recv(t, entered, "GetCertificate")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			shut := make(chan error, 1)
			go func() { shut <- e.Shutdown(ctx) }()
			recv(t, ended, "the handshake's context to end")
			if err := recv(t, errs, "OnClose"); !errors.Is(err, ErrClosed) {
				t.Errorf("OnClose: %v, want ErrClosed", err)
			}
			select {
			case err := <-shut:
				shut <- err // for the checks below
				t.Errorf("Shutdown returned (%v) while a handshake's callback ran", err)
			case err := <-run:
				run <- err
				t.Errorf("Run returned (%v) while a handshake's callback ran", err)
			case <-time.After(500 * time.Millisecond):
			}
			close(release)
			if err := recv(t, shut, "Shutdown"); !errors.Is(err, context.Canceled) {
				t.Errorf("Shutdown: %v, want context.Canceled (a connection closed)", err)
			}
			if err := recv(t, run, "Run"); err != nil {
				t.Errorf("Run: %v", err)
			}
			checkHandshakesEnded(t)
			if s := e.Stats(); s.Open != 0 || s.TLSHandshakes != 0 {
				t.Errorf("after Run: %d connections open, %d handshakes in progress", s.Open, s.TLSHandshakes)
			}
		})
	}
}

// TestTLSMaxHandshakesUnix: a TLS listener on a Unix socket caps its
// handshakes too, but a Unix socket has no reset to send: a client past
// the cap that has sent nothing reads the end of the stream (one that
// has, ECONNRESET, or EPIPE on its next write), as ListenConfig's doc now
// says; it said ECONNRESET for every client.
func TestTLSMaxHandshakesUnix(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &tlsFailHandler{errs: make(chan error, 64)}
			e := newEngine(t, testConfig(b), h)
			path := t.TempDir() + "/s"
			if _, err := e.Listen("unix", path, &ListenConfig{TLS: serverTLS(), HandshakeTimeout: time.Minute, MaxHandshakes: 1}); err != nil {
				t.Fatal(err)
			}
			runStoppable(t, e)
			mustDial(t, "unix", path)
			waitFor(t, "the accept", func() bool { return e.Stats().TLSHandshakes == 1 })
			c := mustDial(t, "unix", path)
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("a silent client past the cap read %d bytes, %v; want the end of the stream", n, err)
			}
			if s := e.Stats(); s.TLSHandshakesRefused != 1 || s.TLSHandshakes != 1 || s.Accepted != 1 {
				t.Errorf("%d refused, %d handshakes, %d accepted; want 1, 1, 1", s.TLSHandshakesRefused, s.TLSHandshakes, s.Accepted)
			}
		})
	}
}

// TestHandshakePanicExits: handshakePanic, called as the handshake's
// deferred function calls it, describes each panic of callbackExits (a
// value, its stack) and builds nothing for runtime.Goexit, whose goroutine
// ends with no error to return: before, it built a HandshakePanicError,
// stack and all, that was then thrown away.
func TestHandshakePanicExits(t *testing.T) {
	for _, x := range callbackExits {
		t.Run(x.name, func(t *testing.T) {
			if x.godebug != "" {
				t.Setenv("GODEBUG", x.godebug)
			}
			got := make(chan *HandshakePanicError, 1)
			go func() {
				defer func() { got <- handshakePanic(recover()) }()
				x.exit()
			}()
			e := <-got
			switch {
			case x.panics == 0 && e != nil:
				t.Errorf("built %v for a goroutine that did not panic", e)
			case x.panics == 1 && e == nil:
				t.Error("nil for a panic")
			case x.panics == 1 && (len(e.Stack) == 0 || !strings.Contains(e.at, "TestHandshakePanicExits")):
				t.Errorf("%v: stack %d bytes, summary %q; want the stack, and the summary naming the function that panicked", e, len(e.Stack), e.at)
			}
		})
	}
}
