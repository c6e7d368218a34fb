package h1

import "bytes"

// maxLeadingCRLF bounds the empty lines skipped before a request line
// (RFC 9112 2.2 asks servers to ignore at least one).
const maxLeadingCRLF = 4

// Request is a parsed request head. Its slices point into the buffer given to
// Parse and are valid while that buffer is.
type Request struct {
	// Method and Target are as received. Target is in origin-form ("/p?q"),
	// absolute-form ("http://h/p"), "*" (OPTIONS only) or, for CONNECT
	// only, authority-form ("h:443").
	Method, Target []byte
	// Minor is the minor version: HTTP/1.<Minor>, 0 or 1.
	Minor int
	// Headers holds the field lines in order. Parse reuses its storage:
	// it appends to Headers[:0].
	Headers []Header
	// Host is the Host field's value (required exactly once in HTTP/1.1):
	// empty, or host [":" port] as ValidAuthority accepts.
	// With an absolute-form or CONNECT target it must equal the target's
	// authority, ignoring case.
	Host []byte
	// Framing is NoBody, Length or Chunked.
	Framing Framing
	// ContentLength is the body length when Framing is Length.
	ContentLength int64
	// KeepAlive says another request may follow on the connection: HTTP/1.1
	// unless Connection has "close", HTTP/1.0 only with "keep-alive".
	KeepAlive bool
	// Expect100 is set by "Expect: 100-continue" in an HTTP/1.1 request.
	Expect100 bool
	// Upgrade is the first non-empty Upgrade field's value when Connection
	// lists "upgrade" in an HTTP/1.1 request, else nil.
	Upgrade []byte
}

// Parse parses the request head at the start of buf into r. n is the length of the
// head, empty lines skipped before it and its final CRLF CRLF included. n == 0
// with a nil error means the head is incomplete: read more and call Parse
// again with the longer buffer, unless buf is already longer than
// lim.MaxHead, which Parse reports as a 431 (or 414 when the request target
// alone is too long). Errors are *Error. r's fields are meaningful only when
// n > 0. Parse does not allocate once Headers has room for the fields.
func (r *Request) Parse(buf []byte, lim Limits) (n int, err error) {
	n, e := r.parse(buf, lim.withDefaults())
	if e != nil {
		return 0, e
	}
	return n, nil
}

func (r *Request) parse(buf []byte, lim Limits) (int, *Error) {
	hs := r.Headers[:0]
	*r = Request{Headers: hs}
	i := 0
	for k := 0; ; k++ {
		if i >= len(buf) {
			return 0, nil
		}
		if buf[i] == '\n' {
			return 0, errBareLF
		}
		if buf[i] != '\r' {
			break
		}
		if i+1 >= len(buf) {
			return 0, nil
		}
		if buf[i+1] != '\n' {
			return 0, errBareCR
		}
		if k == maxLeadingCRLF {
			return 0, errLeadingLines
		}
		i += 2
	}
	ln, next, ok, e := line(buf, i)
	if e != nil {
		return 0, e
	}
	if !ok {
		// Incomplete request line: a target already too long is 414.
		rest := buf[i:]
		if sp := bytes.IndexByte(rest, ' '); sp >= 0 {
			t := rest[sp+1:]
			if sp2 := bytes.IndexByte(t, ' '); sp2 >= 0 {
				t = t[:sp2]
			}
			if len(t) > lim.MaxTarget {
				return 0, errTargetTooLong
			}
		}
		if len(buf) > lim.MaxHead {
			return 0, errHeadTooLarge
		}
		return 0, nil
	}
	if e := r.parseLine(ln, lim); e != nil {
		return 0, e
	}
	n, e := parseFields(buf, next, &r.Headers, lim)
	if e != nil || n == 0 {
		return 0, e
	}
	return n, r.semantics()
}

// parseLine parses method SP request-target SP HTTP-version.
func (r *Request) parseLine(ln []byte, lim Limits) *Error {
	sp := bytes.IndexByte(ln, ' ')
	if sp < 0 {
		return errRequestLine
	}
	r.Method = ln[:sp]
	if !isToken(r.Method) {
		return errMethod
	}
	rest := ln[sp+1:]
	sp = bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return errRequestLine
	}
	r.Target = rest[:sp]
	if len(r.Target) > lim.MaxTarget {
		return errTargetTooLong
	}
	minor, ok, supported := parseVersion(rest[sp+1:])
	if !ok {
		return errVersion
	}
	if !supported {
		return errVersionUnsupp
	}
	r.Minor = minor
	return checkTarget(r.Method, r.Target)
}

