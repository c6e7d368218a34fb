package proxy

import (
	"slices"
	"strings"
	"testing"
)

// TestRouteForPercentEncoded: a path_prefix matches a target that spells
// one of its unreserved characters percent-encoded (RFC 3986 6.2.2.2:
// "/%6Cogin" is "/login", as a server that decodes the path reads it),
// or a '/' of it as several ("//login", as nginx and Apache read it),
// and another percent-encoding with its hex digits in either case
// (6.2.2.1); not a percent-encoded reserved character for the character
// itself ("%2F" is not "/"), nor another case of a letter. Else a route's
// rate_limit (doc.go's "/login" example), request_headers or pool is
// passed by with "/%6Cogin", and the listener's pool serves /login.
func TestRouteForPercentEncoded(t *testing.T) {
	app, login, grp := &pool{name: "app"}, &pool{name: "login"}, &pool{name: "grp"}
	pools := map[string]*pool{"app": app, "login": login, "grp": grp}
	l := &listener{pool: app, routes: compileRoutes([]RouteConfig{
		{PathPrefix: "/login", Pool: "login"},
		{PathPrefix: "/group%2Fproj~/", Pool: "grp"},
	}, pools)}
	for _, tc := range []struct {
		target string
		want   *pool
	}{
		{"/login", login},
		{"/%6Cogin", login},
		{"/%6cogin", login},
		{"/l%6F%67i%6E?x", login},
		{"http://a.example/%6Cogin", login},
		{"/group%2fproj%7E/x", grp},
		{"/group%2Fproj%7e/x", grp},
		{"/%67roup%2Fproj~/x", grp},
		{"//login", login},
		{"///l%6Fgin/x", login},
		{"/group%2Fproj~//x", grp},
		{"//group%2Fproj~/x", grp},
		{"/%4Cogin", app},
		{"/LOGIN", app},
		{"/%2Flogin", app},
		{"/group/proj~/x", app},
		{"/logi", app},
		{"/log%69", app},
	} {
		if got := l.routeFor([]byte(tc.target), []byte("a.example")); got != tc.want {
			t.Errorf("%s: pool %s, want %s", tc.target, got.name, tc.want.name)
		}
	}
}

// TestAppendTargetPercentEncoded: rewrite_prefix replaces what of the
// target path_prefix matched, percent-encoded unreserved characters
// and all, and a run of '/' its last '/' begins
// (TestRouteForPercentEncoded); the rest goes as it came.
func TestAppendTargetPercentEncoded(t *testing.T) {
	for _, tc := range []struct {
		prefix, rewrite, target, want string
	}{
		{"/api/", "/", "/%61pi/x?q", "/x?q"},
		{"/api/", "/", "/ap%69/%78", "/%78"},
		{"/api", "/v2", "/%61%70%69s", "/v2s"},
		{"/api/", "/v2/", "http://h.example/%61pi/x", "http://h.example/v2/x"},
		{"/api/", "/", "/%2Fapi/x", "/%2Fapi/x"},
		{"/api/", "/", "//api//x", "/x"},
		{"/api/", "/v2/", "/api///%2Fx", "/v2/%2Fx"},
		{"/api", "/v2", "/api//x", "/v2//x"},
	} {
		rw := compileRewrites(&RouteConfig{PathPrefix: tc.prefix, RewritePrefix: tc.rewrite})
		if got := string(rw.appendTarget(nil, []byte(tc.target), false)); got != tc.want {
			t.Errorf("%s -> %s: %s gives %s, want %s", tc.prefix, tc.rewrite, tc.target, got, tc.want)
		}
	}
}

// FuzzHasPathPrefix: hasPathPrefix agrees with the plain reading of RFC
// 3986 6.2.2 it documents: both paths decoded into units (a percent-encoded
// unreserved character is the character, another percent-encoding its
// octet marked encoded, any other byte itself), a run of '/' read as one,
// and the path's units begin with the prefix's. The bytes it says the
// prefix took decode to the prefix, and take the whole run of '/' a
// prefix ending in '/' ends with. A route's rate_limit and rules hang on
// this comparison, on bytes a client chose.
func FuzzHasPathPrefix(f *testing.F) {
	for _, s := range [][2]string{
		{"/login", "/login"}, {"/%6Cogin", "/login"}, {"//login", "/login"}, {"/%2Flogin", "/login"},
		{"/group%2fproj%7E/x", "/group%2Fproj~/"}, {"/a//b", "/a/"}, {"/a%2", "/a%"}, {"/%%41", "/%A"},
		{"/api", "/api/"}, {"", "/"}, {"/x", ""},
	} {
		f.Add(s[0], s[1])
	}
	type unit struct {
		c   byte
		enc bool
	}
	units := func(p string) []unit {
		var us []unit
		for i := 0; i < len(p); {
			c, enc, n := pathUnit([]byte(p), i)
			i += n
			if c == '/' && !enc && len(us) > 0 && us[len(us)-1] == (unit{'/', false}) {
				continue
			}
			us = append(us, unit{c, enc})
		}
		return us
	}
	f.Fuzz(func(t *testing.T, path, prefix string) {
		n, ok := hasPathPrefix([]byte(path), []byte(prefix))
		pu, xu := units(path), units(prefix)
		want := len(pu) >= len(xu) && slices.Equal(pu[:len(xu)], xu)
		if ok != want {
			t.Fatalf("hasPathPrefix(%q, %q) = %v, want %v", path, prefix, ok, want)
		}
		if !ok {
			return
		}
		if n < 0 || n > len(path) {
			t.Fatalf("hasPathPrefix(%q, %q) took %d bytes", path, prefix, n)
		}
		if got := units(path[:n]); !slices.Equal(got, xu) {
			t.Fatalf("hasPathPrefix(%q, %q) took %q, which is not the prefix", path, prefix, path[:n])
		}
		if strings.HasSuffix(prefix, "/") && n < len(path) && path[n] == '/' {
			t.Fatalf("hasPathPrefix(%q, %q) took %q, short of the run of '/'", path, prefix, path[:n])
		}
	})
}
