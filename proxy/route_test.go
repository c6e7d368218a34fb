package proxy

import "testing"

// TestRouteFor: the first route whose host (exact and case-insensitive
// without the port, or a "*." suffix; empty for any) and path prefix match
// takes a request; an absolute-form target's authority is its host.
func TestRouteFor(t *testing.T) {
	app, api, v6, anyHost := &pool{name: "app"}, &pool{name: "api"}, &pool{name: "v6"}, &pool{name: "any"}
	pools := map[string]*pool{"app": app, "api": api, "v6": v6, "any": anyHost}
	l := &listener{pool: app, routes: compileRoutes([]RouteConfig{
		{Host: "API.example.com", PathPrefix: "/v1/", Pool: "api"},
		{Host: "*.example.org", PathPrefix: "/", Pool: "api"},
		{Host: "[::1]", PathPrefix: "/", Pool: "v6"},
		{PathPrefix: "/any/", Pool: "any"},
	}, pools)}
	for _, tc := range []struct {
		target, host string
		want         *pool
	}{
		{"/v1/x", "api.example.com", api},
		{"/v1/x", "api.EXAMPLE.com:443", api},
		{"/v2/x", "api.example.com", app},
		{"/v1", "api.example.com", app},
		{"/", "a.example.org", api},
		{"/", "a.b.example.org:8080", api},
		{"/", "example.org", app},
		{"/", "xexample.org", app},
		{"/", "[::1]:8080", v6},
		{"/", "[::1]", v6},
		{"/any/thing", "", anyHost},
		{"/any/thing", "whatever", anyHost},
		{"http://a.example.org/x", "api.example.com", api},
		{"http://api.example.com/v1/", "other", api},
		{"http://api.example.com", "other", app},
		{"*", "a.example.org", api},
		{"/x", "", app},
		// A fully qualified name's final dot names the same host (a
		// server that drops it would serve the route's host from another
		// pool).
		{"/v1/x", "api.example.com.", api},
		{"/v1/x", "api.example.com.:80", api},
		{"/", "a.example.org.", api},
		{"http://api.example.com./v1/", "api.example.com.", api},
		{"/", ".", app},
		// An absolute-form target whose authority ends at a query, not
		// a path: the authority is its host all the same (it routed by
		// "a.example.org?q", to the listener's pool).
		{"http://a.example.org?q", "a.example.org", api},
		{"http://a.example.org:80?q=/x", "a.example.org", api},
		{"http://api.example.com?/v1/", "api.example.com", app},
		{"http://any.test?/any/x", "any.test", app},
	} {
		if got := l.routeFor([]byte(tc.target), []byte(tc.host)); got != tc.want {
			t.Errorf("%s Host %q: pool %s, want %s", tc.target, tc.host, got.name, tc.want.name)
		}
	}
}
