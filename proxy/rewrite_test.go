package proxy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestParseRewrites: the rules of a listener and its routes parse, and
// -check's YAML parses back to the same config; /debug/config's JSON has
// them, and leaves out the rules not given.
func TestParseRewrites(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners:
  - name: gw
    listen: "127.0.0.1:0"
    mode: http
    pool: app
    request_headers: {set: {X-Env: prod}, add: {X-Tag: a}, remove: [X-Debug]}
    response_headers: {set: {Cache-Control: no-store}, remove: [Server]}
    routes:
      - {path_prefix: /api/, pool: app, rewrite_prefix: /, host_rewrite: "backend.internal:8080",
         request_headers: {set: {X-Route: api, X-Empty: ""}, remove: [x-env]},
         response_headers: {add: {X-Served-By: "spindle gw"}}}
      - {path_prefix: /static/, pool: app}
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Listeners[0]
	r := l.Routes[0]
	if l.RequestHeaders.Set["X-Env"] != "prod" || l.ResponseHeaders.Remove[0] != "Server" || r.RewritePrefix != "/" ||
		r.HostRewrite != "backend.internal:8080" || r.RequestHeaders.Set["X-Empty"] != "" || r.ResponseHeaders.Add["X-Served-By"] != "spindle gw" {
		t.Errorf("parsed: %+v", l)
	}
	y := yamlRoundTrip(t, cfg)
	if strings.Count(y, "request_headers") != 2 {
		t.Errorf("-check's YAML has rules not given:\n%s", y)
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"request_headers":{"set":{"X-Env":"prod"},"add":{"X-Tag":"a"},"remove":["X-Debug"]}`,
		`"rewrite_prefix":"/","host_rewrite":"backend.internal:8080"`, `"response_headers":{"add":{"X-Served-By":"spindle gw"}}`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("/debug/config's JSON lacks %s:\n%s", want, j)
		}
	}
	if strings.Count(string(j), "request_headers") != 2 {
		t.Errorf("/debug/config's JSON has rules not given:\n%s", j)
	}
}

// yamlRoundTrip returns cfg's YAML (as -check prints it), failing t where
// it does not parse back to cfg.
func yamlRoundTrip(t *testing.T, cfg *Config) string {
	t.Helper()
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(y)
	if err != nil {
		t.Fatalf("-check's YAML: %v\n%s", err, y)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("-check's YAML parses to another config:\n%s", y)
	}
	return string(y)
}

// TestParseRewritesErrors: the rules are checked strictly, naming the
// field.
func TestParseRewritesErrors(t *testing.T) {
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	lst := func(extra string) string {
		return `listeners: [{name: gw, listen: ":1", mode: http, pool: app, ` + extra + `}]` + "\n" + pool
	}
	route := func(extra string) string { return lst(`routes: [{pool: app, ` + extra + `}]`) }
	for _, tc := range []struct{ name, yaml, want string }{
		{"mode tcp", `listeners: [{name: t, listen: ":1", pool: app, request_headers: {remove: [X]}}]` + "\n" + pool, "listeners[0] (t).request_headers: only in mode http"},
		{"mode tcp response", `listeners: [{name: t, listen: ":1", pool: app, response_headers: {set: {X: y}}}]` + "\n" + pool, "response_headers: only in mode http"},
		{"unknown op", lst(`request_headers: {append: {X: y}}`), "field append not found"},
		{"not a token", lst(`request_headers: {set: {"X Y": v}}`), `request_headers.set: "X Y" is not a field name (a token)`},
		{"empty name", lst(`request_headers: {remove: [""]}`), `request_headers.remove: "" is not a field name`},
		{"pseudo", lst(`request_headers: {set: {":path": /x}}`), `request_headers.set: ":path" is a pseudo-header`},
		{"pseudo authority", route(`request_headers: {remove: [":authority"]}`), `routes[0].request_headers.remove: ":authority" is a pseudo-header`},
		{"content-length", lst(`request_headers: {set: {Content-Length: "5"}}`), `request_headers.set: "Content-Length" may not be changed (framing)`},
		{"transfer-encoding", lst(`response_headers: {remove: [transfer-encoding]}`), `response_headers.remove: "transfer-encoding" may not be changed (framing)`},
		{"connection", lst(`request_headers: {add: {Connection: close}}`), `"Connection" may not be changed (hop-by-hop)`},
		{"keep-alive", route(`response_headers: {set: {Keep-Alive: "timeout=5"}}`), `routes[0].response_headers.set: "Keep-Alive" may not be changed (hop-by-hop)`},
		{"upgrade", lst(`request_headers: {remove: [Upgrade]}`), `"Upgrade" may not be changed (hop-by-hop)`},
		{"te", lst(`request_headers: {set: {TE: trailers}}`), `"TE" may not be changed (hop-by-hop)`},
		{"trailer", lst(`response_headers: {remove: [Trailer]}`), `"Trailer" may not be changed (hop-by-hop)`},
		{"proxy-connection", lst(`request_headers: {remove: [Proxy-Connection]}`), `"Proxy-Connection" may not be changed (hop-by-hop)`},
		{"host", route(`request_headers: {set: {Host: x}}`), `routes[0].request_headers.set: "Host" may not be changed (the request's authority: use a route's host_rewrite)`},
		{"host remove", lst(`request_headers: {remove: [host]}`), `"host" may not be changed`},
		{"xff", lst(`request_headers: {set: {X-Forwarded-For: 1.2.3.4}}`), `"X-Forwarded-For" may not be changed (written by the proxy (see trusted_proxies))`},
		{"xfp", lst(`request_headers: {remove: [x-forwarded-proto]}`), `"x-forwarded-proto" may not be changed`},
		{"via", lst(`response_headers: {remove: [Via]}`), `"Via" may not be changed (written by the proxy)`},
		// ('_' read as '-', as CGI, WSGI, Rack and PHP servers read names.)
		{"xff underscores", lst(`request_headers: {set: {X_Forwarded_For: 1.2.3.4}}`), `request_headers.set: "X_Forwarded_For" may not be changed (written by the proxy (see trusted_proxies))`},
		{"xfp underscore", route(`request_headers: {remove: [x-forwarded_proto]}`), `routes[0].request_headers.remove: "x-forwarded_proto" may not be changed`},
		{"content_length", lst(`request_headers: {add: {Content_Length: "5"}}`), `request_headers.add: "Content_Length" may not be changed (framing)`},
		{"transfer_encoding", route(`response_headers: {remove: [Transfer_Encoding]}`), `routes[0].response_headers.remove: "Transfer_Encoding" may not be changed (framing)`},
		{"keep_alive", lst(`response_headers: {set: {Keep_Alive: "timeout=5"}}`), `"Keep_Alive" may not be changed (hop-by-hop)`},
		{"remove and set dashed", route(`request_headers: {set: {X-A: "1"}, remove: [X_a]}`), `routes[0].request_headers.set: "X-A" is named in remove already (names are case-insensitive, '_' read as '-')`},
		{"http2_settings", lst(`request_headers: {remove: [HTTP2_Settings]}`), `"HTTP2_Settings" may not be changed (hop-by-hop)`},
		// (And any other separator, as lighttpd reads names, '.' as PHP.)
		{"xff dots", lst(`request_headers: {set: {X.Forwarded.For: 1.2.3.4}}`), `request_headers.set: "X.Forwarded.For" may not be changed (written by the proxy (see trusted_proxies))`},
		{"content~length", route(`request_headers: {remove: [Content~Length]}`), `routes[0].request_headers.remove: "Content~Length" may not be changed (framing)`},
		{"remove and set dotted", route(`request_headers: {set: {X-A: "1"}, remove: [X.a]}`), `routes[0].request_headers.set: "X-A" is named in remove already (names are case-insensitive, '_' read as '-')`},
		{"twice", lst(`request_headers: {set: {X-A: "1", x-a: "2"}}`), `request_headers.set: "x-a" is named in set already`},
		{"set and remove", lst(`request_headers: {set: {X-A: "1"}, remove: [X-A]}`), `request_headers.set: "X-A" is named in remove already`},
		{"set and add", route(`response_headers: {set: {X-A: "1"}, add: {X-a: "2"}}`), `routes[0].response_headers.add: "X-a" is named in set already`},
		{"value CR", lst(`request_headers: {set: {X-A: "a\rb"}}`), `request_headers.set: "X-A": value "a\rb" has a control character at 1`},
		{"value LF", lst(`request_headers: {add: {X-A: "a\nInjected: 1"}}`), `request_headers.add: "X-A": value "a\nInjected: 1" has a control character at 1`},
		{"value NUL", lst(`response_headers: {set: {X-A: "a\0"}}`), `has a control character at 1`},
		{"value DEL", lst(`response_headers: {set: {X-A: "a\x7f"}}`), `has a control character at 1`},
		{"value leading space", lst(`request_headers: {set: {X-A: " a"}}`), `value " a" has leading or trailing whitespace`},
		{"value trailing tab", lst(`request_headers: {set: {X-A: "a\t"}}`), `value "a\t" has leading or trailing whitespace`},
		// (The fields a set's and add's write, "Name: value\r\n" each, fit
		// in 16 KiB together, the largest head the proxy takes: the error
		// names the rule that passes it, without its value.)
		{"value too long", lst(`request_headers: {set: {X-Big: "` + strings.Repeat("a", 16378) + `"}}`), `request_headers.set: "X-Big": its field of 16387 bytes makes those set and add write 16387 bytes, past 16384 (the largest head the proxy reads)`},
		{"values too long together", route(`response_headers: {set: {X-A: "` + strings.Repeat("a", 9000) + `"}, add: {X-B: "` + strings.Repeat("b", 7400) + `"}}`), `routes[0].response_headers.add: "X-B": its field of 7407 bytes makes those set and add write 16414 bytes, past 16384`},
		{"value too long with a control character", lst(`response_headers: {add: {X-Big: "` + strings.Repeat(`a\r`, 1<<19) + `"}}`), `response_headers.add: "X-Big": its field of 1048585 bytes makes those set and add write 1048585 bytes, past 16384`},
		{"host_rewrite", route(`path_prefix: /, host_rewrite: "a b"`), `routes[0].host_rewrite: "a b" is not a host name or address with an optional port`},
		{"host_rewrite path", route(`host_rewrite: "a/b"`), `routes[0].host_rewrite: "a/b" is not a host name`},
		{"rewrite relative", route(`path_prefix: /a/, rewrite_prefix: b/`), `routes[0].rewrite_prefix: "b/" does not begin with /`},
		{"rewrite query", route(`path_prefix: /a/, rewrite_prefix: "/b?x"`), `routes[0].rewrite_prefix: "/b?x" has a space, control, non-ASCII byte, '?' or '#' at 2`},
		{"rewrite space", route(`path_prefix: /a/, rewrite_prefix: "/b c/"`), `has a space, control, non-ASCII byte, '?' or '#' at 2`},
		{"rewrite percent", route(`path_prefix: /a/, rewrite_prefix: "/b%2"`), `routes[0].rewrite_prefix: "/b%2" has a '%' not followed by two hex digits at 2`},
		{"rewrite dot", route(`path_prefix: /a/, rewrite_prefix: "/b/../c/"`), `routes[0].rewrite_prefix: "/b/../c/" has a dot-segment or "//"`},
		{"rewrite dot end", route(`path_prefix: /a/, rewrite_prefix: "/b/."`), `"/b/." has a dot-segment`},
		{"rewrite encoded dot", route(`path_prefix: /a/, rewrite_prefix: "/%2e%2E"`), `"/%2e%2E" has a dot-segment`},
		{"rewrite slashes", route(`path_prefix: /a/, rewrite_prefix: "/b//c"`), `"/b//c" has a dot-segment or "//"`},
		{"rewrite slash to bare", route(`path_prefix: /api, rewrite_prefix: /`), `routes[0].rewrite_prefix: "/" ends with a separator, path_prefix "/api" does not end with /`},
		{"rewrite backslash", route(`path_prefix: /api, rewrite_prefix: '/v\'`), `ends with a separator`},
		{"rewrite %2F", route(`path_prefix: /api, rewrite_prefix: "/v%2f"`), `ends with a separator`},
		{"rewrite %5C", route(`path_prefix: /api, rewrite_prefix: "/v%5C"`), `ends with a separator`},
		{"rewrite slash backslash", route(`path_prefix: /a/, rewrite_prefix: '/b/\c/'`), `routes[0].rewrite_prefix: "/b/\\c/" has a dot-segment or "//"`},
		{"rewrite backslashes", route(`path_prefix: /a/, rewrite_prefix: '/b\\c'`), `has a dot-segment or "//"`},
		{"rewrite %2F slash", route(`path_prefix: /a/, rewrite_prefix: "/b%2f/c"`), `"/b%2f/c" has a dot-segment or "//"`},
		{"rewrite slash %5C", route(`path_prefix: /a/, rewrite_prefix: "/b/%5Cc/"`), `"/b/%5Cc/" has a dot-segment or "//"`},
		{"rewrite query prefix", route(`path_prefix: "/api?", rewrite_prefix: /v2`), `routes[0].rewrite_prefix: path_prefix "/api?" has a '?' or '#' at 4 (the rest of a target it matches is a query the dot-segment check does not read)`},
		{"rewrite query prefix slash", route(`path_prefix: "/api?/", rewrite_prefix: /v2/`), `path_prefix "/api?/" has a '?' or '#' at 4`},
		{"rewrite fragment prefix", route(`path_prefix: "/a#", rewrite_prefix: /v2`), `path_prefix "/a#" has a '?' or '#' at 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// And what passes: an empty value, "/" for "/api/", "/v2" for "/api",
	// three dots, fields of 16 KiB in all (one, two) in a set and add.
	for _, ok := range []string{
		route(`path_prefix: /api/, rewrite_prefix: /, request_headers: {set: {X-A: ""}}`),
		route(`path_prefix: /api, rewrite_prefix: /v2`),
		route(`path_prefix: /api, rewrite_prefix: /v2/...`),
		route(`path_prefix: /api/, rewrite_prefix: "/a%2Fb/"`),
		lst(`request_headers: {set: {X-A: "` + strings.Repeat("a", 16377) + `"}}, response_headers: {add: {X-B: "` + strings.Repeat("b", 8000) + `", X-C: "` + strings.Repeat("c", 8370) + `"}}`),
	} {
		if _, err := ParseConfig([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestAppendTarget: the target sent upstream: path_prefix replaced by
// rewrite_prefix, the query kept, an empty remainder rewritten; an
// absolute-form target's authority replaced by host_rewrite, its empty
// path (which matched "/") rewritten, but an OPTIONS's (as "*"); OPTIONS
// * as it is.
func TestAppendTarget(t *testing.T) {
	for _, tc := range []struct {
		prefix, rewrite, host, target, want string
		options                             bool
	}{
		{"/api/", "/", "", "/api/x?q=1", "/x?q=1", false},
		{"/api/", "/", "", "/api/", "/", false},
		{"/api/", "/", "", "/api/?q", "/?q", false},
		{"/api", "/v2", "", "/api", "/v2", false},
		{"/api", "/v2", "", "/api?x", "/v2?x", false},
		{"/api", "/v2", "", "/api/x", "/v2/x", false},
		{"/api", "/v2", "", "/apis", "/v2s", false},
		{"/api/", "/v2/", "", "/api/a/b?c=/api/", "/v2/a/b?c=/api/", false},
		{"/", "/v2/", "", "/x", "/v2/x", false},
		{"/", "/v2/", "", "*", "*", false},
		{"/api/", "/v2/", "b.internal", "http://h.example/api/x?q", "http://b.internal/v2/x?q", false},
		{"/", "/v2/", "", "http://h.example?q", "http://h.example/v2/?q", false},
		{"/", "/v2/", "", "http://h.example", "http://h.example/v2/", false},
		{"/", "/v2/", "b.internal", "http://h.example", "http://b.internal", true},
		{"/", "/v2/", "", "http://h.example?q", "http://h.example/v2/?q", true},
		{"/", "/v2/", "", "http://h.example/", "http://h.example/v2/", true},
		{"/", "/v2/", "", "*", "*", true},
		{"/", "", "b.internal:81", "http://h.example:80/x", "http://b.internal:81/x", false},
		{"/", "", "b.internal", "http://h.example?q", "http://b.internal?q", false},
		{"/", "", "b.internal", "/x?y", "/x?y", false},
	} {
		rw := compileRewrites(&RouteConfig{PathPrefix: tc.prefix, RewritePrefix: tc.rewrite, HostRewrite: tc.host})
		if got := string(rw.appendTarget(nil, []byte(tc.target), tc.options)); got != tc.want {
			t.Errorf("%s -> %s (host %q): %s gives %s, want %s", tc.prefix, tc.rewrite, tc.host, tc.target, got, tc.want)
		}
	}
}

// FuzzRewritePrefix: for a path_prefix and rewrite_prefix the config
// takes and a target, the prefix and rest, that the
// dot-segment check lets pass, the rewritten target passes it too and
// has a "//" only where the target had one from the prefix's last byte
// on.
func FuzzRewritePrefix(f *testing.F) {
	for _, s := range [][3]string{
		{"/api/", "/", "x"}, {"/api", "/v2", "./x"}, {"/x", "/y.", "./z"}, {"/a/", "/b", "..."},
		{"/a", "/...", "."}, {"/a/", "/b%2E", "x"}, {"/a", "/b", "%2e/"}, {"/a", "/b", "?x/../"}, {"/api", "/v2/", "./x"}, {"/api", "/", "/x"},
		{"/a?", "/b", "/../x"}, {"/a?/", "/b/", "../x"}, {"/a#", "/b", "/../x"},
		{"/a/", `/b/\c`, "x"}, {"/a/", "/b%2F/", "x"}, {"/a", `/b\%5cc`, "x"}, {"/a/", `/b\`, "/x"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, prefix, rewrite, rest string) {
		target := prefix + rest
		if !strings.HasPrefix(prefix, "/") || dotSegments([]byte(target)) ||
			validRewritePrefix(prefix, rewrite) != nil {
			return
		}
		rw := compileRewrites(&RouteConfig{PathPrefix: prefix, RewritePrefix: rewrite})
		got := rw.appendTarget(nil, []byte(target), false)
		if dotSegments(got) {
			t.Errorf("%s -> %s: %q rewritten to %q, which has a dot-segment", prefix, rewrite, target, got)
		}
		// (A backslash, %2F and %5C are separators too, as dotSegments
		// has them.)
		path, _, _ := strings.Cut(string(got), "?")
		rest, _, _ = strings.Cut(rest, "?")
		if strings.Contains(slashes(path), "//") && !strings.Contains(slashes(prefix[len(prefix)-1:]+rest), "//") {
			t.Errorf("%s -> %s: %q rewritten to %q, which has a \"//\"", prefix, rewrite, target, got)
		}
	})
}

// slashes returns p with its backslashes, %2F and %5C as "/".
func slashes(p string) string {
	return strings.NewReplacer(`\`, "/", "%2F", "/", "%2f", "/", "%5C", "/", "%5c", "/").Replace(p)
}
