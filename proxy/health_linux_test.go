package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// healthUpstream is an HTTP server whose /healthz answers status (200 at
// first) and records the health checks' requests; other paths answer its
// name.
type healthUpstream struct {
	*httpUpstream
	status atomic.Int64
	mu     sync.Mutex
	seen   []*http.Request // health checks received
}

func newHealthUpstream(t *testing.T, name string) *healthUpstream {
	u := &healthUpstream{}
	u.status.Store(200)
	u.httpUpstream = newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == "spindle-health" {
			u.mu.Lock()
			u.seen = append(u.seen, r)
			u.mu.Unlock()
			w.WriteHeader(int(u.status.Load()))
			return
		}
		io.WriteString(w, name)
	})
	return u
}

// lastCheck returns the last health check request received, nil for none.
func (u *healthUpstream) lastCheck() *http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return nil
	}
	return u.seen[len(u.seen)-1]
}

// httpHealth is an HTTP check of /healthz, every 50ms, rise 2, fall 3.
// (With 20ms, three checks of a healthy Go server under -race on a loaded
// machine could each take longer than the timeout and mark it down.)
func httpHealth() *HealthConfig {
	return &HealthConfig{Type: HealthHTTP, Path: "/healthz", Interval: Duration(50 * time.Millisecond), Timeout: Duration(50 * time.Millisecond), Rise: 2, Fall: 3}
}

// TestHTTPHealthCheck: a server whose health check answers 503 is marked
// down after fall checks and takes no new clients; answering 200 again, it
// is marked up after rise. The check sends the path and Host configured
// (by default the server's address), Connection: close and the
// User-Agent.
func TestHTTPHealthCheck(t *testing.T) {
	a, b := newHealthUpstream(t, "a"), newHealthUpstream(t, "b")
	cfg := httpConfig(engine.BackendEpoll, a.addr, b.addr)
	cfg.Pools[0].Health = httpHealth()
	p := startProxy(t, cfg)
	waitFor(t, "a health check", func() bool { return a.lastCheck() != nil })
	r := a.lastCheck()
	if r.Method != "GET" || r.URL.Path != "/healthz" || r.Host != a.addr || !r.Close || r.Proto != "HTTP/1.1" {
		t.Errorf("check: %s %s %s, Host %q, close %v; want GET /healthz HTTP/1.1, Host %q, Connection: close", r.Method, r.URL, r.Proto, r.Host, r.Close, a.addr)
	}

	a.status.Store(503)
	waitFor(t, "a marked down", func() bool { return !serverTotals(p, a.addr).Up })
	if f := serverTotals(p, a.addr).CheckFailures; f < 3 {
		t.Errorf("marked down after %d failed checks, want fall = 3", f)
	}
	c, url := client(t, p)
	for range 6 {
		if resp, body := get(t, c, url+"/x"); resp.StatusCode != 200 || body != "b" {
			t.Fatalf("with a down: %d %q, want 200 from b", resp.StatusCode, body)
		}
	}
	if n := serverTotals(p, a.addr).Requests; n != 0 {
		t.Errorf("a, marked down, took %d requests", n)
	}

	passes := serverTotals(p, a.addr).CheckPasses
	a.status.Store(200)
	waitFor(t, "a marked up", func() bool { return serverTotals(p, a.addr).Up })
	if n := serverTotals(p, a.addr).CheckPasses - passes; n < 2 {
		t.Errorf("marked up after %d passed checks, want rise = 2", n)
	}
	c.Transport.(*http.Transport).CloseIdleConnections()
	seen := map[string]int{}
	for range 6 {
		_, body := get(t, c, url+"/x")
		seen[body]++
	}
	if seen["a"] != 3 || seen["b"] != 3 {
		t.Errorf("a up again: requests shared %v, want 3 each", seen)
	}

	// Host and expect as configured: 503 passes.
	cfg = httpConfig(engine.BackendEpoll, a.addr)
	cfg.Pools[0].Health = httpHealth()
	// A 20 ms timeout expired under load (one failed check counted while
	// 503 passed): this part judges statuses, so it gives each check
	// 250 ms.
	cfg.Pools[0].Health.Interval = Duration(250 * time.Millisecond)
	cfg.Pools[0].Health.Timeout = Duration(250 * time.Millisecond)
	cfg.Pools[0].Health.Host = "health.example:8080"
	cfg.Pools[0].Health.Path = "/ready?full=1"
	cfg.Pools[0].Health.Expect = "200, 500-503"
	a.status.Store(503)
	p = startProxy(t, cfg)
	waitFor(t, "a check with the Host configured", func() bool {
		r := a.lastCheck()
		return r != nil && r.Host == "health.example:8080"
	})
	if r := a.lastCheck(); r.RequestURI != "/ready?full=1" {
		t.Errorf("check target %q, want /ready?full=1", r.RequestURI)
	}
	waitFor(t, "three checks passed", func() bool { return serverTotals(p, a.addr).CheckPasses >= 3 })
	if st := serverTotals(p, a.addr); !st.Up || st.CheckFailures != 0 {
		t.Errorf("503 expected: up %v after %d failed checks", st.Up, st.CheckFailures)
	}
}

