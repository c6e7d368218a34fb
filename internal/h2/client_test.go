package h2

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// cstream is what clientApp saw of one stream and has still to send.
type cstream struct {
	status   []int // interim statuses, then the final one
	fields   []string
	body     []byte
	ended    bool // the response ended (END_STREAM)
	trailers []string
	reset    string // "CODE cause"
	send     []byte // request body left to send
	tr       []hpack.Field
}

// clientApp is a ClientHandler that records each stream and sends
// request bodies as the windows allow.
type clientApp struct {
	st     map[uint32]*cstream
	pings  [][8]byte
	goaway []string
	hold   bool // do not Consume: the windows stay spent
	// onResponse, if set, sees each response header section as well.
	onResponse func(*Response)
}

func newClientApp() *clientApp { return &clientApp{st: map[uint32]*cstream{}} }

func (a *clientApp) get(id uint32) *cstream {
	s := a.st[id]
	if s == nil {
		s = &cstream{}
		a.st[id] = s
	}
	return s
}

// start sends a request with body (nil: none) and trailers.
func (a *clientApp) start(c *Client, r *Request, body []byte, tr []hpack.Field) (uint32, error) {
	id, err := c.Request(r, body == nil && tr == nil)
	if err != nil {
		return 0, err
	}
	s := a.get(id)
	s.send, s.tr = body, tr
	if body != nil || tr != nil {
		a.OnWritable(c, id)
	}
	return id, nil
}

func (a *clientApp) OnResponse(c *Client, id uint32, r *Response, end bool) {
	s := a.get(id)
	s.status = append(s.status, r.Status)
	for _, f := range r.Fields {
		s.fields = append(s.fields, string(f.Name)+"="+string(f.Value))
	}
	s.ended = s.ended || end
	if a.onResponse != nil {
		a.onResponse(r)
	}
}

func (a *clientApp) OnData(c *Client, id uint32, p []byte, end bool) {
	s := a.get(id)
	s.body = append(s.body, p...)
	s.ended = s.ended || end
	if !a.hold {
		c.Consumed(id, len(p))
	}
}

func (a *clientApp) OnTrailers(c *Client, id uint32, fields []hpack.Field) {
	s := a.get(id)
	for _, f := range fields {
		s.trailers = append(s.trailers, string(f.Name)+"="+string(f.Value))
	}
	s.ended = true
}

func (a *clientApp) OnReset(c *Client, id uint32, code ErrCode, cause ResetCause) {
	a.get(id).reset = fmt.Sprintf("%v %v", code, cause)
}

func (a *clientApp) OnWritable(c *Client, id uint32) {
	s := a.st[id]
	if s == nil || s.send == nil && s.tr == nil {
		return
	}
	n, err := c.WriteData(id, s.send, s.tr == nil)
	if err != nil {
		return
	}
	s.send = s.send[n:]
	if len(s.send) > 0 {
		return
	}
	s.send = nil
	if s.tr != nil {
		c.WriteTrailers(id, s.tr)
		s.tr = nil
	}
}

func (a *clientApp) OnGoAway(c *Client, code ErrCode, last uint32, debug []byte) {
	a.goaway = append(a.goaway, fmt.Sprintf("%v %d %q", code, last, debug))
}

func (a *clientApp) OnPingAck(c *Client, data [8]byte) { a.pings = append(a.pings, data) }

// echoApp is a Server's handler that answers 200 at once and echoes the
// request body, then ends with trailers x-len (the body's length) and
// x-got (the request's trailer x-check, if any). Paths: /refuse is reset
// REFUSED_STREAM, /reset answered 200 and reset CANCEL, /hold not
// answered, /interim answered 103 first.
type echoApp struct {
	left   map[uint32][]byte
	n      map[uint32]int
	done   map[uint32]bool
	got    map[uint32]string
	resets []string
}

func newEchoApp() *echoApp {
	return &echoApp{left: map[uint32][]byte{}, n: map[uint32]int{}, done: map[uint32]bool{}, got: map[uint32]string{}}
}

func (a *echoApp) OnRequest(s *Server, id uint32, r *Request, end bool) {
	switch string(r.Path) {
	case "/refuse":
		s.Reset(id, RefusedStream)
		return
	case "/hold":
		return
	case "/interim":
		s.WriteHeaders(id, 103, []hpack.Field{{Name: []byte("link"), Value: []byte("</a>")}}, false)
	}
	s.WriteHeaders(id, 200, []hpack.Field{{Name: []byte("x-path"), Value: r.Path}}, false)
	if string(r.Path) == "/reset" {
		s.Reset(id, Cancel)
		return
	}
	a.done[id] = end
	a.flush(s, id)
}

