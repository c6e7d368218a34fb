package h2

import "testing"

// TestClientOwnPingAckFree: the server's answer to our PING costs the
// control budget nothing, also when the server's own frames have spent
// it to the last: a keepalive or liveness PING of ours must not be what
// ends a connection with ENHANCE_YOUR_CALM. The server's next control
// frame past the budget still does.
func TestClientOwnPingAckFree(t *testing.T) {
	c, a, p := openClient(t, &Config{MaxControlFrames: 3})
	// Spend the budget: the handshake's SETTINGS and ACK, then one PING.
	if e := feed(t, c, frame(FramePing, 0, 0, make([]byte, 8)...)); e != noConnErr {
		t.Fatalf("server PING within the budget: %v", e)
	}
	outFrames(t, c, p.dec)
	c.Ping([8]byte{7})
	outFrames(t, c, p.dec)
	if e := feed(t, c, frame(FramePing, FlagAck, 0, 7, 0, 0, 0, 0, 0, 0, 0)); e != noConnErr {
		t.Fatalf("ACK of our PING: connection error %v", e)
	}
	if len(a.pings) != 1 || a.pings[0] != [8]byte{7} {
		t.Fatalf("ping acks %v", a.pings)
	}
	if e := feed(t, c, frame(FramePing, 0, 0, make([]byte, 8)...)); e != EnhanceYourCalm {
		t.Fatalf("server PING past the budget: %v", e)
	}
}
