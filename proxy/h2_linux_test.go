package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// h2cConfig is httpConfig with h2c on.
func h2cConfig(b engine.Backend, servers ...string) *Config {
	cfg := httpConfig(b, servers...)
	cfg.Listeners[0].H2C = true
	return cfg
}

// h2Client returns an http.Client speaking HTTP/2 with prior knowledge
// (h2c) to p's listener "web", and its base URL.
func h2Client(t *testing.T, p *Proxy) (*http.Client, string) {
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, "http://" + p.Addr("web").String()
}

// do sends req and returns the response and its body, checking that it
// came over HTTP/2.
func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("response over %s, want HTTP/2.0", resp.Proto)
	}
	return resp, body
}

// TestH2GetPost: over one HTTP/2 connection, a GET and a POST of 1 MiB
// (with content-length, and without: chunked to the server) are forwarded
// as HTTP/1.1, their bodies checked both ways; the server sees Host from
// :authority, X-Forwarded-For and Via: 2.0; the response's
// connection-specific fields are not passed on; the metrics count the
// connection and its streams.
func TestH2GetPost(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		big := randomBytes(7, 1<<20)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Host", r.Host)
			w.Header().Set("X-Got-XFF", r.Header.Get("X-Forwarded-For"))
			w.Header().Set("X-Got-Via", r.Header.Get("Via"))
			w.Header().Set("X-Got-TE", strings.Join(r.TransferEncoding, ","))
			w.Header().Set("Keep-Alive", "timeout=5")
			switch r.Method {
			case "POST":
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("X-Sum", sum(body))
				w.Write(body)
			default:
				w.Write(big)
			}
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)

		req, _ := http.NewRequest("GET", base+"/get", nil)
		resp, body := do(t, c, req)
		if resp.StatusCode != 200 || !bytes.Equal(body, big) {
			t.Fatalf("GET: %d, %d bytes (want 200 and the 1 MiB sent)", resp.StatusCode, len(body))
		}
		if got, want := resp.Header.Get("X-Host"), p.Addr("web").String(); got != want {
			t.Errorf("Host at the server %q, want %q", got, want)
		}
		if got := resp.Header.Get("X-Got-XFF"); got != "127.0.0.1" {
			t.Errorf("X-Forwarded-For at the server %q, want 127.0.0.1", got)
		}
		if got := resp.Header.Get("X-Got-Via"); got != "2.0 spindle" {
			t.Errorf("Via at the server %q, want 2.0 spindle", got)
		}
		if resp.Header.Get("Keep-Alive") != "" {
			t.Errorf("Keep-Alive passed on to an HTTP/2 client")
		}

		for _, chunked := range []bool{false, true} {
			var rd io.Reader = bytes.NewReader(big)
			if chunked {
				rd = io.MultiReader(rd) // no length known: no content-length
			}
			req, _ := http.NewRequest("POST", base+"/post", rd)
			resp, body := do(t, c, req)
			if resp.StatusCode != 200 || !bytes.Equal(body, big) || resp.Header.Get("X-Sum") != sum(big) {
				t.Fatalf("POST (chunked %v): %d, %d bytes back, server's sum %q (want 200 and the 1 MiB)", chunked, resp.StatusCode, len(body), resp.Header.Get("X-Sum"))
			}
			if got, want := resp.Header.Get("X-Got-TE"), map[bool]string{false: "", true: "chunked"}[chunked]; got != want {
				t.Errorf("POST (chunked %v): server's Transfer-Encoding %q, want %q", chunked, got, want)
			}
		}
		lt := p.Totals().Listeners[0]
		if lt.H2Connections != 1 || lt.H2Streams != 3 {
			t.Errorf("h2 connections %d, streams %d; want 1 and 3", lt.H2Connections, lt.H2Streams)
		}
	})
}

