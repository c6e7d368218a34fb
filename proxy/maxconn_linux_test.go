package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"golang.org/x/sys/unix"
)

// capServer is a raw HTTP/1.1 (or, tcp, echo) server that counts the
// connections it has open and the most it had at once. A connection is
// counted from its serving's start until before the server's answer
// (HTTP) or FIN (tcp) goes out: the proxy lets go of a connection's slot only once that
// arrived, so that the count the server sees is never above the cap the
// proxy keeps, whatever the timing.
type capServer struct {
	addr      string
	tcp       bool          // echo (until the client's FIN) instead of HTTP
	delay     time.Duration // before each answer
	hold      chan struct{} // non-nil: each request waits for a receive
	open, max atomic.Int64
	u         *upstream

	mu    sync.Mutex
	paths []string
}

func newCapServer(t *testing.T, tcp bool, delay time.Duration, hold bool) *capServer {
	t.Helper()
	cs := &capServer{tcp: tcp, delay: delay}
	if hold {
		cs.hold = make(chan struct{})
	}
	stop := make(chan struct{})
	u := newUpstream(t, func(c net.Conn) {
		n := cs.open.Add(1)
		for m := cs.max.Load(); n > m && !cs.max.CompareAndSwap(m, n); m = cs.max.Load() {
		}
		cs.serve(c, stop)
	})
	t.Cleanup(func() { close(stop) }) // (before u stops: LIFO)
	cs.addr, cs.u = u.addr, u
	return cs
}

func (cs *capServer) serve(c net.Conn, stop chan struct{}) {
	if cs.tcp {
		time.Sleep(cs.delay)
		io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
		cs.open.Add(-1)
		c.(*net.TCPConn).CloseWrite()
		return
	}
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		cs.open.Add(-1)
		return
	}
	cs.mu.Lock()
	cs.paths = append(cs.paths, req.URL.Path)
	cs.mu.Unlock()
	time.Sleep(cs.delay)
	if cs.hold != nil {
		select {
		case <-cs.hold:
		case <-stop:
		}
	}
	cs.open.Add(-1)
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
}

// got returns the paths the server received, in order.
func (cs *capServer) got() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.paths...)
}

// held sends a GET for path through p and waits until cs holds it.
func (cs *capServer) held(t *testing.T, p *Proxy, path string) net.Conn {
	t.Helper()
	n := len(cs.got())
	c := rawGet(t, p, path)
	waitFor(t, path+" at the server", func() bool { return len(cs.got()) == n+1 })
	return c
}

// queued waits until n wait in p's pool app's queue.
func queued(t *testing.T, p *Proxy, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d queued", n), func() bool { return poolTotals(p, "app").QueueLength == n })
}

// poolTotals returns pool name's totals.
func poolTotals(p *Proxy, name string) PoolTotals {
	for _, pt := range p.Totals().Pools {
		if pt.Name == name {
			return pt
		}
	}
	return PoolTotals{}
}

// capConfig is a config for b with two loops (one where only one CPU is
// given), the pool's servers at max_conns.
func capConfig(b engine.Backend, mode string, loops, maxConns int, servers ...string) *Config {
	cfg := testConfig(b, servers...)
	if loops == 2 {
		cfg.Engine.CPUs = []int{0, 1}
	}
	cfg.Listeners[0].Mode = mode
	cfg.Pools[0].MaxConns = maxConns
	cfg.Pools[0].QueueTimeout = Duration(10 * time.Second)
	return cfg
}

// rawGet sends a GET for path on a new connection to p and returns the
// connection, not reading the response.
func rawGet(t *testing.T, p *Proxy, path string) net.Conn {
	t.Helper()
	c := dial(t, p)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return c
}

// status reads the response to rawGet's request and returns its status
// and body.
func status(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, body := readResponse(t, c, "GET")
	return resp.StatusCode, body
}

// TestMaxConnsTCP: 40 concurrent mode tcp clients over two loops to one
// server of max_conns 3 each get their echo, the server never having
// more than 3 connections from the proxy; the others waited in the queue
// (counted), which is empty at the end.
func TestMaxConnsTCP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, true, 20*time.Millisecond, false)
		p := startProxy(t, capConfig(b, ModeTCP, 2, 3, cs.addr))
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", p.Addr("web").String())
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(15 * time.Second))
				msg := fmt.Sprintf("client %d", i)
				io.WriteString(c, msg)
				c.(*net.TCPConn).CloseWrite()
				got, err := io.ReadAll(c)
				if err != nil || string(got) != msg {
					errs <- fmt.Errorf("client %d: got %q, %v", i, got, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if m := cs.max.Load(); m > 3 {
			t.Errorf("the server had %d connections at once, want 3 at most", m)
		}
		pt := poolTotals(p, "app")
		if pt.Queued == 0 || pt.QueueServed != pt.Queued || pt.QueueTimeouts != 0 {
			t.Errorf("queued %d, served %d, timeouts %d: want some queued, all served", pt.Queued, pt.QueueServed, pt.QueueTimeouts)
		}
		waitFor(t, "the slots let go of", func() bool { return serverTotals(p, cs.addr).Connections == 0 })
		if st := serverTotals(p, cs.addr); st.MaxConns != 3 || poolTotals(p, "app").QueueLength != 0 {
			t.Errorf("max_conns %d, queue %d: want 3 and 0", st.MaxConns, poolTotals(p, "app").QueueLength)
		}
	})
}

// TestMaxConnsHTTP: 60 concurrent HTTP/1.1 requests over two loops to a
// server of max_conns 3 are all answered, the server never having more
// than 3 connections from the proxy.
func TestMaxConnsHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 10*time.Millisecond, false)
		p := startProxy(t, capConfig(b, ModeHTTP, 2, 3, cs.addr))
		hc, url := client(t, p)
		hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 60
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := hc.Get(fmt.Sprintf("%s/r%d", url, i))
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != fmt.Sprintf("/r%d", i) {
					t.Errorf("request %d: %d %q", i, resp.StatusCode, body)
				}
			}()
		}
		wg.Wait()
		if m := cs.max.Load(); m > 3 {
			t.Errorf("the server had %d connections at once, want 3 at most", m)
		}
		if pt := poolTotals(p, "app"); pt.Queued == 0 {
			t.Errorf("nothing queued: the test did not test the queue")
		}
	})
}

// TestMaxConnsQueueOrder: with max_conns 1, requests that arrive while
// the slot is taken get it in the order they came, one at a time.
func TestMaxConnsQueueOrder(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		p := startProxy(t, capConfig(b, ModeHTTP, 1, 1, cs.addr))
		var cs2 []net.Conn
		for i := range 5 {
			cs2 = append(cs2, rawGet(t, p, fmt.Sprintf("/%d", i)))
			if i == 0 {
				waitFor(t, "the first request at the server", func() bool { return len(cs.got()) == 1 })
			} else {
				waitFor(t, "the request queued", func() bool { return poolTotals(p, "app").QueueLength == int64(i) })
			}
		}
		for i, c := range cs2 {
			cs.hold <- struct{}{}
			if st, body := status(t, c); st != 200 || body != fmt.Sprintf("/%d", i) {
				t.Fatalf("request %d: %d %q", i, st, body)
			}
		}
		if got, want := strings.Join(cs.got(), " "), "/0 /1 /2 /3 /4"; got != want {
			t.Errorf("the server got %s, want %s", got, want)
		}
		if m := cs.max.Load(); m != 1 {
			t.Errorf("the server had %d connections at once, want 1", m)
		}
	})
}

