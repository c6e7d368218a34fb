package proxy

import (
	"fmt"
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
