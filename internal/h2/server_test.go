package h2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// recorder is a Handler that records events as strings and may act on
// requests through its callbacks.
type recorder struct {
	events    []string
	onRequest func(s *Server, id uint32, r *Request, end bool)
	onData    func(s *Server, id uint32, p []byte, end bool)
	onWrite   func(s *Server, id uint32)
	noConsume bool
}

func (h *recorder) add(format string, a ...any) {
	h.events = append(h.events, fmt.Sprintf(format, a...))
}

func (h *recorder) OnRequest(s *Server, id uint32, r *Request, end bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "req %d %s %s %s %s cl=%d", id, r.Method, r.Scheme, r.Authority, r.Path, r.ContentLength)
	for _, f := range r.Fields {
		fmt.Fprintf(&b, " %s=%s", f.Name, f.Value)
	}
	if end {
		b.WriteString(" end")
	}
	h.events = append(h.events, b.String())
	if h.onRequest != nil {
		h.onRequest(s, id, r, end)
	}
}

func (h *recorder) OnData(s *Server, id uint32, p []byte, end bool) {
	e := ""
	if end {
		e = " end"
	}
	if len(p) > 16 {
		h.add("data %d len=%d%s", id, len(p), e)
	} else {
		h.add("data %d %q%s", id, p, e)
	}
	if !h.noConsume {
		s.Consumed(id, len(p))
	}
	if h.onData != nil {
		h.onData(s, id, p, end)
	}
}

func (h *recorder) OnTrailers(s *Server, id uint32, fields []hpack.Field) {
	var b strings.Builder
	fmt.Fprintf(&b, "trailers %d", id)
	for _, f := range fields {
		fmt.Fprintf(&b, " %s=%s", f.Name, f.Value)
	}
	h.events = append(h.events, b.String())
}

func (h *recorder) OnReset(s *Server, id uint32, code ErrCode) { h.add("reset %d %v", id, code) }

func (h *recorder) OnWritable(s *Server, id uint32) {
	h.add("writable %d", id)
	if h.onWrite != nil {
		h.onWrite(s, id)
	}
}

func (h *recorder) OnGoAway(s *Server, code ErrCode, debug []byte) {
	h.add("goaway %v %q", code, debug)
}

// peer builds a client's bytes.
type peer struct {
	enc *hpack.Encoder
	dec *hpack.Decoder
}

func newPeer() *peer { return &peer{enc: hpack.NewEncoder(), dec: hpack.NewDecoder(4096, 0)} }

// block encodes "name: value" pairs given as alternating strings.
func (p *peer) block(kv ...string) []byte {
	b := p.enc.StartBlock(nil)
	for i := 0; i < len(kv); i += 2 {
		b = p.enc.AppendField(b, hpack.Field{Name: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return b
}

var (
	get  = []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/"}
	hold = []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/hold"} // not answered
)

func kvs(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }

// headersFrame is a HEADERS frame with END_HEADERS (and END_STREAM if end).
func (p *peer) headers(id uint32, end bool, kv ...string) []byte {
	fl := FlagEndHeaders
	if end {
		fl |= FlagEndStream
	}
	return frame(FrameHeaders, fl, id, p.block(kv...)...)
}

func start() []byte {
	return append([]byte(ClientPreface), frame(FrameSettings, 0, 0)...)
}

// outFrames parses everything s (a Server or a Client) has to send,
// decoding header blocks into "name=value" lists, and drains it.
func outFrames(t *testing.T, s interface {
	Pending() []byte
	Written(int)
}, dec *hpack.Decoder) []string {
	t.Helper()
	var out []string
	b := s.Pending()
	var blk []byte
	for len(b) > 0 {
		f, n, err := ParseFrame(b, MaxMaxFrameSize)
		if err != nil || n == 0 {
			t.Fatalf("server output does not parse: n %d err %v", n, err)
		}
		b = b[n:]
		switch f.Type {
		case FrameHeaders, FrameContinuation:
			blk = append(blk, f.Data...)
			if !f.Flags.Has(FlagEndHeaders) {
				continue
			}
			var fs []string
			if err := dec.Decode(blk, func(x hpack.Field) error {
				fs = append(fs, string(x.Name)+"="+string(x.Value))
				return nil
			}); err != nil {
				t.Fatalf("decode: %v", err)
			}
			blk = nil
			end := ""
			if f.Type == FrameHeaders && f.Flags.Has(FlagEndStream) {
				end = " end"
			}
			out = append(out, fmt.Sprintf("HEADERS %d %s%s", f.StreamID, strings.Join(fs, " "), end))
		case FrameData:
			end := ""
			if f.Flags.Has(FlagEndStream) {
				end = " end"
			}
			out = append(out, fmt.Sprintf("DATA %d %d%s", f.StreamID, len(f.Data), end))
		case FrameRSTStream:
			out = append(out, fmt.Sprintf("RST_STREAM %d %v", f.StreamID, f.Code))
		case FrameGoAway:
			out = append(out, fmt.Sprintf("GOAWAY %d %v", f.LastStream, f.Code))
		case FrameWindowUpdate:
			out = append(out, fmt.Sprintf("WINDOW_UPDATE %d %d", f.StreamID, f.Increment))
		case FrameSettings:
			if f.Flags.Has(FlagAck) {
				out = append(out, "SETTINGS ack")
			} else {
				out = append(out, fmt.Sprintf("SETTINGS %d", f.NumSettings()))
			}
		case FramePing:
			out = append(out, fmt.Sprintf("PING ack=%v %x", f.Flags.Has(FlagAck), f.Data))
		default:
			out = append(out, f.Type.String())
		}
	}
	s.Written(len(s.Pending()))
	return out
}

// open starts a server, feeds the preface and an empty SETTINGS, and drains
// the server preface.
func open(t *testing.T, h Handler, cfg *Config) (*Server, *peer) {
	t.Helper()
	s := NewServer(h, cfg)
	p := newPeer()
	if n, err := s.Feed(start()); err != nil || n != len(start()) {
		t.Fatalf("preface: n %d err %v", n, err)
	}
	got := outFrames(t, s, p.dec)
	if len(got) < 2 || got[0] != "SETTINGS 5" || got[len(got)-1] != "SETTINGS ack" || len(got) == 3 && !strings.HasPrefix(got[1], "WINDOW_UPDATE 0 ") {
		t.Fatalf("server preface %q", got)
	}
	return s, p
}

// feed feeds in whole to s (a Server or a Client) and returns the
// connection error's code, or noConnErr.
func feed(t *testing.T, s interface{ Feed([]byte) (int, error) }, in []byte) ErrCode {
	t.Helper()
	n, err := s.Feed(in)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %T %v", err, err)
		}
		return e.Code
	}
	if n != len(in) {
		t.Fatalf("consumed %d of %d", n, len(in))
	}
	return noConnErr
}

const noConnErr = ErrCode(1 << 31)

func TestServerPreface(t *testing.T) {
	t.Run("in pieces", func(t *testing.T) {
		s := NewServer(&recorder{}, nil)
		in := start()
		off := 0
		for i := 1; i <= len(in); i++ {
			n, err := s.Feed(in[off:i])
			if err != nil {
				t.Fatalf("at %d: %v", i, err)
			}
			off += n
		}
		if off != len(in) {
			t.Fatalf("consumed %d of %d", off, len(in))
		}
	})
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"HTTP/1.1", []byte("GET / HTTP/1.1\r\n")},
		{"preface then PING", append([]byte(ClientPreface), frame(FramePing, 0, 0, make([]byte, 8)...)...)},
		{"preface then SETTINGS ack", append([]byte(ClientPreface), frame(FrameSettings, FlagAck, 0)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(&recorder{}, nil)
			if _, err := s.Feed(tc.in); err == nil || err.(*Error).Code != ProtocolError {
				t.Fatalf("err %v", err)
			}
			out := outFrames(t, s, hpack.NewDecoder(4096, 0))
			if out[len(out)-1] != "GOAWAY 0 PROTOCOL_ERROR" {
				t.Fatalf("out %q", out)
			}
		})
	}
}

