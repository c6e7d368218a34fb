package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// Retries to h2c pools, reviewed (seventeenth session): what broke, each
// test failing before its fix.

// TestRetryH2UpHeadFirst: a retried PUT whose body is larger than the
// retry target's stream window goes whole to it even where that server
// answers its head before reading the body (a streaming server's 200
// first): the head coming while the body kept was still being sent again
// does not cut that body, from an HTTP/1.1 client and an HTTP/2 client.
func TestRetryH2UpHeadFirst(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, goodN atomic.Int64
		bad := newH2CUp(t, unavailable(&badN), nil).addr
		cfg := h2cPoolConfig(b, bad, sumH2CUp(t, &goodN, true))
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Buffer: new(int64(256 << 10))}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		sendWhole(t, cs, base, "PUT", randomBytes(1701, 100<<10), 2, &badN)
		if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
	})
}

// smallWindows gives an h2c server 16 KiB stream windows (64 KiB for its
// connection), smaller than the bodies the tests send.
func smallWindows(s *http.Server) {
	s.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10, MaxReceiveBufferPerConnection: 64 << 10}
}

// sumH2CUp starts an h2c server with small windows answering "ok
// <method> <body's sum> <its read's error>", its head first where
// headFirst (flushed before it reads the body), counting its requests
// in n.
func sumH2CUp(t *testing.T, n *atomic.Int64, headFirst bool) string {
	return newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if headFirst {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
		}
		body, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %s %s %v", r.Method, sum(body), err)
	}), smallWindows).addr
}

// sendWhole sends method with body tries times from each client of cs
// (base their URL), wanting sumH2CUp's answer for it whole, and some to
// the failing server first (its count first).
func sendWhole(t *testing.T, cs map[string]*http.Client, base, method string, body []byte, tries int, first *atomic.Int64) {
	t.Helper()
	for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
		hit := false
		for range tries {
			before := first.Load()
			st, got, err := tryReq(cs[kind], mustReq(t, method, base+"/", bytes.NewReader(body)))
			hit = hit || first.Load() > before
			if want := "ok " + method + " " + sum(body) + " <nil>"; err != nil || st != 200 || got != want {
				t.Errorf("%s %s (to the failing server first: %v): %d %q %v, want 200 %q", kind, method, first.Load() > before, st, got, err, want)
			}
		}
		if !hit {
			t.Errorf("no %s %s reached the failing server", kind, method)
		}
	}
}

// TestRetryH2UpTrailersHash: a chunked PUT with request trailers (an
// HTTP/1.1 client's trailer section, an HTTP/2 client's trailers), its
// body larger than the servers' stream windows, retried from a 503 in an
// h2c hash pool goes whole with its trailers to the key's next server;
// each key's retry reaches the other server once.
func TestRetryH2UpTrailersHash(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, goodN atomic.Int64
		bad := newH2CUp(t, unavailable(&badN), smallWindows).addr
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			goodN.Add(1)
			body, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "ok %s %s %v %q", r.Method, sum(body), err, r.Trailer.Get("X-Check"))
		}), smallWindows).addr
		for _, servers := range [][]string{{bad, good}, {good, bad}} {
			cfg := h2cPoolConfig(b, servers...)
			cfg.Pools[0].Balance = Hash
			cfg.Pools[0].Hash = &HashConfig{Key: "header:X-User"}
			cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Buffer: new(int64(256 << 10))}
			p := startProxy(t, cfg)
			cs, base := h2RetryClients(t, p)
			body := randomBytes(1702, 100<<10)
			for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
				before := badN.Load()
				for k := range 24 { // (8 keys all hashed to one of two random ports about once in 128)
					req := mustReq(t, "PUT", base+"/", io.MultiReader(bytes.NewReader(body)))
					req.ContentLength = -1
					req.Header.Set("X-User", fmt.Sprintf("u%d", k))
					req.Trailer = http.Header{"X-Check": {"t" + fmt.Sprint(k)}}
					b0, g0 := badN.Load(), goodN.Load()
					st, got, err := tryReq(cs[kind], req)
					if want := fmt.Sprintf("ok PUT %s <nil> %q", sum(body), "t"+fmt.Sprint(k)); err != nil || st != 200 || got != want {
						t.Errorf("servers %v, %s PUT u%d: %d %q %v, want 200 %q", servers, kind, k, st, got, err, want)
					}
					if b, g := badN.Load()-b0, goodN.Load()-g0; b > 1 || g != 1 {
						t.Errorf("servers %v, %s PUT u%d: %d at the 503 server, %d at the other, want at most 1 and 1", servers, kind, k, b, g)
					}
				}
				if badN.Load() == before {
					t.Errorf("servers %v: no %s key went to the 503 server", servers, kind)
				}
			}
			if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
				t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
			}
		}
	})
}

