package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadCapQueuesEarlierRequest: a reload that gives a pool's
// servers a max_conns applies the cap at once, whatever the generation a
// request was routed to, and so does the queue it waits in: a request
// begun before the reload (under the pool without max_conns, which has no
// max_queue or queue_timeout of its own) whose retry finds the one other
// server at its new cap waits for a slot by the max_queue and
// queue_timeout in force (1024, 5s), and is served once the slot is free,
// rather than refused at once with 503 (UO) as by a queue bounded at 0.
func TestReloadCapQueuesEarlierRequest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		got, cut := make(chan struct{}), make(chan struct{})
		s1 := newUpstream(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			got <- struct{}{}
			<-cut // then closed without a response: retried (reset)
		})
		held, release := make(chan struct{}), make(chan struct{})
		s2 := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				held <- struct{}{}
				<-release
			}
			io.WriteString(w, "s2")
		})
		cfgOf := func(maxConns int) *Config {
			cfg := httpConfig(b, s1.addr, s2.addr)
			cfg.Listeners[0].Retry = &RetryConfig{On: []string{RetryReset}}
			cfg.Pools[0].MaxConns = maxConns
			return cfg
		}
		p := startProxy(t, cfgOf(0))
		retried := dial(t, p) // round-robin's first: s1
		io.WriteString(retried, "GET /retried HTTP/1.1\r\nHost: x\r\n\r\n")
		<-got
		holder := dial(t, p) // the second: s2
		io.WriteString(holder, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
		<-held
		mustReload(t, p, cfgOf(1))
		close(cut) // s1 closes: the retry finds s2 at its cap
		waitFor(t, "the retry waiting in the queue", func() bool {
			return p.Totals().Pools[0].QueueLength == 1 || p.Totals().Pools[0].QueueRefused > 0
		})
		close(release)
		if resp, body := readResponseFrom(t, holder, bufio.NewReader(holder), "GET"); resp.StatusCode != 200 {
			t.Fatalf("the request holding s2: %d %q", resp.StatusCode, body)
		}
		if resp, body := readResponseFrom(t, retried, bufio.NewReader(retried), "GET"); resp.StatusCode != 200 || body != "s2" {
			t.Errorf("the request begun before the reload, retried to s2 at its cap: %d %q, want 200 \"s2\" once s2's slot was free", resp.StatusCode, body)
		}
		if pt := p.Totals().Pools[0]; pt.QueueRefused != 0 || pt.QueueServed != 1 {
			t.Errorf("pool queue: %d refused, %d served; want 0, 1", pt.QueueRefused, pt.QueueServed)
		}
	})
}
