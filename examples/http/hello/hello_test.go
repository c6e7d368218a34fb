package hello

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/engine"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		keep bool
		err  error
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, true, nil},
		{"GET / HTTP/1.1\r\nHost: x\r\n", 0, false, nil},
		{"GET / HTTP/1.0\r\n\r\n", 18, false, nil},
		{"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 42, true, nil},
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 46, false, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", 47, true, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nab", 47, true, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r", 0, false, nil},
		{"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 0, false, ErrMalformed},
		// Found in review: chunked bodies were refused (400), which RFC
		// 9112 section 7 says every HTTP/1.1 recipient must parse; Go's
		// client sends one for a body of unknown length. Section 6.3's
		// refusals stay.
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n", 56, true, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: Chunked\r\n\r\n", 0, false, ErrNotImplemented},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, false, ErrNotImplemented},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 0, false, ErrMalformed},
		{"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, false, ErrMalformed},
		{"GET /\r\n\r\n", 0, false, ErrMalformed},
		{"GET / SPDY/3\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.1\r\nbad header\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.1\r\nX: " + strings.Repeat("a", MaxHeader) + "\r\n\r\n", 0, false, ErrHeaderLarge},
		// Found in review: a Connection list, and what RFC 9112 makes a 400
		// (request smuggling's shapes), and a length that overflowed a
		// 32-bit int.
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: TE, close\r\n\r\n", 50, false, nil},
		{"GET / HTTP/1.0\r\nConnection: keep-alive, TE\r\n\r\n", 46, true, nil},
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", 70, false, nil},
		{"POST / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nGET /x", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\nGET /x", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nContent-Length: 2147483647\r\n\r\n", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", 0, false, ErrMalformed},
		// Found in review: RFC 9112 section 3.2 makes an HTTP/1.1 request
		// without Host, and any request with several, a 400.
		{"GET / HTTP/1.1\r\n\r\n", 0, false, ErrMalformed},
		// Found in review: empty lines before the request line, which
		// RFC 9112 section 2.2 says a server should ignore, were a 400.
		{"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 29, true, nil},
		{"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 31, true, nil},
		{"\r\n", 0, false, nil},
		{"\r\n\r", 0, false, nil},
		{strings.Repeat("\r\n", MaxHeader/2+1), 0, false, ErrHeaderLarge},
		{strings.Repeat("\r\n", MaxHeader/2-10) + "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, false, ErrHeaderLarge},
		{"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.1\r\nHOST: a\r\n\r\n", 27, true, nil},
		{"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 34, true, nil},
		{"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", 0, false, ErrMalformed},
		// Found in review: names that are not tokens (RFC 9110 section
		// 5.1) were taken; a proxy that drops the NUL reads a length.
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length\x00: 3\r\n\r\nabc", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent\x7fLength: 3\r\n\r\nabc", 0, false, ErrMalformed},
		{"POST / HTTP/1.1\r\nHost: x\r\n\"Content-Length\": 3\r\n\r\nabc", 0, false, ErrMalformed},
		{"G\x00ET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
		{"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
		{"GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
		{"M-SEARCH * HTTP/1.1\r\nHost: x\r\n\r\n", 32, true, nil},
		{"GET / HTTP/1.1\r\nHost:\r\n\r\n", 25, true, nil},
		// Found in review: another major version was a 400 where RFC
		// 9110 section 15.6.6 says 505; a later HTTP/1 minor version is
		// taken as 1.1 (RFC 9112 section 2.3). Not HTTP/DIGIT.DIGIT: 400.
		{"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 0, false, ErrVersion},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0, false, ErrVersion},
		{"GET / HTTP/0.9\r\n\r\n", 0, false, ErrVersion},
		{"GET / HTTP/1.2\r\nHost: x\r\n\r\n", 27, true, nil},
		{"GET / HTTP/1.10\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/11\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
		{"GET / http/1.1\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
		{"GET / HTTP/1.x\r\nHost: x\r\n\r\n", 0, false, ErrMalformed},
	}
	for _, tc := range tests {
		r, err := ParseRequest([]byte(tc.in))
		if r.Len != tc.n || r.KeepAlive != tc.keep || !errors.Is(err, tc.err) {
			t.Errorf("ParseRequest(%.40q) = %d, %v, %v; want %d, %v, %v", tc.in, r.Len, r.KeepAlive, err, tc.n, tc.keep, tc.err)
		}
	}
	if r, _ := ParseRequest([]byte("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")); !r.Head {
		t.Error("a HEAD request not seen as one")
	}
	if r, _ := ParseRequest([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n")); r.Body != 3 || r.Chunked {
		t.Errorf("a Content-Length body of 3 seen as %d bytes, chunked %v", r.Body, r.Chunked)
	}
	if r, _ := ParseRequest([]byte("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n")); !r.Continue {
		t.Error("Expect: 100-continue not seen")
	}
	if r, _ := ParseRequest([]byte("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")); r.Continue {
		t.Error("Expect: 100-continue heeded in an HTTP/1.0 request")
	}
	if r, _ := ParseRequest([]byte("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")); !r.Chunked {
		t.Error("a chunked request not seen as one")
	}
}

// skipChunked feeds b to a ChunkedBody in pieces of at most step bytes, as
// OnData does (what Skip leaves is given again with the next piece). It
// returns the bytes consumed up to done, and the error.
func skipChunked(b []byte, step int) (int, bool, error) {
	var c ChunkedBody
	var pending []byte
	off := 0 // of pending's start in b
	for i := 0; i < len(b); i += step {
		pending = append(pending, b[i:min(i+step, len(b))]...)
		n, done, err := c.Skip(pending)
		if err != nil || done {
			return off + n, done, err
		}
		off += n
		pending = append(pending[:0], pending[n:]...)
	}
	return off, false, nil
}

// TestChunkedBody checks the chunked framing (RFC 9112 section 7.1), whole
// and a byte at a time.
func TestChunkedBody(t *testing.T) {
	big := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", MaxBody, strings.Repeat("a", MaxBody))
	tests := []struct {
		in  string
		n   int // bytes of the body; -1: incomplete
		err error
	}{
		{"0\r\n\r\nGET", 5, nil},
		{"5\r\nhello\r\n0\r\n\r\n", 15, nil},
		{"5;name=val\r\nhello\r\nA\r\n0123456789\r\n0 ; x\r\nTrailer: x\r\n\r\n", 55, nil},
		{"00000\r\n\r\n", 9, nil},
		{"5\r\nhel", -1, nil},
		{"5\r\nhello\r\n0\r\nTrailer: x\r\n", -1, nil},
		{big, len(big), nil},
		{"\r\n\r\n", 0, ErrMalformed},
		{"x\r\n\r\n", 0, ErrMalformed},
		{"5 x\r\nhello\r\n0\r\n\r\n", 0, ErrMalformed},
		{"-5\r\n", 0, ErrMalformed},
		{"5\r\nhelloXX0\r\n\r\n", 0, ErrMalformed},
		{"5\r\nhello\r\n0\r\nbad trailer\r\n\r\n", 0, ErrMalformed},
		{"5\r\nhello\r\n0\r\nbad\x00: trailer\r\n\r\n", 0, ErrMalformed},
		{"5\nhello\r\n0\r\n\r\n", 0, ErrMalformed},
		{fmt.Sprintf("%x\r\n", MaxBody+1), 0, ErrMalformed},
		{"ffffffffffffffffffff1\r\n", 0, ErrMalformed},
		{fmt.Sprintf("%x\r\n%s\r\n1\r\n", MaxBody, strings.Repeat("a", MaxBody)), 0, ErrMalformed},
		{"1" + strings.Repeat(";", maxChunkLine+1), 0, ErrMalformed},
		{"1" + strings.Repeat(";", maxChunkLine+1) + "\r\na\r\n0\r\n\r\n", 0, ErrMalformed},
		{"0\r\nX: " + strings.Repeat("a", MaxHeader), 0, ErrHeaderLarge},
	}
	for _, tc := range tests {
		for _, step := range []int{len(tc.in), 1} {
			n, done, err := skipChunked([]byte(tc.in), step)
			if !errors.Is(err, tc.err) || tc.err == nil && (done != (tc.n >= 0) || done && n != tc.n) {
				t.Errorf("Skip(%.40q) in pieces of %d = %d, %v, %v; want %d, %v", tc.in, step, n, done, err, tc.n, tc.err)
			}
		}
	}
}

func FuzzChunkedBody(f *testing.F) {
	f.Add([]byte("5;a=b\r\nhello\r\n0\r\nX: y\r\n\r\nGET"), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		n, done, err := skipChunked(b, len(b)+1)
		if n < 0 || n > len(b) {
			t.Fatalf("n=%d outside [0,%d]", n, len(b))
		}
		if done && !bytes.HasSuffix(b[:n], []byte("\r\n")) {
			t.Fatalf("done without the final CRLF: %q", b[:n])
		}
		// Pieces change nothing but when an error is seen.
		n2, done2, err2 := skipChunked(b, int(step)+1)
		if done != done2 || done && n != n2 || (err == nil) != (err2 == nil) {
			t.Fatalf("whole: %d %v %v; in pieces of %d: %d %v %v", n, done, err, int(step)+1, n2, done2, err2)
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		n := r.Len
		if err != nil && n != 0 {
			t.Fatalf("error %v with n=%d", err, n)
		}
		if n < 0 || n > len(b) {
			t.Fatalf("n=%d outside [0,%d]", n, len(b))
		}
		if n > 0 && !strings.Contains(string(b[:n]), "\r\n\r\n") {
			t.Fatalf("complete request without a head end: %q", b[:n])
		}
	})
}

// pendingProbe is the Handler, recording the most memory a connection's
// state held for unparsed bytes after any OnData.
type pendingProbe struct {
	Handler
	most atomic.Int64
}

func (p *pendingProbe) OnData(c *engine.Conn, b engine.Buffer) bool {
	keep := p.Handler.OnData(c, b)
	if st, _ := c.Context().(*conn); st != nil && int64(cap(st.pending)) > p.most.Load() {
		p.most.Store(int64(cap(st.pending)))
	}
	return keep
}

// TestBodyNotBuffered sends request bodies of MaxBody in pieces: the server
// drops them as they arrive (found in review: it kept a Content-Length body
// whole until its last byte, and then the memory for the connection's life).
func TestBodyNotBuffered(t *testing.T) {
	p := &pendingProbe{}
	addr, _ := startHandler(t, "", p)
	c := dialServer(t, addr, 20*time.Second)
	r := bufio.NewReader(c)
	piece := strings.Repeat("a", 1000)
	for _, chunked := range []bool{false, true} {
		if chunked {
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
		} else {
			fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", MaxBody)
		}
		for sent := 0; sent < MaxBody; sent += len(piece) {
			n := min(len(piece), MaxBody-sent)
			if chunked {
				fmt.Fprintf(c, "%x\r\n%s\r\n", n, piece[:n])
			} else {
				io.WriteString(c, piece[:n])
			}
		}
		if chunked {
			io.WriteString(c, "0\r\n\r\n")
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "hello, world" {
			t.Fatalf("chunked %v: %d %q", chunked, resp.StatusCode, body)
		}
	}
	// A request's unparsed bytes are at most a head and one read.
	if most := p.most.Load(); most > MaxBody/4 {
		t.Errorf("a connection held %d bytes of a request body", most)
	}
}

// TestServer drives the handler on a real engine with Go's HTTP client,
// pipelined and split requests.
func TestServer(t *testing.T) {
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			addr, _ := startServer(t, backend)

			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for i := 0; i < 3; i++ {
				resp, err := cl.Get("http://" + addr + "/")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "hello, world" {
					t.Fatalf("%d %q", resp.StatusCode, body)
				}
			}
			// A chunked body (Go's client sends one when it cannot know
			// the length), then a request on the same connection.
			for i := 0; i < 2; i++ {
				pr, pw := io.Pipe()
				go func() {
					pw.Write([]byte("part one, "))
					pw.Write([]byte("part two"))
					pw.Close()
				}()
				resp, err := cl.Post("http://"+addr+"/", "text/plain", pr)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "hello, world" || len(resp.TransferEncoding) != 0 {
					t.Fatalf("chunked POST: %d %q", resp.StatusCode, body)
				}
			}
			// Expect: 100-continue gets 100 Continue before the body is
			// sent (found in review: the server waited for the body the
			// client held back, RFC 9110 section 10.1.1's MUST).
			c4 := dialServer(t, addr, 5*time.Second)
			io.WriteString(c4, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
			r4 := bufio.NewReader(c4)
			resp, err := http.ReadResponse(r4, nil)
			if err != nil || resp.StatusCode != 100 {
				t.Fatalf("Expect: 100-continue: %v %v", resp, err)
			}
			io.WriteString(c4, "hello")
			resp, err = http.ReadResponse(r4, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("after 100 Continue: %v %v", resp, err)
			}
			// Pipelined, split across writes, then Connection: close.
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			reqs := "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHo"
			c.Write([]byte(reqs))
			time.Sleep(10 * time.Millisecond)
			c.Write([]byte("st: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
			r := bufio.NewReader(c)
			for i := 0; i < 3; i++ {
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if string(body) != "hello, world" {
					t.Fatalf("response %d: %q", i, body)
				}
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("after Connection: close: %v, want EOF", err)
			}
			// HEAD then GET on one connection: no body after HEAD's head
			// (found in review: its body was read as the next response's
			// start); HTTP/1.0 keep-alive is said in the response.
			c3, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c3.Close()
			io.WriteString(c3, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			r3 := bufio.NewReader(c3)
			resp, err = http.ReadResponse(r3, &http.Request{Method: "HEAD"})
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("HEAD: %v %v", resp, err)
			}
			resp.Body.Close()
			resp, err = http.ReadResponse(r3, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("the response after HEAD's: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if string(body) != "hello, world" || resp.Close || !strings.EqualFold(resp.Header.Get("Connection"), "keep-alive") {
				t.Fatalf("HTTP/1.0 keep-alive response: body %q, close %v, Connection %q", body, resp.Close, resp.Header.Get("Connection"))
			}
			// Malformed: 400 and close.
			c2, _ := net.Dial("tcp", addr)
			defer c2.Close()
			fmt.Fprintf(c2, "NONSENSE\r\n\r\n")
			resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
			if err != nil || resp.StatusCode != 400 {
				t.Fatalf("malformed request: %v %v", resp, err)
			}
		})
	}
}

// startServer runs the Handler on an engine with backend until the test
// ends and returns its address and the engine.
func startServer(t *testing.T, backend engine.Backend) (string, *engine.Engine) {
	t.Helper()
	return startHandler(t, backend, &Handler{})
}

// startHandler is startServer serving with h; backend "" is the default.
func startHandler(t *testing.T, backend engine.Backend, h engine.Handler) (string, *engine.Engine) {
	t.Helper()
	e, err := engine.New(&engine.Config{Backend: backend, Logf: func(string, ...any) {}}, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), e
}

// dialServer connects to addr, closes the connection when the test ends and
// sets the deadline of every read and write on it timeout from now.
func dialServer(t *testing.T, addr string, timeout time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(timeout))
	return c
}

// checkNoReset reads r, c's reader, to its end, which must be a clean end
// of stream with nothing before it, and then checks that c's socket holds
// no error (no reset). after names what was read last, for the failures.
func checkNoReset(t *testing.T, c net.Conn, r *bufio.Reader, after string) {
	t.Helper()
	if more, err := io.ReadAll(r); err != nil || len(more) > 0 {
		t.Fatalf("after %s: %q, %v; want a clean end of stream", after, more, err)
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var soErr int
	raw.Control(func(fd uintptr) {
		soErr, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
	})
	if err != nil || soErr != 0 {
		t.Fatalf("SO_ERROR after %s: %v, %v; want no reset", after, syscall.Errno(soErr), err)
	}
}

// TestErrorResponseNoReset sends a malformed request and bytes the server
// will never parse (the rest of a body, say), with the request or after
// reading the response. The server must answer 400 and end the connection
// with FIN, draining those bytes, not with RST (found in review: it closed
// at once with them unread or still to come, and the kernel reset the
// connection, which on a real network can lose a 400 the client has not
// read yet). The client reads the 400, then a clean end of stream, and its
// socket holds no reset error; only then does it close.
func TestErrorResponseNoReset(t *testing.T) {
	for _, backend := range engine.Backends {
		for _, after := range []bool{false, true} {
			name := string(backend) + "/rest with the request"
			if after {
				name = string(backend) + "/rest after the response"
			}
			t.Run(name, func(t *testing.T) {
				addr, _ := startServer(t, backend)
				c := dialServer(t, addr, 5*time.Second)
				// Well under LingerBytes, and more than a receive buffer.
				rest := bytes.Repeat([]byte("x"), 64<<10)
				if _, err := io.WriteString(c, "NONSENSE\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				if !after {
					if _, err := c.Write(rest); err != nil {
						t.Fatal(err)
					}
				}
				r := bufio.NewReader(c)
				resp, err := http.ReadResponse(r, nil)
				if err != nil || resp.StatusCode != 400 {
					t.Fatalf("malformed request: %v %v", resp, err)
				}
				if after {
					if _, err := c.Write(rest); err != nil {
						t.Fatal(err)
					}
				}
				checkNoReset(t, c, r, "the 400")
			})
		}
	}
}

// TestVersionNotSupported sends an HTTP/2.0 request line: RFC 9110 section
// 15.6.6 answers another major version with 505, not 400.
func TestVersionNotSupported(t *testing.T) {
	addr, _ := startServer(t, engine.Backends[0])
	c := dialServer(t, addr, 5*time.Second)
	io.WriteString(c, "GET / HTTP/2.0\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 505 || !resp.Close {
		t.Fatalf("HTTP/2.0 request: %v %v; want 505 and close", resp, err)
	}
}

// TestLingerEnds sends a malformed request and then neither sends nor
// closes: the lingering close must still end the connection on the
// server (LingerTimeout), not keep it open for as long as the client does.
func TestLingerEnds(t *testing.T) {
	addr, e := startServer(t, engine.Backends[0])
	c := dialServer(t, addr, 10*time.Second)
	io.WriteString(c, "NONSENSE\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("malformed request: %v %v", resp, err)
	}
	for deadline := time.Now().Add(10 * time.Second); e.Stats().Open != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server still holds %d connections 10 s after a 400 to a silent client", e.Stats().Open)
		}
	}
}

// TestCloseRequestNoReset: a request with "Connection: close", or an
// HTTP/1.0 one, followed by bytes the server will not read (requests
// pipelined after it, and one more once the response is read): the
// response, saying "Connection: close" (RFC 9112 section 9.6), then a
// clean end of stream and no reset, as after an error response. Found in review: the response did not say close, and the
// server closed at once with those bytes unread, so the kernel reset the
// connection.
func TestCloseRequestNoReset(t *testing.T) {
	for _, backend := range engine.Backends {
		for _, tc := range []struct{ name, req string }{
			{"close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
			{"HTTP/1.0", "GET / HTTP/1.0\r\n\r\n"},
		} {
			req := tc.req
			t.Run(string(backend)+"/"+tc.name, func(t *testing.T) {
				addr, _ := startServer(t, backend)
				c := dialServer(t, addr, 5*time.Second)
				next := "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
				if _, err := io.WriteString(c, req+strings.Repeat(next, (160<<10)/len(next))); err != nil {
					t.Fatal(err)
				}
				r := bufio.NewReader(c)
				resp, err := http.ReadResponse(r, nil)
				if err != nil || resp.StatusCode != 200 || !resp.Close {
					t.Fatalf("response: %v %v; want 200 and close", resp, err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					t.Fatal(err)
				}
				// And a request more once the response is read.
				if _, err := io.WriteString(c, next); err != nil {
					t.Fatal(err)
				}
				checkNoReset(t, c, r, "the response")
			})
		}
	}
}
