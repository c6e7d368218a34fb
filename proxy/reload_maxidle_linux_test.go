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
// (TestReloadShorterIdleTimeout), and keeps no more than it of those in
// use at the reload once they are done: with 4 kept idle to a server and
// a fifth in use, max_idle 1 leaves 1 and the server sees 3 closed, then
// the fifth closed once its response is whole; -1 (keep none) leaves
// none. A request after the reloads is served.
func TestReloadLowerMaxIdleTrims(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const n = 4
		var arrived sync.WaitGroup
		arrived.Add(n)
		all := make(chan struct{})
		go func() { arrived.Wait(); close(all) }()
		held, release := make(chan struct{}), make(chan struct{})
		var closed atomic.Int64
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/together":
				arrived.Done()
				<-all // each on a connection of its own
			case "/hold":
				held <- struct{}{}
				<-release
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
		send := func(path string) (wait func()) {
			c := dial(t, p)
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}()
			return func() { <-done }
		}
		hold := send("/hold")
		<-held
		var waits []func()
		for range n {
			waits = append(waits, send("/together"))
		}
		for _, w := range waits {
			w()
		}
		waitFor(t, fmt.Sprint(n, " idle connections to the server"), func() bool { return serverTotals(p, u.addr).Idle == n })
		expect := func(maxIdle, idle, closedN int) {
			t.Helper()
			waitFor(t, fmt.Sprintf("max_idle %d: %d idle, %d closed at the server", maxIdle, idle, closedN), func() bool {
				return serverTotals(p, u.addr).Idle == int64(idle) && closed.Load() == int64(closedN)
			})
		}
		mustReload(t, p, cfgOf(1))
		expect(1, 1, n-1)
		close(release)
		hold()
		expect(1, 1, n)
		mustReload(t, p, cfgOf(-1))
		expect(-1, 0, n+1)
		if code := getStatus(dial(t, p), "/"); code != 200 {
			t.Errorf("a request after the reloads: %d, want 200", code)
		}
	})
}
