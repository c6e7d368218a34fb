package proxy

import "testing"

// TestDotSegmentsPathParams: a "." or ".." segment followed by a path
// parameter (";..."), spelled out or percent-encoded, is a dot-segment
// to a server that drops a segment's parameters before it resolves
// them (Tomcat, Jetty, Spring read "/api/..;/admin" as "/admin"), and
// is found; a ';' in any other segment is not.
func TestDotSegmentsPathParams(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   bool
	}{
		{"/api/..;/admin", true},
		{"/api/.;/admin", true},
		{"/api/..;jsessionid=x/admin", true},
		{"/api/%2e%2e;/admin", true},
		{"/api/..%3B/admin", true},
		{"/api/..;", true},
		{"http://a.example.org/api/..;/admin", true},
		{"/api/x;v=1/y", false},
		{"/api/...;/x", false},
		{"/api/;/x", false},
		{"/api/x..;/y", false},
		{"/api/x?q=/..;/", false},
	} {
		if got := dotSegments([]byte(tc.target)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.target, got, tc.want)
		}
	}
}