// ValidTarget reports whether Parse accepts t as the request target of
// method: the target of a request line another protocol (HTTP/2's :path)
// is to be written into.
func ValidTarget(method, t []byte) bool { return checkTarget(method, t) == nil }

// checkTarget accepts origin-form, absolute-form, "*" for OPTIONS and, for
// CONNECT, authority-form only.
func checkTarget(method, t []byte) *Error {
	if len(t) == 0 {
		return errTarget
	}
	for i, c := range t {
		// VCHAR only; no fragment (RFC 9112 3.2); "%" starts pct-encoded.
		if c <= ' ' || c >= 0x7f || c == '#' {
			return errTarget
		}
		if c == '%' && (i+2 >= len(t) || Unhex(t[i+1]) < 0 || Unhex(t[i+2]) < 0) {
			return errTarget
		}
	}
	switch {
	case string(method) == "CONNECT":
		// authority-form only, port required (RFC 9112 3.2.3).
		if p := bytes.LastIndexByte(t, ':'); !ValidAuthority(t) || p < 0 || p == len(t)-1 || bytes.IndexByte(t[p:], ']') >= 0 {
			return errTarget
		}
		return nil
	case t[0] == '/':
		return nil
	case len(t) == 1 && t[0] == '*':
		if string(method) == "OPTIONS" {
			return nil
		}
		return errTarget
	}
	// absolute-form: scheme ":" hier-part, scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
	for i, c := range t {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			// hier-part must be "//" authority path-abempty [ "?" query ].
			rest := t[i+1:]
			if len(rest) < 2 || rest[0] != '/' || rest[1] != '/' {
				return errTarget
			}
			rest = rest[2:]
			end := bytes.IndexAny(rest, "/?")
			if end < 0 {
				end = len(rest)
			}
			if !ValidAuthority(rest[:end]) {
				return errTarget
			}
			return nil
		default:
			return errTarget
		}
	}
	return errTarget
}

// SplitTarget splits an absolute-form request target ("http://h:80/p?q")
// into its authority ("h:80") and the rest, its path and query ("/p?q"),
// which is empty or starts with "?" when the path is empty (RFC 9112 3.2.1
// has an empty path sent as "/"). Any other form, origin-form ("/p?q"),
// "*" or CONNECT's authority-form ("h:443"), has a nil authority and is
// all path. The target is one Parse accepted: it has no fragment, so the
// authority ends at the first "/" or "?" after "://".
func SplitTarget(target []byte) (authority, path []byte) {
	if len(target) == 0 || target[0] == '/' || target[0] == '*' {
		return nil, target
	}
	i := bytes.Index(target, []byte("://"))
	if i < 0 {
		return nil, target // CONNECT's authority-form
	}
	a := target[i+3:]
	end := bytes.IndexAny(a, "/?")
	if end < 0 {
		end = len(a)
	}
	return a[:end], a[end:]
}

// defaultPort returns the default port of an absolute-form target's
// scheme, http or https (RFC 9110 4.2.1, 4.2.2), case-insensitively; nil
// for another scheme or form.
func defaultPort(target []byte) []byte {
	i := bytes.Index(target, []byte("://"))
	switch {
	case i < 0:
		return nil
	case EqualFold(target[:i], []byte("http")):
		return []byte("80")
	case EqualFold(target[:i], []byte("https")):
		return []byte("443")
	}
	return nil
}

// sameAuthority reports whether authorities a and b name the same host,
// case-insensitively, and the same port, a port left out or empty being
// def where def is not nil ("http://x:80/" and "http://x/" are one, RFC
// 9110 4.2.3).
func sameAuthority(a, b, def []byte) bool {
	ha, pa := hostPort(a)
	hb, pb := hostPort(b)
	if def != nil {
		if len(pa) == 0 {
			pa = def
		}
		if len(pb) == 0 {
			pb = def
		}
	}
	return len(ha) == len(hb) && EqualFold(ha, hb) && bytes.Equal(pa, pb)
}

