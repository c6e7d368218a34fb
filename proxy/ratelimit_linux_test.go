package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// rateGet sends a GET for path on c and reads its response from br.
func rateGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) (*http.Response, string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return readResponseFrom(t, c, br, "GET")
}

// dialFrom connects to p's listener web from the loopback address src.
func dialFrom(t *testing.T, p *Proxy, src string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", p.Addr("web").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRateLimitHTTP: rate 2 per second (one each 500ms), burst 3, on a
// listener: over one kept-alive connection 3 requests pass, the next get
// 429 with Retry-After 1 and a body on the same connection (the access
// log's term RL, the metrics counting them), and one passes again 500ms
// later; a request over the limit with a body past discardBytes gets
// 429 with Connection: close, and is closed (TestRateLimitDiscardBody); other client addresses (127.0.0.2, .3) have
// their own budgets; of 5 requests pipelined in one write the 2 over the
// burst are answered in turn (a HEAD's 429 without its body). The
// limiter's clock is the test's, moved 500ms where the test waits: on the
// proxy's own, a stall of 500ms between requests (a loaded machine under
// -race) refilled a token and turned an expected 429 into a 200
// (TestRateLimitH2 keeps the proxy's clock).
func TestRateLimitHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		cfg := httpConfig(b, u.addr)
		logPath := t.TempDir() + "/access.log"
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: logPath}
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 2, Burst: 3}
		p, err := New(cfg, &Options{Drain: time.Second, Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		var clock testClock
		clock.t.Store(int64(time.Second))
		p.lns[0].limit.clock = clock.now
		runUntilEnd(t, p)
		c := dial(t, p)
		br := bufio.NewReader(c)
		for i := range 3 {
			if resp, body := rateGet(t, c, br, "/"); resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("request %d: %d %q, want 200", i, resp.StatusCode, body)
			}
		}
		for i := range 2 {
			resp, body := rateGet(t, c, br, "/over")
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || body != "429 Too Many Requests\n" || resp.Close {
				t.Fatalf("over the burst (%d): %d Retry-After %q close %v %q, want 429, 1, kept", i, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close, body)
			}
		}
		clock.t.Add(int64(500 * time.Millisecond))
		if resp, _ := rateGet(t, c, br, "/again"); resp.StatusCode != 200 {
			t.Fatalf("500ms later: %d, want 200", resp.StatusCode)
		}
		if resp, _ := rateGet(t, c, br, "/over"); resp.StatusCode != 429 {
			t.Fatalf("at once after: %d, want 429", resp.StatusCode)
		}
		fmt.Fprintf(c, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nhello", discardBytes+1)
		if resp, _ := readResponseFrom(t, c, br, "POST"); resp.StatusCode != 429 || !resp.Close {
			t.Fatalf("a request with a body past discardBytes: %d close %v, want 429 and close", resp.StatusCode, resp.Close)
		}
		if err := closedByProxy(c); err != nil {
			t.Error(err)
		}
		c2 := dialFrom(t, p, "127.0.0.2")
		br2 := bufio.NewReader(c2)
		for i := range 3 {
			if resp, _ := rateGet(t, c2, br2, "/"); resp.StatusCode != 200 {
				t.Fatalf("127.0.0.2, request %d: %d, want 200", i, resp.StatusCode)
			}
		}
		// Pipelined in one write: 3 forwarded in turn, 2 answered at
		// once, in order, on the connection kept.
		c3 := dialFrom(t, p, "127.0.0.3")
		br3 := bufio.NewReader(c3)
		io.WriteString(c3, strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 2)+strings.Repeat("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", 3))
		for i, want := range []int{200, 200, 200, 429, 429} {
			method := "GET"
			if i >= 2 {
				method = "HEAD"
			}
			if resp, body := readResponseFrom(t, c3, br3, method); resp.StatusCode != want || method == "HEAD" && body != "" {
				t.Fatalf("pipelined %d: %d %q, want %d", i, resp.StatusCode, body, want)
			}
		}
		if resp, _ := rateGet(t, c3, br3, "/"); resp.StatusCode != 429 {
			t.Fatalf("after the pipelined: %d, want 429", resp.StatusCode)
		}
		lt := p.Totals().Listeners[0]
		if rl := lt.RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 10, Limited: 7}) {
			t.Errorf("totals %+v, want 10 allowed, 7 limited", rl)
		}
		if lt.ResponsesProxy[3] != 7 {
			t.Errorf("4xx made by the proxy: %d, want 7", lt.ResponsesProxy[3])
		}
		waitFor(t, "the access log", func() bool {
			n := 0
			for _, l := range logLines(t, logPath) {
				if l["term"] == "RL" && l["status"] == float64(429) {
					n++
				}
			}
			return n == 7
		})
	})
}

