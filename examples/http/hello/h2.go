package hello

import (
	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// HTTP/2 (h2c with prior knowledge): a connection whose first bytes are
// h2.ClientPreface is served by an h2.Server, the sans-IO HTTP/2 server
// connection; OnData feeds it what was read and the connection's queue
// takes what it has to send (Pending).

var (
	// h2Fields are the response's fields besides :status, as h1's head.
	h2Fields = []hpack.Field{
		{Name: []byte("content-type"), Value: []byte("text/plain")},
		{Name: []byte("content-length"), Value: []byte(helloLen)},
	}
	// h2Empty are an error response's: no body, as h1's.
	h2Empty = []hpack.Field{{Name: []byte("content-length"), Value: []byte("0")}}

	expectName  = []byte("expect")
	continueTok = []byte("100-continue")

	// h2Config bounds a request's header list as h1's path bounds its
	// head: a larger one gets 431 (MaxHeader).
	h2Config = &h2.Config{MaxHeaderListSize: MaxHeader}
)

// maxTail bounds the bytes an h2 connection keeps between reads: one
// frame not complete yet, at most the largest frame the Server accepts
// (its default SETTINGS_MAX_FRAME_SIZE) and its header.
const maxTail = h2.FrameHeaderLen + h2.MinMaxFrameSize

// h2conn is the state of a connection that sent the HTTP/2 preface, and
// the h2.Server's Handler. Loop goroutine.
type h2conn struct {
	c *engine.Conn
	s *h2.Server
	// writev is c.Writev, made once (no allocation per WriteDataTo), on
	// a plain connection; nil on a TLS one, where each write is a record
	// of its own (Writev's a record per response at best): there the
	// body goes into Pending (WriteData) and flush sends a Feed's frames,
	// every response of it, in one Write.
	writev func([][]byte) (int, error)

	// tail is the start of a frame (or of the preface) a read ended in,
	// copied: the next read completes it (Server.FeedTail).
	tail    []byte
	closing bool // CloseLinger was called, or OnClose came

	// streams are the requests whose body is still coming and the
	// responses whose body the stream's send window held back.
	streams []h2stream
}

// h2stream is a request that needs more than one event to answer.
type h2stream struct {
	id   uint32
	head bool  // a HEAD request: no body in the response
	recv int64 // request body bytes so far
	sent int   // response body bytes sent; -1 before the response
}

// startH2 makes c an HTTP/2 connection; pre is the start of the preface
// that came in earlier reads, drain whether the engine is shutting down (the
// connection is sent GOAWAY at once). Loop goroutine.
func startH2(c *engine.Conn, pre []byte, drain bool) *h2conn {
	hc := &h2conn{c: c}
	if c.TLS() == nil {
		hc.writev = c.Writev
	}
	hc.s = h2.NewServer(hc, h2Config)
	hc.tail = append(make([]byte, 0, maxTail), pre...)
	if drain {
		hc.s.ShutdownNow()
	}
	return hc
}

// shutdown sends GOAWAY, and closes c if no stream is open. It is the
// one-phase ShutdownNow: the example keeps no timer to bound the wait for
// the PING of Shutdown's two phases, which a client need not answer
// soon. Loop goroutine.
func (hc *h2conn) shutdown() {
	if hc.closing {
		return
	}
	hc.s.ShutdownNow()
	hc.flush()
}

// onData feeds data to the Server (FeedTail: whole frames straight from
// data, the frame a read ends in copied into tail and fed once the next
// reads complete it). Loop goroutine.
func (hc *h2conn) onData(data []byte) {
	if hc.closing {
		return
	}
	hc.s.FeedTail(&hc.tail, data) // an error: GOAWAY is pending and Done, flush sends it and closes
	hc.flush()
}

// flush queues the Server's output on c, and closes c once the Server is
// done: after a connection error (its GOAWAY is the output's end), or a
// GOAWAY either way with no stream left. A write c refuses (its queue could
// not grow) cuts the frames short: the Server ends, as after a lost write
// of WriteDataTo. Reading pauses while c's queue is at the engine's
// high-water mark, so that nothing is fed to the Server and its output
// stays bounded until the peer reads. Loop goroutine.
func (hc *h2conn) flush() {
	if hc.closing {
		return
	}
	if p := hc.s.Pending(); len(p) > 0 {
		n, err := hc.c.Write(p)
		hc.s.Written(n)
		if err != nil {
			hc.s.Close()
		}
	}
	if hc.s.Done() {
		hc.closing = true
		hc.c.CloseLinger(LingerTimeout, LingerBytes)
	}
}

// closed drops hc: c is closed. Loop goroutine.
func (hc *h2conn) closed() {
	hc.closing = true
	hc.s.Close()
}

// OnRequest answers a request without a body at once and waits for the
// body of one with; it refuses what h1's path refuses: CONNECT (501) and a
// content-length over MaxBody (413). A request that expects 100-continue
// gets it, as on HTTP/1.1. Loop goroutine.
func (hc *h2conn) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	head := string(r.Method) == "HEAD"
	switch {
	case string(r.Method) == "CONNECT":
		hc.refuse(id, 501, end)
	case r.ContentLength > MaxBody:
		hc.refuse(id, 413, end)
	case end:
		hc.respond(id, head)
	default:
		for _, f := range r.Fields {
			if string(f.Name) == string(expectName) && h1.EqualFold(f.Value, continueTok) {
				s.WriteHeaders(id, 100, nil, false)
			}
		}
		hc.streams = append(hc.streams, h2stream{id: id, head: head, sent: -1})
	}
}