// TestH2Concurrent: 100 concurrent streams on one HTTP/2 connection, over
// several upstream connections, each answered with its own body.
func TestH2Concurrent(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			io.WriteString(w, strings.Repeat(r.URL.Path, 1000))
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		get(t, c, base+"/warm") // one connection, its SETTINGS known, before the burst
		const n = 100
		var wg sync.WaitGroup
		errc := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				path := fmt.Sprintf("/s%d", i)
				resp, err := c.Get(base + path)
				if err != nil {
					errc <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(body) != strings.Repeat(path, 1000) || resp.ProtoMajor != 2 {
					errc <- fmt.Errorf("%s: %v, %d, %s, %d bytes", path, err, resp.StatusCode, resp.Proto, len(body))
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		lt := p.Totals().Listeners[0]
		if lt.H2Connections != 1 || lt.H2Streams != n+1 {
			t.Errorf("h2 connections %d, streams %d; want 1 and %d", lt.H2Connections, lt.H2Streams, n+1)
		}
		if got := u.accepted.Load(); got < 2 {
			t.Errorf("the server accepted %d connections, want several (one a concurrent stream)", got)
		}
	})
}

// TestH2H1Unchanged: an HTTP/1.1 client on an h2c listener is served as
// without h2c, also one that sends a head in pieces starting with "P".
func TestH2H1Unchanged(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.Method+" "+r.URL.Path)
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := client(t, p)
		resp, body := get(t, c, base+"/x")
		if resp.StatusCode != 200 || body != "GET /x" || resp.ProtoMajor != 1 {
			t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, body)
		}
		cn := dial(t, p)
		for _, part := range []string{"P", "UT /y HTTP/1.1\r\nHost: a\r\n", "Content-Length: 0\r\n\r\n"} {
			io.WriteString(cn, part)
			time.Sleep(20 * time.Millisecond)
		}
		resp, got := readResponse(t, cn, "PUT")
		if resp.StatusCode != 200 || got != "PUT /y" {
			t.Fatalf("PUT in pieces: %d %q", resp.StatusCode, got)
		}
		if lt := p.Totals().Listeners[0]; lt.H2Connections != 0 {
			t.Errorf("%d h2 connections counted, want 0", lt.H2Connections)
		}
	})
}

// TestH2FlowControl: a response larger than the client's windows, which
// the client does not read, stops the proxy reading its upstream (the
// server's bytes received stay far below the body) and then arrives
// whole once the client reads.
func TestH2FlowControl(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 32 << 20
		big := randomBytes(3, size)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.Write(big)
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		c.Timeout = 2 * time.Minute // 32 MiB under -race on a loaded machine
		resp, err := c.Get(base + "/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		in1, in2 := settled(func() int64 { return int64(serverTotals(p, u.addr).BytesIn) })
		if in2 > size/2 || in2 != in1 {
			t.Errorf("with the client not reading, the proxy read %d then %d bytes of the server's %d: want it paused", in1, in2, size)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(body, big) {
			t.Fatalf("read %d bytes (%v), want the %d sent", len(body), err, size)
		}
	})
}

// TestH2ClientReset: a stream the client resets mid-response closes its
// upstream connection (not pooled) and is counted; the connection's other
// streams go on.
func TestH2ClientReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		gone := make(chan struct{}, 1)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/stream" {
				io.WriteString(w, "ok")
				return
			}
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					gone <- struct{}{}
					return
				}
				w.(http.Flusher).Flush()
			}
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		get(t, c, base+"/ok")
		req, _ := http.NewRequest("GET", base+"/stream", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // RST_STREAM(CANCEL)
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the server's connection was not closed after the client reset the stream")
		}
		waitFor(t, "the reset counted", func() bool { return p.Totals().Listeners[0].H2ResetsClient == 1 })
		if st := serverTotals(p, u.addr); st.Idle != 0 || st.Active != 0 {
			t.Errorf("server: %d idle, %d active connections; want none (the reset stream's, /ok's before, is closed, not pooled)", st.Idle, st.Active)
		}
		if _, body := get(t, c, base+"/ok"); body != "ok" {
			t.Errorf("after the reset: %q", body)
		}
	})
}

