package h1

import (
	"errors"
	"strings"
	"testing"
)

// crlf turns "\n" into "\r\n" so that tables stay readable.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestRequestParse(t *testing.T) {
	tests := []struct {
		name   string
		in     string // "\n" means CRLF unless raw
		raw    bool
		status int    // 0 = accepted
		is     *Error // if set, the exact error: the rule under test, not another that also catches the input
		check  func(t *testing.T, r *Request)
	}{
		{name: "simple", in: "GET /a?b HTTP/1.1\nHost: x\n\n", check: func(t *testing.T, r *Request) {
			if string(r.Method) != "GET" || string(r.Target) != "/a?b" || r.Minor != 1 || string(r.Host) != "x" ||
				r.Framing != NoBody || !r.KeepAlive || len(r.Headers) != 1 {
				t.Errorf("got %+v", r)
			}
		}},
		{name: "ows trimmed", in: "GET / HTTP/1.1\nHost: \t x \t\nA:b\n\n", check: func(t *testing.T, r *Request) {
			if string(r.Host) != "x" || string(r.Headers[1].Value) != "b" {
				t.Errorf("got %q %q", r.Host, r.Headers[1].Value)
			}
		}},
		{name: "content-length", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 42\n\n", check: func(t *testing.T, r *Request) {
			if r.Framing != Length || r.ContentLength != 42 {
				t.Errorf("got %v %d", r.Framing, r.ContentLength)
			}
		}},
		{name: "identical repeated content-length", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 5\nContent-Length: 5\n\n"},
		{name: "identical content-length list", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 5, 5\n\n", check: func(t *testing.T, r *Request) {
			if r.ContentLength != 5 {
				t.Errorf("got %d", r.ContentLength)
			}
		}},
		{name: "differing content-length", is: errCLMismatch, in: "POST / HTTP/1.1\nHost: x\nContent-Length: 5\nContent-Length: 6\n\n", status: 400},
		{name: "differing content-length list", is: errContentLength, in: "POST / HTTP/1.1\nHost: x\nContent-Length: 5, 6\n\n", status: 400},
		{name: "content-length empty element", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 5,\n\n", status: 400},
		{name: "content-length empty", in: "POST / HTTP/1.1\nHost: x\nContent-Length:\n\n", status: 400},
		{name: "content-length sign", in: "POST / HTTP/1.1\nHost: x\nContent-Length: +5\n\n", status: 400},
		{name: "content-length hex", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 0x5\n\n", status: 400},
		{name: "content-length max", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 9223372036854775807\n\n"},
		{name: "content-length overflow", is: errContentLength, in: "POST / HTTP/1.1\nHost: x\nContent-Length: 9223372036854775808\n\n", status: 400},
		{name: "content-length huge", in: "POST / HTTP/1.1\nHost: x\nContent-Length: 99999999999999999999999\n\n", status: 400},
		{name: "chunked", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n", check: func(t *testing.T, r *Request) {
			if r.Framing != Chunked {
				t.Errorf("got %v", r.Framing)
			}
		}},
		{name: "chunked any case", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: Chunked\n\n"},
		{name: "content-length and chunked", is: errCLAndTE, in: "POST / HTTP/1.1\nHost: x\nContent-Length: 3\nTransfer-Encoding: chunked\n\n", status: 400},
		{name: "chunked and content-length", is: errCLAndTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\nContent-Length: 3\n\n", status: 400},
		{name: "gzip then chunked", is: errTEUnsupported, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: gzip, chunked\n\n", status: 501},
		{name: "gzip then chunked in two fields", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: gzip\nTransfer-Encoding: chunked\n\n", status: 501},
		{name: "chunked not final", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked, gzip\n\n", status: 400},
		{name: "chunked twice", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked, chunked\n\n", status: 400},
		{name: "te not chunked", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: gzip\n\n", status: 400},
		{name: "te identity", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: identity\n\n", status: 400},
		{name: "te empty", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: \n\n", status: 400},
		{name: "te chunked with junk", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunkedx\n\n", status: 400},
		// Empty list elements are valid (RFC 9110 5.6.1) but make the value
		// other than "chunked" for a next hop that compares it whole, or
		// takes the last of two fields: no body there, and the chunked body
		// would be read as the next request.
		{name: "te chunked with empty element", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked, \n\n", status: 400},
		{name: "te empty element then chunked", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: ,chunked\n\n", status: 400},
		{name: "te chunked then empty field", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\nTransfer-Encoding:\n\n", status: 400},
		{name: "te empty field then chunked", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: \nTransfer-Encoding: chunked\n\n", status: 400},
		{name: "te in http/1.0", is: errTE10, in: "POST / HTTP/1.0\nTransfer-Encoding: chunked\n\n", status: 400},
		{name: "obs-fold", is: errObsFold, in: "GET / HTTP/1.1\nHost: x\nA: b\n c\n\n", status: 400},
		{name: "obs-fold tab", is: errObsFold, in: "GET / HTTP/1.1\nHost: x\nA: b\n\tc\n\n", status: 400},
		{name: "whitespace before first field", is: errObsFold, in: "GET / HTTP/1.1\n Host: x\n\n", status: 400},
		{name: "space before colon", is: errSpaceBeforeColn, in: "GET / HTTP/1.1\nHost : x\n\n", status: 400},
		{name: "tab before colon", is: errSpaceBeforeColn, in: "GET / HTTP/1.1\nHost\t: x\n\n", status: 400},
		{name: "no colon", in: "GET / HTTP/1.1\nHost x\n\n", status: 400},
		{name: "empty name", in: "GET / HTTP/1.1\nHost: x\n: x\n\n", status: 400},
		{name: "bad name char", is: errFieldName, in: "GET / HTTP/1.1\nHost: x\nA(b: c\n\n", status: 400},
		{name: "bare LF in fields", is: errBareLF, raw: true, in: "GET / HTTP/1.1\r\nHost: x\nA: b\r\n\r\n", status: 400},
		{name: "bare LF end", is: errBareLF, raw: true, in: "GET / HTTP/1.1\r\nHost: x\r\n\n", status: 400},
		{name: "bare LF request line", is: errBareLF, raw: true, in: "GET / HTTP/1.1\nHost: x\r\n\r\n", status: 400},
		{name: "bare CR in value", is: errFieldValue, raw: true, in: "GET / HTTP/1.1\r\nHost: x\r\nA: b\rc\r\n\r\n", status: 400},
		{name: "bare CR ending field", raw: true, in: "GET / HTTP/1.1\r\nHost: x\r\nA: b\rB: c\r\n\r\n", status: 400},
		{name: "bare CR in request line", raw: true, in: "GET /\r HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "NUL in value", is: errFieldValue, in: "GET / HTTP/1.1\nHost: x\nA: b\x00c\n\n", status: 400},
		{name: "DEL in value", in: "GET / HTTP/1.1\nHost: x\nA: b\x7fc\n\n", status: 400},
		{name: "HTAB in value", in: "GET / HTTP/1.1\nHost: x\nA: b\tc\n\n"},
		{name: "obs-text in value", in: "GET / HTTP/1.1\nHost: x\nA: b\xffc\n\n"},
		{name: "NUL in name", is: errFieldName, in: "GET / HTTP/1.1\nHost: x\nA\x00B: c\n\n", status: 400},
		{name: "high byte in name", is: errFieldName, in: "GET / HTTP/1.1\nHost: x\nTransfer-Encoding\xc2\xa0: chunked\n\n", status: 400},
		{name: "tab for space in request line", is: errMethod, in: "GET\t/ HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "tab before version", is: errRequestLine, in: "GET /\tHTTP/1.1\nHost: x\n\n", status: 400},
		{name: "content-length padded", in: "POST / HTTP/1.1\nHost: x\nContent-Length:  05 \n\n", check: func(t *testing.T, r *Request) {
			if r.Framing != Length || r.ContentLength != 5 {
				t.Errorf("got %v %d", r.Framing, r.ContentLength)
			}
		}},
		{name: "te xchunked", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: xchunked\n\n", status: 400},
		{name: "te chunked trailing space", in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked \t\n\n"},
		{name: "te two fields differing", is: errTE, in: "POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\nTransfer-Encoding: identity\n\n", status: 400},
		{name: "bad method", is: errMethod, in: "G(T / HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "empty method", in: " / HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "two spaces", in: "GET  / HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "trailing space", in: "GET / HTTP/1.1 \nHost: x\n\n", status: 400},
		{name: "no version", in: "GET /\nHost: x\n\n", status: 400},
		{name: "lower-case version", in: "GET / http/1.1\nHost: x\n\n", status: 400},
		{name: "http/1.2", in: "GET / HTTP/1.2\nHost: x\n\n", status: 505},
		{name: "http/2.0", in: "GET / HTTP/2.0\nHost: x\n\n", status: 505},
		{name: "http/0.9", in: "GET / HTTP/0.9\nHost: x\n\n", status: 505},
		{name: "http/1.10", in: "GET / HTTP/1.10\nHost: x\n\n", status: 400},
		{name: "http/1.0 without host", in: "GET / HTTP/1.0\n\n", check: func(t *testing.T, r *Request) {
			if r.Minor != 0 || r.KeepAlive || r.Host != nil {
				t.Errorf("got %+v", r)
			}
		}},
		{name: "http/1.0 keep-alive", in: "GET / HTTP/1.0\nConnection: Keep-Alive\n\n", check: func(t *testing.T, r *Request) {
			if !r.KeepAlive {
				t.Error("KeepAlive false")
			}
		}},
		{name: "connection close", in: "GET / HTTP/1.1\nHost: x\nConnection: foo, close\n\n", check: func(t *testing.T, r *Request) {
			if r.KeepAlive {
				t.Error("KeepAlive true")
			}
		}},
		{name: "missing host", is: errHost, in: "GET / HTTP/1.1\nA: b\n\n", status: 400},
		{name: "repeated host", is: errHost, in: "GET / HTTP/1.1\nHost: x\nHost: x\n\n", status: 400},
		{name: "repeated host 1.0", in: "GET / HTTP/1.0\nHost: x\nhost: y\n\n", status: 400},
		{name: "invalid host", is: errHost, in: "GET / HTTP/1.1\nHost: x/y\n\n", status: 400},
		{name: "empty host", in: "GET / HTTP/1.1\nHost:\n\n"},
		{name: "host ipv6 port", in: "GET / HTTP/1.1\nHost: [::1]:80\n\n"},
		// RFC 9110 7.2: Host = uri-host [ ":" port ]; an invalid one is 400.
		{name: "host two colons", is: errHost, in: "GET / HTTP/1.1\nHost: a:b:c\n\n", status: 400},
		{name: "host bad port", is: errHost, in: "GET / HTTP/1.1\nHost: x:8a\n\n", status: 400},
		{name: "host port only", is: errHost, in: "GET / HTTP/1.1\nHost: :80\n\n", status: 400},
		{name: "host unclosed ipv6", is: errHost, in: "GET / HTTP/1.1\nHost: [::1\n\n", status: 400},
		{name: "host stray bracket", is: errHost, in: "GET / HTTP/1.1\nHost: x]\n\n", status: 400},
		{name: "host empty port", in: "GET / HTTP/1.1\nHost: x:\n\n"},
		{name: "host trailing dot", in: "GET / HTTP/1.1\nHost: example.com.:80\n\n"},
		{name: "absolute-form", in: "GET http://x/y HTTP/1.1\nHost: x\n\n"},
		{name: "absolute-form host case", in: "GET http://X.example:80?q HTTP/1.1\nHost: x.EXAMPLE:80\n\n"},
		{name: "absolute-form other host", is: errHostTarget, in: "GET http://x/y HTTP/1.1\nHost: y\n\n", status: 400},
		// RFC 9110 4.2.3: a default port, or an empty one, is the same
		// authority as none.
		{name: "absolute-form default port, Host without", in: "OPTIONS http://x:80 HTTP/1.1\nHost: x\n\n"},
		{name: "absolute-form without port, Host default", in: "GET http://X/y HTTP/1.1\nHost: x:80\n\n"},
		{name: "absolute-form empty port", in: "GET HTTP://x:/y HTTP/1.1\nHost: x\n\n"},
		{name: "absolute-form https default port", in: "GET https://x/y HTTP/1.1\nHost: x:443\n\n"},
		{name: "absolute-form IPv6 default port", in: "GET http://[::1]:80/y HTTP/1.1\nHost: [::1]\n\n"},
		{name: "absolute-form other port", is: errHostTarget, in: "GET http://x:8080/y HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "absolute-form other scheme's default port", is: errHostTarget, in: "GET http://x:443/y HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "absolute-form port on another host", is: errHostTarget, in: "GET http://x:80/y HTTP/1.1\nHost: y\n\n", status: 400},
		{name: "absolute-form 1.0 no host", in: "GET http://x/y HTTP/1.0\n\n"},
		{name: "1.0 expect and upgrade ignored", in: "GET / HTTP/1.0\nExpect: 100-continue\nUpgrade: x\nConnection: upgrade\n\n", check: func(t *testing.T, r *Request) {
			if r.Expect100 || r.Upgrade != nil {
				t.Errorf("Expect100 %v Upgrade %q", r.Expect100, r.Upgrade)
			}
		}},
		{name: "asterisk options", in: "OPTIONS * HTTP/1.1\nHost: x\n\n"},
		{name: "asterisk get", in: "GET * HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect authority", in: "CONNECT x:443 HTTP/1.1\nHost: x:443\n\n", check: func(t *testing.T, r *Request) {
			if string(r.Target) != "x:443" {
				t.Errorf("target %q", r.Target)
			}
		}},
		{name: "authority-form get", in: "GET x:443 HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "absolute-form ipv6", in: "GET http://[::1]:8080?q HTTP/1.1\nHost: [::1]:8080\n\n"},
		{name: "absolute-form userinfo", is: errTarget, in: "GET http://u@x/ HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "absolute-form bad host", in: "GET A://} HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "absolute-form bad port", in: "GET http://x:8a/ HTTP/1.1\nHost: x:8a\n\n", status: 400},
		{name: "absolute-form no host", in: "GET http:///a HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect origin-form", is: errTarget, in: "CONNECT /x HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect asterisk", is: errTarget, in: "CONNECT * HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect other host", is: errHostTarget, in: "CONNECT x:443 HTTP/1.1\nHost: y:443\n\n", status: 400},
		{name: "connect empty host", is: errHostTarget, in: "CONNECT x:443 HTTP/1.0\nHost:\n\n", status: 400},
		{name: "connect without port", is: errTarget, in: "CONNECT x HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect ipv6 without port", is: errTarget, in: "CONNECT [::1] HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect empty port", is: errTarget, in: "CONNECT x: HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "connect ipv6", in: "CONNECT [::1]:443 HTTP/1.1\nHost: [::1]:443\n\n"},
		{name: "empty upgrade", in: "GET / HTTP/1.1\nHost: x\nUpgrade:\nConnection: upgrade\n\n", check: func(t *testing.T, r *Request) {
			if r.Upgrade != nil {
				t.Errorf("Upgrade %q, want nil: no protocol to switch to", r.Upgrade)
			}
		}},
		{name: "connect bad authority", in: "CONNECT x/y HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "relative target", in: "GET a/b HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "pct-encoded", in: "GET /a%2Fb%c3%A9 HTTP/1.1\nHost: x\n\n"},
		{name: "bad pct-encoding", is: errTarget, in: "GET /a%zz HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "short pct-encoding", in: "GET /a%2 HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "fragment", is: errTarget, in: "GET /a#b HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "ctl in target", in: "GET /a\x01 HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "non-ascii target", in: "GET /\xc3\xa9 HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "leading CRLF", in: "\n\nGET / HTTP/1.1\nHost: x\n\n"},
		{name: "too many leading CRLF", is: errLeadingLines, in: "\n\n\n\n\nGET / HTTP/1.1\nHost: x\n\n", status: 400},
		{name: "leading bare LF", is: errBareLF, raw: true, in: "\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "leading bare CR", is: errBareCR, raw: true, in: "\rGET / HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "expect", in: "PUT / HTTP/1.1\nHost: x\nExpect: 100-Continue\nContent-Length: 1\n\n", check: func(t *testing.T, r *Request) {
			if !r.Expect100 {
				t.Error("Expect100 false")
			}
		}},
		{name: "upgrade", in: "GET / HTTP/1.1\nHost: x\nUpgrade: websocket\nConnection: Upgrade\n\n", check: func(t *testing.T, r *Request) {
			if string(r.Upgrade) != "websocket" {
				t.Errorf("Upgrade %q", r.Upgrade)
			}
		}},
		{name: "upgrade not in connection", in: "GET / HTTP/1.1\nHost: x\nUpgrade: websocket\n\n", check: func(t *testing.T, r *Request) {
			if r.Upgrade != nil {
				t.Errorf("Upgrade %q", r.Upgrade)
			}
		}},
		// Each field's HopByHop scans the Connection lists: their options
		// are bounded (empty ones too), or a 16 KiB head of 8,000 of them
		// and 100 fields costs 800,000 comparisons to forward.
		{name: "connection options at limit", in: "GET / HTTP/1.1\nHost: x\nConnection: " + strings.Repeat("a, ", MaxConnectionOptions-1) + "close\n\n", check: func(t *testing.T, r *Request) {
			if r.KeepAlive {
				t.Error("KeepAlive true")
			}
		}},
		{name: "too many connection options", is: errConnOptions, in: "GET / HTTP/1.1\nHost: x\nConnection: " + strings.Repeat("a, ", MaxConnectionOptions) + "close\n\n", status: 431},
		{name: "too many connection options in two fields", is: errConnOptions, in: "GET / HTTP/1.1\nHost: x\nConnection: " + strings.Repeat("a,", MaxConnectionOptions/2) + "\nConnection: " + strings.Repeat("a,", MaxConnectionOptions/2) + "b\n\n", status: 431},
		{name: "too many empty connection options", is: errConnOptions, in: "GET / HTTP/1.1\nHost: x\nConnection: " + strings.Repeat(",", MaxConnectionOptions+1) + "\n\n", status: 431},
		{name: "too many headers", is: errTooManyHeaders, in: "GET / HTTP/1.1\nHost: x\n" + strings.Repeat("A: b\n", 100) + "\n", status: 431},
		{name: "headers at limit", in: "GET / HTTP/1.1\nHost: x\n" + strings.Repeat("A: b\n", 99) + "\n"},
		{name: "head too large", is: errHeadTooLarge, in: "GET / HTTP/1.1\nHost: x\nA: " + strings.Repeat("b", 16<<10) + "\n\n", status: 431},
		{name: "target too long", in: "GET /" + strings.Repeat("a", 8<<10) + " HTTP/1.1\nHost: x\n\n", status: 414},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if !tt.raw {
				in = crlf(in)
			}
			var r Request
			n, err := r.Parse([]byte(in), Limits{})
			if got := status(err); got != tt.status {
				t.Fatalf("status %d (%v), want %d", got, err, tt.status)
			}
			if tt.is != nil && err != error(tt.is) {
				t.Fatalf("error %v, want %v", err, tt.is)
			}
			if err != nil {
				return
			}
			if n != len(in) {
				t.Fatalf("n = %d, want %d", n, len(in))
			}
			if tt.check != nil {
				tt.check(t, &r)
			}
			// Every proper prefix is incomplete (or, past a limit, an error).
			for i := 0; i < len(in); i++ {
				if n, err := r.Parse([]byte(in[:i]), Limits{}); n != 0 || err != nil {
					t.Fatalf("prefix %d: n=%d err=%v", i, n, err)
				}
			}
		})
	}
}

func TestRequestIncompleteLimits(t *testing.T) {
	var r Request
	// A request line whose target grows past MaxTarget is 414 before its end.
	in := []byte("GET /" + strings.Repeat("a", 100))
	if _, err := r.Parse(in, Limits{MaxTarget: 50}); status(err) != 414 {
		t.Errorf("long partial target: %v", err)
	}
	// An incomplete head longer than MaxHead is 431.
	in = []byte(crlf("GET / HTTP/1.1\nHost: x\nA: " + strings.Repeat("b", 200)))
	if _, err := r.Parse(in, Limits{MaxHead: 100}); status(err) != 431 {
		t.Errorf("long partial head: %v", err)
	}
	if n, err := r.Parse(in, Limits{MaxHead: 1000}); n != 0 || err != nil {
		t.Errorf("partial head within limit: %d %v", n, err)
	}
	// Obs-fold is reported before the folded line is complete.
	in = []byte(crlf("GET / HTTP/1.1\nHost: x\n ab"))
	if _, err := r.Parse(in, Limits{}); status(err) != 400 {
		t.Errorf("partial obs-fold: %v", err)
	}
}

func TestRequestParseBodyFollows(t *testing.T) {
	in := crlf("POST / HTTP/1.1\nHost: x\nContent-Length: 3\n\n") + "abcGET"
	var r Request
	n, err := r.Parse([]byte(in), Limits{})
	if err != nil || in[n:] != "abcGET" {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func TestHopByHop(t *testing.T) {
	in := crlf("GET / HTTP/1.1\nHost: x\nConnection: X-Foo, content-length, Transfer-Encoding,host\nConnection: bar\nContent-Length: 0\n\n")
	var r Request
	if _, err := r.Parse([]byte(in), Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"Connection": true, "keep-alive": true, "Proxy-Connection": true, "TE": true, "Upgrade": true,
		"x-foo": true, "BAR": true, "Trailer": false, "Transfer-Encoding": false, "Content-Length": false,
		"Host": false, "X-Fo": false, "Accept": false,
	} {
		if got := r.HopByHop([]byte(name)); got != want {
			t.Errorf("HopByHop(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestAppendHead(t *testing.T) {
	in := crlf("GET /p HTTP/1.1\nHost: x\nConnection: keep-alive, X-A\nX-A: 1\nX-B:  2 \n\n")
	var r Request
	if _, err := r.Parse([]byte(in), Limits{}); err != nil {
		t.Fatal(err)
	}
	got := string(r.AppendHead(nil, r.HopByHop))
	want := crlf("GET /p HTTP/1.1\nHost: x\nX-B: 2\n\n")
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got = string(AppendHeader(r.AppendHeaders(nil, nil), []byte("Via"), []byte("1.1 s")))
	want = crlf("Host: x\nConnection: keep-alive, X-A\nX-A: 1\nX-B: 2\nVia: 1.1 s\n")
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var resp Response
	if _, err := resp.Parse([]byte(crlf("HTTP/1.1 404 Not Found\nKeep-Alive: 5\nContent-Length: 0\n\n")), false, Limits{}); err != nil {
		t.Fatal(err)
	}
	got = string(resp.AppendHead(nil, resp.HopByHop))
	want = crlf("HTTP/1.1 404 Not Found\nContent-Length: 0\n\n")
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

const benchHead = "GET /api/v1/items/12345?fields=name,price&lang=en HTTP/1.1\r\n" +
	"Host: shop.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: application/json, text/plain, */*\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\n" +
	"Referer: https://shop.example.com/items\r\n" +
	"Cookie: session=0123456789abcdef0123456789abcdef\r\n" +
	"Connection: keep-alive\r\n" +
	"\r\n"

func TestParseAllocs(t *testing.T) {
	var r Request
	buf := []byte(benchHead)
	if _, err := r.Parse(buf, Limits{}); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { r.Parse(buf, Limits{}) }); a != 0 {
		t.Errorf("Request.Parse: %v allocs", a)
	}
	bad := []byte(crlf("GET / HTTP/1.1\nHost: x\nContent-Length: 1\nTransfer-Encoding: chunked\n\n"))
	if a := testing.AllocsPerRun(100, func() { r.Parse(bad, Limits{}) }); a != 0 {
		t.Errorf("Request.Parse error: %v allocs", a)
	}
	var resp Response
	rb := []byte(crlf("HTTP/1.1 200 OK\nContent-Type: text/plain\nTransfer-Encoding: chunked\nDate: x\n\n"))
	if _, err := resp.Parse(rb, false, Limits{}); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { resp.Parse(rb, false, Limits{}) }); a != 0 {
		t.Errorf("Response.Parse: %v allocs", a)
	}
	rbad := []byte(crlf("HTTP/1.1 200 OK\nA : b\n\n"))
	if a := testing.AllocsPerRun(100, func() { resp.Parse(rbad, false, Limits{}) }); a != 0 {
		t.Errorf("Response.Parse error: %v allocs", a)
	}
	var b Body
	chunks := []byte("5;a=b\r\nhello\r\n0\r\nX: y\r\n\r\n")
	if a := testing.AllocsPerRun(100, func() {
		b.Reset(Chunked, 0)
		b.Next(chunks[:3])
		b.Next(chunks[3:])
	}); a != 0 {
		t.Errorf("Body.Next: %v allocs", a)
	}
	drop := r.HopByHop
	dst := make([]byte, 0, 1024)
	if a := testing.AllocsPerRun(100, func() { dst = r.AppendHead(dst[:0], drop) }); a != 0 {
		t.Errorf("AppendHead: %v allocs", a)
	}
}

func BenchmarkRequestParse(b *testing.B) {
	var r Request
	buf := []byte(benchHead)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Parse(buf, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSplitTarget: an absolute-form target splits at its authority, which
// ends at a path or a query; every other form has none and is all path.
func TestSplitTarget(t *testing.T) {
	tests := []struct{ target, authority, path string }{
		{"http://h:8080/p?q", "h:8080", "/p?q"},
		{"http://h", "h", ""},
		{"http://h?q", "h", "?q"},
		{"HTTPS://[::1]:443/a/b", "[::1]:443", "/a/b"},
		{"http://h/p://x", "h", "/p://x"},
		{"/p?q", "", "/p?q"},
		{"/http://h/p", "", "/http://h/p"},
		{"*", "", "*"},
		{"h:443", "", "h:443"}, // CONNECT's authority-form
		{"", "", ""},
	}
	for _, tc := range tests {
		a, p := SplitTarget([]byte(tc.target))
		if string(a) != tc.authority || string(p) != tc.path || (a == nil) != (tc.authority == "") {
			t.Errorf("SplitTarget(%q) = %q (nil %v), %q; want %q, %q", tc.target, a, a == nil, p, tc.authority, tc.path)
		}
	}
}

// TestValidAuthority: host [":" port] as a Host field carries it.
func TestValidAuthority(t *testing.T) {
	for _, a := range []string{"x", "example.com:80", "127.0.0.1:8080", "[::1]", "[::1]:443", "a-b_c~d!$&'()*+,;=", "h:"} {
		if !ValidAuthority([]byte(a)) {
			t.Errorf("%q refused", a)
		}
	}
	for _, a := range []string{"", ":80", "a b", "a\r\nX: y", "u@h", "h%41", "h:8x", "h:80:80", "[::1", "[]", "[g::1]", "h/p", "h?q", "h\x7f"} {
		if ValidAuthority([]byte(a)) {
			t.Errorf("%q accepted", a)
		}
	}
}
