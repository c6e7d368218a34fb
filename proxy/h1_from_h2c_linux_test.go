package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// endHeadersApp answers every request with a HEADERS frame that ends the
// stream (END_STREAM, no content-length): a response with no content,
// status by path (/204: 204 with content-length: 7, else 200).
type endHeadersApp struct{}

func (endHeadersApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if !end {
		return
	}
	if string(r.Path) == "/204" {
		s.WriteHeaders(id, 204, []hpack.Field{{Name: []byte("content-length"), Value: []byte("7")}}, true)
		return
	}
	s.WriteHeaders(id, 200, []hpack.Field{{Name: []byte("x-empty"), Value: []byte("1")}}, true)
}
func (endHeadersApp) OnData(s *h2.Server, id uint32, p []byte, end bool) { s.Consumed(id, len(p)) }
func (endHeadersApp) OnTrailers(*h2.Server, uint32, []hpack.Field)       {}
func (endHeadersApp) OnReset(*h2.Server, uint32, h2.ErrCode)             {}
func (endHeadersApp) OnWritable(*h2.Server, uint32)                      {}
func (endHeadersApp) OnGoAway(*h2.Server, h2.ErrCode, []byte)            {}

// TestH1FromH2CEmptyResponse: an h2c server's response whose HEADERS
// end the stream (no content, no content-length: legal in HTTP/2) goes
// to an HTTP/1.1 client with framing that ends it: a head with neither
// Content-Length nor Transfer-Encoding is read until the close (RFC 9112
// 6.3), so the client would wait for keepalive_timeout, and a next
// request's response would be read as this one's body.
func TestH1FromH2CEmptyResponse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) { serveH2(c, endHeadersApp{}) })
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].Protocol = ProtocolH2C
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
		head := rawHead(t, c, br)
		t.Logf("first head:\n%s", head)
		cl, te, conn := fieldLines(head, "Content-Length"), fieldLines(head, "Transfer-Encoding"), fieldLines(head, "Connection")
		if len(cl) == 0 && len(te) == 0 && !(len(conn) > 0 && strings.EqualFold(conn[0], "close")) {
			// The client reads the body until the close: see what it gets.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			rest, _ := io.ReadAll(br)
			t.Fatalf("a 200 with no content went without Content-Length, Transfer-Encoding or Connection: close; the client reads as its body (until the close): %q", rest)
		}
	})
}

// TestH1FromH2C204ContentLength: a 204 from an h2c server goes to an
// HTTP/1.1 client without Content-Length (RFC 9110 8.6: none on a 204),
// as one from an HTTP/1.1 server does.
func TestH1FromH2C204ContentLength(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) { serveH2(c, endHeadersApp{}) })
		cfg := httpConfig(b, u.addr)
		cfg.Pools[0].Protocol = ProtocolH2C
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /204 HTTP/1.1\r\nHost: x\r\n\r\n")
		head := rawHead(t, c, br)
		if cl := fieldLines(head, "Content-Length"); len(cl) > 0 {
			t.Errorf("204 with Content-Length %q:\n%s", cl, head)
		}
	})
}

// TestLocalResponseToHead: the proxy's own response to a HEAD (503:
// no server up) has no content (RFC 9112 6.3: a HEAD's response ends at
// its head), as the 429's and an HTTP/2 client's have none.
func TestLocalResponseToHead(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		p := startProxy(t, httpConfig(b, deadAddr(t)))
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
		head := rawHead(t, c, br)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, _ := io.ReadAll(br)
		if len(rest) > 0 {
			t.Errorf("after the head of the response to HEAD:\n%s\ncame %q", head, rest)
		}
	})
}

// TestUpgradeLogRespBytes: the access log line of an upgrade (101)
// on a kept-alive client connection counts no response body: it counted
// the body of the response before it on the connection.
func TestUpgradeLogRespBytes(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const big = 100000
		u := newUpstream(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.Header.Get("Upgrade") != "" {
					io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
					c.Read(make([]byte, 1))
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(big)+"\r\n\r\n"+strings.Repeat("x", big))
			}
		})
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || len(body) != big {
			t.Fatalf("%d, %d bytes", resp.StatusCode, len(body))
		}
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
		if head := rawHead(t, c, br); !strings.HasPrefix(head, "HTTP/1.1 101") {
			t.Fatalf("upgrade: %q", head)
		}
		c.Close() // (the line is written at the tunnel's end)
		m := waitLine(t, path, "the 101's line", func(m map[string]any) bool { return m["target"] == "/ws" })
		checkFields(t, m, map[string]string{"status": "101", "resp_bytes": "0"})
	})
}