// TestH2UpstreamFailures: on one connection, a server's 503 passes on, a
// server that closes before its response head gets that stream a 502,
// and the other streams are answered.
func TestH2UpstreamFailures(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/503":
				w.WriteHeader(503)
			case "/die":
				cn, _, _ := http.NewResponseController(w).Hijack()
				cn.Close()
			default:
				time.Sleep(50 * time.Millisecond)
				io.WriteString(w, "ok")
			}
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		get(t, c, base+"/warm")
		var wg sync.WaitGroup
		for _, tc := range []struct {
			path string
			want int
		}{{"/503", 503}, {"/die", 502}, {"/a", 200}, {"/b", 200}, {"/die", 502}, {"/c", 200}} {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", base+tc.path, strings.NewReader("body")) // not retried
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("%s: %v", tc.path, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, tc.want)
				}
			})
		}
		wg.Wait()
		if lt := p.Totals().Listeners[0]; lt.H2Connections != 1 {
			t.Errorf("%d h2 connections, want 1 (a failed stream keeps the connection)", lt.H2Connections)
		}
	})
}

// TestH2Routes: streams are routed by :authority and :path as HTTP/1.1
// requests are by Host and target; a dot-segment path is refused.
func TestH2Routes(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		named := func(name string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name+" "+r.Host) }
		}
		app, api := newHTTPUpstream(t, named("app")), newHTTPUpstream(t, named("api"))
		cfg := h2cConfig(b, app.addr)
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "api", Servers: Servers(api.addr)})
		cfg.Listeners[0].Routes = []RouteConfig{{Host: "api.example.com", PathPrefix: "/v1/", Pool: "api"}}
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		for _, tc := range []struct{ host, path, want string }{
			{"api.example.com", "/v1/users", "api api.example.com"},
			{"API.example.com:8080", "/v1/", "api API.example.com:8080"},
			{"api.example.com", "/v2/users", "app api.example.com"},
			{"www.example.com", "/v1/users", "app www.example.com"},
		} {
			req, _ := http.NewRequest("GET", base+tc.path, nil)
			req.Host = tc.host
			resp, body := do(t, c, req)
			if resp.StatusCode != 200 || string(body) != tc.want {
				t.Errorf(":authority %s, %s: %d %q, want %q", tc.host, tc.path, resp.StatusCode, body, tc.want)
			}
		}
		req, _ := http.NewRequest("GET", base+"/v1/x", nil)
		req.URL.Opaque = "/v1/%2e%2e/admin"
		req.Host = "api.example.com"
		if resp, _ := do(t, c, req); resp.StatusCode != 400 {
			t.Errorf("dot-segments: %d, want 400", resp.StatusCode)
		}
	})
}

// TestH2ResponseTimeout: a server that does not answer in
// response_timeout gets its stream 504; another stream is answered.
func TestH2ResponseTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				time.Sleep(2 * time.Second)
			}
			io.WriteString(w, "ok")
		})
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(300 * time.Millisecond)
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		get(t, c, base+"/warm")
		start := time.Now()
		req, _ := http.NewRequest("GET", base+"/slow", nil)
		if resp, _ := do(t, c, req); resp.StatusCode != 504 {
			t.Errorf("/slow: %d, want 504", resp.StatusCode)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("504 after %v, want about 300ms", d)
		}
		if _, body := get(t, c, base+"/x"); body != "ok" {
			t.Errorf("after: %q", body)
		}
	})
}

// slowNamed is a server answering its name, /slow once release is closed.
func slowNamed(name string, release chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, name)
	}
}

// getAsync runs a GET in the background (doAsync).
func getAsync(c *http.Client, url string) <-chan string {
	req, _ := http.NewRequest("GET", url, nil)
	return doAsync(c, req)
}

// doAsync sends req in the background; its result is "status body" or
// the error.
func doAsync(c *http.Client, req *http.Request) <-chan string {
	ch := make(chan string, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			ch <- err.Error()
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			ch <- err.Error()
			return
		}
		ch <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	return ch
}

