package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/h1"
)

// refRoute is the route a plain reading of the config's routes gives a
// request that internal/h1 accepted (its target valid for method, its
// Host empty or host [":" port]): the host is an absolute-form target's
// authority (up to its first '/' or '?') or else Host, without its port
// (after an IPv6 literal's ']', else from the first ':') and one trailing
// dot, compared without case with a route's host, a "*." route's suffix
// (and at least one byte before it), a bracketed IPv6 route's address
// however either is written, or an IPv4 route's address as written or as
// an IPv4-mapped IPv6 literal however that is written; the path, OPTIONS *'s as "/", and an
// absolute-form target's empty one as "/", by hasPathPrefix
// (FuzzHasPathPrefix checks it). len(rcs) for none.
func refRoute(rcs []RouteConfig, target, hostHdr string) int {
	host, path := hostHdr, target
	if target != "" && target[0] != '/' && target[0] != '*' {
		_, rest, _ := strings.Cut(target, "://")
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		host, path = rest[:end], rest[end:]
		if path == "" || path[0] == '?' {
			path = "/"
		}
	}
	if path == "*" {
		path = "/"
	}
	if strings.HasPrefix(host, "[") {
		host = host[:strings.IndexByte(host, ']')+1]
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	if len(host) > 1 && strings.HasSuffix(host, ".") {
		host = host[:len(host)-1]
	}
	host = strings.ToLower(host)
	for i, rc := range rcs {
		rh := strings.ToLower(rc.Host)
		switch {
		case rh == "":
		case strings.HasPrefix(rh, "*."):
			if len(host) <= len(rh)-1 || !strings.HasSuffix(host, rh[1:]) {
				continue
			}
		case strings.HasPrefix(rh, "["):
			ra, _ := netip.ParseAddr(rh[1 : len(rh)-1])
			if !strings.HasPrefix(host, "[") || !strings.HasSuffix(host, "]") {
				continue
			}
			if a, err := netip.ParseAddr(host[1 : len(host)-1]); err != nil || a != ra {
				continue
			}
		case isIPv4(rh):
			if host == rh {
				break
			}
			if !strings.HasPrefix(host, "[") || !strings.HasSuffix(host, "]") {
				continue
			}
			if a, err := netip.ParseAddr(host[1 : len(host)-1]); err != nil || !a.Is4In6() || a.Unmap().String() != rh {
				continue
			}
		case host != rh:
			continue
		}
		if _, ok := hasPathPrefix([]byte(path), []byte(rc.PathPrefix)); ok {
			return i
		}
	}
	return len(rcs)
}

// isIPv4 reports whether s is an IPv4 address in dotted decimal.
func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

// FuzzRouteIndex: the route a request goes by, for a target and Host
// internal/h1 accepts, is refRoute's over the config's routes (one of
// them the fuzzer's, a host Validate takes); and a Host routes as the
// same host in another case, with a port, with one trailing dot or both,
// and as an absolute-form target's authority. A route's rate_limit and
// rules hang on this choice, made on bytes a client chose.
func FuzzRouteIndex(f *testing.F) {
	for _, s := range [][5]string{
		{"login.example.com", "/login", "GET", "/login", "LOGIN.example.com.:8080"},
		{"*.example.org", "/", "GET", "http://a.b.EXAMPLE.org./x", "other"},
		{"[::1]", "/a", "GET", "/a/b", "[0::1]:80"},
		{"", "/api/", "OPTIONS", "*", "x"},
		{"a.b", "/", "GET", "/", "a..b"},
		{"login.example", "/", "GET", "/", "login.example.."},
		{"x", "/", "GET", "http://x?q", ""},
		{"*.x", "/", "GET", "/", ".x"},
		{"127.0.0.1", "/", "GET", "/", "[::ffff:7f00:1]:80"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, rhost, rprefix, method, target, hostHdr string) {
		// Short inputs, the cheap checks first: the fuzzer minimizes
		// every input that finds new code, and minimizing a long one
		// took the rest of a 40 s run.
		if len(rhost) > 64 || len(rprefix) > 64 || len(target) > 128 || len(hostHdr) > 128 ||
			!strings.HasPrefix(rprefix, "/") || method == "CONNECT" || !h1.ValidTarget([]byte(method), []byte(target)) ||
			hostHdr != "" && !h1.ValidAuthority([]byte(hostHdr)) || validHost(rhost) != nil {
			return
		}
		rcs := []RouteConfig{
			{Host: rhost, PathPrefix: rprefix},
			{Host: "login.example.com", PathPrefix: "/login"},
			{Host: "*.example.org", PathPrefix: "/"},
			{Host: "[::1]", PathPrefix: "/"},
			{PathPrefix: "/api/"},
			{Host: "Login.Example.COM", PathPrefix: "/"},
		}
		l := &listener{routes: compileRoutes(rcs, nil)}
		got := l.routeIndex([]byte(target), []byte(hostHdr))
		if want := refRoute(rcs, target, hostHdr); got != want {
			t.Fatalf("%s %s Host %q: route %d, want %d (route 0: host %q, path_prefix %q)", method, target, hostHdr, got, want, rhost, rprefix)
		}
		if target[0] != '/' {
			return
		}
		// The same host spelled otherwise: its bare name first.
		h := hostHdr
		if strings.HasPrefix(h, "[") {
			h = h[:strings.IndexByte(h, ']')+1]
		} else if i := strings.IndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if len(h) > 1 && strings.HasSuffix(h, ".") {
			h = h[:len(h)-1]
		}
		if strings.HasSuffix(h, ".") {
			return // "a.." is no spelling of "a."
		}
		for _, v := range []struct{ target, host string }{
			{target, h}, {target, strings.ToUpper(h)}, {target, h + ":8080"}, {target, h + "."}, {target, h + ".:80"},
			{"http://" + h + target, "elsewhere"}, {"HTTP://" + h + ".:1" + target, ""},
		} {
			if !h1.ValidTarget([]byte(method), []byte(v.target)) || v.host != "" && !h1.ValidAuthority([]byte(v.host)) {
				continue
			}
			if g := l.routeIndex([]byte(v.target), []byte(v.host)); g != got {
				t.Fatalf("%s %s Host %q: route %d; %s Host %q, the same host: route %d", method, target, hostHdr, got, v.target, v.host, g)
			}
		}
	})
}

// TestRouteHostSpellings: a route's host matches a Host (or an
// absolute-form target's authority) that names it in another case, with
// a port, an empty one included, with one trailing dot (a fully
// qualified name) or both; internal/h1 accepts each. A Host with an
// empty label ("login.example.com..", "login..example.com") is accepted
// as well (RFC 3986's reg-name allows it) but names no route's host: a
// server such as nginx or Apache refuses it (400), so it goes to the
// listener's pool as any host no route names does.
func TestRouteHostSpellings(t *testing.T) {
	app, login := &pool{name: "app"}, &pool{name: "login"}
	l := &listener{pool: app, routes: compileRoutes([]RouteConfig{
		{Host: "login.example.com", PathPrefix: "/login", Pool: "login"},
	}, map[string]*pool{"app": app, "login": login})}
	for _, tc := range []struct {
		target, host string
		want         *pool
	}{
		{"/login", "login.example.com", login},
		{"/login", "LOGIN.Example.COM", login},
		{"/login", "login.example.com.", login},
		{"/login", "login.example.com:80", login},
		{"/login", "login.example.com:", login},
		{"/login", "Login.Example.Com.:8080", login},
		{"http://LOGIN.example.com.:80/login", "elsewhere", login},
		{"/login", "login.example.com..", app},
		{"/login", "login..example.com", app},
		{"/login", "login.example.co", app},
		{"/login", "xlogin.example.com", app},
		{"http://elsewhere/login", "login.example.com", app},
	} {
		if !h1.ValidAuthority([]byte(tc.host)) {
			t.Errorf("Host %q: refused by internal/h1", tc.host)
		}
		if got := l.routeFor([]byte(tc.target), []byte(tc.host)); got != tc.want {
			t.Errorf("%s Host %q: pool %s, want %s", tc.target, tc.host, got.name, tc.want.name)
		}
	}
}
