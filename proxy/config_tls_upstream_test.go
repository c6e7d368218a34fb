package proxy

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigUpstreamTLS: a pool's tls takes min_version 1.2 by default;
// its crypto/tls configs, one per server, have the ca_file's roots, the
// client certificate, the server name (server_name, else the server's host
// as configured: a name or an IP address), ALPN h2 for protocol h2 and
// none for http1; the config prints back as it parses (-check).
func TestConfigUpstreamTLS(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.issue(t, "proxy", "proxy.test")
	caPEM := filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(caPEM, append(ca.CertPEM(), "# a comment\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`listeners: [{name: web, listen: "127.0.0.1:0", pool: h1, mode: http}]
pools:
  - {name: h1, servers: ["backend.internal:443", "[::1]:443"], tls: {ca_file: ` + caPEM + `, cert_file: ` + cert + `, key_file: ` + key + `}}
  - {name: h2, servers: ["10.0.0.1:443"], protocol: h2, tls: {server_name: api.test, min_version: "1.3", insecure_skip_verify: true}}
`))
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := cfg.Pools[0], cfg.Pools[1]
	if h1.TLS.MinVersion != TLS12 || h2.TLS.MinVersion != TLS13 || h2.H2MaxConnections != DefaultPoolH2MaxConnections {
		t.Errorf("defaults: min_version %q and %q, h2 pool's h2_max_connections %d", h1.TLS.MinVersion, h2.TLS.MinVersion, h2.H2MaxConnections)
	}
	c1, err := h1.clientConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if len(c1) != 2 || c1[0].ServerName != "backend.internal" || c1[1].ServerName != "::1" {
		t.Fatalf("server names %q, %q; want each server's host", c1[0].ServerName, c1[1].ServerName)
	}
	if c := c1[0]; c.RootCAs == nil || !c.RootCAs.Equal(ca.roots) || len(c.Certificates) != 1 || c.NextProtos != nil || c.MinVersion != tls.VersionTLS12 || c.InsecureSkipVerify {
		t.Errorf("http1 pool's config: roots %v, %d certificates, ALPN %q, min %#x, insecure %v", c.RootCAs != nil, len(c.Certificates), c.NextProtos, c.MinVersion, c.InsecureSkipVerify)
	}
	c2, err := h2.clientConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if c := c2[0]; c.ServerName != "api.test" || c.RootCAs != nil || !slices.Equal(c.NextProtos, []string{"h2"}) || c.MinVersion != tls.VersionTLS13 || !c.InsecureSkipVerify {
		t.Errorf("h2 pool's config: name %q, roots %v (want the system's), ALPN %q, min %#x, insecure %v", c.ServerName, c.RootCAs != nil, c.NextProtos, c.MinVersion, c.InsecureSkipVerify)
	}
	yamlRoundTrip(t, cfg)
}

// TestConfigUpstreamTLSErrors: each mistake in a pool's tls is refused
// naming its field: files that cannot be read or hold no certificate, a
// client certificate without its key or not matching it, the version, h2
// without tls and h2c with it, an h2 pool behind a mode tcp listener.
func TestConfigUpstreamTLSErrors(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.issue(t, "a", "a.test")
	_, key2 := ca.issue(t, "b", "b.test")
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badCert := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(badCert, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	pool := func(mode, fields string) string {
		return `listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: ` + mode + `}]` + "\n" +
			`pools: [{name: app, servers: ["127.0.0.1:1"], ` + fields + `}]` + "\n"
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"no such ca_file", pool("http", `tls: {ca_file: `+missing+`}`), "pools[0] (app).tls.ca_file: stat " + missing + ": no such file or directory"},
		{"ca_file not PEM", pool("http", `tls: {ca_file: `+notPEM+`}`), "pools[0] (app).tls.ca_file: " + notPEM + ": no PEM CERTIFICATE block"},
		{"ca_file a directory", pool("http", `tls: {ca_file: `+dir+`}`), "pools[0] (app).tls.ca_file: " + dir + " is not a regular file"},
		{"ca_file unparsable", pool("http", `tls: {ca_file: `+badCert+`}`), "pools[0] (app).tls.ca_file: " + badCert + ": no certificate could be parsed"},
		{"key missing", pool("http", `tls: {cert_file: `+cert+`}`), "pools[0] (app).tls.key_file: missing"},
		{"cert missing", pool("http", `tls: {key_file: `+key+`}`), "pools[0] (app).tls.cert_file: missing"},
		{"key not the certificate's", pool("http", `tls: {cert_file: `+cert+`, key_file: `+key2+`}`), "pools[0] (app).tls: cert_file " + cert + ", key_file " + key2 + ": tls: private key does not match public key"},
		{"min version", pool("http", `tls: {min_version: "1.0"}`), `pools[0] (app).tls.min_version: unknown "1.0" (want "1.2" or "1.3")`},
		{"h2 without tls", pool("http", `protocol: h2`), "pools[0] (app).protocol: h2 is HTTP/2 over TLS and needs tls (protocol h2c is HTTP/2 over cleartext)"},
		{"h2c with tls", pool("http", `protocol: h2c, tls: {}`), "pools[0] (app).tls: not with protocol h2c, HTTP/2 over cleartext (protocol h2 is HTTP/2 over TLS)"},
		{"unknown protocol", pool("http", `protocol: h3`), `pools[0] (app).protocol: unknown "h3" (want "http1", "h2c" or "h2")`},
		{"h2 behind tcp", pool("tcp", `protocol: h2, tls: {}`), `listeners[0] (web).pool: pool "app" has protocol h2, which a mode tcp listener cannot send to`},
		{"h2 max_conns", pool("http", `protocol: h2, tls: {}, max_conns: 4`), "pools[0] (app).max_conns: not with protocol h2"},
		{"unknown field", pool("http", `tls: {alpn: [h2]}`), "field alpn not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
