package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/testnet"
)

// TestTLSH2RecordsPerResponse: an HTTP/2 response to a client on a TLS
// listener goes as one TLS record, its HEADERS and DATA frames together
// (each engine.Conn.Write is a record of its own, and the response went
// as three: the HEADERS pending, the DATA frame's header, the body).
func TestTLSH2RecordsPerResponse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a small body")) })
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p := startProxy(t, cfg)
		if per := h2RecordsPerResponse(t, p, ca); per > 1.1 {
			t.Errorf("%.2f TLS records per HTTP/2 response, want 1", per)
		}
	})
}

// h2RecordsPerResponse makes GETs of "/" answered "a small body" from
// one HTTP/2 client over TLS to p's listener "web" (its certificate
// ca's, for web.test) and returns the TLS records it read per response,
// once the connection's first exchanges are behind.
func h2RecordsPerResponse(t *testing.T, p *Proxy, ca *testCA) float64 {
	t.Helper()
	var mu sync.Mutex
	var rc *testnet.RecordCounter
	cc := &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"h2"}}
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: cc, DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if rc != nil {
			t.Error("a second connection")
		}
		rc = &testnet.RecordCounter{Conn: raw}
		c := tls.Client(rc, cc)
		return c, c.HandshakeContext(ctx)
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	url := "https://" + p.Addr("web").String() + "/"
	for range 5 { // the SETTINGS exchanges, session tickets and window updates behind
		if resp, body := get(t, c, url); resp.ProtoMajor != 2 || body != "a small body" {
			t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, body)
		}
	}
	time.Sleep(50 * time.Millisecond)
	const n = 50
	before := rc.Records()
	for range n {
		get(t, c, url)
	}
	return float64(rc.Records()-before) / n
}
