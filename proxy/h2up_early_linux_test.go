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
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// earlyApp answers a request at its head, whole ("ok", END_STREAM),
// and then resets it with NO_ERROR: it does not want the body still
// coming (RFC 9113 8.1).
type earlyApp struct{}

func (earlyApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if s.WriteHeaders(id, 200, rawFields, false) == nil {
		s.WriteData(id, rawOK, true)
	}
	if !end {
		s.Reset(id, h2.NoError)
	}
}
func (earlyApp) OnData(s *h2.Server, id uint32, p []byte, end bool)       { s.Consumed(id, len(p)) }
func (earlyApp) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) {}
func (earlyApp) OnReset(*h2.Server, uint32, h2.ErrCode)                   {}
func (earlyApp) OnWritable(*h2.Server, uint32)                            {}
func (earlyApp) OnGoAway(*h2.Server, h2.ErrCode, []byte)                  {}

// rawStream is what a raw HTTP/2 client saw of its one stream.
type rawStream struct {
	status int
	body   []byte
	end    bool // the response's END_STREAM
	reset  bool
	code   h2.ErrCode
}

func (r *rawStream) OnResponse(c *h2.Client, id uint32, resp *h2.Response, end bool) {
	if resp.Status >= 200 {
		r.status, r.end = resp.Status, end
	}
}
func (r *rawStream) OnData(c *h2.Client, id uint32, p []byte, end bool) {
	r.body = append(r.body, p...)
	r.end = r.end || end
	c.Consumed(id, len(p))
}
func (r *rawStream) OnTrailers(*h2.Client, uint32, []hpack.Field) { r.end = true }
func (r *rawStream) OnReset(c *h2.Client, id uint32, code h2.ErrCode, cause h2.ResetCause) {
	r.reset, r.code = true, code
}
func (r *rawStream) OnWritable(*h2.Client, uint32)                   {}
func (r *rawStream) OnGoAway(*h2.Client, h2.ErrCode, uint32, []byte) {}
func (r *rawStream) OnPingAck(*h2.Client, [8]byte)                   {}

// rawH2Post sends a POST to p's listener web over HTTP/2 with prior
// knowledge (with cfg: nil for the defaults), with a first piece of body
// and no end, and returns what the stream saw once it ended (reset, or
// its response ended and done says so) or after 5s.
func rawH2Post(t *testing.T, p *Proxy, cfg *h2.Config, done func(*rawStream) bool) *rawStream {
	t.Helper()
	conn := dial(t, p)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := new(rawStream)
	cl := h2.NewClient(r, cfg)
	id, err := cl.Request(&h2.Request{Method: []byte("POST"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte("/up")}, false)
	if err != nil {
		t.Fatal(err)
	}
	cl.WriteData(id, []byte("first part of a body"), false)
	var tail []byte
	buf := make([]byte, 64<<10)
	for !r.reset && !done(r) {
		if out := cl.Pending(); len(out) > 0 {
			if _, err := conn.Write(out); err != nil {
				t.Fatal(err)
			}
			cl.Written(len(out))
		}
		n, err := conn.Read(buf)
		if n > 0 && cl.FeedTail(&tail, buf[:n]) != nil {
			t.Fatal("connection error")
		}
		if err != nil {
			break
		}
	}
	return r
}

// TestH2UpEarlyResponseNoError: a server that answers whole before the
// request's body ended and resets the stream with NO_ERROR (it does not
// need the rest, RFC 9113 8.1): an HTTP/2 client gets the response whole,
// then RST_STREAM NO_ERROR (not CANCEL: nothing failed), and stops
// sending, also where its window held the response's end in the proxy
// when the reset came (a 1-byte window); an HTTP/1.1 client gets the response whole, then its
// connection closed (the rest of its body is not read; a close, lingering,
// keeps the framing of the next request from being lost in it).
func TestH2UpEarlyResponseNoError(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) { serveH2(c, earlyApp{}) })
		p := startProxy(t, h2cPoolConfig(b, up.addr))

		for _, w := range []uint32{0, 1} {
			r := rawH2Post(t, p, &h2.Config{InitialWindowSize: w}, func(*rawStream) bool { return false })
			if r.status != 200 || string(r.body) != "ok" || !r.end || !r.reset || r.code != h2.NoError {
				t.Errorf("HTTP/2 client, window %d: %d %q end %v, reset %v %v; want 200 \"ok\" whole, then reset NO_ERROR", w, r.status, r.body, r.end, r.reset, r.code)
			}
		}

		conn := dial(t, p)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nfirst part")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" || err != nil {
			t.Fatalf("HTTP/1.1 client: %d %q %v, want 200 \"ok\"", resp.StatusCode, body, err)
		}
		// The rest of the body goes nowhere: the connection ends.
		io.WriteString(conn, strings.Repeat("x", 1000))
		if n, err := br.Read(make([]byte, 1)); err == nil {
			t.Errorf("HTTP/1.1 client: %d more bytes after the response, want the connection closed", n)
		}
	})
}