// TestRateLimitH2: an HTTP/2 client over a route's limit (key all, 1
// per second, burst 2) gets 429 with retry-after on its stream (RL in the
// access log), its connection going on (another route's request passes
// on it), and the route's requests pass again after the interval. On the
// proxy's clock: the interval is a second, not 300ms, for the third
// request to be over the burst on a loaded machine under -race.
func TestRateLimitH2(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{Name: "lim", PathPrefix: "/lim/", Pool: "app",
			RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Second), Burst: 2, Key: RateKeyAll}}}
		logPath := t.TempDir() + "/access.log"
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: logPath}
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		get := func(path string) *http.Response {
			req, _ := http.NewRequest("GET", base+path, nil)
			resp, _ := do(t, c, req)
			return resp
		}
		for i := range 2 {
			if resp := get("/lim/x"); resp.StatusCode != 200 {
				t.Fatalf("request %d: %d, want 200", i, resp.StatusCode)
			}
		}
		start := time.Now()
		if resp := get("/lim/x"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("over the burst: %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if resp := get("/other"); resp.StatusCode != 200 {
			t.Fatalf("another route: %d, want 200", resp.StatusCode)
		}
		time.Sleep(time.Second - time.Since(start))
		if resp := get("/lim/x"); resp.StatusCode != 200 {
			t.Fatalf("a second later: %d, want 200", resp.StatusCode)
		}
		lt := p.Totals().Listeners[0]
		if lt.H2Connections != 1 {
			t.Errorf("%d HTTP/2 connections, want 1 (the 429 kept it)", lt.H2Connections)
		}
		if rl := lt.Routes[0].RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 3, Limited: 1}) {
			t.Errorf("route totals %+v, want 3 allowed, 1 limited", rl)
		}
		if lt.RateLimit != nil || lt.Routes[1].RateLimit != nil {
			t.Errorf("listener and default route have rate limit totals: %+v %+v", lt.RateLimit, lt.Routes[1].RateLimit)
		}
		waitFor(t, "the access log", func() bool {
			var terms []string
			for _, l := range logLines(t, logPath) {
				terms = append(terms, fmt.Sprintf("%v %v %v", l["target"], l["status"], l["term"]))
			}
			return strings.Join(terms, ", ") == "/lim/x 200 -, /lim/x 200 -, /lim/x 429 RL, /other 200 -, /lim/x 200 -"
		})
	})
}

// TestRateLimitTCP: a mode tcp listener's limit (burst 2 per hour) lets
// 2 connections of 127.0.0.1 through and closes the third at once
// (counted); 127.0.0.2 has its own 2.
func TestRateLimitTCP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, echo)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 2}
		p := startProxy(t, cfg)
		for _, src := range []string{"127.0.0.1", "127.0.0.2"} {
			for i := range 2 {
				if err := roundTrip(dialFrom(t, p, src), "hi"); err != nil {
					t.Fatalf("%s, connection %d: %v", src, i, err)
				}
			}
			if err := closedByProxy(dialFrom(t, p, src)); err != nil {
				t.Errorf("%s over the limit: %v", src, err)
			}
		}
		if rl := p.Totals().Listeners[0].RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 4, Limited: 2}) {
			t.Errorf("totals %+v, want 4 allowed, 2 limited", rl)
		}
	})
}

