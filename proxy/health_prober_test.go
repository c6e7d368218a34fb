package proxy

import (
	"testing"
	"time"
)

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

// TestHealthCheckSchedule: a pool's first checks are spread evenly over
// the interval, the first server's at once; each wait after is the
// interval give or take 5 %, at random (not one fixed value), the
// interval on average.
func TestHealthCheckSchedule(t *testing.T) {
	const iv = 2 * time.Second
	for i, want := range []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		if got := firstCheck(iv, i, 4); got != want {
			t.Errorf("server %d of 4: first check after %v, want %v", i, got, want)
		}
	}
	if got := firstCheck(iv, 0, 1); got != 0 {
		t.Errorf("a pool of one: first check after %v, want at once", got)
	}
	for _, iv := range []time.Duration{10 * time.Millisecond, iv} {
		const draws = 1000
		lo, hi, sum := iv, iv, time.Duration(0)
		for range draws {
			d := nextCheck(iv)
			lo, hi, sum = min(lo, d), max(hi, d), sum+d
		}
		if lo < iv*95/100 || hi > iv*105/100 {
			t.Errorf("interval %v: waits from %v to %v, want within 5%%", iv, lo, hi)
		}
		// (Uniform over ±5 %: below -2.5 % or above +2.5 % with
		// probability 1/4 each draw; the mean's deviation is 0.18 % of
		// the interval: 1 % is 5.5 of them.)
		if lo > iv*975/1000 || hi < iv*1025/1000 {
			t.Errorf("interval %v: waits from %v to %v, want spread over ±5%%", iv, lo, hi)
		}
		if mean := sum / draws; mean < iv*99/100 || mean > iv*101/100 {
			t.Errorf("interval %v: mean wait %v, want the interval within 1%%", iv, mean)
		}
	}
}
