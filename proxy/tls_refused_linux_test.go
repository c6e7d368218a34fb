package proxy

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// refusedConfigs returns the configs of TestTLSMaxHandshakesPerListener
// and TestTLSRefusedBaseAtCommit by the mode of listener a: listeners a
// and b (mode tcp) with TLS and max_handshakes 1, to a pool of the server
// at addr.
func refusedConfigs(t *testing.T, b engine.Backend, addr string) func(mode string) *Config {
	cert, key := newTestCA(t).issue(t, "web", "web.test")
	return func(mode string) *Config {
		cfg := testConfig(b, addr)
		tc := &TLSConfig{CertFile: cert, KeyFile: key, HandshakeTimeout: Duration(time.Minute), MaxHandshakes: 1}
		cfg.Listeners = []ListenerConfig{
			{Name: "a", Listen: "127.0.0.1:0", Mode: mode, Pool: "app", TLS: tc},
			{Name: "b", Listen: "127.0.0.1:0", Mode: ModeTCP, Pool: "app", TLS: tc},
		}
		return cfg
	}
}

// holdHandshake opens a client to addr, a listener of p's with
// max_handshakes 1, that sends nothing: its handshake stays in progress
// (p's only one) until the test ends.
func holdHandshake(t *testing.T, p *Proxy, addr string) {
	t.Helper()
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	waitFor(t, "a handshake in progress", func() bool { return p.e.Stats().TLSHandshakes == 1 })
}

// refuse opens a client to addr, whose max_handshakes are all in
// progress, and waits for its reset and for the engine to have counted n
// refusals in all.
func refuse(t *testing.T, p *Proxy, addr string, n uint64) {
	t.Helper()
	if c, err := net.Dial("tcp", addr); err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err = c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a client past max_handshakes: %v, want a reset", err)
		}
	}
	waitFor(t, "the refusal counted", func() bool { return p.e.Stats().TLSHandshakesRefused == n })
}

// TestTLSMaxHandshakesPerListener: the clients a listener's
// max_handshakes refuses are counted by listener
// (spindle_proxy_listener_tls_handshakes_refused_total), another
// listener's count untouched, besides the engine's total; a reload that
// keeps the listener keeps its count, and one that makes it a new
// listener on the same socket (another mode) starts it again.
func TestTLSMaxHandshakesPerListener(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		mk := refusedConfigs(t, b, newUpstream(t, nil).addr)
		p := startProxy(t, mk(ModeTCP))
		addr := p.Addr("a").String()
		holdHandshake(t, p, addr)
		refuse(t, p, addr, 1)
		check := func(when string, a, total float64) {
			t.Helper()
			m := scrape(t, p)
			if ga, gb, gt := m[`spindle_proxy_listener_tls_handshakes_refused_total{listener="a"}`], m[`spindle_proxy_listener_tls_handshakes_refused_total{listener="b"}`], m["spindle_proxy_engine_tls_handshakes_refused_total"]; ga != a || gb != 0 || gt != total {
				t.Errorf("%s: refused a %v, b %v, engine %v; want %v, 0, %v", when, ga, gb, gt, a, total)
			}
		}
		check("at first", 1, 1)
		if err := p.Reload(mk(ModeTCP)); err != nil {
			t.Fatal(err)
		}
		check("after a reload keeping the listener", 1, 1)
		if err := p.Reload(mk(ModeHTTP)); err != nil {
			t.Fatal(err)
		}
		if got := p.Addr("a").String(); got != addr {
			t.Fatalf("listener a on %s after the reload, want its socket kept (%s)", got, addr)
		}
		check("after a reload making it mode http", 0, 1)
	})
}

// TestTLSRefusedBaseAtCommit: a listener a reload makes new on a kept
// socket (another mode) counts the refusals from the reload's commit on,
// when it is put in force: one made while the reload's generation was
// made but not committed, under the listener before it, is not its own.
// (Its base was read as the generation was made, which credited it.)
func TestTLSRefusedBaseAtCommit(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		mk := refusedConfigs(t, b, newUpstream(t, nil).addr)
		p := startProxy(t, mk(ModeTCP))
		addr := p.Addr("a").String()
		holdHandshake(t, p, addr)
		g := openGen(t, p, mk(ModeHTTP))
		refuse(t, p, addr, 1) // (under the mode tcp listener, still in force)
		if got := p.Totals().Listeners[0]; got.Name != "a" || got.TLSHandshakesRefused != 1 {
			t.Fatalf("before the commit: listener %s refused %d, want a and 1", got.Name, got.TLSHandshakesRefused)
		}
		if err := p.commit(g); err != nil {
			t.Fatal(err)
		}
		if got := p.Totals().Listeners[0].TLSHandshakesRefused; got != 0 {
			t.Errorf("the new listener a refused %d after the commit, want 0: the refusal before it was the old listener's", got)
		}
		refuse(t, p, addr, 2)
		if got := p.Totals().Listeners[0].TLSHandshakesRefused; got != 1 {
			t.Errorf("the new listener a refused %d after a refusal of its own, want 1", got)
		}
	})
}
