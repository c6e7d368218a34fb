package h2

import (
	"bytes"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// FuzzClient: any server bytes after a valid SETTINGS, with three streams
// open (one still sending a body): no panic, and the output stays within
// the body the windows let out (the handler's, all of it at most) in DATA
// frames, and, in other frames, MaxOutput plus one answer, the GOAWAY, the
// request's trailers and the WINDOW_UPDATEs the input's DATA earned.
func FuzzClient(f *testing.F) {
	p := newPeer()
	for _, s := range [][]byte{
		p.headers(1, true, ":status", "200"),
		cat(p.headers(1, false, ":status", "200", "content-length", "2"), frame(FrameData, FlagEndStream, 1, 'h', 'i')),
		cat(p.headers(3, false, ":status", "100"), p.headers(3, false, ":status", "200"), p.headers(3, true, "grpc-status", "0")),
		cat(frame(FrameRSTStream, 0, 3, u32(7)...), frame(FramePing, 0, 0, make([]byte, 8)...)),
		cat(frame(FrameHeaders, 0, 1, p.block(":status", "200")...), frame(FrameContinuation, FlagEndHeaders, 1)),
		cat(frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 1)...), frame(FrameWindowUpdate, 0, 5, u32(5)...)),
		frame(FrameGoAway, 0, 0, make([]byte, 8)...),
		bytes.Repeat(frame(FramePing, 0, 0, make([]byte, 8)...), 60),
		bytes.Repeat(frame(FrameSettings, 0, 0), 60),
	} {
		f.Add(s)
	}
	const maxOut, body = 128, 100000
	f.Fuzz(func(t *testing.T, in []byte) {
		a := newClientApp()
		c := NewClient(a, &Config{MaxOutput: maxOut, MaxControlFrames: 50})
		a.start(c, req("/"), nil, nil)
		a.start(c, req("/"), nil, nil)
		a.start(c, req("/"), make([]byte, body), []hpack.Field{{Name: []byte("x"), Value: []byte("y")}})
		c.Written(len(c.Pending()))
		if _, err := c.Feed(frame(FrameSettings, 0, 0)); err != nil {
			t.Fatal(err)
		}
		c.Written(len(c.Pending()))
		n, _ := c.Feed(in)
		if n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
		// The body at most (the windows the input grants), in frames of
		// 16 KiB or more; the rest as the Server's.
		var data, other int
		for out := c.Pending(); len(out) > 0; {
			f, n, err := ParseFrame(out, MaxMaxFrameSize)
			if err != nil || n == 0 {
				t.Fatalf("output does not parse: n %d err %v", n, err)
			}
			if f.Type == FrameData {
				data += len(f.Data)
			} else {
				other += n
			}
			out = out[n:]
		}
		bound := maxOut + 64 + 255 + len(in)/1000
		if data == body {
			bound += 64 // the trailers
		}
		if data > body || other > bound {
			t.Fatalf("%d bytes of DATA and %d of other frames for %d of input", data, other, len(in))
		}
	})
}

// TestClientAllocs: a request and its response on an open connection
// allocate nothing once the buffers have grown, on the Client's side.
func TestClientAllocs(t *testing.T) {
	var got int
	c := NewClient(allocClient{got: &got}, nil)
	c.Written(len(c.Pending()))
	c.Feed(frame(FrameSettings, 0, 0))
	p := newPeer()
	r := &Request{Method: []byte("GET"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte("/"),
		Fields: []hpack.Field{{Name: []byte("user-agent"), Value: []byte("test")}}}
	blk := p.block(":status", "200", "content-type", "text/plain", "content-length", "5")
	tr := p.block("grpc-status", "0")
	body := []byte("hello")
	var in []byte
	step := func() {
		id, err := c.Request(r, false)
		if err != nil {
			t.Fatal(err)
		}
		c.WriteData(id, body, true)
		in = AppendFrameHeader(in[:0], FrameHeader{Length: uint32(len(blk)), Type: FrameHeaders, Flags: FlagEndHeaders, StreamID: id})
		in = append(in, blk...)
		in = AppendData(in, id, body, false)
		in = AppendFrameHeader(in, FrameHeader{Length: uint32(len(tr)), Type: FrameHeaders, Flags: FlagEndHeaders | FlagEndStream, StreamID: id})
		in = append(in, tr...)
		if n, err := c.Feed(in); n != len(in) || err != nil {
			t.Fatalf("feed: %d %v", n, err)
		}
		c.Written(len(c.Pending()))
	}
	for range 100 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocs per request", n)
	}
	if got == 0 || c.live() != 0 {
		t.Fatalf("got %d, %d streams open", got, c.live())
	}
}

type allocClient struct{ got *int }

func (allocClient) OnResponse(*Client, uint32, *Response, bool) {}
func (a allocClient) OnData(c *Client, id uint32, p []byte, end bool) {
	*a.got += len(p)
	c.Consumed(id, len(p))
}
func (allocClient) OnTrailers(*Client, uint32, []hpack.Field)    {}
func (allocClient) OnReset(*Client, uint32, ErrCode, ResetCause) {}
func (allocClient) OnWritable(*Client, uint32)                   {}
func (allocClient) OnGoAway(*Client, ErrCode, uint32, []byte)    {}
func (allocClient) OnPingAck(*Client, [8]byte)                   {}
