package proxy

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// tlsUp is a TLS server the proxy's pools connect to: Go's crypto/tls,
// serving HTTP (HTTP/2 where ALPN chose h2) or a raw stream. It records
// what each handshake brought: the server name (SNI), the client's
// certificate's common name, the protocols offered.
type tlsUp struct {
	addr string
	mu   sync.Mutex
	sni  []string
	peer []string
	alpn [][]string
}

// newTLSUp starts a TLS server with the certificate for cn (names:
// DNS names) that ca issues, its crypto/tls config edited by edit (nil:
// none), serving each connection with serve (nil: HTTP with h, HTTP/2 too
// where edit offers h2).
func newTLSUp(t *testing.T, ca *testCA, cn string, names []string, edit func(*tls.Config), h http.HandlerFunc, serve func(*tls.Conn)) *tlsUp {
	t.Helper()
	certFile, keyFile := ca.issue(t, cn, names...)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	u := &tlsUp{}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}}
	cfg.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		u.mu.Lock()
		u.sni = append(u.sni, hi.ServerName)
		u.alpn = append(u.alpn, hi.SupportedProtos)
		u.mu.Unlock()
		return nil, nil
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 {
			u.mu.Lock()
			u.peer = append(u.peer, cs.PeerCertificates[0].Subject.CommonName)
			u.mu.Unlock()
		}
		return nil
	}
	if edit != nil {
		edit(cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	tln := tls.NewListener(ln, cfg)
	var wg sync.WaitGroup
	if serve == nil {
		srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
		wg.Go(func() { srv.Serve(tln) })
		t.Cleanup(func() {
			srv.Close()
			wg.Wait()
		})
		return u
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	closed := false
	wg.Go(func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c.(*tls.Conn))
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return u
}

// seen returns what u's handshakes brought so far.
func (u *tlsUp) seen() (sni, peer []string, alpn [][]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.sni...), append([]string(nil), u.peer...), append([][]string(nil), u.alpn...)
}

// tlsEcho echoes c's bytes, then its end (close_notify) back.
func tlsEcho(c *tls.Conn) {
	if c.Handshake() != nil {
		return
	}
	io.Copy(c, c)
	c.CloseWrite()
}

// caFile writes ca's certificate as a PEM file and returns its path.
func caFile(t *testing.T, ca *testCA, name string) string {
	t.Helper()
	path := ca.dir + "/" + name
	if err := os.WriteFile(path, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// proxyLog collects a proxy's log lines.
type proxyLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *proxyLog) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// with returns the lines that hold s.
func (l *proxyLog) with(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ln := range l.lines {
		if strings.Contains(ln, s) {
			out = append(out, ln)
		}
	}
	return out
}

// startProxyLog is startProxy with p's log lines collected.
func startProxyLog(t *testing.T, cfg *Config) (*Proxy, *proxyLog) {
	t.Helper()
	lg := &proxyLog{}
	return startProxyOpts(t, cfg, &Options{Drain: time.Second, Logf: lg.logf}), lg
}

// startProxyOpts runs a proxy for cfg with opt until the test ends.
func startProxyOpts(t *testing.T, cfg *Config, opt *Options) *Proxy {
	t.Helper()
	p, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(p)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

// TestTLSUpstreamTCP: a mode tcp listener's pool with tls connects to its
// server over TLS (the engine's DialTLS): 1 MiB goes to the server and
// back in plaintext on both ends, the client's FIN as close_notify; the
// server got the configured server_name as SNI and no ALPN. A plain
// client, a TLS server.
func TestTLSUpstreamTCP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, tlsEcho)
		cfg := testConfig(b, u.addr)
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		p := startProxy(t, cfg)
		c, err := net.Dial("tcp", p.Addr("web").String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		big := randomBytes(5, 1<<20)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Write(big)
			if err == nil {
				err = c.(*net.TCPConn).CloseWrite()
			}
			errc <- err
		}()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("echoed %d bytes (%v), want the 1 MiB sent, then the end", len(got), err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		sni, _, alpn := u.seen()
		if len(sni) != 1 || sni[0] != "app.test" || len(alpn[0]) != 0 {
			t.Errorf("the server saw SNI %q, ALPN %q; want one handshake with app.test and no ALPN", sni, alpn)
		}
		tot := p.Totals().Servers[0]
		if tot.Connects != 1 || tot.Failures != 0 || tot.TLSHandshakeFailures != 0 {
			t.Errorf("connects %d, failures %d, TLS failures %d; want 1, 0, 0", tot.Connects, tot.Failures, tot.TLSHandshakeFailures)
		}
	})
}

