package hello

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// MaxHeader is the largest request head accepted; bigger ones get 431.
const MaxHeader = 8 << 10

var (
	head          = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n")
	keepAliveLine = []byte("Connection: keep-alive\r\n")
	closeLine     = []byte("Connection: close\r\n")
	crlf          = []byte("\r\n")
	body          = []byte("hello, world")
	bad           = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	tooLarge      = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	continue100   = []byte("HTTP/1.1 100 Continue\r\n\r\n")
	notImpl       = []byte("HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	badVersion    = []byte("HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// After an error response, or the response to a request that does not
// keep the connection, the server closes the connection the way net/http
// does (closeWriteAndWait), with engine.Conn.CloseLinger: FIN after the
// response, then what the client still sends is read and dropped, for at
// most LingerTimeout after the FIN and LingerBytes, until the client
// closes its side. Closing at once, with request bytes unread or still
// arriving, makes the kernel send RST, and a client that has not read the
// response yet may lose it.
const (
	LingerTimeout = 500 * time.Millisecond
	LingerBytes   = 256 << 10
)

// MaxBody is the largest request body accepted (Content-Length, or the sum
// of a chunked body's chunks); a larger one is malformed here.
const MaxBody = 1 << 20

// Errors from ParseRequest.
var (
	ErrMalformed      = errors.New("hello: malformed request")
	ErrHeaderLarge    = errors.New("hello: request head too large")
	ErrNotImplemented = errors.New("hello: transfer coding not implemented")
	ErrVersion        = errors.New("hello: HTTP major version not supported")
)

// Request is what the server needs of one parsed request.
type Request struct {
	Len       int  // bytes of the request's head; 0: incomplete
	Body      int  // bytes of the Content-Length body that follows the head
	Chunked   bool // a chunked body follows the head (see ChunkedBody)
	KeepAlive bool // the connection stays open after it
	HTTP10    bool // an HTTP/1.0 request (keep-alive only when asked, and then said)
	Head      bool // a HEAD request: the response has no body
	Continue  bool // an HTTP/1.1 request with Expect: 100-continue
}

// ParseRequest looks for one complete request head at the start of b. It
// returns a Request with Len 0 when more bytes are needed; empty lines
// before the request line are part of its Len. The body, Body bytes or
// chunked, follows the head and need not be in b.
//
// As RFC 9112 asks, these are malformed: a method or field name that is
// not a token, a request-target with whitespace or control characters,
// whitespace before a field name's colon, several Content-Length headers or
// one that is not a number up to MaxBody, an HTTP/1.1 request without a
// Host header, any request with several or with a value no host has
// (section 3.2), and Transfer-Encoding with Content-Length, in an HTTP/1.0
// request, or without chunked as its final coding (section 6.3). Codings
// other than chunked are ErrNotImplemented. A chunked request has Chunked
// set: its body is read with a ChunkedBody.
//
// The version must be HTTP/DIGIT.DIGIT (RFC 9112 section 2.3), else the
// request is malformed; a major version other than 1 is ErrVersion (505, RFC
// 9110 section 15.6.6), and HTTP/1.x above 1.1 is taken as HTTP/1.1.
func ParseRequest(b []byte) (Request, error) {
	var r Request
	// Empty lines before the request line are ignored (RFC 9112 section
	// 2.2): some clients send a CRLF after a body. They count in the head.
	lead := 0
	for lead+1 < len(b) && b[lead] == '\r' && b[lead+1] == '\n' && lead < MaxHeader {
		lead += 2
	}
	end := bytes.Index(b[lead:], []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > MaxHeader {
			return Request{}, ErrHeaderLarge
		}
		return Request{}, nil
	}
	end += lead
	if end+4 > MaxHeader {
		return Request{}, ErrHeaderLarge
	}
	head := b[lead:end]
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// Request line: METHOD SP TARGET SP HTTP/1.x
	method, line, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || !token(method) || !requestTarget(target) {
		return Request{}, ErrMalformed
	}
	r.Head = string(method) == "HEAD"
	switch {
	case len(version) != 8 || string(version[:5]) != "HTTP/" || version[6] != '.' ||
		!isDigit(version[5]) || !isDigit(version[7]):
		return Request{}, ErrMalformed
	case version[5] != '1':
		return Request{}, ErrVersion
	case version[7] == '0':
		r.HTTP10 = true
	default:
		r.KeepAlive = true
	}
	sawLength, closes, keeps, hosts := false, false, false, 0
	sawTE, unknownCoding := false, false
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok || !token(name) {
			return Request{}, ErrMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "content-length"):
			v, err := strconv.ParseUint(string(value), 10, 64)
			if err != nil || v > MaxBody || sawLength {
				return Request{}, ErrMalformed
			}
			r.Body, sawLength = int(v), true
		case equalFold(name, "host"):
			hosts++
			if !hostValue(value) {
				return Request{}, ErrMalformed
			}
		case equalFold(name, "expect"):
			r.Continue = equalFold(value, "100-continue")
		case equalFold(name, "transfer-encoding"):
			// A list of codings, over one or more lines: chunked must
			// be the last and appear once.
			sawTE = true
			for coding := range bytes.SplitSeq(value, []byte(",")) {
				coding = bytes.TrimSpace(coding)
				switch {
				case len(coding) == 0:
				case r.Chunked:
					return Request{}, ErrMalformed
				case equalFold(coding, "chunked"):
					r.Chunked = true
				default:
					unknownCoding = true
				}
			}
		case equalFold(name, "connection"):
			// A comma-separated list of options.
			for opt := range bytes.SplitSeq(value, []byte(",")) {
				opt = bytes.TrimSpace(opt)
				closes = closes || equalFold(opt, "close")
				keeps = keeps || equalFold(opt, "keep-alive")
			}
		}
	}
	if hosts > 1 || hosts == 0 && !r.HTTP10 {
		return Request{}, ErrMalformed
	}
	if sawTE {
		switch {
		case r.HTTP10 || sawLength || !r.Chunked:
			return Request{}, ErrMalformed
		case unknownCoding:
			return Request{}, ErrNotImplemented
		}
	}
	// close anywhere wins; keep-alive matters to HTTP/1.0 only.
	r.KeepAlive = !closes && (r.KeepAlive || r.HTTP10 && keeps)
	// An HTTP/1.0 server ignores the expectation (RFC 9110 section 10.1.1).
	r.Continue = r.Continue && !r.HTTP10
	r.Len = end + 4
	return r, nil
}

