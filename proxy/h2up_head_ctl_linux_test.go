package proxy

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// headH2App answers every request with a 103 and a 200 head, each
// carrying fields, and "hello" (internal/h2 sends what it is given).
type headH2App struct{ trlH2App }

func (a *headH2App) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if s.WriteHeaders(id, 103, a.fields, false) != nil || s.WriteHeaders(id, 200, a.fields, false) != nil {
		return
	}
	s.WriteData(id, []byte("hello"), true)
}

// TestH2HeadCtlToH1: an h2c server's response head field (interim or
// final) whose value has a control character HTTP/1.1 does not carry
// (internal/h2 lets all but NUL, CR and LF through, RFC 9113 8.2.1) is
// left out of the head an HTTP/1.1 client gets, as from a trailer
// section, which a strict recipient (Go's net/http) refuses whole with
// it; the other fields pass and the connection goes on to its next
// response.
func TestH2HeadCtlToH1(t *testing.T) {
	app := new(headH2App)
	for _, f := range []string{"x-a: abc", "x-ctl: a\x01b", "x-del: a\x7fb", "x-vt: a\x0bb", "x-tab: a\tb"} {
		name, value, _ := strings.Cut(f, ": ")
		app.fields = append(app.fields, hpack.Field{Name: []byte(name), Value: []byte(value)})
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) { serveH2(c, app) })
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c := dial(t, p)
		br := bufio.NewReader(c)
		for i := range 2 {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			for _, status := range []string{"103", "200"} {
				head := rawHead(t, c, br)
				if !strings.HasPrefix(head, "HTTP/1.1 "+status+" ") || !strings.Contains(head, "\r\nx-a: abc\r\nx-tab: a\tb\r\n") ||
					strings.Contains(head, "x-ctl") || strings.Contains(head, "x-del") || strings.Contains(head, "x-vt") {
					t.Fatalf("response %d: %q", i, head)
				}
			}
			body, err := readChunked(t, c, br)
			if want := "5\r\nhello\r\n0\r\n\r\n"; err != nil || body != want {
				t.Fatalf("response %d: body %q (%v), want %q", i, body, err, want)
			}
		}
		h1c, base := client(t, p)
		resp, body := get(t, h1c, base+"/")
		if body != "hello" || resp.Header.Get("X-A") != "abc" || resp.Header.Get("X-Tab") != "a\tb" {
			t.Errorf("net/http: %q, head %v", body, resp.Header)
		}
	})
}
