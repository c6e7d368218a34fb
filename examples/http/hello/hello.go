package hello

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
)

// Limits on a request.
const (
	// MaxHeader is the largest request head accepted; bigger ones get 431,
	// a longer request target alone 414.
	MaxHeader = 8 << 10
	// MaxBody is the largest request body accepted: its Content-Length,
	// or the sum of a chunked body's chunks. A larger one gets 413.
	MaxBody = 1 << 20
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

const hello = "hello, world"

var (
	// helloLen is hello's length as its Content-Length says it.
	helloLen = strconv.Itoa(len(hello))
	okHead   = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + helloLen + "\r\n"

	limits = h1.Limits{MaxHead: MaxHeader, MaxTarget: MaxHeader}

	body = []byte(hello)
	// The responses, each whole for one Write: to a request that keeps
	// the connection, to one that does not (it is told it closes), and to
	// an HTTP/1.0 one that asked to keep it (it is told it is kept). A
	// HEAD's is the same without the body.
	okKeep      = []byte(okHead + "\r\n" + hello)
	okClose     = []byte(okHead + "Connection: close\r\n\r\n" + hello)
	okKeepAlive = []byte(okHead + "Connection: keep-alive\r\n\r\n" + hello)
	continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")

	errTooLarge = &h1.Error{Status: 413, Reason: "request body larger than MaxBody"}
	// A 2xx to CONNECT would tell the client a tunnel is open: an origin
	// server that opens none refuses it.
	errConnect = &h1.Error{Status: 501, Reason: "CONNECT: not a proxy"}

	// reasons has the reason phrase of every status an error response
	// may have.
	reasons = map[int]string{
		400: "Bad Request",
		413: "Content Too Large",
		414: "URI Too Long",
		431: "Request Header Fields Too Large",
		501: "Not Implemented",
		505: "HTTP Version Not Supported",
	}
)

// Handler serves hello, world over HTTP/1.1, and over HTTP/2 to a client
// that starts with its preface (h2c with prior knowledge). It is an
// engine.Drainer: a graceful engine Shutdown ends its connections politely.
// Its methods run on the loop goroutine of the connection.
type Handler struct {
	engine.BaseHandler
}

// conn is a connection's state: the request being read, whose body is
// dropped as it arrives, and the bytes of a request head not complete yet.
// Once its buffers have grown, a connection allocates nothing per request.
type conn struct {
	req     h1.Request // Parse reuses its Headers
	body    h1.Body    // where the request's body ends
	inBody  bool       // the head is parsed; the body (maybe empty) is being read
	keep    bool       // the request keeps the connection open
	http10  bool       // an HTTP/1.0 request: its keep-alive is said in the response
	isHead  bool       // a HEAD request: the response has no body
	pending []byte     // a request head not complete yet, or the start of the HTTP/2 preface
	decided bool       // the first bytes were not the HTTP/2 preface: HTTP/1.1
	h2      *h2conn    // the first bytes were the HTTP/2 preface
	drain   bool       // the engine is shutting down (OnDrain)
}

// OnOpen attaches the connection's state. Loop goroutine.
func (h *Handler) OnOpen(c *engine.Conn) { c.SetContext(&conn{}) }

// OnData answers every complete request in b: pipelined requests are
// answered in order, and a request's body, framed by Content-Length or
// chunked, is read and dropped before its response. Loop goroutine.
func (h *Handler) OnData(c *engine.Conn, b engine.Buffer) bool {
	st := c.Context().(*conn)
	data := b.Bytes()
	if st.h2 != nil {
		st.h2.onData(data)
		return false
	}
	if !st.decided {
		// HTTP/2 if the first 24 bytes are the preface, over as many
		// reads as it takes; HTTP/1.1 from the first byte that differs.
		switch h2.SniffPreface(len(st.pending), data) {
		case h2.SniffOther:
			st.decided = true
		case h2.SniffPartial:
			st.pending = append(st.pending, data...)
			return false
		default:
			st.h2 = startH2(c, st.pending, st.drain)
			st.pending = nil
			st.h2.onData(data)
			return false
		}
	}
	if len(st.pending) > 0 {
		st.pending = append(st.pending, data...)
		data = st.pending
	}
	for {
		if !st.inBody {
			n, err := st.req.Parse(data, limits)
			if err != nil {
				fail(c, err)
				return false
			}
			if n == 0 {
				break // the head is not complete yet
			}
			data = data[n:]
			cont, err := st.start(len(data) > 0)
			if err != nil {
				fail(c, err)
				return false
			}
			if cont && !send(c, continue100) {
				return false
			}
		}
		n, done, err := st.body.Next(data)
		data = data[n:]
		if err == nil && st.body.Data() > MaxBody {
			err = errTooLarge
		}
		if err != nil {
			fail(c, err)
			return false
		}
		if !done {
			break // Next took all of data: more of the body is to come
		}
		st.inBody = false
		if !respond(c, st) {
			return false
		}
	}
	// What is left is the start of a head: keep it for the next read.
	// data may alias st.pending: append copies it down.
	st.pending = append(st.pending[:0], data...)
	return false
}

// OnWritable: c's queue drained below half the high-water mark, and the
// engine reads c again. Neither protocol holds output back meanwhile: the
// paused reads are the backpressure (no request is read, so none is
// answered). An HTTP/2 connection queues what its Server may have pending
// and closes if the Server is done. Loop goroutine.
func (h *Handler) OnWritable(c *engine.Conn) {
	if st, _ := c.Context().(*conn); st != nil && st.h2 != nil {
		st.h2.flush()
	}
}

// OnDrain ends c politely when the engine shuts down gracefully: an HTTP/2
// connection is sent GOAWAY and closes once its open streams are answered;
// an HTTP/1.1 connection between requests (or one that has sent nothing
// yet) closes now, and one in a request closes after its response, which
// says so. Loop goroutine.
func (h *Handler) OnDrain(c *engine.Conn) {
	st, _ := c.Context().(*conn)
	if st == nil {
		return
	}
	st.drain = true
	switch {
	case st.h2 != nil:
		st.h2.shutdown()
	case st.inBody:
		st.keep = false
	case len(st.pending) == 0:
		c.Close()
	}
}

// OnClose ends an HTTP/2 connection's Server. Loop goroutine.
func (h *Handler) OnClose(c *engine.Conn, err error) {
	if st, _ := c.Context().(*conn); st != nil && st.h2 != nil {
		st.h2.closed()
	}
}

// start begins reading the body of the request st.req just parsed from a
// buffer that holds more after its head, or not, and reports whether the
// client waits for 100 Continue before it sends the body. It must not keep
// the request's slices: they point into that buffer. Loop goroutine.
func (st *conn) start(more bool) (cont bool, err error) {
	r := &st.req
	if string(r.Method) == "CONNECT" {
		return false, errConnect
	}
	if r.Framing == h1.Length && r.ContentLength > MaxBody {
		return false, errTooLarge
	}
	st.inBody, st.keep = true, r.KeepAlive && !st.drain
	st.http10, st.isHead = r.Minor == 0, string(r.Method) == "HEAD"
	st.body.Reset(r.Framing, r.ContentLength)
	// A client that expects 100 Continue sends the body only after it
	// (RFC 9110 section 10.1.1: the server must send it).
	return r.Expect100 && !more && (r.Framing == h1.Chunked || r.ContentLength > 0), nil
}

// fail answers a request the server refuses and closes c with a lingering
// close: with the status h1 gives its head (400, 414, 431, 501 or 505), 413
// for a body over MaxBody, 501 for CONNECT, and 400 for a malformed body (which h1 reports
// as a proxy reports an upstream's, 502). A write c refuses (see send) needs
// nothing more: c closes either way. Loop goroutine.
func fail(c *engine.Conn, err error) {
	status := 400
	var e *h1.Error
	if errors.As(err, &e) && e.Status != 502 {
		status = e.Status
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, reasons[status])
	c.CloseLinger(LingerTimeout, LingerBytes)
}

// respond writes the answer to the request, in one Write: no body for
// HEAD; a request that does not keep the connection is told it closes, an
// HTTP/1.0 client that asked to keep it that it is kept. It reports whether
// c stays open for the next request: after a request that does not keep it
// c closes, with a lingering close, as after a write c refuses (send).
// Loop goroutine.
func respond(c *engine.Conn, st *conn) bool {
	resp := okKeep
	switch {
	case !st.keep:
		resp = okClose
	case st.http10:
		resp = okKeepAlive
	}
	if st.isHead {
		resp = resp[:len(resp)-len(body)]
	}
	if !send(c, resp) {
		return false
	}
	if !st.keep {
		c.CloseLinger(LingerTimeout, LingerBytes)
		return false
	}
	return true
}

// send queues p on c and reports whether c took it. engine.Conn.Write
// fails only when c is closing or its writing is shut (net.ErrClosed), or
// when the loop's send slab cannot grow (mmap failed), having queued the
// start of p: the response is lost, or cut short. Then c closes, with a
// lingering close, and nothing more is answered on it: what is queued goes
// out (the earlier pipelined responses, whole, and the start of this one,
// which the client sees cut short) and then FIN, and what the
// client still sends is dropped, so that no reset destroys the responses
// before it (on a closing c, CloseLinger does nothing). Loop goroutine.
func send(c *engine.Conn, p []byte) bool {
	if _, err := c.Write(p); err != nil {
		c.CloseLinger(LingerTimeout, LingerBytes)
		return false
	}
	return true
}
