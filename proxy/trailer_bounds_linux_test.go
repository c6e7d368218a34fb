package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// trlH2App answers every request with "hello" (no content-length) and
// the trailers fields, whatever they hold (internal/h2 sends what it is
// given).
type trlH2App struct{ fields []hpack.Field }

func (a *trlH2App) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if s.WriteHeaders(id, 200, nil, false) != nil {
		return
	}
	if _, err := s.WriteData(id, []byte("hello"), false); err == nil {
		s.WriteTrailers(id, a.fields)
	}
}
func (a *trlH2App) OnData(s *h2.Server, id uint32, p []byte, end bool) { s.Consumed(id, len(p)) }
func (a *trlH2App) OnTrailers(*h2.Server, uint32, []hpack.Field)       {}
func (a *trlH2App) OnReset(*h2.Server, uint32, h2.ErrCode)             {}
func (a *trlH2App) OnWritable(*h2.Server, uint32)                      {}
func (a *trlH2App) OnGoAway(*h2.Server, h2.ErrCode, []byte)            {}

// readChunked reads a chunked body from br as a strict HTTP/1.1
// recipient (internal/h1) does, returning its bytes as sent.
func readChunked(t *testing.T, c net.Conn, br *bufio.Reader) (string, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b h1.Body
	b.Reset(h1.Chunked, 0)
	var got []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return string(got), err
		}
		got = append(got, c)
		if _, done, err := b.Next([]byte{c}); err != nil || done {
			return string(got), err
		}
	}
}

// TestH2TrailersCtlToH1: an h2c server's trailer field whose value has
// a control character HTTP/1.1 does not carry (internal/h2 lets all but
// NUL, CR and LF through, RFC 9113 8.2.1) is left out of the trailer
// section an HTTP/1.1 client gets, which a strict recipient (internal/h1,
// Go's net/http) refuses whole with it; the other fields pass and the
// connection goes on to its next response.
func TestH2TrailersCtlToH1(t *testing.T) {
	app := &trlH2App{fields: []hpack.Field{
		{Name: []byte("x-sum"), Value: []byte("abc")},
		{Name: []byte("x-ctl"), Value: []byte("a\x01b")},
		{Name: []byte("x-del"), Value: []byte("a\x7fb")},
		{Name: []byte("x-vt"), Value: []byte("a\x0bb")},
		{Name: []byte("grpc-status"), Value: []byte("0")},
	}}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) { serveH2(c, app) })
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c := dial(t, p)
		br := bufio.NewReader(c)
		for i := range 2 {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if head := rawHead(t, c, br); !strings.HasPrefix(head, "HTTP/1.1 200 ") || !strings.Contains(head, "Transfer-Encoding: chunked\r\n") {
				t.Fatalf("response %d: %q", i, head)
			}
			body, err := readChunked(t, c, br)
			if want := "5\r\nhello\r\n0\r\nx-sum: abc\r\ngrpc-status: 0\r\n\r\n"; err != nil || body != want {
				t.Fatalf("response %d: body %q (%v), want %q", i, body, err, want)
			}
		}
		h1c, base := client(t, p)
		resp, err := h1c.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello" || trailerKeys(resp.Trailer) != "Grpc-Status,X-Sum" {
			t.Errorf("net/http: %q (%v), trailers %v", body, err, resp.Trailer)
		}
	})
}

// trailerHeld returns the bytes p's HTTP/1.1 sessions keep in their
// buffers for trailer sections (their requests' to h2c pools: the
// section, its fields' bytes and the fields), read on their loops.
func trailerHeld(p *Proxy) int {
	fieldSize := int(reflect.TypeFor[hpack.Field]().Size())
	n := 0
	for k, el := range p.e.Loops() {
		done := make(chan struct{})
		el.Post(func() {
			for _, s := range p.loops[k].sessions {
				n += cap(s.trl.b) + cap(s.respTrl.b)
				if x := s.h2; x != nil {
					n += cap(x.trl) + cap(x.tb) + cap(x.rfs)*fieldSize
				}
			}
			close(done)
		})
		<-done
	}
	return n
}

// TestTrailerFieldsBound: a chunked body's trailer section may have as
// many field lines as a head (h1.MaxTrailerFields, h1.DefaultMaxHeaders):
// an HTTP/1.1 client's request with that many to an h2c pool gets its
// answer, and one with 16 KiB of one-letter fields (4096, which the
// session kept as HTTP/2 fields, 229 KiB, for its life) is refused 400,
// as a head with more is 431.
func TestTrailerFieldsBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var first atomic.Bool
		up := newUpstream(t, rawH2Up("", &first))
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		for _, tc := range []struct {
			fields, status int
		}{{h1.DefaultMaxHeaders, 200}, {h1.MaxTrailer/len("a:\r\n") - 1, 400}} {
			c := dial(t, p)
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n"+
				strings.Repeat("a:\r\n", tc.fields)+"\r\n")
			resp, body := readResponse(t, c, "POST")
			held := trailerHeld(p)
			if resp.StatusCode != tc.status || held > 16<<10 {
				t.Errorf("%d trailer fields: %d %q, %d bytes held; want %d, 16 KiB at most", tc.fields, resp.StatusCode, body, held, tc.status)
			}
			c.Close()
		}
	})
}

// droppedTrailers answers "hello" chunked (HTTP/1.1) or with a
// trailing HEADERS (h2c) whose every field a client loses.
func droppedTrailers(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Trailer", "Set-Cookie")
	io.WriteString(w, "hello")
	w.(http.Flusher).Flush()
	w.Header().Set(http.TrailerPrefix+"Set-Cookie", "s=1")
	w.Header().Set(http.TrailerPrefix+"Location", "/x")
}

