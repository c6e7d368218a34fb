package engine

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTLSResetAfterRecordFailure: a TLS connection whose peer sent a
// record that does not decrypt is closed by the engine with the read's
// error (its alert queued); a Reset from the handler while that close
// waits for the queue (the peer reads nothing) cuts it short, and OnClose
// still gets the read's error, which says why the connection ended, on
// every backend. Reset cleared it (363fd28, for the error a write that met
// the peer's reset keeps), and OnClose got nil.
func TestTLSResetAfterRecordFailure(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			opened := make(chan *Conn, 1)
			ended := make(chan error, 1)
			h := &BaseHandlerFunc{
				open: func(c *Conn) {
					c.Write(make([]byte, 16<<20)) // more than the socket buffers take
					opened <- c
				},
				closed: func(c *Conn, err error) { ended <- err },
			}
			cfg := testConfig(b)
			cfg.CloseTimeout = time.Minute
			cfg.ReadPastHighWater = true // the record is read with the queue full
			_, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS()})
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if err := tls.Client(raw, clientTLS(0)).Handshake(); err != nil {
				t.Fatal(err)
			}
			c := awaitConn(t, opened, "OnOpen not called")
			// An application data record of 32 bytes that no key opens.
			bad := append([]byte{23, 3, 3, 0, 32}, make([]byte, 32)...)
			if _, err := raw.Write(bad); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the engine to close the connection for the record", func() bool {
				closing := make(chan bool, 1)
				c.Loop().Post(func() { closing <- c.state == stateClosing || c.Closed() })
				return <-closing
			})
			c.Loop().Post(func() { c.Reset() })
			var got error
			select {
			case got = <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection did not end")
			}
			var oe *net.OpError
			if !errors.As(got, &oe) || oe.Op != "read" || !strings.Contains(got.Error(), "tls") {
				t.Errorf("OnClose(%v) after a Reset of a connection closing for a bad record, want the read's error", got)
			}
		})
	}
}
