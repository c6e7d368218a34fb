package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// rawConn records the bytes read from its Conn.
type rawConn struct {
	net.Conn
	b []byte
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.b = append(c.b, p[:n]...)
	return n, err
}

// lastRecord returns the type and length of the last whole TLS record in
// raw, a connection's bytes from its start.
func lastRecord(raw []byte) (typ byte, n int) {
	for len(raw) >= 5 {
		typ, n = raw[0], int(binary.BigEndian.Uint16(raw[3:5]))
		if len(raw) < 5+n {
			break
		}
		raw = raw[5+n:]
	}
	return typ, n
}

// closeNotified reports whether a client's last record, which raw (its
// bytes from the start) ends in, is close_notify: an alert record in TLS
// 1.2 (the type in clear); in TLS 1.3 an encrypted record of 19 bytes
// (the alert's 2, its inner type's 1, the AEAD tag's 16; crypto/tls pads
// none), which a health check sends nothing else as (its request is
// longer, type tcp sends nothing).
func closeNotified(raw []byte, version uint16) bool {
	typ, n := lastRecord(raw)
	if version == tls.VersionTLS12 {
		return typ == 21
	}
	return typ == 23 && n == 19
}

// closeSeen is a server's record of how its clients' connections ended:
// whether each sent close_notify (TestHealthTLSCloseNotify), the code of
// the GOAWAY each sent (TestHealthH2GoAway).
type closeSeen[T any] struct {
	mu   sync.Mutex
	ends []T
}

func (s *closeSeen[T]) add(end T) {
	s.mu.Lock()
	s.ends = append(s.ends, end)
	s.mu.Unlock()
}

func (s *closeSeen[T]) get() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ends)
}

// closeServer starts a crypto/tls server (version only) with ca's
// certificate for app.test that answers HTTP requests 200 (type http)
// or nothing (type tcp), reads each connection to its end and records in
// seen whether it ended with close_notify.
func closeServer(t *testing.T, ca *testCA, version uint16, typ string, seen *closeSeen[bool]) string {
	certFile, keyFile := ca.issue(t, "app", "app.test")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: version, MaxVersion: version}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	serve := func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		raw := &rawConn{Conn: c}
		tc := tls.Server(raw, cfg)
		if tc.Handshake() != nil {
			return
		}
		r := bufio.NewReader(tc)
		if typ == HealthHTTP {
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
			io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
		_, err := io.Copy(io.Discard, r)
		seen.add(err == nil && closeNotified(raw.b, version))
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	return ln.Addr().String()
}

// TestHealthTLSCloseNotify: a TLS pool's health checks end their
// connections with close_notify (crypto/tls's Read says io.EOF to a bare
// FIN at a record boundary too: the server looks at the last record):
// type tcp after the handshake, type http after the response; over TLS
// 1.2 and 1.3.
func TestHealthTLSCloseNotify(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, typ := range []string{HealthTCP, HealthHTTP} {
			t.Run(tls.VersionName(version)+"/"+typ, func(t *testing.T) {
				ca := newTestCA(t)
				var seen closeSeen[bool]
				addr := closeServer(t, ca, version, typ, &seen)
				cfg := testConfig(engine.BackendEpoll, addr)
				cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
				cfg.Pools[0].Health = &HealthConfig{Type: typ, Interval: Duration(time.Second), Timeout: Duration(time.Second), Rise: 1, Fall: 1}
				if typ == HealthHTTP {
					cfg.Pools[0].Health.Path = "/"
				}
				p := startProxy(t, cfg)
				waitFor(t, "2 checks read to their end", func() bool { return len(seen.get()) >= 2 })
				if n := p.Totals().Servers[0].CheckPasses; n == 0 {
					t.Errorf("%d checks passed, want some", n)
				}
				if ends := seen.get()[:2]; !ends[0] || !ends[1] {
					t.Errorf("checks ended with close_notify: %v, want both", ends)
				}
			})
		}
	}
}