func (a *echoApp) OnData(s *Server, id uint32, p []byte, end bool) {
	a.left[id] = append(a.left[id], p...)
	a.n[id] += len(p)
	a.done[id] = end
	s.Consumed(id, len(p))
	a.flush(s, id)
}

func (a *echoApp) flush(s *Server, id uint32) {
	n, err := s.WriteData(id, a.left[id], false)
	if err != nil {
		return
	}
	a.left[id] = a.left[id][n:]
	if len(a.left[id]) == 0 && a.done[id] {
		delete(a.done, id)
		s.WriteTrailers(id, []hpack.Field{
			{Name: []byte("x-len"), Value: []byte(strconv.Itoa(a.n[id]))},
			{Name: []byte("x-got"), Value: []byte(a.got[id])},
		})
	}
}

func (a *echoApp) OnTrailers(s *Server, id uint32, fields []hpack.Field) {
	for _, f := range fields {
		if string(f.Name) == "x-check" {
			a.got[id] = string(f.Value)
		}
	}
	a.done[id] = true
	a.flush(s, id)
}

func (a *echoApp) OnReset(s *Server, id uint32, code ErrCode) {
	a.resets = append(a.resets, fmt.Sprintf("%d %v", id, code))
}
func (a *echoApp) OnWritable(s *Server, id uint32)                { a.flush(s, id) }
func (a *echoApp) OnGoAway(s *Server, code ErrCode, debug []byte) {}

// pump moves c's and s's output into the other until neither has any.
func pump(t *testing.T, c *Client, s *Server) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("pump: no end")
		}
		p, q := c.Pending(), s.Pending()
		if len(p) == 0 && len(q) == 0 {
			return
		}
		if len(p) > 0 {
			if n, err := s.Feed(p); err != nil || n != len(p) {
				t.Fatalf("server: %d of %d: %v", n, len(p), err)
			}
			c.Written(len(p))
		}
		if q = s.Pending(); len(q) > 0 {
			if n, err := c.Feed(q); err != nil || n != len(q) {
				t.Fatalf("client: %d of %d: %v", n, len(q), err)
			}
			s.Written(len(q))
		}
	}
}

