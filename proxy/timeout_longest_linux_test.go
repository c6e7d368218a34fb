package proxy

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTimeoutsLongest: a pool whose idle_timeout is Duration's largest
// (2562047h, as good as none) keeps its idle connections, and leaves the
// loop's sweep of the other pools' as it is: another pool's idle
// connection is closed at its idle_timeout (200ms), after one of the
// first pool's was pooled on the loop. The first's deadline wrapped past
// an int64 into the past, and the sweep, armed for it, took no later
// deadline again: no pool's idle connection on the loop was closed.
func TestTimeoutsLongest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		serve := func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Path) }
		short, long := newHTTPUpstream(t, serve), newHTTPUpstream(t, serve)
		cfg := httpConfig(b, short.addr)
		cfg.Pools[0].IdleTimeout = Duration(200 * time.Millisecond)
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "long", Servers: Servers(long.addr), IdleTimeout: Duration(1<<63 - 1)})
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/long/", Pool: "long"}}
		p := startProxy(t, cfg)
		c, base := client(t, p)
		if resp, body := get(t, c, base+"/long/x"); resp.StatusCode != 200 || body != "/long/x" {
			t.Fatalf("/long/x: %d %q", resp.StatusCode, body)
		}
		waitFor(t, "long's connection idle", func() bool { return serverTotals(p, long.addr).Idle == 1 })
		if resp, body := get(t, c, base+"/x"); resp.StatusCode != 200 || body != "/x" {
			t.Fatalf("/x: %d %q", resp.StatusCode, body)
		}
		waitFor(t, "app's connection idle", func() bool { return serverTotals(p, short.addr).Idle == 1 })
		if !within(2*time.Second, func() bool { return serverTotals(p, short.addr).Idle == 0 }) {
			t.Error("app's idle connection still pooled 2s on (idle_timeout 200ms)")
		}
		time.Sleep(100 * time.Millisecond)
		if n := serverTotals(p, long.addr).Idle; n != 1 {
			t.Errorf("long's idle connections: %d, want 1 (its idle_timeout is as good as none)", n)
		}
	})
}
