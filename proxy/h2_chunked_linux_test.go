package proxy

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// chunkedAnswer writes a chunked response to c: its head, then body framed
// in chunks of varied sizes, every other one with extensions, then the
// trailer section (CRLF-ended field lines). The writes are of varied sizes
// too; slow ones (of a few bytes, tiny chunks) are a millisecond apart, so
// the proxy reads the framing in parts.
func chunkedAnswer(c net.Conn, body []byte, trailer string, slow bool) error {
	var out []byte
	out = append(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"...)
	r := rand.New(rand.NewPCG(1, uint64(len(body))))
	for i := 0; len(body) > 0; i++ {
		n := min(len(body), 1+r.IntN(70000))
		if slow {
			n = min(len(body), 1+r.IntN(7))
		}
		out = fmt.Appendf(out, "%x", n)
		if i%2 == 1 {
			out = append(out, ` ;ext="a;b";x`...)
		}
		out = append(out, "\r\n"...)
		out = append(out, body[:n]...)
		out = append(out, "\r\n"...)
		body = body[n:]
	}
	out = append(out, "0;last\r\n"+trailer+"\r\n"...)
	for len(out) > 0 {
		n := min(len(out), 1+r.IntN(40000))
		if slow {
			n = min(len(out), 1+r.IntN(5))
		}
		if _, err := c.Write(out[:n]); err != nil {
			return err
		}
		out = out[n:]
		if slow {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// TestH2ChunkedResponse: a chunked response reaches an HTTP/2 client as
// its data and trailers, however the server's writes split its framing
// (extensions, data that looks like framing, trailer fields): a small one
// in writes of a few bytes, and one larger than the client's stream window
// (the client reads once the proxy has paused, so data is held and sent in
// parts); a body whose framing is broken after some data resets the stream.
func TestH2ChunkedResponse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		small := []byte("hello\r\n0\r\n\r\nworld; 5\r\nX-T: no\r\n")
		big := randomBytes(5, 8<<20)
		u := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
			switch req.URL.Path {
			case "/small":
				return chunkedAnswer(c, small, "X-T: small\r\nX-Other: 1\r\n", true) == nil
			case "/big":
				return chunkedAnswer(c, big, "X-T: big\r\n", false) == nil
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabcX\r\n0\r\n\r\n")
			return false
		}))
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		c.Timeout = 2 * time.Minute // 8 MiB under -race on a loaded machine
		for _, tc := range []struct {
			path    string
			body    []byte
			trailer string
		}{{"/small", small, "small"}, {"/big", big, "big"}} {
			resp, err := c.Get(base + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.path == "/big" {
				settled(func() int64 { return int64(serverTotals(p, u.addr).BytesIn) })
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(body, tc.body) {
				t.Fatalf("%s: %d bytes (%v), want the %d sent", tc.path, len(body), err, len(tc.body))
			}
			if got := resp.Trailer.Get("X-T"); got != tc.trailer || resp.Trailer.Get("X-Other") != map[bool]string{true: "1"}[tc.path == "/small"] {
				t.Errorf("%s: trailers %v, want X-T: %s", tc.path, resp.Trailer, tc.trailer)
			}
		}
		resp, err := c.Get(base + "/bad")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(body) > len("helloabc") {
			t.Errorf("broken chunked body: %q, %v; want at most its data before the break and a stream error", body, err)
		}
		if n := p.Totals().Listeners[0].H2ResetsProxy; n != 1 {
			t.Errorf("%d streams reset by the proxy, want 1", n)
		}
	})
}
