package h1

import (
	"bytes"
	"math"
)

// tchar reports the token characters of RFC 9110 5.6.2.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// hostChar reports the characters of uri-host [ ":" port ] (RFC 3986:
// reg-name, IP-literal, pct-encoded).
var hostChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "-._~!$&'()*+,;=:[]%" {
		t[c] = true
	}
	return t
}()

// ctlTab holds the bytes not allowed in a field value: CTLs except HTAB, and DEL.
var ctlTab = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = c != '\t'
	}
	t[0x7f] = true
	return t
}()

// ctl reports bytes not allowed in a field value: CTLs except HTAB, and DEL.
func ctl(c byte) bool { return ctlTab[c] }

// ValidField reports whether Parse accepts name and value as a header
// field (value without its surrounding whitespace): name a token, value
// without control characters but HTAB.
func ValidField(name, value []byte) bool {
	if !isToken(name) {
		return false
	}
	for _, c := range value {
		if ctl(c) {
			return false
		}
	}
	return true
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tchar[c] {
			return false
		}
	}
	return true
}

// eqFold reports whether b equals the lower-case ASCII string s, ignoring case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// NextElem splits the first element off a comma-separated list (RFC 9110
// 5.6.1), trimmed of OWS (spaces and tabs); empty elements are returned as
// empty.
func NextElem(list []byte) (elem, rest []byte) {
	if i := bytes.IndexByte(list, ','); i >= 0 {
		return trimOWS(list[:i]), list[i+1:]
	}
	return trimOWS(list), nil
}

// ListHas reports whether the comma-separated list v has the token s
// (lower-case), ignoring case. An empty element is no element (RFC 9110
// 5.6.1: a recipient ignores it), so that no list has "".
func ListHas(v []byte, s string) bool {
	for len(v) > 0 {
		var e []byte
		e, v = NextElem(v)
		if len(e) > 0 && eqFold(e, s) {
			return true
		}
	}
	return false
}

// line returns the line starting at buf[i] without its CRLF and the index
// after the CRLF; ok false with err nil means no LF yet.
func line(buf []byte, i int) (ln []byte, next int, ok bool, err *Error) {
	j := bytes.IndexByte(buf[i:], '\n')
	if j < 0 {
		return nil, 0, false, nil
	}
	j += i
	if j == i || buf[j-1] != '\r' {
		return nil, 0, false, errBareLF
	}
	return buf[i : j-1], j + 1, true, nil
}

// parseFields appends the field lines starting at buf[i] to *hs up to and
// including the empty line that ends the head; it returns the index after
// that line, or 0 if the head is not complete yet. A head, complete or not,
// longer than lim.MaxHead is an error.
func parseFields(buf []byte, i int, hs *[]Header, lim Limits) (int, *Error) {
	n, e := fieldLines(buf, i, hs, lim.MaxHeaders)
	if e == nil && (n > lim.MaxHead || n == 0 && len(buf) > lim.MaxHead) {
		return 0, errHeadTooLarge
	}
	return n, e
}

func fieldLines(buf []byte, i int, hs *[]Header, max int) (int, *Error) {
	for i < len(buf) {
		ln, next, ok, err := line(buf, i)
		if err != nil {
			return 0, err
		}
		if !ok {
			// An incomplete line can still be wrong already.
			if c := buf[i]; c == ' ' || c == '\t' {
				return 0, errObsFold
			}
			return 0, nil
		}
		i = next
		if len(ln) == 0 {
			return i, nil
		}
		if ln[0] == ' ' || ln[0] == '\t' {
			return 0, errObsFold
		}
		k := 0
		for k < len(ln) && tchar[ln[k]] {
			k++
		}
		if k == len(ln) || ln[k] != ':' {
			if k > 0 && k < len(ln) && (ln[k] == ' ' || ln[k] == '\t') {
				return 0, errSpaceBeforeColn
			}
			return 0, errFieldName
		}
		if k == 0 {
			return 0, errFieldName
		}
		v := trimOWS(ln[k+1:])
		for _, c := range v {
			if ctl(c) {
				return 0, errFieldValue
			}
		}
		if len(*hs) >= max {
			return 0, errTooManyHeaders
		}
		*hs = append(*hs, Header{Name: ln[:k], Value: v})
	}
	return 0, nil
}

// parseCL parses a Content-Length value, which may be a list of identical
// decimal values (RFC 9110 8.6). ok is false for anything else, including
// differing values, empty elements and values above MaxInt64.
func parseCL(v []byte) (n int64, ok bool) {
	first := true
	for {
		var e []byte
		e, v = NextElem(v)
		if len(e) == 0 {
			return 0, false
		}
		var x int64
		for _, c := range e {
			if c < '0' || c > '9' {
				return 0, false
			}
			d := int64(c - '0')
			if x > (math.MaxInt64-d)/10 {
				return 0, false
			}
			x = x*10 + d
		}
		if !first && x != n {
			return 0, false
		}
		n, first = x, false
		if v == nil {
			return n, true
		}
	}
}

// teState accumulates the transfer codings of Transfer-Encoding fields.
type teState struct {
	seen      bool // a Transfer-Encoding field is present
	codings   int  // non-empty elements
	chunked   int  // how many are "chunked"
	lastChunk bool // the last non-empty element is "chunked"
	empty     bool // an empty element or field: "chunked," or a second, empty field
}