func req(path string) *Request {
	return &Request{Method: []byte("POST"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte(path)}
}

// TestClientServer: a Client against a Server in memory: 100 concurrent
// streams, bodies both ways larger than the stream and connection
// windows, trailers both ways, an interim response, a PING.
func TestClientServer(t *testing.T) {
	ca, sa := newClientApp(), newEchoApp()
	c := NewClient(ca, nil)
	if !c.SettingsPending() {
		t.Fatal("settings not pending before the server's ack")
	}
	s := NewServer(sa, nil)
	pump(t, c, s)
	if c.SettingsPending() || c.Available() != DefaultMaxConcurrentStreams {
		t.Fatalf("after the handshake: pending %v available %d", c.SettingsPending(), c.Available())
	}
	bodies := map[uint32][]byte{}
	for i := range 100 {
		var body []byte
		var tr []hpack.Field
		switch i % 4 {
		case 0:
			body = pattern(1<<20 + i)
			tr = []hpack.Field{{Name: []byte("x-check"), Value: []byte(strconv.Itoa(i))}}
		case 1:
			body = []byte("small")
		case 2: // no body
		case 3:
			tr = []hpack.Field{{Name: []byte("x-check"), Value: []byte("only")}}
		}
		id, err := ca.start(c, req("/echo"), body, tr)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if id != uint32(2*i+1) {
			t.Fatalf("stream id %d for request %d", id, i)
		}
		bodies[id] = body
	}
	if c.CanOpen() {
		t.Fatal("CanOpen with the server's 100 streams open")
	}
	if _, err := c.Request(req("/x"), true); err != ErrMaxStreams {
		t.Fatalf("101st request: %v", err)
	}
	pump(t, c, s)
	c.Ping([8]byte{1, 2, 3})
	pump(t, c, s)
	for id, body := range bodies {
		st := ca.st[id]
		want := ""
		if x := (id - 1) / 2; x%4 == 0 {
			want = strconv.Itoa(int(x))
		} else if x%4 == 3 {
			want = "only"
		}
		tr := fmt.Sprintf("[x-len=%d x-got=%s]", len(body), want)
		if fmt.Sprint(st.status) != "[200]" || !st.ended || !bytes.Equal(st.body, body) || fmt.Sprint(st.trailers) != tr || st.reset != "" {
			t.Fatalf("stream %d: status %v ended %v body %d/%d trailers %v (want %s) reset %q", id, st.status, st.ended, len(st.body), len(body), st.trailers, tr, st.reset)
		}
	}
	if len(ca.pings) != 1 || ca.pings[0] != [8]byte{1, 2, 3} {
		t.Fatalf("ping acks %v", ca.pings)
	}
	if c.live() != 0 || s.live() != 0 || !c.CanOpen() {
		t.Fatalf("streams left: client %d server %d", c.live(), s.live())
	}
	id, _ := ca.start(c, &Request{Method: []byte("GET"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte("/interim")}, nil, nil)
	pump(t, c, s)
	if st := ca.st[id]; fmt.Sprint(st.status) != "[103 200]" || fmt.Sprint(st.fields) != "[link=</a> x-path=/interim]" || !st.ended {
		t.Fatalf("interim: %+v", st)
	}
	c.Shutdown()
	pump(t, c, s)
	if !c.Done() || !s.Done() {
		t.Fatal("not done after the client's GOAWAY")
	}
	if _, err := c.Request(req("/x"), true); err != ErrNoStream {
		t.Fatalf("request after Shutdown: %v", err)
	}
}

// TestClientResets: resets both ways, REFUSED_STREAM told as unprocessed.
func TestClientResets(t *testing.T) {
	ca, sa := newClientApp(), newEchoApp()
	c, s := NewClient(ca, nil), NewServer(sa, nil)
	pump(t, c, s)
	hold, _ := ca.start(c, req("/hold"), nil, nil)
	refuse, _ := ca.start(c, req("/refuse"), nil, nil)
	reset, _ := ca.start(c, req("/reset"), nil, nil)
	pump(t, c, s)
	c.Reset(hold, Cancel)
	pump(t, c, s)
	if got := ca.st[refuse].reset; got != "REFUSED_STREAM unprocessed" {
		t.Fatalf("refused: %q", got)
	}
	if st := ca.st[reset]; st.reset != "CANCEL server" || fmt.Sprint(st.status) != "[200]" {
		t.Fatalf("reset after the response header: %+v", st)
	}
	if ca.st[hold].reset != "" || fmt.Sprint(sa.resets) != "[1 CANCEL]" {
		t.Fatalf("our reset: client %q, server %v", ca.st[hold].reset, sa.resets)
	}
	if c.live() != 0 || s.live() != 0 {
		t.Fatalf("streams left: client %d server %d", c.live(), s.live())
	}
	// Frames of the stream we reset that were on their way are ignored.
	if e := feed(t, c, frame(FrameData, 0, hold, 'x')); e != noConnErr {
		t.Fatalf("DATA after our reset: %v", e)
	}
	if got := outFrames(t, c, hpack.NewDecoder(4096, 0)); len(got) != 0 {
		t.Fatalf("after a late DATA: %q", got)
	}
}

// openClient returns a Client that has seen the server's empty SETTINGS
// and the ack of its own, its output drained, and a server-side encoder.
func openClient(t *testing.T, cfg *Config) (*Client, *clientApp, *peer) {
	t.Helper()
	a := newClientApp()
	c := NewClient(a, cfg)
	out := string(c.Pending())
	if !strings.HasPrefix(out, ClientPreface) {
		t.Fatalf("no preface: %q", out)
	}
	c.Written(len(ClientPreface))
	if e := feed(t, c, cat(frame(FrameSettings, 0, 0), frame(FrameSettings, FlagAck, 0))); e != noConnErr {
		t.Fatalf("handshake: %v", e)
	}
	got := outFrames(t, c, hpack.NewDecoder(4096, 0))
	if fmt.Sprint(got) != "[SETTINGS 5 WINDOW_UPDATE 0 983041 SETTINGS ack]" {
		t.Fatalf("client's first frames: %q", got)
	}
	return c, a, newPeer()
}

// TestClientSettingsSeen: SettingsSeen is false until the server's
// SETTINGS arrive, and false again once the connection failed.
func TestClientSettingsSeen(t *testing.T) {
	c := NewClient(newClientApp(), nil)
	if c.SettingsSeen() {
		t.Fatal("seen before any frame")
	}
	c.Written(len(c.Pending()))
	feed(t, c, frame(FrameSettings, 0, 0, setting(SettingMaxConcurrentStreams, 1)...))
	if !c.SettingsSeen() || c.Available() != 1 {
		t.Fatalf("after SETTINGS: seen %v available %d", c.SettingsSeen(), c.Available())
	}
	c.Abort(InternalError)
	if c.SettingsSeen() {
		t.Fatal("seen after Abort")
	}
}

// TestClientResetCauses: OnReset tells why a stream ended, each cause
// with its code: the server's RST_STREAM before the response head (a gRPC
// server's deadline: CANCEL) and after it (NO_ERROR), REFUSED_STREAM and
// GOAWAY's last stream id (unprocessed), a stream error in the response,
// and the connection's end: Close, a connection error from Feed, Abort, a
// write of WriteDataTo lost.
func TestClientResetCauses(t *testing.T) {
	rst := func(id uint32, code ErrCode) []byte { return frame(FrameRSTStream, 0, id, u32(uint32(code))...) }
	for _, tc := range []struct {
		name string
		do   func(c *Client, p *peer)
		want string
	}{
		{"server before head", func(c *Client, p *peer) { c.Feed(rst(1, Cancel)) }, "CANCEL server"},
		{"server after head", func(c *Client, p *peer) {
			c.Feed(cat(p.headers(1, false, ":status", "200"), rst(1, NoError)))
		}, "NO_ERROR server"},
		{"server internal", func(c *Client, p *peer) { c.Feed(rst(1, InternalError)) }, "INTERNAL_ERROR server"},
		{"refused", func(c *Client, p *peer) { c.Feed(rst(1, RefusedStream)) }, "REFUSED_STREAM unprocessed"},
		{"goaway", func(c *Client, p *peer) {
			c.Feed(frame(FrameGoAway, 0, 0, cat(u32(0), u32(uint32(EnhanceYourCalm)))...))
		}, "ENHANCE_YOUR_CALM unprocessed"},
		{"stream error", func(c *Client, p *peer) { c.Feed(p.headers(1, true, "a", "b")) }, "PROTOCOL_ERROR stream error"},
		{"close", func(c *Client, p *peer) { c.Close() }, "CANCEL connection"},
		{"feed error", func(c *Client, p *peer) { c.Feed(frame(FramePushPromise, FlagEndHeaders, 1, u32(2)...)) }, "PROTOCOL_ERROR connection"},
		{"abort", func(c *Client, p *peer) { c.Abort(SettingsTimeout) }, "SETTINGS_TIMEOUT connection"},
		{"write lost", func(c *Client, p *peer) {
			c.WriteDataTo(1, []byte("x"), true, func([][]byte) (int, error) { return 0, errors.New("gone") })
		}, "INTERNAL_ERROR connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a, p := openClient(t, nil)
			if _, err := c.Request(req("/"), false); err != nil { // the body to come
				t.Fatal(err)
			}
			outFrames(t, c, p.dec)
			tc.do(c, p)
			if got := a.st[1].reset; got != tc.want {
				t.Fatalf("reset %q, want %q", got, tc.want)
			}
		})
	}
	if s := ResetCause(9).String(); s != "ResetCause(9)" {
		t.Errorf("ResetCause(9): %q", s)
	}
}

// TestClientGoAway: streams above GOAWAY's last stream id are told
// unprocessed; those below go on; no new requests; Done at the end.
func TestClientGoAway(t *testing.T) {
	c, a, p := openClient(t, nil)
	for range 3 {
		a.start(c, req("/"), nil, nil)
	}
	c.Written(len(c.Pending()))
	if e := feed(t, c, frame(FrameGoAway, 0, 0, cat(u32(1), u32(uint32(NoError)), []byte("bye"))...)); e != noConnErr {
		t.Fatal(e)
	}
	if fmt.Sprint(a.goaway) != `[NO_ERROR 1 "bye"]` || a.st[3].reset != "NO_ERROR unprocessed" || a.st[5].reset != "NO_ERROR unprocessed" || a.st[1].reset != "" {
		t.Fatalf("goaway %v; resets %q %q %q", a.goaway, a.st[1].reset, a.st[3].reset, a.st[5].reset)
	}
	if _, err := c.Request(req("/"), true); err != ErrNoStream || c.CanOpen() || c.Done() {
		t.Fatalf("after GOAWAY: %v CanOpen %v Done %v", err, c.CanOpen(), c.Done())
	}
	feed(t, c, p.headers(1, true, ":status", "204"))
	if !c.Done() || fmt.Sprint(a.st[1].status) != "[204]" {
		t.Fatalf("Done %v, stream 1 %+v", c.Done(), a.st[1])
	}
}

// TestClientSettings: the server's SETTINGS mid-connection: fewer
// concurrent streams, a smaller then larger INITIAL_WINDOW_SIZE, a larger
// MAX_FRAME_SIZE, ENABLE_PUSH 1 refused.
func TestClientSettings(t *testing.T) {
	c, a, p := openClient(t, nil)
	feed(t, c, frame(FrameSettings, 0, 0, cat(setting(SettingMaxConcurrentStreams, 2), setting(SettingInitialWindowSize, 10))...))
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[SETTINGS ack]" || c.Available() != 2 {
		t.Fatalf("%q available %d", got, c.Available())
	}
	id, _ := a.start(c, req("/"), pattern(100), nil)
	a.start(c, req("/"), nil, nil)
	if _, err := c.Request(req("/"), true); err != ErrMaxStreams || c.Available() != 0 {
		t.Fatalf("third: %v", err)
	}
	got := outFrames(t, c, p.dec)
	if len(got) != 3 || got[1] != "DATA 1 10" {
		t.Fatalf("window 10: %q", got)
	}
	feed(t, c, frame(FrameSettings, 0, 0, cat(setting(SettingInitialWindowSize, 200), setting(SettingMaxFrameSize, 1<<15))...))
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[SETTINGS ack DATA 1 90 end]" || a.st[id].send != nil {
		t.Fatalf("window 200: %q", got)
	}
	feed(t, c, p.headers(3, true, ":status", "200"))
	if c.Available() != 1 {
		t.Fatalf("available %d after a stream ended", c.Available())
	}
	if e := feed(t, c, frame(FrameSettings, 0, 0, setting(SettingEnablePush, 1)...)); e != ProtocolError {
		t.Fatalf("ENABLE_PUSH 1: %v", e)
	}
	if got := a.st[id].reset; got != "PROTOCOL_ERROR connection" {
		t.Fatalf("open stream after the connection error: %q", got)
	}
}

