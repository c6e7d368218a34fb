package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/testnet"
)

// testBackends are the backends every data-path test runs over.
var testBackends = []engine.Backend{engine.BackendURing, engine.BackendEpoll}

// upstream is a Go TCP server standing for a proxied server: by default
// it echoes, and half-closes after the client's FIN.
type upstream struct {
	addr     string
	serve    func(net.Conn)
	accepted atomic.Int64

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func echo(c net.Conn) {
	buf, err := offHeap(32 << 10)
	if err != nil {
		panic(err)
	}
	defer unix.Munmap(buf)
	// Hide ReadFrom: splice would keep pooled pipes open.
	io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, buf)
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c)
}

// newUpstream starts an upstream, serving each connection with serve
// (echo if nil), until the test ends. Its port is held by the test for as
// long (testnet.RefusedAddr), so that a test may stop it (connects are
// then refused) and have it listen on its address again: closed and not
// held, the port could be given to another test process's listener on
// port 0 (CI runs other packages' tests beside the proxy's), whose
// accepts the stopped server's health checks and clients would get, and
// the listen again would fail with EADDRINUSE.
func newUpstream(t *testing.T, serve func(net.Conn)) *upstream {
	t.Helper()
	if serve == nil {
		serve = echo
	}
	u := &upstream{serve: serve, conns: map[net.Conn]bool{}}
	if err := u.listen(testnet.RefusedAddr(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waitOrReport(t, "upstream "+u.addr+"'s stop", u.stop) })
	return u
}

// listen (re)starts accepting on addr.
func (u *upstream) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.ln, u.addr = ln, ln.Addr().String()
	u.mu.Unlock()
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			u.mu.Lock()
			u.conns[c] = true
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				u.serve(c)
				c.Close()
				u.mu.Lock()
				delete(u.conns, c)
				u.mu.Unlock()
			}()
		}
	}()
	return nil
}