// TestHTTPHealthCheckFails: a server that answers a malformed head, a head
// over 16 KiB, closes without an answer, or never answers within the
// timeout fails its checks
// (a TCP check would pass each: they accept).
func TestHTTPHealthCheckFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
	}{
		{"malformed", func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n")
		}},
		{"not http", func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
		}},
		{"close", func(c net.Conn) { http.ReadRequest(bufio.NewReader(c)) }},
		{"partial", func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n")
		}},
		{"silent", func(c net.Conn) { io.Copy(io.Discard, c) }},
		{"huge", func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Pad: "+strings.Repeat("x", 20<<10)+"\r\n\r\n")
		}},
		{"slow", func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			time.Sleep(100 * time.Millisecond) // past the timeout
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, tc.serve)
			cfg := testConfig(engine.BackendEpoll, u.addr)
			cfg.Pools[0].Health = httpHealth()
			cfg.Pools[0].Health.Timeout = Duration(20 * time.Millisecond)
			cfg.Pools[0].Health.Interval = Duration(30 * time.Millisecond)
			p := startProxy(t, cfg)
			waitFor(t, "the server marked down", func() bool { return !serverTotals(p, u.addr).Up })
			if st := serverTotals(p, u.addr); st.CheckPasses != 0 || st.CheckFailures < 3 {
				t.Errorf("%d passed, %d failed checks; want none passed, at least fall = 3 failed", st.CheckPasses, st.CheckFailures)
			}
		})
	}
}

// TestReloadHealthType: a reload that turns a pool's checks from tcp to
// http restarts its checker with the new type: a server that accepts but
// answers 503 is up under TCP checks, marked down under HTTP ones, and up
// again when a reload turns them back.
func TestReloadHealthType(t *testing.T) {
	a, b := newHealthUpstream(t, "a"), newHealthUpstream(t, "b")
	a.status.Store(503)
	mk := func(typ string) *Config {
		cfg := httpConfig(engine.BackendEpoll, a.addr, b.addr)
		h := httpHealth()
		if typ == HealthTCP {
			h.Type, h.Path = HealthTCP, ""
		}
		cfg.Pools[0].Health = h
		return cfg
	}
	p := startProxy(t, mk(HealthTCP))
	waitFor(t, "TCP checks", func() bool { return serverTotals(p, a.addr).CheckPasses >= 3 })
	if !serverTotals(p, a.addr).Up || a.lastCheck() != nil {
		t.Fatalf("TCP checks: a up %v, HTTP checks received %v", serverTotals(p, a.addr).Up, a.lastCheck() != nil)
	}
	if err := p.Reload(mk(HealthHTTP)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a marked down by HTTP checks", func() bool { return !serverTotals(p, a.addr).Up })
	if !serverTotals(p, b.addr).Up || b.lastCheck() == nil {
		t.Errorf("b: up %v, HTTP checks received %v", serverTotals(p, b.addr).Up, b.lastCheck() != nil)
	}
	if err := p.Reload(mk(HealthTCP)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a marked up by TCP checks again", func() bool { return serverTotals(p, a.addr).Up })
}

// TestWeightedShares: over 70 clients of one loop, servers of weights
// 5:1:1 take 50, 10 and 10; a server down gives its share to the others
// by their weights; least-conn with clients held open shares them by
// weight.
func TestWeightedShares(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		us := []*upstream{newUpstream(t, nil), newUpstream(t, nil), newUpstream(t, nil)}
		cfg := testConfig(b)
		for i, w := range []int{5, 1, 1} {
			cfg.Pools[0].Servers = append(cfg.Pools[0].Servers, ServerConfig{Address: us[i].addr, Weight: w})
		}
		p := startProxy(t, cfg)
		for i := range 70 {
			c := dial(t, p)
			if err := roundTrip(c, fmt.Sprint("client ", i)); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		for i, want := range []int64{50, 10, 10} {
			if got := us[i].accepted.Load(); got != want {
				t.Errorf("server %d (weight %d) took %d of 70 clients, want %d", i, cfg.Pools[0].Servers[i].Weight, got, want)
			}
		}

		// Least-conn, clients held open: 3:1.
		u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
		cfg = testConfig(b)
		cfg.Pools[0].Servers = []ServerConfig{{Address: u1.addr, Weight: 3}, {Address: u2.addr}}
		cfg.Pools[0].Balance = LeastConn
		p = startProxy(t, cfg)
		for i := range 40 {
			if err := roundTrip(dial(t, p), fmt.Sprint("held ", i)); err != nil {
				t.Fatal(err)
			}
		}
		if a1, a2 := u1.accepted.Load(), u2.accepted.Load(); a1 != 30 || a2 != 10 {
			t.Errorf("least-conn 3:1 over 40 held clients: %d and %d, want 30 and 10", a1, a2)
		}
	})
}

// TestHTTPHealthCheckInterim: an interim 1xx response before the final one
// is skipped: the final status decides.
func TestHTTPHealthCheckInterim(t *testing.T) {
	u := newUpstream(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
	})
	cfg := testConfig(engine.BackendEpoll, u.addr)
	cfg.Pools[0].Health = httpHealth()
	cfg.Pools[0].Health.Expect = "204"
	cfg.Pools[0].Health.Fall = 1
	p := startProxy(t, cfg)
	waitFor(t, "3 checks", func() bool { st := serverTotals(p, u.addr); return st.CheckPasses+st.CheckFailures >= 3 })
	if st := serverTotals(p, u.addr); st.CheckFailures != 0 || !st.Up {
		t.Errorf("100 and 102 before 204: %d failed checks, up %v; want none failed", st.CheckFailures, st.Up)
	}
}
