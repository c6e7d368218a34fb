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