// TestServerSequences: frame sequences after the preface, the events the
// handler sees, what the server sends, and the connection error.
func TestServerSequences(t *testing.T) {
	respond := func(s *Server, id uint32, r *Request, end bool) {
		if end && string(r.Path) != "/hold" {
			s.WriteHeaders(id, 200, nil, true)
		}
	}
	type seq struct {
		name   string
		cfg    *Config
		in     func(p *peer) []byte
		events []string
		out    []string
		code   ErrCode
	}
	for _, tc := range []seq{
		{name: "GET answered", in: func(p *peer) []byte { return p.headers(1, true, get...) },
			events: []string{"req 1 GET http x / cl=-1 end"}, out: []string{"HEADERS 1 :status=200 end"}, code: noConnErr},
		{name: "POST with body and trailers", in: func(p *peer) []byte {
			return cat(p.headers(3, false, kvs(get, "content-length", "5", "cookie", "a=1", "cookie", "b=2")...),
				frame(FrameData, 0, 3, []byte("he")...), frame(FrameData, FlagPadded, 3, 2, 'l', 'l', 0, 0),
				frame(FrameData, 0, 3, 'o'), p.headers(3, true, "x-sum", "1"))
		}, events: []string{"req 3 GET http x / cl=5 content-length=5 cookie=a=1 cookie=b=2", `data 3 "he"`, `data 3 "ll"`, `data 3 "o"`, "trailers 3 x-sum=1"},
			code: noConnErr},
		{name: "HEADERS split by CONTINUATION", in: func(p *peer) []byte {
			b := p.block(get...)
			return cat(frame(FrameHeaders, FlagEndStream, 1, b[:2]...), frame(FrameContinuation, 0, 1, b[2:3]...),
				frame(FrameContinuation, FlagEndHeaders, 1, b[3:]...))
		}, events: []string{"req 1 GET http x / cl=-1 end"}, out: []string{"HEADERS 1 :status=200 end"}, code: noConnErr},
		{name: "CONTINUATION interleaved", in: func(p *peer) []byte {
			b := p.block(get...)
			return cat(frame(FrameHeaders, FlagEndStream, 1, b[:2]...), frame(FramePing, 0, 0, make([]byte, 8)...))
		}, out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "CONTINUATION of another stream", in: func(p *peer) []byte {
			b := p.block(get...)
			return cat(frame(FrameHeaders, FlagEndStream, 1, b[:2]...), frame(FrameContinuation, FlagEndHeaders, 3, b[2:]...))
		}, out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "CONTINUATION alone", in: func(p *peer) []byte { return frame(FrameContinuation, FlagEndHeaders, 1, 0x82) },
			out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "HEADERS depending on itself", in: func(p *peer) []byte {
			b := p.block(hold...)
			return cat(frame(FrameHeaders, FlagPriority, 1, cat([]byte{0, 0, 0, 1, 16}, b[:3])...), frame(FrameContinuation, FlagEndHeaders, 1, b[3:]...),
				p.headers(3, true, get...))
		}, events: []string{"req 3 GET http x / cl=-1 end"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR", "HEADERS 3 :status=200 end"}, code: noConnErr},
		{name: "even stream", in: func(p *peer) []byte { return p.headers(2, true, get...) },
			out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "lower stream id", in: func(p *peer) []byte { return cat(p.headers(5, true, get...), p.headers(3, true, get...)) },
			events: []string{"req 5 GET http x / cl=-1 end"}, out: []string{"HEADERS 5 :status=200 end", "GOAWAY 5 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "DATA on idle stream", in: func(p *peer) []byte { return frame(FrameData, 0, 1, 'x') },
			out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "RST_STREAM on idle stream", in: func(p *peer) []byte { return frame(FrameRSTStream, 0, 1, u32(8)...) },
			out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "WINDOW_UPDATE on idle stream", in: func(p *peer) []byte { return frame(FrameWindowUpdate, 0, 1, u32(1)...) },
			out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "PRIORITY on idle stream ignored", in: func(p *peer) []byte { return frame(FramePriority, 0, 9, 0, 0, 0, 1, 16) }, code: noConnErr},
		{name: "PUSH_PROMISE from a client", in: func(p *peer) []byte { return frame(FramePushPromise, FlagEndHeaders, 1, cat(u32(2), []byte{0x82})...) },
			out: []string{"GOAWAY 0 PROTOCOL_ERROR"}, code: ProtocolError},
		{name: "unknown frame type ignored", in: func(p *peer) []byte { return frame(0x42, 0xff, 1, 1, 2, 3) }, code: noConnErr},
		{name: "DATA after END_STREAM", in: func(p *peer) []byte { return cat(p.headers(1, true, hold...), frame(FrameData, 0, 1, 'x')) },
			events: []string{"req 1 GET http x /hold cl=-1 end", "reset 1 STREAM_CLOSED"}, out: []string{"RST_STREAM 1 STREAM_CLOSED"}, code: noConnErr},
		{name: "HEADERS after END_STREAM", in: func(p *peer) []byte { return cat(p.headers(1, true, hold...), p.headers(1, true, "a", "b")) },
			events: []string{"req 1 GET http x /hold cl=-1 end", "reset 1 STREAM_CLOSED"}, out: []string{"RST_STREAM 1 STREAM_CLOSED"}, code: noConnErr},
		{name: "HEADERS on a closed stream", in: func(p *peer) []byte { return cat(p.headers(1, true, get...), p.headers(1, true, "a", "b")) },
			events: []string{"req 1 GET http x / cl=-1 end"}, out: []string{"HEADERS 1 :status=200 end", "GOAWAY 1 STREAM_CLOSED"}, code: StreamClosed},
		{name: "HEADERS after the peer's RST_STREAM", in: func(p *peer) []byte {
			return cat(p.headers(1, false, hold...), frame(FrameRSTStream, 0, 1, u32(uint32(Cancel))...), p.headers(1, true, "a", "b"))
		}, events: []string{"req 1 GET http x /hold cl=-1", "reset 1 CANCEL"}, out: []string{"GOAWAY 1 STREAM_CLOSED"}, code: StreamClosed},
		{name: "DATA on a closed stream", cfg: nil, in: func(p *peer) []byte {
			return cat(p.headers(1, true, get...), p.headers(3, true, get...), frame(FrameData, 0, 1, 'x'))
		}, events: []string{"req 1 GET http x / cl=-1 end", "req 3 GET http x / cl=-1 end"},
			out: []string{"HEADERS 1 :status=200 end", "HEADERS 3 :status=200 end", "RST_STREAM 1 STREAM_CLOSED"}, code: noConnErr},
		{name: "trailers without END_STREAM", in: func(p *peer) []byte { return cat(p.headers(1, false, get...), p.headers(1, false, "a", "b")) },
			events: []string{"req 1 GET http x / cl=-1", "reset 1 PROTOCOL_ERROR"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "pseudo-header in trailers", in: func(p *peer) []byte { return cat(p.headers(1, false, get...), p.headers(1, true, ":path", "/")) },
			events: []string{"req 1 GET http x / cl=-1", "reset 1 PROTOCOL_ERROR"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "content-length above DATA", in: func(p *peer) []byte {
			return cat(p.headers(1, false, kvs(get, "content-length", "3")...), frame(FrameData, FlagEndStream, 1, 'x'))
		}, events: []string{"req 1 GET http x / cl=3 content-length=3", "reset 1 PROTOCOL_ERROR"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "content-length below DATA", in: func(p *peer) []byte {
			return cat(p.headers(1, false, kvs(get, "content-length", "1")...), frame(FrameData, 0, 1, 'x', 'y'))
		}, events: []string{"req 1 GET http x / cl=1 content-length=1", "reset 1 PROTOCOL_ERROR"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "content-length above DATA, trailers end", in: func(p *peer) []byte {
			return cat(p.headers(1, false, kvs(get, "content-length", "3")...), frame(FrameData, 0, 1, 'x'), p.headers(1, true, "a", "b"))
		}, events: []string{"req 1 GET http x / cl=3 content-length=3", `data 1 "x"`, "reset 1 PROTOCOL_ERROR"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "content-length with END_STREAM on HEADERS", in: func(p *peer) []byte { return p.headers(1, true, kvs(get, "content-length", "1")...) },
			out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "peer RST_STREAM", in: func(p *peer) []byte {
			return cat(p.headers(1, false, get...), frame(FrameRSTStream, 0, 1, u32(uint32(Cancel))...))
		},
			events: []string{"req 1 GET http x / cl=-1", "reset 1 CANCEL"}, code: noConnErr},
		{name: "frames after our RST ignored", in: func(p *peer) []byte {
			return cat(p.headers(1, false, get...), p.headers(1, false, "a", "b"), frame(FrameData, 0, 1, 'x'),
				p.headers(1, true, "c", "d"), frame(FrameWindowUpdate, 0, 1, u32(1)...), frame(FrameRSTStream, 0, 1, u32(8)...))
		}, events: []string{"req 1 GET http x / cl=-1", "reset 1 PROTOCOL_ERROR"}, out: []string{"RST_STREAM 1 PROTOCOL_ERROR"}, code: noConnErr},
		{name: "over MAX_CONCURRENT_STREAMS", cfg: &Config{MaxConcurrentStreams: 1}, in: func(p *peer) []byte {
			return cat(p.headers(1, false, get...), p.headers(3, true, get...), p.headers(5, true, "a", "b"))
		}, events: []string{"req 1 GET http x / cl=-1"}, out: []string{"RST_STREAM 3 REFUSED_STREAM", "RST_STREAM 5 REFUSED_STREAM"}, code: noConnErr},
		{name: "header list too large: 431", cfg: &Config{MaxHeaderListSize: 100}, in: func(p *peer) []byte {
			return p.headers(1, false, kvs(get, "a", strings.Repeat("b", 100))...)
		}, out: []string{"HEADERS 1 :status=431 end", "RST_STREAM 1 NO_ERROR"}, code: noConnErr},
		{name: "HPACK garbage", in: func(p *peer) []byte {
			return frame(FrameHeaders, FlagEndHeaders, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		},
			out: []string{"GOAWAY 1 COMPRESSION_ERROR"}, code: CompressionError},
		{name: "window update overflow on a stream", in: func(p *peer) []byte {
			return cat(p.headers(1, false, get...), frame(FrameWindowUpdate, 0, 1, u32(MaxWindow)...))
		}, events: []string{"req 1 GET http x / cl=-1", "reset 1 FLOW_CONTROL_ERROR"}, out: []string{"RST_STREAM 1 FLOW_CONTROL_ERROR"}, code: noConnErr},
		{name: "window update overflow on the connection", in: func(p *peer) []byte { return frame(FrameWindowUpdate, 0, 0, u32(MaxWindow)...) },
			out: []string{"GOAWAY 0 FLOW_CONTROL_ERROR"}, code: FlowControlError},
		{name: "INITIAL_WINDOW_SIZE puts a window over 2^31-1", in: func(p *peer) []byte {
			return cat(p.headers(1, false, get...), frame(FrameWindowUpdate, 0, 1, u32(MaxWindow-initialWindow)...),
				frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, initialWindow+1)...))
		}, events: []string{"req 1 GET http x / cl=-1", "reset 1 FLOW_CONTROL_ERROR"}, out: []string{"GOAWAY 1 FLOW_CONTROL_ERROR"}, code: FlowControlError},
		{name: "PING answered", in: func(p *peer) []byte { return frame(FramePing, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8) },
			out: []string{"PING ack=true 0102030405060708"}, code: noConnErr},
		{name: "PING ack not answered", in: func(p *peer) []byte { return frame(FramePing, FlagAck, 0, 1, 2, 3, 4, 5, 6, 7, 8) }, code: noConnErr},
		{name: "peer GOAWAY", in: func(p *peer) []byte {
			return cat(p.headers(1, false, get...), frame(FrameGoAway, 0, 0, cat(u32(0), u32(0), []byte("bye"))...))
		}, events: []string{"req 1 GET http x / cl=-1", `goaway NO_ERROR "bye"`}, code: noConnErr},
		{name: "frame over our max frame size", in: func(p *peer) []byte { return frame(FrameData, 0, 1, make([]byte, 16385)...) },
			out: []string{"GOAWAY 0 FRAME_SIZE_ERROR"}, code: FrameSizeError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{onRequest: respond}
			s, p := open(t, h, tc.cfg)
			code := feed(t, s, tc.in(p))
			if code != tc.code {
				t.Errorf("connection error %v, want %v", code, tc.code)
			}
			if got := outFrames(t, s, p.dec); !equal(got, tc.out) {
				t.Errorf("out\n%q\nwant\n%q", got, tc.out)
			}
			if !equal(h.events, tc.events) {
				t.Errorf("events\n%q\nwant\n%q", h.events, tc.events)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestServerMalformed: each rule of RFC 9113 8.2 and 8.3.1 a request header
// section must keep, one row each: a stream error PROTOCOL_ERROR, the
// connection left open.
func TestServerMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
	}{
		{"uppercase name", kvs(get, "X-A", "b")},
		{"name with a space", kvs(get, "x a", "b")},
		{"empty name", kvs(get, "", "b")},
		{"value with LF", kvs(get, "x", "a\nb")},
		{"value with NUL", kvs(get, "x", "a\x00b")},
		{"value with leading space", kvs(get, "x", " b")},
		{"value with trailing tab", kvs(get, "x", "b\t")},
		{"connection", kvs(get, "connection", "close")},
		{"keep-alive", kvs(get, "keep-alive", "5")},
		{"proxy-connection", kvs(get, "proxy-connection", "x")},
		{"transfer-encoding", kvs(get, "transfer-encoding", "chunked")},
		{"upgrade", kvs(get, "upgrade", "h2c")},
		{"te gzip", kvs(get, "te", "gzip")},
		{"pseudo after regular", []string{":method", "GET", ":scheme", "http", "a", "b", ":path", "/"}},
		{"duplicate :path", kvs(get, ":path", "/")},
		{"duplicate :method", []string{":method", "GET", ":method", "GET", ":scheme", "http", ":path", "/"}},
		{"unknown pseudo", kvs(get, ":foo", "x")},
		{":status in a request", kvs(get, ":status", "200")},
		{":protocol", kvs(get, ":protocol", "websocket")},
		{"no :method", []string{":scheme", "http", ":path", "/"}},
		{"no :scheme", []string{":method", "GET", ":path", "/"}},
		{"no :path", []string{":method", "GET", ":scheme", "http"}},
		{"empty :path", []string{":method", "GET", ":scheme", "http", ":path", ""}},
		{":path not absolute", []string{":method", "GET", ":scheme", "http", ":path", "a"}},
		{":path * for GET", []string{":method", "GET", ":scheme", "http", ":path", "*"}},
		{"CONNECT with :path", []string{":method", "CONNECT", ":authority", "x:443", ":path", "/"}},
		{"CONNECT with :scheme", []string{":method", "CONNECT", ":authority", "x:443", ":scheme", "https"}},
		{"CONNECT without :authority", []string{":method", "CONNECT"}},
		{"host differs from :authority", kvs(get, "host", "y")},
		{":authority with userinfo", []string{":method", "GET", ":scheme", "http", ":authority", "u@x", ":path", "/"}},
		{"two hosts", []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "x", "host", "x"}},
		{"content-length not a number", kvs(get, "content-length", "1a")},
		{"content-length differing", kvs(get, "content-length", "1", "content-length", "2")},
		// What a request line could not carry (TestServerMalformedPseudo).
		{"method with a space", []string{":method", "GET /x", ":scheme", "http", ":path", "/"}},
		{"method with a slash", []string{":method", "G/ET", ":scheme", "http", ":path", "/"}},
		{"empty method", []string{":method", "", ":scheme", "http", ":path", "/"}},
		{"path with a space", []string{":method", "GET", ":scheme", "http", ":path", "/a HTTP/1.1"}},
		{"path with a tab", []string{":method", "GET", ":scheme", "http", ":path", "/a\tb"}},
		{"path with a CTL", []string{":method", "GET", ":scheme", "http", ":path", "/a\x01"}},
		{"path with DEL", []string{":method", "GET", ":scheme", "http", ":path", "/a\x7f"}},
		{"scheme with a space", []string{":method", "GET", ":scheme", "ht tp", ":path", "/"}},
		{"empty scheme", []string{":method", "GET", ":scheme", "", ":path", "/"}},
		{"scheme starting with a digit", []string{":method", "GET", ":scheme", "1http", ":path", "/"}},
		{"authority with a space", []string{":method", "GET", ":scheme", "http", ":authority", "a b", ":path", "/"}},
		{"authority with a slash", []string{":method", "GET", ":scheme", "http", ":authority", "a/b", ":path", "/"}},
		{"authority with a CTL", []string{":method", "GET", ":scheme", "http", ":authority", "a\x01", ":path", "/"}},
		{"host with a space, no :authority", []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "a b"}},
		{"CONNECT authority with a space", []string{":method", "CONNECT", ":authority", "a b:443"}},
		// RFC 9113 8.5: CONNECT's :authority is host:port, as a CONNECT
		// request line's authority-form (RFC 9112 3.2.3).
		{"CONNECT authority without a port", []string{":method", "CONNECT", ":authority", "x"}},
		{"CONNECT authority with an empty port", []string{":method", "CONNECT", ":authority", "x:"}},
		{"CONNECT authority without a host", []string{":method", "CONNECT", ":authority", ":443"}},
		{"CONNECT authority port not digits", []string{":method", "CONNECT", ":authority", "x:https"}},
		{"CONNECT IPv6 authority without a port", []string{":method", "CONNECT", ":authority", "[::1]"}},
		{"CONNECT authority with a path", []string{":method", "CONNECT", ":authority", "x:443/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			s, p := open(t, h, nil)
			if code := feed(t, s, cat(p.headers(1, true, tc.kv...), p.headers(3, true, get...))); code != noConnErr {
				t.Fatalf("connection error %v", code)
			}
			want := []string{"RST_STREAM 1 PROTOCOL_ERROR"}
			if got := outFrames(t, s, p.dec); !equal(got, want) {
				t.Errorf("out %q, want %q", got, want)
			}
			// The table stays in step: the next request decodes.
			if len(h.events) != 1 || h.events[0] != "req 3 GET http x / cl=-1 end" {
				t.Errorf("events %q", h.events)
			}
		})
	}
	for _, tc := range []struct {
		name string
		kv   []string
		want string
	}{
		{"CONNECT", []string{":method", "CONNECT", ":authority", "x:443"}, "req 1 CONNECT  x:443  cl=-1 end"},
		{"CONNECT IPv6", []string{":method", "CONNECT", ":authority", "[::1]:8443"}, "req 1 CONNECT  [::1]:8443  cl=-1 end"},
		{"OPTIONS *", []string{":method", "OPTIONS", ":scheme", "http", ":path", "*"}, "req 1 OPTIONS http  * cl=-1 end"},
		{"te trailers", kvs(get, "te", "trailers"), "req 1 GET http x / cl=-1 te=trailers end"},
		{"host equal to :authority", kvs(get, "host", "X"), "req 1 GET http x / cl=-1 host=X end"},
		{"no :authority", []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "x"}, "req 1 GET http  / cl=-1 host=x end"},
		{"same content-length twice", kvs(get, "content-length", "0", "content-length", "0"), "req 1 GET http x / cl=0 content-length=0 content-length=0 end"},
	} {
		t.Run("valid "+tc.name, func(t *testing.T) {
			h := &recorder{}
			s, p := open(t, h, nil)
			if code := feed(t, s, p.headers(1, true, tc.kv...)); code != noConnErr {
				t.Fatalf("connection error %v", code)
			}
			if len(h.events) != 1 || h.events[0] != tc.want {
				t.Errorf("events %q, want %q", h.events, tc.want)
			}
		})
	}
}

// TestServerSendFlowControl: WriteData stops at the send windows, splits at
// the peer's MAX_FRAME_SIZE, and OnWritable comes when a WINDOW_UPDATE or
// an INITIAL_WINDOW_SIZE increase opens the window; a decrease makes a
// stream's window negative (RFC 9113 6.9.2).
func TestServerSendFlowControl(t *testing.T) {
	body := make([]byte, 100000)
	var left []byte
	h := &recorder{}
	h.onRequest = func(s *Server, id uint32, r *Request, end bool) {
		if err := s.WriteHeaders(id, 200, nil, false); err != nil {
			t.Fatal(err)
		}
		n, err := s.WriteData(id, body, true)
		if err != nil || n != initialWindow {
			t.Fatalf("WriteData n %d err %v", n, err)
		}
		left = body[n:]
	}
	h.onWrite = func(s *Server, id uint32) {
		n, err := s.WriteData(id, left, true)
		if err != nil {
			t.Fatal(err)
		}
		left = left[n:]
	}
	s, p := open(t, h, nil)
	feed(t, s, cat(frame(FrameSettings, 0, 0, setting(SettingMaxFrameSize, 20000)...), p.headers(1, true, get...)))
	want := []string{"SETTINGS ack", "HEADERS 1 :status=200", "DATA 1 20000", "DATA 1 20000", "DATA 1 20000", "DATA 1 5535"}
	if got := outFrames(t, s, p.dec); !equal(got, want) {
		t.Fatalf("out %q, want %q", got, want)
	}
	// The stream's window opens, not the connection's: nothing.
	feed(t, s, frame(FrameWindowUpdate, 0, 1, u32(50000)...))
	if got := outFrames(t, s, p.dec); len(got) != 0 || len(h.events) != 1 {
		t.Fatalf("out %q events %q", got, h.events)
	}
	// The connection's opens by 10000: 10000 more.
	feed(t, s, frame(FrameWindowUpdate, 0, 0, u32(10000)...))
	if got := outFrames(t, s, p.dec); !equal(got, []string{"DATA 1 10000"}) {
		t.Fatalf("out %q", got)
	}
	// INITIAL_WINDOW_SIZE drops from 65535 to 0: the stream's window goes
	// from 40000 to -25535; the connection's opens, and nothing is sent.
	feed(t, s, cat(frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 0)...), frame(FrameWindowUpdate, 0, 0, u32(1<<20)...)))
	if got := outFrames(t, s, p.dec); !equal(got, []string{"SETTINGS ack"}) {
		t.Fatalf("out %q", got)
	}
	// Up to 50000: the stream's window is 24465, the rest of the body.
	feed(t, s, frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 50000)...))
	if got := outFrames(t, s, p.dec); !equal(got, []string{"SETTINGS ack", "DATA 1 20000", "DATA 1 4465 end"}) {
		t.Fatalf("out %q", got)
	}
	if len(left) != 0 {
		t.Fatalf("%d left", len(left))
	}
	if !equal(h.events, []string{"req 1 GET http x / cl=-1 end", "writable 1", "writable 1"}) {
		t.Fatalf("events %q", h.events)
	}
	if s.live() != 0 {
		t.Fatalf("%d streams left", s.live())
	}
}

// TestServerReceiveFlowControl: Consumed returns data to the windows (half
// a window at a time), data the handler keeps holds the window shut, and a
// stream reset with data held gives it back to the connection.
func TestServerReceiveFlowControl(t *testing.T) {
	h := &recorder{noConsume: true}
	s, p := open(t, h, &Config{InitialWindowSize: 65535, ConnWindowSize: 100000})
	chunk := make([]byte, 16384)
	in := p.headers(1, false, get...)
	for range 4 {
		in = cat(in, frame(FrameData, 0, 1, chunk...))
	}
	feed(t, s, in) // 65536 > 65535: the last frame overflows the stream window
	want := []string{"RST_STREAM 1 FLOW_CONTROL_ERROR", "WINDOW_UPDATE 0 65536"}
	if got := outFrames(t, s, p.dec); !equal(got, want) {
		t.Fatalf("out %q, want %q", got, want)
	}

	h = &recorder{noConsume: true}
	s, p = open(t, h, &Config{InitialWindowSize: 65535, ConnWindowSize: 65535})
	feed(t, s, cat(p.headers(1, false, get...), frame(FrameData, 0, 1, chunk...), frame(FrameData, 0, 1, chunk...)))
	if got := outFrames(t, s, p.dec); len(got) != 0 {
		t.Fatalf("out %q before Consumed", got)
	}
	s.Consumed(1, 16384)
	s.Consumed(1, 16384)
	if got := outFrames(t, s, p.dec); !equal(got, []string{"WINDOW_UPDATE 0 32768", "WINDOW_UPDATE 1 32768"}) {
		t.Fatalf("out %q", got)
	}
	// The connection's window: 65535 - 32768 + 32768; another stream's
	// DATA beyond it is a connection error.
	feed(t, s, cat(frame(FrameData, 0, 1, chunk...), frame(FrameData, 0, 1, chunk...)))
	feed(t, s, frame(FrameRSTStream, 0, 1, u32(uint32(Cancel))...)) // held 32768 returns
	if got := outFrames(t, s, p.dec); !equal(got, []string{"WINDOW_UPDATE 0 32768"}) {
		t.Fatalf("out %q", got)
	}
	s.Consumed(1, 100) // gone: ignored
	in = p.headers(3, false, get...)
	for range 4 {
		in = cat(in, frame(FrameData, 0, 3, chunk...))
	}
	if code := feed(t, s, in); code != FlowControlError {
		t.Fatalf("code %v", code)
	}
}

// TestServerShutdownNow: a shutdown in one phase: its GOAWAY names the
// last stream; a later stream is ignored; Done once the open one ends.
func TestServerShutdownNow(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, nil)
	feed(t, s, p.headers(1, false, get...))
	s.ShutdownNow()
	feed(t, s, p.headers(3, true, get...))
	if s.Done() {
		t.Fatal("done with stream 1 open")
	}
	if got := outFrames(t, s, p.dec); !equal(got, []string{"GOAWAY 1 NO_ERROR"}) {
		t.Fatalf("out %q", got)
	}
	feed(t, s, frame(FrameData, FlagEndStream, 1))
	if err := s.WriteHeaders(1, 204, nil, true); err != nil {
		t.Fatal(err)
	}
	if !s.Done() {
		t.Fatal("not done")
	}
	if !equal(h.events, []string{"req 1 GET http x / cl=-1", `data 1 "" end`}) {
		t.Fatalf("events %q", h.events)
	}
}

// TestServerResponses: trailers, interim responses, our RST_STREAM and the
// Write methods' errors.
func TestServerResponses(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, nil)
	feed(t, s, cat(p.headers(1, true, get...), p.headers(3, true, get...), p.headers(5, false, get...)))
	if _, err := s.WriteData(1, nil, true); err != ErrNoHeaders {
		t.Fatalf("DATA before HEADERS: %v", err)
	}
	if err := s.WriteHeaders(1, 100, nil, true); err != errInterimEnd {
		t.Fatal(err)
	}
	if err := s.WriteHeaders(1, 101, nil, false); err != errStatus {
		t.Fatal(err)
	}
	s.WriteHeaders(1, 103, []hpack.Field{{Name: []byte("link"), Value: []byte("</a>")}}, false)
	s.WriteHeaders(1, 200, nil, false)
	if err := s.WriteHeaders(1, 200, nil, false); err != ErrHeadersSent {
		t.Fatal(err)
	}
	s.WriteData(1, []byte("abc"), false)
	s.WriteTrailers(1, []hpack.Field{{Name: []byte("x-t"), Value: []byte("1")}})
	if _, err := s.WriteData(1, []byte("x"), false); err != ErrStreamGone {
		t.Fatal(err)
	}
	s.Reset(3, InternalError)
	s.Reset(5, Cancel)
	feed(t, s, frame(FrameData, 0, 5, 'x')) // crossed our RST: ignored
	want := []string{"HEADERS 1 :status=103 link=</a>", "HEADERS 1 :status=200", "DATA 1 3", "HEADERS 1 x-t=1 end",
		"RST_STREAM 3 INTERNAL_ERROR", "RST_STREAM 5 CANCEL"}
	if got := outFrames(t, s, p.dec); !equal(got, want) {
		t.Fatalf("out %q, want %q", got, want)
	}
	if s.live() != 0 {
		t.Fatalf("%d streams", s.live())
	}
	// A large response header is split into CONTINUATIONs at the peer's
	// MAX_FRAME_SIZE.
	feed(t, s, p.headers(7, true, get...))
	s.WriteHeaders(7, 200, []hpack.Field{{Name: []byte("x-big"), Value: bytes.Repeat([]byte("v"), 40000)}}, true)
	if got := outFrames(t, s, p.dec); len(got) != 1 || !strings.HasPrefix(got[0], "HEADERS 7 :status=200 x-big=vvv") {
		t.Fatalf("out %.80q", got)
	}
}

