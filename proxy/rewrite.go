package proxy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/hpack"
)

// Header and path rewriting (request_headers, response_headers,
// rewrite_prefix, host_rewrite): checked here at config time and
// compiled per listener and route into the bytes the data path appends
// as they are, for HTTP/1.1 ("Name: value\r\n") and HTTP/2 (the name in
// lower case), so that applying them takes no allocation.

// HeaderRules changes the fields of a message passed on, as Envoy's
// request_headers_to_add/_to_remove and HAProxy's set-header/del-header
// do. Names are field names (tokens), compared case-insensitively and
// with '_' and the other separators read as '-' (as servers that name
// fields as CGI does read them: a remove of X-Debug drops X_Debug and
// X.Debug too), each in one of the three
// at most; values are static strings without a
// control character but HTAB and without leading or trailing
// whitespace, the fields Set and Add write ("Name: value\r\n" each) 16
// KiB at most together (h1.DefaultMaxHead, the largest head the proxy
// reads). Remove drops every field of its names, Set replaces every
// field of its names with one (or adds it), Add appends one field to
// those of its name: in that order, the listener's rules before the
// route's (so a route's remove drops a field the listener's set or add
// wrote). The fields a rule writes follow the message's own (Set's,
// then Add's, each by name). Refused: the framing and hop-by-hop fields
// (Content-Length, Transfer-Encoding, Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Upgrade, HTTP2-Settings), Host
// (host_rewrite is the way), pseudo-headers, and the fields the proxy
// writes itself from the client's connection (X-Forwarded-For,
// X-Forwarded-Proto, X-Forwarded-Host, Via: trusted_proxies decides
// them); a name that is one of those with '_' read as '-'
// (Content_Length, X_Forwarded_For) is refused too.
type HeaderRules struct {
	// Set gives fields (name: value) that replace every field of their
	// name.
	Set map[string]string `yaml:"set,omitempty" json:"set,omitempty"`
	// Add gives fields (name: value) appended to those of their name.
	Add map[string]string `yaml:"add,omitempty" json:"add,omitempty"`
	// Remove names fields dropped, every one of each name.
	Remove []string `yaml:"remove,omitempty" json:"remove,omitempty"`
}

// IsZero reports rules that change nothing, for omitempty and omitzero.
func (h HeaderRules) IsZero() bool { return len(h.Set) == 0 && len(h.Add) == 0 && len(h.Remove) == 0 }

// ruleRefused lists the field names (lower case) no rule may name, and
// why: the framing, the hop-by-hop fields (internal/h1's
// ConnectionFields, Trailer, HTTP2-Settings), Host and the fields the
// proxy writes. A trailer section loses them too (trailerList).
var ruleRefused = func() map[string]string {
	m := map[string]string{
		"content-length":    "framing",
		"transfer-encoding": "framing",
		"trailer":           "hop-by-hop",
		"http2-settings":    "hop-by-hop",
		"host":              "the request's authority: use a route's host_rewrite",
		"x-forwarded-for":   "written by the proxy (see trusted_proxies)",
		"x-forwarded-proto": "written by the proxy (see trusted_proxies)",
		"x-forwarded-host":  "written by the proxy (see trusted_proxies)",
		"via":               "written by the proxy",
	}
	for _, n := range h1.ConnectionFields {
		m[n] = "hop-by-hop"
	}
	return m
}()

// maxRuleFields bounds the fields one HeaderRules writes (set's and
// add's, as HTTP/1.1 lines "Name: value\r\n"), together: the largest head
// the proxy reads (internal/h1's default), so that no value of megabytes
// is copied into every message passed on. A listener's rules and a
// route's are bounded each.
const maxRuleFields = h1.DefaultMaxHead

