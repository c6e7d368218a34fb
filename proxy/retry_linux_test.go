package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// retryUpstreams are a pool's two servers for the retry tests: bad
// (index 0, which round-robin takes first) fails as the test says, good
// answers "ok <method> <body's sum>", and each counts its requests.
type retryUpstreams struct {
	bad, good   string
	badN, goodN atomic.Int64
}

// retryPair starts the two servers; bad answers 503 (its body read).
func retryPair(t *testing.T) *retryUpstreams {
	ru := &retryUpstreams{}
	ru.bad = newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		ru.badN.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
		io.WriteString(w, "replica down")
	}).addr
	ru.good = newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		ru.goodN.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %s %s", r.Method, sum(body))
	}).addr
	return ru
}

// retryConfig is httpConfig over servers with retry on the listener.
func retryConfig(b engine.Backend, rc *RetryConfig, servers ...string) *Config {
	cfg := httpConfig(b, servers...)
	cfg.Listeners[0].Retry = rc
	return cfg
}

// send sends one request on c (br its reader) and returns the response's
// status and body.
func send(t *testing.T, c net.Conn, br *bufio.Reader, method string, body []byte) (int, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "%s / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", method, len(body))
	c.Write(body)
	resp, got := readResponseFrom(t, c, br, method)
	return resp.StatusCode, got
}

// TestRetryStatus: with retry on 503, a server answering 503 never
// reaches the client for a GET, HEAD, PUT or DELETE: each is sent again
// to the other server (its body whole: the sums match), the 503's head
// and body thrown away; a POST is not (503); a PUT whose body is past
// retry.buffer is not either. The metrics count the retries by reason,
// the access log has the retries, passive health's count sees each 503.
func TestRetryStatus(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ru := retryPair(t)
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := retryConfig(b, &RetryConfig{On: []string{"502-504"}, Buffer: new(int64(8 << 10))}, ru.bad, ru.good)
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
		cfg.Pools[0].Passive = &PassiveConfig{Fails: 100, Cooldown: Duration(time.Second), HTTPErrors: 1000}
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		small := randomBytes(1, 5000)
		retried := 0
		for i, m := range []string{"GET", "HEAD", "PUT", "DELETE", "GET", "PUT", "OPTIONS", "GET"} {
			var body []byte
			if m == "PUT" {
				body = small
			}
			before := ru.badN.Load()
			st, got := send(t, c, br, m, body)
			if m == "HEAD" {
				got = "ok HEAD " + sum(nil) // (no body)
			}
			if want := "ok " + m + " " + sum(body); st != 200 || got != want {
				t.Fatalf("%s %d: %d %q, want 200 %q", m, i, st, got, want)
			}
			retried += int(ru.badN.Load() - before)
		}
		if retried == 0 {
			t.Fatal("no request reached the server answering 503")
		}
		// A POST is not sent again: the 503 passes; a PUT past the buffer
		// neither.
		for _, m := range []string{"POST", "PUT"} {
			body := randomBytes(2, 9000)
			saw503 := false
			for range 2 { // (one of two goes to bad first)
				before := ru.badN.Load()
				st, got := send(t, c, br, m, body)
				switch {
				case ru.badN.Load() > before:
					saw503 = true
					if st != 503 || got != "replica down" {
						t.Errorf("%s of %d bytes to the 503 server: %d %q, want its 503", m, len(body), st, got)
					}
				case st != 200:
					t.Errorf("%s to the good server: %d %q", m, st, got)
				}
			}
			if !saw503 {
				t.Errorf("no %s reached the server answering 503", m)
			}
		}
		ms := scrape(t, p)
		if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]; got != float64(retried) {
			t.Errorf("retries_total{reason=status} %v, want %d", got, retried)
		}
		if got := ms[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
		if got := ms[`spindle_proxy_server_passive_consecutive_failures{pool="app",server="`+ru.bad+`",reason="http"}`]; got != float64(retried+2) {
			t.Errorf("the 503 server's failed exchanges in a row: %v, want %d (each try)", got, retried+2)
		}
		m := waitLine(t, path, "a retried GET's line", func(m map[string]any) bool { return m["method"] == "GET" && field(m, "retries") == "1" })
		checkFields(t, m, map[string]string{"status": "200", "server": ru.good, "term": "-"})
		waitLine(t, path, "the POST's line", func(m map[string]any) bool {
			return m["method"] == "POST" && field(m, "status") == "503" && field(m, "retries") == "0"
		})
	})
}