// TestServerAbuse: each abuse bound ends the connection with GOAWAY
// ENHANCE_YOUR_CALM at its limit, not before.
func TestServerAbuse(t *testing.T) {
	ping := frame(FramePing, 0, 0, make([]byte, 8)...)
	for _, tc := range []struct {
		name  string
		cfg   *Config
		in    func(p *peer, i int) []byte // the i'th repetition
		limit int                         // repetitions allowed
	}{
		{"rapid reset", &Config{MaxEarlyResets: 50}, func(p *peer, i int) []byte {
			id := uint32(2*i + 3)
			return cat(p.headers(id, false, hold...), frame(FrameRSTStream, 0, id, u32(uint32(Cancel))...))
		}, 50},
		{"rapid reset between 431s", &Config{MaxEarlyResets: 50, MaxHeaderListSize: 4000}, func(p *peer, i int) []byte {
			// A request past MaxHeaderListSize is answered 431 by the Server
			// itself, no handler involved: it gives no reset back.
			big := strings.Repeat("a", 3000)
			id := uint32(4*i + 3)
			return cat(p.headers(id, true, kvs(get, "x-bomb", big, "x-bomb", big)...),
				p.headers(id+2, false, hold...), frame(FrameRSTStream, 0, id+2, u32(uint32(Cancel))...))
		}, 50},
		{"refused streams", &Config{MaxEarlyResets: 50, MaxConcurrentStreams: 1}, func(p *peer, i int) []byte {
			return p.headers(uint32(2*i+3), false, hold...) // stream 1 (below) stays open
		}, 50},
		{"malformed requests", &Config{MaxEarlyResets: 50}, func(p *peer, i int) []byte {
			return p.headers(uint32(2*i+3), true, kvs(get, "connection", "close")...)
		}, 50},
		{"PING flood", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return ping }, 100},
		{"SETTINGS flood", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return frame(FrameSettings, 0, 0) }, 100},
		{"PRIORITY flood", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return frame(FramePriority, 0, 3, 0, 0, 0, 1, 16) }, 100},
		{"WINDOW_UPDATE flood", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return frame(FrameWindowUpdate, 0, 0, u32(1)...) }, 100},
		// Credit for nothing sent, large or on a stream, is charged.
		{"WINDOW_UPDATE flood, 64 KiB increments", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return frame(FrameWindowUpdate, 0, 0, u32(64<<10)...) }, 100},
		{"stream WINDOW_UPDATE flood", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return frame(FrameWindowUpdate, 0, 1, u32(1)...) }, 100},
		{"empty DATA flood", &Config{MaxControlFrames: 100}, func(p *peer, i int) []byte { return frame(FrameData, 0, 1) }, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, p := open(t, &recorder{}, tc.cfg)
			feed(t, s, p.headers(1, false, hold...))
			for i := range tc.limit {
				if code := feed(t, s, tc.in(p, i)); code != noConnErr {
					t.Fatalf("repetition %d: %v", i, code)
				}
			}
			if code := feed(t, s, tc.in(p, tc.limit)); code != EnhanceYourCalm {
				t.Fatalf("past the limit: %v", code)
			}
			out := outFrames(t, s, p.dec)
			if !strings.HasSuffix(out[len(out)-1], "ENHANCE_YOUR_CALM") {
				t.Fatalf("last frame %q", out[len(out)-1])
			}
		})
	}
	t.Run("resets of answered streams", func(t *testing.T) {
		// A stream reset after its response ended is not early: no limit.
		s, p := open(t, &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
			s.WriteHeaders(id, 200, nil, true)
		}}, &Config{MaxEarlyResets: 5})
		for i := range 100 {
			id := uint32(2*i + 1)
			if code := feed(t, s, cat(p.headers(id, false, get...), frame(FrameRSTStream, 0, id, u32(uint32(Cancel))...))); code != noConnErr {
				t.Fatalf("stream %d: %v", id, code)
			}
		}
	})
	t.Run("requests refill the control budget", func(t *testing.T) {
		s, p := open(t, &recorder{}, &Config{MaxControlFrames: 10})
		for i := range 100 {
			if code := feed(t, s, cat(ping, p.headers(uint32(2*i+1), true, get...))); code != noConnErr {
				t.Fatalf("repetition %d: %v", i, code)
			}
			outFrames(t, s, p.dec)
		}
	})
}

