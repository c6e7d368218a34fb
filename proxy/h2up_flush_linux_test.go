package proxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestH2UpFlushLost: a write of an h2c server's connection that is lost
// in upH2.flush (a request's HEADERS: a GET has no DATA, whose writes
// internal/h2 checks itself) ends the connection, as a lost DATA write
// does: the GET gets 502 at once (nothing else would carry the rest of
// the stream of frames, cut at the lost write), not an answer awaited
// for response_timeout that the server, never having seen the request,
// does not send; the next request goes on a new connection.
func TestH2UpFlushLost(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) { serveH2(c, echoTargetApp{}) })
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		if st, got := send(t, c, br, "GET", nil); st != 200 || got != "GET /" {
			t.Fatalf("GET: %d %q", st, got)
		}
		loseH2Writes(p)
		if st, _ := send(t, c, br, "GET", nil); st != 502 {
			t.Errorf("GET whose HEADERS were lost: %d, want 502", st)
		}
		waitFor(t, "the connection to be let go", func() bool { _, n := h2Waits(p); return n[0] == 0 })
		c = dial(t, p)
		if st, got := send(t, c, bufio.NewReader(c), "GET", nil); st != 200 || got != "GET /" {
			t.Errorf("the next GET: %d %q", st, got)
		}
		if n := up.accepted.Load(); n != 2 {
			t.Errorf("%d connections to the server, want 2", n)
		}
	})
}
