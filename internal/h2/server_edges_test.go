package h2

import (
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// TestServerShutdownRace: streams the client opened before it saw our
// final GOAWAY (above its last stream id) are ignored whole: their DATA returns
// to the connection window without a RST_STREAM or an early-reset charge,
// and their trailers end nothing, so a graceful shutdown does not turn
// into ENHANCE_YOUR_CALM or PROTOCOL_ERROR for a busy client.
func TestServerShutdownRace(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, &Config{MaxEarlyResets: 10})
	feed(t, s, p.headers(1, false, get...))
	s.ShutdownNow()
	in := p.headers(3, false, get...)
	for range 20 {
		in = cat(in, frame(FrameData, 0, 3, 'x'))
	}
	in = cat(in, p.headers(3, true, "x-sum", "1"))
	if code := feed(t, s, in); code != noConnErr {
		t.Fatalf("connection error %v", code)
	}
	for _, f := range outFrames(t, s, p.dec) {
		if f != "GOAWAY 1 NO_ERROR" {
			t.Fatalf("sent %q", f)
		}
	}
	if !equal(h.events, []string{"req 1 GET http x / cl=-1"}) {
		t.Fatalf("events %q", h.events)
	}
}

// TestServerMalformedPseudo: the pseudo-header values a request line or
// an HTTP/1.1 upstream could not carry as they are (RFC 9110 9.1: a method
// is a token; RFC 3986: a scheme's and an authority's characters; a :path
// has no whitespace or control characters, as nghttp2 checks) are rows of
// TestServerMalformed; what the checks must still let through is here.
func TestServerMalformedPseudo(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
	}{
		{"path with a query and UTF-8", []string{":method", "GET", ":scheme", "https", ":path", "/a/%20b?c=d&e=f;g/\xc3\xa9"}},
		{"authority IPv6 and port", []string{":method", "GET", ":scheme", "http", ":authority", "[::1]:8080", ":path", "/"}},
		{"scheme with + - .", []string{":method", "PURGE", ":scheme", "x+y-z.1", ":path", "/"}},
		{"method token", []string{":method", "M-SEARCH", ":scheme", "http", ":path", "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			s, p := open(t, h, nil)
			if code := feed(t, s, p.headers(1, true, tc.kv...)); code != noConnErr {
				t.Fatalf("connection error %v", code)
			}
			if got := outFrames(t, s, p.dec); len(got) != 0 || len(h.events) != 1 {
				t.Errorf("out %q events %q", got, h.events)
			}
		})
	}
}

// shortApp answers each request at once: 200 and an empty DATA with
// END_STREAM.
type shortApp struct{}

func (shortApp) OnRequest(s *Server, id uint32, r *Request, end bool) {
	s.WriteHeaders(id, 200, nil, false)
	s.WriteData(id, nil, true)
}
func (shortApp) OnData(s *Server, id uint32, p []byte, end bool) { s.Consumed(id, len(p)) }
func (shortApp) OnTrailers(*Server, uint32, []hpack.Field)       {}
func (shortApp) OnReset(*Server, uint32, ErrCode)                {}
func (shortApp) OnWritable(*Server, uint32)                      {}
func (shortApp) OnGoAway(*Server, ErrCode, []byte)               {}

// TestServerManyStreams: a connection that runs a million short streams
// (half ended by the client's END_STREAM, half by its RST_STREAM after the
// response) keeps no more than its concurrent streams' worth of state.
func TestServerManyStreams(t *testing.T) {
	s := NewServer(shortApp{}, nil)
	if _, err := s.Feed(start()); err != nil {
		t.Fatal(err)
	}
	s.Written(len(s.Pending()))
	// :method GET, :scheme http, :path / (static), :authority x (literal
	// without indexing): the same bytes each time.
	blk := []byte{0x82, 0x86, 0x84, 0x01, 0x01, 'x'}
	const streams, batch = 1000000, 100
	var in []byte
	id := uint32(1)
	for range streams / batch {
		in = in[:0]
		for range batch / 2 {
			in = AppendFrameHeader(in, FrameHeader{Length: uint32(len(blk)), Type: FrameHeaders, Flags: FlagEndHeaders | FlagEndStream, StreamID: id})
			in = append(in, blk...)
			in = AppendFrameHeader(in, FrameHeader{Length: uint32(len(blk)), Type: FrameHeaders, Flags: FlagEndHeaders, StreamID: id + 2})
			in = append(in, blk...)
			in = AppendRSTStream(in, id+2, Cancel)
			id += 4
		}
		if n, err := s.Feed(in); err != nil || n != len(in) {
			t.Fatalf("stream %d: n %d err %v", id, n, err)
		}
		s.Written(len(s.Pending()))
	}
	if s.live() != 0 || cap(s.streams) > batch || cap(s.out) > 64<<10 || cap(s.spans) > 64 || cap(s.req.Fields) > 64 {
		t.Fatalf("after %d streams: %d live, cap streams %d out %d spans %d fields %d",
			streams, s.live(), cap(s.streams), cap(s.out), cap(s.spans), cap(s.req.Fields))
	}
}

