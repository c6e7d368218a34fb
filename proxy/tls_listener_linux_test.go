package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// TestTLSH2CipherSuites: a listener offering h2 refuses a TLS 1.2 client
// whose only cipher suite is one RFC 9113 9.2.2 prohibits (ECDHE with
// CBC), counted as a failed handshake, and takes one with ECDHE and GCM;
// a listener offering http/1.1 alone takes the CBC suite (crypto/tls's
// defaults).
func TestTLSH2CipherSuites(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newHTTPUpstream(t, forwardedEcho)
		for _, alpn := range []Tokens{nil, {"http/1.1"}} {
			cfg := httpConfig(b, u.addr)
			cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, ALPN: alpn}
			p := startProxy(t, cfg)
			h2 := alpn == nil // (the default offers h2)
			for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256} {
				cbc := suite == tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA
				c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test",
					MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}, NextProtos: []string{"http/1.1"}})
				if h2 && cbc {
					if err == nil {
						c.Close()
						t.Errorf("%s to a listener offering h2: connected", tls.CipherSuiteName(suite))
					}
					continue
				}
				if err != nil {
					t.Errorf("%s, alpn %q: %v", tls.CipherSuiteName(suite), alpn, err)
					continue
				}
				if got := c.ConnectionState().CipherSuite; got != suite {
					t.Errorf("cipher suite %s, want %s", tls.CipherSuiteName(got), tls.CipherSuiteName(suite))
				}
				c.Close()
			}
			want := uint64(0)
			if h2 {
				want = 1
			}
			waitFor(t, "the handshakes to be counted", func() bool { lt := p.Totals().Listeners[0]; return lt.TLSHandshakeFailures+lt.Accepted == 2 })
			if got := p.Totals().Listeners[0].TLSHandshakeFailures; got != want {
				t.Errorf("alpn %q: %d handshake failures, want %d", alpn, got, want)
			}
		}
	})
}

// TestTLSALPNMismatch: a client ALPN gave h2 that sends an HTTP/1.1
// request instead of the HTTP/2 preface is closed without an answer
// (RFC 9113 3.4: a connection error) and its request reaches no server;
// a client ALPN gave http/1.1 that sends the HTTP/2 preface gets an
// HTTP/1.1 error, not HTTP/2 (over TLS only ALPN chooses HTTP/2).
func TestTLSALPNMismatch(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newHTTPUpstream(t, forwardedEcho)
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p := startProxy(t, cfg)
		dialALPN := func(proto string) *tls.Conn {
			c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{proto}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if got := c.ConnectionState().NegotiatedProtocol; got != proto {
				t.Fatalf("ALPN chose %q, want %q", got, proto)
			}
			return c
		}
		c := dialALPN("h2")
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if got, err := io.ReadAll(c); len(got) != 0 || err != nil {
			t.Errorf("h2 client sending HTTP/1.1: got %q (%v), want the connection closed without a byte", got, err)
		}
		c = dialALPN("http/1.1")
		if _, err := io.WriteString(c, h2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		head, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(head, "HTTP/1.1 4") && !strings.HasPrefix(head, "HTTP/1.1 5") {
			t.Errorf("http/1.1 client sending the HTTP/2 preface: got %q (%v), want an HTTP/1.1 error", head, err)
		}
		if n := u.accepted.Load(); n != 0 {
			t.Errorf("the server got %d connections, want none", n)
		}
		if lt := p.Totals().Listeners[0]; lt.H2Connections != 0 {
			t.Errorf("%d HTTP/2 connections, want none", lt.H2Connections)
		}
	})
}

// TestTLSHandshakeFailureLogged: a failed handshake on a listener is
// logged with the listener, the client's address and the reason.
func TestTLSHandshakeFailureLogged(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newUpstream(t, nil)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p, lg := startProxyLog(t, cfg)
		from := notTLS(t, p.Addr("web").String())
		waitFor(t, "the failure logged", func() bool { return len(lg.with("TLS handshake with")) > 0 })
		line := lg.with("TLS handshake with")[0]
		if !strings.Contains(line, "listener web:") || !strings.Contains(line, from.String()) || !strings.Contains(line, "first record does not look like a TLS handshake") {
			t.Errorf("log line %q, want the listener, the client %v and the reason", line, from)
		}
	})
}

