package proxy

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSReloadRenamedHost: a reload that renames a TLS pool's server
// (its host as configured, with no server_name: the name sent as SNI and
// checked) to one resolving to the same address keeps the server, and with
// it the connections verified for the old name. The certificate has
// 127.0.0.1 (the name before) but not a.spindle.test (the name after): the
// request after the reload must dial anew and fail verification (502), as
// a changed server_name does (TestTLSReloadDropsConns), not go over the
// idle connection checked for 127.0.0.1.
func TestTLSReloadRenamedHost(t *testing.T) {
	const name = "a.spindle.test"
	res := dnsOnLoopback(t, name)
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, forwardedEcho, nil)
		_, port, _ := net.SplitHostPort(u.addr)
		caPath := caFile(t, ca, "ca.pem")
		cfg := httpConfig(b, u.addr) // 127.0.0.1:port: checked against the IP address
		cfg.Pools[0].TLS = &UpstreamTLSConfig{CAFile: caPath}
		p := startProxyOpts(t, cfg, &Options{Drain: time.Second, Logf: func(string, ...any) {}, Resolver: res})
		c, base := client(t, p)
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d (%s) before the reload, want 200", resp.StatusCode, body)
		}
		waitFor(t, "the server's connection idle", func() bool { return p.Totals().Servers[0].Idle == 1 })
		cfg2 := httpConfig(b, net.JoinHostPort(name, port)) // the same address, by a name its certificate lacks
		cfg2.Pools[0].TLS = &UpstreamTLSConfig{CAFile: caPath}
		if err := p.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 502 {
			t.Errorf("status %d (%s) after the reload, want 502: the connection checked for 127.0.0.1 carried a request for %s", resp.StatusCode, body, name)
		}
		sni, _, _ := u.seen()
		t.Logf("SNI seen by the server: %q", sni)
	})
}

// TestTLSHandshakeAcrossReloads: a client accepted on a tls listener's
// socket that a reload closes (here the listener renamed, on a port 0
// address: a new socket) is still in its handshake; once done, it is
// served under the listener it was accepted by (the closing socket's, in
// that reload's byLn). A second reload before its handshake ends must not
// change that: its socket is in no generation's byLn any more, and OnOpen
// closed it ("cannot happen"), uncounted and unlogged.
func TestTLSHandshakeAcrossReloads(t *testing.T) {
	for _, reloads := range []int{1, 2} {
		t.Run(fmt.Sprint(reloads), func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				ca := newTestCA(t)
				cert, key := ca.issue(t, "web", "web.test")
				u := newUpstream(t, nil)
				mk := func(name string) *Config {
					cfg := testConfig(b, u.addr)
					cfg.Listeners[0].Name = name
					cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, HandshakeTimeout: Duration(time.Minute)}
					return cfg
				}
				p := startProxy(t, mk("web"))
				raw, err := net.Dial("tcp", p.Addr("web").String())
				if err != nil {
					t.Fatal(err)
				}
				defer raw.Close()
				waitFor(t, "the handshake in progress", func() bool { return p.e.Stats().TLSHandshakes == 1 })
				for range reloads {
					if err := p.Reload(mk("web2")); err != nil {
						t.Fatal(err)
					}
				}
				c := tls.Client(raw, &tls.Config{RootCAs: ca.roots, ServerName: "web.test"})
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := c.Handshake(); err != nil {
					t.Fatal(err)
				}
				if err := roundTrip(c, "accepted before the reloads"); err != nil {
					t.Errorf("after %d reloads: %v, want the client served", reloads, err)
				}
			})
		})
	}
}

// TestTLSReloadClientCertResumption: a pool's client certificate
// renewed (its files rewritten, another subject) and a reload read them:
// "a reload (SIGHUP) after a CA or client certificate renewal gives the
// next connections the new ones". The next connect (max_idle -1: one a
// request) must show the server the new certificate; resuming a session
// of the old one (the session caches kept over the reload) shows it the
// old one, whose identity the server then goes on seeing.
func TestTLSReloadClientCertResumption(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "proxy-old")
		var mu sync.Mutex
		var peers []string
		u := newTLSUp(t, ca, "app", []string{"app.test"}, func(c *tls.Config) {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = ca.roots
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				mu.Lock()
				peers = append(peers, fmt.Sprintf("%s resumed=%v", cs.PeerCertificates[0].Subject.CommonName, cs.DidResume))
				mu.Unlock()
				return nil
			}
		}, forwardedEcho, nil)
		mk := func() *Config {
			cfg := httpConfig(b, u.addr)
			cfg.Pools[0].MaxIdle = -1
			cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem"), CertFile: cert, KeyFile: key}
			return cfg
		}
		p := startProxy(t, mk())
		c, base := client(t, p)
		for range 2 {
			if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
				t.Fatalf("status %d (%s), want 200", resp.StatusCode, body)
			}
		}
		ca.issueTo(t, cert, key, "proxy-new") // renewed
		if err := p.Reload(mk()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		before := len(peers)
		mu.Unlock()
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d (%s) after the reload, want 200", resp.StatusCode, body)
		}
		mu.Lock()
		after := slices.Clone(peers[before:])
		mu.Unlock()
		if len(after) != 1 || !strings.HasPrefix(after[0], "proxy-new ") {
			t.Errorf("the server saw %q after the renewal and reload, want the new certificate (proxy-new)", after)
		}
		// A reload that changes nothing keeps the sessions: the next
		// connect resumes.
		if err := p.Reload(mk()); err != nil {
			t.Fatal(err)
		}
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d (%s) after the second reload, want 200", resp.StatusCode, body)
		}
		mu.Lock()
		defer mu.Unlock()
		if last := peers[len(peers)-1]; last != "proxy-new resumed=true" {
			t.Errorf("after a reload of the same files: %q, want proxy-new resumed=true (all: %q)", last, peers)
		}
	})
}
