package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// traffic is a client making requests one after the other, on its own
// goroutine, until the test stops it; the first error fails the test.
type traffic struct {
	n    atomic.Int64
	quit chan struct{}
	done chan struct{}
	err  error
	once sync.Once
}

// steady starts do(i) in a loop: the traffic that a reload must not
// disturb.
func steady(t *testing.T, do func(i int) error) *traffic {
	tr := &traffic{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for i := 0; ; i++ {
			select {
			case <-tr.quit:
				return
			default:
			}
			if err := do(i); err != nil {
				tr.err = fmt.Errorf("request %d: %w", i, err)
				return
			}
			tr.n.Add(1)
		}
	}()
	t.Cleanup(func() { tr.stop(t) })
	return tr
}

// wait waits for n more requests done from now.
func (tr *traffic) wait(t *testing.T, n int64) {
	t.Helper()
	to := tr.n.Load() + n
	waitFor(t, fmt.Sprintf("%d more requests", n), func() bool {
		select {
		case <-tr.done:
			return true
		default:
		}
		return tr.n.Load() >= to
	})
	select {
	case <-tr.done:
		tr.stop(t)
		t.FailNow()
	default:
	}
}

// stop stops the traffic and fails the test with its error.
func (tr *traffic) stop(t *testing.T) {
	t.Helper()
	tr.once.Do(func() {
		close(tr.quit)
		<-tr.done
		if tr.err != nil {
			t.Errorf("traffic across the reloads: %v", tr.err)
		}
	})
}

// tcpTraffic is steady traffic of new connections to listener web.
func tcpTraffic(t *testing.T, p *Proxy) *traffic {
	addr := p.Addr("web").String()
	return steady(t, func(i int) error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		return roundTrip(c, fmt.Sprint("steady ", i))
	})
}

