package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/proxy"
)

// TestNewProxyTLS checks the --tls certificate: an ECDSA P-256 key, a
// certificate that verifies for 127.0.0.1 (and localhost) against the pool
// returned, and three files that hold the pair as the proxies read it:
// the certificate and its key (crypto/tls's pair), and both in one file
// (HAProxy's crt).
func TestNewProxyTLS(t *testing.T) {
	dir := t.TempDir()
	files, pool, err := newProxyTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	both, err := tls.LoadX509KeyPair(files.PEMFile, files.PEMFile)
	if err != nil {
		t.Fatalf("the one-file pair: %v", err)
	}
	if !both.Leaf.Equal(pair.Leaf) {
		t.Error("the one-file pair holds another certificate")
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", pair.PrivateKey)
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, f := range []string{files.CertFile, files.KeyFile, files.PEMFile} {
		if filepath.Dir(f) != dir {
			t.Errorf("%s is not in the run's directory %s", f, dir)
		}
	}
}

// TestProxyTLSConfigs checks each proxy's config with --tls, in each
// protocol: spindle's listener has tls with the certificate's files,
// min_version 1.3 and the protocol's ALPN, and no h2c (the proxy's strict
// parser reads it, files and all); HAProxy's bind has ssl crt with the
// one-file pair, ssl-min-ver TLSv1.3, the one cipher suite and the ALPN
// in place of proto h2 (haproxy -c checks it where installed); nginx's
// listen has ssl (and http2 for HTTP/2 clients) with the certificate,
// TLSv1.3 and the cipher suite (nginx -t checks it where installed). The
// upstream side is as without TLS.
func TestProxyTLSConfigs(t *testing.T) {
	dir := t.TempDir()
	files, _, err := newProxyTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, protocol := range ProxyProtocols {
		t.Run(protocol, func(t *testing.T) {
			alpn := proxyALPN(protocol)
			text := SpindleProxyConfig(protocol, "epoll", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, files)
			cfg, err := proxy.ParseConfig([]byte(text))
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			l := cfg.Listeners[0]
			if l.TLS == nil || l.TLS.CertFile != files.CertFile || l.TLS.KeyFile != files.KeyFile || l.TLS.MinVersion != proxy.TLS13 || !slices.Equal([]string(l.TLS.ALPN), alpn) || l.H2C {
				t.Errorf("listener %+v, tls %+v\n%s", l, l.TLS, text)
			}
			plain := SpindleProxyConfig(protocol, "epoll", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, nil)
			if strings.Contains(plain, "tls:") {
				t.Errorf("tls in the plain config:\n%s", plain)
			}

			ha := HAProxyConfig(protocol, "127.0.0.1:4000", "127.0.0.1:5000", 50, files)
			bind := "bind 127.0.0.1:4000 ssl crt " + files.PEMFile + " ssl-min-ver TLSv1.3 ciphersuites TLS_AES_128_GCM_SHA256"
			if alpn != nil {
				bind += " alpn " + strings.Join(alpn, ",")
			}
			hasLine(t, ha, bind)
			upstream := "server s1 127.0.0.1:5000"
			if protocol == ProxyProtocolH2H2 {
				upstream += " proto h2"
			}
			hasLine(t, ha, upstream)
			if strings.Contains(HAProxyConfig(protocol, "127.0.0.1:4000", "127.0.0.1:5000", 50, nil), "ssl") {
				t.Error("ssl in the plain HAProxy config")
			}
			t.Run("haproxy -c", func(t *testing.T) { haproxyCheck(t, ha, haproxyTLS) })

			nd := t.TempDir()
			mod := ""
			if protocol == ProxyProtocolTCP {
				if bin, err := exec.LookPath("nginx"); err == nil {
					mod, _ = nginxStream(bin)
				}
			}
			ng := NginxConfig(protocol, nd, mod, "127.0.0.1:4000", "127.0.0.1:5000", 50, files)
			listen := "listen 127.0.0.1:4000 ssl;"
			if h2Clients(protocol) {
				listen = "listen 127.0.0.1:4000 ssl http2;"
			}
			for _, want := range []string{listen, "ssl_certificate " + files.CertFile + ";", "ssl_certificate_key " + files.KeyFile + ";", "ssl_protocols TLSv1.3;", "ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"} {
				hasLine(t, ng, want)
			}
			if strings.Contains(NginxConfig(protocol, nd, mod, "127.0.0.1:4000", "127.0.0.1:5000", 50, nil), "ssl") {
				t.Error("ssl in the plain nginx config")
			}
			t.Run("nginx -t", func(t *testing.T) {
				nginxCheck(t, nd, ng, func(bin string) error { return nginxTLS(bin, protocol != ProxyProtocolTCP) })
			})
		})
	}
}

// TestProxyTLSDefaults checks a --tls run's defaults: every arm but
// direct (the upstream speaks no TLS), whose arm, asked for, is
// unavailable with the reason, in each protocol; the load generator
// refuses TLS in open loop.
func TestProxyTLSDefaults(t *testing.T) {
	for _, protocol := range ProxyProtocols {
		cfg, err := ProxyConfig{Protocol: protocol, TLS: true, UpstreamCommand: []string{"/nonexistent"}, ProxyCommand: []string{"/nonexistent"}}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(cfg.Arms, ProxyArmDirect) || len(cfg.Arms) != len(ProxyArms)-1 {
			t.Errorf("%s: arms %v", protocol, cfg.Arms)
		}
		if a := (&proxyRunner{cfg: cfg}).arm(ProxyArmDirect); a.unavailable == nil || a.unavailable.Error() != proxyTLSNoDirect {
			t.Errorf("%s: direct arm unavailable: %v", protocol, a.unavailable)
		}
	}
	if _, err := (LoadConfig{Addr: "127.0.0.1:1", Rate: 1000, TLS: &tls.Config{}}).withDefaults(); err == nil {
		t.Error("TLS in open loop taken")
	}
}

// TestProxyTLSReport checks what a --tls report says: its title, the
// line on each arm's TLS, and a note where the arms' cipher suites
// differ.
func TestProxyTLSReport(t *testing.T) {
	rep := &ProxyReport{Schema: ProxySchema, Config: ProxySettings{Protocol: ProxyProtocolHTTP, TLS: true, Reps: 1}, Results: []ProxyResult{
		{Arm: ProxyArmSpindleUring, Rep: 1, TLS: &ProxyTLSResult{Handshakes: 8, Version: "TLS 1.3", CipherSuite: "TLS_AES_128_GCM_SHA256", ALPN: "http/1.1"}},
		{Arm: ProxyArmHAProxy, Rep: 1, TLS: &ProxyTLSResult{Handshakes: 8, Version: "TLS 1.3", CipherSuite: "TLS_AES_128_GCM_SHA256", ALPN: "http/1.1"}},
	}}
	md := ProxyMarkdown(rep)
	markdownHas(t, md,
		"# spindle bench proxy report: HTTP/1.1 reverse proxies (keep-alive POSTs, echoed), TLS 1.3 on the client side\n",
		"the clients agreed: spindle-uring TLS 1.3 TLS_AES_128_GCM_SHA256 http/1.1 (8 handshakes); haproxy TLS 1.3 TLS_AES_128_GCM_SHA256 http/1.1 (8 handshakes)\n",
	)
	rep.Config.Protocol = ProxyProtocolH2
	if got := proxyTitle(rep.Config); got != "HTTP/2 clients (TLS 1.3, h2 by ALPN) under h2load through reverse proxies to an HTTP/1.1 upstream" {
		t.Errorf("h2 title %q", got)
	}
	rep.Config.TLS = false
	if strings.Contains(ProxyMarkdown(rep), "TLS") {
		t.Error("a plain report mentions TLS")
	}
	if err := checkTLS(rep.Results[0].TLS, 8, []string{"http/1.1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []struct {
		res   *ProxyTLSResult
		conns int
		alpn  []string
	}{
		{nil, 8, nil},
		{&ProxyTLSResult{Handshakes: 8, Version: "TLS 1.2", ALPN: "http/1.1"}, 8, []string{"http/1.1"}},
		{&ProxyTLSResult{Handshakes: 8, Version: "TLS 1.3"}, 8, []string{"http/1.1"}},
		{&ProxyTLSResult{Handshakes: 7, Version: "TLS 1.3", ALPN: "http/1.1"}, 8, []string{"http/1.1"}},
	} {
		if err := checkTLS(bad.res, bad.conns, bad.alpn); err == nil {
			t.Errorf("checkTLS(%+v) passed", bad.res)
		}
	}
}

// markdownHas fails t for each of wants that md does not contain.
func markdownHas(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("markdown has no %q:\n%s", want, md)
		}
	}
}

// TestProxyTLSNoteSaysWhereHandshakesRun: the --tls note says the load
// generator handshakes before the warm-up, which it does, and does not
// say so of h2load, which starts its window connected or not
// (h2loadMeasure.connectNote).
func TestProxyTLSNoteSaysWhereHandshakesRun(t *testing.T) {
	if n := proxyTLSNote(false); !strings.Contains(n, "in the load generator's set-up, before the warm-up") {
		t.Errorf("load generator: %q", n)
	}
	if n := proxyTLSNote(true); strings.Contains(n, "before the warm-up") || !strings.Contains(n, "no note says it made connections in the window") {
		t.Errorf("h2load: %q", n)
	}
}
