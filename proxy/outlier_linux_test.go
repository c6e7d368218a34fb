package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// What an outlier server does with a request head, besides answering a
// status.
const (
	modeHang  = -1 // no answer: it reads on until the connection closes
	modeClose = -2 // it closes the connection without an answer
	modeBad   = -3 // a malformed response head
	modeStale = -4 // 200 to a connection's first request; it closes on the next
	modeChunk = -5 // 200 with a chunked (empty) body, whatever the request's version
	modeUpg   = -6 // 101 to websocket, whatever the request asked
)

// outlierServer is a raw HTTP server that answers each request head as
// its mode says at that moment: a status (with an empty body, kept
// alive, or closed after it with oneShot) or one of the modes above. It
// counts the heads it read.
type outlierServer struct {
	*upstream
	mode    atomic.Int64
	oneShot atomic.Bool
	heads   atomic.Int64
}

func newOutlierServer(t *testing.T, mode int) *outlierServer {
	o := &outlierServer{}
	o.mode.Store(int64(mode))
	o.upstream = newUpstream(t, o.serve)
	return o
}

func (o *outlierServer) serve(c net.Conn) {
	buf := make([]byte, 8192)
	n, served := 0, 0
	for {
		i := bytes.Index(buf[:n], []byte("\r\n\r\n"))
		if i < 0 {
			m, err := c.Read(buf[n:])
			if err != nil {
				return
			}
			n += m
			continue
		}
		n = copy(buf, buf[i+4:n])
		o.heads.Add(1)
		served++
		var resp string
		switch mode := o.mode.Load(); {
		case mode == modeHang:
			io.Copy(io.Discard, c)
			return
		case mode == modeClose, mode == modeStale && served > 1:
			return
		case mode == modeBad:
			resp = "HTTP/1.1 2000 What\r\n\r\n"
		case mode == modeStale:
			resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
		case mode == modeUpg:
			resp = "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
		case mode == modeChunk:
			resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
		default:
			resp = fmt.Sprintf("HTTP/1.1 %d Status\r\nContent-Length: 0\r\n\r\n", mode)
		}
		if o.oneShot.Load() {
			resp = strings.Replace(resp, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
		}
		if _, err := io.WriteString(c, resp); err != nil || o.oneShot.Load() {
			return
		}
	}
}

// request sends one GET on a new client connection and returns the
// response's status.
func request(t *testing.T, p *Proxy) int {
	t.Helper()
	c := dial(t, p)
	defer c.Close()
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, _ := readResponse(t, c, "GET")
	return resp.StatusCode
}

// passiveConfig is httpConfig with passive health: failed connects
// fails, failed exchanges httpErrors, and cooldown.
func passiveConfig(b engine.Backend, fails, httpErrors int, cooldown time.Duration, servers ...string) *Config {
	cfg := httpConfig(b, servers...)
	cfg.Pools[0].Passive = &PassiveConfig{Fails: fails, HTTPErrors: httpErrors, Cooldown: Duration(cooldown)}
	return cfg
}

// TestHTTPPassive5xx: with http_errors 3, a server answering 503 is
// ejected at its third 503 in a row and the other server takes every
// request after. The metrics show the ejection by reason http.
func TestHTTPPassive5xx(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		bad, good := newOutlierServer(t, 503), newOutlierServer(t, 200)
		p := startProxy(t, passiveConfig(b, 1, 3, time.Minute, bad.addr, good.addr))
		// Round-robin alternates: the bad server answers requests 0, 2
		// and 4.
		for i := range 6 {
			want := 200
			if i%2 == 0 {
				want = 503
			}
			if st := request(t, p); st != want {
				t.Fatalf("request %d: %d, want %d", i, st, want)
			}
		}
		st := serverTotals(p, bad.addr)
		if !st.PassiveDown || st.Up || st.EjectionsHTTP != 1 || st.EjectionsConnect != 0 || st.Ejections != 1 || st.ConsecutiveErrors != 3 {
			t.Fatalf("bad server after three 503s: %+v; want down, 1 http ejection, 3 errors", st)
		}
		if g := serverTotals(p, good.addr); g.Up == false || g.Ejections != 0 || g.ConsecutiveErrors != 0 {
			t.Errorf("good server: %+v", g)
		}
		for i := range 6 {
			if st := request(t, p); st != 200 {
				t.Fatalf("request %d after the ejection: %d, want 200", 6+i, st)
			}
		}
		if h := bad.heads.Load(); h != 3 {
			t.Errorf("bad server got %d requests, want 3 (none after its ejection)", h)
		}
		m := scrape(t, p)
		for k, v := range map[string]float64{
			fmt.Sprintf(`spindle_proxy_server_passive_ejections_total{pool="app",server="%s",reason="http"}`, bad.addr):         1,
			fmt.Sprintf(`spindle_proxy_server_passive_ejections_total{pool="app",server="%s",reason="connect"}`, bad.addr):      0,
			fmt.Sprintf(`spindle_proxy_server_passive_consecutive_failures{pool="app",server="%s",reason="http"}`, bad.addr):    3,
			fmt.Sprintf(`spindle_proxy_server_passive_consecutive_failures{pool="app",server="%s",reason="connect"}`, bad.addr): 0,
			fmt.Sprintf(`spindle_proxy_server_passive_down{pool="app",server="%s"}`, bad.addr):                                  1,
			`spindle_proxy_pool_passive_ejections_refused_total{pool="app"}`:                                                    0,
		} {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
	})
}

