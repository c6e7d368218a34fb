package proxy

import "testing"

// TestForwardingAlias: a name that is a forwarding field with '_' or
// any other byte not a letter or digit read as '-', in any case, is one
// (the field's own name too: callers look for another separator first,
// respelled); others and lengths that differ are not; none allocates.
func TestForwardingAlias(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"X_Forwarded_For", true},
		{"x_forwarded-proto", true},
		{"X-FORWARDED_HOST", true},
		{"x_real_ip", true},
		{"X-Real-IP", true},
		{"Forwarded", true},
		// The X-Forwarded-* family is (forwardingPrefix).
		{"X_Forwarded_Fo", true},
		{"X_Forwarded_Forr", true},
		{"X_Forwarded_Port", true},
		{"X_Forwarded", false},
		{"X_Forwarded_", true},
		{"Front_End_Https", true},
		{"X_Forwardedx", false},
		{"X__Forwarded_For", false},
		{"X_Custom", false},
		{"", false},
		// Any other separator: lighttpd's CGI, FastCGI and SCGI make every
		// byte not a letter or digit '_', PHP makes '.' '_' in $_SERVER.
		{"X.Forwarded.For", true},
		{"x~real!ip", true},
		{"X-Forwarded.Proto", true},
		{"X*Forwarded+Host", true},
		{"Forwarded.", false},
	} {
		if got := forwardingAlias([]byte(tc.name)); got != tc.want {
			t.Errorf("forwardingAlias(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !equalDash([]byte("x-user"), []byte("X_USER")) || !equalDash([]byte("x-user"), []byte("x.user")) || equalDash([]byte("x-user"), []byte("xuuser")) {
		t.Error("equalDash: '_' or '.' is not '-', or a letter is")
	}
	name := []byte("X_Forwarded_Host")
	if n := testing.AllocsPerRun(100, func() { forwardingAlias(name) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
