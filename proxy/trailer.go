package proxy

import (
	"bytes"
	"io"
	"maps"
	"slices"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/hpack"
)

// A request's trailer section reaches the server with neither the
// forwarding fields, in any spelling (forwardingAlias), nor the fields
// RFC 9110 6.5.1 has no trailer carry: a server that merges trailers
// into the header section (Apache httpd's MergeTrailers) would read a
// client's X-Forwarded-For, X_Real_IP or
// Authorization beside or over the head's, which the proxy wrote or a
// gateway in front checked. nginx does not pass a request's trailers on,
// Envoy only with HTTP/1 enable_trailers; the proxy passes the others.
// A response's trailer section reaches the client without the fields
// RFC 9110 6.5.1 has no trailer carry either, nor those its
// response_headers take out of the head: a client or a gateway in front
// that merges trailers into the header section would read them as the
// head's.

// trailerList returns the names (as equalDash compares them) of the
// fields no trailer section keeps, then more: ruleRefused's (the
// framing, the connection's, Host, Via: one list names the hop-by-hop
// fields) but the forwarding fields, which a request's trailers lose in
// any spelling (forwardingAlias, counted as a head's) and a response's
// keep as its head does. (internal/h1's Body refuses a chunked body
// whose trailer section has Content-Length, Transfer-Encoding or Host
// outright, as a framing or routing error, before these lists see it;
// they name them all the same, for the HTTP/2 trailers internal/h1
// does not read.)
func trailerList(more ...string) [][]byte {
	var l [][]byte
	for _, n := range slices.Sorted(maps.Keys(ruleRefused)) {
		if !forwardingAlias([]byte(n)) {
			l = append(l, []byte(n))
		}
	}
	for _, n := range more {
		l = append(l, []byte(n))
	}
	return l
}

// trailerRefused are the fields, but the forwarding ones, that a
// request's trailer section loses: trailerList's, authentication, the
// request modifiers (controls and conditionals) and the content's
// format (RFC 9110 6.5.1).
var trailerRefused = trailerList(
	"authorization", "proxy-authorization", "cookie",
	"cache-control", "pragma", "expect", "max-forwards",
	"range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since", "if-range",
	"content-type", "content-encoding", "content-range",
)

// respTrailerRefused are the fields a response's trailer section loses:
// trailerList's, authentication challenges (WWW-Authenticate,
// Proxy-Authenticate; Authentication-Info and
// Proxy-Authentication-Info pass, RFC 9110 11.6.3 allowing them in
// trailers), Set-Cookie (state a client takes before the content, as a
// request's Cookie), the response controls (RFC 9110 6.5.1's "response
// controls": Age, Cache-Control, Expires, Pragma, Vary, Location,
// Retry-After) and the content's format (Content-Type, Content-Encoding, Content-Language,
// Content-Location, Content-Range).
var respTrailerRefused = trailerList(
	"www-authenticate", "proxy-authenticate", "set-cookie",
	"age", "cache-control", "expires", "pragma", "vary", "location", "retry-after",
	"content-type", "content-encoding", "content-language", "content-location", "content-range",
)

// listed reports whether name is in l (names as equalDash compares
// them: any case, any separator read as '-').
func listed(l [][]byte, name []byte) bool {
	for _, f := range l {
		if equalDash(name, f) {
			return true
		}
	}
	return false
}

// trailerRules decide the trailer fields of a request on loop id of
// listener ln routed to route (x.route-1): beside trailerRefused's and
// the forwarding fields in any spelling, those the listener's and the
// route's request_headers drop (remove, set), and, with
// headers_with_underscores drop or reject, those with an underscore in
// their name; the dropped ones headers_with_underscores decides and the
// forwarding fields spelled with another separator than '-' are counted
// as a head's (dropUnderscored): a server merging trailers into the
// header section would read them as the head's fields the rules took
// out. reject drops them too: its 400 is too late once the head went to
// the server, and resetting the request for a field that can be left out
// would lose a request drop passes. The zero trailerRules (ln nil) drop
// trailerRefused's and the forwarding fields alone. Passed by value.
type trailerRules struct {
	ln        *listener
	id, route int
}

// kept reports whether a request trailer field named name is passed on.
func (r trailerRules) kept(name []byte) bool {
	if listed(trailerRefused, name) {
		return false
	}
	if r.ln == nil {
		return !forwardingAlias(name)
	}
	if rules, _ := r.ln.reqRules(r.route); !rules.keep(name) {
		return false
	}
	if r.ln.cfg.HeadersWithUnderscores == UnderscoresReject && bytes.IndexByte(name, '_') >= 0 {
		r.ln.stats[r.id].underscoreDropped.inc()
		return false
	}
	return !r.ln.dropUnderscored(r.id, name) && !forwardingAlias(name)
}

// respTrailerRules decide the trailer fields of a response: those
// respTrailerRefused lists and those its response_headers drop (remove,
// set; set's and add's fields are not written into it, as none are into
// a request's). headers_with_underscores is a request's alone, as for
// the head. Passed by value.
type respTrailerRules hdrRules

// respTrailerRules returns the rules of exchange x's response trailers
// (routed).
func (l *listener) respTrailerRules(x *exchange) respTrailerRules {
	return respTrailerRules(l.respRules(x))
}