// TestHTTPPassiveCount: a response below 500 clears the count, and so do
// 501 and 505 (answers to the request's method and version) by default;
// any other 5xx, a malformed response head and a close before a response
// count. http_error_statuses chooses the statuses.
func TestHTTPPassiveCount(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		o := newOutlierServer(t, 503)
		p := startProxy(t, passiveConfig(b, 1, 3, time.Minute, o.addr))
		for i, step := range []struct {
			mode, status int
			errs         int64
		}{
			{503, 503, 1}, {500, 500, 2}, {404, 404, 0},
			{503, 503, 1}, {599, 599, 2}, {501, 501, 0},
			{502, 502, 1}, {504, 504, 2}, {505, 505, 0},
			{modeBad, 502, 1}, {modeClose, 502, 2}, {200, 200, 0},
			{503, 503, 1}, {modeBad, 502, 2},
		} {
			o.mode.Store(int64(step.mode))
			if st := request(t, p); st != step.status {
				t.Fatalf("step %d (mode %d): %d, want %d", i, step.mode, st, step.status)
			}
			if st := serverTotals(p, o.addr); st.ConsecutiveErrors != step.errs || !st.Up {
				t.Fatalf("step %d (mode %d): %d errors in a row, up %v; want %d, up", i, step.mode, st.ConsecutiveErrors, st.Up, step.errs)
			}
		}
		// With http_error_statuses 502-504, 500 clears the count.
		cfg := passiveConfig(b, 1, 3, time.Minute, o.addr)
		cfg.Pools[0].Passive.HTTPErrorStatuses = "502-504"
		mustReload(t, p, cfg)
		for i, step := range []struct {
			mode, status int
			errs         int64
		}{{500, 500, 0}, {503, 503, 1}, {500, 500, 0}, {504, 504, 1}, {modeBad, 502, 2}} {
			o.mode.Store(int64(step.mode))
			if st := request(t, p); st != step.status {
				t.Fatalf("502-504 step %d (mode %d): %d, want %d", i, step.mode, st, step.status)
			}
			if st := serverTotals(p, o.addr); st.ConsecutiveErrors != step.errs || !st.Up {
				t.Fatalf("502-504 step %d (mode %d): %d errors in a row, up %v; want %d, up", i, step.mode, st.ConsecutiveErrors, st.Up, step.errs)
			}
		}
		o.mode.Store(modeClose)
		if st := request(t, p); st != 502 {
			t.Fatalf("third failure: %d, want 502", st)
		}
		if st := serverTotals(p, o.addr); st.Up || st.EjectionsHTTP != 1 {
			t.Fatalf("after the third failure in a row: %+v, want ejected", st)
		}
		heads := o.heads.Load()
		if st := request(t, p); st != 503 {
			t.Errorf("with the only server ejected: %d, want 503", st)
		}
		if o.heads.Load() != heads {
			t.Error("the ejected server got a request")
		}
	})
}