// TestServerWindowUpdateBudget: WINDOW_UPDATEs that return window our
// DATA used (at least minCredit of it, or all that is owed) cost nothing
// from the control-frame budget, however many it takes; those that credit
// tiny amounts, or more than our DATA used, are charged, data flowing or
// not.
func TestServerWindowUpdateBudget(t *testing.T) {
	const budget = 10
	body := pattern(4 << 20)
	// serve opens a Server with budget whose handler answers stream 1 with
	// body, as the windows allow, and returns it with what it sent.
	serve := func(t *testing.T) (*Server, *peer, func() (data int, end bool)) {
		var left []byte
		h := &recorder{}
		h.onWrite = func(s *Server, id uint32) {
			n, err := s.WriteData(id, left, true)
			if err != nil {
				t.Fatal(err)
			}
			left = left[n:]
		}
		h.onRequest = func(s *Server, id uint32, r *Request, end bool) {
			s.WriteHeaders(id, 200, nil, false)
			left = body
			h.onWrite(s, id)
		}
		s, p := open(t, h, &Config{MaxControlFrames: budget})
		sent := func() (data int, end bool) {
			for _, f := range outFrames(t, s, p.dec) {
				var id, n int
				if _, err := fmt.Sscanf(f, "DATA %d %d", &id, &n); err == nil {
					data += n
					end = end || strings.HasSuffix(f, " end")
				}
			}
			return data, end
		}
		feed(t, s, p.headers(1, true, get...))
		return s, p, sent
	}
	credit := func(id uint32, n uint32) []byte { return frame(FrameWindowUpdate, 0, id, u32(n)...) }
	// charged checks that in is charged: budget of them pass, the next
	// ends the connection.
	charged := func(t *testing.T, s *Server, in []byte) {
		for i := range budget + 1 {
			code := feed(t, s, in)
			if i < budget && code != noConnErr || i == budget && code != EnhanceYourCalm {
				t.Fatalf("WINDOW_UPDATE %d: %v", i, code)
			}
		}
	}

	t.Run("credit for our DATA", func(t *testing.T) {
		// Each read credited 4 KiB at a time on the stream and the
		// connection (Go's least), the rest whole: 2048 WINDOW_UPDATEs.
		s, _, sent := serve(t)
		total := 0
		for {
			n, end := sent()
			if total += n; end {
				break
			}
			if n == 0 {
				t.Fatalf("stuck at %d", total)
			}
			for ; n > 0; n -= 4096 {
				k := uint32(min(n, 4096))
				if code := feed(t, s, cat(credit(0, k), credit(1, k))); code != noConnErr {
					t.Fatalf("at %d: %v", total, code)
				}
			}
		}
		if total != len(body) {
			t.Fatalf("sent %d of %d", total, len(body))
		}
	})
	t.Run("beyond our DATA", func(t *testing.T) {
		// All of the first window returned at once, then more, which is
		// charged: the budget lasts budget WINDOW_UPDATEs.
		s, _, sent := serve(t)
		n, _ := sent()
		if code := feed(t, s, credit(0, uint32(n))); code != noConnErr {
			t.Fatal(code)
		}
		charged(t, s, credit(0, 4096))
	})
	t.Run("1-byte credits", func(t *testing.T) {
		// Our window's worth of DATA in flight: 1-byte credits of the
		// stream (the connection's window stays shut, nothing is sent) are
		// charged.
		s, _, sent := serve(t)
		sent()
		charged(t, s, credit(1, 1))
	})
	t.Run("1-byte credits both ways", func(t *testing.T) {
		// 1 byte for the stream and the connection at a time: a DATA frame
		// of 1 byte each, which gives one back, for two charged.
		s, _, sent := serve(t)
		sent()
		for i := 0; ; i++ {
			code := feed(t, s, cat(credit(0, 1), credit(1, 1)))
			if code == EnhanceYourCalm {
				break
			}
			if n, _ := sent(); code != noConnErr || n != 1 || i > 2*budget {
				t.Fatalf("round %d: %v, sent %d", i, code, n)
			}
		}
	})
}

