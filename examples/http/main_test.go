package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/examples/http/hello"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key as
// PEM files in dir, and returns their paths and a pool trusting it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// TestTLSOption: with -tls-cert and -tls-key the server answers HTTPS, over
// HTTP/2 or HTTP/1.1 as ALPN chooses; one of the two alone is refused, and
// neither is plain HTTP.
func TestTLSOption(t *testing.T) {
	certFile, keyFile, roots := writeCert(t, t.TempDir())
	if _, err := listenConfig(certFile, ""); err == nil {
		t.Error("-tls-cert without -tls-key accepted")
	}
	if lc, err := listenConfig("", ""); lc != nil || err != nil {
		t.Errorf("no TLS flags: %+v, %v; want nil, nil", lc, err)
	}
	lc, err := listenConfig(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(&engine.Config{Logf: func(string, ...any) {}}, &hello.Handler{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", lc)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	url := "https://" + ln.Addr().String() + "/"
	for _, proto := range []string{"HTTP/2.0", "HTTP/1.1"} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: proto == "HTTP/2.0"}
		cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for range 2 { // the second on the same connection
			resp, err := cl.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.Proto != proto || resp.StatusCode != 200 || string(body) != "hello, world" {
				t.Errorf("%s: %s %d %q, %v; want %s 200 hello, world", proto, resp.Proto, resp.StatusCode, body, err, proto)
			}
		}
		tr.CloseIdleConnections()
	}
}