// TestHTTPPassiveClientRefusal: a response head the proxy refuses
// because of the request the client chose (a chunked response to an
// HTTP/1.0 request: 502) neither counts as a failed exchange nor clears
// the count: HTTP/1.0 requests do not eject a server that always answers
// chunked, and HTTP/1.1 ones get its answers. A refusal that is the
// server's whatever the request (a 101 unasked) counts.
func TestHTTPPassiveClientRefusal(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		o := newOutlierServer(t, 503)
		p := startProxy(t, passiveConfig(b, 1, 2, time.Minute, o.addr))
		if st := request(t, p); st != 503 {
			t.Fatalf("%d, want the server's 503", st)
		}
		o.mode.Store(modeChunk)
		for i := range 4 {
			c := dial(t, p)
			fmt.Fprintf(c, "GET /x HTTP/1.0\r\nHost: example.com\r\n\r\n")
			resp, _ := readResponse(t, c, "GET")
			c.Close()
			if resp.StatusCode != 502 {
				t.Fatalf("HTTP/1.0 request %d: %d, want 502 (a chunked response refused)", i, resp.StatusCode)
			}
		}
		if st := serverTotals(p, o.addr); !st.Up || st.Ejections != 0 || st.ConsecutiveErrors != 1 {
			t.Fatalf("after HTTP/1.0 requests answered chunked: %+v; want up, the one 503 counted", st)
		}
		if st := request(t, p); st != 200 {
			t.Fatalf("HTTP/1.1: %d, want 200", st)
		}
		if st := serverTotals(p, o.addr); !st.Up || st.ConsecutiveErrors != 0 || o.heads.Load() != 6 {
			t.Fatalf("after HTTP/1.1 answered: %+v, %d heads; want up, no error, 6 heads", st, o.heads.Load())
		}
		o.mode.Store(modeUpg)
		if st := request(t, p); st != 502 {
			t.Fatalf("a 101 unasked: %d, want 502", st)
		}
		if st := serverTotals(p, o.addr); st.ConsecutiveErrors != 1 {
			t.Errorf("after a 101 unasked: %+v, want 1 error counted", st)
		}
	})
}

// TestHTTPPassiveTimeout: a server that hangs past response_timeout is
// ejected after http_errors such exchanges; a request whose body the
// client stops sending times out (504) without counting against the
// server: the stall may be the client's.
func TestHTTPPassiveTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		o := newOutlierServer(t, modeHang)
		cfg := passiveConfig(b, 1, 2, time.Minute, o.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(100 * time.Millisecond)
		p := startProxy(t, cfg)
		c := dial(t, p)
		fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: example.com\r\nContent-Length: 10\r\n\r\nhalf")
		if resp, _ := readResponse(t, c, "POST"); resp.StatusCode != 504 {
			t.Fatalf("a stalled body: %d, want 504", resp.StatusCode)
		}
		if st := serverTotals(p, o.addr); !st.Up || st.ConsecutiveErrors != 0 {
			t.Fatalf("after a client's stalled body: %+v, want up, nothing counted", st)
		}
		for i := range 2 {
			if st := request(t, p); st != 504 {
				t.Fatalf("request %d: %d, want 504", i, st)
			}
		}
		if st := serverTotals(p, o.addr); st.Up || st.EjectionsHTTP != 1 || st.ConsecutiveErrors != 2 {
			t.Fatalf("after two timeouts: %+v, want ejected", st)
		}
		if st := request(t, p); st != 503 {
			t.Errorf("with the only server ejected: %d, want 503", st)
		}
		if h := o.heads.Load(); h != 3 {
			t.Errorf("server got %d requests, want 3", h)
		}
	})
}

