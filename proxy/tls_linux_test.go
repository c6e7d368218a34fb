package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// tlsClient returns an http.Client to p's listener "web" over TLS, trusting
// ca, offering h2 and http/1.1 by ALPN (h2) or http/1.1 alone; and its
// base URL.
func tlsClient(t *testing.T, p *Proxy, ca *testCA, h2 bool) (*http.Client, string) {
	cc := &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"http/1.1"}}
	if h2 {
		cc.NextProtos = []string{"h2", "http/1.1"}
	}
	tr := &http.Transport{TLSClientConfig: cc, ForceAttemptHTTP2: h2, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, "https://" + p.Addr("web").String()
}

// forwardedEcho answers with the request's X-Forwarded-Proto and protocol
// in X-Got-XFP and X-Got-Proto, and its body (its sum in X-Sum).
func forwardedEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Got-XFP", strings.Join(r.Header.Values("X-Forwarded-Proto"), ","))
	w.Header().Set("X-Got-Proto", r.Proto)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Sum", sum(body))
	w.Write(body)
}

// TestTLSHTTP: a mode http listener with tls serves Go's http.Client over
// HTTPS: HTTP/1.1 where the client offers http/1.1 alone, HTTP/2 where it
// offers h2 (ALPN, the listener's default alpn), on one connection each,
// to an HTTP/1.1 pool and to an h2c one; a 1 MiB POST comes back whole;
// the servers see X-Forwarded-Proto: https, the client's own
// (untrusted) http replaced.
func TestTLSHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		big := randomBytes(11, 1<<20)
		for _, pool := range []string{ProtocolHTTP1, ProtocolH2C} {
			var addr, upProto string
			if pool == ProtocolH2C {
				addr, upProto = newH2CUp(t, http.HandlerFunc(forwardedEcho), nil).addr, "HTTP/2.0"
			} else {
				addr, upProto = newHTTPUpstream(t, forwardedEcho).addr, "HTTP/1.1"
			}
			cfg := httpConfig(b, addr)
			cfg.Pools[0].Protocol = pool
			cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
			p := startProxy(t, cfg)
			for _, h2 := range []bool{false, true} {
				what := fmt.Sprintf("%s pool, h2 offered %v", pool, h2)
				c, base := tlsClient(t, p, ca, h2)
				wantProto, wantALPN := 1, "http/1.1"
				if h2 {
					wantProto, wantALPN = 2, "h2"
				}
				for i, body := range [][]byte{nil, big} {
					req, _ := http.NewRequest("POST", base+"/", bytes.NewReader(body))
					req.Header.Set("X-Forwarded-Proto", "http") // (untrusted: replaced)
					resp, err := c.Do(req)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) || resp.Header.Get("X-Sum") != sum(body) {
						t.Fatalf("%s: POST %d: %d, %d bytes back (%v), want 200 and the %d sent", what, i, resp.StatusCode, len(got), err, len(body))
					}
					if resp.ProtoMajor != wantProto || resp.TLS == nil || resp.TLS.NegotiatedProtocol != wantALPN {
						t.Errorf("%s: response over %s, ALPN %q; want HTTP/%d, %q", what, resp.Proto, resp.TLS.NegotiatedProtocol, wantProto, wantALPN)
					}
					if xfp := resp.Header.Get("X-Got-XFP"); xfp != "https" {
						t.Errorf("%s: X-Forwarded-Proto at the server %q, want https", what, xfp)
					}
					if got := resp.Header.Get("X-Got-Proto"); got != upProto {
						t.Errorf("%s: the server got %s, want %s", what, got, upProto)
					}
				}
			}
			lt := p.Totals().Listeners[0]
			if lt.Accepted != 2 || lt.H2Connections != 1 || lt.H2Streams != 2 || lt.Requests != 4 || lt.TLSHandshakeFailures != 0 {
				t.Errorf("%s pool: accepted %d, h2 connections %d, streams %d, requests %d, handshake failures %d; want 2, 1, 2, 4, 0", pool, lt.Accepted, lt.H2Connections, lt.H2Streams, lt.Requests, lt.TLSHandshakeFailures)
			}
		}
	})
}

// TestTLSHTTPPlainXFP: a plain listener's servers still get
// X-Forwarded-Proto: http, from an HTTP/1.1 client and an h2c one.
func TestTLSHTTPPlainXFP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, forwardedEcho)
		p := startProxy(t, h2cConfig(b, u.addr))
		c1, base := client(t, p)
		c2, _ := h2Client(t, p)
		for _, c := range []*http.Client{c1, c2} {
			resp, _ := get(t, c, base+"/")
			if xfp := resp.Header.Get("X-Got-XFP"); xfp != "http" {
				t.Errorf("%s: X-Forwarded-Proto at the server %q, want http", resp.Proto, xfp)
			}
		}
	})
}

