package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spindlenet/spindle/internal/h1"
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

// payloadDefault returns payload, def for 0, and refuses one outside
// MinPayload..MaxPayload (prefix begins the error: "bench", "bench:
// load").
func payloadDefault(prefix string, payload, def int) (int, error) {
	if payload == 0 {
		payload = def
	}
	if payload < MinPayload || payload > MaxPayload {
		return payload, fmt.Errorf("%s: payload %d outside %d..%d", prefix, payload, MinPayload, MaxPayload)
	}
	return payload, nil
}

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

// Spin burns the calling thread's CPU for d of wall-clock time (the
// servers' --compute-us knob), read from CLOCK_MONOTONIC (time.Now, vDSO:
// tens of ns a read). It does not sleep or yield. An interrupt or softirq
// that lands on the CPU during the spin, or a preemption, is inside d, not
// added to it, the same for every arm. Spinning on the thread's CPU time
// instead would not change that for interrupts on a kernel without
// CONFIG_IRQ_TIME_ACCOUNTING (their time is in the interrupted thread's
// CPU time there), and CLOCK_THREAD_CPUTIME_ID is a system call, not
// vDSO: each read would be system time of its own.
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

	mode byte       // 0 unknown, 'r' RPC, 'h' HTTP
	req  h1.Request // processHTTP's, its Headers reused
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

// httpLimits bounds the HTTP/1.1 heads the servers and the load generator
// parse.
var httpLimits = h1.Limits{MaxHead: maxHTTPHeader}

// h1Reason is what an internal/h1 error says, without the status a proxy
// would answer it with.
func h1Reason(err error) string {
	var e *h1.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return err.Error()
}

// processHTTP answers the complete requests at the start of in, parsed by
// internal/h1 (RFC 9112, strictly: a request it refuses ends the
// connection). A request's body is echoed: a Content-Length body with its
// length, a chunked one chunked, as it came (its chunk extensions and
// trailer fields too). A request without a body gets BodySize bytes; HEAD
// gets the head of that reply alone.
func (e *Echo) processHTTP(in, out []byte) (int, []byte, error) {
	done := 0
	for {
		rest := in[done:]
		n, err := e.req.Parse(rest, httpLimits)
		if err != nil {
			return done, out, fmt.Errorf("%w: HTTP request: %s", errProtocol, h1Reason(err))
		}
		if n == 0 {
			return done, out, nil
		}
		r := &e.req
		var b h1.Body
		b.Reset(r.Framing, r.ContentLength)
		blen, whole, err := b.Next(rest[n:])
		switch {
		case err != nil:
			return done, out, fmt.Errorf("%w: HTTP request body: %s", errProtocol, h1Reason(err))
		case r.ContentLength > MaxPayload || blen > MaxPayload:
			// A chunked body counts as sent, its framing included: it is
			// held until it is whole.
			return done, out, fmt.Errorf("%w: HTTP request body over %d bytes", errProtocol, MaxPayload)
		case !whole:
			return done, out, nil
		}
		body := rest[n : n+blen]
		Spin(e.Compute)
		out = append(out, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"...)
		switch {
		case !r.KeepAlive:
			out = append(out, "Connection: close\r\n"...)
		case r.Minor == 0:
			out = append(out, "Connection: keep-alive\r\n"...)
		}
		size := len(body)
		if r.Framing == h1.Chunked {
			out = append(out, "Transfer-Encoding: chunked\r\n\r\n"...)
		} else {
			if size == 0 {
				if size = e.BodySize; size <= 0 {
					size = DefaultPayload
				}
			}
			out = append(out, "Content-Length: "...)
			out = strconv.AppendInt(out, int64(size), 10)
			out = append(out, "\r\n\r\n"...)
		}
		switch {
		case string(r.Method) == "HEAD":
		case len(body) > 0:
			out = append(out, body...)
		default:
			for i := range size {
				out = append(out, 'a'+byte(i%26))
			}
		}
		done += n + blen
		if !r.KeepAlive {
			return done, out, errClose
		}
	}
}