// TestRateLimitTwoLoops: 40 clients of one address, on both loops at
// once, against a burst of 10 (per hour): 10 are allowed in all, not 10
// per loop.
func TestRateLimitTwoLoops(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		cfg := capConfig(b, ModeHTTP, 2, 0, u.addr)
		cfg.Pools[0].QueueTimeout = 0
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 10}
		p := startProxy(t, cfg)
		if len(p.e.Loops()) < 2 {
			t.Skip("needs two loops (two CPUs)")
		}
		codes := getOnLoops(t, p, 40, "/")
		if codes[200] != 10 || codes[429] != 30 {
			t.Errorf("responses %v, want 10 200s and 30 429s", codes)
		}
		st := p.Totals().Listeners[0].RateLimit
		if st == nil || *st != (RateLimitTotals{Allowed: 10, Limited: 30}) {
			t.Errorf("totals %+v", st)
		}
		for k := range p.lns[0].limit.tab.stats {
			s := &p.lns[0].limit.tab.stats[k]
			if n := s.allowed.load() + s.limited.load(); n != 20 {
				t.Errorf("loop %d decided %d requests, want 20", k, n)
			}
		}
	})
}

// TestRateLimitReload: a reload that keeps a limit (other settings
// changing) keeps the clients' budgets: 2 of a burst of 3 spent before,
// 1 passes after; one that raises the burst to 6 applies to the next
// decisions against the budget as spent (3 more); one that changes the
// key starts a new budget; one that shortens the limit counts a budget
// spent past its burst as spent to it (passing again an interval later,
// not hours). The route's limit follows its name.
func TestRateLimitReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		mk := func(burst int, key string, timeout, per time.Duration) *Config {
			cfg := httpConfig(b, u.addr)
			cfg.Listeners[0].RequestTimeout = Duration(timeout)
			cfg.Listeners[0].Routes = []RouteConfig{{Name: "r", Pool: "app",
				RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(per), Burst: burst, Key: key}}}
			return cfg
		}
		p := startProxy(t, mk(3, RateKeyClient, 10*time.Second, time.Hour))
		served := func(n int) int {
			t.Helper()
			ok := 0
			c := dial(t, p)
			br := bufio.NewReader(c)
			for range n {
				if resp, _ := rateGet(t, c, br, "/"); resp.StatusCode == 200 {
					ok++
				}
			}
			c.Close()
			return ok
		}
		if n := served(2); n != 2 {
			t.Fatalf("before: %d served, want 2", n)
		}
		for _, c := range []struct {
			cfg   *Config
			n     int
			want  int
			sleep time.Duration
		}{
			{mk(3, RateKeyClient, 20*time.Second, time.Hour), 3, 1, 0},
			{mk(6, RateKeyClient, 20*time.Second, time.Hour), 5, 3, 0},
			{mk(6, RateKeyAll, 20*time.Second, time.Hour), 8, 6, 0},
			// 6 hours spent, the limit now one a second, 2 at once:
			// spent to it, not for 6 hours. (A second, not 100ms: the
			// request refused must follow the reload within it, on a
			// loaded machine under -race.)
			{mk(2, RateKeyAll, 20*time.Second, time.Second), 1, 0, 0},
			{nil, 1, 1, 1500 * time.Millisecond},
		} {
			if c.cfg != nil {
				if err := p.Reload(c.cfg); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(c.sleep)
			if n := served(c.n); n != c.want {
				rl := p.Config().Listeners[0].Routes[0].RateLimit
				t.Fatalf("burst %d per %v key %s, %v later: %d of %d served, want %d", rl.Burst, time.Duration(rl.Per), rl.Key, c.sleep, n, c.n, c.want)
			}
		}
	})
}