// stop closes the listener and every connection, and waits.
func (u *upstream) stop() {
	u.mu.Lock()
	if u.ln != nil {
		u.ln.Close()
		u.ln = nil
	}
	for c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// stuckAfter is how long a test's cleanup waits for a proxy's Run or an
// upstream's goroutines to end before it says what they are stuck in: a
// drain is a second here, and a wait of minutes (a connect's SYN
// retries, 127 s) otherwise shows only as a slow test. Well past what a
// loaded CI machine makes of a drain, well short of those minutes.
const stuckAfter = 45 * time.Second

// waitOrReport runs wait and, where it has not returned after stuckAfter,
// fails t with what, every goroutine's stack and the host's TCP
// connections still in their handshake, then waits on.
func waitOrReport(t testing.TB, what string, wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	select {
	case <-done:
		return
	case <-time.After(stuckAfter):
	}
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	ss, err := exec.Command("ss", "-tanoi", "state", "syn-sent", "state", "syn-recv").CombinedOutput()
	if err != nil {
		ss = fmt.Appendf(ss, "(ss: %v)", err)
	}
	t.Errorf("%s still not done after %v; connections in their handshake:\n%s\ngoroutines:\n%s", what, stuckAfter, ss, b.String())
	<-done
}

// deadAddr returns a loopback address nothing listens on until the test
// ends (testnet.RefusedAddr).
func deadAddr(t *testing.T) string { return testnet.RefusedAddr(t) }

func testConfig(b engine.Backend, servers ...string) *Config {
	return &Config{
		Engine:    EngineConfig{Backend: string(b), CPUs: []int{0}},
		Listeners: []ListenerConfig{{Name: "web", Listen: "127.0.0.1:0", Pool: "app", ConnectTimeout: Duration(2 * time.Second)}},
		Pools:     []PoolConfig{{Name: "app", Servers: Servers(servers...)}},
		Admin:     AdminConfig{Listen: "127.0.0.1:0"},
	}
}

// startProxy runs a proxy for cfg until the test ends.
func startProxy(t *testing.T, cfg *Config) *Proxy {
	t.Helper()
	p, stop := runProxy(t, cfg)
	t.Cleanup(func() {
		waitOrReport(t, "the proxy's Run", func() {
			if err := stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	})
	return p
}

// runProxy runs a proxy for cfg; stop ends its Run and returns Run's
// error (a second stop returns nil at once).
func runProxy(t *testing.T, cfg *Config) (p *Proxy, stop func() error) {
	t.Helper()
	p, err := New(cfg, &Options{Drain: time.Second, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	return p, run(p)
}

// run runs p; stop ends its Run and returns Run's error (a second stop
// returns nil at once).
func run(p *Proxy) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	return func() (err error) {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
}

// runUntilEnd runs p until the test ends.
func runUntilEnd(t *testing.T, p *Proxy) {
	stop := run(p)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func dial(t *testing.T, p *Proxy) *net.TCPConn {
	t.Helper()
	// A loopback connect is the kernel's to answer (the backlog is
	// 4096), whatever the proxy is doing: its bound is for a hang, not
	// a timeout under test, and 5 s was passed once under heavy load
	// ("dial ... i/o timeout", TestMaxConnsRetryWaitsItsOwn).
	c, err := net.DialTimeout("tcp", p.Addr("web").String(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// dialReadBuffer is dial with the client's SO_RCVBUF set to size before
// it connects, for a client that is to read nothing. Set after the
// handshake, the buffer is smaller than the window the client offered
// before, and once it is full Linux (6.18, loopback) drops the proxy's
// segments as beyond the window (TCP_INVALID_SEQUENCE, in
// tcp_validate_incoming) before it looks at their ACKs: the client's own
// segments go unacknowledged and its retransmissions back off (0.8 s,
// 1.6 s ...), so that it stops sending, not the proxy reading.
func dialReadBuffer(t *testing.T, p *Proxy, size int) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	c, err := d.Dial("tcp", p.Addr("web").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// runEnds waits for Run's error on done: nil, within 10 s of what (the
// last client leaving, an Abort) that should end its drain.
func runEnds(t testing.TB, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run still draining 10 s after %s", what)
	}
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// roundTrip sends msg on c and reads it back.
func roundTrip(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("echoed %q, want %q", got, msg)
	}
	return nil
}

// closedByProxy reports whether c was closed by the other end within a
// few seconds, with no data.
func closedByProxy(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n > 0 {
		return fmt.Errorf("read %d bytes, want the connection closed", n)
	}
	if err == nil || errors.Is(err, syscall.ECONNRESET) || err == io.EOF {
		return nil
	}
	return fmt.Errorf("read: %v, want EOF or a reset", err)
}

func serverTotals(p *Proxy, addr string) ServerTotals {
	for _, s := range p.Totals().Servers {
		if s.Server == addr {
			return s
		}
	}
	return ServerTotals{}
}

// tcpSeen says how far the connections through p to u got, for a round
// trip that failed: whether p accepted the clients, connected to u, and u
// accepted.
func tcpSeen(p *Proxy, u *upstream) string {
	l, s := p.Totals().Listeners[0], serverTotals(p, u.addr)
	return fmt.Sprintf("the proxy accepted %d clients (%d open, %d without a server, %d whose connect failed), connected %d times to the server (%d open, %d failures), which accepted %d", l.Accepted, l.Active, l.NoServer, l.Failed, s.Connects, s.Active, s.Failures, u.accepted.Load())
}

func forBackends(t *testing.T, f func(t *testing.T, b engine.Backend)) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) { f(t, b) })
	}
}

// TestIntegrity sends 1 MB of random bytes on each of 50 connections
// through the proxy to two Go echo servers (two loops where there are two
// CPUs) and checks what comes back.
func TestIntegrity(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		cfg := testConfig(b, u1.addr, u2.addr)
		cfg.Engine.CPUs = nil // one loop per CPU
		// A connect that times out is abandoned for the other server,
		// whose accept then counts a second connection for one client: 2 s
		// passed for some under -race beside other tests' load (66
		// accepts for 50 clients). Connect timeouts are not under test here.
		cfg.Listeners[0].ConnectTimeout = Duration(time.Minute)
		p := startProxy(t, cfg)
		const conns, size = 50, 1 << 20
		var wg sync.WaitGroup
		errc := make(chan error, conns)
		for i := range conns {
			wg.Go(func() {
				if err := echoChecked(p.Addr("web").String(), uint64(i), size); err != nil {
					errc <- fmt.Errorf("conn %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
		if a, b := u1.accepted.Load(), u2.accepted.Load(); a+b != conns || a == 0 || b == 0 {
			t.Errorf("upstreams accepted %d and %d connections, want %d in all, on both (proxy: %+v, %+v)", a, b, conns, serverTotals(p, u1.addr), serverTotals(p, u2.addr))
		}
		waitFor(t, "every connection to close", func() bool { return p.Engine().Stats().Open == 0 })
	})
}

// echoChecked writes size random bytes (seeded) while reading the echo,
// half-closes, and compares what comes back with what it sent as it
// comes.
func echoChecked(addr string, seed uint64, size int) error {
	// The dial shares the test's time budget: 50 of these under -race on a
	// loaded 2-CPU machine have seen a 5 s dial time out (the goroutine
	// not run before its deadline), which is not what the test is about.
	c, err := net.DialTimeout("tcp", addr, 60*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	data, err := offHeap(size)
	if err != nil {
		return err
	}
	defer unix.Munmap(data)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	rand.NewChaCha8(key).Read(data)
	werr, wdone := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(wdone)
		for off := 0; off < size; off += 64 << 10 {
			if _, err := c.Write(data[off:min(off+64<<10, size)]); err != nil {
				werr <- err
				return
			}
		}
		werr <- c.(*net.TCPConn).CloseWrite()
	}()
	// data is unmapped once the writer is done with it, which a return
	// before the echo's end hastens by closing the connection.
	defer func() {
		c.Close()
		<-wdone
	}()
	got, err := offHeap(32 << 10)
	if err != nil {
		return err
	}
	defer unix.Munmap(got)
	n := 0
	for {
		k, err := c.Read(got)
		if k > 0 {
			if n+k > size {
				return fmt.Errorf("read %d bytes, want %d", n+k, size)
			}
			if !bytes.Equal(got[:k], data[n:n+k]) {
				return fmt.Errorf("echoed data differ at byte %d", n)
			}
			n += k
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read after %d bytes: %w", n, err)
		}
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if n != size {
		return fmt.Errorf("read %d bytes, want %d", n, size)
	}
	return nil
}

// offHeap returns n zeroed bytes mapped outside the Go heap, for a test
// client's or echo server's data and buffers. The race detector checks
// only Go heap and data memory, so the ranges that socket reads and
// writes mark as accessed (syscall.Read and Write do, under -race) cost
// nothing there, where on the heap they cost a test moving megabytes
// most of its CPU time; the proxy's own memory is checked as before. The
// caller unmaps it (unix.Munmap).
func offHeap(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// TestHalfClose: a FIN crosses the proxy either way while the other
// direction keeps flowing.
func TestHalfClose(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		// The client half-closes first; the server answers after it.
		u := newUpstream(t, func(c net.Conn) {
			got, _ := io.ReadAll(c)
			io.WriteString(c, "after FIN: "+string(got))
			c.(*net.TCPConn).CloseWrite()
		})
		p := startProxy(t, testConfig(b, u.addr))
		c := dial(t, p)
		io.WriteString(c, "hello")
		c.CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "after FIN: hello" {
			t.Errorf("client read %q, %v; want %q and EOF", got, err, "after FIN: hello")
		}

		// The server half-closes first; the client still sends.
		recv := make(chan string, 1)
		u2 := newUpstream(t, func(c net.Conn) {
			io.WriteString(c, "bye")
			c.(*net.TCPConn).CloseWrite()
			got, _ := io.ReadAll(c)
			recv <- string(got)
		})
		p2 := startProxy(t, testConfig(b, u2.addr))
		c2 := dial(t, p2)
		c2.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err = io.ReadAll(c2)
		if err != nil || string(got) != "bye" {
			t.Fatalf("client read %q, %v; want %q and EOF", got, err, "bye")
		}
		io.WriteString(c2, "still here")
		c2.CloseWrite()
		select {
		case s := <-recv:
			if s != "still here" {
				t.Errorf("server read %q after its FIN, want %q", s, "still here")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server never saw the client's data and FIN")
		}
		waitFor(t, "both sides to close", func() bool { return p2.Engine().Stats().Open == 0 })
	})
}

// TestUpstreamReset: a server that resets mid-stream makes the proxy reset
// the client after the data already forwarded.
func TestUpstreamReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) {
			io.WriteString(c, "partial")
			time.Sleep(50 * time.Millisecond)
			c.(*net.TCPConn).SetLinger(0)
		})
		p := startProxy(t, testConfig(b, u.addr))
		c := dial(t, p)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, len("partial"))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "partial" {
			t.Fatalf("read %q, %v; want %q", got, err, "partial")
		}
		n, err := c.Read(make([]byte, 16))
		if n != 0 || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("after the server's reset the client read %d bytes, %v; want a reset", n, err)
		}
		waitFor(t, "both sides to close", func() bool { return p.Engine().Stats().Open == 0 })
	})
}

// TestClientReset: a client that resets makes the proxy reset the server.
func TestClientReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		res := make(chan error, 1)
		u := newUpstream(t, func(c net.Conn) {
			io.WriteString(c, "hi")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := io.Copy(io.Discard, c)
			res <- err
		})
		p := startProxy(t, testConfig(b, u.addr))
		c := dial(t, p)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
		c.SetLinger(0)
		c.Close()
		if err := <-res; !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("after the client's reset the server read %v, want a reset", err)
		}
	})
}