// loggedCap starts a proxy of one loop in mode to a capServer (tcp: an
// echo; http: holding each request) of max_conns 1, its queue_timeout
// qt, with an access log at path.
func loggedCap(t *testing.T, b engine.Backend, mode string, qt time.Duration) (p *Proxy, cs *capServer, path string) {
	cs = newCapServer(t, mode == ModeTCP, 0, mode != ModeTCP)
	cfg := capConfig(b, mode, 1, 1, cs.addr)
	cfg.Pools[0].QueueTimeout = Duration(qt)
	path = t.TempDir() + "/log"
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	return startProxy(t, cfg), cs, path
}

// TestMaxConnsQueueTimeout: a request that waits queue_timeout gets 503
// (logged SQ, counted); a mode tcp client is closed.
func TestMaxConnsQueueTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		p, cs, path := loggedCap(t, b, ModeHTTP, 200*time.Millisecond)
		first := cs.held(t, p, "/first")
		start := time.Now()
		second := rawGet(t, p, "/second")
		if st, _ := status(t, second); st != 503 {
			t.Errorf("queued request: %d, want 503", st)
		}
		if el := time.Since(start); el < 150*time.Millisecond || el > 5*time.Second {
			t.Errorf("503 after %v, want about queue_timeout (200ms)", el)
		}
		if pt := poolTotals(p, "app"); pt.QueueTimeouts != 1 || pt.QueueLength != 0 {
			t.Errorf("timeouts %d, queue %d: want 1 and 0", pt.QueueTimeouts, pt.QueueLength)
		}
		m := waitLine(t, path, "the 503's line", func(m map[string]any) bool { return field(m, "target") == "/second" })
		checkFields(t, m, map[string]string{"status": "503", "source": "proxy", "term": "SQ"})
		if q, _ := m["queue_us"].(float64); q < 150e3 || q > 5e6 {
			t.Errorf("queue_us %v, want about 200ms", m["queue_us"])
		}
		ms := scrape(t, p)
		for k, want := range map[string]float64{
			`spindle_proxy_pool_queue_timeouts_total{pool="app"}`:                   1,
			`spindle_proxy_pool_queued_total{pool="app"}`:                           1,
			`spindle_proxy_pool_queue_length{pool="app"}`:                           0,
			`spindle_proxy_pool_queue_served_total{pool="app"}`:                     0,
			`spindle_proxy_pool_queue_wait_seconds_total{pool="app"}`:               0,
			`spindle_proxy_server_max_conns{pool="app",server="` + cs.addr + `"}`:   1,
			`spindle_proxy_server_connections{pool="app",server="` + cs.addr + `"}`: 1,
		} {
			if v, ok := ms[k]; !ok || v != want {
				t.Errorf("%s = %v (%v), want %v", k, v, ok, want)
			}
		}
		cs.hold <- struct{}{}
		if st, _ := status(t, first); st != 200 {
			t.Errorf("first request: %d", st)
		}

		// Mode tcp: the client is closed.
		ts := newCapServer(t, true, 0, false)
		tcfg := capConfig(b, ModeTCP, 1, 1, ts.addr)
		tcfg.Pools[0].QueueTimeout = Duration(200 * time.Millisecond)
		tp := startProxy(t, tcfg)
		holder := dial(t, tp)
		if err := roundTrip(holder, "x"); err != nil {
			t.Fatal(err)
		}
		waiter := dial(t, tp)
		if err := closedByProxy(waiter); err != nil {
			t.Error(err)
		}
		if pt := poolTotals(tp, "app"); pt.QueueTimeouts != 1 {
			t.Errorf("tcp: timeouts %d, want 1", pt.QueueTimeouts)
		}
	})
}

// TestMaxConnsQueueFull: past max_queue waiting, a request gets 503 at
// once (counted) and the waiting ones keep their turn.
func TestMaxConnsQueueFull(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		cfg := capConfig(b, ModeHTTP, 1, 1, cs.addr)
		cfg.Pools[0].MaxQueue = 1
		p := startProxy(t, cfg)
		first := cs.held(t, p, "/first")
		second := rawGet(t, p, "/second")
		queued(t, p, 1)
		start := time.Now()
		if st, _ := status(t, rawGet(t, p, "/third")); st != 503 {
			t.Errorf("request past max_queue: %d, want 503", st)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("503 after %v, want it at once", el)
		}
		if pt := poolTotals(p, "app"); pt.QueueRefused != 1 {
			t.Errorf("refused %d, want 1", pt.QueueRefused)
		}
		cs.hold <- struct{}{}
		cs.hold <- struct{}{}
		for _, c := range []net.Conn{first, second} {
			if st, _ := status(t, c); st != 200 {
				t.Errorf("status %d, want 200", st)
			}
		}
	})
}

// TestMaxConnsClientLeaves: a waiting client that closes leaves the
// queue, and the slot goes to the next one.
func TestMaxConnsClientLeaves(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		p := startProxy(t, capConfig(b, ModeHTTP, 1, 1, cs.addr))
		first := cs.held(t, p, "/first")
		gone := rawGet(t, p, "/gone")
		queued(t, p, 1)
		next := rawGet(t, p, "/next")
		queued(t, p, 2)
		start := time.Now()
		gone.Close()
		queued(t, p, 1)
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("out of the queue after %v: by its queue_timeout, not its close", el)
		}
		if pt := poolTotals(p, "app"); pt.QueueTimeouts != 0 {
			t.Errorf("%d queue timeouts, want 0", pt.QueueTimeouts)
		}
		cs.answer(t, first)
		cs.hold <- struct{}{}
		if st, body := status(t, next); st != 200 || body != "/next" {
			t.Errorf("next: %d %q", st, body)
		}
		if got, want := strings.Join(cs.got(), " "), "/first /next"; got != want {
			t.Errorf("the server got %s, want %s", got, want)
		}

		// Mode tcp: a client that resets while it waits leaves too.
		ts := newCapServer(t, true, 0, false)
		tp := startProxy(t, capConfig(b, ModeTCP, 1, 1, ts.addr))
		holder := dial(t, tp)
		if err := roundTrip(holder, "x"); err != nil {
			t.Fatal(err)
		}
		w := dial(t, tp)
		queued(t, tp, 1)
		w.SetLinger(0)
		w.Close()
		queued(t, tp, 0)
		if pt := poolTotals(tp, "app"); pt.QueueTimeouts != 0 {
			t.Errorf("tcp: %d queue timeouts, want 0", pt.QueueTimeouts)
		}
	})
}