// maxChunkLine bounds a chunk-size line with its extensions.
const maxChunkLine = 1 << 10

// ChunkedBody follows a chunked request body (RFC 9112 section 7.1) across
// reads and consumes it without keeping it: the chunks' data may total
// MaxBody, the trailer section MaxHeader. The zero value is ready for one
// body; a ChunkedBody is not safe for concurrent use.
type ChunkedBody struct {
	state   uint8 // chunkSize, chunkData, chunkDataEnd or chunkTrailer
	left    int   // bytes of the current chunk's data still to come
	total   int   // chunk data so far
	trailer int   // trailer-section bytes so far
}

const (
	chunkSize = iota
	chunkData
	chunkDataEnd
	chunkTrailer
)

// Skip consumes the start of b: it returns how many bytes it took, and
// done once the body's final CRLF was among them (the ChunkedBody is then
// ready for the next body). A line not complete in b is left for the next
// call, which must get it again at the start of its b. The errors are
// ErrMalformed and, for a trailer section over MaxHeader, ErrHeaderLarge.
func (c *ChunkedBody) Skip(b []byte) (n int, done bool, err error) {
	for {
		switch c.state {
		case chunkSize, chunkTrailer:
			i := bytes.Index(b[n:], crlf)
			if i < 0 {
				rest := len(b) - n
				switch {
				case c.state == chunkSize && rest > maxChunkLine:
					return n, false, ErrMalformed
				case c.state == chunkTrailer && c.trailer+rest > MaxHeader:
					return n, false, ErrHeaderLarge
				}
				return n, false, nil
			}
			line := b[n : n+i]
			n += i + 2
			if c.state == chunkTrailer {
				c.trailer += i + 2
				switch {
				case c.trailer > MaxHeader:
					return n, false, ErrHeaderLarge
				case i == 0:
					*c = ChunkedBody{}
					return n, true, nil
				case !fieldLine(line):
					return n, false, ErrMalformed
				}
				continue
			}
			size, ok := chunkLine(line)
			if !ok || i > maxChunkLine || size > MaxBody-c.total {
				return n, false, ErrMalformed
			}
			c.total += size
			c.left = size
			c.state = chunkData
			if size == 0 {
				c.state = chunkTrailer
			}
		case chunkData:
			k := min(c.left, len(b)-n)
			n += k
			c.left -= k
			if c.left > 0 {
				return n, false, nil
			}
			c.state = chunkDataEnd
		case chunkDataEnd:
			if len(b)-n < 2 {
				return n, false, nil
			}
			if b[n] != '\r' || b[n+1] != '\n' {
				return n, false, ErrMalformed
			}
			n += 2
			c.state = chunkSize
		}
	}
}

// chunkLine parses chunk-size [ chunk-ext ]: the size, false when it is
// not one or exceeds MaxBody.
func chunkLine(line []byte) (int, bool) {
	size, i := 0, 0
	for ; i < len(line); i++ {
		d := line[i]
		switch {
		case '0' <= d && d <= '9':
			d -= '0'
		case 'a' <= d && d <= 'f':
			d -= 'a' - 10
		case 'A' <= d && d <= 'F':
			d -= 'A' - 10
		default:
			goto ext
		}
		if size = size<<4 | int(d); size > MaxBody {
			return 0, false
		}
	}
ext:
	if i == 0 {
		return 0, false
	}
	ext := bytes.TrimLeft(line[i:], " \t")
	if len(ext) > 0 && ext[0] != ';' || !visible(ext) {
		return 0, false
	}
	return size, true
}

