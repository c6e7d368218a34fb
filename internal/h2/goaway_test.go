package h2

import "testing"

// TestServerGoAwayLastNeverRises: a connection error after the final
// GOAWAY of a shutdown sends another with the last stream id of the
// final one, not that of a stream the client opened after it, which was
// ignored and not processed (RFC 9113 6.8: the last stream id must not
// increase, the client may already have sent that request again
// elsewhere).
func TestServerGoAwayLastNeverRises(t *testing.T) {
	s, p := open(t, &recorder{}, nil)
	feed(t, s, p.headers(1, false, hold...))
	s.Shutdown()
	feed(t, s, frame(FramePing, FlagAck, 0, []byte("shutdown")...))
	feed(t, s, p.headers(3, true, get...)) // crossed the final GOAWAY: ignored
	if code := feed(t, s, frame(FrameWindowUpdate, 0, 0, u32(0)...)); code != ProtocolError {
		t.Fatalf("code %v", code)
	}
	want := kvs(firstGoAway, "GOAWAY 1 NO_ERROR", "GOAWAY 1 PROTOCOL_ERROR")
	if got := outFrames(t, s, p.dec); !equal(got, want) {
		t.Fatalf("out %q, want %q", got, want)
	}
}
