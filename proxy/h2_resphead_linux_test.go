package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// rawH2Response sends method path as stream 1 on a new raw HTTP/2
// connection to p (rawH2Request) and returns what came back on it: each header block
// (its fields as "name: value"), the DATA, and "RST_STREAM code" if the
// stream was reset.
func rawH2Response(t *testing.T, p *Proxy, method, path string) (blocks [][]string, data, reset string) {
	t.Helper()
	r := rawH2Request(t, p, [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "x"}, {":path", path}})
	dec := hpack.NewDecoder(4096, 64<<10)
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("%s %s: %v after %q %q", method, path, err, blocks, data)
		}
		if f.StreamID != 1 {
			continue
		}
		switch f.Type {
		case h2.FrameRSTStream:
			return blocks, data, "RST_STREAM " + f.Code.String()
		case h2.FrameData:
			data += string(f.Data)
		case h2.FrameHeaders:
			if f.Flags&h2.FlagEndHeaders == 0 {
				t.Fatal("HEADERS with CONTINUATION: not expected here")
			}
			var fs []string
			dec.Decode(f.Data, func(hf hpack.Field) error {
				fs = append(fs, string(hf.Name)+": "+string(hf.Value))
				return nil
			})
			blocks = append(blocks, fs)
		default:
			continue
		}
		if f.Flags&h2.FlagEndStream != 0 {
			return blocks, data, ""
		}
	}
}

// strictH2Response returns why a strict client (nghttp2's
// http_response_on_header and nghttp2_http_on_response_headers, which
// curl uses) would find the response in blocks malformed, "" if it
// would not: a connection-specific field or a name with upper case
// (RFC 9113 8.2, 8.2.2), content-length in a 1xx, more than one or one
// that is not a number (RFC 9113 8.1.1, RFC 9110 8.6), other than "0"
// in a 204.
func strictH2Response(blocks [][]string) string {
	for _, fs := range blocks {
		status, cls := "", 0
		for _, f := range fs {
			name, value, _ := strings.Cut(f, ": ")
			switch {
			case name == ":status":
				status = value
			case name != strings.ToLower(name):
				return "field name with upper case: " + name
			case slices.Contains([]string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}, name):
				return "connection-specific field " + name
			case name == "content-length":
				cls++
				switch {
				case strings.HasPrefix(status, "1"):
					return "content-length in " + status
				case cls > 1:
					return "content-length twice"
				case value == "" || strings.Trim(value, "0123456789") != "":
					return "content-length " + fmt.Sprintf("%q", value)
				case status == "204" && value != "0":
					return "content-length " + value + " in 204"
				}
			}
		}
	}
	return ""
}

// checkH2Head checks the response of what, its header blocks (final the
// final response's fields): content-length cl in final ("" none, a|b two)
// and nothing a strict client finds malformed (strictH2Response).
func checkH2Head(t *testing.T, what string, blocks [][]string, final []string, cl string) {
	t.Helper()
	var got []string
	for _, f := range final {
		if v, ok := strings.CutPrefix(f, "content-length: "); ok {
			got = append(got, v)
		}
	}
	if strings.Join(got, "|") != cl {
		t.Errorf("%s: content-length %q, want %q", what, got, cl)
	}
	if why := strictH2Response(blocks); why != "" {
		t.Errorf("%s: %q is malformed to a strict client: %s", what, blocks, why)
	}
}