// TestFailover: a server that refuses is skipped for the next one, and
// counted.
func TestFailover(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		dead := deadAddr(t)
		u := newUpstream(t, nil)
		p := startProxy(t, testConfig(b, dead, u.addr))
		const conns = 6
		for i := range conns {
			c := dial(t, p)
			if err := roundTrip(c, fmt.Sprint("msg ", i)); err != nil {
				t.Fatalf("conn %d: %v", i, err)
			}
			c.Close()
		}
		if got := u.accepted.Load(); got != conns {
			t.Errorf("live server accepted %d connections, want %d", got, conns)
		}
		// Round-robin starts every other client on the dead server.
		if d := serverTotals(p, dead); d.Failures != conns/2 || d.Connects != 0 {
			t.Errorf("dead server: %d connects, %d failures; want 0 and %d", d.Connects, d.Failures, conns/2)
		}
		if l := serverTotals(p, u.addr); l.Connects != conns || l.Failures != 0 {
			t.Errorf("live server: %d connects, %d failures; want %d and 0", l.Connects, l.Failures, conns)
		}
	})
}

// blackholeAddr returns a loopback address whose connects hang
// (testnet.BlackholeAddr).
func blackholeAddr(t *testing.T) string { return testnet.BlackholeAddr(t) }

// TestConnectTimeoutFailover: a server that does not answer is given up
// after connect_timeout and the next one takes the client.
func TestConnectTimeoutFailover(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		hole := blackholeAddr(t)
		u := newUpstream(t, nil)
		cfg := testConfig(b, hole, u.addr)
		const timeout = 200 * time.Millisecond
		cfg.Listeners[0].ConnectTimeout = Duration(timeout)
		p := startProxy(t, cfg)
		t0 := time.Now()
		if err := roundTrip(dial(t, p), "late"); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(t0); el < timeout {
			t.Errorf("answered after %v, before the connect timeout %v: the silent server was not tried first", el, timeout)
		}
		if h := serverTotals(p, hole); h.Failures != 1 || h.Connects != 0 {
			t.Errorf("silent server: %d connects, %d failures; want 0 and 1", h.Connects, h.Failures)
		}
	})
}

// TestAllServersDown: with every server refusing, or every server marked
// down by its health checks, clients are closed and counted.
func TestAllServersDown(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		d1, d2 := deadAddr(t), deadAddr(t)
		p := startProxy(t, testConfig(b, d1, d2))
		if err := closedByProxy(dial(t, p)); err != nil {
			t.Error(err)
		}
		waitFor(t, "the failure to be counted", func() bool { return p.Totals().Listeners[0].Failed == 1 })
		if f1, f2 := serverTotals(p, d1).Failures, serverTotals(p, d2).Failures; f1 != 1 || f2 != 1 {
			t.Errorf("connect failures %d and %d, want 1 each (each server tried once)", f1, f2)
		}

		cfg := testConfig(b, d1, d2)
		cfg.Pools[0].Health = &HealthConfig{Interval: Duration(20 * time.Millisecond), Fall: 1, Rise: 1}
		p = startProxy(t, cfg)
		waitFor(t, "both servers marked down", func() bool {
			return !serverTotals(p, d1).Up && !serverTotals(p, d2).Up
		})
		if err := closedByProxy(dial(t, p)); err != nil {
			t.Error(err)
		}
		waitFor(t, "the client to be counted", func() bool { return p.Totals().Listeners[0].NoServer == 1 })
		if f := serverTotals(p, d1).Failures + serverTotals(p, d2).Failures; f != 0 {
			t.Errorf("%d connects to servers marked down, want none", f)
		}
	})
}