// TestH2Reload: a reload that replaces the pool's server keeps an
// HTTP/2 client's stream in flight (answered by the server removed) and
// the connection, whose next stream goes to the new server; a reload that
// removes the listener lets the stream in flight finish, then closes the
// connection (GOAWAY first).
func TestH2Reload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u1, u2 := newHTTPUpstream(t, slowNamed("u1", release)), newHTTPUpstream(t, slowNamed("u2", release))
		p := startProxy(t, h2cConfig(b, u1.addr))
		c, base := h2Client(t, p)
		slow := getAsync(c, base+"/slow")
		waitFor(t, "the slow request at the server", func() bool { return serverTotals(p, u1.addr).Requests == 1 })
		mustReload(t, p, h2cConfig(b, u2.addr))
		if _, body := get(t, c, base+"/x"); body != "u2" {
			t.Errorf("a stream after the reload answered by %q, want u2", body)
		}
		close(release)
		if got := <-slow; got != "200 u1" {
			t.Errorf("the stream in flight across the reload: %q, want 200 u1", got)
		}
		if n := p.Totals().Listeners[0].H2Connections; n != 1 {
			t.Errorf("%d h2 connections, want 1 (kept across the reload)", n)
		}

		release2 := make(chan struct{})
		u3 := newHTTPUpstream(t, slowNamed("u3", release2))
		mustReload(t, p, h2cConfig(b, u3.addr))
		slow = getAsync(c, base+"/slow")
		waitFor(t, "the slow request at the server", func() bool { return serverTotals(p, u3.addr).Requests == 1 })
		cfg := h2cConfig(b, u3.addr)
		cfg.Listeners[0].Name = "other"
		mustReload(t, p, cfg)
		waitFor(t, "the old listener's connection to stay only for its stream", func() bool { return p.Engine().Stats().Open >= 2 })
		close(release2)
		if got := <-slow; got != "200 u3" {
			t.Errorf("the stream in flight as its listener was removed: %q, want 200 u3", got)
		}
		waitFor(t, "the removed listener's h2 connection closed", func() bool {
			return p.Engine().Stats().Open == serverIdle(p)
		})
	})
}

// serverIdle is the idle pooled connections of p's servers.
func serverIdle(p *Proxy) int64 {
	var n int64
	for _, s := range p.Totals().Servers {
		n += s.Idle
	}
	return n
}

// TestH2Drain: a drain sends GOAWAY; the stream in flight finishes and
// Run returns once the client is closed.
func TestH2Drain(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u := newHTTPUpstream(t, slowNamed("u", release))
		p, stop := runProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		slow := getAsync(c, base+"/slow")
		waitFor(t, "the slow request at the server", func() bool { return serverTotals(p, u.addr).Requests == 1 })
		drainsInFlight(t, stop, release, slow, "200 u")
	})
}

// drainsInFlight stops a proxy (stop: runProxy's) while a request is in
// flight at its server, releases the server 100 ms later, and fails the
// test unless the request's result (slow: getAsync's) is want and Run
// returns within 10 s of it.
func drainsInFlight(t *testing.T, stop func() error, release chan struct{}, slow <-chan string, want string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- stop() }()
	time.Sleep(100 * time.Millisecond)
	close(release)
	if got := <-slow; got != want {
		t.Errorf("the request in flight at the drain: %q, want %q", got, want)
	}
	runEnds(t, done, "the request ended")
}

// TestH2AccessLog: each stream gets an access log line with proto
// HTTP/2.0, its route, bodies' data and source; a reset stream's says CD.
func TestH2AccessLog(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %d", len(body))
		})
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{Name: "api", PathPrefix: "/api/", Pool: "app"}}
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		get(t, c, base+"/api/x?q=1")
		resp, err := c.Post(base+"/other", "text/plain", strings.NewReader("abcd"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		req, _ := http.NewRequest("GET", base+"/api/x", nil)
		req.URL.Opaque = "/a/../b"
		do(t, c, req)
		byTarget := func(target string) func(map[string]any) bool {
			return func(m map[string]any) bool { return m["target"] == target }
		}
		host := p.Addr("web").String()
		m := waitLine(t, path, "/api/x's line", byTarget("/api/x?q=1"))
		checkFields(t, m, map[string]string{"method": "GET", "host": host, "proto": "HTTP/2.0", "status": "200", "route": "api",
			"source": "upstream", "resp_bytes": "5", "req_bytes": "0", "reused": "false", "term": "-"})
		m = waitLine(t, path, "/other's line", byTarget("/other"))
		checkFields(t, m, map[string]string{"method": "POST", "proto": "HTTP/2.0", "status": "200", "route": "default",
			"req_bytes": "4", "resp_bytes": "5", "reused": "true"})
		m = waitLine(t, path, "the dot-segment line", byTarget("/a/../b"))
		checkFields(t, m, map[string]string{"proto": "HTTP/2.0", "status": "400", "source": "proxy", "term": "PR"})
	})
}

