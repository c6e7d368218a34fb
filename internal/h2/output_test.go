package h2

import (
	"testing"
)

// TestWindowUpdatesPastMaxOutput: a peer that sends DATA within the
// windows it is owed (a peer can work them out without reading our
// WINDOW_UPDATEs) and never reads makes us hold at most MaxOutput plus a
// WINDOW_UPDATE per level, not one per half window it sends: on a Server
// whose handler consumes a request body, on a Server for DATA on a
// stream it reset (ignored, credited to the connection), and on a Client
// whose handler consumes a response body.
func TestWindowUpdatesPastMaxOutput(t *testing.T) {
	const maxOut, total = 512, 8 << 20
	bound := maxOut + 3*13 // the update that crossed it, and one per level
	// send feeds DATA on stream id to f up to total bytes, each frame as
	// large as the windows allow (stream: the stream's receive window,
	// nil for a stream reset), checking the output after each, and at
	// the end that the WINDOW_UPDATEs held credit what the windows grew
	// by: the ones raised in place too.
	send := func(t *testing.T, c *conn, f func([]byte) ErrCode, id uint32, stream func() int64) {
		t.Helper()
		conn0, st0 := c.connRecv-credited(t, c.out, 0), int64(0)
		if stream != nil {
			st0 = stream() - credited(t, c.out, id)
		}
		defer func() {
			if t.Failed() {
				return
			}
			if got, want := credited(t, c.out, 0), c.connRecv-conn0+total; got != want {
				t.Errorf("connection credited %d, its window grew by %d", got, want)
			}
			if stream != nil {
				if got, want := credited(t, c.out, id), stream()-st0+total; got != want {
					t.Errorf("stream credited %d, its window grew by %d", got, want)
				}
			}
		}()
		payload := make([]byte, MinMaxFrameSize)
		for sent := 0; sent < total; {
			n := min(int64(len(payload)), c.connRecv)
			if stream != nil {
				n = min(n, stream())
			}
			if n <= 0 {
				t.Fatalf("no window after %d bytes", sent)
			}
			if code := f(frame(FrameData, 0, id, payload[:n]...)); code != noConnErr {
				t.Fatalf("after %d bytes: %v", sent, code)
			}
			sent += int(n)
			if len(c.out) > bound {
				t.Fatalf("%d bytes of output held after %d bytes of DATA (MaxOutput %d)", len(c.out), sent, maxOut)
			}
		}
	}
	t.Run("server", func(t *testing.T) {
		s, p := open(t, &recorder{}, &Config{MaxOutput: maxOut})
		feed(t, s, p.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/up"))
		send(t, &s.conn, func(b []byte) ErrCode { return feed(t, s, b) }, 1, func() int64 { return s.find(1).recvWin })
	})
	t.Run("server-reset-stream", func(t *testing.T) {
		s, p := open(t, &recorder{}, &Config{MaxOutput: maxOut, ConnWindowSize: initialWindow})
		feed(t, s, p.headers(1, false, ":method", "GET")) // malformed, reset while the peer may send on
		if !s.reset.has(1) {
			t.Fatal("stream 1 not reset")
		}
		send(t, &s.conn, func(b []byte) ErrCode { return feed(t, s, b) }, 1, nil)
	})
	t.Run("client", func(t *testing.T) {
		c, a, p := openClient(t, &Config{MaxOutput: maxOut})
		id, err := a.start(c, req("/"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Written(len(c.Pending()))
		feed(t, c, p.headers(id, false, ":status", "200"))
		send(t, &c.conn, func(b []byte) ErrCode { return feed(t, c, b) }, id, func() int64 { return c.find(id).recvWin })
		if got := len(a.get(id).body); got != total {
			t.Fatalf("body %d bytes, want %d", got, total)
		}
	})
}

// credited sums the increments of the WINDOW_UPDATEs on stream id in out.
func credited(t *testing.T, out []byte, id uint32) int64 {
	t.Helper()
	var sum int64
	for len(out) > 0 {
		f, n, err := ParseFrame(out, MaxMaxFrameSize)
		if err != nil || n == 0 {
			t.Fatalf("output does not parse: n %d err %v", n, err)
		}
		out = out[n:]
		if f.Type == FrameWindowUpdate && f.StreamID == id {
			sum += int64(f.Increment)
		}
	}
	return sum
}