// TestHealthRiseFall: a stopped server is marked down after fall failed
// checks and gets no clients; restarted, it is marked up after rise. The
// checks time out at 50ms, not 20 (as httpHealth's): the live server must
// stay up throughout.
func TestHealthRiseFall(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		cfg := testConfig(b, u1.addr, u2.addr)
		cfg.Pools[0].Health = &HealthConfig{Interval: Duration(50 * time.Millisecond), Timeout: Duration(50 * time.Millisecond), Rise: 3, Fall: 2}
		p := startProxy(t, cfg)
		addr := u1.addr
		u1.stop()
		waitFor(t, "the stopped server marked down", func() bool { return !serverTotals(p, addr).Up })
		if f := serverTotals(p, addr).CheckFailures; f < 2 {
			t.Errorf("marked down after %d failed checks, want fall = 2", f)
		}
		// (Health checks connect too: clients are counted by the proxy.)
		before := serverTotals(p, u2.addr).Connects
		for i := range 4 {
			if err := roundTrip(dial(t, p), fmt.Sprint("down ", i)); err != nil {
				t.Fatal(err)
			}
		}
		if got := serverTotals(p, u2.addr).Connects - before; got != 4 {
			t.Errorf("the server up took %d of 4 clients", got)
		}
		if f := serverTotals(p, addr).Failures; f != 0 {
			t.Errorf("%d connects to the server marked down", f)
		}
		passes := serverTotals(p, addr).CheckPasses
		if err := u1.listen(addr); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the restarted server marked up", func() bool { return serverTotals(p, addr).Up })
		// Counted before the state moves: the count the test sees is at
		// least the one that moved it. (The server's own accept count
		// lags: a check's connect completes in the kernel before the
		// server's Accept returns.)
		if n := serverTotals(p, addr).CheckPasses - passes; n < 3 {
			t.Errorf("marked up after %d passed checks, want rise = 3", n)
		}
		for i := range 4 {
			if err := roundTrip(dial(t, p), fmt.Sprint("up ", i)); err != nil {
				t.Fatal(err)
			}
		}
		if got := serverTotals(p, addr).Connects; got != 2 {
			t.Errorf("the restarted server took %d of 4 clients, want 2", got)
		}
	})
}

// TestBalance: round-robin takes the servers in turn; least-conn sends new
// clients to the server with the fewest open.
func TestBalance(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, balance := range []string{RoundRobin, LeastConn} {
			t.Run(balance, func(t *testing.T) {
				us := []*upstream{newUpstream(t, nil), newUpstream(t, nil), newUpstream(t, nil)}
				cfg := testConfig(b, us[0].addr, us[1].addr, us[2].addr)
				cfg.Pools[0].Balance = balance
				p := startProxy(t, cfg)
				var held [][]*net.TCPConn // per server
				held = make([][]*net.TCPConn, 3)
				for i := range 9 {
					c := dial(t, p)
					if err := roundTrip(c, fmt.Sprint("c", i)); err != nil {
						t.Fatal(err)
					}
					for j, u := range us {
						if serverTotals(p, u.addr).Connects > uint64(len(held[j])) {
							held[j] = append(held[j], c)
						}
					}
				}
				for j, u := range us {
					if n := u.accepted.Load(); n != 3 {
						t.Errorf("server %d took %d of 9 clients, want 3", j, n)
					}
				}
				// Empty server 0; the next three clients.
				for _, c := range held[0] {
					c.Close()
				}
				waitFor(t, "server 0's connections to close", func() bool { return serverTotals(p, us[0].addr).Active == 0 })
				for i := range 3 {
					if err := roundTrip(dial(t, p), fmt.Sprint("d", i)); err != nil {
						t.Fatal(err)
					}
				}
				want := []int64{4, 4, 4}
				if balance == LeastConn {
					want = []int64{6, 3, 3}
				}
				for j, u := range us {
					if n := u.accepted.Load(); n != want[j] {
						t.Errorf("server %d took %d of 12 clients, want %d", j, n, want[j])
					}
				}
			})
		}
	})
}