// TestRateLimitMetrics: /metrics has the decisions by listener and route,
// /debug/config the limit with its defaults; a 429 of a limit of one an
// hour says Retry-After 3600.
func TestRateLimitMetrics(t *testing.T) {
	u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	cfg := httpConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1}
	p := startProxy(t, cfg)
	c := dial(t, p)
	br := bufio.NewReader(c)
	rateGet(t, c, br, "/")
	// An hour's wait, less the moment since the first: 3600 rounded up.
	if resp, _ := rateGet(t, c, br, "/"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3600" {
		t.Errorf("%d Retry-After %q, want 429 and 3600", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range []struct{ path, want string }{
		{"/metrics", `spindle_proxy_rate_limit_decisions_total{listener="web",route="",result="allowed"} 1`},
		{"/metrics", `spindle_proxy_rate_limit_decisions_total{listener="web",route="",result="limited"} 1`},
	} {
		resp, err := http.Get("http://" + p.AdminAddr().String() + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), c.want) {
			t.Errorf("%s lacks %s", c.path, c.want)
		}
	}
	resp, err := http.Get("http://" + p.AdminAddr().String() + "/debug/config")
	if err != nil {
		t.Fatal(err)
	}
	var dc struct {
		Listeners []struct {
			RateLimit json.RawMessage `json:"rate_limit"`
		} `json:"listeners"`
	}
	err = json.NewDecoder(resp.Body).Decode(&dc)
	resp.Body.Close()
	if want := `{"rate":1,"per":"1h0m0s","burst":1,"key":"client","table_size":65536}`; err != nil || len(dc.Listeners) != 1 || compactJSON(dc.Listeners[0].RateLimit) != want {
		t.Errorf("/debug/config: %v %+v, want rate_limit %s", err, dc, want)
	}
}

// TestRateLimitAllocs: requests a listener's and a route's rate limits
// (key client, from a trusted proxy, and all) decide allocate nothing
// (TestHTTPAllocs's rounds).
func TestRateLimitAllocs(t *testing.T) {
	httpAllocs(t, engine.BackendEpoll, func(cfg *Config) {
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1e9}
		cfg.Listeners[0].TrustedProxies = Prefixes{netip.MustParsePrefix("127.0.0.0/8")}
		cfg.Listeners[0].Routes = []RouteConfig{{Pool: "app", RateLimit: &RateLimitConfig{Rate: 1e9, Key: RateKeyAll}}}
	})
}

// TestRateLimitDiscardAllocs: a refused request costs no allocation
// either: the decision of both limits (the listener's key client from a
// trusted proxy's X-Forwarded-For, the route's key all), the 429 kept
// and its body read and dropped (discardBody), Content-Length and
// chunked with a trailer, the head and the body in writes of their own.
func TestRateLimitDiscardAllocs(t *testing.T) {
	u := newUpstream(t, rawHTTPServer)
	cfg := httpConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1e9}
	cfg.Listeners[0].TrustedProxies = Prefixes{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.Listeners[0].Routes = []RouteConfig{{Pool: "app", RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}}}
	p := startProxy(t, cfg)
	if code := getStatus(dial(t, p), "/first"); code != 200 {
		t.Fatalf("the route's first: %d, want 200", code)
	}
	parts := [][]byte{
		[]byte("POST /a HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 203.0.113.1\r\nContent-Length: 5\r\n\r\n"), []byte("hello"),
		[]byte("POST /b HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 203.0.113.2\r\nTransfer-Encoding: chunked\r\n\r\n"),
		[]byte("5;e=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
	}
	end := localBody(429)
	heads := exchangeAllocs(t, p, "refused requests with bodies", func(k int) []byte { return parts[k%2*2] }, func(c net.Conn, k int, buf []byte) error {
		if err := readUntil(c, buf, end); err != nil {
			return err
		}
		_, err := c.Write(parts[k%2*2+1])
		return err
	})
	n := uint64(heads) + 1 // (and the first)
	if rl := p.Totals().Listeners[0].Routes[0].RateLimit; rl == nil || rl.Allowed+rl.Limited != n || rl.Allowed != 1 {
		t.Errorf("the route's totals %+v, want 1 allowed of %d", rl, n)
	}
}

func compactJSON(m json.RawMessage) string {
	var b bytes.Buffer
	json.Compact(&b, m)
	return b.String()
}

