package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestMaxConnsQueuedEmptyBody: a request with Content-Length: 0 that
// waited in the pool's queue is whole once its head went: its response
// keeps the client's connection, which takes the next request. Its
// (empty) body was seen to end only where bytes of the client's read
// that held the head were passed on after it, which the queue let go of
// (nothing followed the head), so the request was taken for one whose
// body was still coming, and the client closed after the response
// (Connection: close).
func TestMaxConnsQueuedEmptyBody(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				arrived <- struct{}{}
				<-release
			}
			io.WriteString(w, r.Method+" "+r.URL.Path)
		})
		p := startProxy(t, capConfig(b, ModeHTTP, 1, 1, u.addr))
		hold := rawGet(t, p, "/hold")
		<-arrived
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "POST /zero HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
		queued(t, p, 1)
		close(release)
		if st, _ := status(t, hold); st != 200 {
			t.Fatalf("hold: %d", st)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, body := readResponseFrom(t, c, br, "POST")
		if resp.StatusCode != 200 || body != "POST /zero" || resp.Close {
			t.Fatalf("POST after its wait: %d %q, Connection: close %v; want 200, the connection kept", resp.StatusCode, body, resp.Close)
		}
		if st, got := send(t, c, br, "GET", nil); st != 200 || got != "GET /" {
			t.Errorf("the next request on its connection: %d %q", st, got)
		}
	})
}