// BenchmarkServerDataManyStreams: DATA frames spread round-robin over 100
// open streams, the case where finding a frame's stream costs most.
func BenchmarkServerDataManyStreams(b *testing.B) {
	const n = 100
	s := withStreams(b, nil, n)
	var in []byte
	for i := range uint32(n) {
		in = AppendData(in, 2*i+1, []byte("x"), false)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Feed(in); err != nil {
			b.Fatal(err)
		}
		s.Written(len(s.Pending()))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/frame")
}

// BenchmarkServerWindowUpdateManyStreams: stream WINDOW_UPDATE frames
// spread round-robin over 1000 open streams, each of which looks up its
// stream to wake it.
func BenchmarkServerWindowUpdateManyStreams(b *testing.B) {
	const n = 1000
	s := withStreams(b, &Config{MaxConcurrentStreams: n, MaxControlFrames: 1 << 30}, n)
	var in []byte
	for i := range uint32(n) {
		in = AppendWindowUpdate(in, 2*i+1, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Feed(in); err != nil {
			b.Fatal(err)
		}
		s.Written(len(s.Pending()))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/frame")
}

// TestServerSettingsInOrder: a SETTINGS frame's INITIAL_WINDOW_SIZE values
// apply in order (RFC 9113 6.5.3): one that puts a window above 2^31-1
// is an error even when a later one brings it back; the last one holds.
func TestServerSettingsInOrder(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, nil)
	feed(t, s, p.headers(1, false, hold...))
	many := setting(SettingInitialWindowSize, 1000)
	for range 100 {
		many = cat(many, setting(SettingInitialWindowSize, 70000), setting(SettingInitialWindowSize, 1000))
	}
	if code := feed(t, s, frame(FrameSettings, 0, 0, cat(many, setting(SettingInitialWindowSize, 100))...)); code != noConnErr {
		t.Fatal(code)
	}
	if st := s.find(1); st == nil || st.sendWin != 100 {
		t.Fatalf("stream 1: %+v", st)
	}
	in := cat(frame(FrameWindowUpdate, 0, 1, u32(10)...), // stream 1's window: 110
		frame(FrameSettings, 0, 0, cat(setting(SettingInitialWindowSize, MaxWindow), setting(SettingInitialWindowSize, 100))...))
	if code := feed(t, s, in); code != FlowControlError {
		t.Fatalf("a window over 2^31-1 between two values: %v", code)
	}
}

// BenchmarkServerSettingsMany: a SETTINGS frame of the most entries a
// frame holds, each an INITIAL_WINDOW_SIZE, with 100 streams open: work
// a client buys with one frame of the control budget (nghttp2's
// CVE-2020-11080 was such a frame).
func BenchmarkServerSettingsMany(b *testing.B) {
	s := withStreams(b, &Config{MaxControlFrames: 1 << 30}, 100)
	var ps []byte
	for i := range MinMaxFrameSize / 6 {
		ps = append(ps, setting(SettingInitialWindowSize, uint32(60000+i%2))...)
	}
	in := frame(FrameSettings, 0, 0, ps...)
	b.ResetTimer()
	for range b.N {
		if _, err := s.Feed(in); err != nil {
			b.Fatal(err)
		}
		s.Written(len(s.Pending()))
	}
}

// TestServerConsumedTwice: Consumed beyond what was delivered returns
// nothing, and sends no WINDOW_UPDATE of 0 (a PROTOCOL_ERROR to the peer),
// even with a stream window so small that half of it is 0.
func TestServerConsumedTwice(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, &Config{InitialWindowSize: 1})
	feed(t, s, cat(p.headers(1, false, get...), frame(FrameData, 0, 1, 'x')))
	s.Consumed(1, 1) // the recorder consumed it already
	for _, f := range outFrames(t, s, p.dec) {
		if f == "WINDOW_UPDATE 1 0" {
			t.Fatalf("sent %q", f)
		}
	}
}

// TestServerGoAwayFlood: GOAWAY frames, each a call of OnGoAway, share the
// control budget.
func TestServerGoAwayFlood(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, &Config{MaxControlFrames: 100})
	feed(t, s, p.headers(1, false, hold...)) // gives back what the SETTINGS took
	goAway := frame(FrameGoAway, 0, 0, cat(u32(0), u32(0), make([]byte, 1000))...)
	for i := range 100 {
		if code := feed(t, s, goAway); code != noConnErr {
			t.Fatalf("GOAWAY %d: %v", i, code)
		}
	}
	if code := feed(t, s, goAway); code != EnhanceYourCalm {
		t.Fatalf("past the budget: %v", code)
	}
}