// TestClientMalformed: responses RFC 9113 8.1, 8.2 and 8.3.2 call
// malformed are stream errors PROTOCOL_ERROR; the connection goes on.
func TestClientMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(p *peer) []byte
	}{
		{"no status", func(p *peer) []byte { return p.headers(1, true, "a", "b") }},
		{"status twice", func(p *peer) []byte { return p.headers(1, true, ":status", "200", ":status", "200") }},
		{"status letters", func(p *peer) []byte { return p.headers(1, true, ":status", "2x0") }},
		{"status 4 digits", func(p *peer) []byte { return p.headers(1, true, ":status", "2000") }},
		{"101", func(p *peer) []byte { return p.headers(1, true, ":status", "101") }},
		{"request pseudo", func(p *peer) []byte { return p.headers(1, true, ":status", "200", ":path", "/") }},
		{"pseudo after regular", func(p *peer) []byte { return p.headers(1, true, "a", "b", ":status", "200") }},
		{"uppercase", func(p *peer) []byte { return p.headers(1, true, ":status", "200", "X-A", "b") }},
		{"connection", func(p *peer) []byte { return p.headers(1, true, ":status", "200", "connection", "close") }},
		{"transfer-encoding", func(p *peer) []byte { return p.headers(1, true, ":status", "200", "transfer-encoding", "chunked") }},
		{"value NUL", func(p *peer) []byte { return p.headers(1, true, ":status", "200", "a", "b\x00") }},
		{"interim END_STREAM", func(p *peer) []byte { return p.headers(1, true, ":status", "100") }},
		{"DATA first", func(p *peer) []byte { return frame(FrameData, FlagEndStream, 1, 'x') }},
		{"DATA after interim", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "100"), frame(FrameData, FlagEndStream, 1, 'x'))
		}},
		{"content-length short", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "200", "content-length", "3"), frame(FrameData, FlagEndStream, 1, 'x'))
		}},
		{"content-length over", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "200", "content-length", "1"), frame(FrameData, 0, 1, 'x', 'y'))
		}},
		{"content-length no body", func(p *peer) []byte { return p.headers(1, true, ":status", "200", "content-length", "3") }},
		{"content-length two values", func(p *peer) []byte {
			return p.headers(1, true, ":status", "200", "content-length", "0", "content-length", "1")
		}},
		{"204 with DATA", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "204"), frame(FrameData, FlagEndStream, 1, 'x'))
		}},
		{"304 with DATA", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "304", "content-length", "1"), frame(FrameData, FlagEndStream, 1, 'x'))
		}},
		{"trailers without END_STREAM", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "200"), p.headers(1, false, "a", "b"))
		}},
		{"trailers pseudo", func(p *peer) []byte {
			return cat(p.headers(1, false, ":status", "200"), p.headers(1, true, ":status", "200"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a, p := openClient(t, nil)
			a.start(c, req("/"), nil, nil)
			outFrames(t, c, p.dec)
			if e := feed(t, c, tc.in(p)); e != noConnErr {
				t.Fatalf("connection error %v", e)
			}
			got := outFrames(t, c, p.dec)
			if len(got) == 0 || got[len(got)-1] != "RST_STREAM 1 PROTOCOL_ERROR" || a.st[1].reset != "PROTOCOL_ERROR stream error" {
				t.Fatalf("out %q, reset %q", got, a.st[1].reset)
			}
			// The connection goes on.
			a.start(c, req("/"), nil, nil)
			feed(t, c, p.headers(3, true, ":status", "200"))
			if fmt.Sprint(a.st[3].status) != "[200]" {
				t.Fatalf("next stream: %+v", a.st[3])
			}
		})
	}
	// A HEAD's response and a 204 or 304 may name a length they do not send.
	c, a, p := openClient(t, nil)
	a.start(c, &Request{Method: []byte("HEAD"), Scheme: []byte("http"), Path: []byte("/")}, nil, nil)
	a.start(c, req("/"), nil, nil)
	feed(t, c, cat(p.headers(1, true, ":status", "200", "content-length", "9"), p.headers(3, true, ":status", "304", "content-length", "9")))
	if a.st[1].reset != "" || a.st[3].reset != "" || !a.st[1].ended || !a.st[3].ended {
		t.Fatalf("bodiless responses: %+v %+v", a.st[1], a.st[3])
	}
	// But they have no content (RFC 9110 6.4.1), empty DATA aside: a byte
	// of it is malformed, as a length it does not match is, and not
	// OnData's (a proxy would write it after an HTTP/1.1 head that
	// frames none, where its client reads a next response).
	a.start(c, &Request{Method: []byte("HEAD"), Scheme: []byte("http"), Path: []byte("/")}, nil, nil)
	a.start(c, &Request{Method: []byte("HEAD"), Scheme: []byte("http"), Path: []byte("/")}, nil, nil)
	outFrames(t, c, p.dec)
	feed(t, c, cat(p.headers(5, false, ":status", "200", "content-length", "1"), frame(FrameData, FlagEndStream, 5, 'x'),
		p.headers(7, false, ":status", "200"), frame(FrameData, FlagEndStream, 7)))
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[RST_STREAM 5 PROTOCOL_ERROR]" || a.st[5].body != nil || !a.st[7].ended || a.st[7].reset != "" {
		t.Fatalf("HEAD responses with DATA: out %q, %+v %+v", got, a.st[5], a.st[7])
	}
}

