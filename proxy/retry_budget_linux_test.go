package proxy

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestRetryBudgetCountsOnce: the budget's requests in flight count the
// request deciding on a retry once, from either kind of client to either
// kind of pool, on a 503, a reset (an HTTP/1.1 server's connection
// closed, an h2c server's RST_STREAM: its stream let go of before the
// decision) and a per_try_timeout. At 50 %, of nine GETs sent one at a
// time, round-robin's first server failing the even ones and the other
// holding every request it gets (the odd ones, and the retries) after
// its response head, the seventh (the fourth failure) is the first whose
// retry passes the budget: 7 requests in flight, 3 of them retried,
// max(3, 7 × 50 / 100) = 3. Counted twice (its try's connection or
// stream, and itself again) it made 8 in flight, a budget of 4, and the
// retry went. The ninth (the fifth failure) is retried: 8 in flight (the
// seventh's failure went to the client), 3 retried, a budget of 4; not
// counted at all it made 7, and its retry was refused.
//
// Each GET goes once the one before has reached its first server (the
// first three failures) or has its response head, or the seventh its
// failure, at the client (the others), and the seventh once the six
// before have their heads there: the requests held are then past their
// per-try timeout, which bounds every try's wait for its head, the
// holding server's too. Its per_try_timeout is 1 s: at 250 ms a head
// held up under load (9 of 400 timeout cases beside a CPU hog) ended a
// held try with a 504, and the budget or a GET's outcome was off. So
// that a case waits for three timeouts rather than five, the first three
// failures' tries run out together (their retries within the budget's
// floor whatever is in flight), and the timeout cases run in parallel.
func TestRetryBudgetCountsOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			for _, kind := range []string{"HTTP/1.1", "HTTP/2"} {
				name := kind + " to HTTP/1.1 pool"
				if h2c {
					name = kind + " to h2c pool"
				}
				for _, mode := range []string{"503", "reset", "timeout"} {
					t.Run(name+" "+mode, func(t *testing.T) { retryBudgetOnce(t, b, h2c, kind, mode) })
				}
			}
		}
	})
}

func retryBudgetOnce(t *testing.T, b engine.Backend, h2c bool, kind, mode string) {
	if mode == "timeout" {
		t.Parallel()
	}
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	var badN, goodN atomic.Int64
	bad := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case "503":
			unavailable(&badN)(w, r)
		case "reset":
			badN.Add(1)
			panic(http.ErrAbortHandler) // (the connection closed; RST_STREAM INTERNAL_ERROR)
		case "timeout":
			badN.Add(1)
			<-r.Context().Done()
		}
	})
	good := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		goodN.Add(1)
		// (Its head first: the requests held are past their per-try
		// timeout, in flight all the same.)
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "ok")
	})
	cfg := retryPoolConfig(t, b, h2c, bad, good)
	rc := &RetryConfig{On: []string{"503"}, Budget: new(50)}
	reason := "status"
	switch mode {
	case "reset":
		rc.On, reason = []string{RetryReset}, "reset"
	case "timeout":
		rc.On, rc.PerTryTimeout, reason = []string{RetryResponseTimeout}, Duration(time.Second), "response_timeout"
	}
	cfg.Listeners[0].Retry = rc
	p := startProxy(t, cfg)
	cs, base := h2RetryClients(t, p)
	const n, refused = 9, 6
	type result struct {
		status int
		body   string
		err    error
	}
	res := make([]result, n)
	var heads [n]atomic.Bool // the response head (or the error) came
	var wg sync.WaitGroup
	for i := range res {
		if i == refused {
			waitFor(t, "the held requests' response heads", func() bool {
				for i := range refused {
					if !heads[i].Load() {
						return false
					}
				}
				return true
			})
		}
		req := mustReq(t, "GET", base+"/", nil)
		wg.Go(func() {
			r := &res[i]
			resp, err := cs[kind].Do(req)
			if err != nil {
				r.err = err
				heads[i].Store(true)
				return
			}
			r.status = resp.StatusCode
			heads[i].Store(true)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.body, r.err = string(body), err
		})
		// (One at a time: the order decides the servers, retries taking
		// no turn. The first three failures' retries, within the budget's
		// floor whatever else is in flight, may wait for their try's end
		// together; the others end at the holding server, their head
		// through, or refused their retry.)
		if i%2 == 0 && i < refused {
			waitFor(t, "the request's arrival at the failing server", func() bool { return badN.Load() > int64(i/2) })
		} else {
			waitFor(t, "the request's response head", heads[i].Load)
		}
	}
	ms := scrape(t, p)
	if got := ms[`spindle_proxy_pool_retry_budget_exceeded_total{pool="app"}`]; got != 1 {
		t.Errorf("retry_budget_exceeded_total %v, want 1", got)
	}
	if got := ms[`spindle_proxy_pool_retries_total{pool="app",reason="`+reason+`"}`]; got != 4 {
		t.Errorf("retries_total{reason=%s} %v, want 4", reason, got)
	}
	if got := badN.Load(); got != 5 {
		t.Errorf("the failing server got %d requests, want 5", got)
	}
	if got := goodN.Load(); got != n-1 {
		t.Errorf("the holding server got %d requests, want %d", got, n-1)
	}
	if t.Failed() {
		// (Seen once under load: 4 and 9, none refused. A first try that
		// passed over the failing server uncounted, a connect failure or a
		// reused connection's redial, shows in these; a second client
		// connection, on another loop, in accepted_total.)
		for _, k := range slices.Sorted(maps.Keys(ms)) {
			if strings.Contains(k, "connect") || strings.Contains(k, "requests_total") || strings.Contains(k, "accepted_total") || strings.Contains(k, "retr") {
				t.Logf("%s %v", k, ms[k])
			}
		}
	}
	once.Do(func() { close(release) })
	wg.Wait()
	for i, r := range res {
		switch {
		case i != refused && r != result{200, "ok", nil}:
			t.Errorf("request %d: %d %q %v, want 200 ok", i, r.status, r.body, r.err)
		case i == refused && mode == "503" && r != result{503, "replica down", nil}:
			t.Errorf("request %d: %d %q %v, want the 503 (its retry over the budget)", i, r.status, r.body, r.err)
		case i == refused && r.status == 200:
			t.Errorf("request %d: 200 %q, want its failure (its retry over the budget)", i, r.body)
		}
	}
}
