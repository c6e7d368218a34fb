package proxy

import (
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestHTTPWriteTimeout: engine.write_timeout reaches the engine: a client
// that asks for a large response and never reads is reset once its
// queue has not moved for write_timeout (response_timeout, which would
// also end it, is far off), the server's connection is closed rather than
// pooled, and the gauges are back to 0.
func TestHTTPWriteTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 32 << 20 // past the sockets' buffers and the queue
		served := make(chan error, 1)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "33554432")
			_, err := w.Write(make([]byte, size))
			served <- err
		})
		cfg := httpConfig(b, u.addr)
		cfg.Engine.WriteTimeout = Duration(300 * time.Millisecond)
		cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
		p := startProxy(t, cfg)
		c := dialSmall(t, p)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		waitFor(t, "the response to be under way", func() bool { return p.Totals().Servers[0].BytesIn > 0 })
		t0 := time.Now()
		waitFor(t, "the stalled client and its server connection to be let go", func() bool {
			tot := p.Totals()
			st := tot.Servers[0]
			return tot.Listeners[0].Active == 0 && st.Active == 0 && st.Idle == 0 && p.Engine().Stats().Open == 0
		})
		t.Logf("let go after %v", time.Since(t0))
		if n := p.Engine().Stats().TimedOut; n != 1 {
			t.Errorf("engine Stats.TimedOut = %d, want 1 (the client; spindle_proxy_engine_timed_out_total)", n)
		}
		select {
		case err := <-served:
			if err == nil {
				t.Error("the server wrote the whole response to a client that never read")
			}
		case <-time.After(10 * time.Second):
			t.Error("the server's connection was not closed")
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the client read to %v, want a reset", err)
		}
	})
}
