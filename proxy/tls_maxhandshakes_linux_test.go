package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSMaxHandshakes: a tls listener with max_handshakes 2 holds two
// clients that connect and never send a ClientHello, resets a third at
// once (counted in spindle_proxy_engine_tls_handshakes_refused_total),
// and takes a real client once one of the silent two has gone. A reload
// keeping the socket cannot change max_handshakes (named), and one below
// -1 is refused.
func TestTLSMaxHandshakes(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newUpstream(t, nil)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, HandshakeTimeout: Duration(time.Minute), MaxHandshakes: 2}
		p := startProxy(t, cfg)
		addr := p.Addr("web").String()
		rawDial := func() net.Conn {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		silent := []net.Conn{rawDial(), rawDial()}
		waitFor(t, "2 handshakes in progress", func() bool { return p.e.Stats().TLSHandshakes == 2 })
		// The reset may come before the connect returns (loopback).
		third, err := net.Dial("tcp", addr)
		if err == nil {
			defer third.Close()
			third.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = third.Read(make([]byte, 1))
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a third silent client: %v, want a reset", err)
		}
		if got := scrape(t, p)["spindle_proxy_engine_tls_handshakes_refused_total"]; got != 1 {
			t.Errorf("spindle_proxy_engine_tls_handshakes_refused_total %v, want 1", got)
		}
		if got := scrape(t, p)["spindle_proxy_engine_tls_handshakes"]; got != 2 {
			t.Errorf("spindle_proxy_engine_tls_handshakes %v, want 2", got)
		}
		silent[0].Close()
		waitFor(t, "the closed client's place given back", func() bool { return p.e.Stats().TLSHandshakes == 1 })
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.roots, ServerName: "web.test"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := roundTrip(c, "in the freed place"); err != nil {
			t.Fatal(err)
		}

		cfg2 := testConfig(b, u.addr)
		cfg2.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, HandshakeTimeout: Duration(time.Minute), MaxHandshakes: 3}
		if err := p.Reload(cfg2); err == nil || !strings.Contains(err.Error(), "listeners[0] (web).tls.max_handshakes: changed from 2 to 3 on the socket the reload keeps") {
			t.Errorf("reload changing max_handshakes: %v", err)
		}
		cfg2.Listeners[0].TLS.MaxHandshakes = -2
		if err := p.Reload(cfg2); err == nil || !strings.Contains(err.Error(), "listeners[0] (web).tls.max_handshakes: -2 below -1") {
			t.Errorf("max_handshakes -2: %v", err)
		}
	})
}