// httpTraffic is steady traffic of GETs to listener web on kept client
// connections (an http.Client's).
func httpTraffic(t *testing.T, p *Proxy) *traffic {
	c, base := client(t, p)
	return steady(t, func(i int) error {
		resp, err := c.Get(fmt.Sprintf("%s/steady/%d", base, i))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

func mustReload(t *testing.T, p *Proxy, cfg *Config) {
	t.Helper()
	if err := p.Reload(cfg); err != nil {
		t.Fatalf("Reload: %v", err)
	}
}

// TestReloadTCPServers: under steady traffic, a server added takes new
// connections; a server removed takes none, while a connection to it
// open across both reloads carries 4 MB intact after them.
func TestReloadTCPServers(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2, u3 := newUpstream(t, nil), newUpstream(t, nil), newUpstream(t, nil)
		p := startProxy(t, testConfig(b, u1.addr, u2.addr))
		long := dial(t, p) // round-robin's first: u1
		if err := roundTrip(long, "long"); err != nil {
			t.Fatal(err)
		}
		if n := u1.accepted.Load(); n != 1 {
			t.Fatalf("first server accepted %d, want the first client", n)
		}
		tr := tcpTraffic(t, p)
		tr.wait(t, 5)
		mustReload(t, p, testConfig(b, u1.addr, u2.addr, u3.addr))
		waitFor(t, "the server added to take clients", func() bool { return u3.accepted.Load() > 0 })

		mustReload(t, p, testConfig(b, u2.addr, u3.addr))
		tr.wait(t, 2) // a client dialed before the reload has been accepted
		n1, n2, n3 := u1.accepted.Load(), u2.accepted.Load(), u3.accepted.Load()
		tr.wait(t, 30)
		if n := u1.accepted.Load(); n != n1 {
			t.Errorf("the server removed accepted %d connections after the reload", n-n1)
		}
		if u2.accepted.Load() == n2 || u3.accepted.Load() == n3 {
			t.Errorf("the servers kept took no new clients")
		}
		if st := serverTotals(p, u2.addr); st.Connects < uint64(n2) {
			t.Errorf("kept server's connects %d: counters restarted at the reload (it accepted %d)", st.Connects, n2)
		}
		tr.stop(t)

		data := randomBytes(7, 4<<20)
		long.SetDeadline(time.Now().Add(20 * time.Second))
		werr := make(chan error, 1)
		go func() {
			_, err := long.Write(data)
			werr <- err
		}()
		got := make([]byte, len(data))
		if _, err := io.ReadFull(long, got); err != nil {
			t.Fatalf("the connection to the removed server, after the reload: %v", err)
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("4 MB through the removed server's connection came back changed")
		}
	})
}

// longBody is what the HTTP servers of the reload tests answer /long
// with: 4 MB in 64 KiB writes 2ms apart.
var longBody = randomBytes(3, 4<<20)

func reloadHTTPServer(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/long" {
			io.WriteString(w, name)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(longBody)))
		for off := 0; off < len(longBody); off += 64 << 10 {
			w.Write(longBody[off : off+64<<10])
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// TestReloadHTTPServers: as TestReloadTCPServers in mode http: the
// requests on kept client connections go on through both reloads, a
// server added takes requests, a server removed gets no new connection,
// and a response it is sending when removed arrives whole.
func TestReloadHTTPServers(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2, u3 := newHTTPUpstream(t, reloadHTTPServer("u1")), newHTTPUpstream(t, reloadHTTPServer("u2")), newHTTPUpstream(t, reloadHTTPServer("u3"))
		p := startProxy(t, httpConfig(b, u1.addr, u2.addr))
		long := dial(t, p) // round-robin's first: u1
		io.WriteString(long, "GET /long HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(long)
		long.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, 64<<10)
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatal(err)
		}
		tr := httpTraffic(t, p)
		tr.wait(t, 5)
		mustReload(t, p, httpConfig(b, u1.addr, u2.addr, u3.addr))
		waitFor(t, "the server added to take requests", func() bool { return serverTotals(p, u3.addr).Requests > 0 })
		mustReload(t, p, httpConfig(b, u2.addr, u3.addr))
		n1 := u1.accepted.Load()
		r2, r3 := serverTotals(p, u2.addr).Requests, serverTotals(p, u3.addr).Requests
		tr.wait(t, 30)
		if n := u1.accepted.Load(); n != n1 {
			t.Errorf("the server removed accepted %d connections after the reload", n-n1)
		}
		if serverTotals(p, u2.addr).Requests == r2 || serverTotals(p, u3.addr).Requests == r3 {
			t.Errorf("the servers kept took no requests after the reload")
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("the response from the removed server, after the reload: %v", err)
		}
		if !bytes.Equal(append(first, rest...), longBody) {
			t.Fatalf("the response from the removed server: %d bytes, changed or cut (want %d)", len(first)+len(rest), len(longBody))
		}
		tr.stop(t)
		// The removed server's connection was not pooled: what is open is
		// the clients and the kept servers' idle connections.
		waitFor(t, "no connection but the clients and the pooled ones", func() bool {
			tt := p.Totals()
			n := tt.Listeners[0].Active
			for _, s := range tt.Servers {
				n += s.Idle + s.Active
			}
			return p.Engine().Stats().Open == n
		})
	})
}

// TestReloadHTTPRoute: a route and its pool added by a reload take the
// next request on a client connection open across it, and a new
// connection's.
func TestReloadHTTPRoute(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		app, api := newHTTPUpstream(t, reloadHTTPServer("app")), newHTTPUpstream(t, reloadHTTPServer("api"))
		p := startProxy(t, httpConfig(b, app.addr))
		tr := httpTraffic(t, p)
		c := dial(t, p)
		br := bufio.NewReader(c)
		get1 := func(path string) string {
			t.Helper()
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			_, body := readResponseFrom(t, c, br, "GET")
			return body
		}
		if got := get1("/api/1"); got != "app" {
			t.Fatalf("before the reload: %q", got)
		}
		cfg := httpConfig(b, app.addr)
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "api", Servers: Servers(api.addr)})
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/api/", Pool: "api"}}
		mustReload(t, p, cfg)
		if got := get1("/api/2"); got != "api" {
			t.Errorf("the next request on a kept connection went to %q, want the route's pool", got)
		}
		if got := get1("/other"); got != "app" {
			t.Errorf("a request no route matches went to %q, want app", got)
		}
		hc, base := client(t, p)
		if _, body := get(t, hc, base+"/api/3"); body != "api" {
			t.Errorf("a new connection's request went to %q, want the route's pool", body)
		}
		tr.wait(t, 10)
		tr.stop(t)
		if n := api.accepted.Load(); n != 1 {
			t.Errorf("the route's server accepted %d connections, want 1 (pooled, for both clients)", n)
		}
	})
}

