package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// The unified retry decision (retry.go: decideStatus, retryFailed over a
// retrier), reviewed (eighteenth session).

// TestRetryStatusReuse: a retried 503 that ended with its head (its
// short body in the same read, the request gone whole) gives its
// connection back to the idle pool, from an HTTP/2 client's stream as
// from an HTTP/1.1 client: the 503 server accepts one connection for
// all the GETs and PUTs it answers, and each request gets the other
// server's 200 with its body whole. The metric counts the retries, and
// the access log has one for each request the 503 server saw.
func TestRetryStatusReuse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
			t.Run(kind, func(t *testing.T) {
				var badN atomic.Int64
				bad := newHTTPUpstream(t, unavailable(&badN))
				good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					fmt.Fprintf(w, "ok %s %s", r.Method, sum(body))
				})
				cfg := h2cConfig(b, bad.addr, good.addr)
				cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
				path := filepath.Join(t.TempDir(), "access.log")
				cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
				p := startProxy(t, cfg)
				cs, base := h2RetryClients(t, p)
				body := randomBytes(18, 3000)
				for i := range 8 {
					req := mustReq(t, "GET", base+"/", nil)
					var sent []byte
					if i%4 >= 2 {
						sent = body
						req = mustReq(t, "PUT", base+"/", bytes.NewReader(body))
					}
					st, got, err := tryReq(cs[kind], req)
					if want := "ok " + req.Method + " " + sum(sent); st != 200 || got != want || err != nil {
						t.Fatalf("%s %d: %d %q %v, want 200 %q", req.Method, i, st, got, err, want)
					}
				}
				if n := badN.Load(); n < 4 {
					t.Errorf("the 503 server got %d requests, want 4 at least", n)
				}
				if n := bad.accepted.Load(); n != 1 {
					t.Errorf("the 503 server accepted %d connections, want 1 (kept over the 503s)", n)
				}
				if got := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]; got != float64(badN.Load()) {
					t.Errorf("retries_total{reason=status} %v, want %d", got, badN.Load())
				}
				var lines []map[string]any
				waitFor(t, "the access log's 8 lines", func() bool { lines = logLines(t, path); return len(lines) == 8 })
				retried := 0
				for _, m := range lines {
					switch field(m, "retries") {
					case "1":
						retried++
						checkFields(t, m, map[string]string{"status": "200", "server": good.addr})
					case "0":
					default:
						t.Errorf("an access log line with retries %s: %v", field(m, "retries"), m)
					}
				}
				if int64(retried) != badN.Load() {
					t.Errorf("%d access log lines with a retry, want %d", retried, badN.Load())
				}
			})
		}
	})
}

// TestRetryInterimThenStatus: a 503 that follows a 103 is retried only
// where nothing of the response reached the client: an HTTP/1.0
// client's request (the 103 is not for it: dropped) goes to the other
// server, whose 200 it gets; an HTTP/1.1 client (the 103 passed on) and
// an HTTP/2 client (its interim HEADERS) get the 503, the other server
// seeing nothing; to an HTTP/1.1 pool and to an h2c pool alike.
func TestRetryInterimThenStatus(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			for _, kind := range []string{"HTTP/1.0", "HTTP/1.1", "HTTP/2"} {
				name := kind + " to HTTP/1.1 pool"
				if h2c {
					name = kind + " to h2c pool"
				}
				t.Run(name, func(t *testing.T) { retryInterim(t, b, h2c, kind) })
			}
		}
	})
}

func retryInterim(t *testing.T, b engine.Backend, h2c bool, kind string) {
	var badN, goodN atomic.Int64
	bad := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(103)
		w.Header().Del("Link")
		unavailable(&badN)(w, r)
	})
	good := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		goodN.Add(1)
		io.WriteString(w, "ok")
	})
	cfg := retryPoolConfig(t, b, h2c, bad, good)
	cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
	p := startProxy(t, cfg)
	// (The first request of the pool's round goes to the 503 server.)
	var st int
	var got string
	if kind == "HTTP/1.0" {
		c := dial(t, p)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		st, got = resp.StatusCode, string(body)
	} else {
		cs, base := h2RetryClients(t, p)
		var err error
		if st, got, err = tryReq(cs[kind], mustReq(t, "GET", base+"/", nil)); err != nil {
			t.Fatal(err)
		}
	}
	want, wantGood := 503, int64(0)
	if kind == "HTTP/1.0" {
		want, wantGood = 200, 1
	}
	if st != want || badN.Load() != 1 || goodN.Load() != wantGood {
		t.Errorf("GET: %d %q, the 503 server saw %d, the other %d; want %d, 1, %d", st, got, badN.Load(), goodN.Load(), want, wantGood)
	}
	if got := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]; got != float64(wantGood) {
		t.Errorf("retries_total{reason=status} %v, want %d", got, wantGood)
	}
}

