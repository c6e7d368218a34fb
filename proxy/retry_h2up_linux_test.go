package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// Retries to h2c pools (retry.go): an HTTP/1.1 client's requests
// (h2up_h1.go) and an HTTP/2 client's streams (h2up_stream.go).

// h2RetryPair starts an h2c pool's two servers for the retry tests: bad
// (index 0, which round-robin takes first) fails each request as mode
// says once it read the request's body, good answers "ok <method>
// <body's sum>"; each counts its requests. Modes: "503" answers 503;
// "reset" resets the stream (RST_STREAM INTERNAL_ERROR) before a
// response byte; "close" closes the connection under it; "hang" answers
// nothing until the proxy resets the stream; "refuse" refuses it
// (RST_STREAM REFUSED_STREAM: not processed); "head-reset" sends a 200
// head and a body's first bytes, then resets; "1xx-reset" sends a 103,
// then resets; "connect" is an address nobody listens on.
func h2RetryPair(t *testing.T, mode string) *retryUpstreams {
	t.Helper()
	ru := &retryUpstreams{}
	ru.good = newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ru.goodN.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %s %s", r.Method, sum(body))
	}), nil).addr
	switch mode {
	case "refuse":
		ru.bad = newUpstream(t, func(c net.Conn) { serveH2(c, &refuseAfterBody{n: &ru.badN}) }).addr
		return ru
	case "connect":
		ru.bad = deadAddr(t)
		return ru
	}
	ru.bad = newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode == "503" {
			unavailable(&ru.badN)(w, r)
			return
		}
		ru.badN.Add(1)
		io.Copy(io.Discard, r.Body)
		switch mode {
		case "reset":
			panic(http.ErrAbortHandler) // (RST_STREAM INTERNAL_ERROR)
		case "close":
			r.Context().Value(connKey{}).(net.Conn).Close()
		case "hang":
			<-r.Context().Done()
		case "head-reset":
			w.WriteHeader(200)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case "1xx-reset":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(103)
			panic(http.ErrAbortHandler)
		}
	}), nil).addr
	return ru
}

// unavailable answers 503 "replica down" once it read the request's
// body, counting the requests in n.
func unavailable(n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
		io.WriteString(w, "replica down")
	}
}

// refuseAfterBody refuses every stream (REFUSED_STREAM) once its request
// ended, counting them.
type refuseAfterBody struct{ n *atomic.Int64 }

func (a *refuseAfterBody) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	a.n.Add(1)
	if end {
		s.Reset(id, h2.RefusedStream)
	}
}

func (a *refuseAfterBody) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		s.Reset(id, h2.RefusedStream)
	}
}

func (a *refuseAfterBody) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) {
	s.Reset(id, h2.RefusedStream)
}
func (a *refuseAfterBody) OnReset(*h2.Server, uint32, h2.ErrCode)  {}
func (a *refuseAfterBody) OnWritable(*h2.Server, uint32)           {}
func (a *refuseAfterBody) OnGoAway(*h2.Server, h2.ErrCode, []byte) {}

// tryReq sends req on c and returns its status and body, or the error
// that cut them.
func tryReq(c *http.Client, req *http.Request) (int, string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), err
}

// reqResult is tryReq's answer, from the goroutine goReq starts.
type reqResult struct {
	status int
	body   string
	err    error
}

// goReq runs tryReq(c, req) on a goroutine of its own and returns the
// channel that gets its answer.
func goReq(c *http.Client, req *http.Request) <-chan reqResult {
	ch := make(chan reqResult, 1)
	go func() {
		status, body, err := tryReq(c, req)
		ch <- reqResult{status, body, err}
	}()
	return ch
}

// h2RetryClients returns an HTTP/1.1 and an HTTP/2 client of p's
// listener web, by name, and its base URL.
func h2RetryClients(t *testing.T, p *Proxy) (map[string]*http.Client, string) {
	h1c, base := client(t, p)
	h2c, _ := h2Client(t, p)
	return map[string]*http.Client{"HTTP/1.1": h1c, "HTTP/2": h2c}, base
}

