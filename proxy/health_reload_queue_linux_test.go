package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadHealthRemovedServesQueue: a reload that takes the health
// checks away brings the servers they held down up, and the pool's
// waiters take their slots at once, as when a server's checks bring it
// up (cameUp): with server A at its max_conns 1 (a request held there)
// and B down by its checks, a request waits in the queue; the reload
// without health checks sends it to B, well before its queue_timeout.
func TestReloadHealthRemovedServesQueue(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		defer close(release)
		held := make(chan struct{}, 1)
		a := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				return // (200: A stays up)
			}
			held <- struct{}{}
			<-release
			io.WriteString(w, "A")
		}).addr
		bsrv := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				w.WriteHeader(503)
				return
			}
			io.WriteString(w, "B")
		}).addr
		mk := func(health bool) *Config {
			cfg := httpConfig(b, a, bsrv)
			cfg.Pools[0].MaxConns = 1
			cfg.Pools[0].QueueTimeout = Duration(5 * time.Second)
			if health {
				cfg.Pools[0].Health = &HealthConfig{Type: HealthHTTP, Path: "/health", Interval: Duration(50 * time.Millisecond),
					Timeout: Duration(40 * time.Millisecond), Rise: 1, Fall: 1}
			}
			return cfg
		}
		p := startProxy(t, mk(true))
		waitFor(t, "B down by its checks", func() bool { return !serverTotals(p, bsrv).Up })
		c1 := dial(t, p)
		io.WriteString(c1, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
		<-held
		c2 := dial(t, p)
		io.WriteString(c2, "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n")
		waitFor(t, "the request in the queue", func() bool { return p.Totals().Pools[0].QueueLength == 1 })
		mustReload(t, p, mk(false))
		if st := serverTotals(p, bsrv); !st.Up {
			t.Fatalf("B after the reload without health checks: %+v, want up", st)
		}
		c2.SetDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
		if err != nil {
			t.Fatalf("the queued request, 2 s after the reload brought B up: %v, want B's answer", err)
		}
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(got) != "B" {
			t.Errorf("the queued request: %d %q, want 200 B", resp.StatusCode, got)
		}
	})
}