// TestH2Allocs: requests forwarded on open HTTP/2 connections over pooled
// upstream connections allocate nothing in steady state, as
// TestHTTPAllocs measures for HTTP/1.1: a raw client (a fixed header
// block, frames parsed in place) sends one request at a time per
// connection.
func TestH2Allocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, rawHTTPServer)
		p := startProxy(t, h2cConfig(b, u.addr))
		const conns = 10
		sent := h2AllocsZero(t, p, conns)
		if lt := p.Totals().Listeners[0]; lt.H2Streams != uint64(sent) {
			t.Errorf("%d streams, want %d", lt.H2Streams, sent)
		}
		if st := serverTotals(p, u.addr); st.NewRequests > conns {
			t.Errorf("%d requests on new connections, want at most %d", st.NewRequests, conns)
		}
	})
}

// h2AllocsZero sends GETs over conns raw HTTP/2 connections to p's
// listener "web" (200 a connection in a round, the first 3 rounds to
// warm up) and fails the test unless the process allocated nothing for
// them: its allocations over a round, less those of the same round
// without requests. It returns the requests it sent in all: those of 4
// rounds, or of 5 or 6 where allocsOfRound ran the measured round again
// (a thread started in it, as under load).
func h2AllocsZero(t *testing.T, p *Proxy, conns int) int {
	t.Helper()
	enc := hpack.NewEncoder()
	block := enc.StartBlock(nil)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "example.com"}, {":path", "/index.html"}, {"user-agent", "test"},
		{"x_forwarded_for", "1.2.3.4"}, {"x_custom", "c"}} { // (see httpAllocs)
		block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
	}
	per := 200
	type h2c struct {
		c   net.Conn
		id  uint32
		req []byte
		buf []byte
		n   int
	}
	cs := make([]*h2c, conns)
	for i := range cs {
		c := &h2c{c: dial(t, p), id: 1, buf: make([]byte, 64<<10)}
		c.c.SetDeadline(time.Now().Add(time.Minute))
		pre := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
		pre = h2.AppendSettingsAck(pre)
		if _, err := c.c.Write(pre); err != nil {
			t.Fatal(err)
		}
		c.req = h2.AppendHeaders(nil, 1, block, true, h2.MinMaxFrameSize)
		cs[i] = c
	}
	// send sends connection i's next request; answer reads frames up to
	// its response's END_STREAM.
	send := func(i, _ int) error {
		c := cs[i]
		binary.BigEndian.PutUint32(c.req[5:], c.id)
		_, err := c.c.Write(c.req)
		return err
	}
	answer := func(i, _ int) error {
		c := cs[i]
		for {
			for {
				f, k, err := h2.ParseFrame(c.buf[:c.n], h2.MaxMaxFrameSize)
				if err != nil {
					return err
				}
				if k == 0 {
					break
				}
				c.n = copy(c.buf, c.buf[k:c.n])
				if f.Type == h2.FrameRSTStream && f.StreamID == c.id {
					return fmt.Errorf("stream %d reset", c.id)
				}
				if f.StreamID == c.id && f.Flags.Has(h2.FlagEndStream) {
					c.id += 2
					return nil
				}
			}
			m, err := c.c.Read(c.buf[c.n:])
			if err != nil {
				return err
			}
			c.n += m
		}
	}
	// A round is a request on every connection, then their responses,
	// per times (inStep).
	var err error
	sent := 0
	round := func() {
		n, e := inStep(conns, per, send, answer)
		sent += n
		if err == nil {
			err = e
		}
	}
	allocs := allocsOfRound(round)
	if err != nil {
		t.Fatal(err)
	}
	reqs := conns * per
	per = 0
	base := allocsOfRound(round)
	extra := int64(allocs) - int64(base)
	t.Logf("%d allocations for %d proxied HTTP/2 requests, %d for the same round without requests: %.4f a request", allocs, reqs, base, float64(extra)/float64(reqs))
	if extra*100 > int64(reqs) {
		t.Errorf("%d allocations for %d requests beyond the round's own %d (%.3f each), want 0 (under 0.01 allowed for the runtime)", extra, reqs, base, float64(extra)/float64(reqs))
	}
	return sent
}

