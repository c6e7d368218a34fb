package h2

import (
	"bytes"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// FuzzServer: any bytes after the preface and a SETTINGS: no panic; the
// output of a handler that writes nothing stays within MaxOutput plus one
// answer, the GOAWAY and the WINDOW_UPDATEs the input's DATA earned (one
// that answers each request, within that and a few times the input); and
// feeding the input in pieces (the first byte picks their size and the
// handler) gives the same events and output as feeding it whole.
func FuzzServer(f *testing.F) {
	p := newPeer()
	for _, s := range [][]byte{
		p.headers(1, true, get...),
		cat(p.headers(1, false, kvs(get, "content-length", "2")...), frame(FrameData, FlagEndStream, 1, 'h', 'i')),
		cat(p.headers(3, false, get...), frame(FrameRSTStream, 0, 3, u32(8)...), frame(FramePing, 0, 0, make([]byte, 8)...)),
		cat(frame(FrameHeaders, 0, 1, p.block(get...)...), frame(FrameContinuation, FlagEndHeaders, 1)),
		cat(frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 1)...), frame(FrameWindowUpdate, 0, 0, u32(5)...)),
		frame(FrameGoAway, 0, 0, make([]byte, 8)...),
		// Floods of frames that ask for an answer, from where the
		// bounds on the answers matter (the control budget lets more
		// through than MaxOutput).
		bytes.Repeat(frame(FramePing, 0, 0, make([]byte, 8)...), 60),
		bytes.Repeat(frame(FrameSettings, 0, 0), 60),
	} {
		f.Add(append([]byte{7}, s...))
	}
	const maxOut = 128 // below the control budget's worth of PING and SETTINGS ACKs
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		step, answer := int(in[0])%64+1, in[0]&0x80 != 0
		in = in[1:]
		run := func(step int) ([]string, []byte, error) {
			h := &recorder{}
			var ok okApp
			if answer {
				ok = okApp{left: map[uint32][]byte{}}
				h.onRequest = func(s *Server, id uint32, r *Request, end bool) { ok.OnRequest(s, id, r, end) }
				h.onData = func(s *Server, id uint32, p []byte, end bool) {
					if end {
						ok.answer(s, id)
					}
				}
				h.onWrite = ok.OnWritable
			}
			s := NewServer(h, &Config{MaxOutput: maxOut, MaxControlFrames: 50})
			// The preface and the input in reads of step bytes, through
			// FeedTail: its tail never holds more than one frame.
			s.Written(len(s.Pending())) // our SETTINGS
			all := append(start(), in...)
			var tail []byte
			var err error
			for off := 0; off < len(all) && err == nil; off += step {
				err = s.FeedTail(&tail, all[off:min(off+step, len(all))])
				if len(tail) > FrameHeaderLen+MinMaxFrameSize {
					t.Fatalf("tail of %d bytes", len(tail))
				}
			}
			bound := maxOut + 64 + 255 + len(in)/1000
			if answer {
				bound += 4 * len(in)
			}
			if len(s.Pending()) > bound {
				t.Fatalf("%d bytes of output for %d of input", len(s.Pending()), len(in))
			}
			return h.events, append([]byte(nil), s.Pending()...), err
		}
		ev1, out1, err1 := run(len(in) + 1)
		ev2, out2, err2 := run(step)
		if !equal(ev1, ev2) || string(out1) != string(out2) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("whole vs in pieces of %d:\n%q %v\n%q %v", step, ev1, err1, ev2, err2)
		}
	})
}

// TestServerAllocs: a request and its response on an open connection
// allocate nothing once the buffers have grown.
func TestServerAllocs(t *testing.T) {
	body := []byte("hello")
	fields := []hpack.Field{{Name: []byte("content-type"), Value: []byte("text/plain")}}
	var got int
	app := allocApp{fields: fields, body: body, got: &got}
	s := NewServer(app, nil)
	p := newPeer()
	s.Feed(start())
	blk := p.block(kvs(get, "user-agent", "test", "accept", "*/*")...)
	post := p.block(kvs(get[:6], ":path", "/upload", "content-length", "5")...)
	var in []byte
	id := uint32(1)
	step := func() {
		in = AppendFrameHeader(in[:0], FrameHeader{Length: uint32(len(blk)), Type: FrameHeaders, Flags: FlagEndHeaders | FlagEndStream, StreamID: id})
		in = append(in, blk...)
		in = AppendFrameHeader(in, FrameHeader{Length: uint32(len(post)), Type: FrameHeaders, Flags: FlagEndHeaders, StreamID: id + 2})
		in = append(in, post...)
		in = AppendData(in, id+2, body, true)
		id += 4
		if n, err := s.Feed(in); n != len(in) || err != nil {
			t.Fatalf("feed: %d %v", n, err)
		}
		s.Written(len(s.Pending()))
	}
	for range 100 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocs per two requests", n)
	}
	if got == 0 || s.live() != 0 {
		t.Fatalf("got %d, %d streams open", got, s.live())
	}
}

type allocApp struct {
	fields []hpack.Field
	body   []byte
	got    *int
}

func (a allocApp) OnRequest(s *Server, id uint32, r *Request, end bool) {
	if end {
		s.WriteHeaders(id, 200, a.fields, false)
		s.WriteData(id, a.body, true)
	}
}

func (a allocApp) OnData(s *Server, id uint32, p []byte, end bool) {
	*a.got += len(p)
	s.Consumed(id, len(p))
	if end {
		s.WriteHeaders(id, 204, nil, true)
	}
}
func (allocApp) OnTrailers(*Server, uint32, []hpack.Field) {}
func (allocApp) OnReset(*Server, uint32, ErrCode)          {}
func (allocApp) OnWritable(*Server, uint32)                {}
func (allocApp) OnGoAway(*Server, ErrCode, []byte)         {}