// validate checks h; the error begins with the list's name.
func (h *HeaderRules) validate() error {
	seen := map[string]string{} // lower-case name, '-' for '_': the list that has it
	check := func(list, name string) error {
		// ('_' and the other separators read as '-': servers naming
		// fields as CGI does read "Content_Length" as "Content-Length",
		// as drops does.)
		dashed := dashedName(name)
		switch {
		case strings.HasPrefix(name, ":"):
			return fmt.Errorf("%s: %q is a pseudo-header", list, name)
		case !validToken(name):
			return fmt.Errorf("%s: %q is not a field name (a token)", list, name)
		case ruleRefused[dashed] != "":
			return fmt.Errorf("%s: %q may not be changed (%s)", list, name, ruleRefused[dashed])
		case seen[dashed] != "":
			return fmt.Errorf("%s: %q is named in %s already (names are case-insensitive, '_' read as '-')", list, name, seen[dashed])
		}
		seen[dashed] = list
		return nil
	}
	for _, name := range h.Remove {
		if err := check("remove", name); err != nil {
			return err
		}
	}
	written := 0 // the bytes of set's and add's fields as HTTP/1.1 lines so far
	for _, l := range []struct {
		name string
		m    map[string]string
	}{{"set", h.Set}, {"add", h.Add}} {
		for _, name := range slices.Sorted(maps.Keys(l.m)) {
			if err := check(l.name, name); err != nil {
				return err
			}
			// (Before the value's check, which quotes it.)
			n := len(name) + len(": ") + len(l.m[name]) + len("\r\n")
			if written += n; written > maxRuleFields {
				return fmt.Errorf("%s: %q: its field of %d bytes makes those set and add write %d bytes, past %d (the largest head the proxy reads)", l.name, name, n, written, maxRuleFields)
			}
			if err := validValue(l.m[name]); err != nil {
				return fmt.Errorf("%s: %q: %w", l.name, name, err)
			}
		}
	}
	return nil
}

// validValue checks a rule's field value: no control character but HTAB
// (CR, LF and NUL above all), no leading or trailing whitespace.
func validValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("value %q has a control character at %d", v, i)
		}
	}
	if strings.TrimSpace(v) != v {
		return fmt.Errorf("value %q has leading or trailing whitespace", v)
	}
	return nil
}

// validateRewrites checks a route's rewrite_prefix, host_rewrite and
// header rules; the error begins with the field's name.
func (r *RouteConfig) validateRewrites() error {
	if err := r.RequestHeaders.validate(); err != nil {
		return fmt.Errorf("request_headers.%w", err)
	}
	if err := r.ResponseHeaders.validate(); err != nil {
		return fmt.Errorf("response_headers.%w", err)
	}
	if h := r.HostRewrite; h != "" && !h1.ValidAuthority([]byte(h)) {
		return fmt.Errorf("host_rewrite: %q is not a host name or address with an optional port", h)
	}
	if r.RewritePrefix == "" {
		return nil
	}
	if err := validRewritePrefix(r.PathPrefix, r.RewritePrefix); err != nil {
		return fmt.Errorf("rewrite_prefix: %w", err)
	}
	return nil
}

// validRewritePrefix checks that rewriting prefix to rw in a target the
// dot-segment check let pass makes none it would refuse, nor a "//":
// prefix is a path without a query ('?' or '#': what follows is not
// checked); rw is a path with neither a dot-segment nor two separators
// in a row ("//"; a backslash, %2F and %5C are separators too, as
// dotSegments has them), its percent signs followed by two hex digits;
// one ending with a separator goes only with a prefix ending in "/",
// the remainder then beginning a segment of its own as it did;
// otherwise rw's last segment is neither "." nor ".." (dotSegments),
// and whatever the remainder adds to it holds a byte other than a dot,
// or three dots or more.
func validRewritePrefix(prefix, rw string) error {
	if !strings.HasPrefix(rw, "/") {
		return fmt.Errorf("%q does not begin with /", rw)
	}
	if i := strings.IndexAny(prefix, "?#"); i >= 0 {
		// ("/api?" and "/v2" would send "/api?/../x" as "/v2/../x".)
		return fmt.Errorf("path_prefix %q has a '?' or '#' at %d (the rest of a target it matches is a query the dot-segment check does not read)", prefix, i)
	}
	for i := 0; i < len(rw); i++ {
		switch c := rw[i]; {
		case c <= ' ' || c >= 0x7f || c == '?' || c == '#':
			return fmt.Errorf("%q has a space, control, non-ASCII byte, '?' or '#' at %d", rw, i)
		case c == '%' && (i+2 >= len(rw) || h1.Unhex(rw[i+1]) < 0 || h1.Unhex(rw[i+2]) < 0):
			return fmt.Errorf("%q has a '%%' not followed by two hex digits at %d", rw, i)
		}
	}
	if dotSegments([]byte(rw)) || doubleSeparator(rw) {
		return fmt.Errorf("%q has a dot-segment or \"//\" (a backslash, %%2F and %%5C count as \"/\")", rw)
	}
	if endsWithSeparator(rw) && !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%q ends with a separator, path_prefix %q does not end with / (a target's remainder would begin a segment: \"//\", dot-segments)", rw, prefix)
	}
	return nil
}