// TestServerMadeYouReset (CVE-2025-8671): stream errors the client
// provokes on requests the handler already has (WINDOW_UPDATE of 0, DATA
// past the stream window, content-length short of the DATA) are resets it
// did not send, and count in MaxEarlyResets as its own would.
func TestServerMadeYouReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(p *peer, id uint32) []byte
	}{
		{"WINDOW_UPDATE 0", func(p *peer, id uint32) []byte {
			return cat(p.headers(id, false, hold...), frame(FrameWindowUpdate, 0, id, u32(0)...))
		}},
		{"DATA past the window", func(p *peer, id uint32) []byte {
			return cat(p.headers(id, false, hold...), frame(FrameData, 0, id, make([]byte, 2000)...))
		}},
		{"content-length mismatch", func(p *peer, id uint32) []byte {
			return cat(p.headers(id, false, kvs(hold, "content-length", "1")...), frame(FrameData, 0, id, 'a', 'b'))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			s, p := open(t, h, &Config{MaxEarlyResets: 20, InitialWindowSize: 1000})
			feed(t, s, frame(FrameSettings, FlagAck, 0)) // our window of 1000 holds
			for i := range 20 {
				if code := feed(t, s, tc.in(p, uint32(2*i+1))); code != noConnErr {
					t.Fatalf("stream %d: %v", 2*i+1, code)
				}
			}
			if code := feed(t, s, tc.in(p, 41)); code != EnhanceYourCalm {
				t.Fatalf("past the limit: %v", code)
			}
			if n := strings.Count(strings.Join(h.events, "\n"), "reset "); n != 21 {
				t.Fatalf("%d resets told: %q", n, h.events)
			}
		})
	}
}

// withStreams returns a Server with streams 1, 3, ... open, n of them.
func withStreams(b *testing.B, cfg *Config, n int) *Server {
	s := NewServer(shortApp{}, cfg)
	in := start()
	blk := []byte{0x82, 0x86, 0x84, 0x01, 0x01, 'x'}
	for i := range uint32(n) {
		in = AppendFrameHeader(in, FrameHeader{Length: uint32(len(blk)), Type: FrameHeaders, Flags: FlagEndHeaders, StreamID: 2*i + 1})
		in = append(in, blk...)
	}
	if _, err := s.Feed(in); err != nil {
		b.Fatal(err)
	}
	return s
}

// TestServerFieldNameToken: a regular field name must be a token (RFC 9110
// 5.1; nghttp2 refuses others too): "x(y" or "a/b" could not be written as
// an HTTP/1.1 field by a proxy, so the request is malformed, its stream
// reset, the handler never told.
func TestServerFieldNameToken(t *testing.T) {
	for _, name := range []string{"x(y", "a/b", "x\"y", "x{y", "x,y", "x@y"} {
		h := &recorder{}
		s, p := open(t, h, nil)
		feed(t, s, p.headers(1, true, ":method", "GET", ":scheme", "http", ":path", "/", name, "1"))
		if len(h.events) != 0 {
			t.Errorf("%q: events %q, want none (a stream reset)", name, h.events)
		}
	}
	// Token characters beyond letters and digits pass.
	h := &recorder{}
	s, p := open(t, h, nil)
	feed(t, s, p.headers(1, true, ":method", "GET", ":scheme", "http", ":path", "/", "x-a_b.c!#$%&'*+^`|~", "1"))
	if len(h.events) != 1 {
		t.Errorf("a token name: events %q, want the request", h.events)
	}
}

