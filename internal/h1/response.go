package h1

// Response is a parsed response head. Its slices point into the buffer given
// to Parse and are valid while that buffer is.
type Response struct {
	// Minor is the minor version: HTTP/1.<Minor>, 0 or 1.
	Minor int
	// Status is the three-digit status code, 100 to 999.
	Status int
	// Reason is the reason phrase, possibly empty.
	Reason []byte
	// Headers holds the field lines in order. Parse reuses its storage:
	// it appends to Headers[:0].
	Headers []Header
	// Framing is how the body ends (RFC 9112 6.3).
	Framing Framing
	// ContentLength is the body length when Framing is Length.
	ContentLength int64
	// KeepAlive says the server keeps the connection open after this
	// response: false for UntilClose framing, for a response with both
	// Transfer-Encoding and Content-Length, for 101 Switching Protocols
	// (the connection is no longer HTTP), with "Connection: close", and for
	// HTTP/1.0 without "Connection: keep-alive".
	KeepAlive bool
	// Upgrade is the first non-empty Upgrade field's value when Connection
	// lists "upgrade", else nil; a 101 without it is an error.
	Upgrade []byte

	// clAndTE: both Content-Length and Transfer-Encoding were received;
	// HopByHop then reports Content-Length.
	clAndTE bool
}

// Parse parses the response head at the start of buf; head says the request
// was HEAD. n, errors and limits are as for Request.Parse, except that every
// error has Status 502 (MaxTarget does not apply). Framing follows RFC 9112
// 6.3: 1xx, 204, 304 and responses to HEAD have no body whatever their
// fields say; then Transfer-Encoding (its final coding must be chunked, and
// with Content-Length as well the connection is not reused); then
// Content-Length; else the body runs until the server closes. A 1xx response
// is returned like any other: the caller forwards it and parses the next.
// r's fields are meaningful only when n > 0.
func (r *Response) Parse(buf []byte, head bool, lim Limits) (n int, err error) {
	n, e := r.parse(buf, head, lim.withDefaults())
	if e != nil {
		return 0, respErr(e)
	}
	return n, nil
}

func (r *Response) parse(buf []byte, head bool, lim Limits) (int, *Error) {
	hs := r.Headers[:0]
	*r = Response{Headers: hs}
	ln, next, ok, e := line(buf, 0)
	if e != nil {
		return 0, e
	}
	if !ok {
		if len(buf) > lim.MaxHead {
			return 0, errHeadTooLarge
		}
		return 0, nil
	}
	if e := r.parseLine(ln); e != nil {
		return 0, e
	}
	n, e := parseFields(buf, next, &r.Headers, lim)
	if e != nil || n == 0 {
		return 0, e
	}
	return n, r.semantics(head)
}

// parseLine parses HTTP-version SP status-code SP [ reason-phrase ]; the SP
// before an empty reason may be missing.
func (r *Response) parseLine(ln []byte) *Error {
	if len(ln) < 12 || ln[8] != ' ' {
		return errStatusLine
	}
	minor, ok, supported := parseVersion(ln[:8])
	if !ok {
		return errStatusLine
	}
	if !supported {
		return errRespVersion
	}
	r.Minor = minor
	s := 0
	for _, c := range ln[9:12] {
		if c < '0' || c > '9' {
			return errStatusLine
		}
		s = s*10 + int(c-'0')
	}
	if s < 100 {
		return errStatusLine
	}
	r.Status = s
	rest := ln[12:]
	if len(rest) > 0 {
		if rest[0] != ' ' {
			return errStatusLine
		}
		rest = rest[1:]
	}
	for _, c := range rest {
		if ctl(c) {
			return errStatusLine
		}
	}
	r.Reason = rest
	return nil
}

// semantics reads the fields that decide framing and persistence.
func (r *Response) semantics(head bool) *Error {
	var f fields
	switch f.scan(r.Headers, false) {
	case clInvalid:
		return errRespCL
	case clDiffer:
		return errRespCLMismatch
	case connOptions:
		return errRespConnOpts
	}
	r.ContentLength, r.clAndTE = f.cl, f.clSeen && f.te.seen
	// Both framing fields are an error (RFC 9112 6.3 #3) even where
	// neither frames the body (HEAD, 1xx, 204, 304): a server that sends
	// them may frame its next response otherwise than it says.
	r.KeepAlive = !f.conn.close && (r.Minor == 1 || f.conn.keepAlive) && !r.clAndTE
	if f.conn.upgrade && len(f.upgrade) > 0 {
		r.Upgrade = f.upgrade
	}
	if r.Status == 101 && r.Upgrade == nil {
		// RFC 9110 7.8: a 101 sends Upgrade, listed in Connection; without
		// them nothing says what the connection now carries.
		return errResp101
	}
	// Transfer-Encoding is checked even where it does not frame the body:
	// a server that sends a malformed one is not to be trusted.
	if f.te.seen {
		switch {
		case r.Minor == 0:
			return errRespTE10
		case !f.te.lastChunk || f.te.chunked != 1 || f.te.empty:
			return errRespTE
		}
	}
	switch {
	case head || r.Status < 200 || r.Status == 204 || r.Status == 304:
		r.Framing, r.ContentLength = NoBody, 0
		if r.Status == 101 {
			r.KeepAlive = false
		}
	case f.te.seen:
		r.Framing, r.ContentLength = Chunked, 0
	case f.clSeen:
		r.Framing = Length
	default:
		r.Framing, r.KeepAlive = UntilClose, false
	}
	return nil
}

// HopByHop is Request.HopByHop for this response's fields, except that it
// reports Content-Length when Transfer-Encoding came with it: RFC 9112 6.3
// #3 has an intermediary remove it before forwarding such a message, since
// a recipient that framed the body by it would read another message.
func (r *Response) HopByHop(name []byte) bool {
	if r.clAndTE && eqFold(name, "content-length") {
		return true
	}
	return hopByHop(r.Headers, name)
}
