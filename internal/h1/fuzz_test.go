package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
)

var requestSeeds = []string{
	benchHead,
	"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"\r\nPOST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n",
	"GET http://x/y?z HTTP/1.1\r\nHost: x\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
	"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n",
	"GET / HTTP/1.1\nHost: x\n\n",
	"GET /%41 HTTP/1.1\r\nHost: [::1]:80\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
}

// netHTTPDiffers reports the inputs that Parse accepts and net/http rejects
// on purpose: a Content-Length list of identical values ("5, 5"), which RFC
// 9110 8.6 lets a recipient accept and net/http rejects.
func netHTTPDiffers(r *Request) bool {
	for _, h := range r.Headers {
		if eqFold(h.Name, "content-length") && bytes.IndexByte(h.Value, ',') >= 0 {
			return true
		}
	}
	return false
}

// prefixesIncomplete fails t unless parse reports every proper prefix of
// in's head of n bytes incomplete (0, nil): a head that comes in parts is
// parsed as it grows, and a part must not be refused where the whole is
// accepted. Every prefix of a head up to 1 KiB, a stride beyond.
func prefixesIncomplete(t *testing.T, in []byte, n int, parse func([]byte) (int, error)) {
	t.Helper()
	for i := 0; i < n; i += 1 + n/1024 {
		if m, err := parse(in[:i]); m != 0 || err != nil {
			t.Fatalf("%q: a head of %d bytes; its first %d: n=%d err=%v", in[:n], n, i, m, err)
		}
	}
}

// forwardedLimits bound a forwarded head when it is parsed again:
// AppendHead writes "name: value" for a received "name:value", so what it
// writes may be longer than the head received.
var forwardedLimits = Limits{MaxHead: 2 * DefaultMaxHead}

// forwardedRequestSame fails t unless the head a proxy forwards for r,
// AppendHead without the fields HopByHop reports, parses as the same
// request: method, target, Host and body framing. A next hop that read
// another framing or routing from it than the proxy did would be
// smuggled to.
func forwardedRequestSame(t *testing.T, r *Request) {
	t.Helper()
	out := r.AppendHead(nil, r.HopByHop)
	var f Request
	n, err := f.Parse(out, forwardedLimits)
	if n != len(out) || err != nil || string(f.Method) != string(r.Method) || string(f.Target) != string(r.Target) ||
		string(f.Host) != string(r.Host) || (f.Host == nil) != (r.Host == nil) ||
		f.Framing != r.Framing || f.ContentLength != r.ContentLength {
		t.Fatalf("forwarded as %q: n=%d err=%v, %s %s Host %q %v %d; received %s %s Host %q %v %d", out, n, err,
			f.Method, f.Target, f.Host, f.Framing, f.ContentLength, r.Method, r.Target, r.Host, r.Framing, r.ContentLength)
	}
}

// forwardedResponseSame is forwardedRequestSame for a response to a HEAD
// request (head) or another: the same status and body framing. A 101 is
// left out: its Upgrade and Connection, which it cannot go without, are
// hop-by-hop, and the proxy writes its own.
func forwardedResponseSame(t *testing.T, r *Response, head bool) {
	t.Helper()
	if r.Status == 101 {
		return
	}
	out := r.AppendHead(nil, r.HopByHop)
	var f Response
	n, err := f.Parse(out, head, forwardedLimits)
	if n != len(out) || err != nil || f.Status != r.Status || f.Framing != r.Framing || f.ContentLength != r.ContentLength {
		t.Fatalf("forwarded as %q: n=%d err=%v, %d %v %d; received %d %v %d", out, n, err,
			f.Status, f.Framing, f.ContentLength, r.Status, r.Framing, r.ContentLength)
	}
}