// TestRetryPassive: a retried try counts with passive health as the
// try's end says, for each kind of request: a reset (the HTTP/1.1
// server's connection closed, the h2c server's RST_STREAM) and a
// per_try_timeout with the request gone whole count a failed exchange of
// the server that failed; a stream the h2c server did not process
// (REFUSED_STREAM once the POST's body went, retried under
// refused-stream) counts none. Of four requests one at a time, the
// first and third go to the failing server first.
//
// per_try_timeout bounds every try's wait for its head, the answering
// server's too: at 250 ms a head held up under load (a CPU hog, -race)
// ended a try at the answering server, retried to the hanging one, and
// the GET got a 504. It is 1 s, and the hang cases, which wait for two
// tries' ends each, run in parallel.
func TestRetryPassive(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
				modes := []string{"reset", "hang"}
				name := kind + " to HTTP/1.1 pool"
				if h2c {
					modes = append(modes, "refuse")
					name = kind + " to h2c pool"
				}
				for _, mode := range modes {
					t.Run(name+" "+mode, func(t *testing.T) { retryPassive(t, b, h2c, kind, mode) })
				}
			}
		}
	})
}

func retryPassive(t *testing.T, b engine.Backend, h2c bool, kind, mode string) {
	if mode == "hang" {
		t.Parallel()
	}
	var ru *retryUpstreams
	var cfg *Config
	if h2c {
		ru = h2RetryPair(t, mode)
		cfg = h2cPoolConfig(b, ru.bad, ru.good)
	} else {
		ru = &retryUpstreams{}
		ru.bad = newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			ru.badN.Add(1)
			if mode == "reset" {
				panic(http.ErrAbortHandler) // (the connection closed)
			}
			<-r.Context().Done()
		}).addr
		ru.good = newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "ok %s %s", r.Method, sum(body))
		}).addr
		cfg = h2cConfig(b, ru.bad, ru.good)
	}
	cfg.Pools[0].Passive = &PassiveConfig{Fails: 100, Cooldown: Duration(time.Second), HTTPErrors: 1000}
	rc := &RetryConfig{On: []string{RetryReset}}
	method, reason, fails := "GET", "reset", 2
	switch mode {
	case "hang":
		rc.On, rc.PerTryTimeout, reason = []string{RetryResponseTimeout}, Duration(time.Second), "response_timeout"
	case "refuse":
		rc.On, method, reason, fails = []string{RetryRefusedStream}, "POST", "refused_stream", 0
	}
	cfg.Listeners[0].Retry = rc
	p := startProxy(t, cfg)
	cs, base := h2RetryClients(t, p)
	var body []byte
	if method == "POST" {
		body = randomBytes(4, 1000)
	}
	for i := range 4 {
		st, got, err := tryReq(cs[kind], mustReq(t, method, base+"/", bytes.NewReader(body)))
		if want := "ok " + method + " " + sum(body); st != 200 || got != want || err != nil {
			t.Fatalf("%s %d: %d %q %v, want 200 %q", method, i, st, got, err, want)
		}
	}
	ms := scrape(t, p)
	if got := ru.badN.Load(); got != 2 {
		t.Errorf("the failing server got %d requests, want 2", got)
	}
	if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="`+reason+`"}`]; got != 2 {
		t.Errorf("retries_total{reason=%s} %v, want 2", reason, got)
	}
	if got := ms[`spindle_proxy_server_passive_consecutive_failures{pool="app",server="`+ru.bad+`",reason="http"}`]; got != float64(fails) {
		t.Errorf("the failing server's failed exchanges in a row: %v, want %d", got, fails)
	}
}

// retryPoolConfig is h2cConfig over two servers running bad and good
// (round-robin takes bad first), HTTP/1.1 servers or, where h2c, an h2c
// pool's.
func retryPoolConfig(t *testing.T, b engine.Backend, h2c bool, bad, good http.Handler) *Config {
	if h2c {
		return h2cPoolConfig(b, newH2CUp(t, bad, nil).addr, newH2CUp(t, good, nil).addr)
	}
	return h2cConfig(b, newHTTPUpstream(t, bad.ServeHTTP).addr, newHTTPUpstream(t, good.ServeHTTP).addr)
}
