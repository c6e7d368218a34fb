package bench

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spindlenet/spindle/internal/certgen"
)

// ProxyTLS is the certificate the proxies of `spindle bench proxy --tls`
// serve (ProxyConfig.TLS), as files: CertFile the certificate (PEM),
// KeyFile its private key (PEM, PKCS #8), PEMFile both in one file (the
// certificate, then the key: HAProxy's crt). The config generators take a
// nil *ProxyTLS for a plain listener.
type ProxyTLS struct {
	CertFile, KeyFile, PEMFile string
}

// proxyTLSCert says what certificate a --tls run's proxies serve.
const proxyTLSCert = "a throwaway self-signed ECDSA P-256 certificate for 127.0.0.1, made at the run's start"

// newProxyTLS makes a throwaway self-signed ECDSA P-256 certificate for
// 127.0.0.1 and localhost, valid for a day, writes its files into dir and
// returns them with a pool that trusts it.
func newProxyTLS(dir string) (*ProxyTLS, *x509.CertPool, error) {
	cert, err := certgen.New(certgen.Spec{
		CommonName:  "spindle bench proxy",
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := cert.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	certPEM := cert.CertPEM()
	files := &ProxyTLS{CertFile: filepath.Join(dir, "bench-cert.pem"), KeyFile: filepath.Join(dir, "bench-key.pem"), PEMFile: filepath.Join(dir, "bench.pem")}
	// The certificate, its key, and both in one file (HAProxy's).
	for _, f := range []struct {
		name string
		pem  []byte
	}{{files.CertFile, certPEM}, {files.KeyFile, keyPEM}, {files.PEMFile, append(certPEM[:len(certPEM):len(certPEM)], keyPEM...)}} {
		if err := os.WriteFile(f.name, f.pem, 0o600); err != nil {
			return nil, nil, err
		}
	}
	return files, cert.Pool(), nil
}

// proxyClientTLS is the clients' TLS config in a --tls run: TLS 1.3 only,
// the certificate verified against pool for 127.0.0.1, alpn offered (nil
// for none), and X25519 as the only key exchange, so that every proxy's
// handshake is the same: Go's default offers X25519MLKEM768 first, which
// the Go server of the spindle arms would take and the OpenSSL 3.0 of
// HAProxy and nginx cannot.
func proxyClientTLS(pool *x509.CertPool, alpn []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13,
		RootCAs: pool, ServerName: "127.0.0.1", NextProtos: alpn,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}
}

// proxyALPN is what the proxies' TLS listeners offer, and the load
// client asks for, in each protocol: none for tcp, HTTP/1.1 for http,
// h2 for h2 and h2h2.
func proxyALPN(protocol string) []string {
	switch protocol {
	case ProxyProtocolTCP:
		return nil
	case ProxyProtocolHTTP:
		return []string{"http/1.1"}
	}
	return []string{"h2"}
}

// tlsDial dials addr and, with cfg, completes a TLS handshake with it
// (echoCheck's and h2TLSCheck's dial), within timeout.
func tlsDial(addr string, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if cfg == nil {
		return d.Dial("tcp", addr)
	}
	return (&tls.Dialer{NetDialer: d, Config: cfg}).Dial("tcp", addr)
}

// h2TLSCheck is h2cCheck over TLS: one GET to addr with HTTP/2 chosen by
// ALPN (cfg offers h2), its reply verified as h2cCheck verifies it.
func h2TLSCheck(addr string, bodySize int, cfg *tls.Config) error {
	var p http.Protocols
	p.SetHTTP2(true)
	tr := &http.Transport{Protocols: &p, TLSClientConfig: cfg.Clone()}
	defer tr.CloseIdleConnections()
	return h2GetCheck(tr, "https://"+addr+"/", bodySize)
}

// ProxyTLSResult is what one measurement's clients saw of TLS
// (ProxyConfig.TLS): the version, cipher suite and application protocol
// (ALPN) their handshakes agreed ("TLS 1.3", "TLS_AES_128_GCM_SHA256",
// "http/1.1"; values that differed between connections joined by ", "),
// and with the load generator (tcp, http) the handshakes completed, one
// per connection. h2load (h2, h2h2) says what its first connection
// agreed, and no count: its https URI allows no connection without TLS.
// With ProxyConfig.TLSHandshakes Handshakes is every connection of the
// measurement (warm-up, window), and Resumed those of them that resumed a
// session.
type ProxyTLSResult struct {
	Handshakes int `json:"handshakes,omitempty"`
	Resumed    int `json:"resumed,omitempty"`
	// Tickets, with ProxyConfig.TLSResume, is the session tickets the
	// clients were sent (NewSessionTicket messages read); ServerBytes,
	// with ProxyConfig.TLSHandshakes, the mean TLS bytes a connection read
	// from the server up to its reply (handshake, tickets, reply).
	Tickets     int     `json:"tickets,omitempty"`
	ServerBytes float64 `json:"server_bytes,omitempty"`
	Version     string  `json:"version"`
	CipherSuite string  `json:"cipher_suite"`
	ALPN        string  `json:"alpn,omitempty"`
}

// tlsFromLoad is the ProxyTLSResult of the load generator's TLS.
func tlsFromLoad(l *LoadTLS) *ProxyTLSResult {
	if l == nil {
		return nil
	}
	return &ProxyTLSResult{Handshakes: l.Handshakes, Version: l.Version, CipherSuite: l.CipherSuite, ALPN: l.ALPN}
}

// checkTLS returns an error unless res shows the clients spoke TLS 1.3
// with alpn (nil: none), over conns handshakes where it counts them.
func checkTLS(res *ProxyTLSResult, conns int, alpn []string) error {
	want := strings.Join(alpn, ", ")
	switch {
	case res == nil || res.Version == "":
		return fmt.Errorf("the clients saw no TLS")
	case res.Version != tls.VersionName(tls.VersionTLS13):
		return fmt.Errorf("the clients' TLS version was %s, not TLS 1.3", res.Version)
	case res.ALPN != want:
		return fmt.Errorf("the clients' TLS application protocol was %q, not %q", res.ALPN, want)
	case res.Handshakes != 0 && res.Handshakes != conns:
		return fmt.Errorf("%d TLS handshakes for %d connections", res.Handshakes, conns)
	}
	return nil
}

// appendNew appends v to list unless it is there.
func appendNew(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