// TestClientConnErrors: a server's frames that end the connection.
func TestClientConnErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(p *peer) []byte
		code ErrCode
	}{
		{"PUSH_PROMISE", func(p *peer) []byte {
			return frame(FramePushPromise, FlagEndHeaders, 1, cat(u32(2), p.block(get...))...)
		}, ProtocolError},
		{"HEADERS on an even stream", func(p *peer) []byte { return p.headers(2, true, ":status", "200") }, ProtocolError},
		{"HEADERS on an idle stream", func(p *peer) []byte { return p.headers(5, true, ":status", "200") }, ProtocolError},
		{"DATA on an idle stream", func(p *peer) []byte { return frame(FrameData, 0, 7, 'x') }, ProtocolError},
		{"bad HPACK", func(p *peer) []byte { return frame(FrameHeaders, FlagEndHeaders, 1, 0xff) }, CompressionError},
		{"header block too large", func(p *peer) []byte {
			return cat(frame(FrameHeaders, 0, 1, make([]byte, 16000)...), frame(FrameContinuation, 0, 1, make([]byte, 16000)...))
		}, EnhanceYourCalm},
		{"CONTINUATION flood", func(p *peer) []byte {
			b := frame(FrameHeaders, 0, 1, p.block(":status", "200")...)
			for range 100 {
				b = append(b, frame(FrameContinuation, 0, 1, 0x80|1)...) // an indexed field, 1 octet
			}
			return b
		}, EnhanceYourCalm},
		{"GOAWAY flood", func(p *peer) []byte {
			var b []byte
			for range 60 { // each naming stream 3 the last: nothing to reset
				b = append(b, frame(FrameGoAway, 0, 0, cat(u32(3), u32(0), make([]byte, 1000))...)...)
			}
			return b
		}, EnhanceYourCalm},
		{"PING flood", func(p *peer) []byte {
			var b []byte
			for range 60 {
				b = append(b, frame(FramePing, 0, 0, make([]byte, 8)...)...)
			}
			return b
		}, EnhanceYourCalm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a, p := openClient(t, &Config{MaxControlFrames: 50, MaxHeaderListSize: 4096})
			a.start(c, req("/"), nil, nil)
			a.start(c, req("/"), nil, nil)
			outFrames(t, c, p.dec)
			if e := feed(t, c, tc.in(p)); e != tc.code {
				t.Fatalf("got %v, want %v", e, tc.code)
			}
			got := outFrames(t, c, p.dec)
			if len(got) == 0 || got[len(got)-1] != "GOAWAY 0 "+tc.code.String() || a.st[1].reset == "" || c.CanOpen() || !c.Done() {
				t.Fatalf("out %q, reset %q", got, a.st[1].reset)
			}
		})
	}
}

