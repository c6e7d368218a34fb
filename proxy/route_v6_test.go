package proxy

import "testing"

// TestRouteForIPv6Spellings: a route whose host is an IPv6 address takes
// a request for that address however its Host writes it (RFC 4291 2.2:
// leading zeros, "::" anywhere, an embedded IPv4 part, any case), as the
// server and any resolver read it; it took "[::1]" alone, and sent
// "[0::1]" to the listener's pool.
func TestRouteForIPv6Spellings(t *testing.T) {
	app, v6 := &pool{name: "app"}, &pool{name: "v6"}
	pools := map[string]*pool{"app": app, "v6": v6}
	l := &listener{pool: app, routes: compileRoutes([]RouteConfig{
		{Host: "[::1]", Pool: "v6"},
		{Host: "[2001:DB8::A]", Pool: "v6"},
	}, pools)}
	for _, tc := range []struct {
		host string
		want *pool
	}{
		{"[::1]", v6},
		{"[::1]:8080", v6},
		{"[0::1]", v6},
		{"[0:0:0:0:0:0:0:1]:80", v6},
		{"[::0.0.0.1]", v6},
		{"[0000::0001]", v6},
		{"[2001:db8::a]", v6},
		{"[2001:0db8:0:0::000a]", v6},
		{"[::2]", app},
		{"[::ffff:0.0.0.1]", app},
		{"[2001:db8::a:0]", app},
		{"localhost", app},
		{"[::1", app},
	} {
		if got := l.routeFor([]byte("/"), []byte(tc.host)); got != tc.want {
			t.Errorf("Host %q: pool %s, want %s", tc.host, got.name, tc.want.name)
		}
	}
}

// TestRouteForIPv4Spellings: a route whose host is an IPv4 address takes
// a request for it written as an IPv4-mapped IPv6 literal too (RFC 4291
// 2.5.5.2: "[::ffff:127.0.0.1]" names 127.0.0.1, in any of the IPv6
// spellings), with a port or a trailing dot, as a route's rate_limit and
// rules would otherwise be passed by to the listener's pool; it took
// "127.0.0.1" alone. Other spellings ("127.1", "127.0.0.01") are names
// to RFC 3986, which Validate refuses as a route's host
// (TestConfigErrors), and go to the listener's pool.
func TestRouteForIPv4Spellings(t *testing.T) {
	app, v4 := &pool{name: "app"}, &pool{name: "v4"}
	pools := map[string]*pool{"app": app, "v4": v4}
	l := &listener{pool: app, routes: compileRoutes([]RouteConfig{
		{Host: "127.0.0.1", Pool: "v4"},
		{Host: "192.0.2.10", PathPrefix: "/login", Pool: "v4"},
	}, pools)}
	for _, tc := range []struct {
		host, path string
		want       *pool
	}{
		{"127.0.0.1", "/", v4},
		{"127.0.0.1:8080", "/", v4},
		{"127.0.0.1.", "/", v4},
		{"[::ffff:127.0.0.1]", "/", v4},
		{"[::FFFF:127.0.0.1]:80", "/", v4},
		{"[::ffff:7f00:1]", "/", v4},
		{"[0:0:0:0:0:ffff:7f00:0001]", "/", v4},
		{"[::ffff:c000:20a]", "/login", v4},
		{"[::ffff:c000:20a]", "/", app},
		{"[::127.0.0.1]", "/", app},     // IPv4-compatible (deprecated): another address
		{"[64:ff9b::7f00:1]", "/", app}, // NAT64's: another address
		{"[::ffff:127.0.0.2]", "/", app},
		{"127.0.0.2", "/", app},
		{"127.1", "/", app},
		{"127.0.0.01", "/", app},
		{"0x7f.0.0.1", "/", app},
	} {
		if got := l.routeFor([]byte(tc.path), []byte(tc.host)); got != tc.want {
			t.Errorf("Host %q, path %s: pool %s, want %s", tc.host, tc.path, got.name, tc.want.name)
		}
	}
}