// TestRetryH2Up: requests to an h2c pool whose server fails them are
// sent again to the other server, from HTTP/1.1 clients and HTTP/2
// clients alike: on a 503, a stream reset, the connection's close, no
// response head within per_try_timeout, and a connect failure, a GET and
// a PUT whose body is kept (the sums match); a POST answered 503 is not
// retried. A stream the server refused once its body went (REFUSED_STREAM:
// not processed) is sent again under refused-stream, a POST too. The
// metric counts the retries by reason, the access log has them, and no
// body is held after. per_try_timeout bounds the answering server's try
// too: it is 1 s (at 300 ms a head held up under load ended one), and
// the modes run in parallel.
func TestRetryH2Up(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		body := randomBytes(7, 20000)
		for _, tc := range []struct {
			mode, reason string
			methods      []string
		}{
			{"503", "status", []string{"GET", "PUT"}},
			{"reset", "reset", []string{"GET", "PUT"}},
			{"close", "reset", []string{"GET", "PUT"}},
			{"hang", "response_timeout", []string{"GET", "PUT"}},
			{"connect", "", []string{"GET", "PUT"}},
			{"refuse", "refused_stream", []string{"PUT", "POST"}},
		} {
			t.Run(tc.mode, func(t *testing.T) {
				t.Parallel()
				ru := h2RetryPair(t, tc.mode)
				cfg := h2cPoolConfig(b, ru.bad, ru.good)
				cfg.Listeners[0].Retry = &RetryConfig{On: []string{"reset", "503", RetryResponseTimeout, "refused-stream"}, PerTryTimeout: Duration(time.Second)}
				path := filepath.Join(t.TempDir(), "access.log")
				cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
				p := startProxy(t, cfg)
				cs, base := h2RetryClients(t, p)
				retried := 0
				for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
					for _, m := range tc.methods {
						for range 2 { // (one of two goes to bad first)
							var sent []byte
							if m != "GET" {
								sent = body
							}
							before := ru.badN.Load()
							st, got, err := tryReq(cs[kind], mustReq(t, m, base+"/", bytes.NewReader(sent)))
							if want := "ok " + m + " " + sum(sent); err != nil || st != 200 || got != want {
								t.Fatalf("%s: %s %s: %d %q %v, want 200 %q", tc.mode, kind, m, st, got, err, want)
							}
							retried += int(ru.badN.Load() - before)
						}
					}
				}
				ms := scrape(t, p)
				if tc.mode == "connect" {
					if st := serverTotals(p, ru.bad); st.Failures == 0 {
						t.Errorf("connect: no connect failure to %s counted", ru.bad)
					}
				} else if retried == 0 {
					t.Errorf("%s: no request reached the failing server", tc.mode)
				}
				for _, r := range retryReasonNames {
					want := 0
					if r == tc.reason {
						want = retried
					}
					if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="`+r+`"}`]; got != float64(want) {
						t.Errorf("%s: retries_total{reason=%s} %v, want %d", tc.mode, r, got, want)
					}
				}
				if got := ms[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
					t.Errorf("%s: retry_buffered_bytes %v after the requests, want 0", tc.mode, got)
				}
				for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
					if tc.mode == "connect" {
						break // (a failover, not a retry)
					}
					m := waitLine(t, path, tc.mode+": a retried "+proto+" PUT's line", func(m map[string]any) bool {
						return m["method"] == "PUT" && m["proto"] == proto && field(m, "retries") == "1"
					})
					checkFields(t, m, map[string]string{"status": "200", "server": ru.good, "term": "-"})
				}
				if tc.mode != "503" {
					return
				}
				for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
					saw503 := false
					for range 2 {
						before := ru.badN.Load()
						st, got, err := tryReq(cs[kind], mustReq(t, "POST", base+"/", bytes.NewReader(body)))
						if ru.badN.Load() > before {
							saw503 = true
							if st != 503 || got != "replica down" || err != nil {
								t.Errorf("%s POST to the 503 server: %d %q %v, want its 503", kind, st, got, err)
							}
						}
					}
					if !saw503 {
						t.Errorf("no %s POST reached the 503 server", kind)
					}
				}
			})
		}
	})
}

// TestRetryH2UpRefusedNeedsPolicy: a stream an h2c server refused once
// its body went is sent again only under refused-stream (or, for a
// method sent again, reset): a POST without it gets 502 (HTTP/1.1) or its
// stream reset (HTTP/2), and nothing is retried.
func TestRetryH2UpRefusedNeedsPolicy(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ru := h2RetryPair(t, "refuse")
		cfg := h2cPoolConfig(b, ru.bad, ru.good)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"reset", "503"}}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		body := randomBytes(8, 5000)
		for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
			refused := false
			for range 2 {
				before, goodBefore := ru.badN.Load(), ru.goodN.Load()
				st, got, err := tryReq(cs[kind], mustReq(t, "POST", base+"/", bytes.NewReader(body)))
				if ru.badN.Load() == before {
					continue
				}
				refused = true
				if ru.goodN.Load() != goodBefore || st == 200 {
					t.Errorf("%s POST refused after its body, without refused-stream: %d %q %v, sent again", kind, st, got, err)
				}
			}
			if !refused {
				t.Errorf("no %s POST reached the refusing server", kind)
			}
			// A PUT is sent again under reset.
			for range 2 {
				if st, got, err := tryReq(cs[kind], mustReq(t, "PUT", base+"/", bytes.NewReader(body))); st != 200 || got != "ok PUT "+sum(body) {
					t.Errorf("%s PUT: %d %q %v, want 200", kind, st, got, err)
				}
			}
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retries_total{pool="app",reason="refused_stream"}`]; got != 2 {
			t.Errorf("retries_total{reason=refused_stream} %v, want 2 (the PUTs)", got)
		}
	})
}

