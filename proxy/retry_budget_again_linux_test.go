package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestRetryBudgetAgain: a request retried already is among the budget's
// requests being retried; its next retry adds none, and goes where the
// budget is full with it. Under the floor (budget 0: 3 requests retried
// at once), three GETs answered 503 twice each are each retried twice,
// their third tries held at once: 3 requests retried, never 4. Counted
// against itself, the third GET's second retry found 3 retried (itself
// one) and its 503 went to the client.
func TestRetryBudgetAgain(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) })
		var mu sync.Mutex
		tries := map[string]int{}
		h := func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			tries[r.URL.Path]++
			n := tries[r.URL.Path]
			mu.Unlock()
			if n <= 2 {
				w.WriteHeader(503)
				return
			}
			<-release
			io.WriteString(w, "ok")
		}
		u1, u2 := newHTTPUpstream(t, h).addr, newHTTPUpstream(t, h).addr
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}, Attempts: 2, Budget: new(0)}, u1, u2))
		cs := make([]net.Conn, 3)
		for i := range cs {
			cs[i] = dial(t, p)
			cs[i].SetDeadline(time.Now().Add(20 * time.Second))
			path := fmt.Sprintf("/%d", i)
			fmt.Fprintf(cs[i], "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			waitFor(t, "the request's third try, or its failure", func() bool {
				mu.Lock()
				n := tries[path]
				mu.Unlock()
				return n == 3 || scrape(t, p)[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`] > 0
			})
		}
		once.Do(func() { close(release) })
		for i, c := range cs {
			if resp, got := readResponse(t, c, "GET"); resp.StatusCode != 200 || got != "ok" {
				t.Errorf("request %d: %d %q, want 200 ok (its retries within the budget)", i, resp.StatusCode, got)
			}
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`]; got != 0 {
			t.Errorf("retry_budget_exceeded_total %v, want 0", got)
		}
	})
}