// TestMaxConnsTCPFinQueued: a mode tcp client that sends its FIN while
// it waits in the queue, having sent nothing, leaves the queue at once,
// closed (CD in the access log, its wait in queue_us), as HAProxy drops
// a queued client closed with nothing to pass on; one that sent bytes
// before its FIN keeps its place, and its bytes and FIN pass on at its
// turn, the server's answer coming back (HAProxy's default, without
// option abortonclose).
func TestMaxConnsTCPFinQueued(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		p, _, path := loggedCap(t, b, ModeTCP, 8*time.Second)
		holder := dial(t, p)
		if err := roundTrip(holder, "x"); err != nil {
			t.Fatal(err)
		}
		fin := dial(t, p)
		queued(t, p, 1)
		start := time.Now()
		fin.CloseWrite()
		if err := closedByProxy(fin); err != nil {
			t.Error(err)
		}
		if el := time.Since(start); el > 4*time.Second {
			t.Errorf("closed after %v: by its queue_timeout (8s), not its FIN", el)
		}
		if pt := poolTotals(p, "app"); pt.QueueLength != 0 || pt.QueueTimeouts != 0 {
			t.Errorf("queue %d, timeouts %d: want 0 and 0", pt.QueueLength, pt.QueueTimeouts)
		}
		m := waitLine(t, path, "the FIN's line", func(m map[string]any) bool { return field(m, "term") != "-" })
		checkFields(t, m, map[string]string{"term": "CD", "client_bytes": "0", "server_bytes": "0"})
		if q, _ := m["queue_us"].(float64); q <= 0 {
			t.Errorf("queue_us %v, want its wait", m["queue_us"])
		}

		sent := dial(t, p)
		queued(t, p, 1)
		io.WriteString(sent, "sent")
		sent.CloseWrite()
		holder.CloseWrite() // (the echo ends: its slot is let go of)
		sent.SetReadDeadline(time.Now().Add(10 * time.Second))
		if got, err := io.ReadAll(sent); string(got) != "sent" || err != nil {
			t.Errorf("bytes then FIN: got %q, %v; want its echo", got, err)
		}
		if pt := poolTotals(p, "app"); pt.Queued != 2 || pt.QueueServed != 1 || pt.QueueTimeouts != 0 {
			t.Errorf("queued %d, served %d, timeouts %d: want 2, 1, 0", pt.Queued, pt.QueueServed, pt.QueueTimeouts)
		}
	})
}

// TestMaxConnsSkipsFull: a server at its cap is skipped for another of
// the pool with room (a server's own max_conns); nothing waits.
func TestMaxConnsSkipsFull(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		full := newCapServer(t, false, 0, true)
		room := newCapServer(t, false, 0, false)
		cfg := capConfig(b, ModeHTTP, 1, 0, full.addr, room.addr)
		one := 1
		cfg.Pools[0].Servers[0].MaxConns = &one
		cfg.Pools[0].QueueTimeout = Duration(10 * time.Second)
		p := startProxy(t, cfg)
		first := rawGet(t, p, "/first") // round-robin: the first server
		waitFor(t, "the first request at the server", func() bool { return len(full.got()) == 1 })
		for i := range 6 {
			if st, _ := status(t, rawGet(t, p, fmt.Sprintf("/%d", i))); st != 200 {
				t.Fatalf("request %d: %d", i, st)
			}
		}
		if n := len(room.got()); n != 6 {
			t.Errorf("the server with room got %d requests, want 6", n)
		}
		if pt := poolTotals(p, "app"); pt.Queued != 0 {
			t.Errorf("%d queued, want none", pt.Queued)
		}
		full.answer(t, first)
	})
}

// TestMaxConnsReload: a reload that raises the cap serves the waiting
// request at once; one that lowers it makes new requests wait while the
// connections open are above it.
func TestMaxConnsReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		p := startProxy(t, capConfig(b, ModeHTTP, 2, 1, cs.addr))
		a := cs.held(t, p, "/a")
		bc := rawGet(t, p, "/b")
		queued(t, p, 1)
		mustReload(t, p, capConfig(b, ModeHTTP, 2, 2, cs.addr))
		waitFor(t, "b at the server", func() bool { return len(cs.got()) == 2 })

		mustReload(t, p, capConfig(b, ModeHTTP, 2, 1, cs.addr))
		cs.hold <- struct{}{} // one of a and b answered: 1 open, at the cap
		c := rawGet(t, p, "/c")
		queued(t, p, 1)
		time.Sleep(50 * time.Millisecond)
		if n := len(cs.got()); n != 2 {
			t.Fatalf("the server got %d requests under the lowered cap, want 2", n)
		}
		cs.hold <- struct{}{}
		waitFor(t, "c at the server", func() bool { return len(cs.got()) == 3 })
		cs.hold <- struct{}{}
		for _, x := range []net.Conn{a, bc, c} {
			if st, _ := status(t, x); st != 200 {
				t.Errorf("status %d", st)
			}
		}
	})
}

// TestMaxConnsH2Streams: 200 streams of HTTP/2 clients to an http1 pool
// whose server has max_conns 2 all complete: a stream waiting for a slot
// holds none, and each slot let go of goes to the next.
func TestMaxConnsH2Streams(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, time.Millisecond, false)
		cfg := capConfig(b, ModeHTTP, 2, 2, cs.addr)
		cfg.Listeners[0].H2C = true
		p := startProxy(t, cfg)
		hc, url := h2Client(t, p)
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("GET", fmt.Sprintf("%s/s%d", url, i), nil)
				resp, err := hc.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != fmt.Sprintf("/s%d", i) {
					t.Errorf("stream %d: %d %q", i, resp.StatusCode, body)
				}
			}()
		}
		wg.Wait()
		if m := cs.max.Load(); m > 2 {
			t.Errorf("the server had %d connections at once, want 2 at most", m)
		}
		if pt := poolTotals(p, "app"); pt.Queued == 0 || pt.QueueLength != 0 {
			t.Errorf("queued %d, queue %d: want some queued, none left", pt.Queued, pt.QueueLength)
		}
	})
}

// TestMaxConnsShutdown: requests and clients waiting when the proxy
// stops are closed, none left in the queue (TestMain checks that nothing
// leaks).
func TestMaxConnsShutdown(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		p, stop := runProxy(t, capConfig(b, ModeHTTP, 2, 1, cs.addr))
		cs.held(t, p, "/a")
		var ws []net.Conn
		for i := range 4 {
			ws = append(ws, rawGet(t, p, fmt.Sprintf("/w%d", i)))
		}
		queued(t, p, 4)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := poolTotals(p, "app").QueueLength; n != 0 {
			t.Errorf("%d left in the queue", n)
		}
		for _, c := range ws {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(c); err != nil && !strings.Contains(err.Error(), "reset") {
				t.Errorf("waiting client: %v, want closed", err)
			}
		}
	})
}

// TestMaxConnsIdleGivesWay: a kept-alive connection idle in one loop's
// pool holds the server's only slot; a request on the other loop gets it
// at once (the idle connection closed for it), not at its queue_timeout.
func TestMaxConnsIdleGivesWay(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
		cfg := capConfig(b, ModeHTTP, 2, 1, u.addr)
		cfg.Pools[0].QueueTimeout = Duration(3 * time.Second)
		p := startProxy(t, cfg)
		for i := range 20 {
			c := rawGet(t, p, fmt.Sprintf("/%d", i)) // a new client each, on either loop
			start := time.Now()
			if st, body := status(t, c); st != 200 || body != fmt.Sprintf("/%d", i) {
				t.Fatalf("request %d: %d %q", i, st, body)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("request %d answered after %v", i, el)
			}
			c.Close()
		}
		if pt := poolTotals(p, "app"); pt.QueueTimeouts != 0 {
			t.Errorf("%d queue timeouts, want 0", pt.QueueTimeouts)
		}
	})
}

