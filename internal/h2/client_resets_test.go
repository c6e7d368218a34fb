package h2

import (
	"testing"
)

// TestClientOwnResetsOverflowQuiet: a client that resets streams
// faster than a round trip (a proxy whose downstream clients went away)
// opens and resets more streams than the quiet ring holds before a
// conforming server's answers, sent before it saw our RST_STREAMs,
// arrive. The server's HEADERS on the oldest reset stream must be ignored
// (RFC 9113 5.1), not end the connection with STREAM_CLOSED.
func TestClientOwnResetsOverflowQuiet(t *testing.T) {
	c, a, p := openClient(t, nil)
	var in []byte
	n := DefaultMaxConcurrentStreams + DefaultMaxEarlyResets + 1
	for i := range n {
		id, err := a.start(c, req("/"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The server answered before it read our RST_STREAM.
		in = cat(in, p.headers(id, false, ":status", "200"), frame(FrameData, 0, id, 'x'))
		c.Reset(id, Cancel)
		_ = i
	}
	// A stream still open, which must survive.
	live, err := a.start(c, req("/"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := feed(t, c, in); e != noConnErr {
		t.Fatalf("connection error %v on frames in flight on streams we reset; live stream: %q", e, a.st[live].reset)
	}
}

// TestClientOwnResetsOverflowQuietData: the same with DATA only in
// flight: each late DATA on a stream we reset was answered with
// RST_STREAM(STREAM_CLOSED) and counted as a stream error under
// MaxEarlyResets, and past it the connection ended with
// ENHANCE_YOUR_CALM, the live stream with it.
func TestClientOwnResetsOverflowQuietData(t *testing.T) {
	c, a, p := openClient(t, nil)
	var in []byte
	for range 2 * (DefaultMaxConcurrentStreams + DefaultMaxEarlyResets) {
		id, err := a.start(c, req("/"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Reset(id, Cancel)
		in = cat(in, frame(FrameData, 0, id, 'x'))
	}
	live, _ := a.start(c, req("/"), nil, nil)
	outFrames(t, c, p.dec)
	if e := feed(t, c, in); e != noConnErr {
		t.Fatalf("connection error %v; live stream: %q", e, a.st[live].reset)
	}
	for _, f := range outFrames(t, c, p.dec) {
		if f[:len("WINDOW_UPDATE 0 ")] != "WINDOW_UPDATE 0 " {
			t.Fatalf("sent %q for DATA on streams we reset", f)
		}
	}
}

// TestClientKeepalivePings: one long server-streaming call (a gRPC
// watch) on an upstream connection whose server sends keepalive PINGs
// while it reads nothing from us (grpc-go's keepalive.ServerParameters
// Time): each PING is charged to the control budget, and nothing we do on
// such a connection gives it back (no request, no DATA of ours), so the
// connection ends with ENHANCE_YOUR_CALM after MaxControlFrames PINGs
// (16.7 hours at one a minute), though the server keeps to the protocol
// and the stream carries data all along.
func TestClientKeepalivePings(t *testing.T) {
	c, a, p := openClient(t, nil)
	id, _ := a.start(c, req("/watch"), nil, nil)
	outFrames(t, c, p.dec)
	if e := feed(t, c, p.headers(id, false, ":status", "200")); e != noConnErr {
		t.Fatal(e)
	}
	for i := range 2 * DefaultMaxControlFrames {
		in := cat(frame(FrameData, 0, id, []byte("event")...), frame(FramePing, 0, 0, make([]byte, 8)...))
		if e := feed(t, c, in); e != noConnErr {
			t.Fatalf("keepalive PING %d: connection error %v", i+1, e)
		}
		outFrames(t, c, p.dec)
	}
}
