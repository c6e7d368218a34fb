package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestEchoRPC(t *testing.T) {
	var in []byte
	for seq := range uint64(5) {
		in = AppendRequest(in, 3, seq, 64+int(seq))
	}
	tests := []struct {
		name  string
		split int // feed the first split bytes, then the rest
	}{
		{"whole", len(in)},
		{"mid header", 2},
		{"mid payload", FrameHeader + 10},
		{"one byte", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Echo
			n1, out, err := e.Process(in[:tc.split], nil)
			if err != nil {
				t.Fatal(err)
			}
			buf := append([]byte(nil), in[n1:]...)
			n2, out, err := e.Process(buf, out)
			if err != nil {
				t.Fatal(err)
			}
			if n1+n2 != len(in) {
				t.Fatalf("consumed %d of %d", n1+n2, len(in))
			}
			if !bytes.Equal(out, in) {
				t.Fatal("echo differs from requests")
			}
			// Each reply verifies against its request, and not another's.
			var scratch []byte
			off := 0
			for seq := range uint64(5) {
				n, _ := frameLen(out[off:])
				if scratch, err = verifyReply(out[off:off+n], 3, seq, 64+int(seq), scratch); err != nil {
					t.Fatal(err)
				}
				if _, err = verifyReply(out[off:off+n], 4, seq, 64+int(seq), scratch); !errors.Is(err, ErrMismatch) {
					t.Fatalf("reply verified for the wrong connection: %v", err)
				}
				off += n
			}
		})
	}
}

func TestEchoRejectsHugeFrame(t *testing.T) {
	var e Echo
	_, _, err := e.Process([]byte{0x7f, 0, 0, 0, 1}, nil)
	if err == nil {
		t.Fatal("accepted a 2 GiB frame")
	}
}

func TestEchoHTTP(t *testing.T) {
	reqs := "GET / HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /echo HTTP/1.1\r\nHost: x\r\ncontent-length: 5\r\n\r\nhello" +
		"GET /partial HTTP/1.1\r\nHost: x\r\n"
	e := Echo{BodySize: 10}
	n, out, err := e.Process([]byte(reqs), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Index(reqs, "GET /partial"); n != want {
		t.Fatalf("consumed %d, want %d", n, want)
	}
	r := bufio.NewReader(bytes.NewReader(out))
	for _, want := range []string{"abcdefghij", "hello"} {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("status %d body %q, want 200 %q", resp.StatusCode, body, want)
		}
	}
	if _, _, err := (&Echo{}).Process([]byte("GARBAGE\r\n\r\n"), nil); err == nil {
		t.Fatal("accepted a malformed request line")
	}
}

// TestEchoHTTPChunked: a chunked request body is echoed chunked, as it
// came, once all of it is in; the request after it is answered in turn.
// The servers ignored Transfer-Encoding, answered the head alone and took
// the chunks for the next request.
func TestEchoHTTPChunked(t *testing.T) {
	const (
		req  = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n"
		next = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	)
	for i := range len(req) {
		var e Echo
		if n, out, err := e.Process([]byte(req[:i]), nil); n != 0 || len(out) != 0 || err != nil {
			t.Fatalf("first %d bytes: consumed %d, replied %q, %v; want to wait for the rest", i, n, out, err)
		}
	}
	e := Echo{BodySize: 3}
	n, out, err := e.Process([]byte(req+next), nil)
	if n != len(req)+len(next) || err != nil {
		t.Fatalf("consumed %d of %d: %v", n, len(req)+len(next), err)
	}
	r := bufio.NewReader(bytes.NewReader(out))
	for _, want := range []string{"hello world", "abc"} {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("reply %q: %v", out, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("status %d, body %q, %v; want 200 %q", resp.StatusCode, body, err, want)
		}
	}
	if r.Buffered() != 0 {
		t.Fatalf("%d bytes after the replies", r.Buffered())
	}
}

