package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
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
		var badN atomic.Int64
		bad := newH2CUp(t, unavailable(&badN), nil).addr
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			body, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "ok %s %s %v", r.Method, sum(body), err)
		}), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10, MaxReceiveBufferPerConnection: 64 << 10}
		}).addr
		cfg := h2cPoolConfig(b, bad, good)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Buffer: new(int64(256 << 10))}
		p := startProxy(t, cfg)
		cs, base := h2RetryClients(t, p)
		body := randomBytes(1701, 100<<10)
		for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
			hit := false
			for range 2 { // (one to the 503 server first)
				before := badN.Load()
				st, got, err := tryReq(cs[kind], mustReq(t, "PUT", base+"/", bytes.NewReader(body)))
				hit = hit || badN.Load() > before
				if want := "ok PUT " + sum(body) + " <nil>"; err != nil || st != 200 || got != want {
					t.Errorf("%s PUT (to the 503 server first: %v): %d %q %v, want 200 %q", kind, badN.Load() > before, st, got, err, want)
				}
			}
			if !hit {
				t.Errorf("no %s PUT reached the 503 server", kind)
			}
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
	})
}
