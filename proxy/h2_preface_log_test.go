package proxy

import (
	"strings"
	"testing"
)

// TestSentSummaryWithoutContent: what prefaceFailed logs of a client's
// first bytes (the bytes kept while they matched the preface, then the
// read that differed) is their count, and for an HTTP/1.x request line
// its version and method, never its target or what follows (a request's
// Authorization or Cookie field), nor a method longer than
// maxLoggedMethod bytes.
func TestSentSummaryWithoutContent(t *testing.T) {
	long := strings.Repeat("M", maxLoggedMethod+1)
	for _, x := range []struct {
		in, b, want string
	}{
		{"", "GET /?token=s3cret HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n", "61 bytes, an HTTP/1.1 request line, method GET"},
		{"", "POST /a b HTTP/1.0\nCookie: s3cret\n\n", "35 bytes, an HTTP/1.0 request line, method POST"},
		{"P", "OST / HTTP/1.1\r\n", "17 bytes, an HTTP/1.1 request line, method POST"},
		{"PRI * HTTP/2.0\r\n", "\r\nXY", "20 bytes"},
		{"PRI", " * HTTP/1.1\r\n\x00\xff", "18 bytes, an HTTP/1.1 request line, method PRI"},
		{"", "GET /s3cret HTTP/1.1", "20 bytes"},       // (the line not whole)
		{"", "GET /s3cret HTTP/2.0\r\n", "22 bytes"},   // (not HTTP/1.x)
		{"", "GET /s3cret HTTP/1.10\r\n", "23 bytes"},  // (nor this)
		{"", "G(T /s3cret HTTP/1.1\r\n", "22 bytes"},   // (not a token)
		{"", "s3cret\r\n", "8 bytes"},                  // (no spaces)
		{"", "GET s3cret\r\n", "12 bytes"},             // (one)
		{"", "\x16\x03\x01\x00\x05s3cret", "11 bytes"}, // (TLS within TLS)
		{"", long + " / HTTP/1.1\r\n", "30 bytes, an HTTP/1.1 request line (its method longer than 16 bytes)"},
	} {
		got := sentSummary([]byte(x.in), []byte(x.b))
		if got != x.want || strings.Contains(got, "s3cret") || strings.Contains(got, long) {
			t.Errorf("sentSummary(%q, %q) = %q, want %q", x.in, x.b, got, x.want)
		}
	}
}
