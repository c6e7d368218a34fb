package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadLowerMaxIdleTrims: a reload that lowers a pool's max_idle
// closes the idle connections it keeps past the new bound at once, the
// oldest first, as a shorter idle_timeout closes those idle past it
// (TestReloadShorterIdleTimeout): with 4 kept idle to a server, max_idle
// 1 leaves 1 and the server sees 3 closed; -1 (keep none) leaves none. A
// request after each reload is served.
func TestReloadLowerMaxIdleTrims(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const n = 4
		var arrived sync.WaitGroup
		arrived.Add(n)
		all := make(chan struct{})
		go func() { arrived.Wait(); close(all) }()
		var closed atomic.Int64
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/together" {
				arrived.Done()
				<-all // each on a connection of its own
			}
			io.WriteString(w, "ok")
		}, func(s *http.Server) {
			prev := s.ConnState
			s.ConnState = func(c net.Conn, st http.ConnState) {
				prev(c, st)
				if st == http.StateClosed {
					closed.Add(1)
				}
			}
		})
		cfgOf := func(maxIdle int) *Config {
			cfg := httpConfig(b, u.addr)
			cfg.Pools[0].MaxIdle = maxIdle
			return cfg
		}
		p := startProxy(t, cfgOf(0))
		var wg sync.WaitGroup
		for range n {
			c := dial(t, p)
			wg.Go(func() {
				fmt.Fprint(c, "GET /together HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		waitFor(t, fmt.Sprint(n, " idle connections to the server"), func() bool { return serverTotals(p, u.addr).Idle == n })
		for _, tc := range []struct{ maxIdle, idle, closed int }{{1, 1, n - 1}, {-1, 0, n}} {
			mustReload(t, p, cfgOf(tc.maxIdle))
			waitFor(t, fmt.Sprintf("max_idle %d: %d idle, %d closed at the server", tc.maxIdle, tc.idle, tc.closed), func() bool {
				return serverTotals(p, u.addr).Idle == int64(tc.idle) && closed.Load() == int64(tc.closed)
			})
		}
		if code := getStatus(dial(t, p), "/"); code != 200 {
			t.Errorf("a request after the reloads: %d, want 200", code)
		}
	})
}