// TestIdleTimeout: a connection with no bytes either way for idle_timeout
// is closed; one that keeps talking is not. The busy one, quiet since its
// connect before the quiet one's last bytes, talks until the quiet one is
// closed and once more after: without its talk it would have been closed
// first. It talks every 50ms, and the proxy can close it only where the
// test let idle_timeout (1 s) pass from a round trip's start to the next
// one's end, which the test measures: where a loaded machine held the
// test up so (once under two CPU hogs beside -race), it skips, saying so.
func TestIdleTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		cfg := testConfig(b, u.addr)
		const idle = time.Second
		cfg.Listeners[0].IdleTimeout = Duration(idle)
		p := startProxy(t, cfg)
		last := time.Now() // the busy connection's last round trip's start (its connect's)
		busy, quiet := dial(t, p), dial(t, p)
		var most time.Duration // the longest from one of busy's round trips' start to the next one's end
		var t0 time.Time       // before the quiet one's last bytes
		talk := func(what string) {
			t.Helper()
			start := time.Now()
			err := roundTrip(busy, what)
			most, last = max(most, time.Since(last)), start
			if err == nil {
				return
			}
			if most >= idle {
				t.Skipf("busy connection: %v, but the test let %v pass between its round trips (a loaded machine): it may have been idle for idle_timeout", err, most)
			}
			t.Fatalf("busy connection, talking every 50 ms (%v at most from a round trip's start to the next one's end), %v in: %v; %s", most, time.Since(t0), err, tcpSeen(p, u))
		}
		t0 = time.Now()
		if err := roundTrip(quiet, "once"); err != nil {
			t.Fatalf("quiet connection: %v; %s", err, tcpSeen(p, u))
		}
		for p.Totals().Listeners[0].IdleClosed == 0 {
			talk("tick")
			if time.Since(t0) > 20*idle {
				t.Fatalf("no idle close after %v", time.Since(t0))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := closedByProxy(quiet); err != nil {
			t.Error(err)
		}
		if el := time.Since(t0); el < idle {
			t.Errorf("quiet connection closed after %v, before idle_timeout %v", el, idle)
		}
		talk("still")
		if n := p.Totals().Listeners[0].IdleClosed; n != 1 {
			t.Errorf("%d idle closes counted, want 1", n)
		}
	})
}

// TestMaxConns: the client over max_conns is closed at once and counted; a
// slot freed is taken again.
func TestMaxConns(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].MaxConns = 2
		cfg.Engine.CPUs = nil // the bound holds across loops
		p := startProxy(t, cfg)
		c1, c2 := dial(t, p), dial(t, p)
		for _, c := range []net.Conn{c1, c2} {
			if err := roundTrip(c, "in"); err != nil {
				t.Fatal(err)
			}
		}
		if err := closedByProxy(dial(t, p)); err != nil {
			t.Error(err)
		}
		if l := p.Totals().Listeners[0]; l.Rejected != 1 || l.Accepted != 3 || l.Active != 2 {
			t.Errorf("accepted %d, rejected %d, active %d; want 3, 1, 2", l.Accepted, l.Rejected, l.Active)
		}
		c1.Close()
		waitFor(t, "the first client to close", func() bool { return p.Totals().Listeners[0].Active == 1 })
		if err := roundTrip(dial(t, p), "again"); err != nil {
			t.Error(err)
		}
		if u.accepted.Load() != 3 {
			t.Errorf("upstream accepted %d connections, want 3 (none for the rejected client)", u.accepted.Load())
		}
	})
}

// TestBackpressure: a server sending 16 MB to a client that does not read
// for a while: the proxy stops reading the server, so what it holds (bytes
// read minus bytes written) stays near WriteHighWater; without it the
// proxy would read all the server sends.
func TestBackpressure(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 16 << 20
		data := make([]byte, size)
		r := rand.New(rand.NewPCG(7, 7))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		u := newUpstream(t, func(c net.Conn) {
			c.Write(data)
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
		})
		cfg := testConfig(b, u.addr)
		const hwm = 64 << 10
		cfg.Engine.WriteHighWater = hwm
		p := startProxy(t, cfg)
		c := dial(t, p)
		var peak uint64
		t0 := time.Now()
		for time.Since(t0) < 500*time.Millisecond {
			s := p.Engine().Stats()
			peak = max(peak, s.BytesRead-s.BytesWritten)
			time.Sleep(5 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		h := sha256.New()
		n, err := io.Copy(h, c)
		if err != nil || n != size {
			t.Fatalf("client read %d bytes, %v; want %d", n, err, size)
		}
		if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
			t.Error("data differ")
		}
		// The mark, the buffers a receive fills past it and what the
		// kernel delivered before reading paused: well under 1 MiB.
		const limit = 1 << 20
		t.Logf("proxy held at most %d KiB with a %d KiB mark", peak>>10, hwm>>10)
		if peak > limit {
			t.Errorf("proxy held %d KiB while the client did not read, want at most %d KiB", peak>>10, limit>>10)
		}
		if p.Engine().Stats().PausedReads == 0 {
			t.Error("reading never paused: backpressure untested")
		}
	})
}

// TestListenersToTheirPools: each listener sends its clients to its own
// pool. (The engine has one Handler for all listeners and an accepted Conn
// does not say which listener took it: the proxy finds it by the local
// address, here two listeners on one IP, one of them on every address of
// IPv4 and IPv6.)
func TestListenersToTheirPools(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		name := func(s string) func(net.Conn) {
			return func(c net.Conn) { io.WriteString(c, s) }
		}
		ua, ub := newUpstream(t, name("pool a")), newUpstream(t, name("pool b"))
		cfg := testConfig(b, ua.addr)
		cfg.Engine.CPUs = nil
		cfg.Listeners = []ListenerConfig{
			{Name: "a", Listen: "127.0.0.1:0", Pool: "a"},
			{Name: "b", Listen: ":0", Pool: "b"},
		}
		cfg.Pools = []PoolConfig{{Name: "a", Servers: Servers(ua.addr)}, {Name: "b", Servers: Servers(ub.addr)}}
		p := startProxy(t, cfg)
		for range 4 {
			for _, l := range []string{"a", "b"} {
				c, err := net.DialTimeout("tcp", p.Addr(l).String(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(got) != "pool "+l {
					t.Errorf("listener %s: read %q, %v; want %q", l, got, err, "pool "+l)
				}
			}
		}
		for _, l := range p.Totals().Listeners {
			if l.Accepted != 4 {
				t.Errorf("listener %s accepted %d, want 4", l.Name, l.Accepted)
			}
		}
	})
}

