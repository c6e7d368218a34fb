package h2

import (
	"fmt"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// TestEvenStreamsIdle: an even stream id is one a server would open, and
// neither side opens one (no push), so it stays idle (RFC 9113 5.1.1: a
// new stream closes the idle ones of its opener only) however high the
// client's streams go: DATA, RST_STREAM and WINDOW_UPDATE on it are a
// connection error PROTOCOL_ERROR (5.1), on a Server and a Client. DATA
// was answered with a RST_STREAM (which 6.4 forbids on an idle stream)
// and the others ignored, as on a closed stream.
func TestEvenStreamsIdle(t *testing.T) {
	frames := []struct {
		name string
		in   []byte
	}{
		{"DATA", frame(FrameData, 0, 2, 'x')},
		{"RST_STREAM", frame(FrameRSTStream, 0, 2, u32(uint32(Cancel))...)},
		{"WINDOW_UPDATE", frame(FrameWindowUpdate, 0, 2, u32(1)...)},
		{"WINDOW_UPDATE of 0", frame(FrameWindowUpdate, 0, 2, u32(0)...)},
	}
	for _, tc := range frames {
		t.Run("server "+tc.name, func(t *testing.T) {
			s, p := open(t, &recorder{}, nil)
			feed(t, s, cat(p.headers(1, false, hold...), p.headers(3, false, hold...)))
			code := feed(t, s, tc.in)
			if got := fmt.Sprint(code, outFrames(t, s, p.dec)); got != "PROTOCOL_ERROR [GOAWAY 3 PROTOCOL_ERROR]" {
				t.Fatalf("got %s", got)
			}
		})
		t.Run("client "+tc.name, func(t *testing.T) {
			c, a, p := openClient(t, nil)
			for range 2 {
				a.start(c, req("/"), []byte("body"), nil)
			}
			feed(t, c, p.headers(1, false, ":status", "200"))
			outFrames(t, c, hpack.NewDecoder(4096, 0))
			code := feed(t, c, tc.in)
			if got := fmt.Sprint(code, outFrames(t, c, hpack.NewDecoder(4096, 0))); got != "PROTOCOL_ERROR [GOAWAY 0 PROTOCOL_ERROR]" {
				t.Fatalf("got %s", got)
			}
		})
	}
}