// TestServerContinuationFlood (CVE-2024-27316): a header block is bounded
// by its encoded size (MaxHeaderListSize + MaxFrameSize) and its number of
// CONTINUATION frames before anything is decoded.
func TestServerContinuationFlood(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		s, _ := open(t, &recorder{}, &Config{MaxHeaderListSize: 1000})
		limit := 1000 + MinMaxFrameSize
		in := frame(FrameHeaders, 0, 1, make([]byte, MinMaxFrameSize)...)
		in = cat(in, frame(FrameContinuation, 0, 1, make([]byte, limit-MinMaxFrameSize)...))
		if code := feed(t, s, in); code != noConnErr {
			t.Fatalf("at the limit: %v", code)
		}
		if code := feed(t, s, frame(FrameContinuation, 0, 1, 0)); code != EnhanceYourCalm {
			t.Fatalf("past the limit: %v", code)
		}
	})
	t.Run("count", func(t *testing.T) {
		s, _ := open(t, &recorder{}, &Config{MaxHeaderListSize: 1000})
		limit := (1000+MinMaxFrameSize)/1024 + 16
		if code := feed(t, s, frame(FrameHeaders, 0, 1, 0)); code != noConnErr {
			t.Fatal(code)
		}
		for i := range limit {
			if code := feed(t, s, frame(FrameContinuation, 0, 1, 0)); code != noConnErr {
				t.Fatalf("CONTINUATION %d: %v", i, code)
			}
		}
		if code := feed(t, s, frame(FrameContinuation, 0, 1, 0)); code != EnhanceYourCalm {
			t.Fatalf("past the limit: %v", code)
		}
	})
	t.Run("HPACK bomb", func(t *testing.T) {
		// One field indexed into the dynamic table, then referenced many
		// times: a few bytes decode to a list past MaxHeaderListSize, which
		// is answered 431, and the connection goes on.
		s, p := open(t, &recorder{}, &Config{MaxHeaderListSize: 4000})
		b := p.enc.StartBlock(nil)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}} {
			b = p.enc.AppendField(b, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
		}
		b = p.enc.AppendField(b, hpack.Field{Name: []byte("x-bomb"), Value: bytes.Repeat([]byte("a"), 3000)})
		for range 1000 {
			b = p.enc.AppendField(b, hpack.Field{Name: []byte("x-bomb"), Value: bytes.Repeat([]byte("a"), 3000)})
		}
		if len(b) > 8000 {
			t.Fatalf("block of %d bytes: not a bomb", len(b))
		}
		if code := feed(t, s, frame(FrameHeaders, FlagEndHeaders|FlagEndStream, 1, b...)); code != noConnErr {
			t.Fatal(code)
		}
		if got := outFrames(t, s, p.dec); !equal(got, []string{"HEADERS 1 :status=431 end"}) {
			t.Fatalf("out %q", got)
		}
	})
}

