package proxy

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestHTTPDrainRequestCompletes: a request whose head was on its way when
// the stop came (half of it received, so the drain does not close the
// client as idle) completes during the drain: it is forwarded and
// answered, as TestHTTPDrain's request in flight is. The drain drops the
// pooled upstream connections, so it needs a new one, and the engine
// refused every Dial from the start of Shutdown (ErrClosed): the client
// got the proxy's own error response instead.
func TestHTTPDrainRequestCompletes(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "done")
		})
		p, err := New(httpConfig(b, u.addr), &Options{Drain: 20 * time.Second, Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		c := dial(t, p)
		// A first request leaves an upstream connection in the pool,
		// which the drain closes.
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		readResponse(t, c, "GET")
		head := "GET /second HTTP/1.1\r\n"
		read := p.Engine().Stats().BytesRead
		io.WriteString(c, head)
		waitFor(t, "the proxy to read half the head", func() bool {
			return p.Engine().Stats().BytesRead >= read+uint64(len(head))
		})
		cancel()
		waitFor(t, "the pooled upstream connection to close", func() bool {
			return serverTotals(p, u.addr).Idle == 0
		})
		io.WriteString(c, "Host: x\r\n\r\n")
		resp, body := readResponse(t, c, "GET")
		if resp.StatusCode != 200 || body != "done" {
			t.Errorf("request completed during the drain: %d %q, want 200 \"done\"", resp.StatusCode, body)
		}
		c.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run still draining 10 s after the last client left")
		}
	})
}
