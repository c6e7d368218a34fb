package proxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTLSReloadDropsConns: a reload that changes how a pool's connections
// are secured (plain to TLS, TLS to plain, h2c to h2, another
// server_name) makes the server's next request dial anew under the new
// settings: no idle HTTP/1.1 connection nor HTTP/2 connection made under
// the old ones carries it. Each server here cannot be served under the
// new settings (a plain server for TLS, a TLS one for plain, a
// certificate without the new name), so the request after the reload,
// on the same client connection (the same loop), must dial once more and
// fail: 502, or the TLS server's 400 to plain HTTP; reusing the old
// connection answered 200.
func TestTLSReloadDropsConns(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		caPath := caFile(t, ca, "ca.pem")
		for _, tc := range []struct {
			name        string
			addr        func(t *testing.T) string
			before, aft func(*PoolConfig)
			want        int // the status after the reload
		}{
			{"plain to tls", func(t *testing.T) string { return newHTTPUpstream(t, forwardedEcho).addr },
				func(*PoolConfig) {},
				func(pc *PoolConfig) { pc.TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caPath} }, 502},
			{"tls to plain", func(t *testing.T) string {
				return newTLSUp(t, ca, "app", []string{"app.test"}, nil, forwardedEcho, nil).addr
			},
				func(pc *PoolConfig) { pc.TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caPath} },
				func(*PoolConfig) {}, 400},
			{"h2c to h2", func(t *testing.T) string { return newH2CUp(t, http.HandlerFunc(forwardedEcho), nil).addr },
				func(pc *PoolConfig) { pc.Protocol = ProtocolH2C },
				func(pc *PoolConfig) {
					pc.Protocol = ProtocolH2
					pc.TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caPath}
				}, 502},
			{"server_name", func(t *testing.T) string {
				return newTLSUp(t, ca, "app", []string{"app.test"}, nil, forwardedEcho, nil).addr
			},
				func(pc *PoolConfig) { pc.TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caPath} },
				func(pc *PoolConfig) { pc.TLS = &UpstreamTLSConfig{ServerName: "other.test", CAFile: caPath} }, 502},
		} {
			t.Run(tc.name, func(t *testing.T) {
				addr := tc.addr(t)
				cfg := httpConfig(b, addr)
				tc.before(&cfg.Pools[0])
				p := startProxy(t, cfg)
				c, base := client(t, p)
				if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
					t.Fatalf("status %d (%s) before the reload, want 200", resp.StatusCode, body)
				}
				h2 := cfg.Pools[0].Protocol == ProtocolH2C
				waitFor(t, "the server's connection idle", func() bool {
					s := p.Totals().Servers[0]
					return h2 && s.H2Connections == 1 || !h2 && s.Idle == 1
				})
				cfg2 := httpConfig(b, addr)
				tc.aft(&cfg2.Pools[0])
				if err := p.Reload(cfg2); err != nil {
					t.Fatal(err)
				}
				if resp, body := get(t, c, base+"/"); resp.StatusCode != tc.want {
					t.Errorf("status %d (%s) after the reload, want %d: a connection made under the old settings was used", resp.StatusCode, body, tc.want)
				}
				if n := p.Totals().Servers[0].Connects + p.Totals().Servers[0].Failures; n < 2 {
					t.Errorf("connects and failed connects %d, want 2 at least (one dial after the reload)", n)
				}
			})
		}
	})
}

// TestTLSReloadInFlightConn: the connection in use by a request when a
// reload makes its pool TLS finishes that request under the old settings
// and is then closed, not pooled: the client's next request, on the same
// client connection, dials the plain server over TLS and fails (502)
// rather than going out in plain on the old connection.
func TestTLSReloadInFlightConn(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		entered, release := make(chan struct{}), make(chan struct{})
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				entered <- struct{}{}
				<-release
			}
			forwardedEcho(w, r)
		})
		cfg := httpConfig(b, u.addr)
		p := startProxy(t, cfg)
		c, base := client(t, p)
		done := getAsync(c, base+"/slow")
		<-entered
		cfg2 := httpConfig(b, u.addr)
		cfg2.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		if err := p.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		close(release)
		if got := <-done; !strings.HasPrefix(got, "200 ") {
			t.Fatalf("%q for the request in progress at the reload, want 200", got)
		}
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 502 {
			t.Errorf("status %d (%s) after the reload, want 502: the plain connection was pooled and reused", resp.StatusCode, body)
		}
		if n := p.Totals().Servers[0].TLSHandshakeFailures; n != 1 {
			t.Errorf("TLS handshake failures %d, want 1 (the dial after the reload)", n)
		}
	})
}