// TestServerOutputBound: a peer that does not read: PINGs go unanswered
// past MaxOutput, and a SETTINGS (which must be acknowledged) or a stream
// error ends the connection.
func TestServerOutputBound(t *testing.T) {
	big := make([]byte, 5000)
	h := &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
		s.WriteHeaders(id, 200, nil, false)
		s.WriteData(id, big, false)
	}}
	s, p := open(t, h, &Config{MaxOutput: 4096})
	feed(t, s, cat(p.headers(1, true, get...), frame(FramePing, 0, 0, make([]byte, 8)...)))
	n := len(s.Pending())
	if n < 5000 || bytes.Contains(s.Pending(), frame(FramePing, FlagAck, 0, make([]byte, 8)...)) {
		t.Fatalf("PING answered past MaxOutput (%d bytes pending)", n)
	}
	if code := feed(t, s, frame(FrameSettings, 0, 0)); code != EnhanceYourCalm {
		t.Fatalf("SETTINGS past MaxOutput: %v", code)
	}
	s, p = open(t, h, &Config{MaxOutput: 4096})
	feed(t, s, p.headers(1, true, get...))
	if code := feed(t, s, frame(FrameData, 0, 1, 'x')); code != EnhanceYourCalm {
		t.Fatalf("stream error past MaxOutput: %v", code)
	}
}

