package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestIdleTimeoutSocketDraining: a tunnel whose client is still taking
// what the proxy's socket holds for it (its write queue empty: megabytes
// sit in the socket's send buffer, the client reading slowly) is not
// idle: idle_timeout closed it as one, the socket's bytes moving longer
// than the timeout, before the client had read them.
func TestIdleTimeoutSocketDraining(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 2 << 20
		u := newUpstream(t, func(c net.Conn) {
			c.Write(make([]byte, size))
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
				io.WriteString(c, "end")
			}
			io.Copy(io.Discard, c)
		})
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].IdleTimeout = Duration(500 * time.Millisecond)
		p := startProxy(t, cfg)
		c := dialSmall(t, p)
		buf := make([]byte, 4096)
		t0 := time.Now()
		for n := 0; n < size; {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			k, err := c.Read(buf)
			if err != nil {
				t.Fatalf("read %d of %d bytes: %v", n, size, err)
			}
			n += k
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("read in %v", time.Since(t0))
		if n := p.Totals().Listeners[0].IdleClosed; n != 0 {
			t.Errorf("%d idle closes while the client was reading", n)
		}
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 3)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "end" {
			t.Errorf("read %q, %v after the stream; want the server's answer", got, err)
		}
	})
}
