package proxy

import (
	"crypto/tls"
	"io"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSH2PrefaceMismatch: a client ALPN gave h2 whose first bytes are
// not the HTTP/2 preface, closed without an answer, is counted by its
// listener (spindle_proxy_listener_h2_preface_failures_total) and logged
// with the listener, its address and what it sent without its content
// (the count of its first bytes, the version and method of its request
// line, not the target nor the fields, a credential among them); a
// client that sends the preface is not counted. The
// listener's failed handshakes are logged under a limit of their own.
func TestTLSH2PrefaceMismatch(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newHTTPUpstream(t, forwardedEcho)
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p, lg := startProxyLog(t, cfg)
		h2c, base := tlsClient(t, p, ca, true)
		if resp, _ := get(t, h2c, base+"/"); resp.ProtoMajor != 2 || resp.StatusCode != 200 {
			t.Fatalf("an HTTP/2 client: %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
		}
		c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /\x00\xff HTTP/1.1\r\nHost: a-long-enough-name\r\nAuthorization: Bearer s3cret\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if err := endOf(c); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the client logged", func() bool { return len(lg.with("HTTP/2 preface")) > 0 })
		line := lg.with("HTTP/2 preface")[0]
		if want := "its first bytes: 76 bytes, an HTTP/1.1 request line, method GET"; !strings.Contains(line, "listener web:") || !strings.Contains(line, c.LocalAddr().String()) || !strings.HasSuffix(line, want) {
			t.Errorf("log line %q, want the listener, the client %v and %s", line, c.LocalAddr(), want)
		}
		if got := scrape(t, p)[`spindle_proxy_listener_h2_preface_failures_total{listener="web"}`]; got != 1 {
			t.Errorf("spindle_proxy_listener_h2_preface_failures_total %v, want 1", got)
		}
		// A failed handshake's line, the listener's preface line
		// notwithstanding: limited apart.
		notTLS(t, p.Addr("web").String())
		waitFor(t, "the failed handshake logged", func() bool { return len(lg.with("listener web: TLS handshake with")) == 1 })
	})
}