// TestMaxConnsDeadServerNoStorm: in a pool of a server at its cap and a
// dead one, a request waiting for a slot does not dial the dead one over
// and over (each failure freeing a slot that wakes it again): a few
// failed connects while it waits, not thousands.
func TestMaxConnsDeadServerNoStorm(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		full := newCapServer(t, false, 0, true)
		dead := deadAddr(t)
		cfg := capConfig(b, ModeHTTP, 1, 1, full.addr, dead)
		cfg.Pools[0].QueueTimeout = Duration(500 * time.Millisecond)
		p := startProxy(t, cfg)
		first := full.held(t, p, "/first")
		if st, _ := status(t, rawGet(t, p, "/waits")); st != 503 {
			t.Errorf("waiting request: %d, want 503 at queue_timeout", st)
		}
		if f := serverTotals(p, dead).Failures; f > 10 {
			t.Errorf("%d failed connects to the dead server while one request waited", f)
		}
		full.answer(t, first)
	})
}

// TestMaxConnsAllocs: 10 keep-alive clients through 3 slots (every
// request but 3 waiting in the queue) allocate nothing per request, and
// the 3 connections go from request to request (a connection whose
// response ends goes to the loop's waiters, not closed for a new dial).
func TestMaxConnsAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		httpAllocs(t, b, func(cfg *Config) { cfg.Pools[0].MaxConns = 3 })
	})
}

// TestMaxConnsIdleToDownServer: a kept-alive connection idle to a server
// that went down holds that server's slot; a request waiting for the
// other server (full) does not spin its loop waking itself to find the
// idle connection it cannot take: it waits quietly for its queue_timeout.
// (A server is down after 3 failed checks of 50 ms, not one of 10 ms:
// the down server here refuses at once, and a single 10 ms timeout let a
// loaded machine mark the live server down too: /y never reached it.)
func TestMaxConnsIdleToDownServer(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		x := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") })
		y := newCapServer(t, false, 0, true)
		cfg := capConfig(b, ModeHTTP, 1, 1, x.addr, y.addr)
		cfg.Pools[0].QueueTimeout = Duration(time.Second)
		cfg.Pools[0].Health = &HealthConfig{Type: HealthTCP, Interval: Duration(50 * time.Millisecond), Timeout: Duration(50 * time.Millisecond), Rise: 1, Fall: 3}
		p := startProxy(t, cfg)
		waitFor(t, "x up", func() bool { return serverTotals(p, x.addr).Up })
		if st, body := status(t, rawGet(t, p, "/x")); st != 200 || body != "x" {
			t.Fatalf("to x: %d %q", st, body)
		}
		waitFor(t, "x's connection idle", func() bool { return serverTotals(p, x.addr).Idle == 1 })
		x.ln.Close() // its connections stay; its checks fail
		waitFor(t, "x down", func() bool { return !serverTotals(p, x.addr).Up })
		first := y.held(t, p, "/y")
		w := rawGet(t, p, "/waits")
		queued(t, p, 1)
		var before, after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		time.Sleep(400 * time.Millisecond)
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := time.Duration(syscall.TimevalToNsec(after.Utime)+syscall.TimevalToNsec(after.Stime)) -
			time.Duration(syscall.TimevalToNsec(before.Utime)+syscall.TimevalToNsec(before.Stime))
		if cpu > 200*time.Millisecond {
			t.Errorf("%v of CPU in 400ms while one request waited: a loop spins", cpu)
		}
		if st, _ := status(t, w); st != 503 {
			t.Errorf("waiting request: %d, want 503 at queue_timeout", st)
		}
		y.answer(t, first)
	})
}

// within polls ok for d at most.
func within(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// TestMaxConnsFailedHeadNoBlock: the waiter at the head of a loop's queue
// failed to connect to server x (since come back), the other server full;
// a slot of x let go of goes to the waiter behind it, which can take it,
// rather than to none until queue_timeout (serve stopped at the first
// waiter that found no slot).
func TestMaxConnsFailedHeadNoBlock(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		x, y, cfg := refusedAndHeld(t, b, true, 3*time.Second)
		p := startProxy(t, cfg)
		y.held(t, p, "/h1")
		rawGet(t, p, "/w1") // fails to connect to x, waits for y
		queued(t, p, 1)
		if err := x.u.listen(x.addr); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "/h2 at x", func() bool {
			if len(x.got()) == 0 {
				rawGet(t, p, "/h2")
				return within(time.Second, func() bool { return len(x.got()) == 1 })
			}
			return true
		})
		w3 := rawGet(t, p, "/w3")
		queued(t, p, 2)
		x.hold <- struct{}{} // /h2's answer: x's slot free
		if !within(2*time.Second, func() bool { return len(x.got()) == 2 }) {
			t.Fatalf("x got %v: /w3 did not take x's free slot", x.got())
		}
		x.hold <- struct{}{}
		if st, body := status(t, w3); st != 200 || body != "/w3" {
			t.Errorf("/w3: %d %q", st, body)
		}
	})
}

// TestMaxConnsNoQueueJump: a request arriving while others wait for a
// slot goes behind them, also where a slot came free in the same batch
// of events (HAProxy serves the queue first): with max_conns 1, the
// request that waited is served before the one that came after it, the
// loop held so that the slot's release and the newcomer's head are
// handled together.
func TestMaxConnsNoQueueJump(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		p := startProxy(t, capConfig(b, ModeHTTP, 1, 1, cs.addr))
		first := cs.held(t, p, "/first")
		late := dial(t, p) // connected, its head to come
		waits := rawGet(t, p, "/waits")
		queued(t, p, 1)
		held, free := make(chan struct{}), make(chan struct{})
		p.e.Loops()[0].Post(func() {
			close(held)
			<-free
		})
		<-held
		cs.hold <- struct{}{} // /first answered while the loop is held
		time.Sleep(50 * time.Millisecond)
		io.WriteString(late, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n")
		time.Sleep(50 * time.Millisecond)
		close(free)
		go func() {
			cs.hold <- struct{}{}
			cs.hold <- struct{}{}
		}()
		for _, c := range []net.Conn{first, waits, late} {
			if st, _ := status(t, c); st != 200 {
				t.Errorf("%d", st)
			}
		}
		if got, want := strings.Join(cs.got(), " "), "/first /waits /late"; got != want {
			t.Errorf("the server got %s, want %s", got, want)
		}
	})
}