// TestTLSTCP: a mode tcp listener with tls sends its clients' plaintext
// to a plain server and encrypts the answers: 1 MiB echoed intact, the
// server's first bytes the client's own; the handshake chooses no ALPN
// protocol (none offered by default); the client's close_notify is the
// server's EOF, and the server's close the client's.
func TestTLSTCP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		first := make(chan []byte, 1)
		u := newUpstream(t, func(c net.Conn) {
			hello := make([]byte, 5)
			if _, err := io.ReadFull(c, hello); err != nil {
				return
			}
			first <- hello
			c.Write(hello)
			echo(c)
		})
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p := startProxy(t, cfg)
		c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := roundTrip(c, "hello"); err != nil {
			t.Fatal(err)
		}
		if got := <-first; string(got) != "hello" {
			t.Fatalf("the server got %q first, want the client's plaintext hello", got)
		}
		if st := c.ConnectionState(); st.NegotiatedProtocol != "" || st.Version != tls.VersionTLS13 {
			t.Errorf("ALPN %q, version %#x; want none (mode tcp offers none) and TLS 1.3", st.NegotiatedProtocol, st.Version)
		}
		big := randomBytes(3, 1<<20)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Write(big)
			if err == nil {
				err = c.CloseWrite() // close_notify
			}
			errc <- err
		}()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(c) // to the server's close, passed on
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("echoed %d bytes (%v), want the 1 MiB sent, then the end", len(got), err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the client closed on the proxy", func() bool { return p.Totals().Listeners[0].Active == 0 })
	})
}

// TestTLSHandshakeFailures: clients whose handshake fails, plain text,
// one that does not trust the certificate, one that offers only TLS 1.2
// to a listener with min_version 1.3, and one that sends nothing past
// handshake_timeout, are closed and counted
// (spindle_proxy_listener_tls_handshake_failures_total), not accepted and
// without a connection to the server; the listener serves the next
// client. The handshake_timeout of 2 s bounds the good client's
// handshake too, which under -race on a loaded machine took longer than
// the 300 ms it was (counted as a fifth failure); the silent client
// connects first and its end is read last, so that its wait overlaps the
// others'.
func TestTLSHandshakeFailures(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newUpstream(t, nil)
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, MinVersion: TLS13, HandshakeTimeout: Duration(2 * time.Second)}
		p := startProxy(t, cfg)
		addr := p.Addr("web").String()
		silent := dial(t, p)
		plain := dial(t, p)
		if _, err := io.WriteString(plain, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if err := endOf(plain); err != nil {
			t.Errorf("plain text: %v", err)
		}
		if _, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "web.test"}); err == nil {
			t.Error("a client that does not trust the certificate connected")
		}
		if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.roots, ServerName: "web.test", MaxVersion: tls.VersionTLS12}); err == nil {
			t.Error("a TLS 1.2 client connected to min_version 1.3")
		}
		if err := endOf(silent); err != nil {
			t.Errorf("a client that sends nothing: %v", err)
		}
		waitFor(t, "4 handshake failures counted", func() bool { return p.Totals().Listeners[0].TLSHandshakeFailures == 4 })
		if got := scrape(t, p)[`spindle_proxy_listener_tls_handshake_failures_total{listener="web"}`]; got != 4 {
			t.Errorf("spindle_proxy_listener_tls_handshake_failures_total %v, want 4", got)
		}
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.roots, ServerName: "web.test"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := roundTrip(c, "after the failures"); err != nil {
			t.Fatal(err)
		}
		if lt := p.Totals().Listeners[0]; lt.Accepted != 1 || lt.TLSHandshakeFailures != 4 || u.accepted.Load() != 1 {
			t.Errorf("accepted %d, handshake failures %d, server connections %d; want 1, 4, 1", lt.Accepted, lt.TLSHandshakeFailures, u.accepted.Load())
		}
	})
}

// endOf reads c to its end, which must come within 10 s: an EOF or a
// reset, whatever came before (an alert).
func endOf(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err == nil || errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	return fmt.Errorf("read: %v, want the connection closed", err)
}

// TestTLSSNI: a listener with several certificates gives each client the
// one its server name matches (a wildcard too), the first (cert_file's)
// for a name none matches and for a client that sends none.
func TestTLSSNI(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		a, ak := ca.issue(t, "a", "a.test")
		bc, bk := ca.issue(t, "b", "b.test")
		wc, wk := ca.issue(t, "wild", "*.c.test")
		cfg := testConfig(b, newUpstream(t, nil).addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: a, KeyFile: ak, Certificates: []CertificateConfig{{bc, bk}, {wc, wk}}}
		p := startProxy(t, cfg)
		for _, tc := range []struct{ name, want string }{{"b.test", "b"}, {"x.c.test", "wild"}, {"a.test", "a"}, {"other.test", "a"}, {"", "a"}} {
			c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{ServerName: tc.name, InsecureSkipVerify: true})
			if err != nil {
				t.Fatalf("%q: %v", tc.name, err)
			}
			if got := c.ConnectionState().PeerCertificates[0].Subject.CommonName; got != tc.want {
				t.Errorf("server name %q: got certificate %s, want %s", tc.name, got, tc.want)
			}
			c.Close()
		}
	})
}

// peerName returns the common name of the certificate c's server showed,
// c's ConnectionState.PeerCertificates (on a resumption, the session's).
func peerName(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].Subject.CommonName }

