package proxy

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/certgen"
)

// testCA issues the TLS tests' certificates, as files in dir; a client
// trusts them through roots.
type testCA struct {
	*certgen.Cert
	roots *x509.CertPool
	dir   string
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	cert, err := certgen.New(certgen.Spec{CommonName: "spindle test CA"})
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{Cert: cert, roots: cert.Pool(), dir: t.TempDir()}
}

// issue writes a certificate for names (DNS names, and 127.0.0.1), its
// subject's common name cn, and its key as PEM files named after cn in
// ca's directory, and returns their paths.
func (ca *testCA) issue(t testing.TB, cn string, names ...string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(ca.dir, cn+".pem"), filepath.Join(ca.dir, cn+".key")
	ca.issueTo(t, certFile, keyFile, cn, names...)
	return certFile, keyFile
}

// issueTo is issue writing certFile and keyFile (replacing them: a
// certificate renewed). The certificate serves both ends: a server's, and
// a client's (mTLS).
func (ca *testCA) issueTo(t testing.TB, certFile, keyFile, cn string, names ...string) {
	t.Helper()
	cert, err := ca.Issue(certgen.Spec{
		CommonName:  cn,
		DNSNames:    names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
}

// TestConfigTLS: a listener's tls takes its defaults (min_version 1.2,
// handshake_timeout 10s, alpn [h2, http/1.1] in mode http and none in
// mode tcp, the h2 knobs' defaults where h2 is offered), reads its
// certificate pairs, and prints back as it parses (-check).
func TestConfigTLS(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.issue(t, "a", "a.test")
	cert2, key2 := ca.issue(t, "b", "b.test")
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	cfg, err := ParseConfig([]byte(`listeners:
  - {name: web, listen: "127.0.0.1:0", pool: app, mode: http, tls: {cert_file: ` + cert + `, key_file: ` + key + `, certificates: [{cert_file: ` + cert2 + `, key_file: ` + key2 + `}]}}
  - {name: tcp, listen: "127.0.0.1:0", pool: app, tls: {certificates: [{cert_file: ` + cert + `, key_file: ` + key + `}], min_version: 1.3, handshake_timeout: 2s}}
  - {name: h1, listen: "127.0.0.1:0", pool: app, mode: http, tls: {cert_file: ` + cert + `, key_file: ` + key + `, alpn: [http/1.1]}}
  - {name: plain, listen: "127.0.0.1:0", pool: app, mode: http}
` + pool))
	if err != nil {
		t.Fatal(err)
	}
	web, tcp, h1, plain := cfg.Listeners[0], cfg.Listeners[1], cfg.Listeners[2], cfg.Listeners[3]
	if tc := web.TLS; tc.MinVersion != TLS12 || time.Duration(tc.HandshakeTimeout) != DefaultTLSHandshakeTimeout || !slices.Equal(tc.ALPN, Tokens{"h2", "http/1.1"}) {
		t.Errorf("mode http tls defaults: %+v", *tc)
	}
	if web.H2MaxConcurrentStreams != DefaultH2MaxConcurrentStreams || web.H2InitialWindow != DefaultH2InitialWindow {
		t.Errorf("mode http tls offering h2: h2 knobs %d, %d, want their defaults", web.H2MaxConcurrentStreams, web.H2InitialWindow)
	}
	if tc := tcp.TLS; tc.MinVersion != TLS13 || time.Duration(tc.HandshakeTimeout) != 2*time.Second || tc.ALPN != nil {
		t.Errorf("mode tcp tls: %+v, want min_version 1.3, handshake_timeout 2s, no alpn", *tc)
	}
	if h1.H2MaxConcurrentStreams != 0 || h1.H2InitialWindow != 0 || h1.servesH2() {
		t.Errorf("alpn [http/1.1]: h2 knobs %d, %d, want none (no HTTP/2)", h1.H2MaxConcurrentStreams, h1.H2InitialWindow)
	}
	if plain.TLS != nil || plain.servesH2() {
		t.Errorf("a listener without tls: %+v", plain)
	}
	sc, err := web.TLS.serverConfig(web.Mode)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Certificates) != 2 || sc.Certificates[0].Leaf.Subject.CommonName != "a" || sc.Certificates[1].Leaf.Subject.CommonName != "b" {
		t.Errorf("certificates: %d, want a (cert_file) then b", len(sc.Certificates))
	}
	if sc.MinVersion != 0x0303 || !slices.Equal(sc.NextProtos, []string{"h2", "http/1.1"}) {
		t.Errorf("crypto/tls config: min version %#x, NextProtos %q", sc.MinVersion, sc.NextProtos)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(out)
	if err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("YAML round trip:\n%s\nparsed as %+v", out, back.Listeners)
	}
}

// TestConfigTLSErrors: each mistake in a listener's tls is refused naming
// its field (a certificate pair by its index): files that cannot be read
// or hold no PEM block of their kind, a key that is not the certificate's,
// versions, protocols, the timeout, h2c over TLS, h2 knobs without h2.
func TestConfigTLSErrors(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.issue(t, "a", "a.test")
	_, key2 := ca.issue(t, "b", "b.test")
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, maxPEMFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	pair := `cert_file: ` + cert + `, key_file: ` + key
	pool := "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	ln := func(mode, tls string) string {
		return `listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: ` + mode + `, ` + tls + `}]` + pool
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"no certificate", ln("tcp", `tls: {}`), "listeners[0] (web).tls: no certificate (cert_file and key_file, or certificates)"},
		{"key missing", ln("tcp", `tls: {cert_file: `+cert+`}`), "listeners[0] (web).tls.key_file: missing"},
		{"cert missing", ln("tcp", `tls: {certificates: [{key_file: `+key+`}]}`), "listeners[0] (web).tls.certificates[0].cert_file: missing"},
		{"no such file", ln("tcp", `tls: {cert_file: `+missing+`, key_file: `+key+`}`), "listeners[0] (web).tls.cert_file: stat " + missing + ": no such file or directory"},
		{"not PEM", ln("tcp", `tls: {`+pair+`, certificates: [{cert_file: `+empty+`, key_file: `+key+`}]}`), "listeners[0] (web).tls.certificates[0].cert_file: " + empty + ": no PEM CERTIFICATE block"},
		{"certificate as key", ln("tcp", `tls: {cert_file: `+cert+`, key_file: `+cert+`}`), "listeners[0] (web).tls.key_file: " + cert + ": no PEM private key block"},
		{"too big", ln("tcp", `tls: {cert_file: `+big+`, key_file: `+key+`}`), "listeners[0] (web).tls.cert_file: " + big + " is larger than 1048576 bytes"},
		{"fifo", ln("tcp", `tls: {cert_file: `+cert+`, key_file: `+fifo+`}`), "listeners[0] (web).tls.key_file: " + fifo + " is not a regular file"},
		{"directory", ln("tcp", `tls: {cert_file: `+dir+`, key_file: `+key+`}`), "listeners[0] (web).tls.cert_file: " + dir + " is not a regular file"},
		{"key not the certificate's", ln("tcp", `tls: {cert_file: `+cert+`, key_file: `+key2+`}`), "listeners[0] (web).tls: cert_file " + cert + ", key_file " + key2 + ": tls: private key does not match public key"},
		{"min version", ln("tcp", `tls: {`+pair+`, min_version: "1.1"}`), `listeners[0] (web).tls.min_version: unknown "1.1" (want "1.2" or "1.3")`},
		{"handshake timeout", ln("tcp", `tls: {`+pair+`, handshake_timeout: -1s}`), "listeners[0] (web).tls.handshake_timeout: -1s is not positive"},
		{"alpn in http", ln("http", `tls: {`+pair+`, alpn: [h2, h3]}`), `listeners[0] (web).tls.alpn[1]: "h3" is not served in mode http (want "h2" or "http/1.1")`},
		{"alpn twice", ln("tcp", `tls: {`+pair+`, alpn: [x, x]}`), `listeners[0] (web).tls.alpn[1]: "x" listed twice`},
		{"alpn empty", ln("tcp", `tls: {`+pair+`, alpn: [""]}`), "listeners[0] (web).tls.alpn[0]: empty"},
		{"alpn long", ln("tcp", `tls: {`+pair+`, alpn: [`+strings.Repeat("x", 256)+`]}`), "listeners[0] (web).tls.alpn[0]: \"" + strings.Repeat("x", 256) + "\" longer than 255 bytes"},
		{"h2c over tls", ln("http", `h2c: true, tls: {`+pair+`}`), `listeners[0] (web).h2c: HTTP/2 over cleartext, not on a tls listener (HTTP/2 over TLS is tls.alpn's "h2", offered by default)`},
		{"h2 knob without h2", ln("http", `h2_initial_window: 70000, tls: {`+pair+`, alpn: [http/1.1]}`), `listeners[0] (web).h2_max_concurrent_streams, h2_initial_window, h2_response_hold: only with h2c: true, or tls with "h2" in its alpn`},
		{"unknown field", ln("tcp", `tls: {`+pair+`, ciphers: [x]}`), "field ciphers not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// h2 knobs on a tls listener offering h2 (its default) are taken.
	cfg, err := ParseConfig([]byte(ln("http", `h2_max_concurrent_streams: 7, tls: {`+pair+`}`)))
	if err != nil || cfg.Listeners[0].H2MaxConcurrentStreams != 7 {
		t.Errorf("h2_max_concurrent_streams on a tls listener: %v", err)
	}
}
