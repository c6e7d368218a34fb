package proxy

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// h1ClientOut returns the largest write queue (QueuedMemory) of p's
// HTTP/1.1 clients.
func h1ClientOut(p *Proxy) int {
	most := 0
	onLoops(p, func(ls *loopState) {
		for _, s := range ls.sessions {
			most = max(most, s.client.QueuedMemory())
		}
	})
	return most
}

// TestH1PipelinedNotReading: an HTTP/1.1 client that pipelines requests
// and reads none of the responses costs the proxy its write queue's mark
// and a response, not every response: the next request is not read
// while the client's queue holds the mark. The responses (to HEAD) have
// no body: each ends within what the proxy reads of it, so the server's
// reading, paused at the mark, never holds the client's. Once the client
// reads, every request sent is answered. (Before: the client was read
// whatever its queue held, each response appended to it for as long as
// the client sent: 3.1 MB for 60000 HEADs, every backend, the kernel's
// buffers holding the first few MB.)
func TestH1PipelinedNotReading(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "4096")
		})
		p := startProxy(t, httpConfig(b, u.addr))
		c := dialReadBuffer(t, p, 16<<10)
		requests := func() uint64 { return p.Totals().Listeners[0].Requests }
		const n, round = 60000, 200
		req := []byte(strings.Repeat("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n", round))
		sent := sendUnread(t, c, n, func() ([]byte, int) { return req, round }, requests, func() int { return h1ClientOut(p) })
		// Once the client reads, every request sent is answered.
		c.SetReadBuffer(1 << 20)
		c.SetReadDeadline(time.Now().Add(time.Minute))
		r := bufio.NewReader(c)
		for answered := 0; answered < sent; {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%d of %d responses read: %v", answered, sent, err)
			}
			if strings.HasPrefix(line, "HTTP/1.1 ") {
				if line != "HTTP/1.1 200 OK\r\n" {
					t.Fatalf("%d of %d responses read, then %q", answered, sent, line)
				}
				answered++
			}
		}
	})
}