// TestForwardAllocs: forwarding allocates nothing once connections are
// open (the process's whole allocation count, proxy, Go echo server and
// clients together, over 2000 messages each way).
func TestForwardAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].IdleTimeout = Duration(time.Minute) // the activity clock on the path too
		p := startProxy(t, cfg)
		const conns, per = 10, 200
		cs := make([]net.Conn, conns)
		for i := range cs {
			cs[i] = dial(t, p)
			cs[i].SetDeadline(time.Now().Add(time.Minute))
		}
		msg := bytes.Repeat([]byte("m"), 64)
		bufs := make([][]byte, conns)
		for i := range bufs {
			bufs[i] = make([]byte, len(msg))
		}
		// A round is a message on every connection, then their echoes,
		// per times (inStep); 64 bytes a connection in flight cannot fill
		// a socket buffer, so no write waits on the reads.
		send := func(i, _ int) error { _, err := cs[i].Write(msg); return err }
		echo := func(i, _ int) error { _, err := io.ReadFull(cs[i], bufs[i]); return err }
		var err error
		round := func() {
			if _, e := inStep(conns, per, send, echo); err == nil {
				err = e
			}
		}
		allocs := allocsOfRound(round)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d allocations for %d messages forwarded each way", allocs, conns*per)
		// The runtime's caches may take a few; one a message would be
		// thousands.
		if allocs*20 > conns*per {
			t.Errorf("%d allocations for %d messages (%.3f each), want about 0", allocs, conns*per, float64(allocs)/(conns*per))
		}
	})
}

// inStep runs per exchanges on each of n connections from the calling
// goroutine alone: send(i, k), the k-th request on every connection i,
// then answer(i, k), its response on each, for k from 0 to per. It
// returns the requests sent and the first error. The allocation tests'
// rounds (allocsOfRound) use it: with a goroutine a connection started in
// each round (wg.Go), the round with requests allocated what the one
// without did not, under load: a g where the P starting it had none free
// (runtime.malg, the last round's having ended on the other P; up to 10
// in a round, profiled at MemProfileRate 1) and the WaitGroup's sudog.
// Sending on every connection before reading cannot stall as long as each
// connection's exchange fits its socket buffers (16 KiB and more on
// loopback), which each caller says.
func inStep(n, per int, send, answer func(i, k int) error) (int, error) {
	sent := 0
	for k := range per {
		for i := range n {
			if err := send(i, k); err != nil {
				return sent, err
			}
			sent++
		}
		for i := range n {
			if err := answer(i, k); err != nil {
				return sent, err
			}
		}
	}
	return sent, nil
}

// allocsOfRound runs round three times to warm up (slices reach their
// steady size) and returns the process's allocations in a fourth. A round
// during which the runtime started an OS thread is run again (at most
// twice): starting an M allocates its own objects (7 under -race), which
// the count would take for the request path's. TestRetryAllocs/uring saw
// that in 1 of 20 runs under -race, and in CI, with one thread created in
// the round; the uring loops' threads exit with their loop, so the
// runtime's count of threads varies more than it did.
func allocsOfRound(round func()) uint64 {
	// No GC cycle while it counts: one under way has the runtime allocate
	// a few objects of its own, which the count (the process's) would take
	// for the request path's (TestRetryAllocs says what was seen).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 3 {
		round()
	}
	threads := pprof.Lookup("threadcreate")
	var m0, m1 runtime.MemStats
	for try := 0; ; try++ {
		th := threads.Count()
		runtime.ReadMemStats(&m0)
		round()
		runtime.ReadMemStats(&m1)
		if threads.Count() == th || try == 2 {
			return m1.Mallocs - m0.Mallocs
		}
	}
}

// TestNewFails: an address taken fails New with the part that could not
// listen, leaving nothing open (TestMain checks fds and goroutines).
func TestNewFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := testConfig(engine.BackendEpoll, "127.0.0.1:1")
	cfg.Admin.Listen = taken.Addr().String()
	if _, err := New(cfg, &Options{Logf: func(string, ...any) {}}); err == nil || !strings.Contains(err.Error(), "admin: ") {
		t.Errorf("admin on a taken address: New returned %v", err)
	}
	cfg = testConfig(engine.BackendEpoll, "127.0.0.1:1")
	cfg.Listeners[0].Listen = taken.Addr().String()
	if _, err := New(cfg, &Options{Logf: func(string, ...any) {}}); err == nil || !strings.Contains(err.Error(), "listener web: ") {
		t.Errorf("listener on a taken address: New returned %v", err)
	}
}

// TestIdleTimeoutStuckClient: a client that stops reading while the server
// sends is idle too: when nothing has passed for idle_timeout the proxy
// resets it (a Close would wait forever to send its queue) and frees its
// slot, instead of holding it and its queue for good.
func TestIdleTimeoutStuckClient(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write(make([]byte, 8<<20))
			c.Close()
		})
		cfg := testConfig(b, u.addr)
		const idle = 200 * time.Millisecond
		cfg.Listeners[0].IdleTimeout = Duration(idle)
		cfg.Listeners[0].MaxConns = 1
		cfg.Engine.WriteHighWater = 64 << 10
		p := startProxy(t, cfg)
		c := dial(t, p)
		c.SetReadBuffer(4096) // takes little, then reads nothing
		waitFor(t, "the server to connect", func() bool { return serverTotals(p, u.addr).Connects == 1 })
		deadline := time.Now().Add(5 * time.Second)
		for p.Totals().Listeners[0].Active != 0 {
			if time.Now().After(deadline) {
				l := p.Totals().Listeners[0]
				t.Fatalf("client that reads nothing still open after %v with idle_timeout %v (active %d, idle closes %d)", 5*time.Second, idle, l.Active, l.IdleClosed)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if n := p.Totals().Listeners[0].IdleClosed; n != 1 {
			t.Errorf("%d idle closes counted, want 1", n)
		}
	})
}

