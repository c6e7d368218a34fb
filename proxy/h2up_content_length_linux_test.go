package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// twoLengthsApp answers every request "hello" with its length in two
// content-length fields, equal in value but not spelled alike (a HEAD's
// without the content).
type twoLengthsApp struct{}

var twoLengths = []hpack.Field{
	{Name: []byte("content-length"), Value: []byte("05")},
	{Name: []byte("content-length"), Value: []byte("5")},
}

func (twoLengthsApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	head := string(r.Method) == "HEAD"
	if s.WriteHeaders(id, 200, twoLengths, head) == nil && !head {
		s.WriteData(id, []byte("hello"), true)
	}
}
func (twoLengthsApp) OnData(s *h2.Server, id uint32, p []byte, end bool) { s.Consumed(id, len(p)) }
func (twoLengthsApp) OnTrailers(*h2.Server, uint32, []hpack.Field)       {}
func (twoLengthsApp) OnReset(*h2.Server, uint32, h2.ErrCode)             {}
func (twoLengthsApp) OnWritable(*h2.Server, uint32)                      {}
func (twoLengthsApp) OnGoAway(*h2.Server, h2.ErrCode, []byte)            {}

// TestH2UpContentLengthOnce: an h2c server's response with its length
// in two content-length fields, equal in value ("05" and "5": internal/h2
// takes them as one length), reaches an HTTP/1.1 client with one
// Content-Length field, to GET and to HEAD, as an HTTP/1.1 server's does
// (TestHTTPResponseFraming): a client that compares the fields as
// written refuses the response otherwise (RFC 9110 8.6 lets it; Go's
// net/http does).
func TestH2UpContentLengthOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) { serveH2(c, twoLengthsApp{}) })
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		for _, method := range []string{"GET", "HEAD"} {
			c := dial(t, p)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			io.WriteString(c, method+" / HTTP/1.1\r\nHost: x\r\n\r\n")
			head := rawHead(t, c, br)
			if cl := fieldLines(head, "Content-Length"); fmt.Sprint(cl) != "[5]" {
				t.Errorf("%s: Content-Length %q, want one, 5:\n%s", method, cl, head)
			}
			if method == "GET" {
				body := make([]byte, 5)
				if _, err := io.ReadFull(br, body); err != nil || string(body) != "hello" {
					t.Errorf("body %q %v, want \"hello\"", body, err)
				}
			}
		}
	})
}