// TestH2Load: h2load (nghttp2) through the proxy, 2000 requests over 4
// connections with 10 streams each in flight: every one 2xx.
func TestH2Load(t *testing.T) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		t.Skip("h2load is not on PATH (.ci/run installs nghttp2-client)")
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, rawHTTPServer)
		p := startProxy(t, h2cConfig(b, u.addr))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "-n", "2000", "-c", "4", "-m", "10", "http://"+p.Addr("web").String()+"/").CombinedOutput()
		if err != nil {
			t.Fatalf("h2load: %v\n%s", err, out)
		}
		if !regexp.MustCompile(`(?m)^requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed`).Match(out) ||
			!regexp.MustCompile(`(?m)^status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx`).Match(out) {
			t.Fatalf("h2load: not 2000 2xx:\n%s", out)
		}
		if lt := p.Totals().Listeners[0]; lt.H2Connections != 4 || lt.H2Streams != 2000 {
			t.Errorf("%d h2 connections, %d streams; want 4 and 2000", lt.H2Connections, lt.H2Streams)
		}
	})
}

// rawH2Request opens a raw HTTP/2 connection to p and sends a request
// with the given header fields (pseudo ones first) as stream 1, ending
// it; it returns the connection's frame reader.
func rawH2Request(t *testing.T, p *Proxy, fields [][2]string) *rawH2 {
	t.Helper()
	fs := make([]hpack.Field, len(fields))
	for i, f := range fields {
		fs[i] = hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])}
	}
	return rawH2Fields(t, p, fs)
}

// rawH2Fields is rawH2Request with the fields as hpack gets them (some
// never-indexed, say).
func rawH2Fields(t *testing.T, p *Proxy, fields []hpack.Field) *rawH2 {
	t.Helper()
	c := dial(t, p)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	enc := hpack.NewEncoder()
	block := enc.StartBlock(nil)
	for _, f := range fields {
		block = enc.AppendField(block, f)
	}
	out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
	out = h2.AppendHeaders(out, 1, block, true, h2.MinMaxFrameSize)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	return &rawH2{t: t, c: c, tmp: make([]byte, 16<<10)}
}

// rawH2Status sends a request with the given header fields (pseudo ones
// first) as stream 1 on a new raw HTTP/2 connection to p (rawH2Request)
// and returns the :status of its response.
func rawH2Status(t *testing.T, p *Proxy, fields [][2]string) string {
	t.Helper()
	r := rawH2Request(t, p, fields)
	dec := hpack.NewDecoder(4096, 64<<10)
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		if f.Type == h2.FrameRSTStream && f.StreamID == 1 {
			return "RST_STREAM " + f.Code.String() // no response: the stream reset
		}
		if f.Type != h2.FrameHeaders || f.StreamID != 1 {
			continue
		}
		status := ""
		dec.Decode(f.Data, func(hf hpack.Field) error {
			if string(hf.Name) == ":status" {
				status = string(hf.Value)
			}
			return nil
		})
		return status
	}
}

// TestH2RequestChecks: a request without :authority and host gets 400
// (with host alone it is routed by it), CONNECT 501, a content-length
// over max_request_body 413, and a body without one that grows past it
// 413 too.
func TestH2RequestChecks(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, r.Host)
		})
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].MaxRequestBody = 1000
		p := startProxy(t, cfg)
		get := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}}
		if got := rawH2Status(t, p, get); got != "400" {
			t.Errorf("no :authority, no host: %s, want 400", got)
		}
		if got := rawH2Status(t, p, append(get, [2]string{"host", "h.example"})); got != "200" {
			t.Errorf("host without :authority: %s, want 200", got)
		}
		if got := rawH2Status(t, p, [][2]string{{":method", "CONNECT"}, {":authority", "x:443"}}); got != "501" {
			t.Errorf("CONNECT: %s, want 501", got)
		}
		c, base := h2Client(t, p)
		req, _ := http.NewRequest("POST", base+"/", bytes.NewReader(make([]byte, 2000)))
		if resp, _ := do(t, c, req); resp.StatusCode != 413 {
			t.Errorf("content-length 2000 over 1000: %d, want 413", resp.StatusCode)
		}
		req, _ = http.NewRequest("POST", base+"/", io.MultiReader(bytes.NewReader(make([]byte, 2000))))
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Errorf("a body of unknown length growing to 2000 over 1000: %d, want 413", resp.StatusCode)
			}
		}
		req, _ = http.NewRequest("POST", base+"/", strings.NewReader("small"))
		if resp, _ := do(t, c, req); resp.StatusCode != 200 {
			t.Errorf("a small body after: %d", resp.StatusCode)
		}
	})
}

