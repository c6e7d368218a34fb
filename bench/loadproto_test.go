package bench

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHTTPFramingEcho: the load generator's HTTP request, answered by the
// bench servers' Echo, is framed and verified; the request is the one
// ProtocolHTTP documents (a POST with the Host and the payload as a
// Content-Length body).
func TestHTTPFramingEcho(t *testing.T) {
	for _, payload := range []int{MinPayload, DefaultPayload, 5000} {
		f := newHTTPFraming("example.test:80", payload)
		req := f.appendRequest(nil, 7, 42)
		wantHead := fmt.Sprintf("POST / HTTP/1.1\r\nHost: example.test:80\r\nContent-Length: %d\r\n\r\n", payload)
		if !bytes.HasPrefix(req, []byte(wantHead)) || len(req) != len(wantHead)+payload {
			t.Fatalf("payload %d: request %q", payload, req[:min(len(req), 100)])
		}
		var e Echo
		n, resp, err := e.Process(req, nil)
		if err != nil || n != len(req) {
			t.Fatalf("payload %d: Echo took %d of %d bytes: %v", payload, n, len(req), err)
		}
		// Every prefix of the response is incomplete or frames it whole.
		for i := range len(resp) + 1 {
			fl, err := f.replyLen(resp[:i])
			if err != nil {
				t.Fatalf("payload %d: %d bytes: %v", payload, i, err)
			}
			if fl != 0 && fl != len(resp) {
				t.Fatalf("payload %d: %d bytes framed as %d, want 0 or %d", payload, i, fl, len(resp))
			}
		}
		if fl, _ := f.replyLen(resp); fl != len(resp) {
			t.Fatalf("payload %d: framed %d of %d bytes", payload, fl, len(resp))
		}
		if _, err := f.verify(resp, 7, 42, nil); err != nil {
			t.Fatalf("payload %d: %v", payload, err)
		}
		if _, err := f.verify(resp, 7, 43, nil); !errors.Is(err, ErrMismatch) {
			t.Fatalf("payload %d: the reply to request 42 verified as request 43's: %v", payload, err)
		}
		if _, err := f.verify(resp, 8, 42, nil); !errors.Is(err, ErrMismatch) {
			t.Fatalf("payload %d: the reply to connection 7 verified as connection 8's: %v", payload, err)
		}
	}
}