// FuzzRequest checks that Parse never panics, returns only *Error values with
// a status a proxy can send, reports every prefix of a head it accepts
// incomplete, parses the head it forwards as the same request
// (forwardedRequestSame), and accepts nothing net/http rejects, agreeing
// with it on method, target, Host, persistence and body framing.
func FuzzRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Request
		n, err := r.Parse(in, Limits{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v", err, err)
			}
			switch e.Status {
			case 400, 414, 431, 501, 505:
			default:
				t.Fatalf("status %d", e.Status)
			}
			return
		}
		if n == 0 {
			return
		}
		if n > len(in) {
			t.Fatalf("n %d > len %d", n, len(in))
		}
		if n2, err := r.Parse(in[:n], Limits{}); n2 != n || err != nil {
			t.Fatalf("head alone: n=%d err=%v, want %d", n2, err, n)
		}
		var p Request
		prefixesIncomplete(t, in, n, func(b []byte) (int, error) { return p.Parse(b, Limits{}) })
		forwardedRequestSame(t, &r)
		if netHTTPDiffers(&r) {
			return
		}
		method, target, framing, length := string(r.Method), string(r.Target), r.Framing, r.ContentLength
		head := in[:n]
		for bytes.HasPrefix(head, []byte("\r\n")) { // net/http does not skip empty lines
			head = head[2:]
		}
		req, herr := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if herr != nil {
			t.Fatalf("accepted %q; net/http: %v", in[:n], herr)
		}
		if req.Method != method || req.RequestURI != target {
			t.Fatalf("%q: method/target %q %q, net/http %q %q", in[:n], method, target, req.Method, req.RequestURI)
		}
		// net/http's Host is an absolute-form target's authority as
		// written; Parse accepts a Host that differs from it only by the
		// scheme's default port or an empty one (RFC 9110 4.2.3).
		if r.Host != nil && !sameAuthority([]byte(req.Host), r.Host, defaultPort(r.Target)) {
			t.Fatalf("%q: host %q, net/http %q", in[:n], r.Host, req.Host)
		}
		if r.KeepAlive == req.Close {
			t.Fatalf("%q: keep-alive %v, net/http close %v", in[:n], r.KeepAlive, req.Close)
		}
		chunked := len(req.TransferEncoding) > 0 && req.TransferEncoding[0] == "chunked"
		switch framing {
		case Chunked:
			if !chunked {
				t.Fatalf("%q: chunked, net/http %v", in[:n], req.TransferEncoding)
			}
		case Length:
			if chunked || req.ContentLength != length {
				t.Fatalf("%q: length %d, net/http %d", in[:n], length, req.ContentLength)
			}
		case NoBody:
			if chunked || req.ContentLength != 0 {
				t.Fatalf("%q: no body, net/http %d", in[:n], req.ContentLength)
			}
		}
	})
}

