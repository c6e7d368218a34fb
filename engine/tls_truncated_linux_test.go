package engine

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"
)

// truncRecorder says, at each OnEOF, what Conn.TLSTruncated reported
// there, and closes the connection.
type truncRecorder struct {
	BaseHandler
	truncated chan bool
}

func (h *truncRecorder) OnData(*Conn, Buffer) bool { return false }

func (h *truncRecorder) OnEOF(c *Conn) {
	h.truncated <- c.TLSTruncated()
	c.Close()
}

// TestTLSTruncatedWithoutCloseNotify: a client that ends its stream with
// close_notify (with its FIN after it, or without one) is not truncated
// at OnEOF; one that sends its FIN alone after a whole record, which
// crypto/tls also takes for the end, is (Conn.TLSTruncated), on TLS 1.2
// and 1.3. A plain connection is never truncated.
func TestTLSTruncatedWithoutCloseNotify(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &truncRecorder{truncated: make(chan bool, 1)}
			_, addr := startTLSEngine(t, testConfig(b), h, &ListenConfig{TLS: serverTLS()})
			for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
				for _, tc := range []struct {
					name string
					end  func(raw net.Conn, c *tls.Conn)
					want bool
				}{
					{"close_notify", func(_ net.Conn, c *tls.Conn) { c.CloseWrite() }, false},
					{"close_notify and FIN", func(raw net.Conn, c *tls.Conn) {
						c.CloseWrite()
						raw.(*net.TCPConn).CloseWrite()
					}, false},
					{"FIN alone", func(raw net.Conn, _ *tls.Conn) { raw.(*net.TCPConn).CloseWrite() }, true},
				} {
					t.Run(fmt.Sprintf("%s/%x", tc.name, v), func(t *testing.T) {
						raw := mustDial(t, "tcp", addr)
						c := tls.Client(raw, clientTLS(v))
						if _, err := c.Write([]byte("data")); err != nil {
							t.Fatal(err)
						}
						tc.end(raw, c)
						select {
						case got := <-h.truncated:
							if got != tc.want {
								t.Errorf("TLSTruncated at OnEOF: %v, want %v", got, tc.want)
							}
						case <-time.After(10 * time.Second):
							t.Fatal("no OnEOF")
						}
					})
				}
			}
		})
	}
	t.Run("plain", func(t *testing.T) {
		h := &truncRecorder{truncated: make(chan bool, 1)}
		_, addr := startTLSEngine(t, testConfig(BackendURing), h, nil)
		raw := mustDial(t, "tcp", addr)
		raw.Write([]byte("data"))
		raw.(*net.TCPConn).CloseWrite()
		select {
		case got := <-h.truncated:
			if got {
				t.Error("TLSTruncated on a plain connection")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no OnEOF")
		}
	})
}