// onLoop returns a client connection to p's listener web that loop k
// serves (HTTP): connections landing on the other loop are closed.
func onLoop(t *testing.T, p *Proxy, k int) net.Conn {
	t.Helper()
	for range 200 {
		c := dialFromCPU(t, p, p.cfg.Engine.CPUs[k])
		me := c.LocalAddr().(*net.TCPAddr).AddrPort()
		for range 100 {
			if j := loopOf(p, me); j == k {
				return c
			} else if j >= 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		c.Close()
	}
	t.Fatalf("no connection on loop %d", k)
	return nil
}

// dialFromCPU connects to p's listener web from a thread pinned to cpu:
// the SYN, processed there on loopback, steers the connection to that
// CPU's loop, mostly.
func dialFromCPU(t *testing.T, p *Proxy, cpu int) net.Conn {
	t.Helper()
	res := make(chan net.Conn, 1)
	go func() {
		// The thread exits with the goroutine (no Unlock), taking its
		// changed affinity with it.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		unix.SchedSetaffinity(0, &set)
		c, err := net.DialTimeout("tcp", p.Addr("web").String(), 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		res <- c
	}()
	c := <-res
	if c == nil {
		t.FailNow()
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loopOf returns the loop with an HTTP session of the client at addr, -1
// for none yet.
func loopOf(p *Proxy, addr netip.AddrPort) int {
	for k, el := range p.e.Loops() {
		ls, found := p.loops[k], make(chan bool)
		el.Post(func() {
			ok := false
			for _, s := range ls.sessions {
				ok = ok || s.client.RemoteAddr().Addr().Unmap() == addr.Addr().Unmap() && s.client.RemoteAddr().Port() == addr.Port()
			}
			found <- ok
		})
		if <-found {
			return k
		}
	}
	return -1
}

// TestMaxConnsIdleTakenSlotPassedOn: two loops, max_conns 2; loop 0
// ends, in one batch, a kept-alive exchange (its connection pooled for
// its waiter) and one whose connection closes (a slot free); its waiter
// takes the pooled connection, and the free slot goes to the waiter of
// loop 1 at once, not after its queue_timeout or the next release.
func TestMaxConnsIdleTakenSlotPassedOn(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u, at, release := newHoldUpstream(t, "/ka", "/close", "/w0", "/w1")
		p := startTwoLoops(t, b, 2, u.addr)
		ka, cl, w0, w1 := onLoop(t, p, 0), onLoop(t, p, 0), onLoop(t, p, 0), onLoop(t, p, 1)
		sendGet(t, ka, "/ka")
		sendGet(t, cl, "/close")
		waitFor(t, "both slots in use", func() bool { return at("/ka")() && at("/close")() })
		queueOn2(t, p, w0, w1)
		holdLoop(p, 0, func() {
			close(release["/ka"])
			close(release["/close"])
			time.Sleep(100 * time.Millisecond) // both answers at loop 0
		})
		waitFor(t, "/w0 at the server", at("/w0"))
		if !within(time.Second, at("/w1")) {
			t.Errorf("/w1 not at the server with a slot free (connections %d of 2)", serverTotals(p, u.addr).Connections)
		}
		close(release["/w0"])
		close(release["/w1"])
		allOK(t, ka, cl, w0, w1)
	})
}

// TestMaxConnsSlotsReturn: clients ending every way over two loops, to a
// pool of a live server and a dead one at max_conns 2 (kept-alive
// exchanges, server closes before and after a response, 101 tunnels,
// clients going while they wait or their dial is in flight, connect
// failures, idle connections timing out): the count of each server's
// connections stays within 0 and its cap all along and is 0 at the end,
// the queue empty.
func TestMaxConnsSlotsReturn(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/close":
				w.Header().Set("Connection", "close")
			case "/slow":
				time.Sleep(30 * time.Millisecond)
			case "/drop", "/ws":
				c, bw, _ := http.NewResponseController(w).Hijack()
				if r.URL.Path == "/ws" {
					bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
					bw.Flush()
					buf := make([]byte, 2)
					io.ReadFull(bw, buf)
					c.Write(buf)
				}
				c.Close()
				return
			}
			io.WriteString(w, r.URL.Path)
		})
		dead := deadAddr(t)
		cfg := capConfig(b, ModeHTTP, 2, 2, u.addr, dead)
		cfg.Pools[0].QueueTimeout = Duration(3 * time.Second)
		cfg.Pools[0].IdleTimeout = Duration(100 * time.Millisecond)
		p := startProxy(t, cfg)
		stop, bad := make(chan struct{}), make(chan string, 1)
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, st := range p.Totals().Servers {
					if st.Connections < 0 || st.Connections > 2 {
						select {
						case bad <- fmt.Sprintf("%s: %d connections", st.Server, st.Connections):
						default:
						}
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", p.Addr("web").String())
				if err != nil {
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				get := func(path, extra string) *http.Response {
					fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, extra)
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						return nil
					}
					if resp.StatusCode != 101 {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					return resp
				}
				switch i % 6 {
				case 0:
					for _, path := range []string{"/ok", "/slow", "/ok"} {
						if get(path, "") == nil {
							return
						}
					}
				case 1:
					get("/close", "")
				case 2:
					get("/ok", "")
					get("/drop", "")
				case 3:
					if r := get("/ws", "Connection: upgrade\r\nUpgrade: websocket\r\n"); r != nil && r.StatusCode == 101 {
						io.WriteString(c, "hi")
						io.ReadFull(br, make([]byte, 2))
					}
				case 4:
					io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") // and gone
				case 5:
					io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
					time.Sleep(time.Duration(i) * time.Millisecond)
					c.(*net.TCPConn).SetLinger(0) // a reset
				}
			}()
		}
		wg.Wait()
		waitFor(t, "every slot let go of", func() bool {
			return serverTotals(p, u.addr).Connections == 0 && serverTotals(p, dead).Connections == 0 && poolTotals(p, "app").QueueLength == 0
		})
		close(stop)
		select {
		case s := <-bad:
			t.Error(s)
		default:
		}
		if pt := poolTotals(p, "app"); pt.Queued == 0 {
			t.Errorf("none queued: the test did not wait for slots")
		}
		pt, st := poolTotals(p, "app"), serverTotals(p, dead)
		t.Logf("queued %d, served %d, timed out %d; failed connects %d", pt.Queued, pt.QueueServed, pt.QueueTimeouts, st.Failures)
	})
}

// TestMaxConnsIdleShedForOtherLoop: two loops, max_conns 1; loop 0
// ends, in one batch, a kept-alive exchange (its connection pooled for
// the waiter of loop 0) and that waiter's client going: the pooled
// connection's slot goes to the waiter of loop 1 at once, not at the
// idle connection's idle_timeout (or the waiter's queue_timeout).
func TestMaxConnsIdleShedForOtherLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u, at, release := newHoldUpstream(t, "/ka", "/w0", "/w1")
		p := startTwoLoops(t, b, 1, u.addr)
		ka, w0, w1 := onLoop(t, p, 0), onLoop(t, p, 0), onLoop(t, p, 1)
		sendGet(t, ka, "/ka")
		waitFor(t, "/ka at the server", at("/ka"))
		queueOn2(t, p, w0, w1)
		holdLoop(p, 0, func() {
			close(release["/ka"])
			time.Sleep(50 * time.Millisecond) // its answer at loop 0
			w0.Close()
			time.Sleep(50 * time.Millisecond)
		})
		if !within(time.Second, at("/w1")) {
			t.Errorf("/w1 not at the server (connections %d of 1, %d idle)", serverTotals(p, u.addr).Connections, serverTotals(p, u.addr).Idle)
		}
		close(release["/w1"])
		allOK(t, ka, w1)
	})
}

// newHoldUpstream is an HTTP/1.1 server (kept alive) that holds each
// request for one of paths until its channel in release is closed, at
// reporting its arrival.
func newHoldUpstream(t *testing.T, paths ...string) (u *httpUpstream, at func(string) func() bool, release map[string]chan struct{}) {
	var mu sync.Mutex
	arrived := map[string]bool{}
	release = map[string]chan struct{}{}
	for _, path := range paths {
		release[path] = make(chan struct{})
	}
	u = newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.URL.Path] = true
		mu.Unlock()
		select {
		case <-release[r.URL.Path]:
		case <-time.After(10 * time.Second):
		}
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, r.URL.Path)
	})
	at = func(path string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return arrived[path] }
	}
	return u, at, release
}

// holdLoop runs f while loop k of p is held (a Post that waits for f):
// what f makes happen reaches the loop as one batch of events.
func holdLoop(p *Proxy, k int, f func()) {
	held, free := make(chan struct{}), make(chan struct{})
	p.e.Loops()[k].Post(func() {
		close(held)
		<-free
	})
	<-held
	f()
	close(free)
}

