package h2

import (
	"bytes"
	"errors"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/hpack"
)

// errBadField stops emit's work once a field broke a rule; Decode goes on
// decoding to keep the table in step.
var errBadField = errors.New("bad field")

func (s *Server) emit(f hpack.Field) error {
	if s.mode == decodeDiscard {
		return errBadField
	}
	name := f.Name
	if len(name) > 0 && name[0] == ':' {
		if s.mode == decodeTrailers || s.regular {
			s.bad = true
			return errBadField
		}
		var i int
		switch string(name) {
		case ":method":
			i = 0
		case ":scheme":
			i = 1
		case ":authority":
			i = 2
		case ":path":
			i = 3
		default:
			s.bad = true
			return errBadField
		}
		if s.havePs&(1<<i) != 0 || !validValue(f.Value) {
			s.bad = true
			return errBadField
		}
		s.havePs |= 1 << i
		s.pseudo[i] = s.store(f)
		return nil
	}
	s.regular = true
	if !validName(name) || !validValue(f.Value) || connSpecific(name, f.Value) {
		s.bad = true
		return errBadField
	}
	sp := s.store(f)
	switch string(name) {
	case "content-length":
		v, ok := parseCL(f.Value)
		if !ok || s.req.ContentLength >= 0 && s.req.ContentLength != v {
			s.bad = true
			return errBadField
		}
		s.req.ContentLength = v
	case "host":
		if s.haveHost {
			s.bad = true
			return errBadField
		}
		s.host, s.haveHost = sp, true
	}
	s.spans = append(s.spans, sp)
	return nil
}

// request fills s.req from a decoded block and checks RFC 9113 8.3.1 and
// 8.5, setting s.bad.
func (s *Server) request() {
	s.req.Fields = s.fields(s.req.Fields)
	r := &s.req
	r.Method, r.Scheme, r.Authority, r.Path = nil, nil, nil, nil
	r.NeverIndexed = 0
	ps := [4]*[]byte{&r.Method, &r.Scheme, &r.Authority, &r.Path} // in the order of Pseudo's members
	for i := range ps {
		if s.havePs&(1<<i) != 0 {
			*ps[i] = s.bytes(s.pseudo[i], true)
			if s.pseudo[i].sensitive {
				r.NeverIndexed |= 1 << i
			}
		}
	}
	const method, scheme, authority, path = 1, 2, 4, 8
	if string(r.Method) == "CONNECT" {
		// RFC 9113 8.5: :authority only, no :scheme or :path; it is
		// host:port, a CONNECT request line's authority-form.
		s.bad = s.havePs != method|authority || !h1.ValidTarget(r.Method, r.Authority)
	} else {
		s.bad = s.havePs&(method|scheme|path) != method|scheme|path || len(r.Path) == 0 ||
			r.Path[0] != '/' && (string(r.Path) != "*" || string(r.Method) != "OPTIONS")
	}
	if s.haveHost && s.havePs&authority != 0 && !h1.EqualFold(s.bytes(s.host, true), r.Authority) {
		s.bad = true
	}
	if bytes.IndexByte(r.Authority, '@') >= 0 { // userinfo (8.3.1)
		s.bad = true
	}
	// What a request line and Host of HTTP/1.1 could not carry as it is.
	if !all(r.Method, cToken) || len(r.Method) == 0 || !all(r.Path, cPath) || !all(r.Authority, cAuthority) ||
		s.havePs&scheme != 0 && (len(r.Scheme) == 0 || !all(r.Scheme, cScheme) || lc(r.Scheme[0]) < 'a' || lc(r.Scheme[0]) > 'z') ||
		s.haveHost && !all(s.bytes(s.host, true), cAuthority) {
		s.bad = true
	}
}

// Character classes of the pseudo-header values, bits of chars.
const (
	cToken     = 1 << iota // a method: tchar (RFC 9110 5.6.2)
	cPath                  // a :path: visible ASCII and obs-text, no whitespace or CTL
	cAuthority             // :authority and host: RFC 3986 reg-name, IP-literal, port, userinfo's '@'
	cScheme                // after its first letter: ALPHA DIGIT "+" "-" "." (RFC 3986 3.1)
)

var chars = func() (t [256]uint8) {
	for c := 0x21; c <= 0xff; c++ {
		if c != 0x7f {
			t[c] |= cPath
		}
	}
	for _, c := range "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" {
		t[c] |= cToken | cAuthority | cScheme
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] |= cToken
	}
	for _, c := range "-._~%!$&'()*+,;=:[]@" {
		t[c] |= cAuthority
	}
	for _, c := range "+-." {
		t[c] |= cScheme
	}
	return t
}()

// all reports whether every byte of b is of class c.
func all(b []byte, c uint8) bool {
	for _, x := range b {
		if chars[x]&c == 0 {
			return false
		}
	}
	return true
}

func lc(c byte) byte { return c | 0x20 }

// validName: a regular field name, a lowercase token (RFC 9113 8.2.1,
// RFC 9110 5.1): what HTTP/1.1 could carry too, as nghttp2 requires.
func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if chars[c]&cToken == 0 || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// validValue: no NUL, CR or LF, no leading or trailing whitespace
// (RFC 9113 8.2.1).
func validValue(b []byte) bool {
	for _, c := range b {
		if c == 0 || c == '\r' || c == '\n' {
			return false
		}
	}
	if n := len(b); n > 0 && (b[0] == ' ' || b[0] == '\t' || b[n-1] == ' ' || b[n-1] == '\t') {
		return false
	}
	return true
}

// connSpecific reports a connection-specific field (RFC 9113 8.2.2),
// name in lower case (validName): HTTP/1.1's (h1.ConnectionFields) but
// te: trailers, and Transfer-Encoding, which HTTP/2's framing replaces.
func connSpecific(name, value []byte) bool {
	if string(name) == "transfer-encoding" {
		return true
	}
	for _, f := range h1.ConnectionFields {
		if string(name) == f {
			return f != "te" || !h1.EqualFold(value, []byte("trailers"))
		}
	}
	return false
}

func parseCL(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}