// OnData drops request body bytes at once (Consumed: the peer's windows
// open again) and answers at the body's end. Loop goroutine.
func (hc *h2conn) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	i := hc.find(id)
	if i < 0 {
		return
	}
	st := &hc.streams[i]
	st.recv += int64(len(p))
	switch {
	case st.recv > MaxBody:
		hc.remove(i)
		hc.refuse(id, 413, end)
	case end:
		head := st.head
		hc.remove(i)
		hc.respond(id, head)
	}
}

// OnTrailers ends a request: it is answered. Loop goroutine.
func (hc *h2conn) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) {
	if i := hc.find(id); i >= 0 {
		head := hc.streams[i].head
		hc.remove(i)
		hc.respond(id, head)
	}
}

// OnReset forgets the stream. Loop goroutine.
func (hc *h2conn) OnReset(s *h2.Server, id uint32, code h2.ErrCode) {
	if i := hc.find(id); i >= 0 {
		hc.remove(i)
	}
}

// OnWritable sends more of a response body the stream's window held back.
// Loop goroutine.
func (hc *h2conn) OnWritable(s *h2.Server, id uint32) {
	if i := hc.find(id); i >= 0 && hc.streams[i].sent >= 0 {
		hc.sendBody(i)
	}
}

// OnGoAway: the client opens no more streams; Done closes c once the open
// ones are answered. Loop goroutine.
func (hc *h2conn) OnGoAway(s *h2.Server, code h2.ErrCode, debug []byte) {}

// respond answers stream id 200 "hello, world", without the body for HEAD.
// Loop goroutine.
func (hc *h2conn) respond(id uint32, head bool) {
	if hc.s.WriteHeaders(id, 200, h2Fields, head) != nil || head {
		return
	}
	hc.streams = append(hc.streams, h2stream{id: id, sent: 0})
	hc.sendBody(len(hc.streams) - 1)
}

// sendBody sends what the windows allow of the rest of stream i's body,
// straight into c's queue (WriteDataTo; on TLS into Pending, which flush
// sends), and forgets the stream once all is sent; otherwise OnWritable
// goes on. A write c refuses ends the Server, whose OnReset for each
// stream, this one among them, has forgotten it already (and moved
// another into its place): it is looked up again by id. Loop goroutine.
func (hc *h2conn) sendBody(i int) {
	st := &hc.streams[i]
	id := st.id
	var n int
	var err error
	if hc.writev != nil {
		n, err = hc.s.WriteDataTo(id, body[st.sent:], true, hc.writev)
	} else {
		n, err = hc.s.WriteData(id, body[st.sent:], true) // flush sends it
	}
	if err != nil {
		if i = hc.find(id); i >= 0 {
			hc.remove(i)
		}
		return
	}
	if st.sent += n; st.sent == len(body) {
		hc.remove(i)
	}
}

// refuse answers stream id with a bodiless status and, if the request is
// still coming, resets the stream (NO_ERROR: RFC 9113 8.1) so that the
// client stops sending it. Loop goroutine.
func (hc *h2conn) refuse(id uint32, status int, end bool) {
	hc.s.WriteHeaders(id, status, h2Empty, true)
	if !end {
		hc.s.Reset(id, h2.NoError)
	}
}

func (hc *h2conn) find(id uint32) int {
	for i := range hc.streams {
		if hc.streams[i].id == id {
			return i
		}
	}
	return -1
}

func (hc *h2conn) remove(i int) {
	last := len(hc.streams) - 1
	hc.streams[i] = hc.streams[last]
	hc.streams = hc.streams[:last]
}