// TestHTTPFramingResponses: responses from other servers (proxies add
// fields) frame; those that are wrong whatever follows, or that the client
// cannot frame, are errors as soon as their head is in, not a wait for
// bytes that never come.
func TestHTTPFramingResponses(t *testing.T) {
	const payload = 16
	body := string(appendPayload(nil, 0, 0, payload))
	tests := []struct {
		name, resp string
		err        string // "" frames
	}{
		{"plain", "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + body, ""},
		{"proxy fields", "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\nconnection: Keep-Alive\r\ncontent-length:16\r\n\r\n" + body, ""},
		{"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 16\r\n\r\n" + body, ""},
		{"status 500", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 16\r\n\r\n" + body, "status"},
		{"status 2000", "HTTP/1.1 2000 OK\r\nContent-Length: 16\r\n\r\n" + body, "status line"},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 16\r\n\r\n" + body, "status line"},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", "status line"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + body[:10], "10-byte body"},
		{"long body", "HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n" + body + "x", "17-byte body"},
		{"no Content-Length", "HTTP/1.1 200 OK\r\n\r\n" + body, "without a Content-Length"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n" + body + "\r\n0\r\n\r\n", "Transfer-Encoding"},
		{"chunked and Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 16\r\nTransfer-Encoding: chunked\r\n\r\n" + body, "Transfer-Encoding"},
		{"bad Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n" + body, "Content-Length"},
		{"signed Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: +16\r\n\r\n" + body, "Content-Length"},
		{"differing Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 16\r\n\r\n" + body, "Content-Length"},
		{"repeated Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 16\r\nContent-Length: 16\r\n\r\n" + body, ""},
		// Parsed by internal/h1, as the proxy parses them: a list of equal
		// lengths is one (RFC 9110 8.6); obsolete line folding is refused
		// (RFC 9112 5.2), as is a line ending in a bare LF.
		{"Content-Length list", "HTTP/1.1 200 OK\r\nContent-Length: 16, 16\r\n\r\n" + body, ""},
		{"obs-fold", "HTTP/1.1 200 OK\r\nContent-Length: 16\r\nX: a\r\n b\r\n\r\n" + body, "folding"},
		{"bare LF", "HTTP/1.1 200 OK\r\nX: a\nContent-Length: 16\r\n\r\n" + body, "LF"},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 16\r\n\r\n" + body, "closes the connection"},
		// RFC 9110 15.2: a client must parse 1xx responses it did not
		// expect (a proxy forwards a server's 103 Early Hints, say).
		{"100 Continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + body, ""},
		{"two interim responses", "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\nContent-Length: 5\r\n\r\nHTTP/1.1 100\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + body, ""},
		{"interim then 500", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Oops\r\nContent-Length: 16\r\n\r\n" + body, "status"},
		{"101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n", "status"},
		{"endless interim responses", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxHTTPHeader/20), "head too large"},
		{"endless head", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("y", maxHTTPHeader), "head too large"},
	}
	f := newHTTPFraming("h", payload)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fl, err := f.replyLen([]byte(tc.resp))
			if tc.err == "" {
				if err != nil || fl != len(tc.resp) {
					t.Fatalf("framed %d of %d bytes: %v", fl, len(tc.resp), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("replyLen = %d, %v; want an error saying %q", fl, err, tc.err)
			}
		})
	}
}

// TestLoadConfigProtocol: the protocol defaults to RPC, an unknown one is
// refused, and the Host defaults to the address and must fit in a field.
func TestLoadConfigProtocol(t *testing.T) {
	c, err := LoadConfig{Addr: "127.0.0.1:1"}.withDefaults()
	if err != nil || c.Protocol != ProtocolRPC || c.Host != "127.0.0.1:1" {
		t.Fatalf("defaults: protocol %q host %q, %v", c.Protocol, c.Host, err)
	}
	if _, ok := newLoadFraming(c).(rpcFraming); !ok {
		t.Fatalf("default framing %T", newLoadFraming(c))
	}
	c, err = LoadConfig{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "svc.local"}.withDefaults()
	if err != nil || c.Host != "svc.local" {
		t.Fatalf("http: host %q, %v", c.Host, err)
	}
	if f, ok := newLoadFraming(c).(*httpFraming); !ok || !bytes.Contains(f.head, []byte("\r\nHost: svc.local\r\n")) {
		t.Fatalf("http framing %#v", newLoadFraming(c))
	}
	if _, err := (LoadConfig{Addr: "[::1]:80", Protocol: ProtocolHTTP}).withDefaults(); err != nil {
		t.Fatalf("an IPv6 address as the host: %v", err)
	}
	for _, bad := range []LoadConfig{
		{Addr: "127.0.0.1:1", Protocol: "HTTP/2"},
		{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "a\r\nX-Injected: 1"},
		{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "a b"},
		// What internal/h1, and so the proxy, refuses as a Host.
		{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "user@h"},
		{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "h/p"},
		{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "h:port"},
		{Addr: "127.0.0.1:1", Protocol: ProtocolHTTP, Host: "[::1"},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestHTTPFramingSplitsAndPipelines: a response (with or without interim
// ones) cut at any byte is incomplete or framed at its full length, never
// an error or another length, and several in one read frame one after
// another.
func TestHTTPFramingSplitsAndPipelines(t *testing.T) {
	const payload = 16
	f := newHTTPFraming("h", payload)
	replies := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + string(appendPayload(nil, 3, 0, payload)),
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200\r\ncontent-length: 16\r\n\r\n" + string(appendPayload(nil, 3, 1, payload)),
		"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length:16\r\n\r\n" + string(appendPayload(nil, 3, 2, payload)),
	}
	for i, r := range replies {
		for n := range len(r) {
			if fl, err := f.replyLen([]byte(r[:n])); fl != 0 && fl != len(r) || err != nil {
				t.Fatalf("reply %d, first %d bytes: %d, %v", i, n, fl, err)
			}
		}
	}
	all := []byte(strings.Join(replies, ""))
	off := 0
	for i, r := range replies {
		fl, err := f.replyLen(all[off:])
		if err != nil || fl != len(r) {
			t.Fatalf("pipelined reply %d: framed %d, want %d: %v", i, fl, len(r), err)
		}
		if _, err := f.verify(all[off:off+fl], 3, uint64(i), nil); err != nil {
			t.Fatalf("pipelined reply %d: %v", i, err)
		}
		off += fl
	}
	if fl, err := f.replyLen(all[off:]); fl != 0 || err != nil {
		t.Fatalf("after the last: %d, %v", fl, err)
	}
}

func FuzzHTTPReplyLen(f *testing.F) {
	ok := newHTTPFraming("h", DefaultPayload)
	var e Echo
	_, resp, _ := e.Process(ok.appendRequest(nil, 1, 2), nil)
	f.Add(resp)
	f.Add([]byte("HTTP/1.1 200\r\ncontent-length: 128\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 404 Not Found\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ok.replyLen(b)
		if err != nil && n != 0 || n < 0 {
			t.Fatalf("replyLen = %d, %v", n, err)
		}
		if n > 0 && n < DefaultPayload+len("HTTP/1.1 200\r\n\r\n") {
			t.Fatalf("framed a %d-byte response with a %d-byte body", n, DefaultPayload)
		}
		if n > 0 && n <= len(b) {
			ok.verify(b[:n], 1, 2, nil) // must not panic
		}
	})
}