// TestServerResetAfterHeaders: a stream the client resets after our
// response header but before the response ended is early too: else a
// client waits for each header (the proxy's upstream has done its work by
// then), resets, and repeats without bound. Streams completed in full give
// one back each, so a client interleaving them with resets stays within
// the bound at any count.
func TestServerResetAfterHeaders(t *testing.T) {
	headersOnly := func(s *Server, id uint32, r *Request, end bool) {
		s.WriteHeaders(id, 200, nil, false)
		if string(r.Path) != "/hold" {
			s.WriteData(id, []byte("ok"), true)
		}
	}
	reset := func(p *peer, id uint32) []byte {
		return cat(p.headers(id, false, hold...), frame(FrameRSTStream, 0, id, u32(uint32(Cancel))...))
	}
	t.Run("counted", func(t *testing.T) {
		s, p := open(t, &recorder{onRequest: headersOnly}, &Config{MaxEarlyResets: 20})
		for i := range 20 {
			if code := feed(t, s, reset(p, uint32(2*i+1))); code != noConnErr {
				t.Fatalf("reset %d: %v", i, code)
			}
		}
		if code := feed(t, s, reset(p, 41)); code != EnhanceYourCalm {
			t.Fatalf("past the limit: %v", code)
		}
	})
	t.Run("completed streams give back", func(t *testing.T) {
		s, p := open(t, &recorder{onRequest: headersOnly}, &Config{MaxEarlyResets: 20})
		for i := range 200 {
			id := uint32(4*i + 1)
			if code := feed(t, s, cat(reset(p, id), p.headers(id+2, true, get...))); code != noConnErr {
				t.Fatalf("round %d: %v", i, code)
			}
			outFrames(t, s, p.dec)
		}
	})
}

// TestServerFramesAfterOurReset: the frames a client sent on a stream
// before it saw our RST_STREAM (RFC 9113 5.1: ignored; DATA still charged
// to the connection window, 6.9) are ignored for every stream it can
// still have frames in flight on: each it thinks open, so up to
// MaxConcurrentStreams of them, and the streams refused beyond those
// (each counted under MaxEarlyResets). Before, a ring of the last 32 was
// kept, and the in-flight DATA of an older one was answered with a
// RST_STREAM that counted as an early reset, its trailers with GOAWAY.
func TestServerFramesAfterOurReset(t *testing.T) {
	inFlight := func(p *peer, id uint32) []byte {
		return cat(frame(FrameData, 0, id, make([]byte, 16000)...), frame(FrameData, 0, id, make([]byte, 16000)...),
			frame(FrameWindowUpdate, 0, id, u32(1)...), p.headers(id, true, "x-sum", "1"),
			frame(FrameRSTStream, 0, id, u32(uint32(Cancel))...), frame(FramePriority, 0, id, 0, 0, 0, 0, 16))
	}
	handlerReset := &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) { s.Reset(id, Cancel) }}
	for _, tc := range []struct {
		name  string
		h     Handler
		cfg   *Config
		ids   []uint32 // the streams reset, in order
		start func(p *peer, id uint32) []byte
	}{
		{"reset by the handler", handlerReset, &Config{MaxConcurrentStreams: 50, MaxEarlyResets: 1}, odd(1, 50),
			func(p *peer, id uint32) []byte { return p.headers(id, false, hold...) }},
		// Stream 1 stays open, the others are refused.
		{"refused", &recorder{}, &Config{MaxConcurrentStreams: 1, MaxEarlyResets: 100}, odd(3, 100),
			func(p *peer, id uint32) []byte { return p.headers(id, false, hold...) }},
		{"stream error", &recorder{}, &Config{MaxConcurrentStreams: 50, MaxEarlyResets: 50}, odd(1, 50),
			func(p *peer, id uint32) []byte {
				return cat(p.headers(id, false, kvs(hold, "content-length", "1")...), frame(FrameData, 0, id, 'a', 'b'))
			}},
		// MaxConcurrentStreams 1 and MaxEarlyResets 2: the last 3 streams
		// reset are remembered; stream 1 is forgotten (below).
		{"at the bound", handlerReset, &Config{MaxConcurrentStreams: 1, MaxEarlyResets: 2}, odd(1, 4),
			func(p *peer, id uint32) []byte { return p.headers(id, false, hold...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, p := open(t, tc.h, tc.cfg)
			var in []byte
			if tc.ids[0] == 3 {
				in = p.headers(1, false, hold...)
			}
			for _, id := range tc.ids {
				in = cat(in, tc.start(p, id))
			}
			feed(t, s, in)
			outFrames(t, s, p.dec)
			s.earlyResets = 0
			in = nil
			sent := tc.ids
			if tc.name == "at the bound" {
				sent = sent[1:]
			}
			for _, id := range sent {
				in = cat(in, inFlight(p, id))
			}
			if code := feed(t, s, in); code != noConnErr {
				t.Fatalf("connection error %v", code)
			}
			// Nothing sent but WINDOW_UPDATEs of the connection (the DATA
			// returned to its window), no early reset.
			for _, f := range outFrames(t, s, p.dec) {
				if !strings.HasPrefix(f, "WINDOW_UPDATE 0 ") {
					t.Fatalf("sent %q", f)
				}
			}
			if s.earlyResets != 0 {
				t.Fatalf("%d early resets counted", s.earlyResets)
			}
			if tc.name != "at the bound" {
				return
			}
			// A peer sending on the 4th last reset had seen our RST_STREAM:
			// its DATA is answered and counted.
			feed(t, s, frame(FrameData, 0, 1, 'x'))
			if got := outFrames(t, s, p.dec); !equal(got, []string{"RST_STREAM 1 STREAM_CLOSED"}) || s.earlyResets != 1 {
				t.Fatalf("out %q, %d early resets", got, s.earlyResets)
			}
		})
	}
}

