package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startTLSGoNet starts the go-net arm's server behind a crypto/tls
// listener with cfg, and returns it with the count of the handshakes it
// completed with TLS 1.3.
func startTLSGoNet(t *testing.T, cfg *tls.Config) (*goNetServer, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handshakes atomic.Int64
	cfg = cfg.Clone()
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if cs.Version == tls.VersionTLS13 {
			handshakes.Add(1)
		}
		return nil
	}
	s := &goNetServer{ln: tls.NewListener(ln, cfg), cfg: ServerConfig{}.WithDefaults(), conns: map[net.Conn]struct{}{}, quit: make(chan struct{})}
	s.wg.Go(s.accept)
	t.Cleanup(func() { s.Close() })
	return s, &handshakes
}

// testCertPair makes a --tls certificate (newProxyTLS's) in a temporary
// directory and returns it as crypto/tls's pair, with the pool that
// verifies it.
func testCertPair(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	files, pool, err := newProxyTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair, pool
}

// TestLoadTLS runs the load generator with LoadConfig.TLS against the
// go-net arm's server behind crypto/tls, in both protocols: every
// connection handshakes (TLS 1.3, counted by the server and in
// LoadResult.TLS, with the ALPN asked for), and replies of 40 000 bytes,
// three TLS records each, come back verified, none left unanswered
// (crypto/tls holds a record's plaintext beyond what one read takes, which
// receive reads on without an event). Against a plain server the
// handshake fails the run's set-up.
func TestLoadTLS(t *testing.T) {
	skipUnlessLinux(t)
	pair, pool := testCertPair(t)
	const conns = 4
	for _, protocol := range []string{ProtocolRPC, ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			srv, handshakes := startTLSGoNet(t, &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"bench"}})
			res, err := RunLoad(context.Background(), LoadConfig{
				Addr: srv.Addr().String(), Protocol: protocol, Conns: conns, InFlight: 2, Payload: 40000, Threads: 2,
				Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond, TLS: proxyClientTLS(pool, []string{"bench"}),
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.TLS == nil || res.TLS.Handshakes != conns || res.TLS.Version != "TLS 1.3" || res.TLS.CipherSuite == "" || res.TLS.ALPN != "bench" {
				t.Errorf("TLS %+v, want %d handshakes, TLS 1.3, ALPN bench", res.TLS, conns)
			}
			if got := handshakes.Load(); got != conns {
				t.Errorf("the server completed %d TLS 1.3 handshakes, want %d", got, conns)
			}
			if res.Replies == 0 || res.Unanswered != 0 {
				t.Errorf("%d replies in the window, %d unanswered", res.Replies, res.Unanswered)
			}
		})
	}
	plain, err := startGoNet(context.Background(), ServerConfig{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, err = RunLoad(context.Background(), LoadConfig{Addr: plain.Addr().String(), Conns: 1, Duration: 50 * time.Millisecond, TLS: proxyClientTLS(pool, nil)})
	if err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("TLS to a plain server: %v, want a failed handshake", err)
	}
}

// TestLoadTLSHandshakesBeforeTheWindow: every connection's TLS handshake
// is done in the client threads' set-up, before the load starts, however
// slowly the server handshakes: against a server taking 20 ms a
// handshake, one at a time, 8 connections take 160 ms to handshake, eight
// times the warm-up, and the last handshake still ends before the warm-up
// begins.
func TestLoadTLSHandshakesBeforeTheWindow(t *testing.T) {
	skipUnlessLinux(t)
	pair, pool := testCertPair(t)
	var mu sync.Mutex
	var lastHandshake time.Time
	slow := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		lastHandshake = time.Now()
		return &pair, nil
	}
	srv, handshakes := startTLSGoNet(t, &tls.Config{GetCertificate: slow})
	const conns, warmup = 8, 20 * time.Millisecond
	var windowStart time.Time
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: srv.Addr().String(), Conns: conns, Threads: 2, Warmup: warmup, Duration: 50 * time.Millisecond,
		TLS: proxyClientTLS(pool, nil), Window: func(start, end time.Time) { windowStart = start },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := handshakes.Load(); got != conns || res.TLS == nil || res.TLS.Handshakes != conns {
		t.Fatalf("%d handshakes by the server, TLS %+v; want %d", got, res.TLS, conns)
	}
	mu.Lock()
	defer mu.Unlock()
	if loadStart := windowStart.Add(-warmup); !lastHandshake.Before(loadStart) {
		t.Errorf("the last handshake ended %v after the load started (the window %v after it)", lastHandshake.Sub(loadStart), warmup)
	}
}