// echoTargetApp answers each request with its method and :path.
type echoTargetApp struct{ earlyApp }

func (echoTargetApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if s.WriteHeaders(id, 200, nil, false) == nil {
		s.WriteData(id, []byte(string(r.Method)+" "+string(r.Path)), true)
	}
}

// TestH2UpOptionsAsterisk: an HTTP/1.1 client's OPTIONS with an
// absolute-form target of no path ("OPTIONS http://h:80") asks about
// the server, not a resource: it goes to an h2c pool with :path "*"
// (RFC 9112 3.2.4, RFC 9113 8.3.1), not "/"; with a path or a query, or
// for another method, the empty path is "/" as before.
func TestH2UpOptionsAsterisk(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) { serveH2(c, echoTargetApp{}) })
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		for _, tc := range []struct{ head, want string }{
			{"OPTIONS http://svc.example", "OPTIONS *"},
			{"OPTIONS http://svc.example:80", "OPTIONS *"},
			{"OPTIONS *", "OPTIONS *"},
			{"OPTIONS http://svc.example/", "OPTIONS /"},
			{"OPTIONS http://svc.example?q=1", "OPTIONS /?q=1"},
			{"GET http://svc.example", "GET /"},
		} {
			host := "svc.example"
			if strings.Contains(tc.head, ":80") {
				host += ":80"
			}
			status, body := h1Do(t, p, tc.head+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
			if status != 200 || string(body) != tc.want {
				t.Errorf("%s: %d %q, want 200 %q", tc.head, status, body, tc.want)
			}
		}
	})
}

// TestH2UpExpectContinue: an HTTP/1.1 client's Expect: 100-continue
// goes to an h2c pool's server (as HAProxy and the proxy's HTTP/1.1
// pools do; Envoy answers 100 itself unless proxy_100_continue), which
// decides: its 100 reaches the client, which then sends the body and
// gets the final response; a server refusing at the head answers 401
// with no 100 and Connection: close, the body never sent, and the client
// is closed after it (the body it did not send is not waited for; the
// head said keep-alive, then the connection ended).
func TestH2UpExpectContinue(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/deny" {
				w.WriteHeader(401)
				return
			}
			// Go's server sends 100 at the first read where the request
			// had expect: 100-continue (taken out of r.Header).
			body, _ := io.ReadAll(r.Body)
			w.Write(append([]byte("got "), body...))
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(5 * time.Second)
		p := startProxy(t, cfg)
		for _, tc := range []struct {
			path      string
			continue_ bool
			status    int
			body      string
		}{
			{"/ok", true, 200, "got hello"},
			{"/deny", false, 401, ""},
		} {
			conn := dial(t, p)
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(conn, "POST "+tc.path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.path, err)
			}
			if got := resp.StatusCode == 100; got != tc.continue_ {
				t.Fatalf("%s: first response %d, want 100 %v", tc.path, resp.StatusCode, tc.continue_)
			}
			if tc.continue_ {
				io.WriteString(conn, "hello")
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatalf("%s: after the body: %v", tc.path, err)
				}
			}
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(body) != tc.body || err != nil {
				t.Errorf("%s: %d %q %v, want %d %q", tc.path, resp.StatusCode, body, err, tc.status, tc.body)
			}
			if !tc.continue_ {
				// The body it did not send is not waited for: the head
				// says so, and the connection ends.
				if n, err := br.Read(make([]byte, 1)); !resp.Close || err == nil {
					t.Errorf("%s: Connection: close %v, %d more bytes (%v); want close and the end", tc.path, resp.Close, n, err)
				}
			}
		}
	})
}