// TestTLSUpstreamHTTP: mode http to a pool with tls, protocol http1
// (HTTP/1.1 over TLS, no ALPN offered) and h2 (HTTP/2, ALPN h2 offered
// and chosen), each server a Go net/http over crypto/tls: a 1 MiB POST
// comes back whole over each. The http1 pool has no server_name: its
// server, 127.0.0.1, is checked against the certificate's IP addresses
// and sent no SNI; the h2 pool's server_name is the SNI. The pools'
// HTTP health checks run over TLS and pass.
func TestTLSUpstreamHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		big := randomBytes(13, 1<<20)
		for _, proto := range []string{ProtocolHTTP1, ProtocolH2} {
			var edit func(*tls.Config)
			wantProto, wantALPN, wantSNI := "HTTP/1.1", []string(nil), ""
			if proto == ProtocolH2 {
				edit = func(c *tls.Config) { c.NextProtos = []string{"h2", "http/1.1"} }
				wantProto, wantALPN, wantSNI = "HTTP/2.0", []string{"h2"}, "app.test"
			}
			u := newTLSUp(t, ca, "app-"+proto, []string{"app.test"}, edit, forwardedEcho, nil)
			cfg := httpConfig(b, u.addr)
			cfg.Pools[0].Protocol = proto
			cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: wantSNI, CAFile: caFile(t, ca, "ca.pem")}
			cfg.Pools[0].Health = &HealthConfig{Type: HealthHTTP, Path: "/", Interval: Duration(2 * time.Second), Timeout: Duration(2 * time.Second)}
			p := startProxy(t, cfg)
			c, base := client(t, p)
			for _, body := range [][]byte{nil, big} {
				resp, err := c.Post(base+"/", "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					t.Fatalf("%s: %v", proto, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
					t.Fatalf("%s: status %d, %d bytes back (%v); want 200 and the %d sent", proto, resp.StatusCode, len(got), err, len(body))
				}
				if g := resp.Header.Get("X-Got-Proto"); g != wantProto {
					t.Errorf("%s: the server got %s, want %s", proto, g, wantProto)
				}
			}
			waitFor(t, "a health check over TLS to pass", func() bool { return p.Totals().Servers[0].CheckPasses >= 1 })
			tot := p.Totals().Servers[0]
			if tot.CheckFailures != 0 || tot.TLSHandshakeFailures != 0 || tot.Failures != 0 {
				t.Errorf("%s: check failures %d, TLS failures %d, failures %d; want none", proto, tot.CheckFailures, tot.TLSHandshakeFailures, tot.Failures)
			}
			sni, _, alpn := u.seen()
			for i := range sni {
				if sni[i] != wantSNI || !slices.Equal(alpn[i], wantALPN) {
					t.Fatalf("%s: handshake %d: SNI %q, ALPN %q; want %q and %q", proto, i, sni[i], alpn[i], wantSNI, wantALPN)
				}
			}
		}
	})
}

