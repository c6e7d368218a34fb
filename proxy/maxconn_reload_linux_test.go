package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadListenerMaxConnsCountsOpen: a reload that gives a listener
// without one a max_conns counts the clients it has open against it, in
// mode tcp and in mode http (kept-alive clients that have sent no
// request since): with two open and max_conns 2, a third is turned
// away, and one is taken again once one of the two has gone.
func TestReloadListenerMaxConnsCountsOpen(t *testing.T) {
	for _, mode := range []string{ModeTCP, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			var u string
			if mode == ModeTCP {
				u = newUpstream(t, nil).addr
			} else {
				u = newUpstream(t, rawHTTPServer).addr
			}
			conf := func(maxConns int) *Config {
				cfg := testConfig(engine.BackendEpoll, u)
				cfg.Engine.CPUs = nil // the bound holds across loops
				cfg.Listeners[0].Mode = mode
				cfg.Listeners[0].MaxConns = maxConns
				return cfg
			}
			use := func(c net.Conn) error {
				if mode == ModeTCP {
					return roundTrip(c, "in")
				}
				if code := getStatus(c, "/"); code != 200 {
					t.Fatalf("GET: %d, want 200", code)
				}
				return nil
			}
			p := startProxy(t, conf(0))
			c1, c2 := dial(t, p), dial(t, p)
			for _, c := range []net.Conn{c1, c2} {
				if err := use(c); err != nil {
					t.Fatal(err)
				}
			}
			mustReload(t, p, conf(2))
			c3 := dial(t, p)
			c3.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := c3.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("third client with 2 open and max_conns 2: read %d, %v; want it closed", n, err)
			}
			if l := p.Totals().Listeners[0]; l.Rejected != 1 || l.Active != 2 {
				t.Fatalf("rejected %d, active %d; want 1, 2", l.Rejected, l.Active)
			}
			c1.Close()
			waitFor(t, "the first client to close", func() bool { return p.Totals().Listeners[0].Active == 1 })
			if err := use(dial(t, p)); err != nil {
				t.Errorf("a client once one has gone: %v", err)
			}
		})
	}
}

// TestMaxConnsReaddedServer: a server with max_conns 1 and a tunnel open
// to it, removed by a reload (alone, or with its pool) and added again by
// the next, counts the tunnel against its cap: a second client waits in
// the queue (the server accepts no second connection), and goes to the
// server once the first has closed, woken by its close (not at its
// queue_timeout, 10s).
func TestMaxConnsReaddedServer(t *testing.T) {
	for _, pool := range []bool{false, true} {
		t.Run(map[bool]string{false: "server", true: "pool"}[pool], func(t *testing.T) {
			a, b := newUpstream(t, nil), newUpstream(t, nil)
			p := startProxy(t, capConfig(engine.BackendEpoll, ModeTCP, 1, 1, a.addr))
			c1 := dial(t, p)
			if err := roundTrip(c1, "one"); err != nil {
				t.Fatal(err)
			}
			cfg := capConfig(engine.BackendEpoll, ModeTCP, 1, 1, b.addr)
			if pool {
				cfg.Pools[0].Name, cfg.Listeners[0].Pool = "other", "other"
			}
			mustReload(t, p, cfg)
			mustReload(t, p, capConfig(engine.BackendEpoll, ModeTCP, 1, 1, a.addr))
			c2 := dial(t, p)
			if _, err := c2.Write([]byte("two")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			if n := a.accepted.Load(); n != 1 {
				t.Errorf("the server accepted %d connections under max_conns 1 (%+v)", n, serverTotals(p, a.addr))
			}
			c1.Close()
			start := time.Now()
			got := make([]byte, 3)
			c2.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c2, got); err != nil || string(got) != "two" {
				t.Errorf("second client: %q, %v after %v", got, err, time.Since(start))
			}
		})
	}
}