// TestRetryReset: a server that closes (or resets) its connection after
// reading a request, before any response byte: a GET goes to the other
// server (reason reset); without retry configured it gets 502, as
// before; with attempts 2 and two such servers the third answers.
func TestRetryReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var drops atomic.Int64
		dropper := func(reset bool) string {
			return newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
				drops.Add(1)
				if reset {
					c.(*net.TCPConn).SetLinger(0)
				}
				return false
			})).addr
		}
		closer, resetter := dropper(false), dropper(true)
		good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }).addr
		p := startProxy(t, httpConfig(b, closer, good))
		c := dial(t, p)
		if st, _ := send(t, c, bufio.NewReader(c), "GET", nil); st != 502 {
			t.Fatalf("GET to a server closing without retry: %d, want 502", st)
		}
		p = startProxy(t, retryConfig(b, &RetryConfig{On: []string{"reset"}, Attempts: 2}, closer, resetter, good))
		c = dial(t, p)
		br := bufio.NewReader(c)
		before := drops.Load()
		for i := range 3 {
			if st, got := send(t, c, br, "GET", nil); st != 200 || got != "ok" {
				t.Fatalf("GET %d: %d %q, want 200 ok", i, st, got)
			}
		}
		n := drops.Load() - before
		if n < 3 {
			t.Errorf("%d requests dropped, want 3 at least (the first GET twice)", n)
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="reset"}`]; got != float64(n) {
			t.Errorf("retries_total{reason=reset} %v, want %d", got, n)
		}
	})
}

// TestRetryChunked: a chunked PUT is kept by its bytes received and
// sent again whole; one past the buffer is not retried.
func TestRetryChunked(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ru := retryPair(t)
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}, Buffer: new(int64(8 << 10))}, ru.bad, ru.good))
		c := dial(t, p)
		br := bufio.NewReader(c)
		for _, size := range []int{6000, 6000, 20000, 20000} {
			body := randomBytes(uint64(size), size)
			before := ru.badN.Load()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
			for part := range slices.Chunk(body, 1000) {
				fmt.Fprintf(c, "%x\r\n%s\r\n", len(part), part)
			}
			io.WriteString(c, "0\r\n\r\n")
			resp, got := readResponseFrom(t, c, br, "PUT")
			toBad := ru.badN.Load() > before
			switch {
			case size < 8<<10 && (resp.StatusCode != 200 || got != "ok PUT "+sum(body)):
				t.Errorf("chunked PUT of %d (to bad first: %v): %d %q", size, toBad, resp.StatusCode, got)
			case size > 8<<10 && toBad && resp.StatusCode != 503:
				t.Errorf("chunked PUT of %d past the buffer to the 503 server: %d, want 503", size, resp.StatusCode)
			}
		}
	})
}

// TestRetryBudget: retries in flight are bounded by the budget (0 %
// here: the floor, 3): of four requests answered 503 whose retries wait
// at the other server, the fourth's 503 goes to the client.
func TestRetryBudget(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		var goodN atomic.Int64
		bad := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }).addr
		good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			goodN.Add(1)
			<-release
			io.WriteString(w, "ok")
		}).addr
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}, Budget: new(0)}, bad, good))
		var once sync.Once
		defer once.Do(func() { close(release) })
		const n = 8 // four to bad first (round-robin), four to good
		cs := make([]net.Conn, n)
		for i := range cs {
			cs[i] = dial(t, p)
			cs[i].SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(cs[i], "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			// (one at a time: the order decides the servers)
			waitFor(t, "the request's arrival", func() bool {
				ms := scrape(t, p)
				return goodN.Load()+int64(ms[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`]) >= int64(i+1)
			})
		}
		st, _ := readResponse(t, cs[6], "GET")
		if st.StatusCode != 503 {
			t.Errorf("the fourth retry's request: %d, want the 503", st.StatusCode)
		}
		ms := scrape(t, p)
		if got := ms[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`]; got != 1 {
			t.Errorf("retry_budget_exceeded_total %v, want 1", got)
		}
		if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]; got != 3 {
			t.Errorf("retries_total %v, want 3", got)
		}
		once.Do(func() { close(release) })
		for i, c := range cs {
			if i == 6 {
				continue
			}
			if resp, got := readResponse(t, c, "GET"); resp.StatusCode != 200 || got != "ok" {
				t.Errorf("request %d: %d %q", i, resp.StatusCode, got)
			}
		}
	})
}

// TestRetryAllocs: with a retry policy and no failure the request path
// allocates nothing, as without one (TestHTTPAllocs); nor does a retried
// request (with a body kept, too): a 503 that ended with its head goes
// back to the idle pool with its connection, so that the next
// request's first try reuses it.
//
// No GC cycle runs while it counts: one that begins during a measured
// round (other goroutines' garbage, a full -race run) has the runtime
// allocate a few objects of its own as the round's goroutines go on,
// which the count (the process's) took for the request path's: a
// runtime.GC() in the midst of the 400 retried requests' round gave 0 to
// 5, 7 once in a full run, and every round without one 0. An allocation
// on the request path is counted as before.
func TestRetryAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		defer debug.SetGCPercent(debug.SetGCPercent(-1)) // (waits for a cycle under way)
		httpAllocs(t, b, func(cfg *Config) {
			cfg.Listeners[0].Retry = &RetryConfig{On: []string{"reset", "503"}}
		})
		resp503 := []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
		bad := newUpstream(t, func(c net.Conn) {
			buf := make([]byte, 8192)
			n := 0
			for {
				m, err := c.Read(buf[n:])
				if err != nil {
					return
				}
				n += m
				// (A body "hi" is read as the next head's start.)
				for i := bytes.Index(buf[:n], []byte("\r\n\r\n")); i >= 0; i = bytes.Index(buf[:n], []byte("\r\n\r\n")) {
					if _, err := c.Write(resp503); err != nil {
						return
					}
					n = copy(buf, buf[i+4:n])
				}
			}
		})
		good := newUpstream(t, rawHTTPServer)
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}}, bad.addr, good.addr))
		c := dial(t, p)
		c.SetDeadline(time.Now().Add(time.Minute))
		reqs := [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")}
		buf := make([]byte, 4096)
		per := 400
		var err error
		round := func() {
			for i := range per {
				if _, err = c.Write(reqs[i/2%2]); err != nil {
					return
				}
				n := 0
				for !bytes.HasSuffix(buf[:n], []byte("\r\n\r\nok")) {
					m, rerr := c.Read(buf[n:])
					if err = rerr; err != nil {
						return
					}
					n += m
				}
			}
		}
		allocs := allocsOfRound(round)
		if err != nil {
			t.Fatal(err)
		}
		per = 0
		base := allocsOfRound(round)
		retried := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]
		t.Logf("%d allocations for 400 requests (half retried: %v in all), %d without requests", allocs, retried, base)
		if extra := int64(allocs) - int64(base); extra*100 > 400 {
			t.Errorf("%d allocations for 400 requests, 200 of them retried, beyond the round's own %d, want 0 (under 0.01 allowed for the runtime)", extra, base)
		}
		if retried < 800 {
			t.Errorf("%v requests retried, want 800 (half of 4 rounds of 400)", retried)
		}
		if n := bad.accepted.Load(); n != 1 {
			t.Errorf("the 503 server accepted %d connections, want 1 (kept over the 503s)", n)
		}

		// To an h2c pool (retry_h2up_linux_test.go): HTTP/1.1 clients'
		// GETs and PUTs, and HTTP/2 clients' GETs, half of them retried
		// after a 503, allocate nothing either.
		var first atomic.Bool
		bad2 := newUpstream(t, func(c net.Conn) { serveH2(c, new(unavailableApp)) })
		good2 := newUpstream(t, rawH2Up("", &first))
		cfg := h2cPoolConfig(b, bad2.addr, good2.addr)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Budget: new(100)} // (allocConns clients at once)
		p = startProxy(t, cfg)
		exchangeAllocs(t, p, "requests to an h2c pool, half retried", func(k int) []byte { return reqs[k/2%2] }, func(c net.Conn, _ int, buf []byte) error {
			return readUntil(c, buf, []byte("\r\n\r\nok"))
		})
		h1Retried := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]
		h2AllocsZero(t, p, allocConns)
		h2Retried := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`] - h1Retried
		t.Logf("to an h2c pool: %v HTTP/1.1 requests retried, %v HTTP/2 streams", h1Retried, h2Retried)
		if h1Retried == 0 || h2Retried == 0 {
			t.Errorf("%v HTTP/1.1 requests and %v HTTP/2 streams to the h2c pool retried, want some of each", h1Retried, h2Retried)
		}
	})
}