// refuseNewPath refuses (REFUSED_STREAM, on its HEADERS: not processed,
// no body byte taken) the first stream of each path, over all its
// connections, and answers the path's next streams "ok", counting
// them.
type refuseNewPath struct {
	mu   *sync.Mutex
	seen map[string]bool
	n    *atomic.Int64
}

func (a refuseNewPath) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	a.mu.Lock()
	seen := a.seen[string(r.Path)]
	a.seen[string(r.Path)] = true
	a.mu.Unlock()
	a.n.Add(1)
	switch {
	case !seen:
		s.Reset(id, h2.RefusedStream)
	case end:
		a.answer(s, id)
	}
}

func (refuseNewPath) answer(s *h2.Server, id uint32) {
	if s.WriteHeaders(id, 200, rawFields, false) == nil {
		s.WriteData(id, rawOK, true)
	}
}

func (a refuseNewPath) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		a.answer(s, id)
	}
}
func (refuseNewPath) OnTrailers(*h2.Server, uint32, []hpack.Field) {}
func (refuseNewPath) OnReset(*h2.Server, uint32, h2.ErrCode)       {}
func (refuseNewPath) OnWritable(*h2.Server, uint32)                {}
func (refuseNewPath) OnGoAway(*h2.Server, h2.ErrCode, []byte)      {}

// TestRetryH2UpRefusedAfterRetry: a GET whose 503 was retried to the
// other server of an h2c hash pool, which refused the retry's stream
// unprocessed (sent again with no policy, as any refused stream with no
// body sent), goes again to a server its retry did not try, not back to
// the 503 server that the walk from the key's entry would take first:
// the client gets the other server's 200, the 503 server sees it once.
func TestRetryH2UpRefusedAfterRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, refN atomic.Int64
		bad := newH2CUp(t, unavailable(&badN), nil).addr
		seen := map[string]bool{}
		var mu sync.Mutex
		refusing := newUpstream(t, func(c net.Conn) { serveH2(c, refuseNewPath{&mu, seen, &refN}) }).addr
		cfg := h2cPoolConfig(b, bad, refusing)
		cfg.Pools[0].Balance = Hash
		cfg.Pools[0].Hash = &HashConfig{Key: "header:X-User"}
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
			hit := 0
			for k := range 16 {
				req := mustReq(t, "GET", fmt.Sprintf("%s/%s/%d", base, kind, k), nil)
				req.Header.Set("X-User", fmt.Sprintf("u%d", k))
				b0 := badN.Load()
				st, got, err := tryReq(cs[kind], req)
				if n := badN.Load() - b0; n > 0 {
					hit++
					if n > 1 {
						t.Errorf("%s GET u%d: %d requests at the 503 server, want 1", kind, k, n)
					}
				}
				if err != nil || st != 200 || got != "ok" {
					t.Errorf("%s GET u%d (to the 503 server first: %v): %d %q %v, want 200 \"ok\"", kind, k, badN.Load() > b0, st, got, err)
				}
			}
			if hit == 0 {
				t.Errorf("no %s key went to the 503 server first", kind)
			}
		}
	})
}

// goAwayAfterBody sends GOAWAY naming no stream (last 0: none processed)
// once a request's body ended (early: once its first bytes came),
// counting the requests.
type goAwayAfterBody struct {
	refuseAfterBody
	early, due bool
}

func (a *goAwayAfterBody) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	a.n.Add(1)
	a.due = a.due || end
}

func (a *goAwayAfterBody) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	a.due = a.due || end || a.early
}

func (a *goAwayAfterBody) frames(*h2.Server) []byte {
	if !a.due {
		return nil
	}
	a.due = false
	return h2.AppendGoAway(nil, 0, h2.NoError, nil)
}

// TestRetryH2UpGoAway: a POST whose stream a GOAWAY left unprocessed
// once its body went, or once some of it went, (larger than the other
// server's stream window) is sent again whole under refused-stream, from
// an HTTP/1.1 and an HTTP/2 client; nothing is held after.
func TestRetryH2UpGoAway(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprint("early=", early), func(t *testing.T) { retryGoAway(t, early) })
	}
}

func retryGoAway(t *testing.T, early bool) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var goN, goodN atomic.Int64
		goaway := newUpstream(t, func(c net.Conn) {
			serveH2(c, &goAwayAfterBody{refuseAfterBody: refuseAfterBody{n: &goN}, early: early})
		}).addr
		cfg := h2cPoolConfig(b, goaway, sumH2CUp(t, &goodN, false))
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"refused-stream"}, Buffer: new(int64(256 << 10))}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		sendWhole(t, cs, base, "POST", randomBytes(1703, 100<<10), 4, &goN)
		waitFor(t, "no body kept", func() bool {
			return scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`] == 0
		})
	})
}