// TestServerHeaderTableSize: a HEADER_TABLE_SIZE below 4096 binds the
// peer's encoder only once our SETTINGS is acknowledged (RFC 9113 6.5.3):
// before, a 4096-byte table decodes; after, a block must start with a size
// update. NoHeaderTable advertises 0, which a zero HeaderTableSize (the
// default, 4096) cannot.
func TestServerHeaderTableSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		size uint32
	}{
		{"100", Config{HeaderTableSize: 100}, 100},
		{"none", Config{NoHeaderTable: true, HeaderTableSize: 1000}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := ParseFrame(NewServer(&recorder{}, &tc.cfg).Pending(), MinMaxFrameSize)
			if err != nil || f.Type != FrameSettings || f.Setting(0) != (Setting{SettingHeaderTableSize, tc.size}) {
				t.Fatalf("first frame %v %v, first setting %v", f.Type, err, f.Setting(0))
			}
			for _, update := range []bool{false, true} {
				h := &recorder{}
				s, p := open(t, h, &tc.cfg)
				long := strings.Repeat("v", 200)
				// A size update to 4096 (0x3f 0xe1 0x1f), then a field indexed.
				blk := cat([]byte{0x3f, 0xe1, 0x1f}, p.block(kvs(hold, "x-long", long)...))
				if code := feed(t, s, frame(FrameHeaders, FlagEndHeaders|FlagEndStream, 1, blk...)); code != noConnErr || len(h.events) != 1 {
					t.Fatalf("before the ack: %v %q", code, h.events)
				}
				if update {
					p.enc.SetMaxTableSize(tc.size)
				}
				code := feed(t, s, cat(frame(FrameSettings, FlagAck, 0), p.headers(3, true, hold...)))
				if update && (code != noConnErr || len(h.events) != 2) {
					t.Fatalf("after the ack, with a size update: %v %q", code, h.events)
				}
				if !update && code != CompressionError {
					t.Fatalf("after the ack, no size update: %v", code)
				}
			}
		})
	}
}

