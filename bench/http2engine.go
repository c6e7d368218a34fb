package bench

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// The spindle arms of `spindle bench http2`: the engine, one loop, with
// each connection's bytes fed to an internal/h2 Server whose output is
// written with Conn.Write, which copies it into the loop's send slab: the
// body goes there straight (WriteDataTo), the frames the Server wrote into
// Pending (headers, settings, window updates) once each read is handled.
func init() {
	for name, b := range map[string]engine.Backend{HTTP2ArmSpindleUring: engine.BackendURing, HTTP2ArmSpindleEpoll: engine.BackendEpoll} {
		http2Servers[name] = func(ctx context.Context, addr string, cpus []int, body []byte) error {
			srv, err := startEngineHandler(ctx, b, 0, ServerConfig{Addr: addr, Loops: 1, CPUs: cpus}, newEngineH2(body))
			if err != nil {
				return err
			}
			<-ctx.Done()
			return srv.Close()
		}
	}
}

// engineH2 is the engine.Handler of the spindle arms; its callbacks run on
// the one loop's goroutine, which alone touches fields.
type engineH2 struct {
	engine.BaseHandler
	body []byte
	// fields are the response's, besides :status: content-type,
	// content-length and date, as net/http and nginx send them. The date
	// (fields[dateField]) is brought to the clock once a read, as nginx
	// reads its clock once a loop iteration, and formatted again when the
	// second changed.
	fields  []hpack.Field
	dateSec int64
}

// dateField is the index of the date in engineH2.fields.
const dateField = 2

func newEngineH2(body []byte) *engineH2 {
	h := &engineH2{body: body, fields: []hpack.Field{
		{Name: []byte("content-type"), Value: []byte(http2ContentType)},
		{Name: []byte("content-length"), Value: strconv.AppendInt(nil, int64(len(body)), 10)},
		{Name: []byte("date")},
	}}
	h.stamp()
	return h
}

// stamp brings the date field to now. The HPACK encoder copies what it
// indexes, so the value's bytes may be overwritten.
func (h *engineH2) stamp() {
	now := time.Now()
	if sec := now.Unix(); sec != h.dateSec {
		h.dateSec = sec
		f := &h.fields[dateField]
		f.Value = now.UTC().AppendFormat(f.Value[:0], http.TimeFormat)
	}
}

// h2Conn is one connection's state, owned by its loop: the h2 Server, the
// incomplete frame carried to the next read, and the responses whose body
// waits for send window. It is the Server's h2.Handler.
type h2Conn struct {
	h       *engineH2
	srv     *h2.Server
	writev  func([][]byte) (int, error) // the connection's Conn.Writev
	in      []byte
	blocked []h2Blocked
}

// h2Blocked is a response whose body from off on waits for window.
type h2Blocked struct {
	id  uint32
	off int
}

// OnOpen attaches the connection's h2 Server. Loop goroutine.
func (h *engineH2) OnOpen(c *engine.Conn) {
	st := &h2Conn{h: h, writev: c.Writev}
	st.srv = h2.NewServer(st, nil)
	c.SetContext(st)
}

// OnData brings the date to the clock, feeds the received bytes, with the
// tail of the last read, to the h2 Server and writes what it answered; a
// connection error (the GOAWAY written) or a finished connection is closed
// once its writes are out. Loop goroutine.
func (h *engineH2) OnData(c *engine.Conn, b engine.Buffer) bool {
	st := c.Context().(*h2Conn)
	h.stamp()
	err := st.srv.FeedTail(&st.in, b.Bytes())
	if out := st.srv.Pending(); len(out) > 0 {
		if _, werr := c.Write(out); werr != nil {
			err = werr
		}
		st.srv.Written(len(out))
	}
	if err != nil || st.srv.Done() {
		c.Close()
	}
	return false
}

// OnClose ends the h2 Server's streams. Loop goroutine.
func (h *engineH2) OnClose(c *engine.Conn, _ error) {
	if st, ok := c.Context().(*h2Conn); ok {
		st.srv.Close()
	}
}

// OnRequest answers every request whose header section ends it (a GET);
// one with a body is answered at its end (OnData). Loop goroutine.
func (st *h2Conn) OnRequest(s *h2.Server, id uint32, _ *h2.Request, end bool) {
	if end {
		st.respond(s, id)
	}
}

// OnData returns the request body's bytes to the window and answers at the
// body's end. Loop goroutine.
func (st *h2Conn) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		st.respond(s, id)
	}
}

// OnTrailers answers: trailers end the request. Loop goroutine.
func (st *h2Conn) OnTrailers(s *h2.Server, id uint32, _ []hpack.Field) { st.respond(s, id) }

// OnReset forgets a response waiting for window. Loop goroutine.
func (st *h2Conn) OnReset(_ *h2.Server, id uint32, _ h2.ErrCode) { st.unblock(id) }

// OnWritable sends more of a response's body. Loop goroutine.
func (st *h2Conn) OnWritable(s *h2.Server, id uint32) {
	for i := range st.blocked {
		if b := st.blocked[i]; b.id == id {
			st.unblock(id)
			st.send(s, id, b.off)
			return
		}
	}
}

// OnGoAway: the streams open go on; the connection closes when Done.
func (st *h2Conn) OnGoAway(*h2.Server, h2.ErrCode, []byte) {}

// respond writes the response's header section and as much of its body as
// the windows take.
func (st *h2Conn) respond(s *h2.Server, id uint32) {
	if s.WriteHeaders(id, 200, st.h.fields, len(st.h.body) == 0) == nil && len(st.h.body) > 0 {
		st.send(s, id, 0)
	}
}

// send writes the body from off on; what the windows do not take waits
// for OnWritable.
func (st *h2Conn) send(s *h2.Server, id uint32, off int) {
	n, err := s.WriteDataTo(id, st.h.body[off:], true, st.writev)
	if err == nil && off+n < len(st.h.body) {
		st.blocked = append(st.blocked, h2Blocked{id, off + n})
	}
}

// unblock drops stream id's waiting response, if any.
func (st *h2Conn) unblock(id uint32) {
	for i, b := range st.blocked {
		if b.id == id {
			st.blocked = append(st.blocked[:i], st.blocked[i+1:]...)
			return
		}
	}
}
