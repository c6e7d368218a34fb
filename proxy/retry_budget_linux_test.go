package proxy

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestRetryBudgetCountsOnce: the budget's requests in flight count the
// request deciding on a retry once, from either kind of client to either
// kind of pool. At 50 %, of eight GETs sent one at a time, round-robin's
// first server answering the even ones 503 and the other holding every
// request it gets (the odd ones, and the retries), the seventh (the
// fourth 503) is the first whose retry passes the budget: 7 requests in
// flight, 3 of them retried, max(3, 7 × 50 / 100) = 3. Counted twice
// (its try's connection or stream, and itself again) it made 8 in
// flight, a budget of 4, and the retry went.
func TestRetryBudgetCountsOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
				name := kind + " to HTTP/1.1 pool"
				if h2c {
					name = kind + " to h2c pool"
				}
				t.Run(name, func(t *testing.T) { retryBudgetOnce(t, b, h2c, kind) })
			}
		}
	})
}

func retryBudgetOnce(t *testing.T, b engine.Backend, h2c bool, kind string) {
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	var badN, goodN atomic.Int64
	bad := unavailable(&badN)
	good := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		goodN.Add(1)
		<-release
		io.WriteString(w, "ok")
	})
	var cfg *Config
	if h2c {
		cfg = h2cPoolConfig(b, newH2CUp(t, bad, nil).addr, newH2CUp(t, good, nil).addr)
	} else {
		cfg = h2cConfig(b, newHTTPUpstream(t, bad).addr, newHTTPUpstream(t, good).addr)
	}
	cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Budget: new(50)}
	p := startProxy(t, cfg)
	cs, base := h2RetryClients(t, p)
	exceeded := func() int64 {
		return int64(scrape(t, p)[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`])
	}
	const n, refused = 8, 6
	type result struct {
		status int
		body   string
		err    error
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	for i := range res {
		req := mustReq(t, "GET", base+"/", nil)
		wg.Go(func() {
			r := &res[i]
			r.status, r.body, r.err = tryReq(cs[kind], req)
		})
		// (One at a time: the order decides the servers. Each ends at
		// the holding server, or refused its retry.)
		waitFor(t, "the request's arrival", func() bool { return goodN.Load()+exceeded() >= int64(i+1) })
	}
	ms := scrape(t, p)
	if got := ms[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`]; got != 1 {
		t.Errorf("retry_budget_exceeded_total %v, want 1", got)
	}
	if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="status"}`]; got != 3 {
		t.Errorf("retries_total %v, want 3", got)
	}
	if got := badN.Load(); got != 4 {
		t.Errorf("the 503 server got %d requests, want 4", got)
	}
	once.Do(func() { close(release) })
	wg.Wait()
	for i, r := range res {
		want := result{200, "ok", nil}
		if i == refused {
			want = result{503, "replica down", nil} // (its retry over the budget)
		}
		if r != want {
			t.Errorf("request %d: %d %q %v, want %d %q", i, r.status, r.body, r.err, want.status, want.body)
		}
	}
}
