package proxy

import (
	"io"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadRemovedNotDialed: a client whose first server does not
// answer when a reload removes its pool's servers does not fail over to
// a removed one after connect_timeout: a server removed takes no new
// connection, in mode tcp and mode http (a request begun before the
// reload) alike.
func TestReloadRemovedNotDialed(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, http := range []bool{false, true} {
			hole := blackholeAddr(t)
			u1, u2 := newUpstream(t, nil), newUpstream(t, nil)
			cfgOf := func(servers ...string) *Config {
				cfg := testConfig(b, servers...)
				cfg.Listeners[0].ConnectTimeout = Duration(300 * time.Millisecond)
				if http {
					cfg.Listeners[0].Mode = ModeHTTP
				}
				return cfg
			}
			p, stop := runProxy(t, cfgOf(hole, u1.addr))
			c := dial(t, p)
			if http {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			}
			waitFor(t, "the dial to the silent server", func() bool { return serverTotals(p, hole).Active == 1 })
			mustReload(t, p, cfgOf(u2.addr))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.Copy(io.Discard, c) // closed (or, mode http, 502 and closed)
			if n := u1.accepted.Load(); n != 0 {
				t.Errorf("http %v: the removed server accepted %d connections after the reload", http, n)
			}
			if err := stop(); err != nil {
				t.Error(err)
			}
		}
	})
}