// TestRateLimitTrustedProxy: behind a proxy in trusted_proxies (here
// 127.0.0.1) key client limits the X-Forwarded-For client it names, each
// its own budget (an IPv6 one by /64; one listed after it as trusted
// skipped; none: the proxy's own), over HTTP/1.1 and HTTP/2; another
// client's X-Forwarded-For is not believed (127.0.0.2 is limited as
// itself).
func TestRateLimitTrustedProxy(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].TrustedProxies = Prefixes{netip.MustParsePrefix("127.0.0.1/32")}
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1}
		p := startProxy(t, cfg)
		for _, src := range []struct {
			addr string
			xffs []string // "-": none
			want []int
		}{
			{"127.0.0.1", []string{"203.0.113.1", "203.0.113.1", "203.0.113.2", "203.0.113.1, 127.0.0.1", "2001:db8::1", "2001:db8::2", "-", "-"},
				[]int{200, 429, 200, 429, 200, 429, 200, 429}},
			{"127.0.0.2", []string{"203.0.113.3", "203.0.113.4"}, []int{200, 429}},
		} {
			c := dialFrom(t, p, src.addr)
			br := bufio.NewReader(c)
			for i, xff := range src.xffs {
				h := "X-Forwarded-For: " + xff + "\r\n"
				if xff == "-" {
					h = ""
				}
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", h)
				if resp, _ := readResponseFrom(t, c, br, "GET"); resp.StatusCode != src.want[i] {
					t.Errorf("from %s, X-Forwarded-For %s: %d, want %d", src.addr, xff, resp.StatusCode, src.want[i])
				}
			}
		}
		hc, base := h2Client(t, p)
		for i, c := range []struct {
			xff  string
			want int
		}{{"198.51.100.1", 200}, {"198.51.100.1", 429}, {"198.51.100.2", 200}} {
			req, _ := http.NewRequest("GET", base+"/", nil)
			req.Header.Set("X-Forwarded-For", c.xff)
			if resp, _ := do(t, hc, req); resp.StatusCode != c.want {
				t.Errorf("HTTP/2 request %d, X-Forwarded-For %s: %d, want %d", i, c.xff, resp.StatusCode, c.want)
			}
		}
	})
}

// TestRateLimitPipelined: requests pipelined in one write, a route's
// limit (1 an hour) refusing some and passing others between them, are
// each answered in turn on the connection kept: one with Content-Length:
// 0 (Go's client sends it with a POST of no body) leaves nothing unread,
// its 429 keeping the connection as one of no body does.
func TestRateLimitPipelined(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/lim/", Pool: "app",
			RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}}}
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		paths := []string{"/lim/a", "/lim/b", "/lim/c", "/other", "/lim/d", "/other2"}
		var w strings.Builder
		for _, path := range paths {
			if path == "/lim/c" {
				fmt.Fprintf(&w, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", path)
				continue
			}
			fmt.Fprintf(&w, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		}
		io.WriteString(c, w.String())
		var got []string
		for range paths {
			resp, body := readResponseFrom(t, c, br, "GET")
			if resp.Close {
				body += " (close)"
			}
			got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body)))
		}
		if g, want := strings.Join(got, ", "), "200 /lim/a, 429 429 Too Many Requests, 429 429 Too Many Requests, 200 /other, 429 429 Too Many Requests, 200 /other2"; g != want {
			t.Errorf("got %s, want %s", g, want)
		}
	})
}

// TestRateLimitH2Head: an HTTP/2 HEAD a route's limit refuses gets 429
// with its content-length and retry-after and no DATA (a HEAD's response
// has no content, RFC 9110 9.3.2: Go's client resets a stream that
// carries some with PROTOCOL_ERROR), the stream ended by the HEADERS.
func TestRateLimitH2Head(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{Name: "lim", PathPrefix: "/lim/", Pool: "app",
			RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}}}
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		req, _ := http.NewRequest("GET", base+"/lim/x", nil)
		if resp, _ := do(t, c, req); resp.StatusCode != 200 {
			t.Fatalf("first request: %d, want 200", resp.StatusCode)
		}
		conn := dial(t, p)
		enc := hpack.NewEncoder()
		block := enc.StartBlock(nil)
		for _, f := range [][2]string{{":method", "HEAD"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/lim/x"}} {
			block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
		}
		out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
		if _, err := conn.Write(h2.AppendHeaders(out, 1, block, true, h2.MinMaxFrameSize)); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		r := &rawH2{t: t, c: conn, tmp: make([]byte, 64<<10)}
		dec := hpack.NewDecoder(4096, 1<<20)
		for {
			f, err := r.next()
			if err != nil {
				t.Fatal(err)
			}
			if f.StreamID != 1 {
				continue
			}
			switch f.Type {
			case h2.FrameData:
				t.Fatalf("DATA of %d bytes on the HEAD's 429", len(f.Data))
			case h2.FrameHeaders:
				var got []string
				if err := dec.Decode(f.Data, func(hf hpack.Field) error {
					got = append(got, string(hf.Name)+": "+string(hf.Value))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if g, want := strings.Join(got, ", "), ":status: 429, content-type: text/plain; charset=utf-8, content-length: 22, retry-after: 3600"; g != want {
					t.Errorf("HEADERS %s, want %s", g, want)
				}
				if f.Flags&h2.FlagEndStream == 0 {
					t.Errorf("the 429's HEADERS do not end the stream")
				}
				return
			default:
				t.Fatalf("frame %v on the HEAD's stream before its HEADERS", f.Type)
			}
		}
	})
}

