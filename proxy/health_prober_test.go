package proxy

import "testing"

// TestNewProberRequest: a type http check builds the request of its
// pool's protocol only: HTTP/1.1 bytes for an http1 pool, an HTTP/2
// request for an h2c pool (the HTTP/1.1 bytes were built there too,
// unused); a type tcp check neither.
func TestNewProberRequest(t *testing.T) {
	h := &HealthConfig{Type: HealthHTTP, Path: "/healthz"}
	if pr := newProber(h, "127.0.0.1:1", "app:80", false); pr.req == nil || pr.h2 != nil {
		t.Errorf("http1 pool: HTTP/1.1 request %q, HTTP/2 request %v; want the first only", pr.req, pr.h2)
	}
	if pr := newProber(h, "127.0.0.1:1", "app:80", true); pr.req != nil || pr.h2 == nil || string(pr.h2.Authority) != "app:80" || string(pr.h2.Path) != "/healthz" {
		t.Errorf("h2c pool: HTTP/1.1 request %q, HTTP/2 request %+v; want the second only, for app:80 /healthz", pr.req, pr.h2)
	}
	if pr := newProber(&HealthConfig{Type: HealthTCP}, "127.0.0.1:1", "app:80", true); pr.req != nil || pr.h2 != nil {
		t.Errorf("tcp check: requests %q, %v; want none", pr.req, pr.h2)
	}
}