// TestClientStreamIDs: when the stream ids are used up, Request says so
// and the connection finishes its streams.
func TestClientStreamIDs(t *testing.T) {
	c, a, p := openClient(t, nil)
	c.nextID = MaxWindow
	if c.Available() != 1 {
		t.Fatalf("available %d with one id left", c.Available())
	}
	id, err := a.start(c, req("/"), nil, nil)
	if err != nil || id != MaxWindow {
		t.Fatalf("last id: %d %v", id, err)
	}
	if _, err := c.Request(req("/"), true); err != ErrStreamIDs || c.CanOpen() {
		t.Fatalf("past the last id: %v", err)
	}
	feed(t, c, p.headers(MaxWindow, true, ":status", "200"))
	if c.live() != 0 || fmt.Sprint(a.st[id].status) != "[200]" {
		t.Fatalf("last stream: %+v", a.st[id])
	}
}

// TestClientPing: our PING's ack is reported; the server's PING answered;
// and a response's DATA returned to the windows only when Consumed.
func TestClientPing(t *testing.T) {
	c, a, p := openClient(t, nil)
	c.Ping([8]byte{9})
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[PING ack=false 0900000000000000]" {
		t.Fatalf("%q", got)
	}
	feed(t, c, cat(frame(FramePing, FlagAck, 0, 9, 0, 0, 0, 0, 0, 0, 0), frame(FramePing, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8)))
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[PING ack=true 0102030405060708]" || len(a.pings) != 1 || a.pings[0] != [8]byte{9} {
		t.Fatalf("%q %v", got, a.pings)
	}
}