// TestBalanceSkipsDown: with a server down, the servers up share the
// clients evenly, in round-robin and in least-conn's ties alike, rather
// than the server after the down one taking its turns as well.
func TestBalanceSkipsDown(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, balance := range []string{RoundRobin, LeastConn} {
			t.Run(balance, func(t *testing.T) {
				dead := deadAddr(t)
				us := []*upstream{newUpstream(t, nil), newUpstream(t, nil)}
				cfg := testConfig(b, dead, us[0].addr, us[1].addr)
				cfg.Pools[0].Balance = balance
				// A live server is marked down only by a connect slower than
				// the timeout: generous, as Fall is 1.
				cfg.Pools[0].Health = &HealthConfig{Interval: Duration(100 * time.Millisecond), Timeout: Duration(100 * time.Millisecond), Rise: 1, Fall: 1}
				p := startProxy(t, cfg)
				waitFor(t, "the dead server marked down", func() bool { return !serverTotals(p, dead).Up })
				for i := range 8 {
					c := dial(t, p)
					if err := roundTrip(c, fmt.Sprint("c", i)); err != nil {
						t.Fatal(err)
					}
					c.Close()
					waitFor(t, "the client to close", func() bool { return p.Totals().Listeners[0].Active == 0 })
				}
				for j, u := range us {
					if n := serverTotals(p, u.addr).Connects; n != 4 {
						t.Errorf("server up %d took %d of 8 clients, want 4", j, n)
					}
				}
			})
		}
	})
}

// TestAbort: Abort ends a drain at once, closing the connections still
// open, where Run would otherwise wait out Options.Drain.
func TestAbort(t *testing.T) {
	u := newUpstream(t, nil)
	p, err := New(testConfig(engine.BackendEpoll, u.addr), &Options{Drain: time.Minute, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	c := dial(t, p)
	if err := roundTrip(c, "open"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) with a connection open and a minute's drain", err)
	case <-time.After(200 * time.Millisecond):
	}
	p.Abort()
	runEnds(t, done, "Abort")
	if err := closedByProxy(c); err != nil {
		t.Error(err)
	}
}

// TestCloseUnrun: a proxy made and never run is released by Close: its
// listener and admin addresses can be bound again at once (the leak check
// in TestMain sees its fds and goroutines); Close after Run is refused.
// Both addresses are ports the test holds (testnet.RefusedAddr): on ports
// the kernel gave for 127.0.0.1:0 and nothing held once Close had
// released them, another test process's listener on port 0 could be
// given one before the test listened there again, which then failed.
func TestCloseUnrun(t *testing.T) {
	u := newUpstream(t, func(c net.Conn) {})
	cfg := testConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].Listen = testnet.RefusedAddr(t)
	cfg.Admin.Listen = testnet.RefusedAddr(t)
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{p.Addr(cfg.Listeners[0].Name).String(), p.AdminAddr().String()}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s still taken after Close: %v", a, err)
			continue
		}
		ln.Close()
	}
	if err := p.Close(); err == nil {
		t.Error("a second Close succeeded")
	}
}

// TestPassiveEject: with passive health, a server that refuses fails times
// in a row is ejected and gets no connect attempts for the cooldown, is
// tried again after it (and ejected again at its next failure), and one
// success once it listens clears it.
func TestPassiveEject(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		dead := deadAddr(t)
		u := newUpstream(t, nil)
		cfg := testConfig(b, dead, u.addr)
		const cooldown = 1500 * time.Millisecond
		cfg.Pools[0].Passive = &PassiveConfig{Fails: 2, Cooldown: Duration(cooldown)}
		p := startProxy(t, cfg)
		client := func(i int) {
			t.Helper()
			c := dial(t, p)
			if err := roundTrip(c, fmt.Sprint("msg ", i)); err != nil {
				t.Fatalf("conn %d: %v", i, err)
			}
			c.Close()
		}
		// Round-robin starts clients 0 and 2 on the dead server: the
		// second failure ejects it.
		start := time.Now()
		for i := range 3 {
			client(i)
		}
		d := serverTotals(p, dead)
		if d.Failures != 2 || d.Up || d.Ejections != 1 || !d.PassiveDown {
			t.Fatalf("dead server after 2 failures: %+v; want 2 failures, 1 ejection, down", d)
		}
		m := scrape(t, p)
		lbl := fmt.Sprintf("{pool=\"app\",server=\"%s\"}", dead)
		for k, v := range map[string]float64{"spindle_proxy_server_passive_down" + lbl: 1, "spindle_proxy_server_up" + lbl: 0,
			fmt.Sprintf("spindle_proxy_server_passive_ejections_total{pool=\"app\",server=\"%s\",reason=\"connect\"}", dead): 1,
			fmt.Sprintf("spindle_proxy_server_passive_ejections_total{pool=\"app\",server=\"%s\",reason=\"http\"}", dead):    0} {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
		for i := range 6 {
			client(3 + i)
		}
		if time.Since(start) >= cooldown {
			t.Skipf("clients took %v, longer than the %v cooldown: the machine is too slow for this test", time.Since(start), cooldown)
		}
		if d := serverTotals(p, dead); d.Failures != 2 {
			t.Fatalf("dead server got %d connect attempts during its cooldown, want none", d.Failures-2)
		}
		// After the cooldown it is tried again: one failure ejects it anew.
		time.Sleep(cooldown)
		if !serverTotals(p, dead).Up {
			t.Fatal("server still down after its cooldown")
		}
		for i := range 2 {
			client(10 + i)
		}
		if d := serverTotals(p, dead); d.Failures != 3 || d.Ejections != 2 || d.Up {
			t.Fatalf("after the cooldown: %+v; want 3 failures, 2 ejections, down", d)
		}
		// Listening now: the first connect after the cooldown clears it.
		v := newUpstream(t, nil)
		v.stop()
		if err := v.listen(dead); err != nil {
			t.Skipf("cannot listen on %s again: %v", dead, err)
		}
		t.Cleanup(v.stop)
		time.Sleep(cooldown)
		for i := range 4 {
			client(20 + i)
		}
		if d := serverTotals(p, dead); d.Connects == 0 || !d.Up || d.PassiveDown || d.Failures != 3 {
			t.Fatalf("after it listens: %+v; want connects, up, 3 failures", d)
		}
	})
}

