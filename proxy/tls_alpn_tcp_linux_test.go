package proxy

import (
	"crypto/tls"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSTCPALPNOfferedToServer: behind a mode tcp listener with
// tls.alpn, a TLS pool's server is offered the one protocol the client
// chose, and speaks it, as the client was told; a server that takes ALPN
// but not that protocol fails the handshake, a failed connect (counted in
// the server's TLS handshake failures) after which the next server is
// tried.
func TestTLSTCPALPNOfferedToServer(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		protos := func(ps ...string) func(*tls.Config) {
			return func(c *tls.Config) { c.NextProtos = ps }
		}
		// Each server writes the protocol its handshake chose.
		say := func(c *tls.Conn) {
			if c.Handshake() == nil {
				io.WriteString(c, "["+c.ConnectionState().NegotiatedProtocol+"]")
			}
			c.Close()
		}
		other := newTLSUp(t, ca, "app", []string{"app.test"}, protos("x-c"), nil, say)
		good := newTLSUp(t, ca, "app", []string{"app.test"}, protos("x-b", "x-a"), nil, say)
		cfg := testConfig(b, other.addr, good.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, ALPN: Tokens{"x-a", "x-b"}}
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		p := startProxy(t, cfg)
		for _, proto := range []string{"x-a", "x-b"} {
			c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{proto}})
			if err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			c.Close()
			if string(got) != "["+proto+"]" || err != nil {
				t.Errorf("a client that chose %s: read %q, %v; want [%s] and the end", proto, got, err, proto)
			}
		}
		good.mu.Lock()
		offered := slices.Clone(good.alpn)
		good.mu.Unlock()
		if want := [][]string{{"x-a"}, {"x-b"}}; !slices.EqualFunc(offered, want, slices.Equal) {
			t.Errorf("the server was offered %q, want %q", offered, want)
		}
		if o := serverTotals(p, other.addr); o.Failures == 0 || o.TLSHandshakeFailures != o.Failures || o.Connects != 0 {
			t.Errorf("the server without the protocol: %d failures, %d of them handshakes, %d connects; want handshake failures alone", o.Failures, o.TLSHandshakeFailures, o.Connects)
		}
	})
}