// TestH2Trailers: a request's trailers reach the server (chunked), and a
// chunked response's trailers reach the client as trailing HEADERS.
func TestH2Trailers(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "X-Resp-Trailer")
			w.WriteHeader(200)
			w.Write(body)
			w.(http.Flusher).Flush()
			w.Header().Set("X-Resp-Trailer", "got "+r.Trailer.Get("X-Req-Trailer"))
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		req, _ := http.NewRequest("POST", base+"/", io.MultiReader(strings.NewReader("hello")))
		req.Trailer = http.Header{"X-Req-Trailer": {"t1"}}
		resp, body := do(t, c, req)
		if string(body) != "hello" || resp.Trailer.Get("X-Resp-Trailer") != "got t1" {
			t.Errorf("body %q, trailers %v; want hello and X-Resp-Trailer: got t1", body, resp.Trailer)
		}
	})
}

// TestH2KeepaliveTimeout: a connection with no stream open for
// keepalive_timeout gets GOAWAY and is closed, and counted.
func TestH2KeepaliveTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		cfg := h2cConfig(b, u.addr)
		cfg.Listeners[0].KeepaliveTimeout = Duration(200 * time.Millisecond)
		p := startProxy(t, cfg)
		c := dial(t, p)
		c.Write(append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read: %v (want the connection closed)", err)
		}
		goAway := false
		for len(got) > 0 {
			f, k, err := h2.ParseFrame(got, h2.MaxMaxFrameSize)
			if err != nil || k == 0 {
				break
			}
			goAway = goAway || f.Type == h2.FrameGoAway
			got = got[k:]
		}
		if !goAway {
			t.Error("closed without GOAWAY")
		}
		if n := p.Totals().Listeners[0].IdleClosed; n != 1 {
			t.Errorf("idle closed %d, want 1", n)
		}
	})
}

// TestH2UploadBackpressure: a request body the server does not read is
// not taken from the client beyond the stream's window and the upstream
// queue's mark (the window is returned only as the upstream takes the
// bytes), and arrives whole once the server reads.
func TestH2UploadBackpressure(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 32 << 20
		release := make(chan struct{})
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			<-release
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, n)
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		c.Timeout = 2 * time.Minute // 32 MiB under -race on a loaded machine
		var sent atomic.Int64
		req, _ := http.NewRequest("POST", base+"/", &countingReader{r: bytes.NewReader(make([]byte, size)), n: &sent})
		done := doAsync(c, req)
		s1, s2 := settled(sent.Load)
		if s2 != s1 || s2 > size/2 {
			t.Errorf("with the server not reading, the client sent %d then %d bytes of %d: want it held by flow control", s1, s2, size)
		}
		close(release)
		if got := <-done; got != fmt.Sprint("200 ", size) {
			t.Errorf("the server read %s bytes, want %d", got, size)
		}
	})
}

// settled waits (10 s at most) for a count to stop moving for 300ms,
// the kernel's buffers filling at their pace first, and returns its last
// two values (equal once it stopped).
func settled(load func() int64) (int64, int64) {
	a, b := int64(-1), load()
	for deadline := time.Now().Add(10 * time.Second); a != b && time.Now().Before(deadline); {
		a = b
		time.Sleep(300 * time.Millisecond)
		b = load()
	}
	return a, b
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestH2Defaults: h2c's knobs default to 100 streams and a 64 KiB window,
// and stay unset without h2c.
func TestH2Defaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("listeners: [{name: a, listen: \":1\", pool: app, mode: http, h2c: true}, {name: b, listen: \":2\", pool: app, mode: http}]\npools: [{name: app, servers: [\"127.0.0.1:1\"]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Listeners[0]; l.H2MaxConcurrentStreams != 100 || l.H2InitialWindow != 64<<10 {
		t.Errorf("h2c defaults: %d streams, window %d; want 100 and 65536", l.H2MaxConcurrentStreams, l.H2InitialWindow)
	}
	if l := cfg.Listeners[1]; l.H2C || l.H2MaxConcurrentStreams != 0 || l.H2InitialWindow != 0 {
		t.Errorf("without h2c: %+v", l)
	}
}