// TestTLSReloadH2RetryDial: a request of an h2c pool that dials after a
// reload made the pool TLS h2 (here its retry: the server answered 503
// after the reload, the connection it came on retired at the reload)
// dials under the pool's new settings, not the old ones: its HTTP/2
// connection joins the server's connections, which the new pool's
// requests take. Dialed plain, it carried the client's next request, of
// the TLS pool, in plain to the server (200); under TLS the plain server
// fails the handshake and that request gets 502, no request reaching the
// server after the first.
func TestTLSReloadH2RetryDial(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		entered, release := make(chan struct{}), make(chan struct{})
		var served atomic.Int64
		u := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if served.Add(1) == 1 {
				entered <- struct{}{}
				<-release
				w.WriteHeader(503)
				return
			}
			forwardedEcho(w, r)
		}), nil)
		retry := &RetryConfig{On: []string{"503"}}
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].Protocol = ProtocolH2C
		cfg.Listeners[0].Retry = retry
		p := startProxy(t, cfg)
		c, base := client(t, p)
		done := getAsync(c, base+"/slow")
		<-entered
		cfg2 := httpConfig(b, u.addr)
		cfg2.Pools[0].Protocol = ProtocolH2
		cfg2.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		cfg2.Listeners[0].Retry = retry
		if err := p.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		close(release)
		st := <-done
		n := served.Load()
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 502 {
			t.Errorf("status %d (%s) after the reload, want 502: the retry's connection, dialed plain, carried it", resp.StatusCode, body)
		}
		if got := served.Load(); got != 1 {
			t.Errorf("the server served %d requests (%d before the last; the retried one's answer %q), want 1: requests went to it in plain after the reload", got, n, st)
		}
	})
}

// TestTLSUpstreamSilentServer: a server that takes the TCP connection and
// never answers the ClientHello holds a connect for connect_timeout, the
// handshake included, and then fails it as a TLS handshake failure: the
// request goes to the pool's next server (200), the silent one's failure
// counted (failures and TLS handshake failures), logged, and ejecting it
// for passive health; alone in its pool, 502.
func TestTLSUpstreamSilentServer(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		silent := newUpstream(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		good := newTLSUp(t, ca, "good", []string{"app.test"}, nil, forwardedEcho, nil)
		tlsCfg := &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		cfg := httpConfig(b, silent.addr, good.addr)
		cfg.Listeners[0].ConnectTimeout = Duration(200 * time.Millisecond)
		cfg.Pools[0].TLS = tlsCfg
		cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Hour)}
		p, lg := startProxyLog(t, cfg)
		c, base := client(t, p)
		for range 2 {
			if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
				t.Fatalf("status %d (%s), want 200 from the next server", resp.StatusCode, body)
			}
		}
		st := p.Totals().Servers[0]
		if st.Failures != 1 || st.TLSHandshakeFailures != 1 || st.Connects != 0 || !st.PassiveDown {
			t.Errorf("silent server: failures %d, TLS failures %d, connects %d, down %v; want 1, 1, 0, true", st.Failures, st.TLSHandshakeFailures, st.Connects, st.PassiveDown)
		}
		if lines := lg.with("TLS handshake failed"); len(lines) != 1 || !strings.Contains(lines[0], silent.addr) {
			t.Errorf("log lines %q, want one naming %s", lines, silent.addr)
		}

		cfg2 := httpConfig(b, silent.addr)
		cfg2.Listeners[0].ConnectTimeout = Duration(200 * time.Millisecond)
		cfg2.Pools[0].TLS = tlsCfg
		p2 := startProxy(t, cfg2)
		c2, base2 := client(t, p2)
		if resp, _ := get(t, c2, base2+"/"); resp.StatusCode != 502 {
			t.Errorf("alone: status %d, want 502", resp.StatusCode)
		}
		if st := p2.Totals().Servers[0]; st.Failures != 1 || st.TLSHandshakeFailures != 1 {
			t.Errorf("alone: failures %d, TLS failures %d; want 1, 1", st.Failures, st.TLSHandshakeFailures)
		}
	})
}