// odd returns n odd stream ids from first.
func odd(first uint32, n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = first + 2*uint32(i)
	}
	return ids
}

// TestClientFramesAfterOurReset: a Client that cancels many streams at
// once (a proxy whose clients went away) ignores the response frames the
// server sent before it saw each RST_STREAM, on all of them, not the last
// 32: an older stream's DATA was a stream error counted under
// MaxEarlyResets, and ended the connection with ENHANCE_YOUR_CALM.
func TestClientFramesAfterOurReset(t *testing.T) {
	const n = DefaultMaxConcurrentStreams
	c, a, p := openClient(t, &Config{MaxEarlyResets: 5})
	var in []byte
	for range n {
		id, err := a.start(c, req("/"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		in = cat(in, p.headers(id, false, ":status", "200"))
	}
	if e := feed(t, c, in); e != noConnErr {
		t.Fatal(e)
	}
	in = nil
	for i := range uint32(n) {
		c.Reset(2*i+1, Cancel)
		in = cat(in, frame(FrameData, 0, 2*i+1, make([]byte, 1000)...), frame(FrameWindowUpdate, 0, 2*i+1, u32(1)...),
			p.headers(2*i+1, true, "x-sum", "1"), frame(FrameRSTStream, 0, 2*i+1, u32(uint32(Cancel))...))
	}
	outFrames(t, c, hpack.NewDecoder(4096, 0))
	if e := feed(t, c, in); e != noConnErr {
		t.Fatalf("connection error %v", e)
	}
	for _, f := range outFrames(t, c, hpack.NewDecoder(4096, 0)) {
		if !strings.HasPrefix(f, "WINDOW_UPDATE 0 ") {
			t.Fatalf("sent %q", f)
		}
	}
	if c.earlyResets != 0 {
		t.Fatalf("%d early resets counted", c.earlyResets)
	}
}

// TestServerResetLongStreams: a gRPC-like client cancelling long streams
// (server-streaming calls at their deadline, watches it stops) after
// their responses sent DATA is not a rapid reset: such a connection with
// no stream completing ended with ENHANCE_YOUR_CALM at MaxEarlyResets + 1
// cancellations, all its other streams with it. A reset before any DATA
// of the response still counts (TestServerResetAfterHeaders).
func TestServerResetLongStreams(t *testing.T) {
	streaming := func(s *Server, id uint32, r *Request, end bool) {
		s.WriteHeaders(id, 200, nil, false)
		s.WriteData(id, []byte("\x00\x00\x00\x00\x01x"), false) // one gRPC message, the stream open
	}
	s, p := open(t, &recorder{onRequest: streaming}, &Config{MaxEarlyResets: 20})
	for i := range 200 {
		id := uint32(2*i + 1)
		if code := feed(t, s, p.headers(id, false, hold...)); code != noConnErr {
			t.Fatalf("stream %d: %v", id, code)
		}
		outFrames(t, s, p.dec)
		if code := feed(t, s, frame(FrameRSTStream, 0, id, u32(uint32(Cancel))...)); code != noConnErr {
			t.Fatalf("cancel %d of a stream with DATA sent: %v", i+1, code)
		}
	}
}

// TestServerEndedStreamCreditOnce: the window a stream's DATA used is free
// to credit once: on the stream while it lives or, once it ended, from
// the pool of ended streams, not on the stream and then again from the
// pool, nor on another closed stream. Passes: no defect.
func TestServerEndedStreamCreditOnce(t *testing.T) {
	const budget = 10
	body := pattern(32 << 10)
	h := &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
		s.WriteHeaders(id, 200, nil, false)
		if n, err := s.WriteData(id, body, true); err != nil || n != len(body) {
			t.Fatalf("WriteData %d %v", n, err)
		}
	}}
	s, p := open(t, h, &Config{MaxControlFrames: budget})
	credit := func(id uint32, n int) []byte { return frame(FrameWindowUpdate, 0, id, u32(uint32(n))...) }
	for _, id := range []uint32{1, 3} {
		feed(t, s, p.headers(id, true, get...))
		outFrames(t, s, p.dec)
		// Stream 1 credited after its end (from the pool), stream 3 too.
		if code := feed(t, s, cat(credit(0, len(body)), credit(id, len(body)))); code != noConnErr {
			t.Fatalf("stream %d's credit: %v", id, code)
		}
	}
	// The same bytes again, on either stream: each charged.
	for i := range budget + 1 {
		code := feed(t, s, credit(uint32(1+2*(i%2)), len(body)))
		if i < budget && code != noConnErr || i == budget && code != EnhanceYourCalm {
			t.Fatalf("WINDOW_UPDATE %d again: %v", i, code)
		}
	}
}