// TestH2ClientQueue: a client whose windows are wide open (2^31-1) but
// that does not read fills its queue in the proxy, not the proxy's
// memory: at the high-water mark the upstream is no longer read, and the
// whole body arrives once the client reads.
func TestH2ClientQueue(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 128 << 20
		chunk := bytes.Repeat([]byte("y"), 1<<20)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			for range size / len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c := dial(t, p)
		c.SetReadBuffer(64 << 10)
		enc := hpack.NewEncoder()
		block := enc.StartBlock(nil)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}} {
			block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
		}
		out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: h2.MaxWindow}})...)
		out = h2.AppendWindowUpdate(out, 0, h2.MaxWindow-65535)
		out = h2.AppendHeaders(out, 1, block, true, h2.MinMaxFrameSize)
		if _, err := c.Write(out); err != nil {
			t.Fatal(err)
		}
		in1, in2 := settled(func() int64 { return int64(serverTotals(p, u.addr).BytesIn) })
		if in2 != in1 || in2 > size/4 {
			t.Errorf("with the client not reading, the proxy read %d then %d bytes of the server's %d: want it paused at the client's queue", in1, in2, size)
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		var buf []byte
		tmp := make([]byte, 1<<20)
		data := 0
		for done := false; !done; {
			f, k, err := h2.ParseFrame(buf, h2.MaxMaxFrameSize)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				n, err := c.Read(tmp)
				if err != nil {
					t.Fatalf("after %d bytes of data: %v", data, err)
				}
				buf = append(buf, tmp[:n]...)
				continue
			}
			if f.Type == h2.FrameData && f.StreamID == 1 {
				data += len(f.Data)
				done = f.Flags.Has(h2.FlagEndStream)
			}
			buf = buf[k:]
			if len(buf) == 0 {
				buf = nil
			}
		}
		if data != size {
			t.Errorf("%d bytes of data, want %d", data, size)
		}
	})
}

// TestH2UpstreamCut: a server that closes in the middle of a response's
// body gets that stream reset by the proxy (counted), not ended as if
// whole; the connection's next stream is answered.
func TestH2UpstreamCut(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
			if req.URL.Path == "/cut" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
				return false
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return true
		}))
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		resp, err := c.Get(base + "/cut")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("a body cut by the server read whole (%q), want a stream error", body)
		}
		if n := p.Totals().Listeners[0].H2ResetsProxy; n != 1 {
			t.Errorf("%d streams reset by the proxy, want 1", n)
		}
		if _, body := get(t, c, base+"/ok"); body != "ok" {
			t.Errorf("next stream: %q", body)
		}
	})
}

// TestH2Forwarded: a stream's forwarding fields follow trusted_proxies
// as an HTTP/1.1 request's do: an untrusted client's are replaced, a
// trusted one's X-Forwarded-For is appended to and its X-Forwarded-Proto
// kept; cookie crumbs reach the server as one field.
func TestH2Forwarded(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s|%s|%s|%s|%q", r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"),
				r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Real-IP"), r.Header.Values("Cookie"))
		})
		for _, trusted := range []bool{false, true} {
			cfg := h2cConfig(b, u.addr)
			want := `127.0.0.1|http|a.example||["a=1; b=2"]`
			if trusted {
				cfg.Listeners[0].TrustedProxies = Prefixes{netip.MustParsePrefix("127.0.0.0/8")}
				want = `10.0.0.1, 10.0.0.2, 127.0.0.1|https|a.example|10.0.0.1|["a=1; b=2"]`
			}
			p := startProxy(t, cfg)
			c, base := h2Client(t, p)
			req, _ := http.NewRequest("GET", base+"/", nil)
			req.Host = "a.example"
			req.Header["X-Forwarded-For"] = []string{"10.0.0.1", "10.0.0.2"}
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("X-Real-IP", "10.0.0.1")
			req.Header["Cookie"] = []string{"a=1", "b=2"}
			if _, body := do(t, c, req); string(body) != want {
				t.Errorf("trusted %v: the server got %s, want %s", trusted, body, want)
			}
		}
	})
}