// getOnLoops sends a GET for path on each of n new connections to p's
// two loops in turn, all at once, and counts the responses' status codes
// (0: none read).
func getOnLoops(t *testing.T, p *Proxy, n int, path string) map[int]int {
	t.Helper()
	var cs []net.Conn
	for i := range n {
		cs = append(cs, onLoop(t, p, i%2))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for _, c := range cs {
		wg.Go(func() {
			code := getStatus(c, path)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// getStatus sends a GET for path on c and returns its response's status
// code, 0 where none was read.
func getStatus(c net.Conn, path string) int {
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRateLimitRefusedNotSpent: a request a route's limit refuses spends
// nothing of the listener's (nginx's limit_req charges no zone unless all
// pass): with the listener's burst of 10 (key all) and a route that
// refuses all but its first, 40 requests to the route refused at once on
// two loops leave the listener the 9 its first left, which pass to
// another route, the 10th after them refused; the counters say what
// happened to the requests (the listener's counts none of the 40 the
// route refused: they did not pass).
func TestRateLimitRefusedNotSpent(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		cfg := capConfig(b, ModeHTTP, 2, 0, u.addr)
		cfg.Pools[0].QueueTimeout = 0
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 10, Key: RateKeyAll}
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/lim/", Pool: "app",
			RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}}}
		p := startProxy(t, cfg)
		if len(p.e.Loops()) < 2 {
			t.Skip("needs two loops (two CPUs)")
		}
		if code := getStatus(onLoop(t, p, 0), "/lim/first"); code != 200 {
			t.Fatalf("the route's first: %d, want 200", code)
		}
		codes := getOnLoops(t, p, 40, "/lim/x")
		if codes[429] != 40 {
			t.Fatalf("the route's 40: %v, want 40 429s", codes)
		}
		for i := range 10 {
			want := 200
			if i == 9 {
				want = 429
			}
			if code := getStatus(onLoop(t, p, i%2), "/other"); code != want {
				t.Fatalf("another route's request %d: %d, want %d", i, code, want)
			}
		}
		lt := p.Totals().Listeners[0]
		if rl := lt.RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 10, Limited: 1}) {
			t.Errorf("the listener's totals %+v, want 10 allowed, 1 limited", rl)
		}
		if rl := lt.Routes[0].RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 1, Limited: 40}) {
			t.Errorf("the route's totals %+v, want 1 allowed, 40 limited", rl)
		}
	})
}

