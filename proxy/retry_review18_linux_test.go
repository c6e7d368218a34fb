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

// The unified retry decision (retry.go: decideStatus, retryFailed over a
// retrier), reviewed (eighteenth session).

// TestRetryStatusReuse: a retried 503 that ended with its head (its
// short body in the same read, the request gone whole) gives its
// connection back to the idle pool, from an HTTP/2 client's stream as
// from an HTTP/1.1 client: the 503 server accepts one connection for
// all the GETs and PUTs it answers, and each request gets the other
// server's 200 with its body whole.
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
			})
		}
	})
}
