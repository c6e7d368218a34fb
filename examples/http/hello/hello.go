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
	response = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nhello, world")
	bad      = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	tooLarge = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// Errors from ParseRequest.
var (
	ErrMalformed   = errors.New("hello: malformed request")
	ErrHeaderLarge = errors.New("hello: request head too large")
)

// ParseRequest looks for one complete request at the start of b. It returns
// n = 0 when more bytes are needed, else the length of the request (head and
// Content-Length body) and whether the connection stays open after it.
func ParseRequest(b []byte) (n int, keepAlive bool, err error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > MaxHeader {
			return 0, false, ErrHeaderLarge
		}
		return 0, false, nil
	}
	if end+4 > MaxHeader {
		return 0, false, ErrHeaderLarge
	}
	head := b[:end]
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// Request line: METHOD SP TARGET SP HTTP/1.x
	method, line, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 {
		return 0, false, ErrMalformed
	}
	switch string(version) {
	case "HTTP/1.1":
		keepAlive = true
	case "HTTP/1.0":
		keepAlive = false
	default:
		return 0, false, ErrMalformed
	}
	body := 0
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok || len(name) == 0 {
			return 0, false, ErrMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "content-length"):
			v, err := strconv.ParseUint(string(value), 10, 31)
			if err != nil {
				return 0, false, ErrMalformed
			}
			body = int(v)
		case equalFold(name, "transfer-encoding"):
			// Chunked bodies are beyond this example.
			return 0, false, ErrMalformed
		case equalFold(name, "connection"):
			if equalFold(value, "close") {
				keepAlive = false
			} else if equalFold(value, "keep-alive") {
				keepAlive = true
			}
		}
	}
	n = end + 4 + body
	if n > len(b) {
		return 0, false, nil
	}
	return n, keepAlive, nil
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
		n, keep, err := ParseRequest(data)
		if err != nil {
			if errors.Is(err, ErrHeaderLarge) {
				c.Write(tooLarge)
			} else {
				c.Write(bad)
			}
			c.Close()
			return false
		}
		if n == 0 {
			break
		}
		c.Write(response)
		data = data[n:]
		if !keep {
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