// TestTLSUpstreamVerifyFails: a server whose certificate the pool's
// ca_file did not sign fails each connect in its TLS handshake: counted in
// the server's failures and TLS handshake failures, logged (once a
// second at most, with the server's address and the x509 error), and
// seen as a failed connect by the rest: a request fails over to the
// pool's next server, passive health ejects the server (fails 1), and
// its health checks (type tcp: connect and handshake) fail. A request
// with no server left gets 502. Pools of protocol http1 and h2 (whose
// streams waiting for the failed connection fail over).
func TestTLSUpstreamVerifyFails(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca, other := newTestCA(t), newTestCA(t)
		for _, proto := range []string{ProtocolHTTP1, ProtocolH2} {
			var edit func(*tls.Config)
			if proto == ProtocolH2 {
				edit = func(c *tls.Config) { c.NextProtos = []string{"h2", "http/1.1"} }
			}
			bad := newTLSUp(t, other, "bad", []string{"app.test"}, edit, forwardedEcho, nil)
			good := newTLSUp(t, ca, "good", []string{"app.test"}, edit, forwardedEcho, nil)
			cfg := httpConfig(b, bad.addr, good.addr)
			cfg.Pools[0].Protocol = proto
			cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
			cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Hour)}
			cfg.Pools[0].Health = &HealthConfig{Interval: Duration(2 * time.Second), Timeout: Duration(2 * time.Second), Rise: 1, Fall: 100}
			p, lg := startProxyLog(t, cfg)
			c, base := client(t, p)
			for range 4 {
				resp, body := get(t, c, base+"/")
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d (%s), want 200 from the good server", proto, resp.StatusCode, body)
				}
			}
			st := p.Totals().Servers
			if st[0].Failures != 1 || st[0].TLSHandshakeFailures != 1 || st[0].Connects != 0 || st[0].EjectionsConnect != 1 || !st[0].PassiveDown {
				t.Errorf("%s: bad server: failures %d, TLS failures %d, connects %d, connect ejections %d, down %v; want 1, 1, 0, 1, true", proto,
					st[0].Failures, st[0].TLSHandshakeFailures, st[0].Connects, st[0].EjectionsConnect, st[0].PassiveDown)
			}
			if st[1].Failures != 0 || st[1].TLSHandshakeFailures != 0 || st[1].Connects == 0 {
				t.Errorf("%s: good server: failures %d, TLS failures %d, connects %d; want 0, 0, some", proto, st[1].Failures, st[1].TLSHandshakeFailures, st[1].Connects)
			}
			lines := lg.with("TLS handshake failed")
			if len(lines) != 1 || !strings.Contains(lines[0], bad.addr) || !strings.Contains(lines[0], "certificate signed by unknown authority") {
				t.Errorf("log lines %q, want one naming %s and the unknown authority", lines, bad.addr)
			}
			waitFor(t, "the bad server's health checks to fail over TLS", func() bool { return p.Totals().Servers[0].CheckFailures >= 1 })
			if tot := p.Totals().Servers[1]; tot.CheckFailures != 0 {
				t.Errorf("the good server failed %d checks, want none", tot.CheckFailures)
			}

			// Alone in its pool: no server left, 502.
			cfg2 := httpConfig(b, bad.addr)
			cfg2.Pools[0].Protocol = proto
			cfg2.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
			p2 := startProxy(t, cfg2)
			c2, base2 := client(t, p2)
			if resp, _ := get(t, c2, base2+"/"); resp.StatusCode != 502 {
				t.Errorf("%s: status %d, want 502", proto, resp.StatusCode)
			}
			if tot := p2.Totals().Servers[0]; tot.Failures != 1 || tot.TLSHandshakeFailures != 1 {
				t.Errorf("failures %d, TLS failures %d; want 1, 1", tot.Failures, tot.TLSHandshakeFailures)
			}
		}
	})
}

// TestTLSUpstreamMTLS: a server that requires a client certificate its CA
// signed gets the pool's cert_file (its common name seen), over TLS 1.3
// and 1.2. A pool without one gets 502: over TLS 1.2 its handshake fails
// (a TLS handshake failure); over TLS 1.3 the client's side of the
// handshake ends before the server has checked the certificate, so the
// connect succeeds and the server's refusal (its alert) ends the
// connection before a response, not counted as a handshake failure.
func TestTLSUpstreamMTLS(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "proxy-client")
		for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			require := func(c *tls.Config) {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = ca.roots
				c.MaxVersion = v
			}
			u := newTLSUp(t, ca, "app", []string{"app.test"}, require, forwardedEcho, nil)
			for _, withCert := range []bool{true, false} {
				cfg := httpConfig(b, u.addr)
				cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
				if withCert {
					cfg.Pools[0].TLS.CertFile, cfg.Pools[0].TLS.KeyFile = cert, key
				}
				p := startProxy(t, cfg)
				c, base := client(t, p)
				resp, _ := get(t, c, base+"/")
				tot := p.Totals().Servers[0]
				wantStatus, wantFailed := 200, uint64(0)
				if !withCert {
					wantStatus = 502
					if v == tls.VersionTLS12 {
						wantFailed = 1
					}
				}
				if resp.StatusCode != wantStatus || tot.TLSHandshakeFailures != wantFailed {
					t.Errorf("TLS %#x, client certificate %v: status %d, TLS failures %d; want %d, %d", v, withCert, resp.StatusCode, tot.TLSHandshakeFailures, wantStatus, wantFailed)
				}
			}
			if _, peer, _ := u.seen(); len(peer) != 1 || peer[0] != "proxy-client" {
				t.Errorf("TLS %#x: the server got client certificates %q, want one, proxy-client", v, peer)
			}
		}
	})
}

