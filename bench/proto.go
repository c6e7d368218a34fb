package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Protocol limits.
const (
	// FrameHeader is the size of the length prefix of an RPC frame: the
	// payload length as a big-endian uint32.
	FrameHeader = 4
	// MaxPayload is the largest RPC payload a server accepts (1 MiB).
	MaxPayload = 1 << 20
	// MinPayload is the smallest payload the load generator sends: the
	// sequence number, connection id and a pattern byte that verification
	// checks.
	MinPayload = 16
	// DefaultPayload is the default RPC payload size in bytes.
	DefaultPayload = 128
	// maxHTTPHeader bounds an HTTP/1.1 request head.
	maxHTTPHeader = 16 << 10
)

// ErrMismatch reports a reply that differs from its request.
var ErrMismatch = errors.New("bench: reply does not match request")

// errProtocol reports a malformed request on a server connection.
var errProtocol = errors.New("bench: malformed request")

// errClose ends a server connection after the reply to an HTTP request
// that asked for it (RFC 9112 §9.3, §9.6): HTTP/1.0 without "Connection:
// keep-alive", or "Connection: close".
var errClose = errors.New("bench: the HTTP request asked to close the connection")

// After the last reply on an HTTP connection (Process's error, Echo.HTTP)
// the servers close it the way net/http does: FIN after the
// reply, then what the client still sends (requests pipelined after the
// last one) is read and dropped until the client closes its side, for at
// most LingerTimeout and LingerBytes. A close with received bytes unread
// makes the kernel send RST instead of FIN, which fails the client's read
// and drops a reply still in the server's send queue.
const (
	LingerTimeout = 500 * time.Millisecond
	LingerBytes   = 256 << 10
)

// AppendRequest appends one RPC request frame with a payload of size bytes
// to dst. The payload encodes seq and conn so that a reply delivered to the
// wrong request or connection fails verification; size must be at least
// MinPayload.
func AppendRequest(dst []byte, conn uint32, seq uint64, size int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	return appendPayload(dst, conn, seq, size)
}

// appendPayload appends the payload of AppendRequest (without its length
// prefix) to dst: also the body of the load generator's HTTP requests.
func appendPayload(dst []byte, conn uint32, seq uint64, size int) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, conn)
	for i := 12; i < size; i++ {
		dst = append(dst, byte(seq*31+uint64(i)*7+uint64(conn)))
	}
	return dst
}

// verifyReply checks that frame (header and payload) is exactly the request
// AppendRequest makes for conn and seq. scratch is reused to avoid
// allocation; the possibly grown scratch is returned.
func verifyReply(frame []byte, conn uint32, seq uint64, size int, scratch []byte) ([]byte, error) {
	scratch = AppendRequest(scratch[:0], conn, seq, size)
	if !bytes.Equal(frame, scratch) {
		got := uint64(0)
		if len(frame) >= FrameHeader+8 {
			got = binary.LittleEndian.Uint64(frame[FrameHeader:])
		}
		return scratch, fmt.Errorf("%w: conn %d: want seq %d (%d bytes), got seq %d (%d bytes)", ErrMismatch, conn, seq, len(scratch), got, len(frame))
	}
	return scratch, nil
}

// frameLen returns the total length of the RPC frame at the start of b, or
// 0 if the header is not complete yet.
func frameLen(b []byte) (int, error) {
	if len(b) < FrameHeader {
		return 0, nil
	}
	n := binary.BigEndian.Uint32(b)
	if n > MaxPayload {
		return 0, fmt.Errorf("%w: payload length %d exceeds %d", errProtocol, n, MaxPayload)
	}
	return FrameHeader + int(n), nil
}

// Spin burns the calling thread's CPU for d (the servers' --compute-us
// knob). It does not sleep or yield.
func Spin(d time.Duration) {
	if d <= 0 {
		return
	}
	start := time.Now()
	for time.Since(start) < d {
	}
}

// Echo is the server side of the benchmark protocols for one connection:
// the length-prefixed RPC echo, or HTTP/1.1 when the first byte of the
// connection is an ASCII letter. The zero value is ready to use. An Echo
// belongs to one connection and is used from one goroutine (or loop) at a
// time.
type Echo struct {
	// Compute is CPU time burned per request before replying.
	Compute time.Duration
	// BodySize is the HTTP response body size for requests without a body;
	// 0 means DefaultPayload.
	BodySize int

	mode byte // 0 unknown, 'r' RPC, 'h' HTTP
}

// HTTP reports whether the connection speaks HTTP, as detected by the
// first Process with data.
func (e *Echo) HTTP() bool { return e.mode == 'h' }

// Process consumes the complete requests at the start of in, appends their
// replies to out, and returns how many bytes of in it consumed and the
// extended out. Incomplete requests are left for the next call with more
// data. An error means the connection must be closed once out is sent:
// after a malformed request, or after the reply to an HTTP request that
// does not keep the connection alive (HTTP/1.0 without "Connection:
// keep-alive", any request with "Connection: close"; the reply says
// "Connection: close" and the requests after it are not answered). The
// servers then close an HTTP connection with a lingering close
// (LingerTimeout). Called from the connection's goroutine or loop.
func (e *Echo) Process(in, out []byte) (int, []byte, error) {
	if len(in) == 0 {
		return 0, out, nil
	}
	e.detect(in)
	if e.mode == 'h' {
		return e.processHTTP(in, out)
	}
	done := 0
	for {
		n, err := frameLen(in[done:])
		if err != nil {
			return done, out, err
		}
		if n == 0 || len(in)-done < n {
			return done, out, nil
		}
		Spin(e.Compute)
		out = append(out, in[done:done+n]...)
		done += n
	}
}

