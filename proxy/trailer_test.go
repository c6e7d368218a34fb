package proxy

import "testing"

// TestKeepTrailerLines: a trailer section loses the lines of the
// forwarding fields in any spelling and of the fields no trailer may
// carry, the others kept in order, in place and without an allocation.
func TestKeepTrailerLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"X-Sum: a\r\n", "X-Sum: a\r\n"},
		{"X-Forwarded-For: 1\r\n", ""},
		{"X-Sum: a\r\nx_forwarded_for: 1\r\nX_Note: b:c\r\nX.Real.IP: 1\r\nAuthorization: x\r\nIf_None_Match: *\r\ngrpc-status: 0\r\n",
			"X-Sum: a\r\nX_Note: b:c\r\ngrpc-status: 0\r\n"},
		{"Forwarded: for=1\r\nVia: 1.1 x\r\nCookie: s=1\r\n", ""},
		{"X-Note: X-Forwarded-For: 1\r\n", "X-Note: X-Forwarded-For: 1\r\n"},
	} {
		if got := string(keepTrailerLines([]byte(tc.in), trailerRules{})); got != tc.want {
			t.Errorf("keepTrailerLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	b := []byte("X-Sum: a\r\nX_Forwarded_For: 1\r\nX-Note: b\r\n")
	if n := testing.AllocsPerRun(100, func() { keepTrailerLines(b, trailerRules{}) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