// TestReloadKeepsPooled: a server kept by a reload of its pool keeps its
// idle keep-alive connection (the next request reuses it) and its
// counters; removed, its idle connection is closed.
func TestReloadKeepsPooled(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newHTTPUpstream(t, reloadHTTPServer("u1")), newHTTPUpstream(t, reloadHTTPServer("u2"))
		p := startProxy(t, httpConfig(b, u1.addr))
		c := dial(t, p)
		br := bufio.NewReader(c)
		get1 := func() string {
			t.Helper()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			_, body := readResponseFrom(t, c, br, "GET")
			return body
		}
		get1()
		get1()
		cfg := httpConfig(b, u1.addr, u2.addr) // a new pool: u1 kept
		cfg.Pools[0].Balance = LeastConn
		mustReload(t, p, cfg)
		if got := get1(); got != "u1" {
			t.Fatalf("after the reload: %q from the first server, want u1", got)
		}
		if n := u1.accepted.Load(); n != 1 {
			t.Errorf("the kept server accepted %d connections for 3 requests across a reload, want 1", n)
		}
		if st := serverTotals(p, u1.addr); st.Requests != 3 || st.ReusedRequests != 2 || st.Idle != 1 {
			t.Errorf("kept server's totals %+v, want 3 requests, 2 reused, 1 idle", st)
		}
		waitFor(t, "the client and the pooled connection open", func() bool { return p.Engine().Stats().Open == 2 })
		mustReload(t, p, httpConfig(b, u2.addr))
		waitFor(t, "the removed server's pooled connection closed", func() bool { return p.Engine().Stats().Open == 1 })
		if got := get1(); got != "u2" {
			t.Errorf("after the server's removal: %q, want u2", got)
		}
	})
}

// TestReloadListeners: a listener added by a reload accepts; one removed
// refuses new clients while its open connection goes on; one whose listen
// address changed moves; one whose mode changed keeps its socket and
// serves new clients in the new mode, its open ones in the old.
func TestReloadListeners(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		p := startProxy(t, testConfig(b, u.addr))
		web := dial(t, p)
		webAddr := p.Addr("web").String()
		if err := roundTrip(web, "web"); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(b, u.addr)
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "two", Listen: "127.0.0.1:0", Pool: "app"})
		mustReload(t, p, cfg)
		if p.Addr("two") == nil {
			t.Fatal("no address for the listener added")
		}
		dialRT := func(addr, msg string) net.Conn {
			t.Helper()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if err := roundTrip(c, msg); err != nil {
				t.Fatal(err)
			}
			return c
		}
		two := dialRT(p.Addr("two").String(), "two")

		cfg = testConfig(b, u.addr)
		cfg.Listeners[0] = ListenerConfig{Name: "two", Listen: "127.0.0.1:0", Pool: "app"}
		mustReload(t, p, cfg)
		if a := p.Addr("web"); a != nil {
			t.Errorf("the removed listener has an address: %v", a)
		}
		if c, err := net.DialTimeout("tcp", webAddr, 5*time.Second); err == nil {
			c.Close()
			t.Errorf("the removed listener's address accepts")
		}
		if err := roundTrip(web, "still web"); err != nil {
			t.Errorf("a connection to the removed listener, after the reload: %v", err)
		}

		oldTwo := p.Addr("two").String()
		cfg = testConfig(b, u.addr)
		cfg.Listeners[0] = ListenerConfig{Name: "two", Listen: "127.0.0.2:0", Pool: "app"}
		mustReload(t, p, cfg)
		if a := p.Addr("two").String(); !strings.HasPrefix(a, "127.0.0.2:") {
			t.Fatalf("the moved listener is on %s", a)
		}
		if c, err := net.DialTimeout("tcp", oldTwo, 5*time.Second); err == nil {
			c.Close()
			t.Errorf("the moved listener's old address accepts")
		}
		moved := dialRT(p.Addr("two").String(), "moved")

		cfg = testConfig(b, u.addr)
		cfg.Listeners[0] = ListenerConfig{Name: "two", Listen: p.Addr("two").String(), Pool: "app", Mode: ModeHTTP}
		movedAddr := p.Addr("two").String()
		mustReload(t, p, cfg)
		if a := p.Addr("two").String(); a != movedAddr {
			t.Errorf("the listener whose mode changed moved from %s to %s", movedAddr, a)
		}
		// An echo server's answer to a request is the request: no
		// response, and the proxy in mode http answers 502.
		c, err := net.DialTimeout("tcp", movedAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, c, "GET"); resp.StatusCode != 502 {
			t.Errorf("a new client of the listener now in mode http got %d, want 502", resp.StatusCode)
		}
		for _, c := range []net.Conn{two, moved} {
			if err := roundTrip(c, "tcp still"); err != nil {
				t.Errorf("%v: an open connection, after its listener's reloads: %v", c.LocalAddr(), err)
			}
		}
		if n := len(p.Totals().Listeners); n != 1 {
			t.Errorf("%d listeners in the totals, want 1", n)
		}
	})
}