// TestClientAbort: the caller's SETTINGS timeout ends the connection with
// GOAWAY(SETTINGS_TIMEOUT) naming stream 0, every open stream reset.
func TestClientAbort(t *testing.T) {
	a := newClientApp()
	c := NewClient(a, nil)
	a.start(c, req("/"), nil, nil)
	c.Written(len(c.Pending()))
	c.Feed(frame(FrameSettings, 0, 0)) // no ACK of ours
	if !c.SettingsPending() {
		t.Fatal("our SETTINGS not pending")
	}
	c.Abort(SettingsTimeout)
	got := outFrames(t, c, hpack.NewDecoder(4096, 0))
	if fmt.Sprint(got) != "[SETTINGS ack GOAWAY 0 SETTINGS_TIMEOUT]" || a.st[1].reset != "SETTINGS_TIMEOUT connection" || !c.Done() || c.SettingsPending() {
		t.Fatalf("%q, reset %q", got, a.st[1].reset)
	}
	if _, err := c.Request(req("/"), true); err != ErrNoStream {
		t.Fatalf("request after Abort: %v", err)
	}
}

// TestClientServerSettings: the server's SETTINGS in the middle of a
// transfer (a smaller window and fewer streams, then larger) and its
// MAX_CONCURRENT_STREAMS from the start; the transfer ends whole, the
// request body sent with WriteDataTo.
func TestClientServerSettings(t *testing.T) {
	ca, sa := newClientApp(), newEchoApp()
	c, s := NewClient(ca, nil), NewServer(sa, &Config{MaxConcurrentStreams: 10})
	pump(t, c, s)
	if c.Available() != 10 {
		t.Fatalf("available %d, server allows 10", c.Available())
	}
	body := pattern(300 << 10)
	var w collector
	id, _ := c.Request(req("/echo"), false)
	n, err := c.WriteDataTo(id, body, true, w.Writev)
	if err != nil || n != DefaultInitialWindowSize { // the server's stream window
		t.Fatalf("WriteDataTo: %d %v", n, err)
	}
	ca.get(id).send = body[n:]
	feed(t, s, w.b)
	// The server's SETTINGS, as if sent now: its frames are fed ahead of
	// its other output.
	s.out = append(frame(FrameSettings, 0, 0, cat(setting(SettingMaxConcurrentStreams, 1), setting(SettingInitialWindowSize, 1000))...), s.out...)
	pump(t, c, s)
	if c.Available() != 0 || c.peerInitial != 1000 {
		t.Fatalf("available %d, window %d", c.Available(), c.peerInitial)
	}
	s.out = append(s.out, frame(FrameSettings, 0, 0, cat(setting(SettingMaxConcurrentStreams, 5), setting(SettingInitialWindowSize, 1<<20))...)...)
	pump(t, c, s)
	st := ca.st[id]
	if !bytes.Equal(st.body, body) || fmt.Sprint(st.trailers) != fmt.Sprintf("[x-len=%d x-got=]", len(body)) || c.Available() != 5 {
		t.Fatalf("echo %d of %d bytes, trailers %v, available %d", len(st.body), len(body), st.trailers, c.Available())
	}
}

