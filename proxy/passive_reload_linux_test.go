package proxy

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadPassiveLateConnect: a connect begun under a config with
// passive health (fails 1) that fails after a reload took passive health
// away does not eject its server: the pool in force has no passive
// health, and a server of such a pool is never ejected (Reload: without
// passive health its ejection ends).
func TestReloadPassiveLateConnect(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		addr := blackholeAddr(t)
		cfg := passiveConfig(b, 1, 0, time.Hour, addr)
		cfg.Listeners[0].ConnectTimeout = Duration(500 * time.Millisecond)
		p := startProxy(t, cfg)
		c := dial(t, p)
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: example.com\r\n\r\n")
		waitFor(t, "the connect in progress", func() bool { return serverTotals(p, addr).Connections == 1 })
		next := httpConfig(b, addr)
		next.Listeners[0].ConnectTimeout = cfg.Listeners[0].ConnectTimeout
		mustReload(t, p, next)
		resp, _ := readResponse(t, c, "GET")
		if resp.StatusCode != 502 {
			t.Fatalf("status %d, want 502 (the connect timed out)", resp.StatusCode)
		}
		if st := serverTotals(p, addr); !st.Up || st.PassiveDown || st.Ejections != 0 {
			t.Errorf("after the connect's failure under a config without passive health: %+v, want up, never ejected", st)
		}
	})
}

// TestReloadPassiveStatusesLateResponse: a response to a request sent
// before a reload that took http_error_statuses from 500-599 to 503,
// which comes after it, is judged by the statuses in force, as the
// http_errors it counts against are (inForce): its 500 is no failed
// exchange, and does not eject the server under http_errors 1. So
// whatever the client's and the pool's protocols, and for a status the
// request is retried on.
func TestReloadPassiveStatusesLateResponse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, tc := range []struct {
			name           string
			h2Client, h2Up bool
			retry          bool
		}{
			{name: "h1-h1"},
			{name: "h2-h1", h2Client: true},
			{name: "h2-h2", h2Client: true, h2Up: true},
			{name: "h1-h2", h2Up: true},
			{name: "h1-h1-retried", retry: true},
			{name: "h2-h2-retried", h2Client: true, h2Up: true, retry: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				release := make(chan struct{})
				var reqs atomic.Int64
				h := func(w http.ResponseWriter, r *http.Request) {
					if reqs.Add(1) == 1 {
						<-release
					}
					w.WriteHeader(500)
				}
				var addr string
				if tc.h2Up {
					addr = newH2CUp(t, http.HandlerFunc(h), nil).addr
				} else {
					addr = newHTTPUpstream(t, h).addr
				}
				cfgOf := func(statuses string) *Config {
					cfg := h2cConfig(b, addr)
					if tc.h2Up {
						cfg.Pools[0].Protocol = ProtocolH2C
					}
					if tc.retry {
						cfg.Listeners[0].Retry = &RetryConfig{On: []string{"500"}}
					}
					cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, HTTPErrors: 1, Cooldown: Duration(time.Hour), HTTPErrorStatuses: statuses}
					return cfg
				}
				p := startProxy(t, cfgOf("500-599"))
				c, base := client(t, p)
				if tc.h2Client {
					c, base = h2Client(t, p)
				}
				res := getAsync(c, base+"/x")
				waitFor(t, "the request at the server", func() bool { return reqs.Load() == 1 })
				mustReload(t, p, cfgOf("503"))
				close(release)
				if got := <-res; got != "500 " {
					t.Errorf("response %q, want 500", got)
				}
				if st := serverTotals(p, addr); !st.Up || st.Ejections != 0 || st.ConsecutiveErrors != 0 {
					t.Errorf("after a 500 under http_error_statuses 503: %+v, want up, no failure counted", st)
				}
			})
		}
	})
}