// TestClientResetCausesOneFeed: the causes of streams ending in one Feed
// whose frames race a connection error: each stream keeps the cause of
// what ended it first (the server's reset, a stream error, GOAWAY's
// unprocessed), those still open get the connection's. Passes: no defect.
func TestClientResetCausesOneFeed(t *testing.T) {
	rst := func(id uint32, code ErrCode) []byte { return frame(FrameRSTStream, 0, id, u32(uint32(code))...) }
	push := frame(FramePushPromise, FlagEndHeaders, 1, u32(2)...) // a connection error
	for _, tc := range []struct {
		name string
		in   func(p *peer) []byte
		want [4]string // streams 1, 3, 5, 7
	}{
		{"reset, stream error, connection error", func(p *peer) []byte {
			return cat(rst(1, Cancel), p.headers(3, true, "a", "b"), rst(5, RefusedStream), push)
		}, [4]string{"CANCEL server", "PROTOCOL_ERROR stream error", "REFUSED_STREAM unprocessed", "PROTOCOL_ERROR connection"}},
		{"goaway then connection error", func(p *peer) []byte {
			return cat(frame(FrameGoAway, 0, 0, cat(u32(3), u32(uint32(EnhanceYourCalm)))...), push)
		}, [4]string{"PROTOCOL_ERROR connection", "PROTOCOL_ERROR connection", "ENHANCE_YOUR_CALM unprocessed", "ENHANCE_YOUR_CALM unprocessed"}},
		{"connection error first", func(p *peer) []byte {
			return cat(push, rst(1, Cancel), p.headers(3, true, "a", "b"))
		}, [4]string{"PROTOCOL_ERROR connection", "PROTOCOL_ERROR connection", "PROTOCOL_ERROR connection", "PROTOCOL_ERROR connection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a, p := openClient(t, nil)
			for range 4 {
				if _, err := c.Request(req("/"), false); err != nil {
					t.Fatal(err)
				}
			}
			outFrames(t, c, p.dec)
			if code := feed(t, c, tc.in(p)); code != ProtocolError {
				t.Fatalf("Feed: %v", code)
			}
			for i, want := range tc.want {
				if got := a.st[uint32(2*i+1)].reset; got != want {
					t.Errorf("stream %d: %q, want %q", 2*i+1, got, want)
				}
			}
		})
	}
}
