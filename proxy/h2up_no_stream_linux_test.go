package proxy

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// goAwayAtOnceUp is a server that takes no stream on any connection: its
// SETTINGS, then in the same write GOAWAY naming no stream processed
// (last 0, NO_ERROR), as a server shutting down that still accepts does;
// it reads the rest and drops it.
func goAwayAtOnceUp(c net.Conn) {
	out := h2.AppendSettings(nil, nil)
	out = h2.AppendSettingsAck(out)
	out = h2.AppendGoAway(out, 0, h2.NoError, nil)
	if _, err := c.Write(out); err != nil {
		return
	}
	io.Copy(io.Discard, c)
}

// TestH2UpNoStreamServerNotRedialed: a server that sets up each
// connection and ends it before taking a stream (SETTINGS and GOAWAY
// with last stream 0) has failed to take the request, as one refusing
// connections has: the request goes on to the next server (200), with
// none left it gets 502 at once, the server dialed once a request; under
// passive health (fails 2) it is ejected after two, and not dialed
// again in its cooldown. A connection was dialed in the ended one's
// place again and again until response_timeout: 504 after thousands of
// connections.
func TestH2UpNoStreamServerNotRedialed(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		bad := newUpstream(t, goAwayAtOnceUp)
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}), nil)
		for _, arm := range []struct {
			name    string
			servers []string
			passive bool
			status  int
			most    int64 // connections to bad for the requests
		}{
			{"alone", []string{bad.addr}, false, 502, 4},
			{"beside another", []string{bad.addr, good.addr}, false, 200, 4},
			{"beside another, passive health", []string{bad.addr, good.addr}, true, 200, 2},
		} {
			bad.accepted.Store(0)
			cfg := h2cPoolConfig(b, arm.servers...)
			cfg.Listeners[0].ResponseTimeout = Duration(3 * time.Second)
			if arm.passive {
				cfg.Pools[0].Passive = &PassiveConfig{Fails: 2, Cooldown: Duration(time.Minute)}
			}
			p := startProxy(t, cfg)
			c, base := h2Client(t, p)
			for k := range 4 {
				t0 := time.Now()
				resp, _ := do(t, c, mustReq(t, "GET", base+"/x", nil))
				if d := time.Since(t0); resp.StatusCode != arm.status || d > 2*time.Second {
					t.Errorf("%s: request %d: %d after %v, want %d at once", arm.name, k, resp.StatusCode, d, arm.status)
				}
			}
			if n := bad.accepted.Load(); n == 0 || n > arm.most {
				t.Errorf("%s: %d connections to the server taking no stream for 4 requests, want 1 to %d", arm.name, n, arm.most)
			}
			if st := serverTotals(p, bad.addr); arm.passive && st.EjectionsConnect != 1 {
				t.Errorf("%s: %d ejections for failed connects, want 1", arm.name, st.EjectionsConnect)
			}
		}
	})
}
