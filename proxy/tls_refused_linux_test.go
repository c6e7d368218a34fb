package proxy

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSMaxHandshakesPerListener: the clients a listener's
// max_handshakes refuses are counted by listener
// (spindle_proxy_listener_tls_handshakes_refused_total), another
// listener's count untouched, besides the engine's total; a reload that
// keeps the listener keeps its count, and one that makes it a new
// listener on the same socket (another mode) starts it again.
func TestTLSMaxHandshakesPerListener(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newUpstream(t, nil)
		mk := func(mode string) *Config {
			cfg := testConfig(b, u.addr)
			tc := &TLSConfig{CertFile: cert, KeyFile: key, HandshakeTimeout: Duration(time.Minute), MaxHandshakes: 1}
			cfg.Listeners = []ListenerConfig{
				{Name: "a", Listen: "127.0.0.1:0", Mode: mode, Pool: "app", TLS: tc},
				{Name: "b", Listen: "127.0.0.1:0", Mode: ModeTCP, Pool: "app", TLS: tc},
			}
			return cfg
		}
		p := startProxy(t, mk(ModeTCP))
		addr := p.Addr("a").String()
		silent, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		waitFor(t, "a handshake in progress", func() bool { return p.e.Stats().TLSHandshakes == 1 })
		if second, err := net.Dial("tcp", addr); err == nil {
			defer second.Close()
			second.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err = second.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("a second silent client: %v, want a reset", err)
			}
		}
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
