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
// got the proxy's own error response instead. With an h2c pool the new
// connection then closes at the stream's end: it stayed open, idle, and
// Run waited for it until the drain ran out.
func TestHTTPDrainRequestCompletes(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			t.Run(map[bool]string{false: "http1", true: "h2c"}[h2c], func(t *testing.T) {
				cfg, addr, want := (*Config)(nil), "", "done"
				if h2c {
					u := newH2CUp(t, slowProto("done", nil), nil)
					cfg, addr, want = h2cPoolConfig(b, u.addr), u.addr, "done HTTP/2.0"
					cfg.Listeners[0].H2C = false
				} else {
					u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
						io.WriteString(w, "done")
					})
					cfg, addr = httpConfig(b, u.addr), u.addr
				}
				p, err := New(cfg, &Options{Drain: 20 * time.Second, Logf: func(string, ...any) {}})
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
					st := serverTotals(p, addr)
					return st.Idle == 0 && st.H2Connections == 0
				})
				io.WriteString(c, "Host: x\r\n\r\n")
				resp, body := readResponse(t, c, "GET")
				if resp.StatusCode != 200 || body != want {
					t.Errorf("request completed during the drain: %d %q, want 200 %q", resp.StatusCode, body, want)
				}
				c.Close()
				runEnds(t, done, "the last client left")
			})
		}
	})
}

// TestH2UpDrainServesWaitingRequest: a request waiting for a stream on an
// h2c pool's connection when the drain starts (the server takes one
// stream at a time, h2_max_connections 1, its only server busy) is
// served once the stream in flight ends, within the drain, over HTTP/2
// and HTTP/1.1 clients alike. The drain retired the connection and
// failed its waiters over to the next server: with none left, the
// request got 502 at once, logged SC, and the server a failed connect.
func TestH2UpDrainServesWaitingRequest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{true, false} {
			t.Run(map[bool]string{true: "h2", false: "http1"}[h2c], func(t *testing.T) {
				release := make(chan struct{})
				u := newH2CUp(t, slowProto("u", release), func(s *http.Server) {
					s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
				})
				cfg := h2cPoolConfig(b, u.addr)
				cfg.Listeners[0].H2C = h2c
				cfg.Pools[0].H2MaxConnections = 1
				p, stop, path := runLogged(t, cfg, 10*time.Second)
				c, base := client(t, p)
				if h2c {
					c, base = h2Client(t, p)
				}
				slow := getAsync(c, base+"/slow")
				waitFor(t, "the slow stream at the server", func() bool { return serverTotals(p, u.addr).H2Streams == 1 })
				waiting := getAsync(c, base+"/x")
				waitFor(t, "the second request waiting", func() bool { return serverTotals(p, u.addr).Active == 2 })
				drainsInFlight(t, stop, release, slow, "200 u HTTP/2.0")
				if got := <-waiting; got != "200 u HTTP/2.0" {
					t.Errorf("the request waiting at the drain: %q, want 200 u HTTP/2.0", got)
				}
				checkFields(t, waitLine(t, path, "the waiting request's line", func(m map[string]any) bool { return field(m, "target") == "/x" }),
					map[string]string{"status": "200", "term": "-", "reused": "true"})
				if n := u.conns.Load(); n != 1 {
					t.Errorf("%d connections to the server, want 1", n)
				}
			})
		}
	})
}