// TestReloadRefused: a config that fails validation, changes the engine
// section or admin.listen, or cannot open a listener is refused and
// changes nothing: the traffic goes on, /debug/config and the listeners
// stay; the reloads are counted. A valid one is then applied.
func TestReloadRefused(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		p := startProxy(t, testConfig(b, u.addr))
		debugConfig := func() string {
			t.Helper()
			resp, err := http.Get("http://" + p.AdminAddr().String() + "/debug/config")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return string(body)
		}
		before := debugConfig()
		start := scrape(t, p)["spindle_proxy_config_last_reload_success_timestamp_seconds"]
		if start == 0 {
			t.Error("no last reload time at start")
		}
		tr := tcpTraffic(t, p)
		taken, err := net.Listen("tcp", "127.0.0.1:0") // (no SO_REUSEPORT: the proxy cannot bind beside it)
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		for _, tc := range []struct {
			name, want string
			change     func(*Config)
		}{
			{"invalid", "listeners[0] (web).pool", func(c *Config) { c.Listeners[0].Pool = "none" }},
			{"engine", "engine.write_timeout", func(c *Config) { c.Engine.WriteTimeout = Duration(time.Second) }},
			{"cpus", "engine.cpus", func(c *Config) { c.Engine.CPUs = []int{1} }},
			{"admin", "admin.listen", func(c *Config) { c.Admin.Listen = "127.0.0.1:1" }},
			{"listen", "listener taken", func(c *Config) {
				c.Listeners = append(c.Listeners, ListenerConfig{Name: "free", Listen: "127.0.0.1:0", Pool: "app"},
					ListenerConfig{Name: "taken", Listen: taken.Addr().String(), Pool: "app"})
				c.Pools[0].Servers = append(c.Pools[0].Servers, Servers(deadAddr(t))...)
			}},
		} {
			cfg := testConfig(b, u.addr)
			tc.change(cfg)
			err := p.Reload(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: Reload returned %v, want an error naming %s", tc.name, err, tc.want)
			}
			tr.wait(t, 3)
		}
		if after := debugConfig(); after != before {
			t.Errorf("/debug/config after refused reloads:\n%s\nwant\n%s", after, before)
		}
		if p.Addr("free") != nil || len(p.Totals().Servers) != 1 {
			t.Errorf("a refused reload's listener or server is in force")
		}
		m := scrape(t, p)
		if m[`spindle_proxy_config_reloads_total{result="error"}`] != 5 || m[`spindle_proxy_config_reloads_total{result="ok"}`] != 0 {
			t.Errorf("reloads counted: %v error, %v ok; want 5, 0", m[`spindle_proxy_config_reloads_total{result="error"}`], m[`spindle_proxy_config_reloads_total{result="ok"}`])
		}
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].IdleTimeout = Duration(time.Minute)
		mustReload(t, p, cfg)
		if after := debugConfig(); !strings.Contains(after, `"idle_timeout": "1m0s"`) {
			t.Errorf("/debug/config after a reload:\n%s", after)
		}
		m = scrape(t, p)
		if m[`spindle_proxy_config_reloads_total{result="ok"}`] != 1 || m["spindle_proxy_config_last_reload_success_timestamp_seconds"] < start {
			t.Errorf("after a reload: %v ok, last at %v (start %v)", m[`spindle_proxy_config_reloads_total{result="ok"}`], m["spindle_proxy_config_last_reload_success_timestamp_seconds"], start)
		}
		tr.wait(t, 3)
		tr.stop(t)
	})
}

