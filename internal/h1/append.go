package h1

import "strconv"

// AppendRequestLine appends "method SP target SP HTTP/1.<minor> CRLF" to dst.
func AppendRequestLine(dst, method, target []byte, minor int) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	dst = append(dst, " HTTP/1."...)
	dst = append(dst, byte('0'+minor))
	return append(dst, '\r', '\n')
}

// AppendStatusLine appends "HTTP/1.<minor> SP status SP reason CRLF" to dst.
func AppendStatusLine(dst []byte, minor, status int, reason []byte) []byte {
	dst = append(dst, "HTTP/1."...)
	dst = append(dst, byte('0'+minor), ' ')
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, reason...)
	return append(dst, '\r', '\n')
}

// AppendHeader appends the field line "name: value CRLF" to dst. The caller
// vouches for name and value (they came from Parse or are constants).
func AppendHeader(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':', ' ')
	dst = append(dst, value...)
	return append(dst, '\r', '\n')
}

// appendHeaders appends the fields of hs for which drop is false (all if
// drop is nil).
func appendHeaders(dst []byte, hs []Header, drop func(name []byte) bool) []byte {
	for _, h := range hs {
		if drop == nil || !drop(h.Name) {
			dst = AppendHeader(dst, h.Name, h.Value)
		}
	}
	return dst
}

// AppendHeaders appends the request's fields for which drop reports false
// (all if drop is nil), without the empty line ending the head, so that the
// caller can add fields of its own. To drop hop-by-hop fields pass
// r.HopByHop (a method value: bind it once per Request to avoid allocating).
func (r *Request) AppendHeaders(dst []byte, drop func(name []byte) bool) []byte {
	return appendHeaders(dst, r.Headers, drop)
}

// AppendHead appends the request line, the fields drop keeps and the empty
// line: a complete head to forward.
func (r *Request) AppendHead(dst []byte, drop func(name []byte) bool) []byte {
	dst = AppendRequestLine(dst, r.Method, r.Target, r.Minor)
	dst = appendHeaders(dst, r.Headers, drop)
	return append(dst, '\r', '\n')
}

// AppendHeaders is Request.AppendHeaders for the response's fields.
func (r *Response) AppendHeaders(dst []byte, drop func(name []byte) bool) []byte {
	return appendHeaders(dst, r.Headers, drop)
}

// AppendHead appends the status line, the fields drop keeps and the empty
// line.
func (r *Response) AppendHead(dst []byte, drop func(name []byte) bool) []byte {
	dst = AppendStatusLine(dst, r.Minor, r.Status, r.Reason)
	dst = appendHeaders(dst, r.Headers, drop)
	return append(dst, '\r', '\n')
}