// FuzzResponse checks that Response.Parse never panics, fails only with 502
// *Error values, reports every prefix of a head it accepts incomplete,
// parses the head it forwards as the same response
// (forwardedResponseSame), and agrees with net/http on accepted heads'
// status and Content-Length.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
		"HTTP/1.1 204\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		var r Response
		n, err := r.Parse(in, head, Limits{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 502 {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if n == 0 {
			return
		}
		if n2, err := r.Parse(in[:n], head, Limits{}); n2 != n || err != nil {
			t.Fatalf("head alone: n=%d err=%v, want %d", n2, err, n)
		}
		var p Response
		prefixesIncomplete(t, in, n, func(b []byte) (int, error) { return p.Parse(b, head, Limits{}) })
		forwardedResponseSame(t, &r, head)
		if (r.Framing == UntilClose || r.Status == 101) && r.KeepAlive {
			t.Fatalf("%q: keep-alive with %v", in[:n], r.Framing)
		}
		method := "GET"
		if head {
			method = "HEAD"
		}
		resp, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(in[:n])), &http.Request{Method: method})
		if herr != nil {
			// net/http supports only "chunked" alone, in one field, as a
			// transfer coding ("unsupported transfer encoding", "too many
			// transfer encodings").
			if strings.Contains(herr.Error(), "transfer encoding") && hasTE(r.Headers) {
				return // even where it does not frame the body (1xx, 204, 304, HEAD)
			}
			for _, h := range r.Headers { // identical Content-Length lists: see netHTTPDiffers
				if eqFold(h.Name, "content-length") && bytes.IndexByte(h.Value, ',') >= 0 {
					return
				}
			}
			t.Fatalf("accepted %q; net/http: %v", in[:n], herr)
		}
		if resp.StatusCode != r.Status {
			t.Fatalf("%q: status %d, net/http %d", in[:n], r.Status, resp.StatusCode)
		}
		chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
		switch r.Framing {
		case Length:
			if chunked || resp.ContentLength != r.ContentLength {
				t.Fatalf("%q: length %d, net/http %d %v", in[:n], r.ContentLength, resp.ContentLength, resp.TransferEncoding)
			}
		case Chunked:
			if !chunked {
				t.Fatalf("%q: chunked, net/http %d %v", in[:n], resp.ContentLength, resp.TransferEncoding)
			}
		case UntilClose:
			if chunked || resp.ContentLength != -1 {
				t.Fatalf("%q: until close, net/http %d %v", in[:n], resp.ContentLength, resp.TransferEncoding)
			}
		case NoBody:
			// net/http keeps a HEAD response's Content-Length, as the
			// length a GET would have had.
			if !head && resp.ContentLength != 0 {
				t.Fatalf("%q: no body, net/http %d %v", in[:n], resp.ContentLength, resp.TransferEncoding)
			}
		}
	})
}

// hasTE reports a Transfer-Encoding field.
func hasTE(hs []Header) bool {
	for _, h := range hs {
		if eqFold(h.Name, "transfer-encoding") {
			return true
		}
	}
	return false
}

// goChunked reads in with net/http's chunked reader and returns the data it
// decodes and the offset just after the last-chunk line, or the error it
// fails with first. The buffer holds any line the reader accepts (it
// refuses lines of 4096 bytes and more, LF included:
// httputil.ErrLineTooLong); a smaller one would fail on shorter lines than
// the reader's own limit.
func goChunked(in []byte) (data []byte, end int, err error) {
	src := bytes.NewReader(in)
	br := bufio.NewReaderSize(src, 8<<10)
	data, err = io.ReadAll(httputil.NewChunkedReader(br))
	if err != nil {
		return nil, 0, err
	}
	return data, len(in) - src.Len() - br.Buffered(), nil
}