// TestClientHeaderListSize: a response header list above our
// MaxHeaderListSize is reset CANCEL; the HPACK table stays in step.
func TestClientHeaderListSize(t *testing.T) {
	c, a, p := openClient(t, &Config{MaxHeaderListSize: 100})
	a.start(c, req("/"), nil, nil)
	a.start(c, req("/"), nil, nil)
	outFrames(t, c, p.dec)
	feed(t, c, cat(p.headers(1, false, ":status", "200", "x-big", strings.Repeat("x", 200)), p.headers(3, true, ":status", "200", "x-small", "y")))
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[RST_STREAM 1 CANCEL]" || a.st[1].reset != "CANCEL stream error" {
		t.Fatalf("%q %q", got, a.st[1].reset)
	}
	if st := a.st[3]; fmt.Sprint(st.fields) != "[x-small=y]" || !st.ended {
		t.Fatalf("next response: %+v", st)
	}
}

// TestClientServerShutdown: the Server's graceful GOAWAYs, the first
// naming 2^31-1, the final one (after the Client's ACK of its PING) the
// streams it took: none is unprocessed, they end as usual, then Done.
func TestClientServerShutdown(t *testing.T) {
	ca, sa := newClientApp(), newEchoApp()
	c, s := NewClient(ca, nil), NewServer(sa, nil)
	pump(t, c, s)
	id, _ := c.Request(req("/echo"), false) // the request's end comes later
	pump(t, c, s)
	s.Shutdown()
	pump(t, c, s)
	if fmt.Sprint(ca.goaway) != `[NO_ERROR 2147483647 "" NO_ERROR 1 ""]` || ca.st[id].reset != "" || c.CanOpen() || c.Done() {
		t.Fatalf("goaway %v reset %q", ca.goaway, ca.st[id].reset)
	}
	c.WriteTrailers(id, nil)
	pump(t, c, s)
	if st := ca.st[id]; !st.ended || !c.Done() || !s.Done() {
		t.Fatalf("after the last stream: %+v client done %v server done %v", st, c.Done(), s.Done())
	}
}

// TestClientConnectContentLength: a client ignores Content-Length in a 2xx
// response to CONNECT (RFC 9110 9.3.6: the server must not send one, the
// client must ignore it): the stream's DATA is the tunnel's, of no
// length the head could name; a 4xx's body keeps to its length.
func TestClientConnectContentLength(t *testing.T) {
	c, a, p := openClient(t, nil)
	connect := &Request{Method: []byte("CONNECT"), Authority: []byte("example.com:443")}
	for range 2 {
		if _, err := a.start(c, connect, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	outFrames(t, c, p.dec)
	in := cat(p.headers(1, false, ":status", "200", "content-length", "0"), frame(FrameData, 0, 1, []byte("tunnel")...),
		p.headers(3, false, ":status", "407", "content-length", "1"), frame(FrameData, 0, 3, []byte("xy")...))
	if code := feed(t, c, in); code != noConnErr {
		t.Fatalf("connection error %v", code)
	}
	if got := outFrames(t, c, p.dec); fmt.Sprint(got) != "[RST_STREAM 3 PROTOCOL_ERROR]" || string(a.st[1].body) != "tunnel" || a.st[1].reset != "" {
		t.Fatalf("out %q, tunnel %+v", got, a.st[1])
	}
}