// pathByte is the byte of path p at i as a server that decodes the path
// reads it, and how many bytes of p it took: a '%' followed by two hex
// digits decoded (3), any other byte itself (1). dotSegments,
// doubleSeparator and endsWithSeparator read a path with it, each taking
// what it returns for '/' or '\' for a segment separator (isSeparator).
func pathByte[P string | []byte](p P, i int) (byte, int) {
	if p[i] == '%' && i+2 < len(p) {
		if hi, lo := h1.Unhex(p[i+1]), h1.Unhex(p[i+2]); hi >= 0 && lo >= 0 {
			return byte(hi<<4 | lo), 3
		}
	}
	return p[i], 1
}

// isSeparator reports a decoded path byte that separates segments: '/',
// or a backslash (a server on Windows, or one that takes it for '/').
func isSeparator(c byte) bool { return c == '/' || c == '\\' }

// doubleSeparator reports a path with two segment separators (as
// dotSegments has them: "/", a backslash, %2F, %5C) in a row, an empty
// segment as "//" is to a server that reads them as "/".
func doubleSeparator(p string) bool {
	prev := false // the byte before i ends a separator
	for i := 0; i < len(p); {
		c, n := pathByte(p, i)
		if isSeparator(c) && prev {
			return true
		}
		prev = isSeparator(c)
		i += n
	}
	return false
}

// endsWithSeparator reports a path ending with what dotSegments takes
// for a segment separator.
func endsWithSeparator(p string) bool {
	last := false
	for i := 0; i < len(p); {
		c, n := pathByte(p, i)
		last = isSeparator(c)
		i += n
	}
	return last
}

// hfield is a field a rule writes: its name in lower case and its value
// (HTTP/2), and its HTTP/1.1 line ("Name: value\r\n", the name as
// configured).
type hfield struct {
	lower, value, line []byte
}

// headerOps are compiled HeaderRules.
type headerOps struct {
	drop [][]byte // remove's and set's names (lower case), sorted by cmpDash: the received fields that go
	lens uint64   // bit min(n, 63) set for each length n of drop's names
	put  []hfield // set's and add's fields, in order
}

// noOps changes nothing.
var noOps = &headerOps{}

// compileOps compiles h (validated).
func compileOps(h HeaderRules) *headerOps {
	if h.IsZero() {
		return noOps
	}
	o := &headerOps{}
	for _, name := range h.Remove {
		o.drop = append(o.drop, []byte(strings.ToLower(name)))
	}
	for _, l := range []struct {
		m       map[string]string
		replace bool
	}{{h.Set, true}, {h.Add, false}} {
		m := l.m
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if l.replace {
				o.drop = append(o.drop, []byte(strings.ToLower(name)))
			}
			o.put = append(o.put, hfield{
				lower: []byte(strings.ToLower(name)),
				value: []byte(m[name]),
				line:  []byte(name + ": " + m[name] + "\r\n"),
			})
		}
	}
	slices.SortFunc(o.drop, cmpDash)
	for _, d := range o.drop {
		o.lens |= 1 << min(len(d), 63)
	}
	return o
}

// drops reports a field name o drops (any case, and '_' read as '-':
// a server naming fields as CGI does reads "X_User" as "X-User", so a
// rule's remove or set of X-User drops it too): at once where no name
// has its length, as for most fields, else by a binary search of the
// sorted names; O(log rules) a field.
func (o *headerOps) drops(name []byte) bool {
	return o.lens&(1<<min(len(name), 63)) != 0 && o.search(name)
}