// sendGet sends a GET for path on c.
func sendGet(t *testing.T, c net.Conn, path string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
}

// startTwoLoops runs a proxy of two loops (skipped where there is one
// CPU) to server at max_conns maxConns, queue_timeout 4s.
func startTwoLoops(t *testing.T, b engine.Backend, maxConns int, server string) *Proxy {
	t.Helper()
	cfg := capConfig(b, ModeHTTP, 2, maxConns, server)
	cfg.Pools[0].QueueTimeout = Duration(4 * time.Second)
	p := startProxy(t, cfg)
	if len(p.e.Loops()) < 2 {
		t.Skip("needs two loops (two CPUs)")
	}
	return p
}

// allOK reads the responses on cs, each to be a 200.
func allOK(t *testing.T, cs ...net.Conn) {
	t.Helper()
	for _, c := range cs {
		if st, _ := status(t, c); st != 200 {
			t.Errorf("status %d", st)
		}
	}
}

// queueOn2 sends /w1 on w1 (loop 1's) and then /w0 on w0 (loop 0's),
// each waiting in the queue before the next.
func queueOn2(t *testing.T, p *Proxy, w0, w1 net.Conn) {
	t.Helper()
	sendGet(t, w1, "/w1")
	queued(t, p, 1)
	sendGet(t, w0, "/w0")
	queued(t, p, 2)
}

// TestMaxConnsServerUpServesQueue: a request waits, the one server up at
// its cap, the other down by its health checks; that one coming up
// serves it at once, not at queue_timeout (HAProxy has a server up
// again take from the queue).
func TestMaxConnsServerUpServesQueue(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		servedWhenBack(t, b, func(cfg *Config) {
			cfg.Pools[0].Health = &HealthConfig{Type: HealthTCP, Interval: Duration(50 * time.Millisecond), Timeout: Duration(50 * time.Millisecond), Rise: 1, Fall: 3}
		}, func(p *Proxy, x *capServer) {
			waitFor(t, "x down", func() bool { return !serverTotals(p, x.addr).Up })
		}, nil)
	})
}

// servedWhenBack: of a pool of one loop, servers x (refusing connects)
// and y (holding its requests) at max_conns 1 and queue_timeout 4s
// (setup: more of the pool's config), y holds /first and out(p, x) has x
// out of the pool; /waits waits; stillOut(p, x, since), where given,
// checks x was still out when /waits was routed (since: /first's
// sending, before x was put out: see stillEjected); x listens again, and
// /waits reaches it within a second of its coming back (servedAtX),
// answered 200. A try the machine held up runs again (untilCalm).
func servedWhenBack(t *testing.T, b engine.Backend, setup func(*Config), out func(p *Proxy, x *capServer), stillOut func(p *Proxy, x *capServer, since time.Time, fails int64) (fault, paused string)) {
	t.Helper()
	untilCalm(t, func() (fault, paused string) {
		x, y, cfg := refusedAndHeld(t, b, false, 4*time.Second)
		setup(cfg)
		p := startProxy(t, cfg)
		start := time.Now()
		first := y.held(t, p, "/first")
		out(p, x)
		fails := serverTotals(p, x.addr).ConsecutiveFails
		w := rawGet(t, p, "/waits")
		queued(t, p, 1)
		if stillOut != nil {
			if fault, paused = stillOut(p, x, start, fails); fault != "" {
				return fault, paused
			}
		}
		fault, paused = servedAtX(t, x, w, time.Second, time.Second)
		y.answer(t, first)
		return fault, paused
	})
}

// stillEjected is servedWhenBack's stillOut, and more, for an ejection of
// x by passive health that began after since and lasts cooldown at
// least: x must still be ejected and /waits, whose walk is over once it
// waits, must not have tried x (x's failed connects still fails; a
// request does not go back to a server it failed to connect to, and
// would wait for y's slot at x's end). Where the ejection ran out before
// that, less than cooldown after since is the proxy's fault, more a
// pause of the test's (a loaded machine's).
func stillEjected(p *Proxy, x *capServer, since time.Time, fails int64, cooldown time.Duration) (fault, paused string) {
	st := serverTotals(p, x.addr)
	if st.PassiveDown && st.ConsecutiveFails == fails {
		return "", ""
	}
	d := time.Since(since)
	fault = fmt.Sprintf("x's ejection ran out before the request waited (ejected %v, %d failed connects to x where there were %d before /waits), %v after /first's sending", st.PassiveDown, st.ConsecutiveFails, fails, d.Round(time.Millisecond))
	if d < cooldown {
		return fault + fmt.Sprintf(": within the cooldown (%v)", cooldown), ""
	}
	return fault, fmt.Sprintf("past the cooldown (%v)", cooldown)
}

// servedAtX has x, out of the pool, listen again and waits for w's
// request, /waits, to reach it, answered 200: within late of x's
// coming back, which is within back of its listening; past that where
// the process was held up for late (stallWatch), a pause (untilCalm's).
// Where it does not reach x at all (the waiter left to queue_timeout, a
// 503), the fault is returned and the 503 reported.
func servedAtX(t *testing.T, x *capServer, w net.Conn, back, late time.Duration) (fault, paused string) {
	t.Helper()
	stalls := stallWatch()
	listened := time.Now()
	if err := x.u.listen(x.addr); err != nil {
		t.Fatal(err)
	}
	atX := within(12*time.Second, func() bool { return len(x.got()) == 1 })
	took, stall := time.Since(listened), stalls()
	if st, body := status(t, w); st != 200 || body != "/waits" {
		t.Errorf("waiting request: %d %q", st, body)
	}
	bound := back + late
	switch {
	case !atX:
		return "/waits not at x, back with room, 12s after it listened", ""
	case took <= bound:
		return "", ""
	case stall >= late:
		return fmt.Sprintf("/waits at x %v after it listened", took.Round(time.Millisecond)), fmt.Sprintf("the process was held up for %v", stall.Round(time.Millisecond))
	}
	return fmt.Sprintf("/waits at x %v after it listened (the process held up for %v at most); want it within %v (back within %v)", took.Round(time.Millisecond), stall.Round(time.Millisecond), bound, back), ""
}

// TestMaxConnsReloadAddedServer: a request waits (its pool's one server
// at its cap) when a reload adds a server to the pool; at its turn it
// walks the pool's new generation and goes to the server added, with
// room, rather than waiting for queue_timeout beside it; and a request
// coming after, routed to the new pool, is served too.
func TestMaxConnsReloadAddedServer(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		y := newCapServer(t, false, 0, true)
		z := newCapServer(t, false, 0, false)
		cfg := capConfig(b, ModeHTTP, 1, 1, y.addr)
		cfg.Pools[0].QueueTimeout = Duration(4 * time.Second)
		p := startProxy(t, cfg)
		first := y.held(t, p, "/first")
		w := rawGet(t, p, "/waits")
		queued(t, p, 1)
		cfg = capConfig(b, ModeHTTP, 1, 1, y.addr, z.addr)
		cfg.Pools[0].QueueTimeout = Duration(4 * time.Second)
		mustReload(t, p, cfg)
		if !within(time.Second, func() bool { return len(z.got()) == 1 }) {
			t.Errorf("/waits not at z, added by the reload with room, a second after it")
		}
		if st, body := status(t, w); st != 200 || body != "/waits" {
			t.Errorf("waiting request: %d %q", st, body)
		}
		start := time.Now()
		if st, body := status(t, rawGet(t, p, "/new")); st != 200 || body != "/new" || time.Since(start) > time.Second {
			t.Errorf("request after the reload: %d %q after %v", st, body, time.Since(start))
		}
		y.answer(t, first)
	})
}