// TestRateLimitDiscardBody: a request with a body a rate limit refuses
// keeps its connection where the body is at most discardBytes, its
// Content-Length's or, chunked, as it comes (nginx's
// ngx_http_discard_request_body): the body is read and dropped, and the
// requests pipelined after it are answered on the connection, one whose
// body comes in parts after its 429 too; a Content-Length past the bound
// gets 429 with Connection: close and is closed, as is a chunked body
// that goes past it after its 429, and one that expects 100-continue
// (its client may send the body or not).
func TestRateLimitDiscardBody(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, r.URL.Path)
		})
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/lim/", Pool: "app",
			RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}}}
		p := startProxy(t, cfg)
		read := func(c net.Conn, br *bufio.Reader) string {
			t.Helper()
			resp, body := readResponseFrom(t, c, br, "POST")
			s := fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body))
			if resp.Close {
				s += " (close)"
			}
			return s
		}
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /lim/a HTTP/1.1\r\nHost: x\r\n\r\n"+
			"POST /lim/b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"+
			"POST /lim/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"+
			fmt.Sprintf("POST /lim/d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", discardBytes, strings.Repeat("GET / HTTP/1.1\r\n\r\n", discardBytes/18)+strings.Repeat("x", discardBytes%18))+
			"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"+
			"POST /lim/e HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhel")
		var got []string
		for range 5 {
			got = append(got, read(c, br))
		}
		if g, want := strings.Join(got, ", "), "200 /lim/a, 429 429 Too Many Requests, 429 429 Too Many Requests, 429 429 Too Many Requests, 200 /other"; g != want {
			t.Fatalf("got %s, want %s", g, want)
		}
		if g := read(c, br); g != "429 429 Too Many Requests" {
			t.Fatalf("a body in parts: %s, want 429 kept", g)
		}
		time.Sleep(20 * time.Millisecond)
		io.WriteString(c, "lo")
		time.Sleep(20 * time.Millisecond)
		io.WriteString(c, "world"+"GET /other2 HTTP/1.1\r\nHost: x\r\n\r\n")
		if g := read(c, br); g != "200 /other2" {
			t.Fatalf("after a body in parts: %s, want 200 /other2", g)
		}

		for _, tc := range []struct{ name, req, want string }{
			{"a Content-Length past the bound", fmt.Sprintf("POST /lim/f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nhello", discardBytes+1), "429 429 Too Many Requests (close)"},
			{"a chunked body past the bound", fmt.Sprintf("POST /lim/g HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s", discardBytes+1, strings.Repeat("x", discardBytes+1)), "429 429 Too Many Requests"},
			{"100-continue", "POST /lim/h HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", "429 429 Too Many Requests (close)"},
		} {
			c := dial(t, p)
			br := bufio.NewReader(c)
			go io.WriteString(c, tc.req+"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
			if g := read(c, br); g != tc.want {
				t.Fatalf("%s: %s, want %s", tc.name, g, tc.want)
			}
			if n, err := br.Read(make([]byte, 1)); n > 0 || err == nil {
				t.Errorf("%s: read %d bytes after the 429 (%v), want the connection closed", tc.name, n, err)
			}
		}
	})
}

// TestRateLimitDiscardSlow: a refused request's body read and dropped
// is bounded by request_timeout (1.5s) from its 429, not by
// keepalive_timeout (300ms), and keepalive_timeout counts from the body's
// end: a body trickled a byte each 20ms for 600ms is read whole, the
// connection then closed about keepalive_timeout after its last byte; one
// trickled for good (slowloris) is closed about request_timeout after its
// 429 (counted as a discard's close, not an idle one's), the 429 read.
func TestRateLimitDiscardSlow(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		cfg := httpConfig(b, u.addr)
		const keepalive, reqTimeout = 300 * time.Millisecond, 1500 * time.Millisecond
		cfg.Listeners[0].KeepaliveTimeout = Duration(keepalive)
		cfg.Listeners[0].RequestTimeout = Duration(reqTimeout)
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}
		p := startProxy(t, cfg)
		if code := getStatus(dial(t, p), "/first"); code != 200 {
			t.Fatalf("the first: %d, want 200", code)
		}
		// refused sends a POST with a body of n bytes and reads its 429,
		// kept; then trickle sends the body a byte each 20ms, and returns
		// when the last went (or the connection failed) and when the
		// proxy closed the connection.
		refused := func(n int) (c net.Conn, br *bufio.Reader, at time.Time) {
			c = dial(t, p)
			br = bufio.NewReader(c)
			fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
			resp, _ := readResponseFrom(t, c, br, "POST")
			if resp.StatusCode != 429 || resp.Close {
				t.Fatalf("%d (close %v), want 429 kept", resp.StatusCode, resp.Close)
			}
			return c, br, time.Now()
		}
		trickle := func(c net.Conn, br *bufio.Reader, n int) (last, closed time.Time, sent int) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				for ; sent < n; sent++ {
					time.Sleep(20 * time.Millisecond)
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
					last = time.Now()
				}
			}()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := br.Read(make([]byte, 1)); n > 0 || err == nil {
				t.Fatalf("read %d bytes (%v), want the connection closed", n, err)
			}
			closed = time.Now()
			c.Close()
			<-done
			return last, closed, sent
		}

		// The body's 600ms leave 900ms of request_timeout, counted from
		// the 429's sending, which a loaded machine can take from the
		// trickle: a close before the body's end fails the test where it
		// came before request_timeout from the POST's sending, and is a
		// pause of the test's (untilCalm) where it came after.
		paused := 0
		untilCalm(t, func() (string, string) {
			start := time.Now()
			c, br, _ := refused(30)
			last, closed, sent := trickle(c, br, 30)
			if sent == 30 && !closed.Before(last) {
				if d := closed.Sub(last); d < keepalive-50*time.Millisecond || d > keepalive+time.Second {
					t.Errorf("closed %v after the body's end, want about keepalive_timeout (%v)", d, keepalive)
				}
				return "", ""
			}
			fault := fmt.Sprintf("closed with %d of the body's 30 bytes sent (a byte each 20ms), %v after the POST's sending, want after them", sent, closed.Sub(start).Round(time.Millisecond))
			if closed.Sub(start) < reqTimeout {
				return fault + fmt.Sprintf(": before request_timeout (%v)", reqTimeout), ""
			}
			paused++ // (closed for request_timeout: a discard's close)
			return fault, fmt.Sprintf("past request_timeout (%v)", reqTimeout)
		})

		c, br, start := refused(1000)
		_, closed, _ := trickle(c, br, 1000)
		if d := closed.Sub(start); d < reqTimeout-50*time.Millisecond || d > reqTimeout+2*time.Second {
			t.Errorf("a slowloris body closed %v after its 429, want about request_timeout (%v)", d, reqTimeout)
		}
		waitFor(t, "the close counted", func() bool { return p.Totals().Listeners[0].DiscardClosed == uint64(1+paused) })
		if lt := p.Totals().Listeners[0]; lt.IdleClosed != 2 {
			t.Errorf("%d closed idle, want 2 (the first request's connection and the first body's)", lt.IdleClosed)
		}
	})
}