// TestRetryH2: an HTTP/2 client's streams to an HTTP/1.1 pool are
// retried as HTTP/1.1 requests are: a GET, a PUT with content-length
// and one without (chunked upstream) whose body is kept for it, on 503
// and on a reset; a POST is not.
func TestRetryH2(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ru := retryPair(t)
		var drops atomic.Int64
		dropper := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
			drops.Add(1)
			return false
		})).addr
		cfg := h2cConfig(b, ru.bad, ru.good)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"reset", "503"}}
		cfg.Listeners[0].Routes = []RouteConfig{{Name: "drop", PathPrefix: "/drop/", Pool: "drop"}}
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "drop", Servers: Servers(dropper, ru.good)})
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		body := randomBytes(3, 20000)
		retried := 0
		for i := range 8 {
			for _, path := range []string{"/", "/drop/"} {
				before := ru.badN.Load() + drops.Load()
				var req *http.Request
				switch i % 3 {
				case 0:
					req, _ = http.NewRequest("GET", base+path, nil)
				case 1:
					req, _ = http.NewRequest("PUT", base+path, bytes.NewReader(body))
				default: // (no content-length: chunked upstream)
					req, _ = http.NewRequest("PUT", base+path, io.MultiReader(bytes.NewReader(body[:7000]), bytes.NewReader(body[7000:])))
				}
				resp, got := do(t, c, req)
				var sent []byte
				if req.Method == "PUT" {
					sent = body
				}
				if want := "ok " + req.Method + " " + sum(sent); resp.StatusCode != 200 || string(got) != want {
					t.Fatalf("%s %s %d: %d %q, want 200 %q", req.Method, path, i, resp.StatusCode, got, want)
				}
				retried += int(ru.badN.Load() + drops.Load() - before)
			}
		}
		ms := scrape(t, p)
		if n := ms[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`] + ms[`spindle_proxy_pool_retries_total{pool="drop",reason="reset"}`]; n != float64(retried) || retried < 8 {
			t.Errorf("%v retries counted, %d made (want 8 at least)", n, retried)
		}
		if got := ms[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
		saw503 := false
		for range 2 {
			before := ru.badN.Load()
			resp, got := do(t, c, must(http.NewRequest("POST", base+"/", bytes.NewReader(body[:10]))))
			if ru.badN.Load() > before {
				saw503 = true
				if resp.StatusCode != 503 {
					t.Errorf("POST to the 503 server: %d %q, want its 503", resp.StatusCode, got)
				}
			}
		}
		if !saw503 {
			t.Error("no POST reached the server answering 503")
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRetryTimeout: per_try_timeout bounds a try's wait for its
// response head: with response-timeout in on a server that answers
// nothing costs the client that timeout and the request goes to the
// other server (HTTP/1.1 and HTTP/2 clients); without it the client gets
// 504 at that timeout, not at response_timeout.
func TestRetryTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var hung atomic.Int64
		release := make(chan struct{})
		defer close(release)
		silent := newUpstream(t, func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			hung.Add(1)
			<-release
		}).addr
		good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }).addr
		const perTry = 300 * time.Millisecond
		for _, on := range []string{RetryResponseTimeout, "503"} {
			cfg := h2cConfig(b, silent, good)
			cfg.Listeners[0].Retry = &RetryConfig{On: []string{on}, PerTryTimeout: Duration(perTry)}
			p := startProxy(t, cfg)
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, c := range []*http.Client{h1c, h2c} {
				for range 2 { // (one of two goes to the silent server first)
					before := hung.Load()
					start := time.Now()
					resp, got := get(t, c, base+"/")
					took := time.Since(start)
					if hung.Load() == before {
						if resp.StatusCode != 200 {
							t.Errorf("on %s, to the good server: %d", on, resp.StatusCode)
						}
						continue
					}
					want := 200
					if on != RetryResponseTimeout {
						want = 504
					}
					if resp.StatusCode != want || took < perTry || took > 10*perTry {
						t.Errorf("on %s, %s to the silent server first: %d %q after %v, want %d after %v", on, resp.Proto, resp.StatusCode, got, took, want, perTry)
					}
				}
			}
			if on == RetryResponseTimeout {
				if got := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="response_timeout"}`]; got != 2 {
					t.Errorf("retries_total{reason=response_timeout} %v, want 2", got)
				}
			}
		}
	})
}

