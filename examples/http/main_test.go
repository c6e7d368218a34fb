package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/examples/http/hello"
	"github.com/spindlenet/spindle/internal/certgen"
	"github.com/spindlenet/spindle/internal/mainproc"
)

func TestMain(m *testing.M) {
	mainproc.Run(main, "-addr", "127.0.0.1:0")
	os.Exit(m.Run())
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key as
// PEM files in dir, and returns their paths and a pool trusting it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	cert, err := certgen.New(certgen.Spec{
		CommonName:  "127.0.0.1",
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := cert.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert.Pool()
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

// TestSecondSignalEndsAtOnce: SIGTERM starts the stop, which lets a request
// whose body the server waits for finish for up to 5 seconds; a second SIGTERM
// ends the process at once, by the signal's default action. The second
// signal was caught and dropped, and the process waited out the 5 seconds.
func TestSecondSignalEndsAtOnce(t *testing.T) {
	if signal.Ignored(syscall.SIGTERM) {
		t.Skip("SIGTERM is ignored in this process, and would be in the child")
	}
	p := mainproc.Start(t)
	c, err := net.Dial("tcp", p.Stdout("http: listening on "))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// The 100 Continue says the server has the head and waits for the body.
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	cont := make([]byte, len("HTTP/1.1 100 Continue\r\n\r\n"))
	if _, err := io.ReadFull(c, cont); err != nil || string(cont) != "HTTP/1.1 100 Continue\r\n\r\n" {
		t.Fatalf("read %q, %v; want the 100 Continue", cont, err)
	}
	p.Signal(syscall.SIGTERM)
	p.Stderr("http: stopping")
	p.Signal(syscall.SIGTERM)
	p.KilledBy(syscall.SIGTERM, 30*time.Second)
}