// TestReloadHealth: a server kept by a reload keeps its health state and
// check counts (a down one stays down: the new checker starts from it);
// a reload that drops the checks has it up again. The checkers stopped
// leave no goroutine (TestMain). The checks time out at 50ms, not 20 (as
// httpHealth's): the live servers must stay up throughout.
func TestReloadHealth(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		dead := deadAddr(t)
		health := func(servers ...string) *Config {
			cfg := testConfig(b, servers...)
			cfg.Pools[0].Health = &HealthConfig{Interval: Duration(50 * time.Millisecond), Timeout: Duration(50 * time.Millisecond), Rise: 2, Fall: 2}
			return cfg
		}
		p := startProxy(t, health(dead, u1.addr))
		waitFor(t, "the dead server marked down", func() bool { return !serverTotals(p, dead).Up })
		fails := serverTotals(p, dead).CheckFailures
		mustReload(t, p, health(dead, u1.addr, u2.addr))
		if st := serverTotals(p, dead); st.Up || st.CheckFailures < fails {
			t.Errorf("after the reload the dead server: %+v, want down, at least %d check failures", st, fails)
		}
		waitFor(t, "the server added checked", func() bool { return serverTotals(p, u2.addr).CheckPasses > 0 })
		for i := range 4 {
			if err := roundTrip(dial(t, p), fmt.Sprint("c", i)); err != nil {
				t.Fatal(err)
			}
		}
		if f := serverTotals(p, dead).Failures; f != 0 {
			t.Errorf("%d connects to the server down", f)
		}
		mustReload(t, p, testConfig(b, dead, u1.addr))
		if !serverTotals(p, dead).Up {
			t.Errorf("without health checks the kept server is still down")
		}
	})
}

// TestReloadBeforeRun: a reload between New and Run is in force when Run
// starts: its listener accepts, its server takes the clients.
func TestReloadBeforeRun(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		p, err := New(testConfig(b, u1.addr), &Options{Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(b, u2.addr)
		cfg.Listeners[0].Name = "two"
		cfg.Pools[0].Health = &HealthConfig{Interval: Duration(20 * time.Millisecond)}
		if err := p.Reload(cfg); err != nil {
			p.Close()
			t.Fatal(err)
		}
		runUntilEnd(t, p)
		if p.Addr("web") != nil {
			t.Error("the listener the reload removed has an address")
		}
		c, err := net.DialTimeout("tcp", p.Addr("two").String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := roundTrip(c, "two"); err != nil {
			t.Fatal(err)
		}
		if n, st := u1.accepted.Load(), serverTotals(p, u2.addr); n != 0 || st.Connects != 1 {
			t.Errorf("the server removed accepted %d, the one added took %d clients; want 0 and 1", n, st.Connects)
		}
		waitFor(t, "the reloaded pool's health checks", func() bool { return serverTotals(p, u2.addr).CheckPasses > 0 })
	})
}

// TestReloadEarlyAccept: a client of a listener a reload opened, accepted
// before its loop has applied the reload, is served under the new config
// (the loop applies it then).
func TestReloadEarlyAccept(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		p := startProxy(t, testConfig(b, u1.addr))
		cfg := testConfig(b, u2.addr)
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "two", Listen: "127.0.0.1:0", Pool: "app"})
		g := openGen(t, p, cfg) // opened, not committed
		c, err := net.DialTimeout("tcp", g.lns[1].ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := roundTrip(c, "early"); err != nil {
			t.Fatalf("a client of the new listener before the reload is applied: %v", err)
		}
		if err := p.commit(g); err != nil {
			t.Fatal(err)
		}
		if n, st := u1.accepted.Load(), serverTotals(p, u2.addr); n != 0 || st.Connects != 1 {
			t.Errorf("the old pool's server accepted %d, the new one took %d clients; want 0 and 1", n, st.Connects)
		}
	})
}

