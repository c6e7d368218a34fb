package certgen_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/certgen"
)

var loopback = []net.IP{net.IPv4(127, 0, 0, 1)}

// must returns a function that returns the certificate it is given, or
// fails t with the error.
func must(t *testing.T) func(*certgen.Cert, error) *certgen.Cert {
	return func(c *certgen.Cert, err error) *certgen.Cert {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestIssue: a leaf a CA issued verifies against the CA's pool for each of
// its names and for its usage, has the SANs, key and validity asked for,
// and is not a CA itself; against another CA's pool, for a name it does
// not have or for a usage it was not given, it fails.
func TestIssue(t *testing.T) {
	ca := must(t)(certgen.New(certgen.Spec{CommonName: "test CA"}))
	other := must(t)(certgen.New(certgen.Spec{CommonName: "test CA"}))
	leaf := must(t)(ca.Issue(certgen.Spec{CommonName: "web", DNSNames: []string{"localhost", "web.test"}, IPAddresses: loopback, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}))
	client := must(t)(ca.Issue(certgen.Spec{CommonName: "client", ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}))

	l := leaf.Leaf
	if l.Subject.CommonName != "web" || !slices.Equal(l.DNSNames, []string{"localhost", "web.test"}) || len(l.IPAddresses) != 1 || !l.IPAddresses[0].Equal(loopback[0]) {
		t.Errorf("leaf subject %q, DNS %v, IP %v", l.Subject.CommonName, l.DNSNames, l.IPAddresses)
	}
	if l.IsCA || l.Issuer.CommonName != "test CA" || !ca.Leaf.IsCA {
		t.Errorf("leaf IsCA %v issuer %q; CA IsCA %v", l.IsCA, l.Issuer.CommonName, ca.Leaf.IsCA)
	}
	if now := time.Now(); !now.After(l.NotBefore) || !now.Add(23*time.Hour).Before(l.NotAfter) {
		t.Errorf("leaf valid %v to %v, want from before now for a day", l.NotBefore, l.NotAfter)
	}
	if leaf.Key.Curve != elliptic.P256() || !leaf.Key.PublicKey.Equal(l.PublicKey) {
		t.Errorf("leaf key %v does not match its certificate", leaf.Key.Curve.Params().Name)
	}
	if leaf.Key.Equal(client.Key) || leaf.Key.Equal(ca.Key) || l.SerialNumber.Cmp(client.Leaf.SerialNumber) == 0 {
		t.Error("two certificates share a key or a serial number")
	}

	server := x509.VerifyOptions{Roots: ca.Pool()}
	for _, name := range []string{"localhost", "web.test", "127.0.0.1"} {
		server.DNSName = name
		if _, err := l.Verify(server); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	server.DNSName = "other.test"
	if _, err := l.Verify(server); !errors.As(err, new(x509.HostnameError)) {
		t.Errorf("a name the leaf lacks: %v, want a HostnameError", err)
	}
	server.DNSName = "localhost"
	server.Roots = other.Pool()
	if _, err := l.Verify(server); !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("another CA's pool: %v, want an UnknownAuthorityError", err)
	}
	clientAuth := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := client.Leaf.Verify(clientAuth); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := l.Verify(clientAuth); err == nil {
		t.Error("a server-only leaf verified for client authentication")
	}
	if _, err := leaf.Issue(certgen.Spec{CommonName: "x"}); err == nil {
		t.Error("a leaf that is not a CA issued a certificate")
	}
}

// TestSelfSigned: a self-signed certificate with names and a usage verifies
// against its own pool for them (bench's --tls certificate).
func TestSelfSigned(t *testing.T) {
	c := must(t)(certgen.New(certgen.Spec{CommonName: "self", DNSNames: []string{"localhost"}, IPAddresses: loopback, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}))
	if c.Leaf.Issuer.CommonName != "self" || !c.Leaf.IsCA {
		t.Errorf("issuer %q, IsCA %v", c.Leaf.Issuer.CommonName, c.Leaf.IsCA)
	}
	for _, name := range []string{"localhost", "127.0.0.1"} {
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: c.Pool()}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPEM: the files WriteFiles writes, and CertPEM and KeyPEM in one,
// load back as the pair (tls.LoadX509KeyPair, tls.X509KeyPair) with the
// same certificate and key; a TLS handshake with TLS() verifies against
// the CA's pool.
func TestPEM(t *testing.T) {
	ca := must(t)(certgen.New(certgen.Spec{CommonName: "test CA"}))
	c := must(t)(ca.Issue(certgen.Spec{CommonName: "web", DNSNames: []string{"web.test"}}))
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "c.key")
	if err := os.WriteFile(certFile, []byte("an older certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := c.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	both := append(c.CertPEM(), keyPEM...)
	one, err := tls.X509KeyPair(both, both)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []tls.Certificate{pair, one} {
		if k, ok := p.PrivateKey.(*ecdsa.PrivateKey); !ok || !k.Equal(c.Key) || !p.Leaf.Equal(c.Leaf) {
			t.Errorf("read back: key %T, certificate equal %v", p.PrivateKey, p.Leaf.Equal(c.Leaf))
		}
	}
	for _, f := range []string{certFile, keyFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v", f, fi.Mode(), err)
		}
	}

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{c.TLS()}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			err = s.(*tls.Conn).Handshake()
			s.Close()
		}
		done <- err
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "web.test"})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := <-done; err != nil {
		t.Errorf("server handshake: %v", err)
	}
}