// TestRateLimitUpgradeH2Pool: an HTTP/1.1 request asking for an upgrade
// to a route whose pool is h2c is refused with 501, as the proxy's other
// refusals are (CONNECT, 400, 413) before the rate limit: it spends
// nothing of the listener's (burst 1) and is not counted, and the next
// request passes.
func TestRateLimitUpgradeH2Pool(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}
		p := startProxy(t, cfg)
		c := dial(t, p)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if resp, _ := readResponseFrom(t, c, bufio.NewReader(c), "GET"); resp.StatusCode != 501 {
			t.Fatalf("the upgrade: %d, want 501", resp.StatusCode)
		}
		if code := getStatus(dial(t, p), "/"); code != 200 {
			t.Fatalf("the request after it: %d, want 200", code)
		}
		if rl := p.Totals().Listeners[0].RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 1}) {
			t.Errorf("totals %+v, want 1 allowed", rl)
		}
	})
}

// TestRateLimitTCPMaxConns: a mode tcp connection that max_conns (1)
// turns away spends nothing of the listener's rate limit (burst 2 an
// hour) and is not counted by it (it was not let through): with the
// first connection held, a second is turned away by max_conns; once the
// first has gone, a third passes on the budget's second.
func TestRateLimitTCPMaxConns(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, echo)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].MaxConns = 1
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 2}
		p := startProxy(t, cfg)
		first := dial(t, p)
		if err := roundTrip(first, "hi"); err != nil {
			t.Fatalf("the first: %v", err)
		}
		if err := closedByProxy(dial(t, p)); err != nil {
			t.Fatalf("the second, over max_conns: %v", err)
		}
		first.Close()
		waitFor(t, "the first gone", func() bool { return p.Totals().Listeners[0].Active == 0 })
		if err := roundTrip(dial(t, p), "hi"); err != nil {
			t.Fatalf("the third: %v", err)
		}
		lt := p.Totals().Listeners[0]
		if rl := lt.RateLimit; rl == nil || *rl != (RateLimitTotals{Allowed: 2}) {
			t.Errorf("totals %+v, want 2 allowed", rl)
		}
		if lt.Rejected != 1 {
			t.Errorf("%d turned away by max_conns, want 1", lt.Rejected)
		}
	})
}