// TestHTTPPassiveRetry: a request retried because its kept-alive
// connection was closed under it counts once, by its final outcome: a
// retry answered 200 counts nothing (with http_errors 1 the server
// stays in), a retry that fails too counts one failure.
func TestHTTPPassiveRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		o := newOutlierServer(t, modeStale)
		p := startProxy(t, passiveConfig(b, 1, 1, time.Minute, o.addr))
		for i := range 4 {
			if st := request(t, p); st != 200 {
				t.Fatalf("request %d: %d, want 200", i, st)
			}
		}
		st := serverTotals(p, o.addr)
		if st.Requests <= 4 || st.ReusedRequests == 0 {
			t.Fatalf("%+v: want retries (more requests sent than made, some on reused connections)", st)
		}
		if !st.Up || st.Ejections != 0 || st.ConsecutiveErrors != 0 {
			t.Fatalf("after retries answered 200: %+v, want up, no error counted", st)
		}
		// The retry fails too: one failure.
		mustReload(t, p, passiveConfig(b, 1, 2, time.Minute, o.addr))
		o.mode.Store(200)
		if st := request(t, p); st != 200 {
			t.Fatalf("status %d, want 200", st)
		}
		o.mode.Store(modeClose)
		before := serverTotals(p, o.addr)
		if st := request(t, p); st != 502 {
			t.Fatalf("a request whose retry fails: %d, want 502", st)
		}
		st = serverTotals(p, o.addr)
		if st.ReusedRequests == before.ReusedRequests || st.NewRequests == before.NewRequests {
			t.Fatalf("before %+v, after %+v: want the request on a reused connection and its retry on a new one", before, st)
		}
		if st.ConsecutiveErrors != 1 || !st.Up {
			t.Errorf("after a request and its retry failed: %d errors in a row, up %v; want 1, up", st.ConsecutiveErrors, st.Up)
		}
	})
}

// fakeClock replaces the clock of pl's servers (before Run) by p's
// advanced by what the returned function adds.
func fakeClock(p *Proxy, pl *pool) (advance func(time.Duration), now func() int64) {
	var off atomic.Int64
	now = func() int64 { return p.now() + off.Load() }
	for _, s := range pl.servers {
		s.now = now
	}
	return func(d time.Duration) { off.Add(int64(d)) }, now
}

// TestHTTPPassiveGrowth: each ejection in a row lasts one cooldown more
// (1, 2, 3 minutes), up to max_cooldown (3 minutes); a success after an
// ejection brings the next back to one cooldown. A connect's success is
// not one (the server closes its connection after each response, so each
// exchange connects anew): the server accepts, its answers decide. On a
// clock the test moves.
func TestHTTPPassiveGrowth(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		o := newOutlierServer(t, 503)
		o.oneShot.Store(true)
		cfg := passiveConfig(b, 1, 1, time.Minute, o.addr)
		cfg.Pools[0].Passive.MaxCooldown = Duration(3 * time.Minute)
		p, err := New(cfg, &Options{Drain: time.Second, Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		srv := p.pools[0].servers[0]
		advance, now := fakeClock(p, p.pools[0])
		runUntilEnd(t, p)
		// left is the ejection's time left, in whole minutes rounded up.
		left := func() int64 {
			u := srv.until.Load()
			if u == 0 {
				return 0
			}
			return (u - now() + int64(time.Minute) - 1) / int64(time.Minute)
		}
		for i, want := range []int64{1, 2, 3, 3, 3} {
			if st := request(t, p); st != 503 {
				t.Fatalf("ejection %d: %d, want the server's 503", i+1, st)
			}
			if got := left(); got != want || srv.up() {
				t.Fatalf("ejection %d: %d minutes left, up %v; want %d, down", i+1, got, srv.up(), want)
			}
			if st := request(t, p); st != 503 || o.heads.Load() != int64(i+1) {
				t.Fatalf("ejection %d: a request reached the server", i+1)
			}
			advance(time.Duration(want) * time.Minute)
		}
		o.mode.Store(200)
		if st := request(t, p); st != 200 {
			t.Fatalf("after the cooldown: %d, want 200", st)
		}
		if st := serverTotals(p, o.addr); !st.Up || srv.streak.Load() != 0 || srv.until.Load() != 0 {
			t.Fatalf("after a success: %+v, streak %d; want up, no streak", st, srv.streak.Load())
		}
		o.mode.Store(503)
		request(t, p)
		if got := left(); got != 1 {
			t.Errorf("the first ejection after a success: %d minutes, want 1", got)
		}
		if st := serverTotals(p, o.addr); st.EjectionsHTTP != 6 || st.Connects != 7 {
			t.Errorf("%d ejections, %d connects; want 6 and 7", st.EjectionsHTTP, st.Connects)
		}
	})
}

