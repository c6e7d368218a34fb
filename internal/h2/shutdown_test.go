package h2

import "testing"

// The first phase of a Server's graceful shutdown: GOAWAY naming 2^31-1,
// then the PING whose ACK starts the second (its data: "shutdown").
var firstGoAway = []string{"GOAWAY 2147483647 NO_ERROR", "PING ack=false 73687574646f776e"}

// TestServerShutdownServesCrossingRequest: Shutdown sends GOAWAY naming
// 2^31-1 and a PING (RFC 9113 6.8); a request the client sent before it
// saw them is served, not ignored; the PING's ACK, not another, brings
// the final GOAWAY naming that request's stream, and a stream opened
// after the final GOAWAY is ignored.
func TestServerShutdownServesCrossingRequest(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, nil)
	feed(t, s, p.headers(1, false, hold...))
	s.Shutdown()
	if got := outFrames(t, s, p.dec); !equal(got, firstGoAway) {
		t.Fatalf("out %q, want %q", got, firstGoAway)
	}
	feed(t, s, p.headers(3, true, get...)) // crossed the first GOAWAY
	if err := s.WriteHeaders(3, 204, nil, true); err != nil {
		t.Fatalf("answering the request that crossed the first GOAWAY: %v", err)
	}
	feed(t, s, frame(FramePing, FlagAck, 0, make([]byte, 8)...)) // not our PING's
	if got := outFrames(t, s, p.dec); !equal(got, []string{"HEADERS 3 :status=204 end"}) {
		t.Fatalf("out %q before the ACK", got)
	}
	feed(t, s, frame(FramePing, FlagAck, 0, []byte("shutdown")...))
	if got := outFrames(t, s, p.dec); !equal(got, []string{"GOAWAY 3 NO_ERROR"}) {
		t.Fatalf("out %q after the ACK", got)
	}
	feed(t, s, p.headers(5, true, get...)) // crossed the final GOAWAY: ignored
	if s.Done() {
		t.Fatal("done with stream 1 open")
	}
	s.Reset(1, NoError)
	if !s.Done() {
		t.Fatal("not done once stream 1 ended")
	}
	want := []string{"req 1 GET http x /hold cl=-1", "req 3 GET http x / cl=-1 end"}
	if !equal(h.events, want) {
		t.Fatalf("events %q, want %q", h.events, want)
	}
}

// TestServerShutdownNoPingAck: a client that does not answer the PING of
// Shutdown keeps the connection open (not Done, though no stream is
// open) and its requests are served, until the caller's bound sends the
// final GOAWAY (ShutdownNow), which names the last stream and ends it.
func TestServerShutdownNoPingAck(t *testing.T) {
	h := &recorder{}
	s, p := open(t, h, nil)
	s.Shutdown()
	if got := outFrames(t, s, p.dec); !equal(got, firstGoAway) {
		t.Fatalf("out %q, want %q", got, firstGoAway)
	}
	feed(t, s, p.headers(1, true, get...))
	s.WriteHeaders(1, 204, nil, true)
	if s.Done() {
		t.Fatal("done before the final GOAWAY")
	}
	s.ShutdownNow()
	if got := outFrames(t, s, p.dec); !equal(got, []string{"HEADERS 1 :status=204 end", "GOAWAY 1 NO_ERROR"}) {
		t.Fatalf("out %q", got)
	}
	if !s.Done() {
		t.Fatal("not done after the final GOAWAY")
	}
	s.Shutdown() // nothing more: the shutdown is over
	feed(t, s, frame(FramePing, FlagAck, 0, []byte("shutdown")...))
	if got := outFrames(t, s, p.dec); len(got) != 0 {
		t.Fatalf("out %q after the final GOAWAY", got)
	}
}
