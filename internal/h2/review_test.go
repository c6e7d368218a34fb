package h2

import (
	"testing"
)

// TestServerShutdownRace: streams the client opened before it saw our
// GOAWAY (above its last stream id) are ignored whole: their DATA returns
// to the connection window without a RST_STREAM or an early-reset charge,
// and their trailers end nothing, so a graceful shutdown does not turn
// into ENHANCE_YOUR_CALM or PROTOCOL_ERROR for a busy client.
func TestServerShutdownRace(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, &Config{MaxEarlyResets: 10})
	feed(t, s, p.headers(1, false, get...))
	s.Shutdown()
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
