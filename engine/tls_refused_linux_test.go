package engine

import (
	"net"
	"testing"
	"time"
)

// TestTLSHandshakesRefusedPerListener: Listener.TLSHandshakesRefused
// counts the connections its own MaxHandshakes reset, another TLS
// listener's and a plain one's staying 0, their sum
// Stats.TLSHandshakesRefused. Every backend.
func TestTLSHandshakesRefusedPerListener(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &tlsFailHandler{errs: make(chan error, 64)}
			e := newEngine(t, testConfig(b), h)
			lc := &ListenConfig{TLS: serverTLS(), HandshakeTimeout: time.Minute, MaxHandshakes: 1}
			var lns []*Listener
			for _, c := range []*ListenConfig{lc, lc, nil} {
				ln, err := e.Listen("tcp", "127.0.0.1:0", c)
				if err != nil {
					t.Fatal(err)
				}
				lns = append(lns, ln)
			}
			runStoppable(t, e)
			mustDial(t, "tcp", lns[0].Addr().String())
			waitFor(t, "the accept", func() bool { return e.Stats().TLSHandshakes == 1 })
			for range 2 {
				// The reset may come before the connect returns (loopback).
				if c, err := net.Dial("tcp", lns[0].Addr().String()); err == nil {
					defer c.Close()
				}
			}
			waitFor(t, "2 refused", func() bool { return e.Stats().TLSHandshakesRefused == 2 })
			if a, b, c := lns[0].TLSHandshakesRefused(), lns[1].TLSHandshakesRefused(), lns[2].TLSHandshakesRefused(); a != 2 || b != 0 || c != 0 {
				t.Errorf("refused by listener: %d, %d, %d; want 2, 0, 0", a, b, c)
			}
		})
	}
}