// TestH2ResponseHeadFromH1: the head of an HTTP/1.1 server's response
// reaches an HTTP/2 client as fields a strict client (nghttp2) accepts,
// whatever the server sent that HTTP/1.1 allows: the Content-Length of
// a response to HEAD and of a 304 (which announce a length, no body)
// received as a list of identical values or on two lines (RFC 9110 8.6
// lets a recipient take them as one), connection-specific fields and
// those Connection names, Transfer-Encoding on a response without a
// body, names in upper case, 1xx interim responses before the final
// one, a body sent anyway after the head of a response to HEAD, and
// trailers with connection-specific fields.
func TestH2ResponseHeadFromH1(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
			var resp string
			switch req.URL.Path {
			case "/cl-list":
				resp = "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n"
			case "/cl-twice":
				resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n"
			case "/cl-list-body":
				resp = "HTTP/1.1 200 OK\r\nContent-Length: 5 , 5\r\nContent-Length: 5\r\n\r\nhello"
			case "/304":
				resp = "HTTP/1.1 304 Not Modified\r\nContent-Length: 5,5\r\nETag: \"e\"\r\n\r\n"
			case "/204":
				resp = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"
			case "/hop":
				resp = "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n" +
					"Proxy-Connection: keep-alive\r\nUpgrade: h2c\r\nTransfer-Encoding: chunked\r\nX-UPPER-Case: v\r\n\r\n"
			case "/head-body":
				resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
			case "/trailer":
				resp = "HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" +
					"X-T: 1\r\nConnection: close\r\nKeep-Alive: 1\r\nProxy-Connection: close\r\nUpgrade: x\r\nX-UP: v\r\n\r\n"
			case "/interim":
				resp = "HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n" +
					"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n" +
					"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
			}
			if req.Method != "HEAD" && strings.HasSuffix(resp, "Transfer-Encoding: chunked\r\nX-UPPER-Case: v\r\n\r\n") {
				resp += "0\r\n\r\n"
			}
			_, err := io.WriteString(c, resp)
			return err == nil
		}))
		p := startProxy(t, h2cConfig(b, u.addr))
		for _, tc := range []struct {
			method, path string
			status, cl   string // cl: the content-length wanted, "" none
			data         string
		}{
			{"HEAD", "/cl-list", "200", "5", ""},
			{"HEAD", "/cl-twice", "200", "5", ""},
			{"GET", "/cl-list-body", "200", "5", "hello"},
			{"GET", "/304", "304", "5", ""},
			{"GET", "/204", "204", "", ""},
			{"HEAD", "/hop", "200", "", ""},
			{"GET", "/hop", "200", "", ""},
			{"HEAD", "/head-body", "200", "5", ""},
			{"GET", "/trailer", "200", "", "ok"},
			{"GET", "/interim", "200", "2", "ok"},
		} {
			blocks, data, reset := rawH2Response(t, p, tc.method, tc.path)
			what := tc.method + " " + tc.path
			if reset != "" || len(blocks) == 0 || data != tc.data {
				t.Errorf("%s: %q, data %q, %s", what, blocks, data, reset)
				continue
			}
			final := blocks[len(blocks)-1]
			if tc.path == "/trailer" {
				if len(blocks) != 2 || strings.Join(blocks[1], "|") != "x-t: 1|x-up: v" {
					t.Errorf("%s: %q, want the trailers x-t and x-up alone", what, blocks)
					continue
				}
				final = blocks[0]
			}
			if final[0] != ":status: "+tc.status {
				t.Errorf("%s: %q, want status %s", what, final, tc.status)
			}
			checkH2Head(t, what, blocks, final, tc.cl)
		}
	})
}

// clApp answers as an h2c server whose response heads have content-length
// where HTTP/2 clients refuse it, which internal/h2 takes from a server:
// twice (one value) in a response to HEAD (/head), in a 204 (/204) and
// in a 100 before a 200 (/100).
type clApp struct{ endHeadersApp }

func (clApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if !end {
		return
	}
	cl := func(v string) hpack.Field { return hpack.Field{Name: []byte("content-length"), Value: []byte(v)} }
	switch string(r.Path) {
	case "/head":
		s.WriteHeaders(id, 200, []hpack.Field{cl("5"), cl("5")}, true)
	case "/204":
		s.WriteHeaders(id, 204, []hpack.Field{cl("7")}, true)
	case "/100":
		s.WriteHeaders(id, 100, []hpack.Field{cl("0")}, false)
		s.WriteHeaders(id, 200, []hpack.Field{cl("2"), cl("2")}, false)
		s.WriteData(id, []byte("ok"), true)
	}
}

// TestH2ResponseHeadFromH2C: the head of an h2c server's response
// reaches an HTTP/2 client as fields a strict client (nghttp2) accepts,
// as one from an HTTP/1.1 server does (TestH2ResponseHeadFromH1):
// content-length once, none in a 1xx or a 204.
func TestH2ResponseHeadFromH2C(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) { serveH2(c, clApp{}) })
		cfg := h2cConfig(b, u.addr)
		cfg.Pools[0].Protocol = ProtocolH2C
		p := startProxy(t, cfg)
		for _, tc := range []struct{ method, path, status, cl, data string }{
			{"HEAD", "/head", "200", "5", ""},
			{"GET", "/204", "204", "", ""},
			{"GET", "/100", "200", "2", "ok"},
		} {
			blocks, data, reset := rawH2Response(t, p, tc.method, tc.path)
			what := tc.method + " " + tc.path
			if reset != "" || len(blocks) == 0 || data != tc.data {
				t.Errorf("%s: %q, data %q, %s", what, blocks, data, reset)
				continue
			}
			checkH2Head(t, what, blocks, blocks[len(blocks)-1], tc.cl)
		}
	})
}