// TestRetryReload: a reload that removes the retry policy leaves the
// request in flight under the policy it began with (its 503 retried),
// and the requests after it under none (a 503 passes), for an HTTP/1.1
// and an HTTP/2 client.
func TestRetryReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN atomic.Int64
		hold := make(chan struct{}, 4)
		bad := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			badN.Add(1)
			<-hold
			w.WriteHeader(503)
		}).addr
		good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }).addr
		mk := func(retry bool) *Config {
			cfg := h2cConfig(b, bad, good)
			if retry {
				cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
			}
			return cfg
		}
		p := startProxy(t, mk(true))
		h1c, base := client(t, p)
		h2c, _ := h2Client(t, p)
		for _, c := range []*http.Client{h1c, h2c} {
			mustReload(t, p, mk(true))
			// The first request of a pool's round goes to bad: wait
			// there while the reload removes the policy.
			for {
				before := badN.Load()
				ch := getAsync(c, base+"/")
				waitFor(t, "the request at a server", func() bool {
					if badN.Load() > before {
						return true
					}
					select {
					case <-ch: // (answered by good)
						return true
					default:
						return false
					}
				})
				if badN.Load() == before {
					continue
				}
				mustReload(t, p, mk(false))
				hold <- struct{}{}
				if got := <-ch; got != "200 ok" {
					t.Errorf("the request in flight over the reload: %q, want 200 ok (retried under its policy)", got)
				}
				break
			}
			saw503 := false
			for range 2 {
				before := badN.Load()
				hold <- struct{}{}
				resp, _ := get(t, c, base+"/")
				if badN.Load() > before {
					saw503 = true
					if resp.StatusCode != 503 {
						t.Errorf("after the reload, to the 503 server: %d, want 503 (no retry)", resp.StatusCode)
					}
				} else {
					<-hold
				}
			}
			if !saw503 {
				t.Error("no request after the reload reached the 503 server")
			}
		}
	})
}