// TestTLSUpstreamH2NoALPN: a pool with protocol h2 whose server chooses
// no protocol by ALPN (it has none: crypto/tls then goes on without) fails
// the connect before sending the HTTP/2 preface: 502, counted as a TLS
// handshake failure and logged as such; its health check fails too.
func TestTLSUpstreamH2NoALPN(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		u := newTLSUp(t, ca, "app", []string{"app.test"}, func(c *tls.Config) { c.NextProtos = nil }, forwardedEcho, nil)
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].Protocol = ProtocolH2
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		cfg.Pools[0].Health = &HealthConfig{Interval: Duration(2 * time.Second), Timeout: Duration(2 * time.Second), Rise: 1, Fall: 100}
		p, lg := startProxyLog(t, cfg)
		c, base := client(t, p)
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 502 {
			t.Fatalf("status %d (%s), want 502", resp.StatusCode, body)
		}
		if tot := p.Totals().Servers[0]; tot.Failures != 1 || tot.TLSHandshakeFailures != 1 || tot.H2Connections != 0 {
			t.Errorf("failures %d, TLS failures %d, h2 connections %d; want 1, 1, 0", tot.Failures, tot.TLSHandshakeFailures, tot.H2Connections)
		}
		if lines := lg.with("did not choose h2"); len(lines) != 1 {
			t.Errorf("log lines %q, want one saying the server did not choose h2", lg.with(""))
		}
		waitFor(t, "the health checks to fail without h2", func() bool { return p.Totals().Servers[0].CheckFailures >= 1 })
	})
}

// TestTLSUpstreamReload: a reload that keeps a TLS pool reads its ca_file
// again: a server the old CA file did not sign is connected to once the
// file holds its CA, for the next connections.
func TestTLSUpstreamReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca, other := newTestCA(t), newTestCA(t)
		u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, forwardedEcho, nil)
		path := caFile(t, other, "ca.pem")
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: path}
		p := startProxy(t, cfg)
		c, base := client(t, p)
		if resp, _ := get(t, c, base+"/"); resp.StatusCode != 502 {
			t.Fatalf("status %d before the CA file changed, want 502", resp.StatusCode)
		}
		if err := os.WriteFile(path, ca.CertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg2 := httpConfig(b, u.addr)
		cfg2.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: path}
		if err := p.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d (%s) after the reload, want 200", resp.StatusCode, body)
		}
		if tot := p.Totals().Servers[0]; tot.TLSHandshakeFailures != 1 || tot.Connects != 1 {
			t.Errorf("TLS failures %d, connects %d; want 1 (before), 1 (after)", tot.TLSHandshakeFailures, tot.Connects)
		}
	})
}

// TestTLSUpstreamInsecure: insecure_skip_verify takes a certificate no
// root signed, for a name it does not have, and the proxy says in its log
// that the pool's certificates are not checked.
func TestTLSUpstreamInsecure(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newTLSUp(t, newTestCA(t), "app", []string{"app.test"}, nil, forwardedEcho, nil)
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "other.test", InsecureSkipVerify: true}
		p, lg := startProxyLog(t, cfg)
		c, base := client(t, p)
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
			t.Errorf("status %d (%s), want 200", resp.StatusCode, body)
		}
		if lines := lg.with("pool app: tls.insecure_skip_verify"); len(lines) != 1 {
			t.Errorf("log lines %q, want one warning for the pool", lg.with(""))
		}
		if sni, _, _ := u.seen(); len(sni) != 1 || sni[0] != "other.test" {
			t.Errorf("SNI %q, want other.test", sni)
		}
	})
}