// TestLogLimit: a logLimit lets a line through, holds those that come
// before its next time (counted), and says how many it held in the next
// line it lets through.
func TestLogLimit(t *testing.T) {
	lg := &proxyLog{}
	p := &Proxy{start: time.Now(), opt: Options{Logf: lg.logf}}
	var r logLimit
	r.logf(p, "line %d", 1)
	r.next.Store(int64(time.Hour) + p.now()) // (the next an hour away)
	r.logf(p, "line %d", 2)
	r.logf(p, "line %d", 3)
	if r.held.Load() != 2 || len(lg.with("line")) != 1 {
		t.Fatalf("held %d, lines %q; want 2 held, line 1 alone", r.held.Load(), lg.with("line"))
	}
	r.next.Store(0)
	r.logf(p, "line %d", 4)
	if got := lg.with("line"); len(got) != 2 || got[1] != "line 4 (2 more such lines held back)" || r.held.Load() != 0 {
		t.Errorf("lines %q, held %d; want line 4 saying 2 were held back", got, r.held.Load())
	}
}

// schemeApp answers each request with its :scheme and its
// x-forwarded-proto as the body ("https http").
type schemeApp struct{ earlyApp }

func (schemeApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	body := slices.Clone(r.Scheme)
	for _, f := range r.Fields {
		if string(f.Name) == "x-forwarded-proto" {
			body = append(append(body, ' '), f.Value...)
		}
	}
	if s.WriteHeaders(id, 200, []hpack.Field{{Name: []byte("content-length"), Value: strconv.AppendInt(nil, int64(len(body)), 10)}}, false) == nil {
		s.WriteData(id, body, true)
	}
}

// TestH2PoolScheme: an HTTP/2 pool's server gets the :scheme of the
// proxy's connection to it, http for h2c and https for h2 (over TLS), as
// an HTTP/1.1 server reconstructs the scheme from its own connection, and
// the client's scheme in x-forwarded-proto: https behind a TLS listener,
// http behind a plain one; for HTTP/1.1 and HTTP/2 clients alike. (The
// client's scheme went as :scheme before: an h2 pool behind a plain
// listener got http over TLS, an h2c pool behind a TLS listener https.)
func TestH2PoolScheme(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		h2c := newUpstream(t, func(c net.Conn) { serveH2(c, schemeApp{}) })
		h2tls := newTLSUp(t, ca, "app", []string{"app.test"}, func(c *tls.Config) { c.NextProtos = []string{"h2"} }, nil,
			func(c *tls.Conn) { serveH2(c, schemeApp{}) })
		for _, proto := range []string{ProtocolH2C, ProtocolH2} {
			for _, secure := range []bool{false, true} {
				cfg := httpConfig(b, h2c.addr)
				cfg.Pools[0].Protocol = proto
				scheme, xfp := "http", "http"
				if proto == ProtocolH2 {
					cfg.Pools[0].Servers = Servers(h2tls.addr)
					cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
					scheme = "https"
				}
				if secure {
					cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
					xfp = "https"
				} else {
					cfg.Listeners[0].H2C = true
				}
				p := startProxy(t, cfg)
				for _, h2 := range []bool{false, true} {
					var c *http.Client
					var base string
					switch {
					case secure:
						c, base = tlsClient(t, p, ca, h2)
					case h2:
						c, base = h2Client(t, p)
					default:
						c, base = client(t, p)
					}
					resp, body := get(t, c, base+"/")
					if want := scheme + " " + xfp; resp.StatusCode != 200 || body != want {
						t.Errorf("pool %s, TLS listener %v, HTTP/2 client %v: status %d, :scheme and x-forwarded-proto %q; want %q", proto, secure, h2, resp.StatusCode, body, want)
					}
				}
			}
		}
	})
}