// TestHTTPPassiveMaxEjected: with max_ejected_percent 50 of two servers
// both answering 503, the first is ejected and the second, the last one
// in, stays: its ejections are refused, and counted.
func TestHTTPPassiveMaxEjected(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		s1, s2 := newOutlierServer(t, 503), newOutlierServer(t, 503)
		cfg := passiveConfig(b, 1, 1, time.Minute, s1.addr, s2.addr)
		cfg.Pools[0].Passive.MaxEjectedPercent = new(50)
		p := startProxy(t, cfg)
		for i := range 6 {
			if st := request(t, p); st != 503 {
				t.Fatalf("request %d: %d, want the servers' 503", i, st)
			}
		}
		if st := serverTotals(p, s1.addr); st.Up || st.EjectionsHTTP != 1 {
			t.Errorf("first server: %+v, want ejected", st)
		}
		if st := serverTotals(p, s2.addr); !st.Up || st.Ejections != 0 || st.ConsecutiveErrors != 5 {
			t.Errorf("second server: %+v, want up, 5 errors in a row", st)
		}
		if h := s2.heads.Load(); h != 5 {
			t.Errorf("second server got %d requests, want 5", h)
		}
		if pt := p.Totals().Pools[0]; pt.Name != "app" || pt.EjectionsRefused != 5 {
			t.Errorf("pool totals %+v, want 5 ejections refused", pt)
		}
		if got := scrape(t, p)[`spindle_proxy_pool_passive_ejections_refused_total{pool="app"}`]; got != 5 {
			t.Errorf("refused ejections metric %v, want 5", got)
		}
	})
}

// TestReloadPassive: a reload that changes a pool's passive config keeps
// its servers' counts and ejections, and applies the new thresholds from
// the next exchange; one without http_errors ends an ejection for failed
// exchanges.
func TestReloadPassive(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		o := newOutlierServer(t, 503)
		p := startProxy(t, passiveConfig(b, 1, 5, time.Minute, o.addr))
		for range 2 {
			request(t, p)
		}
		mustReload(t, p, passiveConfig(b, 1, 3, time.Minute, o.addr))
		if st := serverTotals(p, o.addr); st.ConsecutiveErrors != 2 || !st.Up {
			t.Fatalf("after the reload: %+v, want 2 errors kept, up", st)
		}
		request(t, p)
		if st := serverTotals(p, o.addr); st.Up || st.EjectionsHTTP != 1 {
			t.Fatalf("third error under http_errors 3: %+v, want ejected", st)
		}
		mustReload(t, p, passiveConfig(b, 2, 3, 2*time.Minute, o.addr))
		if st := serverTotals(p, o.addr); st.Up || st.EjectionsHTTP != 1 || st.ConsecutiveErrors != 3 {
			t.Fatalf("after a second reload: %+v, want still ejected, its counts kept", st)
		}
		mustReload(t, p, passiveConfig(b, 2, 0, 2*time.Minute, o.addr))
		if st := serverTotals(p, o.addr); !st.Up || st.ConsecutiveErrors != 0 || st.EjectionsHTTP != 1 {
			t.Fatalf("after a reload without http_errors: %+v, want up, no errors, the ejection counted", st)
		}
		for range 4 {
			if st := request(t, p); st != 503 {
				t.Fatalf("without http_errors: %d, want the server's 503", st)
			}
		}
		if st := serverTotals(p, o.addr); !st.Up || st.ConsecutiveErrors != 0 {
			t.Errorf("503s without http_errors: %+v, want up, none counted", st)
		}
	})
}

// TestHTTPPassiveAllocs: TestHTTPAllocs with http_errors on: a request's
// outcome is recorded without an allocation.
func TestHTTPPassiveAllocs(t *testing.T) {
	httpAllocs(t, engine.BackendEpoll, func(cfg *Config) {
		cfg.Pools[0].Passive = &PassiveConfig{Fails: 3, Cooldown: Duration(time.Minute), HTTPErrors: 3, MaxEjectedPercent: new(50)}
	})
}