// openGen makes p's next generation from cfg as Reload does, without
// committing it, and holds the reload lock until the test ends: what the
// test does before its commit happens inside a reload.
func openGen(t *testing.T, p *Proxy, cfg *Config) *generation {
	t.Helper()
	cfg.SetDefaults()
	p.reload.mu.Lock()
	t.Cleanup(p.reload.mu.Unlock)
	addrs, err := p.resolveAll(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.makeGen(cfg, addrs)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReloadConcurrent: Reloads from several goroutines at once, under
// traffic, each apply (one after the other) and leave one of their
// configs in force.
func TestReloadConcurrent(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		p := startProxy(t, testConfig(b, u1.addr))
		tr := tcpTraffic(t, p)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for j := range 5 {
					cfg := testConfig(b, u1.addr)
					if (i+j)%2 == 1 {
						cfg = testConfig(b, u2.addr, u1.addr)
						cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "two", Listen: "127.0.0.1:0", Pool: "app"})
					}
					if err := p.Reload(cfg); err != nil {
						t.Errorf("Reload %d.%d: %v", i, j, err)
					}
				}
			})
		}
		wg.Wait()
		tr.wait(t, 5)
		tr.stop(t)
		if m := scrape(t, p); m[`spindle_proxy_config_reloads_total{result="ok"}`] != 20 {
			t.Errorf("%v reloads counted, want 20", m[`spindle_proxy_config_reloads_total{result="ok"}`])
		}
		if got, want := len(p.Totals().Listeners), len(p.Config().Listeners); got != want {
			t.Errorf("%d listeners in the totals, %d in the config in force", got, want)
		}
	})
}

// TestReloadRoutesObserved: a route a reload keeps (by name) keeps its
// counters, one it adds starts its own; the access log goes on across
// reloads that keep it and that change it (a new log on the same path).
func TestReloadRoutesObserved(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		app, api := newHTTPUpstream(t, reloadHTTPServer("app")), newHTTPUpstream(t, reloadHTTPServer("api"))
		path := t.TempDir() + "/access.log"
		config := func(routes ...RouteConfig) *Config {
			cfg := httpConfig(b, app.addr)
			cfg.Pools = append(cfg.Pools, PoolConfig{Name: "api", Servers: Servers(api.addr)})
			cfg.Listeners[0].Routes = routes
			cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
			return cfg
		}
		apiRoute := RouteConfig{Name: "api", PathPrefix: "/api/", Pool: "api"}
		p := startProxy(t, config(apiRoute))
		c, base := client(t, p)
		get(t, c, base+"/api/1")
		mustReload(t, p, config(apiRoute)) // the same: the same log
		get(t, c, base+"/api/2")
		mustReload(t, p, config(RouteConfig{Name: "v2", PathPrefix: "/v2/", Pool: "api"}, apiRoute))
		if _, body := get(t, c, base+"/v2/3"); body != "api" {
			t.Fatalf("the route added: %q", body)
		}
		get(t, c, base+"/api/4")
		m := scrape(t, p)
		for route, want := range map[string]float64{"api": 3, "v2": 1, DefaultRouteName: 0} {
			if got := m[`spindle_proxy_http_route_requests_total{listener="web",route="`+route+`"}`]; got != want {
				t.Errorf("route %s: %v requests counted, want %v", route, got, want)
			}
		}
		waitFor(t, "4 lines in the access log", func() bool {
			data, _ := os.ReadFile(path)
			return bytes.Count(data, []byte("\n")) == 4
		})
	})
}

// TestReloadShorterIdleTimeout: a reload that shortens a pool's
// idle_timeout closes the upstream connections idle at that moment by
// the new one, HTTP/1.1 and HTTP/2 alike: the loop's sweep, armed for
// the old idle_timeout, took them only then (a minute here).
func TestReloadShorterIdleTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2Up := range []bool{false, true} {
			t.Run(map[bool]string{false: "http1", true: "h2c"}[h2Up], func(t *testing.T) {
				up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
					func(s *http.Server) { s.Protocols.SetHTTP1(true) })
				cfgOf := func(idle time.Duration) *Config {
					cfg := httpConfig(b, up.addr)
					if h2Up {
						cfg.Pools[0].Protocol = ProtocolH2C
					}
					cfg.Pools[0].IdleTimeout = Duration(idle)
					return cfg
				}
				p := startProxy(t, cfgOf(time.Minute))
				c, base := client(t, p)
				if _, body := get(t, c, base+"/x"); body != "ok" {
					t.Fatalf("body %q", body)
				}
				mustReload(t, p, cfgOf(100*time.Millisecond))
				waitFor(t, "the idle upstream connection closed", func() bool { return up.closed.Load() == 1 })
			})
		}
	})
}