// hostPort splits an authority at its port's colon (a bracketed IPv6
// literal's colons aside); port is empty for none.
func hostPort(a []byte) (host, port []byte) {
	i := bytes.LastIndexByte(a, ':')
	if i < 0 || bytes.IndexByte(a[i:], ']') >= 0 {
		return a, nil
	}
	return a[:i], a[i+1:]
}

// ValidAuthority reports whether a is host [ ":" port ] where host is a
// non-empty reg-name of unreserved and sub-delims characters or a bracketed
// IPv6 literal, and port is digits: a non-empty Host field value that Parse
// accepts. Userinfo ("@", deprecated and a phishing vector, RFC 9110 4.2.4)
// and percent-encoding are rejected.
func ValidAuthority(a []byte) bool {
	host, port := a, []byte(nil)
	if len(a) > 0 && a[0] == '[' {
		j := bytes.IndexByte(a, ']')
		if j < 2 {
			return false
		}
		for _, c := range a[1:j] {
			if Unhex(c) < 0 && c != ':' && c != '.' {
				return false
			}
		}
		host, port = nil, a[j+1:]
	} else if j := bytes.IndexByte(a, ':'); j >= 0 {
		host, port = a[:j], a[j:]
		if len(host) == 0 {
			return false
		}
	} else if len(host) == 0 {
		return false
	}
	for _, c := range host {
		if !hostChar[c] || c == '%' || c == ':' || c == '[' || c == ']' {
			return false
		}
	}
	if len(port) > 0 {
		if port[0] != ':' {
			return false
		}
		for _, c := range port[1:] {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// semantics reads the fields that decide framing, persistence and routing.
func (r *Request) semantics() *Error {
	var f fields
	switch f.scan(r.Headers, true) {
	case clInvalid:
		return errContentLength
	case clDiffer:
		return errCLMismatch
	case hostInvalid:
		return errHost
	case connOptions:
		return errConnOptions
	}
	r.Host, r.ContentLength, r.Expect100 = f.host, f.cl, f.expect100
	if r.Minor == 1 && f.host == nil {
		return errHost
	}
	// An absolute-form target's authority overrides Host (RFC 9112 3.2.2),
	// as does CONNECT's authority-form; a proxy routing by one while the
	// next hop uses the other could be steered, so they must agree.
	a, _ := SplitTarget(r.Target)
	def := defaultPort(r.Target)
	if string(r.Method) == "CONNECT" {
		a, def = r.Target, nil // authority-form
	}
	if a != nil && f.host != nil && !sameAuthority(a, r.Host, def) {
		return errHostTarget
	}
	if r.Minor == 0 {
		// HTTP/1.0 requests' Expect and Upgrade are ignored (RFC 9110
		// 10.1.1, 7.8).
		r.Expect100, f.conn.upgrade = false, false
	}
	switch {
	case f.te.seen:
		switch {
		case r.Minor == 0:
			return errTE10
		case f.clSeen:
			return errCLAndTE
		case !f.te.lastChunk || f.te.chunked != 1 || f.te.empty:
			return errTE
		case f.te.codings != 1:
			return errTEUnsupported
		}
		r.Framing, r.ContentLength = Chunked, 0
	case f.clSeen:
		r.Framing = Length
	}
	r.KeepAlive = !f.conn.close && (r.Minor == 1 || f.conn.keepAlive)
	if f.conn.upgrade && len(f.upgrade) > 0 {
		r.Upgrade = f.upgrade
	}
	return nil
}

// HopByHop reports whether the field name (any case) is connection-specific
// in this request and must not be forwarded: Connection, Keep-Alive,
// Proxy-Connection, TE, Upgrade and every name listed in the request's
// Connection fields, except Transfer-Encoding, Content-Length and Host, which
// are never reported (the proxy forwards chunked bodies as they are, and
// dropping a framing field on request would desynchronise the next hop).
// Trailer is end-to-end (RFC 9110 6.6.2) and is not reported.
func (r *Request) HopByHop(name []byte) bool { return hopByHop(r.Headers, name) }
