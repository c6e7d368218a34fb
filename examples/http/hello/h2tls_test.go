package hello

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/certgen"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/testnet"
)

// TestH2TLSRecordsPerResponse: over TLS each engine.Conn.Write is a
// record of its own, and an HTTP/2 response, a few dozen bytes, went as
// three (WriteDataTo hands Pending, the DATA frame's header and the body
// to c.Write in turn): 44 bytes of record overhead more per response on
// the wire, and three AEAD seals where one does.
func TestH2TLSRecordsPerResponse(t *testing.T) {
	cert, err := certgen.New(certgen.Spec{
		CommonName:  "127.0.0.1",
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(&engine.Config{Logf: t.Logf}, &Handler{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", &engine.ListenConfig{TLS: &tls.Config{
		Certificates: []tls.Certificate{cert.TLS()}, NextProtos: []string{"h2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	raw := dialServer(t, ln.Addr().String(), 20*time.Second)
	rc := &testnet.RecordCounter{Conn: raw}
	tc := tls.Client(rc, &tls.Config{RootCAs: cert.Pool(), NextProtos: []string{"h2"}, ServerName: "127.0.0.1"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	k := &h2client{t: t, c: tc, r: bufio.NewReader(tc)}
	k.send(append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...))
	k.send(h2.AppendWindowUpdate(nil, 0, 1<<30))
	id := uint32(1)
	one := func() {
		k.send(h2.AppendHeaders(nil, id, getBlock, true, h2.MinMaxFrameSize))
		if status, body := k.response(id); status != 200 || body != hello {
			t.Fatalf("stream %d: %d %q", id, status, body)
		}
		id += 2
	}
	for range 10 { // the SETTINGS exchange and session tickets behind
		one()
	}
	time.Sleep(50 * time.Millisecond)
	before := rc.Records()
	const n = 100
	for range n {
		one()
	}
	if per := float64(rc.Records()-before) / n; per > 1 {
		t.Errorf("%.2f TLS records per HTTP/2 response, want 1", per)
	}
}