// fieldLine reports whether line is name ":" value with a token for a
// name and no control characters but HTAB.
func fieldLine(line []byte) bool {
	name, _, ok := bytes.Cut(line, []byte(":"))
	return ok && token(name) && visible(line)
}

// token reports whether b is a token (RFC 9110 section 5.6.2), as methods
// and field names are.
func token(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || !tchar[c] {
			return false
		}
	}
	return len(b) > 0
}

var tchar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// requestTarget reports whether b may be a request-target: not empty, no
// whitespace or control characters.
func requestTarget(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return len(b) > 0
}

// hostValue reports whether v may be a Host value: uri-host [ ":" port ]
// (RFC 9112 section 3.2, RFC 3986 section 3.2.2), possibly empty. The
// characters are checked, not the structure.
func hostValue(v []byte) bool {
	for _, c := range v {
		if c >= 0x80 || !tchar[c] && strings.IndexByte("()+,;=:[]", c) < 0 {
			return false
		}
	}
	return true
}

// visible reports whether b holds no control characters but HTAB.
func visible(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
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

// Handler serves hello, world. Its methods run on the loop goroutine of the
// connection.
type Handler struct {
	engine.BaseHandler
}

// conn is per-connection state: bytes of an incomplete request head or
// chunk line, and the request whose body is being read (and dropped).
type conn struct {
	pending []byte
	inBody  bool
	req     Request
	left    int // of a Content-Length body
	body    ChunkedBody
}

// stateOf returns st, or c's new state when it has none yet. Loop
// goroutine.
func stateOf(c *engine.Conn, st *conn) *conn {
	if st == nil {
		st = &conn{}
		c.SetContext(st)
	}
	return st
}

// OnData answers every complete request in b. Loop goroutine.
func (h *Handler) OnData(c *engine.Conn, b engine.Buffer) bool {
	data := b.Bytes()
	st, _ := c.Context().(*conn)
	if st != nil && len(st.pending) > 0 {
		st.pending = append(st.pending, data...)
		data = st.pending
	}
	for len(data) > 0 {
		var r Request
		if st != nil && st.inBody {
			done := false
			if st.req.Chunked {
				n, ok, err := st.body.Skip(data)
				if err != nil {
					fail(c, err)
					return false
				}
				data, done = data[n:], ok
			} else {
				n := min(st.left, len(data))
				data, st.left = data[n:], st.left-n
				done = st.left == 0
			}
			if !done {
				break
			}
			st.inBody = false
			r = st.req
		} else {
			var err error
			if r, err = ParseRequest(data); err != nil {
				fail(c, err)
				return false
			}
			if r.Len == 0 {
				break
			}
			data = data[r.Len:]
			if !r.Chunked && r.Body <= len(data) {
				data = data[r.Body:] // here whole
			} else {
				// Answered once its body is read, which a client that
				// expects 100 Continue sends only after it (RFC 9110
				// section 10.1.1: the server must send it).
				if r.Continue && len(data) == 0 {
					c.Write(continue100)
				}
				st = stateOf(c, st)
				st.inBody, st.req, st.left = true, r, r.Body
				continue
			}
		}
		respond(c, r)
		if !r.KeepAlive {
			c.CloseLinger(LingerTimeout, LingerBytes)
			return false
		}
	}
	if len(data) > 0 {
		st = stateOf(c, st)
		// data may alias st.pending: copy down.
		st.pending = append(st.pending[:0], data...)
	} else if st != nil {
		st.pending = st.pending[:0]
	}
	return false
}

// fail answers a request ParseRequest or ChunkedBody refused and closes
// c with a lingering close. Loop goroutine.
func fail(c *engine.Conn, err error) {
	switch {
	case errors.Is(err, ErrHeaderLarge):
		c.Write(tooLarge)
	case errors.Is(err, ErrNotImplemented):
		c.Write(notImpl)
	case errors.Is(err, ErrVersion):
		c.Write(badVersion)
	default:
		c.Write(bad)
	}
	c.CloseLinger(LingerTimeout, LingerBytes)
}

// respond writes the answer to r: no body for HEAD; a request that does
// not keep the connection is told it closes, an HTTP/1.0 client that asked
// to keep it that it is kept.
func respond(c *engine.Conn, r Request) {
	c.Write(head)
	switch {
	case !r.KeepAlive:
		c.Write(closeLine)
	case r.HTTP10:
		c.Write(keepAliveLine)
	}
	c.Write(crlf)
	if !r.Head {
		c.Write(body)
	}
}
