package bench

import (
	"testing"

	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// h2Client is the client side of an h2Conn under test, without the
// engine: its bytes go to h2Conn.feed, the answers come from Pending.
type h2Client struct {
	t      testing.TB
	st     *h2Conn
	wire   []byte // what the server wrote through (WriteDataTo)
	enc    *hpack.Encoder
	block  []byte
	req    []byte
	nextID uint32
}

// newH2Client opens a connection with SETTINGS whose stream window is
// streamWindow, the connection's raised by a WINDOW_UPDATE of a GiB.
func newH2Client(t testing.TB, body int, streamWindow uint32) *h2Client {
	c := &h2Client{t: t, enc: hpack.NewEncoder(), nextID: 1}
	c.st = &h2Conn{h: newEngineH2(appendBody(nil, body))}
	c.st.writev = func(vec [][]byte) (int, error) {
		n := len(c.wire)
		for _, p := range vec {
			c.wire = append(c.wire, p...)
		}
		return len(c.wire) - n, nil
	}
	c.st.srv = h2.NewServer(c.st, nil)
	in := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: streamWindow}})...)
	in = h2.AppendSettingsAck(in)
	in = h2.AppendWindowUpdate(in, 0, 1<<30)
	c.send(in)
	c.st.srv.Written(len(c.st.srv.Pending())) // our SETTINGS, its WINDOW_UPDATE, the ack
	c.wire = c.wire[:0]
	return c
}

// send feeds p in two pieces, the first of 5 bytes (an incomplete frame
// header): the tail is kept.
func (c *h2Client) send(p []byte) {
	c.t.Helper()
	for _, piece := range [][]byte{p[:5], p[5:]} {
		if err := c.st.srv.FeedTail(&c.st.in, piece); err != nil {
			c.t.Fatal(err)
		}
	}
}

// get sends a GET and returns its stream id.
func (c *h2Client) get() uint32 {
	c.t.Helper()
	id := c.nextID
	c.nextID += 2
	b := c.enc.StartBlock(c.block[:0])
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "bench"}, {":path", "/"}} {
		b = c.enc.AppendField(b, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
	}
	c.block = b
	c.req = h2.AppendHeaders(c.req[:0], id, b, true, h2.MinMaxFrameSize)
	c.send(c.req)
	return id
}

// answer reads what the server wrote, through and then pending (as
// engineH2.OnData writes it): the stream's HEADERS, and its DATA bytes;
// ended is whether the stream ended.
func (c *h2Client) answer(id uint32) (headers bool, data int, ended bool) {
	c.t.Helper()
	c.wire = append(c.wire, c.st.srv.Pending()...)
	c.st.srv.Written(len(c.st.srv.Pending()))
	out := c.wire
	for len(out) > 0 {
		f, n, err := h2.ParseFrame(out, h2.MaxMaxFrameSize)
		if err != nil || n == 0 {
			c.t.Fatalf("server wrote %q: %v", out, err)
		}
		out = out[n:]
		if f.StreamID != id {
			c.t.Fatalf("a %v frame on stream %d, want %d", f.Type, f.StreamID, id)
		}
		switch f.Type {
		case h2.FrameHeaders:
			headers = true
		case h2.FrameData:
			data += len(f.Data)
		default:
			c.t.Fatalf("a %v frame", f.Type)
		}
		ended = ended || f.Flags.Has(h2.FlagEndStream)
	}
	c.wire = c.wire[:0]
	return headers, data, ended
}

// TestEngineH2 checks the spindle arms' responses: header section and
// whole body on each GET, a request whose frames arrive in pieces, and a
// body larger than the stream window sent as the window opens
// (OnWritable), with an empty body ending the stream in its HEADERS.
func TestEngineH2(t *testing.T) {
	c := newH2Client(t, 64, 1<<20)
	for range 3 {
		id := c.get()
		if h, n, end := c.answer(id); !h || n != 64 || !end {
			t.Fatalf("stream %d: headers %v, %d body bytes, ended %v", id, h, n, end)
		}
	}

	c = newH2Client(t, 100, 40)
	id := c.get()
	if h, n, end := c.answer(id); !h || n != 40 || end {
		t.Fatalf("window 40: headers %v, %d body bytes, ended %v", h, n, end)
	}
	c.send(h2.AppendWindowUpdate(nil, id, 30))
	if _, n, end := c.answer(id); n != 30 || end {
		t.Fatalf("30 more: %d body bytes, ended %v", n, end)
	}
	c.send(h2.AppendWindowUpdate(nil, id, 1000))
	if _, n, end := c.answer(id); n != 30 || !end || len(c.st.blocked) != 0 {
		t.Fatalf("the rest: %d body bytes, ended %v, %d blocked", n, end, len(c.st.blocked))
	}

	c = newH2Client(t, 0, 1<<20)
	id = c.get()
	if h, n, end := c.answer(id); !h || n != 0 || !end {
		t.Fatalf("empty body: headers %v, %d body bytes, ended %v", h, n, end)
	}
}

// TestEngineH2ZeroAllocs: a request and its response on an open
// connection, its frames fed in pieces, allocate nothing in the spindle
// arms' handler and the h2 Server.
func TestEngineH2ZeroAllocs(t *testing.T) {
	c := newH2Client(t, DefaultHTTP2Body, 1<<20)
	step := func() {
		id := c.get()
		if h, n, end := c.answer(id); !h || n != DefaultHTTP2Body || !end {
			t.Fatalf("stream %d: headers %v, %d body bytes, ended %v", id, h, n, end)
		}
	}
	for range 100 { // grow the buffers
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}
