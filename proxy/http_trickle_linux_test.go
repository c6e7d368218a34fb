package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestHTTPTrickledHead: a head that arrives a byte at a time is parsed a
// bounded number of times, not once per read (each parse from the head's
// start: CPU quadratic in the head's size, a slowloris's lever), for a
// client's request head and for a server's response head.
func TestHTTPTrickledHead(t *testing.T) {
	pad := strings.Repeat("a", 8<<10)
	trickle := func(c net.Conn, s string) {
		for i := range len(s) {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				return
			}
		}
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var parses [2]atomic.Int64 // request heads, response heads
		headParsed = func(resp bool) {
			if resp {
				parses[1].Add(1)
			} else {
				parses[0].Add(1)
			}
		}
		t.Cleanup(func() { headParsed = nil })
		u := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
			if req.URL.Path == "/slow" {
				trickle(c, "HTTP/1.1 200 OK\r\nX-Pad: "+pad+"\r\nContent-Length: 2\r\n\r\nok")
			} else {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
			return true
		}))
		p := startProxy(t, httpConfig(b, u.addr))
		c := dial(t, p)
		trickle(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "+pad+"\r\n\r\n")
		if resp, body := readResponse(t, c, "GET"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("trickled request: %d %q", resp.StatusCode, body)
		}
		if n := parses[0].Load(); n > 3 {
			t.Errorf("a %d-byte request head sent a byte at a time was parsed %d times", len(pad)+40, n)
		}
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponse(t, c, "GET"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("trickled response: %d %q", resp.StatusCode, body)
		}
		if n := parses[1].Load(); n > 4 {
			t.Errorf("a %d-byte response head sent a byte at a time was parsed %d times (with the first response's)", len(pad)+40, n)
		}
	})
}
