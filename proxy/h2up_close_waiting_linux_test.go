package proxy

import (
	"net"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestH2UpServerCloseServesWaitingRequest: a request waiting for a
// stream (the server takes one at a time, h2_max_connections 1, its one
// stream held) is served on a new connection where the server closes
// that connection without a GOAWAY (a restart, a connection limit), with
// a FIN or a reset: it
// was sent nowhere, and a server ending a connection it had set up is
// no failed connect. The stream held gets 502. The close failed the
// waiting request over as if its server had failed to connect, with no
// other server 502 (logged SC), over HTTP/2 and HTTP/1.1 clients alike.
func TestH2UpServerCloseServesWaitingRequest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, tc := range []struct {
			name       string
			h2c, reset bool
		}{{"h2/fin", true, false}, {"h2/reset", true, true}, {"http1/fin", false, false}, {"http1/reset", false, true}} {
			h2c := tc.h2c
			t.Run(tc.name, func(t *testing.T) {
				up, _ := heldH2Up(t)
				cfg := h2cPoolConfig(b, up.addr)
				cfg.Listeners[0].H2C = h2c
				cfg.Pools[0].H2MaxConnections = 1
				p := startProxy(t, cfg)
				c, base := client(t, p)
				if h2c {
					c, base = h2Client(t, p)
				}
				held := getAsync(c, base+"/held")
				waitFor(t, "the held stream at the server", func() bool { return serverTotals(p, up.addr).H2Streams == 1 })
				waiting := getAsync(c, base+"/x")
				waitFor(t, "the second request waiting", func() bool { return serverTotals(p, up.addr).Active == 2 })
				up.mu.Lock()
				for uc := range up.conns {
					if tc.reset {
						uc.(*net.TCPConn).SetLinger(0)
					}
					uc.Close()
				}
				up.mu.Unlock()
				if got := <-held; got != "502 502 Bad Gateway\n" {
					t.Errorf("the held stream: %q, want 502", got)
				}
				if got := <-waiting; got != "200 ok" {
					t.Errorf("the waiting request: %q, want 200 ok", got)
				}
				if n := up.accepted.Load(); n != 2 {
					t.Errorf("%d connections to the server, want 2", n)
				}
				if st := serverTotals(p, up.addr); st.Failures != 0 {
					t.Errorf("%d failed connects counted, want 0", st.Failures)
				}
			})
		}
	})
}
