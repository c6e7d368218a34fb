package bench

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/spindlenet/spindle/internal/h1"
)

// The load generator's protocols (LoadConfig.Protocol).
const (
	// ProtocolRPC is the length-prefixed RPC echo (AppendRequest).
	ProtocolRPC = "rpc"
	// ProtocolHTTP is HTTP/1.1 with keep-alive: each request is a POST
	// whose body is the RPC request's payload, and the reply must be a
	// 200 whose body echoes it (Echo's HTTP side does).
	ProtocolHTTP = "http"
)

// loadFraming builds a protocol's requests and frames and verifies its
// replies, for the load generator's connections; the rest of a
// connection's life (queues, buffers, accounting) does not depend on the
// protocol. Replies come back in request order. Used by one client thread.
type loadFraming interface {
	// appendRequest appends request seq of connection conn to dst.
	appendRequest(dst []byte, conn uint32, seq uint64) []byte
	// replyLen returns the length of the reply at the start of b once b
	// holds enough of it to tell (0 until then), or an error for a reply
	// that is wrong however it goes on.
	replyLen(b []byte) (int, error)
	// verify checks the complete reply (of replyLen's length) to request
	// seq of conn; scratch is reused and returned, possibly grown.
	verify(reply []byte, conn uint32, seq uint64, scratch []byte) ([]byte, error)
}

// newLoadFraming returns cfg's framing; cfg has its defaults.
func newLoadFraming(cfg LoadConfig) loadFraming {
	if cfg.Protocol == ProtocolHTTP {
		return newHTTPFraming(cfg.Host, cfg.Payload)
	}
	return rpcFraming{payload: cfg.Payload}
}

// rpcFraming is the RPC echo: a reply is its request.
type rpcFraming struct{ payload int }

func (f rpcFraming) appendRequest(dst []byte, conn uint32, seq uint64) []byte {
	return AppendRequest(dst, conn, seq, f.payload)
}

func (f rpcFraming) replyLen(b []byte) (int, error) {
	n, err := frameLen(b)
	// Every reply is its request's size: one announcing another length is
	// wrong now, not a reply still to come.
	if err == nil && n != 0 && n != FrameHeader+f.payload {
		return 0, fmt.Errorf("%w: reply announces %d payload bytes, want %d", ErrMismatch, n-FrameHeader, f.payload)
	}
	return n, err
}

func (f rpcFraming) verify(reply []byte, conn uint32, seq uint64, scratch []byte) ([]byte, error) {
	return verifyReply(reply, conn, seq, f.payload, scratch)
}

// httpFraming is HTTP/1.1: "POST / HTTP/1.1" with a Host field and the
// payload as a Content-Length body, answered by "HTTP/1.1 200" with the
// same body and a Content-Length (no transfer coding). A reply that
// closes the connection ("Connection: close") fails like a server that
// closes it: the load generator keeps its connections for the run.
type httpFraming struct {
	head    []byte // every request's head, up to its body
	payload int
	resp    h1.Response // replyLen's, its Headers reused
}

func newHTTPFraming(host string, payload int) *httpFraming {
	head := fmt.Appendf(nil, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", host, payload)
	return &httpFraming{head: head, payload: payload}
}

func (f *httpFraming) appendRequest(dst []byte, conn uint32, seq uint64) []byte {
	return appendPayload(append(dst, f.head...), conn, seq, f.payload)
}

// errHTTPClose fails a run whose server (or proxy) answers with
// "Connection: close", as a server that closes the connection does.
var errHTTPClose = errors.New("the HTTP response closes the connection (Connection: close)")

// replyLen frames the response at the start of b by its head, parsed by
// internal/h1: a status other than 200, a version other than HTTP/1.1, a
// body length other than the payload's, and a response that cannot be
// framed (no Content-Length, a transfer coding, heads longer than
// maxHTTPHeader) are errors as soon as the head is complete.
// Interim (1xx) responses before it other than 101, which a client must
// accept unasked (RFC 9110 15.2: a proxy forwards a server's 103 Early
// Hints), are skipped: they are part of the reply, whose body stays last.
func (f *httpFraming) replyLen(b []byte) (int, error) {
	r := &f.resp
	start := 0 // of the current head, after the interim responses
	for {
		n, err := r.Parse(b[start:], false, httpLimits)
		switch {
		case err != nil:
			return 0, fmt.Errorf("%w: HTTP response: %s", ErrMismatch, h1Reason(err))
		case n == 0:
			return 0, nil
		case r.Status >= 200 || r.Status == 101:
			return f.finalLen(start + n)
		}
		start += n // an interim response has no body
		if start > maxHTTPHeader {
			return 0, fmt.Errorf("%w: HTTP response head too large: interim responses over %d bytes", ErrMismatch, maxHTTPHeader)
		}
	}
}

// finalLen checks the final response f.resp, whose head ends at end, and
// returns the reply's length.
func (f *httpFraming) finalLen(end int) (int, error) {
	r := &f.resp
	switch {
	case r.Minor != 1:
		return 0, fmt.Errorf("%w: HTTP/1.%d status line, want HTTP/1.1", ErrMismatch, r.Minor)
	case r.Status != 200:
		return 0, fmt.Errorf("%w: HTTP status %d %q, want 200", ErrMismatch, r.Status, r.Reason)
	case r.Framing == h1.Chunked:
		return 0, fmt.Errorf("%w: HTTP response with a Transfer-Encoding: the client frames bodies by Content-Length only", ErrMismatch)
	case r.Framing != h1.Length:
		return 0, fmt.Errorf("%w: HTTP response without a Content-Length", ErrMismatch)
	case !r.KeepAlive:
		return 0, errHTTPClose
	case r.ContentLength != int64(f.payload):
		return 0, fmt.Errorf("%w: HTTP response announces a %d-byte body, want %d", ErrMismatch, r.ContentLength, f.payload)
	}
	return end + f.payload, nil
}

func (f *httpFraming) verify(reply []byte, conn uint32, seq uint64, scratch []byte) ([]byte, error) {
	// replyLen checked the head and that the body is the payload's size.
	body := reply[len(reply)-f.payload:]
	scratch = appendPayload(scratch[:0], conn, seq, f.payload)
	if !bytes.Equal(body, scratch) {
		return scratch, fmt.Errorf("%w: conn %d: HTTP response body is not request %d's", ErrMismatch, conn, seq)
	}
	return scratch, nil
}

// validHost reports whether h can be sent as a Host field value: host
// [":" port] as internal/h1 (and so the proxy) accepts it.
func validHost(h string) bool {
	return h1.ValidAuthority([]byte(h))
}