// FuzzBody checks that any two-cut split of a body gives the same result as
// one call, and, for Chunked, agrees with net/http/httputil's chunked reader:
// a body Next finishes is one that reader reads to its last chunk, ending at
// the first empty line after it; and a body that reader reads whose last
// chunk is followed by an empty line is one Next finishes there. NextSpan
// takes the same bytes with the same end and error as Next, split at any
// one point (every one for bodies up to 1 KiB) or at the two cuts, and the
// same spans: a Length or UntilClose body's bytes all data, a chunked
// body's data the reader's, and its trailer section the bytes between the
// last-chunk line and the final CRLF. Deliberate
// differences: Next accepts whitespace between chunk-size and ";" (RFC 9112
// BWS; the Go reader does not), rejects whitespace ending a chunk-size
// line (the Go reader trims it) and rejects chunk extensions outside RFC
// 9112's chunk-ext (the Go reader ignores what follows the first ";").
func FuzzBody(f *testing.F) {
	for _, s := range []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;a=b\r\nhello\r\n0\r\nT: x\r\n\r\n",
		"5 ;a\r\nhello\r\n0\r\n\r\n",
		"A\r\n0123456789\r\n0\r\n\r\nnext",
		"5\nhello\r\n0\r\n\r\n",
		"5 ; a = \"x;y\\\"\\\\\" ;b\r\nhello\r\n0;c=d\r\n\r\n",
		"5;a=\"x\\\r\n\"\r\nhello\r\n0\r\n\r\n",
		"5;a=\"x\r\n\"\r\nhello\r\n0\r\n\r\n",
		"5;a=\"b\nc\"\r\nhello\r\n0\r\n\r\n",
		"2;a=\"\r\n0\r\n\r\n\"\r\nhi\r\n0\r\n\r\n",
		"5;a=b c\r\nhello\r\n0\r\n\r\n",
		"5;a \r\nhello\r\n0\r\n\r\n",
		"5;\r\nhello\r\n0;=\r\n\r\n",
	} {
		f.Add(uint8(Chunked), int64(0), []byte(s), 3, 9)
	}
	f.Add(uint8(Length), int64(4), []byte("abcdef"), 1, 2)
	f.Fuzz(func(t *testing.T, framing uint8, length int64, in []byte, c1, c2 int) {
		fr := Framing(framing % 4)
		if length < 0 {
			length = -length
			if length < 0 {
				length = 0
			}
		}
		whole := feed(fr, length, in)
		if whole.n > len(in) || whole.n < 0 || whole.data < 0 || whole.data > int64(whole.n) {
			t.Fatalf("n %d of %d, data %d", whole.n, len(in), whole.data)
		}
		if c1 > c2 {
			c1, c2 = c2, c1
		}
		if c1 >= 0 && c2 <= len(in) {
			if got := feed(fr, length, in, c1, c2); got != whole {
				t.Fatalf("cuts %d %d: %+v, whole %+v", c1, c2, got, whole)
			}
		}
		spans := feedSpans(t, fr, length, in)
		if spans.n != whole.n || spans.done != whole.done || spans.err != whole.err || spans.count != whole.data {
			t.Fatalf("%q: NextSpan %+v, Next %+v", in, spans, whole)
		}
		step := 1 + len(in)/1024
		for i := 0; i <= len(in); i += step {
			if got := feedSpans(t, fr, length, in, i); got != spans {
				t.Fatalf("%q split at %d: %+v, whole %+v", in, i, got, spans)
			}
		}
		if c1 >= 0 && c2 <= len(in) {
			if got := feedSpans(t, fr, length, in, c1, c2); got != spans {
				t.Fatalf("%q cuts %d %d: %+v, whole %+v", in, c1, c2, got, spans)
			}
		}
		if fr != Chunked && (spans.data != string(in[:spans.n]) || spans.trailer != "") {
			t.Fatalf("%q: %v body, spans %+v", in, fr, spans)
		}
		if fr != Chunked || len(in) > 16<<10 {
			return // Go's reader also limits extension overhead to 16 KiB
		}
		if whole.done {
			data, end, err := goChunked(in[:whole.n])
			if err != nil {
				if bytes.Contains(in[:whole.n], []byte(" ;")) || bytes.Contains(in[:whole.n], []byte("\t;")) {
					return // BWS before ";"
				}
				if errors.Is(err, httputil.ErrLineTooLong) {
					return // a chunk line of 4094 to MaxChunkLine bytes
				}
				t.Fatalf("%q: done at %d, Go's reader fails: %v", in, whole.n, err)
			}
			if i := bytes.Index(in[end-2:], []byte("\r\n\r\n")); i < 0 || end-2+i+4 != whole.n {
				t.Fatalf("%q: done at %d, last chunk ends at %d", in, whole.n, end)
			}
			if spans.data != string(data) || spans.trailer != string(in[end:whole.n-2]) {
				t.Fatalf("%q: spans' data %q trailer %q; Go's reader's data %q, trailer section %q",
					in, spans.data, spans.trailer, data, in[end:whole.n-2])
			}
			return
		}
		if _, end, err := goChunked(in); err == nil && bytes.HasPrefix(in[end:], []byte("\r\n")) {
			if errors.Is(whole.err, errChunkExt) || errors.Is(whole.err, errChunkBWS) {
				return
			}
			t.Fatalf("%q: Go's reader ends at %d; Next: %+v", in, end+2, whole)
		}
	})
}