// TestRetryHeldBuffers: a body that comes in many small reads is kept
// for a retry in maxHeldBufs received buffers at most: one trickled in
// more is not retried (the 503 passes), and a buffered body's bytes are
// counted while held. Each part is sent once a server has read the one
// before, so that the proxy reads each on its own: parts sent 5 ms apart
// came together under load (CI, load 11), fewer buffers than parts, and a
// body of 32 parts was retried.
func TestRetryHeldBuffers(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN atomic.Int64
		got := make(chan struct{}, 1)
		server := func(status int) string {
			return newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if status == 503 {
					badN.Add(1)
				}
				buf := make([]byte, 64)
				for {
					n, err := r.Body.Read(buf)
					if n > 0 {
						select {
						case got <- struct{}{}:
						default:
						}
					}
					if err != nil {
						break
					}
				}
				w.WriteHeader(status)
			}).addr
		}
		bad, good := server(503), server(200)
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}}, bad, good))
		c := dial(t, p)
		c.SetNoDelay(true)
		br := bufio.NewReader(c)
		for _, parts := range []int{4, 4, 2 * maxHeldBufs, 2 * maxHeldBufs} {
			before := badN.Load()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", parts*10)
			for i := range parts {
				io.WriteString(c, "0123456789")
				if i == parts-1 {
					break
				}
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					t.Fatalf("PUT in %d reads: part %d did not reach a server in 10 s", parts, i+1)
				}
			}
			resp, _ := readResponseFrom(t, c, br, "PUT")
			select {
			case <-got: // the last part's
			default:
			}
			if badN.Load() == before {
				continue
			}
			if want := map[bool]int{true: 200, false: 503}[parts < maxHeldBufs]; resp.StatusCode != want {
				t.Errorf("PUT in %d reads to the 503 server first: %d, want %d", parts, resp.StatusCode, want)
			}
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
	})
}