// collector is a transport's Writev that copies what it is given.
type collector struct {
	b     []byte
	limit int // a short write past it
	calls int
}

func (c *collector) Writev(vec [][]byte) (int, error) {
	c.calls++
	n := 0
	for _, p := range vec {
		if c.limit > 0 && len(c.b)+len(p) > c.limit {
			return n, errors.New("full")
		}
		c.b = append(c.b, p...)
		n += len(p)
	}
	return n, nil
}

// TestWriteDataTo: WriteDataTo hands the transport the bytes WriteData
// would have put in Pending, in order (what was pending first), in one
// call, copying nothing; a failed write fails the connection.
func TestWriteDataTo(t *testing.T) {
	body := pattern(100000)
	var outs [2][]byte
	for i, direct := range []bool{false, true} {
		var c collector
		h := &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
			s.WriteHeaders(id, 200, nil, false)
			var n int
			var err error
			if direct {
				n, err = s.WriteDataTo(id, body, true, c.Writev)
			} else {
				n, err = s.WriteData(id, body, true)
			}
			if n != initialWindow || err != nil {
				t.Fatalf("n %d err %v", n, err)
			}
			if direct && (len(s.Pending()) != 0 || c.calls != 1) {
				t.Fatalf("%d bytes left pending, %d writes (the HEADERS and every DATA frame in one)", len(s.Pending()), c.calls)
			}
			if direct {
				n, err = s.WriteDataTo(id, body[n:], true, c.Writev)
			} else {
				n, err = s.WriteData(id, body[n:], true)
			}
			if n != 0 || err != nil { // no window left: nothing
				t.Fatalf("n %d err %v", n, err)
			}
		}}
		s, p := open(t, h, nil)
		feed(t, s, p.headers(1, true, get...))
		outs[i] = append(c.b, s.Pending()...)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("WriteDataTo wrote %d bytes, WriteData %d, or other bytes", len(outs[1]), len(outs[0]))
	}

	c := collector{limit: 100}
	h := &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
		s.WriteHeaders(id, 200, nil, false)
		if _, err := s.WriteDataTo(id, body, true, c.Writev); err == nil {
			t.Fatal("write error not returned")
		}
		if s.Err() == nil {
			t.Fatal("connection goes on after a lost write")
		}
	}}
	s, p := open(t, h, nil)
	feed(t, s, p.headers(1, true, get...))

	var got int
	app := allocApp{body: body[:1000], got: &got}
	s = NewServer(app, nil)
	s.Feed(start())
	s.Written(len(s.Pending()))
	var cw collector
	w := cw.Writev
	id := uint32(1)
	blk := newPeer().block(hold...)
	var in []byte
	if n := testing.AllocsPerRun(100, func() {
		in = AppendFrameHeader(in[:0], FrameHeader{Length: uint32(len(blk)), Type: FrameHeaders, Flags: FlagEndHeaders, StreamID: id})
		in = append(in, blk...)
		in = AppendWindowUpdate(in, 0, 1000)
		s.Feed(in)
		s.WriteHeaders(id, 200, nil, false)
		if n, err := s.WriteDataTo(id, body[:1000], true, w); n != 1000 || err != nil {
			t.Fatalf("n %d err %v", n, err)
		}
		s.Reset(id, NoError)
		s.Written(len(s.Pending()))
		cw.b = cw.b[:0]
		id += 2
	}); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