// search reports whether drop has name (cmpDash). (Not
// slices.BinarySearchFunc, through which name would escape.)
func (o *headerOps) search(name []byte) bool {
	lo, hi := 0, len(o.drop)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := cmpDash(o.drop[m], name); {
		case c == 0:
			return true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// cmpDash orders field names as equalDash compares them (0 where it
// reports them equal): by length, then byte by byte in lower case with
// any byte not a letter or digit read as '-' (foldDash).
func cmpDash(a, b []byte) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	for i := range a {
		if c := cmp.Compare(foldDash(a[i]), foldDash(b[i])); c != 0 {
			return c
		}
	}
	return 0
}

// hdrRules are the rules of one message: its listener's, then its
// route's (noOps for none). Passed by value.
type hdrRules struct{ ln, rt *headerOps }

// noRules changes nothing.
var noRules = hdrRules{noOps, noOps}

// keep reports whether a received field named name is passed on.
func (h hdrRules) keep(name []byte) bool { return !h.ln.drops(name) && !h.rt.drops(name) }

// appendH1 appends the fields the rules write as HTTP/1.1 lines: the
// listener's that the route's do not drop, then the route's.
func (h hdrRules) appendH1(o []byte) []byte {
	for i := range h.ln.put {
		if f := &h.ln.put[i]; !h.rt.drops(f.lower) {
			o = append(o, f.line...)
		}
	}
	for i := range h.rt.put {
		o = append(o, h.rt.put[i].line...)
	}
	return o
}

// appendH2 appends the fields the rules write as HTTP/2 fields (names in
// lower case), as appendH1.
func (h hdrRules) appendH2(fs []hpack.Field) []hpack.Field {
	for i := range h.ln.put {
		if f := &h.ln.put[i]; !h.rt.drops(f.lower) {
			fs = append(fs, hpack.Field{Name: f.lower, Value: f.value})
		}
	}
	for i := range h.rt.put {
		f := &h.rt.put[i]
		fs = append(fs, hpack.Field{Name: f.lower, Value: f.value})
	}
	return fs
}

// rewrites is what a route changes of a request besides its fields.
type rewrites struct {
	prefix []byte // the route's path_prefix
	path   []byte // rewrite_prefix; nil: none
	host   []byte // host_rewrite; nil: none
}

// noRewrites changes nothing (the listener's pool's requests).
var noRewrites = &rewrites{}

// on reports whether rw changes the target or the host.
func (rw *rewrites) on() bool { return rw.path != nil || rw.host != nil }

// appendTarget appends the HTTP/1.1 request target sent upstream for a
// target t received: an absolute-form one with its authority replaced by
// host_rewrite, and the path rewritten (appendPath; an empty path, which
// matched path_prefix "/" as "/", is rewrite_prefix, but for an OPTIONS,
// options, whose empty path asks about the server as "*" does).
func (rw *rewrites) appendTarget(dst, t []byte, options bool) []byte {
	if !rw.on() {
		return append(dst, t...)
	}
	a, p := h1.SplitTarget(t)
	if a == nil {
		return rw.appendPath(dst, p)
	}
	dst = append(dst, t[:len(t)-len(p)-len(a)]...)
	if rw.host != nil {
		a = rw.host
	}
	dst = append(dst, a...)
	if rw.path != nil && (len(p) == 0 && !options || len(p) > 0 && p[0] == '?') {
		return append(append(dst, rw.path...), p...)
	}
	return rw.appendPath(dst, p)
}

// appendPath appends an origin-form path (and query) p sent upstream:
// with what of it the route's path_prefix matched (hasPathPrefix: "/api/"
// takes "/%61pi/" too) replaced by rewrite_prefix; "*", which it does not
// match, as it is.
func (rw *rewrites) appendPath(dst, p []byte) []byte {
	if rw.path == nil {
		return append(dst, p...)
	}
	n, ok := hasPathPrefix(p, rw.prefix)
	if !ok {
		return append(dst, p...)
	}
	dst = append(dst, rw.path...)
	return append(dst, p[n:]...)
}

// compileRewrites compiles a route's rewrite_prefix and host_rewrite.
func compileRewrites(rc *RouteConfig) *rewrites {
	if rc.RewritePrefix == "" && rc.HostRewrite == "" {
		return noRewrites
	}
	rw := &rewrites{prefix: []byte(rc.PathPrefix)}
	if rc.RewritePrefix != "" {
		rw.path = []byte(rc.RewritePrefix)
	}
	if rc.HostRewrite != "" {
		rw.host = []byte(rc.HostRewrite)
	}
	return rw
}

// reqRules returns the request field rules of a request routed to route
// i (len(l.routes): the listener's pool) and its rewrites.
func (l *listener) reqRules(i int) (hdrRules, *rewrites) {
	if i < len(l.routes) {
		r := &l.routes[i]
		return hdrRules{l.reqOps, r.reqOps}, r.rw
	}
	return hdrRules{l.reqOps, noOps}, noRewrites
}

// respRules returns the response field rules of exchange x (routed).
func (l *listener) respRules(x *exchange) hdrRules {
	if i := x.route - 1; i >= 0 && i < len(l.routes) {
		return hdrRules{l.respOps, l.routes[i].respOps}
	}
	return hdrRules{l.respOps, noOps}
}