// detect sets the connection's protocol from its first byte.
func (e *Echo) detect(in []byte) {
	if e.mode != 0 || len(in) == 0 {
		return
	}
	c := in[0]
	if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' {
		e.mode = 'h'
	} else {
		e.mode = 'r'
	}
}

// WholeRPC reports whether in is exactly a sequence of complete RPC
// requests on an RPC connection, and how many. A server may then send in
// itself back as the reply (its echo), without copying, after calling
// Compute for each request. Called from the connection's goroutine or
// loop.
func (e *Echo) WholeRPC(in []byte) (requests int, ok bool) {
	e.detect(in)
	if e.mode != 'r' || len(in) == 0 {
		return 0, false
	}
	for off := 0; off < len(in); {
		n, err := frameLen(in[off:])
		if err != nil || n == 0 || off+n > len(in) {
			return 0, false
		}
		off += n
		requests++
	}
	return requests, true
}

var (
	crlfcrlf      = []byte("\r\n\r\n")
	contentLength = []byte("content-length:")
)

func (e *Echo) processHTTP(in, out []byte) (int, []byte, error) {
	done := 0
	for {
		rest := in[done:]
		end := bytes.Index(rest, crlfcrlf)
		if end < 0 {
			if len(rest) > maxHTTPHeader {
				return done, out, fmt.Errorf("%w: HTTP head longer than %d bytes", errProtocol, maxHTTPHeader)
			}
			return done, out, nil
		}
		head := rest[:end]
		line, fields, _ := bytes.Cut(head, []byte("\r\n"))
		version := line[bytes.LastIndexByte(line, ' ')+1:]
		if bytes.Count(line, []byte(" ")) != 2 || !bytes.HasPrefix(version, []byte("HTTP/1.")) {
			return done, out, fmt.Errorf("%w: bad HTTP request line %q", errProtocol, line)
		}
		clen, conn, err := httpHeaders(fields)
		if err != nil {
			return done, out, err
		}
		// HTTP/1.1 keeps the connection unless told to close; HTTP/1.0
		// closes it unless told to keep it (RFC 9112 §9.3).
		http10 := bytes.Equal(version, []byte("HTTP/1.0"))
		keep := conn&connClose == 0 && (!http10 || conn&connKeepAlive != 0)
		total := end + 4 + clen
		if len(rest) < total {
			return done, out, nil
		}
		body := rest[end+4 : total]
		Spin(e.Compute)
		n := len(body)
		if n == 0 {
			n = e.BodySize
			if n <= 0 {
				n = DefaultPayload
			}
		}
		out = append(out, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"...)
		switch {
		case !keep:
			out = append(out, "Connection: close\r\n"...)
		case http10:
			out = append(out, "Connection: keep-alive\r\n"...)
		}
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, int64(n), 10)
		out = append(out, "\r\n\r\n"...)
		if len(body) > 0 {
			out = append(out, body...)
		} else {
			for i := range n {
				out = append(out, 'a'+byte(i%26))
			}
		}
		done += total
		if !keep {
			return done, out, errClose
		}
	}
}

// Connection options and framing fields of an HTTP message (httpHeaders).
const (
	connClose           = 1 << iota // "Connection: close"
	connKeepAlive                   // "Connection: keep-alive"
	fieldContentLength              // a Content-Length field
	fieldTransferCoding             // a Transfer-Encoding field
)

var transferEncoding = []byte("transfer-encoding:")

var connection = []byte("connection:")

// httpHeaders returns the Content-Length of an HTTP message's header
// fields (0 when absent) and its options: connection options (connClose,
// connKeepAlive) from every Connection field's comma-separated list,
// case-insensitive, and fieldContentLength, fieldTransferCoding for the
// fields that frame the body.
func httpHeaders(fields []byte) (clen int, opts int, err error) {
	for len(fields) > 0 {
		var line []byte
		line, fields, _ = bytes.Cut(fields, []byte("\r\n"))
		switch {
		case hasFieldName(line, contentLength):
			// Digits only (strconv.Atoi takes a sign), and repeats must
			// agree (RFC 9112 6.3): a proxy in front is not trusted to
			// have checked.
			v := bytes.TrimSpace(line[len(contentLength):])
			n, err := strconv.Atoi(string(v))
			if err != nil || len(v) == 0 || v[0] < '0' || v[0] > '9' || n > MaxPayload || opts&fieldContentLength != 0 && n != clen {
				return 0, 0, fmt.Errorf("%w: bad Content-Length %q", errProtocol, v)
			}
			clen = n
			opts |= fieldContentLength
		case hasFieldName(line, transferEncoding):
			opts |= fieldTransferCoding
		case hasFieldName(line, connection):
			for list := line[len(connection):]; len(list) > 0; {
				var opt []byte
				opt, list, _ = bytes.Cut(list, []byte(","))
				opt = bytes.TrimSpace(opt)
				if bytes.EqualFold(opt, []byte("close")) {
					opts |= connClose
				} else if bytes.EqualFold(opt, []byte("keep-alive")) {
					opts |= connKeepAlive
				}
			}
		}
	}
	return clen, opts, nil
}

// hasFieldName reports whether the header line starts with name (which
// ends in its colon), case-insensitive.
func hasFieldName(line, name []byte) bool {
	return len(line) >= len(name) && bytes.EqualFold(line[:len(name)], name)
}
