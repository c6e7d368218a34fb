package proxy

import (
	"bytes"

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

// trailerRefused are the fields, but the forwarding ones, that a
// request's trailer section loses (names as equalDash compares them):
// the framing and routing (RFC 9110 6.5.1), the connection's, the
// proxy's own, authentication, the request modifiers (controls and
// conditionals) and the content's format.
var trailerRefused = [][]byte{
	[]byte("content-length"), []byte("transfer-encoding"), []byte("host"),
	[]byte("connection"), []byte("keep-alive"), []byte("proxy-connection"), []byte("te"),
	[]byte("trailer"), []byte("upgrade"), []byte("http2-settings"), []byte("via"),
	[]byte("authorization"), []byte("proxy-authorization"), []byte("cookie"),
	[]byte("cache-control"), []byte("pragma"), []byte("expect"), []byte("max-forwards"),
	[]byte("range"), []byte("if-match"), []byte("if-none-match"), []byte("if-modified-since"),
	[]byte("if-unmodified-since"), []byte("if-range"),
	[]byte("content-type"), []byte("content-encoding"), []byte("content-range"),
}

// trailerDropped reports a request trailer field name the proxy drops:
// a forwarding field or one trailerRefused lists, in any case and with
// any separator read as '-'.
func trailerDropped(name []byte) bool {
	if forwardingAlias(name) {
		return true
	}
	for _, f := range trailerRefused {
		if equalDash(name, f) {
			return true
		}
	}
	return false
}

// trailerRules decide the trailer fields of a request on loop id of
// listener ln routed to route (x.route-1): beside those trailerDropped
// reports, those the listener's and the route's request_headers drop
// (remove, set), and, with headers_with_underscores drop or reject, those
// with an underscore in their name (counted as the head's): a server
// merging trailers into the header section would read them as the head's
// fields the rules took out. reject drops them too: its 400 is too late
// once the head went to the server, and resetting the request for a
// field that can be left out would lose a request drop passes. The zero
// trailerRules (ln nil) apply trailerDropped alone. Passed by value.
type trailerRules struct {
	ln        *listener
	id, route int
}

// kept reports whether a request trailer field named name is passed on.
func (r trailerRules) kept(name []byte) bool {
	if trailerDropped(name) {
		return false
	}
	if r.ln == nil {
		return true
	}
	if rules, _ := r.ln.reqRules(r.route); !rules.keep(name) {
		return false
	}
	if r.ln.cfg.HeadersWithUnderscores == UnderscoresReject && bytes.IndexByte(name, '_') >= 0 {
		r.ln.stats[r.id].underscoreDropped.inc()
		return false
	}
	return !r.ln.dropUnderscored(r.id, name)
}

// keepTrailerFields returns fs without the fields r does not keep, in
// place.
func keepTrailerFields(fs []hpack.Field, r trailerRules) []hpack.Field {
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
func keepTrailerLines(t []byte, tr trailerRules) []byte {
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

// nextBody takes the request body's bytes from p as h1.Body.Next does,
// a chunked body's trailer section appended to s.trl: held is where in p
// the bytes held for it begin (its first byte, or 0 where it began in an
// earlier read), up to n, the body's end or p's, and is -1 where p has
// none (the bytes go as they came). Loop goroutine.
func (s *hsession) nextBody(p []byte) (n, held int, done bool, err error) {
	held = -1
	if s.inTrl {
		held = 0
	}
	for {
		sp, err := s.reqBody.NextSpan(p[n:])
		if sp.Trailer {
			if held < 0 {
				held = n + sp.Skip
			}
			s.inTrl = true
			s.trl = append(s.trl, p[n+sp.Skip:n+sp.Skip+sp.Len]...)
		}
		n += sp.Skip + sp.Len
		if err != nil || sp.Done || n == len(p) {
			return n, held, sp.Done, err
		}
	}
}

// sendTrailers sends pre, the body's bytes before its trailer section,
// and, once the body is done, the section without the fields its
// trailerRules drop and the final CRLF. Loop goroutine.
func (s *hsession) sendTrailers(pre []byte, done bool) error {
	if len(pre) > 0 {
		if _, err := s.up.Write(pre); err != nil {
			return err
		}
	}
	if !done {
		return nil
	}
	s.trl = append(keepTrailerLines(s.trl, trailerRules{s.ln, s.ls.id, s.x.route - 1}), crlf...)
	_, err := s.up.Write(s.trl)
	s.trl, s.inTrl = emptied(s.trl), false
	return err
}

// trailerRules returns the rules of the stream's request trailers.
func (st *h2stream) trailerRules() trailerRules {
	return trailerRules{st.ln, st.c.ls.id, st.x.route - 1}
}
