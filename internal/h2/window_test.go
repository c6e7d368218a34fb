package h2

import (
	"testing"
)

// TestSmallInitialWindowBeforeAck: with an InitialWindowSize below the
// RFC's 65535, the peer may send 65535 bytes on a stream until it has
// applied our SETTINGS, which its ACK tells (RFC 9113 6.5.3, 6.9.2): a
// body of 65535 sent before the ACK is taken whole, on a Server and a
// Client alike; after the ACK a stream's window is InitialWindowSize, and
// a stream opened before it has its window moved by the difference.
func TestSmallInitialWindowBeforeAck(t *testing.T) {
	const small = 1000
	cfg := &Config{InitialWindowSize: small}
	// body is n bytes of DATA on stream id in frames of 16 KiB.
	body := func(id uint32, n int, end bool) []byte {
		var in []byte
		for n > 0 {
			k := min(n, MinMaxFrameSize)
			n -= k
			var fl Flags
			if end && n == 0 {
				fl = FlagEndStream
			}
			in = cat(in, frame(FrameData, fl, id, make([]byte, k)...))
		}
		return in
	}
	t.Run("server", func(t *testing.T) {
		h := &recorder{noConsume: true}
		s, p := open(t, h, cfg) // the client has not acknowledged our SETTINGS
		in := cat(p.headers(1, false, get...), body(1, initialWindow, true), p.headers(3, false, get...), body(3, initialWindow-small, false))
		if code := feed(t, s, in); code != noConnErr {
			t.Fatalf("connection error %v", code)
		}
		if got := outFrames(t, s, p.dec); len(got) != 0 {
			t.Fatalf("before the ACK: sent %q", got)
		}
		// The ACK: stream 3's window is 65535 - 64535 + (1000 - 65535) =
		// 1000 - 64535 < 0, new streams' 1000.
		in = cat(frame(FrameSettings, FlagAck, 0), frame(FrameData, 0, 3, 'x'), p.headers(5, false, get...), body(5, small, false), frame(FrameData, 0, 5, 'x'))
		if code := feed(t, s, in); code != noConnErr {
			t.Fatalf("connection error %v", code)
		}
		if got, want := outFrames(t, s, p.dec), []string{"RST_STREAM 3 FLOW_CONTROL_ERROR", "RST_STREAM 5 FLOW_CONTROL_ERROR"}; !equal(got, want) {
			t.Fatalf("after the ACK: sent %q, want %q", got, want)
		}
	})
	t.Run("client", func(t *testing.T) {
		a := newClientApp()
		a.hold = true
		c := NewClient(a, cfg)
		c.Written(len(c.Pending()))
		if code := feed(t, c, frame(FrameSettings, 0, 0)); code != noConnErr {
			t.Fatalf("connection error %v", code)
		}
		p := newPeer()
		var in []byte
		for range 2 {
			id, err := a.start(c, req("/"), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			in = cat(in, p.headers(id, false, ":status", "200"), body(id, initialWindow, false))
		}
		c.Written(len(c.Pending()))
		if code := feed(t, c, in); code != noConnErr {
			t.Fatalf("connection error %v", code)
		}
		if got := outFrames(t, c, p.dec); len(got) != 0 {
			t.Fatalf("before the ACK: sent %q", got)
		}
		if code := feed(t, c, frame(FrameSettings, FlagAck, 0)); code != noConnErr {
			t.Fatalf("connection error %v", code)
		}
		id, err := a.start(c, req("/"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Written(len(c.Pending()))
		if code := feed(t, c, cat(p.headers(id, false, ":status", "200"), body(id, small+1, false))); code != noConnErr {
			t.Fatalf("connection error %v", code)
		}
		if got, want := outFrames(t, c, p.dec), []string{"RST_STREAM 5 FLOW_CONTROL_ERROR"}; !equal(got, want) {
			t.Fatalf("after the ACK: sent %q, want %q", got, want)
		}
	})
}

// opener is a clientApp whose OnWritable opens a stream the first time,
// as a pool serving a waiting request when a stream's body went out may.
type opener struct {
	*clientApp
	opened uint32
}

func (o *opener) OnWritable(c *Client, id uint32) {
	o.clientApp.OnWritable(c, id)
	if o.opened == 0 {
		o.opened, _ = o.start(c, req("/"), nil, nil)
	}
}

// TestClientWakeWhileOpening: every blocked stream gets OnWritable when
// the window opens, also when a handler's OnWritable opens a stream (a
// ClientHandler may call Request): Request dropped the entries of streams
// that ended from the slice wake was walking by index, and the stream
// that moved into the place just visited was passed over, its body left
// unsent with nothing to wake it again.
func TestClientWakeWhileOpening(t *testing.T) {
	o := &opener{clientApp: newClientApp()}
	c := NewClient(o, nil)
	c.Written(len(c.Pending()))
	if code := feed(t, c, frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 0)...)); code != noConnErr {
		t.Fatalf("connection error %v", code)
	}
	for range 3 {
		if _, err := o.start(c, req("/"), []byte("body"), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Stream 1 is reset (its entry dead until compacted), then the window
	// opens for 3 and 5, whose bodies wait.
	in := cat(frame(FrameRSTStream, 0, 1, u32(uint32(Cancel))...), frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 100)...))
	if code := feed(t, c, in); code != noConnErr {
		t.Fatalf("connection error %v", code)
	}
	if o.opened != 7 {
		t.Fatalf("opened %d, want 7", o.opened)
	}
	for _, id := range []uint32{3, 5} {
		if s := o.st[id]; s.send != nil {
			t.Errorf("stream %d: %d bytes of its body unsent", id, len(s.send))
		}
	}
}