// TestRetryH2UpAfterResponse: once a response byte went to the client (a
// 1xx, or the head and a body's first bytes) a reset is not retried: the
// HTTP/1.1 client gets 502 after the 103 or its body cut, the HTTP/2
// client its stream reset; the other server sees nothing of it.
func TestRetryH2UpAfterResponse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, mode := range []string{"head-reset", "1xx-reset"} {
			ru := h2RetryPair(t, mode)
			cfg := h2cPoolConfig(b, ru.bad, ru.good)
			cfg.Listeners[0].Retry = &RetryConfig{On: []string{"reset", "5xx", "refused-stream"}}
			p := startProxy(t, cfg)
			cs, base := h2RetryClients(t, p)
			for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
				hit := false
				for range 2 {
					before, goodBefore := ru.badN.Load(), ru.goodN.Load()
					st, got, err := tryReq(cs[kind], mustReq(t, "GET", base+"/", nil))
					if ru.badN.Load() == before {
						if st != 200 {
							t.Errorf("%s: %s GET to the good server: %d %v", mode, kind, st, err)
						}
						continue
					}
					hit = true
					if ru.goodN.Load() != goodBefore || err == nil && st == 200 && got == "ok GET "+sum(nil) {
						t.Errorf("%s: %s GET: %d %q %v: sent again after a response byte went", mode, kind, st, got, err)
					}
					if mode == "1xx-reset" && kind == "HTTP/1.1" && st != 502 {
						t.Errorf("%s: %s GET: %d %v, want 502", mode, kind, st, err)
					}
				}
				if !hit {
					t.Errorf("%s: no %s GET reached the failing server", mode, kind)
				}
			}
			ms := scrape(t, p)
			for _, r := range retryReasonNames {
				if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="`+r+`"}`]; got != 0 {
					t.Errorf("%s: retries_total{reason=%s} %v, want 0", mode, r, got)
				}
			}
		}
	})
}

// TestRetryH2UpCap: the copies of request bodies kept for retries (an
// HTTP/2 client's, to an HTTP/1.1 or an h2c pool; an HTTP/1.1 client's to
// an h2c pool) hold maxLoopKept bytes at most per pool and loop, whatever
// retry.buffer allows: a PUT whose body passes it is not sent again (the
// 503 passes), one of half of it is; nothing is held after.
func TestRetryH2UpCap(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		small, big := randomBytes(9, maxLoopKept/2), randomBytes(10, maxLoopKept+4096)
		for _, pool := range []string{"http1", ProtocolH2C} {
			var ru *retryUpstreams
			var cfg *Config
			if pool == ProtocolH2C {
				ru = h2RetryPair(t, "503")
				cfg = h2cPoolConfig(b, ru.bad, ru.good)
			} else {
				ru = retryPair(t)
				cfg = h2cConfig(b, ru.bad, ru.good)
			}
			cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Buffer: new(int64(MaxRetryBuffer))}
			p := startProxy(t, cfg)
			cs, base := h2RetryClients(t, p)
			for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
				if pool != ProtocolH2C && kind == "HTTP/1.1" {
					continue // (received buffers, not copies: TestRetryHeldBuffers)
				}
				for _, body := range [][]byte{small, big} {
					hit := false
					for range 2 {
						before := ru.badN.Load()
						st, got, err := tryReq(cs[kind], mustReq(t, "PUT", base+"/", bytes.NewReader(body)))
						toBad := ru.badN.Load() > before
						hit = hit || toBad
						switch {
						case err != nil:
							t.Fatalf("%s pool, %s PUT of %d: %v", pool, kind, len(body), err)
						case !toBad || len(body) < maxLoopKept:
							if want := "ok PUT " + sum(body); st != 200 || got != want {
								t.Errorf("%s pool, %s PUT of %d (to the 503 server first: %v): %d %q, want 200 %q", pool, kind, len(body), toBad, st, got, want)
							}
						case st != 503:
							t.Errorf("%s pool, %s PUT of %d, past maxLoopKept %d, to the 503 server: %d, want its 503", pool, kind, len(body), maxLoopKept, st)
						}
					}
					if !hit {
						t.Errorf("%s pool: no %s PUT of %d reached the 503 server", pool, kind, len(body))
					}
				}
			}
			if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
				t.Errorf("%s pool: retry_buffered_bytes %v after the requests, want 0", pool, got)
			}
		}
	})
}

// unavailableApp answers every request 503 with no body once it ended,
// allocating nothing per request.
type unavailableApp struct{ refuseAfterBody }

var rawEmpty = []hpack.Field{{Name: []byte("content-length"), Value: []byte("0")}}

func (unavailableApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if end {
		s.WriteHeaders(id, 503, rawEmpty, true)
	}
}

func (unavailableApp) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		s.WriteHeaders(id, 503, rawEmpty, true)
	}
}

// TestRetryH2UpCapLoop: maxLoopKept bounds the copies of all the
// requests of a loop, over its pools, not each one's: while a PUT's body
// is kept (its server holds it before any response), one to another
// pool whose own body is within the bound but which would take the
// loop's past it is not sent again (the 503 passes); the gauge shows the
// bytes kept meanwhile, for an HTTP/1.1 and an HTTP/2 client's requests.
func TestRetryH2UpCapLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, held atomic.Int64
		release := make(chan struct{})
		bad := newH2CUp(t, unavailable(&badN), nil).addr
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if r.Header.Get("X-Hold") != "" {
				held.Add(1)
				<-release
			}
			fmt.Fprintf(w, "ok %s %s", r.Method, sum(body))
		}), nil).addr
		cfg := h2cPoolConfig(b, bad, good)
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "other", Protocol: ProtocolH2C, Servers: Servers(bad, good)})
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/other/", Pool: "other"}}
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Buffer: new(int64(MaxRetryBuffer))}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		first, second := randomBytes(11, maxLoopKept*3/4), randomBytes(12, maxLoopKept/2)
		for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
			h0 := held.Load()
			req, _ := http.NewRequest("PUT", base+"/", bytes.NewReader(first))
			req.Header.Set("X-Hold", "1")
			ch := goReq(cs[kind], req)
			waitFor(t, "the first PUT held by its server", func() bool { return held.Load() > h0 })
			if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != float64(len(first)) {
				t.Errorf("%s: retry_buffered_bytes %v while the first PUT is held, want %d", kind, got, len(first))
			}
			hit := false
			for range 2 {
				before := badN.Load()
				st, got, err := tryReq(cs[kind], mustReq(t, "PUT", base+"/other/", bytes.NewReader(second)))
				switch {
				case err != nil:
					t.Fatalf("%s: the second PUT: %v", kind, err)
				case badN.Load() > before:
					hit = true
					if st != 503 {
						t.Errorf("%s: the second PUT to the 503 server, past maxLoopKept %d with the first's: %d %q, want its 503", kind, maxLoopKept, st, got)
					}
				case st != 200 || got != "ok PUT "+sum(second):
					t.Errorf("%s: the second PUT to the good server: %d %q", kind, st, got)
				}
			}
			if !hit {
				t.Errorf("%s: no second PUT reached the 503 server", kind)
			}
			release <- struct{}{}
			if r := <-ch; r.err != nil || r.status != 200 || r.body != "ok PUT "+sum(first) {
				t.Errorf("%s: the held PUT: %d %q %v", kind, r.status, r.body, r.err)
			}
		}
		m := scrape(t, p)
		for _, pool := range []string{"app", "other"} {
			if got := m[`spindle_proxy_pool_retry_buffered_bytes{pool="`+pool+`"}`]; got != 0 {
				t.Errorf("pool %s: retry_buffered_bytes %v after the requests, want 0", pool, got)
			}
		}
	})
}

// TestRetryH2UpBodySplit: a PUT to an h2c pool whose 503 came before
// the rest of its body is sent again whole to the other server, the rest
// arriving after the retry went, from an HTTP/1.1 client (with
// Content-Length, and chunked: its data kept, the framing left out) and
// an HTTP/2 client; nothing is held after.
func TestRetryH2UpBodySplit(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN atomic.Int64
		bad := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			badN.Add(1)
			w.WriteHeader(503) // (before the body)
		}), nil).addr
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "ok %s %v %s", r.Method, r.ContentLength, sum(body))
		}), nil).addr
		cfg := h2cPoolConfig(b, bad, good)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		for _, kind := range []string{"HTTP/1.1", "HTTP/1.1 chunked", "HTTP/2"} {
			hits := badN.Load()
			for i := range 2 { // (one to the 503 server first)
				body := randomBytes(uint64(20+i), 60<<10)
				before := badN.Load()
				pr, pw := io.Pipe()
				go func() {
					pw.Write(body[:20<<10])
					// The 503 server's request (a while at most: it
					// may go to the good server first), its 503 at
					// the proxy.
					for deadline := time.Now().Add(300 * time.Millisecond); badN.Load() == before && time.Now().Before(deadline); {
						time.Sleep(5 * time.Millisecond)
					}
					time.Sleep(50 * time.Millisecond)
					pw.Write(body[20<<10:])
					pw.Close()
				}()
				req := mustReq(t, "PUT", base+"/", pr)
				length := int64(-1)
				if kind != "HTTP/1.1 chunked" {
					length = int64(len(body))
				}
				req.ContentLength = length
				st, got, err := tryReq(cs[strings.TrimSuffix(kind, " chunked")], req)
				if want := fmt.Sprintf("ok PUT %d %s", length, sum(body)); err != nil || st != 200 || got != want {
					t.Fatalf("%s PUT %d (to the 503 server first: %v): %d %q %v, want 200 %q", kind, i, badN.Load() > before, st, got, err, want)
				}
			}
			if badN.Load() == hits {
				t.Errorf("no %s PUT reached the 503 server", kind)
			}
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
	})
}

// TestRetryH2UpClientGone: a client that goes (an HTTP/1.1 client closing,
// an HTTP/2 client resetting its stream) while its request's retry waits
// at an h2c server gives back the body kept and its count in the budget
// (budget 0: 3 retries in flight at most, more made one after another
// here), and the server's stream is reset. (The proxy does not read an
// HTTP/1.1 client whose request went whole, so it sees the close at
// response_timeout, 500 ms here.)
func TestRetryH2UpClientGone(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, goodIn, goodGone atomic.Int64
		bad := newH2CUp(t, unavailable(&badN), nil).addr
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			goodIn.Add(1)
			<-r.Context().Done()
			goodGone.Add(1)
		}), nil).addr
		cfg := h2cPoolConfig(b, bad, good)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Budget: new(0)}
		cfg.Listeners[0].ResponseTimeout = Duration(500 * time.Millisecond)
		p := startProxy(t, cfg)
		h2c, base := h2Client(t, p)
		body := randomBytes(13, 10000)
		buffered := func() float64 { return scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`] }
		for i := range 12 {
			in, gone := goodIn.Load(), goodGone.Load()
			if i%2 == 0 {
				c := dial(t, p)
				fmt.Fprintf(c, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				waitFor(t, "the PUT at the good server", func() bool { return goodIn.Load() > in })
				if got := buffered(); got != float64(len(body)) {
					t.Errorf("HTTP/1.1 PUT %d at the server: retry_buffered_bytes %v, want %d", i, got, len(body))
				}
				c.Close()
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				req := mustReq(t, "PUT", base+"/", bytes.NewReader(body)).WithContext(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					if resp, err := h2c.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
				waitFor(t, "the PUT at the good server", func() bool { return goodIn.Load() > in })
				if got := buffered(); got != float64(len(body)) {
					t.Errorf("HTTP/2 PUT %d at the server: retry_buffered_bytes %v, want %d", i, got, len(body))
				}
				cancel()
				<-done
			}
			waitFor(t, "the server's stream reset", func() bool { return goodGone.Load() > gone })
			waitFor(t, "the body kept let go of", func() bool { return buffered() == 0 })
		}
		ms := scrape(t, p)
		if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]; got != float64(badN.Load()) || got <= RetryBudgetFloor {
			t.Errorf("retries_total %v, %d requests to the 503 server, want the same and over %d", got, badN.Load(), RetryBudgetFloor)
		}
		if got := ms[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`]; got != 0 {
			t.Errorf("retry_budget_exceeded_total %v, want 0 (each retry's count given back)", got)
		}
	})
}

// TestRetryH2UpNotTriedAgain: a retry to an h2c pool goes to the servers
// its request has not tried, as to an HTTP/1.1 pool: of a 503 server and
// one refusing connects, a GET whose 503 came first is not sent to the
// 503 server again when the other's connect fails (502, the 503 server
// seeing it once); one that tried the other first goes around again (the
// 503 server twice, its 503 passed on: no attempt left).
func TestRetryH2UpNotTriedAgain(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ru := h2RetryPair(t, "503")
		dead := h2RetryPair(t, "connect").bad
		cfg := h2cPoolConfig(b, ru.bad, dead)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
			var got []string
			for range 2 { // (one to each server first)
				before := ru.badN.Load()
				st, _, err := tryReq(cs[kind], mustReq(t, "GET", base+"/", nil))
				if err != nil {
					t.Fatalf("%s GET: %v", kind, err)
				}
				got = append(got, fmt.Sprintf("%d at the 503 server, %d", ru.badN.Load()-before, st))
			}
			slices.Sort(got)
			if want := []string{"1 at the 503 server, 502", "2 at the 503 server, 503"}; !slices.Equal(got, want) {
				t.Errorf("%s GETs: %q, want %q", kind, got, want)
			}
		}
	})
}