func (t *teState) add(v []byte) {
	t.seen = true
	for {
		e, rest := NextElem(v)
		if len(e) == 0 {
			t.empty = true
		} else {
			t.codings++
			t.lastChunk = eqFold(e, "chunked")
			if t.lastChunk {
				t.chunked++
			}
		}
		if rest == nil {
			return
		}
		v = rest
	}
}

// fields is what a head's fields say about framing, persistence and routing.
type fields struct {
	clSeen    bool
	cl        int64
	te        teState
	conn      connState
	upgrade   []byte // the first non-empty Upgrade field's value
	host      []byte // non-nil when a Host field is present
	expect100 bool
}

// Outcomes of fields.scan.
const (
	fieldsOK    = iota
	clInvalid   // a Content-Length value is not a valid list of one value
	clDiffer    // Content-Length fields differ
	hostInvalid // Host is repeated, or neither empty nor uri-host [":" port]
	connOptions // the Connection fields list more than MaxConnectionOptions
)

// scan reads hs; Host and Expect are looked at only if request.
func (f *fields) scan(hs []Header, request bool) int {
	for _, h := range hs {
		switch len(h.Name) {
		case 4:
			if request && eqFold(h.Name, "host") {
				if f.host != nil {
					return hostInvalid
				}
				if len(h.Value) > 0 && !ValidAuthority(h.Value) {
					return hostInvalid
				}
				f.host = h.Value[:len(h.Value):len(h.Value)] // non-nil even if empty
			}
		case 6:
			if request && eqFold(h.Name, "expect") && eqFold(h.Value, "100-continue") {
				f.expect100 = true
			}
		case 7:
			if eqFold(h.Name, "upgrade") && len(f.upgrade) == 0 {
				f.upgrade = h.Value
			}
		case 10:
			if eqFold(h.Name, "connection") {
				if f.conn.add(h.Value); f.conn.options > MaxConnectionOptions {
					return connOptions
				}
			}
		case 14:
			if eqFold(h.Name, "content-length") {
				v, ok := parseCL(h.Value)
				if !ok {
					return clInvalid
				}
				if f.clSeen && v != f.cl {
					return clDiffer
				}
				f.clSeen, f.cl = true, v
			}
		case 17:
			if eqFold(h.Name, "transfer-encoding") {
				f.te.add(h.Value)
			}
		}
	}
	return fieldsOK
}

// connState is what Connection fields say.
type connState struct {
	close, keepAlive, upgrade bool
	options                   int // list elements so far, empty ones included
}

func (c *connState) add(v []byte) {
	for len(v) > 0 {
		var e []byte
		e, v = NextElem(v)
		c.options++
		switch {
		case eqFold(e, "close"):
			c.close = true
		case eqFold(e, "keep-alive"):
			c.keepAlive = true
		case eqFold(e, "upgrade"):
			c.upgrade = true
		}
	}
}

// parseVersion parses "HTTP/1.0" or "HTTP/1.1". supported is false for a
// well-formed version other than those; ok is false for a malformed one.
func parseVersion(b []byte) (minor int, ok, supported bool) {
	if len(b) != 8 || string(b[:5]) != "HTTP/" || b[6] != '.' ||
		b[5] < '0' || b[5] > '9' || b[7] < '0' || b[7] > '9' {
		return 0, false, false
	}
	if b[5] != '1' || b[7] > '1' {
		return 0, true, false
	}
	return int(b[7] - '0'), true, true
}

// ConnectionFields are the fields RFC 9110 7.6.1 makes connection-specific
// whatever a Connection field names (HTTP/2 has none of them, RFC 9113
// 8.2.2, but TE: trailers in a request), in lower case: every hop removes
// them. A proxy's lists of the fields it does not pass on begin with them.
var ConnectionFields = [...]string{"connection", "keep-alive", "proxy-connection", "te", "upgrade"}

// hopByHop reports the ConnectionFields and every field named in the
// Connection fields of hs. Transfer-Encoding is not reported (chunked bodies
// are forwarded as they are, with their header), nor are Content-Length and
// Host even when Connection names them: dropping them would change the
// framing the next hop sees. Trailer is end-to-end (RFC 9110 6.6.2) and is
// kept in a head since trailers are forwarded with the body (a trailer
// section, which has no use for it, loses it: the proxy's lists).
func hopByHop(hs []Header, name []byte) bool {
	for _, f := range ConnectionFields {
		if eqFold(name, f) {
			return true
		}
	}
	switch {
	case eqFold(name, "transfer-encoding"), eqFold(name, "content-length"),
		eqFold(name, "host"):
		return false
	}
	for _, h := range hs {
		if eqFold(h.Name, "connection") && ListHasName(h.Value, name) {
			return true
		}
	}
	return false
}

// ListHasName is ListHas for a name of any case: whether the
// comma-separated list v has the element name, ignoring ASCII case (an
// empty element, and so an empty name, never).
func ListHasName(v, name []byte) bool {
	for len(v) > 0 {
		var e []byte
		e, v = NextElem(v)
		if len(e) > 0 && len(e) == len(name) && EqualFold(e, name) {
			return true
		}
	}
	return false
}

// EqualFold reports whether a and b are equal under ASCII case folding
// (field names, tokens; no Unicode folding, which HTTP does not have).
func EqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