// answer lets cs answer the request it holds and checks that c, whose
// request it was, gets a 200.
func (cs *capServer) answer(t *testing.T, c net.Conn) {
	t.Helper()
	cs.hold <- struct{}{}
	if st, _ := status(t, c); st != 200 {
		t.Errorf("%d, want 200", st)
	}
}

// refuse stops cs's listening: its connects are refused until
// cs.u.listen(cs.addr) (its connections open stay).
func (cs *capServer) refuse() {
	cs.u.mu.Lock()
	defer cs.u.mu.Unlock()
	cs.u.ln.Close()
}

// refusedAndHeld returns a server x that refuses connects until it
// listens again (holding each request where xHolds), a server y that
// holds each request, and a config of one loop for a pool of the two at
// max_conns 1, queue_timeout qt.
func refusedAndHeld(t *testing.T, b engine.Backend, xHolds bool, qt time.Duration) (x, y *capServer, cfg *Config) {
	x, y = newCapServer(t, false, 0, xHolds), newCapServer(t, false, 0, true)
	x.refuse()
	cfg = capConfig(b, ModeHTTP, 1, 1, x.addr, y.addr)
	cfg.Pools[0].QueueTimeout = Duration(qt)
	return x, y, cfg
}

// TestMaxConnsShedIdleAllocs: a wait that begins while another loop holds
// an idle connection to a server at its cap asks that loop to shed it
// (shedIdle) without allocating.
func TestMaxConnsShedIdleAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u, _, release := newHoldUpstream(t, "/ka")
		close(release["/ka"])
		p := startTwoLoops(t, b, 1, u.addr)
		c := onLoop(t, p, 1)
		sendGet(t, c, "/ka")
		allOK(t, c)
		waitFor(t, "loop 1's connection idle", func() bool { return serverTotals(p, u.addr).Idle == 1 })
		pl := p.pools[0]
		if pl == nil || pl.servers[0].hasRoom() {
			t.Fatal("no pool, or its server not at its cap")
		}
		if n := testing.AllocsPerRun(100, func() { p.loops[0].shedIdle(pl) }); n != 0 {
			t.Errorf("%v allocations a shedIdle", n)
		}
		if serverTotals(p, u.addr).Idle != 1 {
			t.Error("the idle connection was shed with no waiter")
		}
	})
}

// TestMaxConnsEjectionEndServesQueue: a request waits, the one server up
// at its cap, the other ejected by passive health (its slot free); the
// ejection running out serves it at once, as a server up again by its
// health checks does, not at queue_timeout.
func TestMaxConnsEjectionEndServesQueue(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		servedWhenBack(t, b, func(cfg *Config) {
			cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Second)}
		}, func(p *Proxy, x *capServer) {
			if !serverTotals(p, x.addr).PassiveDown {
				rawGet(t, p, "/ejects").Close() // fails to connect to x, waits for y
				waitFor(t, "x ejected", func() bool { return serverTotals(p, x.addr).PassiveDown })
				queued(t, p, 0)
			}
		}, func(p *Proxy, x *capServer, since time.Time, fails int64) (fault, paused string) {
			return stillEjected(p, x, since, fails, time.Second)
		})
	})
}

