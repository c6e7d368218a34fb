package proxy

import (
	"bytes"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/hpack"
)

// Request fields whose names have an underscore (headers_with_underscores):
// a server that names fields as CGI does (HTTP_X_FORWARDED_FOR, in PHP,
// WSGI, Rack) reads "X_Forwarded_For" as "X-Forwarded-For", so a client
// could pass the forwarding fields the proxy controls under another
// spelling. Some read other separators so too: lighttpd's CGI, FastCGI
// and SCGI make every byte of a name not a letter or digit '_'
// ("X.Forwarded~For"), PHP makes '.' '_' in $_SERVER's names.

// dropUnderscored reports a request field the listener drops for an
// underscore in its name, counting it on loop id: with
// headers_with_underscores drop, any; else a forwarding field spelled
// with another separator than '-' (forwardingAlias), from any client,
// trusted or not (a trusted client's forwarding fields pass under their
// own names). Loop goroutine.
func (l *listener) dropUnderscored(id int, name []byte) bool {
	if (l.cfg.HeadersWithUnderscores != UnderscoresDrop || bytes.IndexByte(name, '_') < 0) && (!respelled(name) || !forwardingAlias(name)) {
		return false
	}
	l.stats[id].underscoreDropped.inc()
	return true
}

// respelled reports a name with a byte that is not a letter, a digit or
// '-': one a server naming fields as CGI does may read as another.
func respelled(name []byte) bool {
	for _, c := range name {
		if foldDash(c) == '-' && c != '-' {
			return true
		}
	}
	return false
}

// forwardingAlias reports a name that, any separator read as '-'
// (foldDash) and in any case, is one of the forwarding fields
// (forwardingFields, or begins with forwardingPrefix).
func forwardingAlias(name []byte) bool {
	if len(name) >= len(forwardingPrefix) && equalDash(name[:len(forwardingPrefix)], forwardingPrefix) {
		return true
	}
	for _, f := range forwardingFields {
		if equalDash(name, f) {
			return true
		}
	}
	return false
}

// equalDash reports whether a and b are equal under ASCII case folding
// with any byte not a letter or digit read as '-' (as CGI's HTTP_* names
// are made, '-' and '_' being the same there, and lighttpd's every other
// separator too).
func equalDash(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if foldDash(a[i]) != foldDash(b[i]) {
			return false
		}
	}
	return true
}

// foldDash is c in lower case, '-' for any byte not a letter or digit.
func foldDash(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return c
	}
	return '-'
}

// dashedName is name as equalDash compares it: lower case, '-' for any
// byte not a letter or digit (a rule's names, HeaderRules.validate).
func dashedName(name string) string {
	b := []byte(name)
	for i, c := range b {
		b[i] = foldDash(c)
	}
	return string(b)
}

// rejectsUnderscores reports a request the listener answers 400 for a
// field name with an underscore (headers_with_underscores reject): fs
// are its fields (h1.Header, hpack.Field), name gives a field's name.
func rejectsUnderscores[F any](l *listener, fs []F, name func(*F) []byte) bool {
	if l.cfg.HeadersWithUnderscores != UnderscoresReject {
		return false
	}
	for i := range fs {
		if bytes.IndexByte(name(&fs[i]), '_') >= 0 {
			return true
		}
	}
	return false
}

// h1Name and h2Name give an HTTP/1.1 and an HTTP/2 field's name, for
// rejectsUnderscores.
func h1Name(h *h1.Header) []byte   { return h.Name }
func h2Name(f *hpack.Field) []byte { return f.Name }
