package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// heldFinish is a client's connection whose second write (a TLS
// client's last flight, after the server's, which chose the protocol)
// waits for release; reached is closed when it begins.
type heldFinish struct {
	net.Conn
	writes           int
	reached, release chan struct{}
}

func (c *heldFinish) Write(p []byte) (int, error) {
	if c.writes++; c.writes == 2 {
		close(c.reached)
		<-c.release
	}
	return c.Conn.Write(p)
}

// TestTLSReloadALPNStraddledH2Settings: a client whose handshake chose h2
// before a reload took h2 off the listener's alpn, and ended after it,
// is served HTTP/2 with the h2 settings of the listener that offered h2
// (its h2_max_concurrent_streams and h2_initial_window), not with
// internal/h2's defaults.
func TestTLSReloadALPNStraddledH2Settings(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		u := newHTTPUpstream(t, forwardedEcho)
		mk := func(alpn ...string) *Config {
			cfg := httpConfig(b, u.addr)
			cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key, ALPN: alpn, HandshakeTimeout: Duration(time.Minute)}
			if len(alpn) == 2 {
				cfg.Listeners[0].H2MaxConcurrentStreams = 7
				cfg.Listeners[0].H2InitialWindow = 1 << 20
			}
			return cfg
		}
		p := startProxy(t, mk("h2", "http/1.1"))
		raw, err := net.Dial("tcp", p.Addr("web").String())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		hf := &heldFinish{Conn: raw, reached: make(chan struct{}), release: make(chan struct{})}
		c := tls.Client(hf, &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"h2"}})
		c.SetDeadline(time.Now().Add(10 * time.Second))
		done := make(chan error, 1)
		go func() { done <- c.Handshake() }()
		select {
		case <-hf.reached:
		case err := <-done:
			t.Fatalf("the handshake ended before the client's last flight: %v", err)
		}
		mustReload(t, p, mk("http/1.1"))
		waitFor(t, "the reload in force on the loops", func() bool {
			h2 := false
			onLoops(p, func(ls *loopState) {
				for _, l := range ls.lns {
					h2 = h2 || l.cfg.servesH2()
				}
			})
			return !h2
		})
		close(hf.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != "h2" {
			t.Fatalf("the handshake chose %q, want h2", got)
		}
		if _, err := io.WriteString(c, h2.ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
			t.Fatal(err)
		}
		var head [9]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			t.Fatal(err)
		}
		n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		if head[3] != 0x4 || n%6 != 0 {
			t.Fatalf("the server's first frame: type %d, %d bytes; want SETTINGS", head[3], n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c, payload); err != nil {
			t.Fatal(err)
		}
		got := map[uint16]uint32{}
		for i := 0; i < n; i += 6 {
			got[binary.BigEndian.Uint16(payload[i:])] = binary.BigEndian.Uint32(payload[i+2:])
		}
		if got[0x3] != 7 || got[0x4] != 1<<20 {
			t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d, SETTINGS_INITIAL_WINDOW_SIZE %d; want 7, %d (the listener that offered h2)", got[0x3], got[0x4], 1<<20)
		}
	})
}