// TestServerName: a server given as "localhost:PORT" is resolved once, by
// New, to the first address the name resolves to; -check's config keeps
// the name as given, and the metrics name the address connected to.
func TestServerName(t *testing.T) {
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost")
	if err != nil || len(addrs) == 0 {
		t.Skipf("localhost does not resolve here: %v", err)
	}
	first := addrs[0].Unmap()
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := &upstream{serve: echo, conns: map[net.Conn]bool{}}
		if err := u.listen(netip.AddrPortFrom(first, 0).String()); err != nil {
			t.Skipf("cannot listen on localhost's first address %v: %v", first, err)
		}
		t.Cleanup(u.stop)
		port := netip.MustParseAddrPort(u.addr).Port()
		name := fmt.Sprintf("localhost:%d", port)
		cfg := testConfig(b, name)
		p := startProxy(t, cfg)
		c := dial(t, p)
		if err := roundTrip(c, "by name"); err != nil {
			t.Fatal(err)
		}
		if got := p.Config().Pools[0].Servers[0].Address; got != name {
			t.Errorf("config server %q, want %q as given", got, name)
		}
		if s := serverTotals(p, netip.AddrPortFrom(first, port).String()); s.Connects != 1 {
			t.Errorf("server %v: %+v, want 1 connect", netip.AddrPortFrom(first, port), s)
		}
		if out, err := p.Config().YAML(); err != nil || !strings.Contains(string(out), name) {
			t.Errorf("printed config lacks %q (%v):\n%s", name, err, out)
		}
	})
}

// TestServerNameUnresolved: a server name that does not resolve is an
// error from New naming the server. The resolver's DNS is refused, so the
// test sends no query off the host.
func TestServerNameUnresolved(t *testing.T) {
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in this test")
	}}
	cfg := testConfig(engine.BackendEpoll, "127.0.0.1:1", "no-such-server.invalid:80")
	_, err := New(cfg, &Options{Logf: func(string, ...any) {}, Resolver: noDNS})
	if err == nil || !strings.Contains(err.Error(), `pools[0] (app).servers[1]: "no-such-server.invalid:80"`) {
		t.Errorf("New returned %v, want an error naming the server", err)
	}
}

// dnsOnLoopback runs a DNS server on a loopback UDP socket that answers
// an A query for name with 127.0.0.1 and every other query with no
// address, and returns a resolver that asks it alone.
func dnsOnLoopback(t *testing.T, name string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			// Header (12 bytes), then the question: labels, type, class.
			i := 12
			var labels []string
			for i < n && q[i] != 0 {
				l := int(q[i])
				if i+1+l > n {
					break
				}
				labels = append(labels, string(q[i+1:i+1+l]))
				i += 1 + l
			}
			end := i + 5 // the root label, type, class
			if end > n {
				continue
			}
			qtype := uint16(q[i+1])<<8 | uint16(q[i+2])
			resp := append([]byte{}, q[:end]...)
			resp[2], resp[3] = 0x81, 0x80 // a response; recursion desired and available; no error
			resp[6], resp[7] = 0, 0       // answers
			resp[8], resp[9], resp[10], resp[11] = 0, 0, 0, 0
			if strings.EqualFold(strings.Join(labels, "."), name) && qtype == 1 {
				resp[7] = 1
				resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1)
			}
			pc.WriteTo(resp, from)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// TestServerNameDNS: a server name that only DNS knows (a server on
// loopback) is resolved by New through Options.Resolver and connected to;
// a second server that resolves to the same address is an error naming
// both.
func TestServerNameDNS(t *testing.T) {
	const name = "app.spindle.test"
	res := dnsOnLoopback(t, name)
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		port := netip.MustParseAddrPort(u.addr).Port()
		server := fmt.Sprintf("%s:%d", name, port)
		p, err := New(testConfig(b, server), &Options{Logf: func(string, ...any) {}, Resolver: res})
		if err != nil {
			t.Fatal(err)
		}
		runUntilEnd(t, p)
		c := dial(t, p)
		if err := roundTrip(c, "by DNS"); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if s := serverTotals(p, u.addr); s.Connects != 1 {
			t.Errorf("server %s: %+v, want 1 connect", u.addr, s)
		}

		p2, err := New(testConfig(b, u.addr, server), &Options{Logf: func(string, ...any) {}, Resolver: res})
		if p2 != nil {
			p2.Close()
		}
		want := fmt.Sprintf("pools[0] (app).servers[1]: %q is %s, as servers[0] %q is", server, u.addr, u.addr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("two servers at one address: New returned %v, want %q", err, want)
		}
	})
}