// TestEchoHTTPHead: the reply to HEAD has the head a GET's would have and
// no body (RFC 9110 9.3.2), so that the reply after it frames.
func TestEchoHTTPHead(t *testing.T) {
	var e Echo
	_, out, err := e.Process([]byte("HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(bytes.NewReader(out))
	for _, method := range []string{"HEAD", "GET"} {
		resp, err := http.ReadResponse(r, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s reply in %q: %v", method, out, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.ContentLength != DefaultPayload || method == "GET" && len(body) != DefaultPayload {
			t.Fatalf("%s: status %d, Content-Length %d, %d-byte body", method, resp.StatusCode, resp.ContentLength, len(body))
		}
	}
	if r.Buffered() != 0 {
		t.Fatalf("%d bytes after the replies in %q", r.Buffered(), out)
	}
}

// TestEchoHTTPRefuses: requests RFC 9112 makes a 400 (the shapes of
// request smuggling among them), and bodies over MaxPayload, end the
// connection unanswered, as soon as they are seen.
func TestEchoHTTPRefuses(t *testing.T) {
	const ok = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct{ name, req string }{
		{"no Host", "GET / HTTP/1.1\r\n\r\n"},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"},
		{"Host with a space", "GET / HTTP/1.1\r\nHost: x y\r\n\r\n"},
		{"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@x\r\n\r\n"},
		{"Host with a path", "GET / HTTP/1.1\r\nHost: x/y\r\n\r\n"},
		{"Host not the target's", "GET http://y/ HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"Content-Length and chunked", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"chunked not last", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"},
		{"gzip", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
		{"chunked in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"bad chunk size", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n"},
		{"chunk without CRLF", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab"},
		{"differing Content-Lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"},
		{"Content-Length over MaxPayload", fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", MaxPayload+1)},
		{"chunked body over MaxPayload", fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s", MaxPayload, strings.Repeat("a", MaxPayload))},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n"},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n"},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n"},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Echo{}
			n, out, err := e.Process([]byte(ok+tc.req), nil)
			if !errors.Is(err, errProtocol) || n != len(ok) {
				t.Fatalf("consumed %d, %v; want the first request, then errProtocol", n, err)
			}
			if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("reply to the first request: %v", err)
			}
		})
	}
}

// TestEchoHTTPConnection: a request that does not keep the connection
// alive (RFC 9112 §9.3) gets a reply saying "Connection: close", and
// Process then reports errClose, leaving the requests after it unanswered;
// an HTTP/1.0 request with keep-alive gets a reply that says so. The
// replies neither said nor did either, so HTTP/1.0 clients waited for a
// close that never came.
func TestEchoHTTPConnection(t *testing.T) {
	const next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		name   string
		req    string
		close  bool
		header string // the reply's Connection field other than close
	}{
		{"HTTP/1.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, ""},
		{"HTTP/1.1 keep-alive", "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", false, ""},
		{"HTTP/1.1 close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true, ""},
		{"HTTP/1.1 close in a list", "GET / HTTP/1.1\r\nHost: x\r\nconnection: Upgrade ,CLOSE\r\n\r\n", true, ""},
		{"HTTP/1.1 close in a second field", "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", true, ""},
		{"HTTP/1.0", "GET / HTTP/1.0\r\n\r\n", true, ""},
		{"HTTP/1.0 POST", "POST / HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi", true, ""},
		{"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", false, "keep-alive"},
		{"HTTP/1.0 keep-alive and close", "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", true, ""},
		{"HTTP/1.0 other option", "GET / HTTP/1.0\r\nConnection: foo\r\n\r\n", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Echo
			n, out, err := e.Process([]byte(tc.req+next), nil)
			r := bufio.NewReader(bytes.NewReader(out))
			resp, rerr := http.ReadResponse(r, nil)
			if rerr != nil {
				t.Fatalf("reply %q: %v", out, rerr)
			}
			io.Copy(io.Discard, resp.Body)
			// ReadResponse turns "Connection: close" into Close.
			if got := resp.Header.Get("Connection"); got != tc.header || resp.Close != tc.close {
				t.Errorf("reply says Connection %q (close %v), want %q", got, resp.Close, tc.header)
			}
			if tc.close {
				if !errors.Is(err, errClose) || n != len(tc.req) || r.Buffered() != 0 {
					t.Errorf("Process: consumed %d of %d, %d bytes after the reply, err %v; want the first request only, then errClose", n, len(tc.req), r.Buffered(), err)
				}
				return
			}
			if err != nil || n != len(tc.req)+len(next) {
				t.Errorf("Process: consumed %d of %d, err %v; want both requests answered", n, len(tc.req)+len(next), err)
			}
			if _, err := http.ReadResponse(r, nil); err != nil {
				t.Errorf("second reply: %v", err)
			}
		})
	}
}

func FuzzEcho(f *testing.F) {
	f.Add(AppendRequest(nil, 1, 2, 64))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n0\r\nT: 1\r\n\r\nGET"))
	f.Add([]byte("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var e Echo
		n, out, err := e.Process(in, nil)
		if n < 0 || n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
		if err == nil && e.mode == 'r' && !bytes.Equal(out, in[:n]) {
			t.Fatal("RPC echo changed the bytes")
		}
	})
}

func BenchmarkEchoRPC(b *testing.B) {
	in := AppendRequest(nil, 1, 1, 128)
	var e Echo
	out := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		_, out, _ = e.Process(in, out[:0])
	}
}

// TestHotPathAllocs: the per-request paths of the client and the servers
// do not allocate once their buffers have grown.
func TestHotPathAllocs(t *testing.T) {
	req := AppendRequest(nil, 1, 1, 128)
	var e Echo
	out := make([]byte, 0, 1024)
	scratch := make([]byte, 0, 1024)
	h := NewHistogram()
	tests := []struct {
		name string
		fn   func()
	}{
		{"Echo.Process", func() { _, out, _ = e.Process(req, out[:0]) }},
		{"AppendRequest", func() { scratch = AppendRequest(scratch[:0], 1, 2, 128) }},
		{"verifyReply", func() { scratch, _ = verifyReply(req, 1, 1, 128, scratch) }},
		{"Histogram.Record", func() { h.Record(12345) }},
	}
	for _, tc := range tests {
		if n := testing.AllocsPerRun(100, tc.fn); n != 0 {
			t.Errorf("%s: %v allocations per call", tc.name, n)
		}
	}
}

func TestWholeRPC(t *testing.T) {
	two := AppendRequest(AppendRequest(nil, 1, 1, 64), 1, 2, 100)
	tests := []struct {
		name string
		in   []byte
		reqs int
		ok   bool
	}{
		{"one", AppendRequest(nil, 1, 1, 64), 1, true},
		{"two", two, 2, true},
		{"partial tail", two[:len(two)-1], 0, false},
		{"header only", two[:3], 0, false},
		{"empty", nil, 0, false},
		{"http", []byte("GET / HTTP/1.1\r\n\r\n"), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Echo
			reqs, ok := e.WholeRPC(tc.in)
			if reqs != tc.reqs || ok != tc.ok {
				t.Fatalf("WholeRPC = %d, %v; want %d, %v", reqs, ok, tc.reqs, tc.ok)
			}
		})
	}
}
