package h1

import (
	"strings"
	"testing"
)

func TestResponseParse(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		raw       bool
		head      bool
		status    int // error status, 0 = accepted
		framing   Framing
		length    int64
		keepAlive bool
	}{
		{name: "length", in: "HTTP/1.1 200 OK\nContent-Length: 7\n\n", framing: Length, length: 7, keepAlive: true},
		{name: "chunked", in: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n", framing: Chunked, keepAlive: true},
		{name: "gzip, chunked", in: "HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\n\n", framing: Chunked, keepAlive: true},
		{name: "te and cl", in: "HTTP/1.1 200 OK\nContent-Length: 7\nTransfer-Encoding: chunked\n\n", framing: Chunked},
		// RFC 9112 6.3 #3: both are an error whatever frames the body;
		// the connection is not reused.
		{name: "head with te and cl", in: "HTTP/1.1 200 OK\nContent-Length: 7\nTransfer-Encoding: chunked\n\n", head: true, framing: NoBody},
		{name: "304 with te and cl", in: "HTTP/1.1 304 Not Modified\nContent-Length: 7\nTransfer-Encoding: chunked\n\n", framing: NoBody},
		{name: "te not chunked", in: "HTTP/1.1 200 OK\nTransfer-Encoding: gzip\n\n", status: 502},
		{name: "chunked not final", in: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked, gzip\n\n", status: 502},
		{name: "chunked twice", in: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nTransfer-Encoding: chunked\n\n", status: 502},
		{name: "chunked with empty element", in: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked,\n\n", status: 502},
		{name: "chunked then empty field", in: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nTransfer-Encoding: \n\n", status: 502},
		{name: "gzip, chunked in two fields", in: "HTTP/1.1 200 OK\nTransfer-Encoding: gzip\nTransfer-Encoding: chunked\n\n", framing: Chunked, keepAlive: true},
		{name: "te in 1.0", in: "HTTP/1.0 200 OK\nTransfer-Encoding: chunked\n\n", status: 502},
		{name: "until close", in: "HTTP/1.1 200 OK\nA: b\n\n", framing: UntilClose},
		{name: "1.0 keep-alive", in: "HTTP/1.0 200 OK\nConnection: keep-alive\nContent-Length: 0\n\n", framing: Length, keepAlive: true},
		{name: "1.0", in: "HTTP/1.0 200 OK\nContent-Length: 0\n\n", framing: Length},
		{name: "close", in: "HTTP/1.1 200 OK\nConnection: close\nContent-Length: 0\n\n", framing: Length},
		{name: "head", in: "HTTP/1.1 200 OK\nContent-Length: 7\n\n", head: true, framing: NoBody, keepAlive: true},
		{name: "204", in: "HTTP/1.1 204 No Content\nContent-Length: 7\n\n", framing: NoBody, keepAlive: true},
		{name: "304", in: "HTTP/1.1 304 Not Modified\nTransfer-Encoding: chunked\n\n", framing: NoBody, keepAlive: true},
		{name: "bad te in 204", in: "HTTP/1.1 204 No Content\nTransfer-Encoding:\n\n", status: 502},
		{name: "100", in: "HTTP/1.1 100 Continue\n\n", framing: NoBody, keepAlive: true},
		{name: "100 with content-length", in: "HTTP/1.1 100 Continue\nContent-Length: 5\n\n", framing: NoBody, keepAlive: true},
		{name: "103 with chunked", in: "HTTP/1.1 103 Early Hints\nTransfer-Encoding: chunked\n\n", framing: NoBody, keepAlive: true},
		{name: "101", in: "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: upgrade\n\n", framing: NoBody},
		// RFC 9110 7.8: a 101 must say what the connection switches to.
		{name: "101 without upgrade", in: "HTTP/1.1 101 Switching Protocols\n\n", status: 502},
		{name: "101 upgrade not in connection", in: "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\n\n", status: 502},
		{name: "101 empty upgrade", in: "HTTP/1.1 101 Switching Protocols\nUpgrade:\nConnection: upgrade\n\n", status: 502},
		{name: "no reason", in: "HTTP/1.1 200 \nContent-Length: 0\n\n", framing: Length, keepAlive: true},
		{name: "no reason no space", in: "HTTP/1.1 200\nContent-Length: 0\n\n", framing: Length, keepAlive: true},
		{name: "differing cl", in: "HTTP/1.1 200 OK\nContent-Length: 7\nContent-Length: 8\n\n", status: 502},
		{name: "bad cl", in: "HTTP/1.1 200 OK\nContent-Length: -1\n\n", status: 502},
		{name: "status 099", in: "HTTP/1.1 099 X\n\n", status: 502},
		{name: "status 4 digits", in: "HTTP/1.1 2000 X\n\n", status: 502},
		{name: "status letters", in: "HTTP/1.1 2x0 X\n\n", status: 502},
		{name: "http/2", in: "HTTP/2.0 200 OK\n\n", status: 502},
		{name: "http/1.2", in: "HTTP/1.2 200 OK\n\n", status: 502},
		{name: "ctl in reason", in: "HTTP/1.1 200 O\x01K\n\n", status: 502},
		{name: "bare LF", raw: true, in: "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", status: 502},
		{name: "obs-fold", in: "HTTP/1.1 200 OK\nA: b\n c\nContent-Length: 0\n\n", status: 502},
		{name: "space before colon", in: "HTTP/1.1 200 OK\nContent-Length : 0\n\n", status: 502},
		{name: "too many headers", in: "HTTP/1.1 200 OK\n" + strings.Repeat("A: b\n", 101) + "\n", status: 502},
		{name: "connection options at limit", in: "HTTP/1.1 200 OK\nConnection: " + strings.Repeat("a, ", MaxConnectionOptions-1) + "close\nContent-Length: 0\n\n", framing: Length},
		{name: "too many connection options", in: "HTTP/1.1 200 OK\nConnection: " + strings.Repeat("a, ", MaxConnectionOptions) + "close\nContent-Length: 0\n\n", status: 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if !tt.raw {
				in = crlf(in)
			}
			var r Response
			n, err := r.Parse([]byte(in), tt.head, Limits{})
			if got := status(err); got != tt.status {
				t.Fatalf("status %d (%v), want %d", got, err, tt.status)
			}
			if err != nil {
				return
			}
			if n != len(in) || r.Framing != tt.framing || r.ContentLength != tt.length || r.KeepAlive != tt.keepAlive {
				t.Errorf("n=%d/%d framing=%v length=%d keepAlive=%v, want %v %d %v",
					n, len(in), r.Framing, r.ContentLength, r.KeepAlive, tt.framing, tt.length, tt.keepAlive)
			}
			for i := 0; i < len(in); i++ {
				if n, err := r.Parse([]byte(in[:i]), tt.head, Limits{}); n != 0 || err != nil {
					t.Fatalf("prefix %d: n=%d err=%v", i, n, err)
				}
			}
		})
	}
}

// TestResponseCLAndTEForwarded: a response with both Transfer-Encoding and
// Content-Length is forwarded without the Content-Length (RFC 9112 6.3 #3:
// an intermediary MUST remove it first), so that a client reading it cannot
// frame the chunked body by the length.
func TestResponseCLAndTEForwarded(t *testing.T) {
	for _, head := range []bool{false, true} {
		var r Response
		in := crlf("HTTP/1.1 200 OK\nContent-Length: 7\nTransfer-Encoding: chunked\nX: y\n\n")
		if _, err := r.Parse([]byte(in), head, Limits{}); err != nil {
			t.Fatal(err)
		}
		got := string(r.AppendHead(nil, r.HopByHop))
		if want := crlf("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nX: y\n\n"); got != want {
			t.Errorf("head %v: forwarded %q, want %q", head, got, want)
		}
	}
	var r Response
	if _, err := r.Parse([]byte(crlf("HTTP/1.1 200 OK\nContent-Length: 7\n\n")), false, Limits{}); err != nil {
		t.Fatal(err)
	}
	if r.HopByHop([]byte("Content-Length")) {
		t.Error("Content-Length alone reported hop-by-hop")
	}
}

func TestResponseUpgrade(t *testing.T) {
	var r Response
	in := crlf("HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n\n")
	if _, err := r.Parse([]byte(in), false, Limits{}); err != nil {
		t.Fatal(err)
	}
	if string(r.Upgrade) != "websocket" || r.Status != 101 || string(r.Reason) != "Switching Protocols" {
		t.Errorf("got %+v", r)
	}
}