// TestTrailersAllDropped: a response whose trailer fields are all
// dropped ends, for each pool protocol, with an empty DATA with
// END_STREAM to HTTP/2 clients (Go's, nghttp's and h2load's take it:
// every request succeeds, no stream reset) and with an empty trailer
// section to an HTTP/1.1 client, its connection reused after it.
func TestTrailersAllDropped(t *testing.T) {
	nghttp, err1 := exec.LookPath("nghttp")
	h2load, err2 := exec.LookPath("h2load")
	if err1 != nil || err2 != nil {
		t.Skip("nghttp or h2load is not on PATH (.ci/run installs nghttp2-client)")
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, droppedTrailers, func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, cfg)
			url := "http://" + p.Addr("web").String() + "/"
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, nghttp, "-v", url).CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("recv DATA frame <length=0, flags=0x01, stream_id=13>")) ||
				bytes.Contains(out, []byte("RST_STREAM")) || !bytes.Contains(out, []byte("hello")) {
				t.Errorf("%s: nghttp: %v\n%s", protocol, err, out)
			}
			out, err = exec.CommandContext(ctx, h2load, "-n", "200", "-c", "2", "-m", "10", url).CombinedOutput()
			if err != nil || !regexp.MustCompile(`(?m)^requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed`).Match(out) {
				t.Errorf("%s: h2load: %v\n%s", protocol, err, out)
			}
			h2c, _ := h2Client(t, p)
			resp, body := do(t, h2c, mustReq(t, "GET", url, nil))
			if string(body) != "hello" || len(resp.Trailer) != 0 && trailerKeys(resp.Trailer) != "" {
				t.Errorf("%s: HTTP/2: %q, trailers %v", protocol, body, resp.Trailer)
			}
			c := dial(t, p)
			br := bufio.NewReader(c)
			for i := range 2 {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				if head := rawHead(t, c, br); !strings.HasPrefix(head, "HTTP/1.1 200 ") {
					t.Fatalf("%s: response %d: %q", protocol, i, head)
				}
				if body, err := readChunked(t, c, br); err != nil || body != "5\r\nhello\r\n0\r\n\r\n" {
					t.Errorf("%s: response %d: %q (%v), want an empty trailer section", protocol, i, body, err)
				}
			}
		})
	})
}

// trailerEcho answers a request with its method, path, body and
// trailers' names, counting it in n (if not nil).
func trailerEcho(n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if n != nil {
			n.Add(1)
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %s;", r.Method, r.URL.Path, b, trailerKeys(r.Trailer))
	}
}

// TestTrailerPipelined: a request whose trailer section ends in the
// read that carries the next request (and a byte at a time) goes on
// filtered, and the next request after it, each once, in order, for
// each pool protocol (the head declares X-Sum: Go's HTTP/2 server keeps
// the declared trailers alone).
func TestTrailerPipelined(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, trailerEcho(nil), func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, cfg)
			reqs := "POST /a HTTP/1.1\r\nHost: x\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 1\r\nCookie: c=1\r\nX_Forwarded_For: 1\r\n\r\n" +
				"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
			want := []string{"POST /a hi X-Sum;", "GET /b  ;"}
			for _, step := range []int{len(reqs), 1} {
				c := dial(t, p)
				for i := 0; i < len(reqs); i += step {
					io.WriteString(c, reqs[i:min(i+step, len(reqs))])
					if step == 1 {
						time.Sleep(100 * time.Microsecond)
					}
				}
				br := bufio.NewReader(c)
				for _, w := range want {
					if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || body != w {
						t.Errorf("%s, %d a write: %d %q, want %q", protocol, step, resp.StatusCode, body, w)
					}
				}
				c.Close()
			}
		})
	})
}

// TestRetryTrailerAfter: a chunked PUT whose 503 came after its last
// chunk but before its trailer section is retried on the other server
// with its body and, once it arrives, its trailer section filtered,
// once; the GET pipelined behind it is answered after it.
func TestRetryTrailerAfter(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, goodN atomic.Int64
		bad := early503(t, &badN)
		good := newHTTPUpstream(t, trailerEcho(&goodN)).addr
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}}, bad, good))
		c := dial(t, p)
		c.SetNoDelay(true)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		// Round-robin: two of the four PUTs go to the 503 server first.
		for range 4 {
			n := goodN.Load()
			io.WriteString(c, "PUT /a HTTP/1.1\r\nHost: x\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n")
			// The trailer section goes once the PUT's head is at the
			// server that answers 200: where it went to the 503 server
			// first, once the proxy has had the 503 and sent the request
			// again. (A sleep of 100 ms stood for that, and on a loaded
			// machine the 503 came after the trailer section had gone,
			// which ends a request's retries (see the package doc): the
			// client got the 503.)
			waitFor(t, "the PUT's head at the server answering 200", func() bool { return goodN.Load() > n })
			io.WriteString(c, "X-Sum: 1\r\nCookie: c=1\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
			for _, want := range [...]struct{ method, body string }{{"PUT", "PUT /a hello X-Sum;"}, {"GET", "GET /b  ;"}} {
				if resp, got := readResponseFrom(t, c, br, want.method); resp.StatusCode != 200 || got != want.body {
					t.Fatalf("%s (%d to the 503 server so far): %d %q, want 200 %q", want.method, badN.Load(), resp.StatusCode, got, want.body)
				}
			}
		}
		if badN.Load() == 0 || goodN.Load() != 8 {
			t.Errorf("the 503 server got %d, the other %d requests; want some and 8", badN.Load(), goodN.Load())
		}
	})
}