// TestTLSUpstreamSNIPerServer: a pool without server_name checks each
// server against its own host as configured: one named (resolved through
// Options.Resolver) gets its name as SNI and is checked against it (its
// certificate for that name); one by IP address gets no SNI and is
// checked against the certificate's IP addresses.
func TestTLSUpstreamSNIPerServer(t *testing.T) {
	const name = "a.spindle.test"
	res := dnsOnLoopback(t, name)
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		a := newTLSUp(t, ca, "a", []string{name}, nil, forwardedEcho, nil)
		ip := newTLSUp(t, ca, "b", []string{"b.test"}, nil, forwardedEcho, nil)
		_, port, _ := net.SplitHostPort(a.addr)
		cfg := httpConfig(b, net.JoinHostPort(name, port), ip.addr)
		cfg.Pools[0].TLS = &UpstreamTLSConfig{CAFile: caFile(t, ca, "ca.pem")}
		p := startProxyOpts(t, cfg, &Options{Drain: time.Second, Logf: func(string, ...any) {}, Resolver: res})
		c, base := client(t, p)
		for range 4 {
			if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
				t.Fatalf("status %d (%s), want 200", resp.StatusCode, body)
			}
		}
		for _, x := range []struct {
			u   *tlsUp
			sni string
		}{{a, name}, {ip, ""}} {
			sni, _, _ := x.u.seen()
			if len(sni) == 0 || slices.ContainsFunc(sni, func(s string) bool { return s != x.sni }) {
				t.Errorf("server %s: SNI %q, want %q alone", x.u.addr, sni, x.sni)
			}
		}
		for i, st := range p.Totals().Servers {
			if st.TLSHandshakeFailures != 0 || st.Connects == 0 {
				t.Errorf("server %d: TLS failures %d, connects %d; want 0, some", i, st.TLSHandshakeFailures, st.Connects)
			}
		}
	})
}

// TestLogLimitConcurrent: logf called from several goroutines at once
// (the loops) while its interval keeps running out (next reset by the
// callers every 100 calls, so that more than one line goes) loses no
// line: each call is logged or held, and each held one is said in a line
// let through later or still held, the total the calls made. Under -race,
// that its state is atomics only.
func TestLogLimitConcurrent(t *testing.T) {
	const workers, calls = 4, 2000
	lg := &proxyLog{}
	p := &Proxy{start: time.Now(), opt: Options{Logf: lg.logf}}
	var r logLimit
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range calls {
				if k%100 == 99 {
					r.next.Store(0) // (the interval over)
				}
				r.logf(p, "handshake failed")
			}
		})
	}
	wg.Wait()
	lines := lg.with("handshake failed")
	total := uint64(len(lines)) + r.held.Load()
	for _, l := range lines {
		var n uint64
		if _, err := fmt.Sscanf(l, "handshake failed (%d more such lines held back)", &n); err == nil {
			total += n
		} else if l != "handshake failed" {
			t.Fatalf("line %q", l)
		}
	}
	if total != workers*calls || len(lines) < 2 {
		t.Errorf("%d lines, said and held %d; want %d calls accounted for, more than one line", len(lines), total, workers*calls)
	}
}

// TestTLSReloadCAResumption: the session caches a reload carries over to
// a pool made anew (by server address) do not let a session resume past
// the new ca_file: a server whose certificate the old roots took resumes
// its session (max_idle -1: a connection a request), and after a reload
// to another CA's file the next connect does not resume (crypto/tls
// checks the session's chains against the new roots) and fails, 502.
func TestTLSReloadCAResumption(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca, other := newTestCA(t), newTestCA(t)
		var mu sync.Mutex
		var resumed []bool
		u := newTLSUp(t, ca, "app", []string{"app.test"}, func(c *tls.Config) {
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				mu.Lock()
				resumed = append(resumed, cs.DidResume)
				mu.Unlock()
				return nil
			}
		}, forwardedEcho, nil)
		seen := func() []bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(resumed)
		}
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].MaxIdle = -1
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		p := startProxy(t, cfg)
		c, base := client(t, p)
		for range 3 {
			if resp, body := get(t, c, base+"/"); resp.StatusCode != 200 {
				t.Fatalf("status %d (%s), want 200", resp.StatusCode, body)
			}
		}
		if r := seen(); !slices.Contains(r, true) {
			t.Fatalf("handshakes resumed %v: none resumed, the test shows nothing", r)
		}
		cfg2 := httpConfig(b, u.addr)
		cfg2.Pools[0].MaxIdle = -1
		cfg2.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, other, "other.pem")}
		if err := p.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		before := len(seen())
		if resp, body := get(t, c, base+"/"); resp.StatusCode != 502 {
			t.Errorf("status %d (%s) after the reload to another CA, want 502", resp.StatusCode, body)
		}
		if r := seen()[before:]; slices.Contains(r, true) {
			t.Errorf("handshakes after the reload %v: a session resumed past the new roots", r)
		}
	})
}
