package proxy

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSLogPerPool: the log of failed TLS handshakes is limited per pool
// and per listener: two pools' failed connects and two listeners' failed
// handshakes in one interval are each logged.
func TestTLSLogPerPool(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca, other := newTestCA(t), newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		bad := newTLSUp(t, other, "bad", []string{"app.test"}, nil, forwardedEcho, nil)
		ltls := &TLSConfig{CertFile: cert, KeyFile: key}
		utls := &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		cfg := httpConfig(b, bad.addr)
		cfg.Listeners = []ListenerConfig{
			{Name: "a", Listen: "127.0.0.1:0", Mode: ModeHTTP, Pool: "pa", ConnectTimeout: Duration(2 * time.Second)},
			{Name: "b", Listen: "127.0.0.1:0", Mode: ModeHTTP, Pool: "pb", ConnectTimeout: Duration(2 * time.Second)},
			{Name: "ta", Listen: "127.0.0.1:0", Mode: ModeHTTP, Pool: "pa", TLS: ltls},
			{Name: "tb", Listen: "127.0.0.1:0", Mode: ModeHTTP, Pool: "pa", TLS: ltls},
		}
		cfg.Pools = []PoolConfig{{Name: "pa", Servers: Servers(bad.addr), TLS: utls}, {Name: "pb", Servers: Servers(bad.addr), TLS: utls}}
		p, lg := startProxyLog(t, cfg)
		c := anyClient(t)
		for _, ln := range []string{"a", "b"} {
			if resp, _ := get(t, c, "http://"+p.Addr(ln).String()+"/"); resp.StatusCode != 502 {
				t.Errorf("listener %s: status %d, want 502", ln, resp.StatusCode)
			}
		}
		for _, ln := range []string{"ta", "tb"} {
			notTLS(t, p.Addr(ln).String())
		}
		who := []string{"pool pa: server", "pool pb: server", "listener ta: TLS handshake", "listener tb: TLS handshake"}
		waitFor(t, "each logged", func() bool {
			for _, w := range who {
				if len(lg.with(w)) == 0 {
					return false
				}
			}
			return true
		})
		for _, w := range who {
			if got := lg.with(w); len(got) != 1 {
				t.Errorf("%q: lines %q, want one", w, got)
			}
		}
	})
}

// notTLS sends addr, a TLS listener's, an HTTP/1.1 request, and reads to
// the end the failed handshake closes. It returns the client's address.
func notTLS(t *testing.T, addr string) net.Addr {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := endOf(c); err != nil {
		t.Fatal(err)
	}
	return c.LocalAddr()
}

// anyClient returns an http.Client to any of the test's listeners, its
// connections closed at the test's end.
func anyClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// TestTLSLogLimitReload: a pool's and a listener's log limits follow
// their names over a reload (the same config: every listener and that
// pool made anew), so that a reload does not let through the lines its
// limit holds; and a listener or pool another name takes starts its own.
func TestTLSLogLimitReload(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	cert, key := ca.issue(t, "web", "web.test")
	bad := newTLSUp(t, other, "bad", []string{"app.test"}, nil, forwardedEcho, nil)
	mk := func(ln, pool string, idle int) *Config {
		cfg := httpConfig(engine.BackendEpoll, bad.addr)
		cfg.Listeners = []ListenerConfig{
			{Name: "a", Listen: "127.0.0.1:0", Mode: ModeHTTP, Pool: pool, ConnectTimeout: Duration(2 * time.Second)},
			{Name: ln, Listen: "127.0.0.1:0", Mode: ModeHTTP, Pool: pool, TLS: &TLSConfig{CertFile: cert, KeyFile: key}},
		}
		cfg.Pools = []PoolConfig{{Name: pool, Servers: Servers(bad.addr), MaxIdle: idle, TLS: &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}}}
		return cfg
	}
	p, lg := startProxyLog(t, mk("t", "pa", 4))
	c := anyClient(t)
	// failPool fails a request to the pool's server (logged or held
	// before the 502).
	failPool := func() {
		t.Helper()
		if resp, _ := get(t, c, "http://"+p.Addr("a").String()+"/"); resp.StatusCode != 502 {
			t.Errorf("status %d, want 502", resp.StatusCode)
		}
	}
	// logs returns the listener's and the pool's limits in force.
	logs := func() (ln, pl *logLimit) {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return &p.lns[1].logs.tls, &p.pools[0].shared.tlsLog
	}
	failPool()
	notTLS(t, p.Addr("t").String())
	waitFor(t, "the handshake failure logged", func() bool { return len(lg.with("listener t: TLS handshake with")) == 1 })
	ln, pl := logs()
	ln.next.Store(p.now() + int64(time.Hour))
	pl.next.Store(p.now() + int64(time.Hour))
	if err := p.Reload(mk("t", "pa", 5)); err != nil {
		t.Fatal(err)
	}
	ln, pl = logs()
	failPool()
	notTLS(t, p.Addr("t").String())
	waitFor(t, "the second handshake failure held", func() bool { return ln.held.Load() == 1 })
	if n, m, h := len(lg.with("pool pa: server")), len(lg.with("listener t: TLS handshake with")), pl.held.Load(); n != 1 || m != 1 || h != 1 {
		t.Errorf("after a reload: %d pool lines, %d listener lines, the pool's %d held; want 1, 1, 1", n, m, h)
	}
	// Other names: their own limits.
	if err := p.Reload(mk("u", "pb", 5)); err != nil {
		t.Fatal(err)
	}
	failPool()
	notTLS(t, p.Addr("u").String())
	waitFor(t, "the renamed listener's failure logged", func() bool { return len(lg.with("listener u: TLS handshake with")) == 1 })
	if got := lg.with("pool pb: server"); len(got) != 1 {
		t.Errorf("the renamed pool: lines %q, want one", got)
	}
}
