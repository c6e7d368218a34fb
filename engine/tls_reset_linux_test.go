package engine

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestDialTLSResetInHandshake: Reset's doc says that before a dialed
// connection's OnOpen it is Close. A DialTLS connection in its handshake
// (connected, OnOpen not yet come) is reset instead: the server reads
// ECONNRESET where Close gives it the end of the stream.
func TestDialTLSResetInHandshake(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			e, h := startDialer(t, b)
			l := e.Loops()[0]
			j := &dialJob{data: []byte("x"), window: 1}
			dialTLSJob(h, l, ln.Addr().String(), time.Hour, clientTLS(0), j)
			srv, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			srv.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 64<<10)
			if _, err := srv.Read(buf); err != nil { // the ClientHello
				t.Fatal(err)
			}
			waitFor(t, "the handshake", func() bool { return handshakeGoroutines() == 1 })
			l.Post(func() {
				for _, c := range l.conns {
					if c != nil && c.Context() == j {
						c.Reset()
					}
				}
			})
			waitJob(t, h)
			var rerr error
			for rerr == nil {
				_, rerr = srv.Read(buf)
			}
			if !errors.Is(rerr, io.EOF) {
				t.Errorf("server read %v after Reset in the handshake; the doc (Reset: before OnOpen it is Close) promises the end of the stream", rerr)
			}
		})
	}
}
