package engine

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
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