// TestMaxConnsEjectionEndServesQueueBesideRunOut: as
// TestMaxConnsEjectionEndServesQueue, where the server up at its cap, y,
// still has an ejection of its own on record that has run out (for
// failed exchanges: its connects do not end it, and no exchange with it
// has succeeded since); x's ejection, the one still to end, serves the
// waiter at its end all the same, not queue_timeout.
//
// x's ejection (a cooldown of 1s, or 2s where it is x's second in a row)
// begins after /first's sending; the request must wait before it ends,
// and a loaded machine can hold the test up for that long: an ejection
// found over sooner than the cooldown from /first's sending fails the
// test, one found over later is a pause of the test's and the try runs
// again (untilCalm). Likewise /waits must reach x within 3s of x's
// listening (a second after the ejection's end at the latest), where
// the bug leaves it waiting to queue_timeout (10s) and a 503; past 3s
// with the process held up for a second (stallWatch), the try runs
// again.
func TestMaxConnsEjectionEndServesQueueBesideRunOut(t *testing.T) {
	const cooldown = time.Second
	forBackends(t, func(t *testing.T, b engine.Backend) {
		untilCalm(t, func() (fault, paused string) {
			x := newCapServer(t, false, 0, false)
			x.refuse()
			hold, stop := make(chan struct{}), make(chan struct{})
			y := newUpstream(t, func(c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				if req.URL.Path == "/bad" {
					fmt.Fprint(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
					return
				}
				select {
				case <-hold:
				case <-stop:
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
			})
			t.Cleanup(func() { close(stop) }) // (before y stops: LIFO)
			cfg := capConfig(b, ModeHTTP, 1, 1, x.addr, y.addr)
			cfg.Pools[0].QueueTimeout = Duration(10 * time.Second)
			cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, HTTPErrors: 1, Cooldown: Duration(cooldown)}
			p := startProxy(t, cfg)

			// y answers 503: ejected for failed exchanges, which runs out.
			if st, _ := status(t, rawGet(t, p, "/bad")); st != 503 {
				t.Fatalf("/bad: %d, want y's 503", st)
			}
			if serverTotals(p, y.addr).EjectionsHTTP != 1 {
				t.Fatal("y not ejected by its 503")
			}
			waitFor(t, "the ejections run out", func() bool {
				return !serverTotals(p, x.addr).PassiveDown && !serverTotals(p, y.addr).PassiveDown
			})

			// y holds /first (at its cap), x is ejected again.
			start := time.Now()
			first := rawGet(t, p, "/first")
			waitFor(t, "/first at y", func() bool { return serverTotals(p, y.addr).Active == 1 })
			if !serverTotals(p, x.addr).PassiveDown {
				rawGet(t, p, "/ejects").Close() // fails to connect to x, waits for y
				waitFor(t, "x ejected", func() bool { return serverTotals(p, x.addr).PassiveDown })
				queued(t, p, 0)
			}
			fails := serverTotals(p, x.addr).ConsecutiveFails
			w := rawGet(t, p, "/waits")
			queued(t, p, 1)
			if fault, paused = stillEjected(p, x, start, fails, cooldown); fault != "" {
				return fault, paused
			}
			fault, paused = servedAtX(t, x, w, 2*time.Second, time.Second)
			hold <- struct{}{}
			if st, _ := status(t, first); st != 200 {
				t.Errorf("/first: %d, want 200", st)
			}
			return fault, paused
		})
	})
}

// TestRepool: a waiter of a pool a reload replaced walks the new
// generation, the servers it failed to connect to (kept by the reload)
// still left out, at their new indexes.
func TestRepool(t *testing.T) {
	x, y, z := &server{addr: "x"}, &server{addr: "y"}, &server{addr: "z"}
	sh := &poolShared{}
	old := &pool{servers: []*server{x, y}, shared: sh}
	sh.q.pool.Store(old)
	failed := uint64(1) // x
	if pl := repool(old, &failed); pl != old || failed != 1 {
		t.Fatalf("not replaced: %p (old %p), failed %b", pl, old, failed)
	}
	np := &pool{servers: []*server{z, y, x}, shared: sh}
	sh.q.pool.Store(np)
	if pl := repool(old, &failed); pl != np || failed != 1<<2 {
		t.Fatalf("replaced: %p (new %p), failed %b, want 100", pl, np, failed)
	}
	h2 := &pool{servers: []*server{x}, shared: sh, h2: true}
	sh.q.pool.Store(h2)
	if pl := repool(np, &failed); pl != np {
		t.Fatal("moved to a pool of another protocol (h2c)")
	}
}

// TestMaxConnsQueueTimeoutLongest: a queue_timeout of Duration's largest
// (2562047h, as good as none) holds a waiter until its turn, and leaves
// its connection's other timeouts as they are: an HTTP/1.1 client served
// after its wait is closed at keepalive_timeout once idle, and an HTTP/2
// client's stream that holds the server's one slot gets its 504 at
// response_timeout while another stream of the connection waits. The
// wait's deadline (its start plus the timeout) wrapped past an int64 into
// the past, and the timer, armed for it, kept no earlier deadline after.
func TestMaxConnsQueueTimeoutLongest(t *testing.T) {
	const longest = Duration(1<<63 - 1)
	forBackends(t, func(t *testing.T, b engine.Backend) {
		t.Run("h1", func(t *testing.T) {
			cs := newCapServer(t, false, 0, true)
			cfg := capConfig(b, ModeHTTP, 1, 1, cs.addr)
			cfg.Pools[0].QueueTimeout = longest
			cfg.Listeners[0].KeepaliveTimeout = Duration(300 * time.Millisecond)
			p := startProxy(t, cfg)
			first := cs.held(t, p, "/first")
			second := rawGet(t, p, "/second")
			queued(t, p, 1)
			time.Sleep(200 * time.Millisecond)
			if pt := poolTotals(p, "app"); pt.QueueLength != 1 || pt.QueueTimeouts != 0 {
				t.Fatalf("queue %d, timeouts %d, 200ms on: want 1 waiting, none timed out", pt.QueueLength, pt.QueueTimeouts)
			}
			cs.answer(t, first)
			cs.answer(t, second)
			start := time.Now()
			if err := closedByProxy(second); err != nil || time.Since(start) > 2*time.Second {
				t.Errorf("the client served after its wait, idle: %v after %v; want closed at keepalive_timeout (300ms)", err, time.Since(start))
			}
		})
		t.Run("h2", func(t *testing.T) {
			cs := newCapServer(t, false, 0, true)
			cfg := capConfig(b, ModeHTTP, 1, 1, cs.addr)
			cfg.Pools[0].QueueTimeout = longest
			cfg.Listeners[0].H2C = true
			cfg.Listeners[0].ResponseTimeout = Duration(500 * time.Millisecond)
			p := startProxy(t, cfg)
			hc, url := h2Client(t, p)
			get := func(path string) chan int {
				ch := make(chan int, 1)
				go func() {
					resp, err := hc.Get(url + path)
					if err != nil {
						ch <- 0
						return
					}
					resp.Body.Close()
					ch <- resp.StatusCode
				}()
				return ch
			}
			slow := get("/slow")
			waitFor(t, "/slow at the server", func() bool { return len(cs.got()) == 1 })
			waits := get("/waits")
			queued(t, p, 1)
			select {
			case st := <-slow:
				if st != 504 {
					t.Errorf("/slow: %d, want 504 at response_timeout", st)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("/slow: no 504 3s on (response_timeout 500ms)")
			}
			cs.hold <- struct{}{} // (/slow's, its connection reset)
			cs.hold <- struct{}{}
			if st := <-waits; st != 200 {
				t.Errorf("/waits: %d, want 200", st)
			}
		})
	})
}

// TestMaxConnsRetryWaitsItsOwn: a request that waited in the queue
// before its first try, which then took the server longer than
// queue_timeout (a 503 after 2.4s, queue_timeout 2s), waits again for
// its retry (every slot taken, a request waiting before it) with what
// its first wait left of queue_timeout: the time at the server is no
// wait. Its retry is served (200), not refused at once (503, SQ), as a
// request that had not waited before was. An HTTP/1.1 client's request
// and an HTTP/2 client's stream.
func TestMaxConnsRetryWaitsItsOwn(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			t.Run(map[bool]string{false: "h1", true: "h2"}[h2c], func(t *testing.T) {
				var tries, holds atomic.Int64
				hold, stop, behind := make(chan struct{}), make(chan struct{}), make(chan struct{})
				u := newUpstream(t, func(c net.Conn) {
					req, err := http.ReadRequest(bufio.NewReader(c))
					if err != nil {
						return
					}
					if req.URL.Path == "/a" && tries.Add(1) == 1 {
						// Past queue_timeout, and not before the second
						// /hold waits behind it (behind): a loaded machine
						// sent that more than a second after the 1.4 s the
						// test sleeps, after the 503, and it found the slot
						// free ("timed out waiting for 1 queued").
						time.Sleep(2400 * time.Millisecond)
						select {
						case <-behind:
						case <-stop:
						}
						fmt.Fprint(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
						return
					}
					if req.URL.Path == "/hold" {
						holds.Add(1)
						select {
						case <-hold:
						case <-stop:
						}
					}
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
				})
				t.Cleanup(func() { close(stop) }) // (before u stops: LIFO)
				cfg := capConfig(b, ModeHTTP, 1, 1, u.addr)
				cfg.Pools[0].QueueTimeout = Duration(2 * time.Second)
				cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
				cfg.Listeners[0].H2C = h2c
				p := startProxy(t, cfg)
				first := rawGet(t, p, "/hold")
				waitFor(t, "/hold at the server", func() bool { return holds.Load() == 1 })
				type answer struct {
					st   int
					body string
				}
				r := make(chan answer, 1)
				if h2c {
					hc, url := h2Client(t, p)
					go func() {
						resp, err := hc.Get(url + "/a")
						if err != nil {
							r <- answer{}
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						r <- answer{resp.StatusCode, string(body)}
					}()
				} else {
					c := rawGet(t, p, "/a")
					go func() {
						c.SetReadDeadline(time.Now().Add(15 * time.Second))
						resp, err := http.ReadResponse(bufio.NewReader(c), nil)
						if err != nil {
							r <- answer{}
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						r <- answer{resp.StatusCode, string(body)}
					}()
				}
				queued(t, p, 1)
				hold <- struct{}{}
				if st, _ := status(t, first); st != 200 {
					t.Fatalf("/hold: %d", st)
				}
				waitFor(t, "/a at the server", func() bool { return tries.Load() == 1 })
				time.Sleep(1400 * time.Millisecond) // (the second /hold's wait, about 1s, within queue_timeout)
				second := rawGet(t, p, "/hold")
				queued(t, p, 1)
				close(behind)
				waitFor(t, "the second /hold at the server", func() bool { return holds.Load() == 2 })
				hold <- struct{}{}
				if a := <-r; a.st != 200 || a.body != "/a" {
					t.Errorf("/a, retried after its 503: %d %q, want 200 \"/a\"", a.st, a.body)
				}
				if st, _ := status(t, second); st != 200 {
					t.Errorf("the second /hold: %d", st)
				}
			})
		}
	})
}
