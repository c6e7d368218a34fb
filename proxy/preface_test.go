package proxy

import (
	"strings"
	"testing"
)

// TestSentPrefix: what prefaceFailed logs of a client's bytes: the bytes
// kept while they matched the preface, then the read that differed, cut
// at prefaceLogBytes (with "..."), escaped.
func TestSentPrefix(t *testing.T) {
	for _, x := range []struct {
		in, b, want string
	}{
		{"", "GET / HTTP/1.1\r\n", `"GET / HTTP/1.1\r\n"`},
		{"PRI * HTTP/2.0\r\n", "\r\nXY", `"PRI * HTTP/2.0\r\n\r\nXY"`},
		{"PRI", " * HTTP/1.1\r\n\x00\xff", `"PRI * HTTP/1.1\r\n\x00\xff"`},
		{"", strings.Repeat("a", prefaceLogBytes), `"` + strings.Repeat("a", prefaceLogBytes) + `"`},
		{"", strings.Repeat("a", prefaceLogBytes+1), `"` + strings.Repeat("a", prefaceLogBytes) + `"...`},
		{strings.Repeat("P", prefaceLogBytes+2), "b", `"` + strings.Repeat("P", prefaceLogBytes) + `"...`},
		{strings.Repeat("P", 30), "bcd", `"` + strings.Repeat("P", 30) + `bc"...`},
	} {
		if got := sentPrefix([]byte(x.in), []byte(x.b)); got != x.want {
			t.Errorf("sentPrefix(%q, %q) = %s, want %s", x.in, x.b, got, x.want)
		}
	}
}
