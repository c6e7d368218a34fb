package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTrailerFieldsConnectionNames: a trailer field that the message's
// Connection field names is connection-specific and is not passed on
// (RFC 9110 7.6.1: an intermediary removes "any header or trailer
// field(s)" with the name of a connection option): X-Hop reaches neither
// the server in an HTTP/1.1 request's trailer section, for each pool
// protocol, nor an HTTP/1.1 or HTTP/2 client in an HTTP/1.1 server's
// response's; X-Sum, which Connection does not name, passes both ways.
func TestTrailerFieldsConnectionNames(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, trailerNames, func(protocol, server string) {
			cfg := httpConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, cfg)
			c := dial(t, p)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			// (Go's HTTP/2 server keeps the trailers the head names.)
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nConnection: X-Hop\r\nTrailer: X-Sum, X-Hop\r\n"+
				"Transfer-Encoding: chunked\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Hop: 1\r\nX-Sum: a\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("to %s: %v", protocol, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := string(body); resp.StatusCode != 200 || !strings.EqualFold(got, "5 X-Sum") {
				t.Errorf("to %s: %d %q, want 200 %q", protocol, resp.StatusCode, got, "5 X-Sum")
			}
		})

		u := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, _ int) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nTrailer: X-Sum, X-Hop\r\n"+
				"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Hop: 1\r\nX-Sum: a\r\n\r\n")
			return true
		}))
		p := startProxy(t, h2cConfig(b, u.addr))
		h1c, base := client(t, p)
		h2c, _ := h2Client(t, p)
		for _, c := range []*http.Client{h1c, h2c} {
			resp, err := c.Get(base + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := trailerKeys(resp.Trailer); string(body) != "hello" || got != "X-Sum" {
				t.Errorf("HTTP/%d response: body %q, trailer fields %q; want \"hello\" and \"X-Sum\"", resp.ProtoMajor, body, got)
			}
		}
	})
}