// TestTLSReload: a reload reads the certificate files again: a new client
// gets the renewed certificate, a connection open from before carries on,
// and a client resumes its session from before (the socket's ticket keys
// stand); a reload's min_version applies to the next handshakes. Refused,
// changing nothing: a key file gone, and on sockets the reload keeps tls
// turned off or on, or handshake_timeout changed.
func TestTLSReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "one", "web.test")
		u := newUpstream(t, nil)
		// config is the listener web with tls (edited by edit) and a plain
		// one, side.
		config := func(edit func(*ListenerConfig)) *Config {
			cfg := testConfig(b, u.addr)
			cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
			cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "side", Listen: "127.0.0.1:0", Pool: "app"})
			if edit != nil {
				edit(&cfg.Listeners[0])
			}
			return cfg
		}
		p := startProxy(t, config(nil))
		addr := p.Addr("web").String()
		sessions := tls.NewLRUClientSessionCache(4)
		dialTLS := func(t *testing.T, cc *tls.Config) *tls.Conn {
			t.Helper()
			c, err := tls.Dial("tcp", addr, cc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		trusting := &tls.Config{RootCAs: ca.roots, ServerName: "web.test"}
		resuming := &tls.Config{RootCAs: ca.roots, ServerName: "web.test", ClientSessionCache: sessions}
		old := dialTLS(t, resuming)
		if err := roundTrip(old, "before"); err != nil { // (the session ticket read)
			t.Fatal(err)
		}
		if got := peerName(old); got != "one" {
			t.Fatalf("certificate %s, want one", got)
		}

		ca.issueTo(t, cert, key, "two", "web.test")
		mustReload(t, p, config(nil))
		resumed := dialTLS(t, resuming)
		if !resumed.ConnectionState().DidResume {
			t.Error("a client with a session from before the reload did not resume it")
		}
		fresh := dialTLS(t, trusting)
		if got := peerName(fresh); got != "two" {
			t.Errorf("a new client after the reload got certificate %s, want two (renewed)", got)
		}
		for _, c := range []*tls.Conn{old, resumed, fresh} {
			if err := roundTrip(c, "after"); err != nil {
				t.Fatal(err)
			}
		}

		if err := os.Rename(key, key+".gone"); err != nil {
			t.Fatal(err)
		}
		err := p.Reload(config(nil))
		if want := "listeners[0] (web).tls.key_file: stat " + key + ": no such file or directory"; err == nil || err.Error() != want {
			t.Errorf("Reload without the key file: %v, want %q", err, want)
		}
		if err := os.Rename(key+".gone", key); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			what string
			edit func(*ListenerConfig)
			want string
		}{
			{"tls off", func(l *ListenerConfig) { l.TLS = nil }, "listeners[0] (web).tls: removed from the socket the reload keeps (" + addr + ", listener web's): it is set when a socket opens"},
			{"tls on", func(l *ListenerConfig) { l.Name = "side" }, "listeners[0] (side).tls: added on the socket the reload keeps"},
			{"handshake_timeout", func(l *ListenerConfig) { l.TLS.HandshakeTimeout = Duration(time.Second) }, "listeners[0] (web).tls.handshake_timeout: changed from 10s to 1s on the socket the reload keeps"},
		} {
			cfg := config(tc.edit)
			if tc.what == "tls on" {
				cfg.Listeners[1].Name = "web" // (the names swapped: side gets tls)
			}
			if err := p.Reload(cfg); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Reload, %s: %v, want an error beginning %q", tc.what, err, tc.want)
			}
		}
		if got := peerName(dialTLS(t, trusting)); got != "two" {
			t.Errorf("after the refused reloads: certificate %s, want two", got)
		}
		if c, err := net.Dial("tcp", p.Addr("side").String()); err != nil {
			t.Fatal(err)
		} else {
			defer c.Close()
			if err := roundTrip(c, "plain"); err != nil {
				t.Errorf("the plain listener after the refused reloads: %v", err)
			}
		}

		mustReload(t, p, config(func(l *ListenerConfig) { l.TLS.MinVersion = TLS13 }))
		if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.roots, ServerName: "web.test", MaxVersion: tls.VersionTLS12}); err == nil {
			t.Error("a TLS 1.2 client connected after a reload to min_version 1.3")
		}
		if got := peerName(dialTLS(t, trusting)); got != "two" {
			t.Errorf("after the min_version reload: certificate %s, want two", got)
		}
	})
}

// TestTLSHTTPUpgrade: over TLS, a request answered 101 makes a tunnel as
// over TCP: the bytes sent with the request head and 256 KiB after it
// come back from the server, decrypted for it and encrypted for the
// client; the server got X-Forwarded-Proto: https.
func TestTLSHTTPUpgrade(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		cfg := httpConfig(b, newUpgradeUpstream(t).addr)
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p := startProxy(t, cfg)
		c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if xfp := checkTunnel(t, c).Header.Get("X-Got-XFP"); xfp != "https" {
			t.Errorf("X-Forwarded-Proto at the server %q, want https", xfp)
		}
	})
}