// kept reports whether a response trailer field named name is passed on.
func (r respTrailerRules) kept(name []byte) bool {
	return !listed(respTrailerRefused, name) && hdrRules(r).keep(name)
}

// keptH1 reports whether a response trailer field f from an h2c server
// goes on to an HTTP/1.1 client: kept, and one HTTP/1.1 carries as it is
// (h1.ValidField). internal/h2 lets control characters but NUL, CR and
// LF through in values (RFC 9113 8.2.1), which a strict recipient
// (internal/h1, Go's net/http) refuses with the whole message, and a lax
// one may read otherwise; the field is left out, as those the rules drop
// (the response's head and body went already).
func (r respTrailerRules) keptH1(f hpack.Field) bool {
	return h1.ValidField(f.Name, f.Value) && r.kept(f.Name)
}

// trailerKeeper is trailerRules or respTrailerRules (a type parameter's
// constraint, so that their calls take no allocation).
type trailerKeeper interface{ kept(name []byte) bool }

// keepTrailerFields returns fs without the fields r does not keep, in
// place.
func keepTrailerFields[K trailerKeeper](fs []hpack.Field, r K) []hpack.Field {
	k := 0
	for _, f := range fs {
		if r.kept(f.Name) {
			fs[k] = f
			k++
		}
	}
	clear(fs[k:])
	return fs[:k]
}

// keepTrailerLines returns a chunked body's trailer section t (field
// lines with their CRLFs, which internal/h1 checked) without the lines
// of the fields tr does not keep, in place.
func keepTrailerLines[K trailerKeeper](t []byte, tr K) []byte {
	k := 0
	for r := 0; r < len(t); {
		e := bytes.IndexByte(t[r:], '\n')
		if e < 0 {
			e = len(t)
		} else {
			e += r + 1
		}
		line := t[r:e]
		if c := bytes.IndexByte(line, ':'); c < 0 || tr.kept(line[:c]) {
			k += copy(t[k:], line)
		}
		r = e
	}
	return t[:k]
}

// heldTrailer is a chunked body's trailer section held to the body's
// end, to go on filtered (keepTrailerLines), as it arrived in parts.
type heldTrailer struct {
	b    []byte
	in   bool   // the trailer section has begun
	conn []byte // the head's connection options (appendConnOptions)
}

// reset starts the body of a message whose head has the fields hs.
func (h *heldTrailer) reset(hs []h1.Header) {
	h.b, h.in = h.b[:0], false
	h.conn = appendConnOptions(emptied(h.conn), hs)
}

// appendConnOptions appends to dst the values of the Connection fields
// of hs, each followed by a comma: the names of the fields that are
// connection-specific in the message, which its trailer section loses
// as its head does (RFC 9110 7.6.1: "any header or trailer field(s)"
// named by a connection option). A copy, since the head's buffer is
// let go before the trailer section comes.
func appendConnOptions(dst []byte, hs []h1.Header) []byte {
	for _, h := range hs {
		if bytes.EqualFold(h.Name, hdrConnection) {
			dst = append(append(dst, h.Value...), ',')
		}
	}
	return dst
}

var hdrConnection = []byte("Connection")

// connDropped is a trailer keeper, tr, that also drops the fields a
// message's connection options (appendConnOptions) name.
type connDropped[K trailerKeeper] struct {
	tr   K
	conn []byte
}

// kept reports whether a trailer field named name is passed on.
func (c connDropped[K]) kept(name []byte) bool {
	return !h1.ListHasName(c.conn, name) && c.tr.kept(name)
}

// next takes body's bytes from p as h1.Body.Next does, a chunked body's
// trailer section appended to h: held is where in p the bytes held for
// it begin (its first byte, or 0 where it began in an earlier read), up
// to n, the body's end or p's, and is -1 where p has none (the bytes go
// as they came).
func (h *heldTrailer) next(body *h1.Body, p []byte) (n, held int, done bool, err error) {
	held = -1
	if h.in {
		held = 0
	}
	for {
		sp, err := body.NextSpan(p[n:])
		if sp.Trailer {
			if held < 0 {
				held = n + sp.Skip
			}
			h.in = true
			h.b = append(h.b, p[n+sp.Skip:n+sp.Skip+sp.Len]...)
		}
		n += sp.Skip + sp.Len
		if err != nil || sp.Done || n == len(p) {
			return n, held, sp.Done, err
		}
	}
}

// sendTrailer writes pre, the body's bytes before its trailer section,
// to w, and, once the body is done, the section h holds without the
// fields tr does not keep or the head's Connection names, and the final
// CRLF; h is emptied for the next body.
func sendTrailer[K trailerKeeper](h *heldTrailer, w io.Writer, pre []byte, done bool, tr K) error {
	if len(pre) > 0 {
		if _, err := w.Write(pre); err != nil {
			return err
		}
	}
	if !done {
		return nil
	}
	h.b = append(keepTrailerLines(h.b, connDropped[K]{tr, h.conn}), crlf...)
	_, err := w.Write(h.b)
	h.b, h.in = emptied(h.b), false
	return err
}

// trailerRules returns the rules of the stream's request trailers.
func (st *h2stream) trailerRules() trailerRules {
	return trailerRules{st.ln, st.c.ls.id, st.x.route - 1}
}
