package hello

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/spindlenet/spindle/engine"
)

// MaxHeader is the largest request head accepted; bigger ones get 431.
const MaxHeader = 8 << 10

var (
	head          = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n")
	keepAliveLine = []byte("Connection: keep-alive\r\n")
	crlf          = []byte("\r\n")
	body          = []byte("hello, world")
	bad           = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	tooLarge      = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// MaxBody is the largest request body accepted (Content-Length); a larger
// one is malformed here.
const MaxBody = 1 << 20

// Errors from ParseRequest.
var (
	ErrMalformed   = errors.New("hello: malformed request")
	ErrHeaderLarge = errors.New("hello: request head too large")
)

// Request is what the server needs of one parsed request.
type Request struct {
	Len       int  // bytes of the request: head and Content-Length body; 0: incomplete
	KeepAlive bool // the connection stays open after it
	HTTP10    bool // an HTTP/1.0 request (keep-alive only when asked, and then said)
	Head      bool // a HEAD request: the response has no body
}

// ParseRequest looks for one complete request at the start of b. It returns
// a Request with Len 0 when more bytes are needed. As RFC 9112 asks, a
// header name followed by whitespace, several Content-Length headers, or a
// Content-Length that is not a number up to MaxBody are malformed, and so is
// an HTTP/1.1 request without a Host header or any request with several
// (RFC 9112 section 3.2); chunked bodies are not supported (malformed here).
func ParseRequest(b []byte) (Request, error) {
	var r Request
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > MaxHeader {
			return Request{}, ErrHeaderLarge
		}
		return Request{}, nil
	}
	if end+4 > MaxHeader {
		return Request{}, ErrHeaderLarge
	}
	head := b[:end]
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// Request line: METHOD SP TARGET SP HTTP/1.x
	method, line, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 {
		return Request{}, ErrMalformed
	}
	r.Head = string(method) == "HEAD"
	switch string(version) {
	case "HTTP/1.1":
		r.KeepAlive = true
	case "HTTP/1.0":
		r.HTTP10 = true
	default:
		return Request{}, ErrMalformed
	}
	body, sawLength, closes, keeps, hosts := 0, false, false, false, 0
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return Request{}, ErrMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "content-length"):
			v, err := strconv.ParseUint(string(value), 10, 64)
			if err != nil || v > MaxBody || sawLength {
				return Request{}, ErrMalformed
			}
			body, sawLength = int(v), true
		case equalFold(name, "host"):
			hosts++
		case equalFold(name, "transfer-encoding"):
			// Chunked bodies are beyond this example.
			return Request{}, ErrMalformed
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
	// close anywhere wins; keep-alive matters to HTTP/1.0 only.
	r.KeepAlive = !closes && (r.KeepAlive || r.HTTP10 && keeps)
	r.Len = end + 4 + body
	if r.Len > len(b) {
		return Request{}, nil
	}
	return r, nil
}

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

// conn is per-connection state: bytes of an incomplete request.
type conn struct {
	pending []byte
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
		r, err := ParseRequest(data)
		if err != nil {
			if errors.Is(err, ErrHeaderLarge) {
				c.Write(tooLarge)
			} else {
				c.Write(bad)
			}
			c.Close()
			return false
		}
		if r.Len == 0 {
			break
		}
		respond(c, r)
		data = data[r.Len:]
		if !r.KeepAlive {
			c.Close()
			return false
		}
	}
	if len(data) > 0 {
		if st == nil {
			st = &conn{}
			c.SetContext(st)
		}
		// data may alias st.pending: copy down.
		st.pending = append(st.pending[:0], data...)
	} else if st != nil {
		st.pending = st.pending[:0]
	}
	return false
}

// respond writes the answer to r: no body for HEAD, and an HTTP/1.0
// client that asked to keep the connection is told it is kept.
func respond(c *engine.Conn, r Request) {
	c.Write(head)
	if r.HTTP10 && r.KeepAlive {
		c.Write(keepAliveLine)
	}
	c.Write(crlf)
	if !r.Head {
		c.Write(body)
	}
}
