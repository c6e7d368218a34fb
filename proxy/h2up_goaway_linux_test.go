package proxy

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// heldApp answers each request 200 "ok" at its end but, on the
// connection that holds (hold), the first, whose id it keeps (held) for
// the test to end (heldH2Up).
type heldApp struct {
	trlApp
	hold bool
	held uint32
}

func (a *heldApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if a.hold && a.held == 0 {
		a.held = id
		return
	}
	if end {
		a.answer(s, id, "ok")
	}
}

// goAway returns a graceful GOAWAY naming the held stream.
func (a *heldApp) goAway(*h2.Server) []byte {
	return h2.AppendGoAway(nil, a.held, h2.NoError, nil)
}

// end answers the held stream "held".
func (a *heldApp) end(s *h2.Server) []byte {
	a.answer(s, a.held, "held")
	return nil
}

// goAwayWithEnd returns goAway's GOAWAY followed by end's frames, for one
// write.
func (a *heldApp) goAwayWithEnd(s *h2.Server) []byte {
	out := a.goAway(s)
	a.end(s)
	out = append(out, s.Pending()...)
	s.Written(len(s.Pending()))
	return out
}

// serveH2Told serves HTTP/2 on c with h under cfg until c or the Server
// ends, as serveH2 does, and runs each function told sends on the
// Server's goroutine between reads, writing the frames it returns after
// the Server's output.
func serveH2Told(c net.Conn, h h2.Handler, cfg *h2.Config, told <-chan func(*h2.Server) []byte) {
	s := h2.NewServer(h, cfg)
	reads, done := make(chan []byte), make(chan struct{})
	defer close(done)
	go func() {
		defer close(reads)
		for {
			buf := make([]byte, 64<<10)
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			select {
			case reads <- buf[:n]:
			case <-done:
				return
			}
		}
	}()
	var tail, extra []byte
	for !s.Done() {
		if writePending(c, s) != nil {
			return
		}
		if len(extra) > 0 {
			if _, err := c.Write(extra); err != nil {
				return
			}
			extra = nil
		}
		select {
		case b, ok := <-reads:
			if !ok || s.FeedTail(&tail, b) != nil {
				s.Close()
				c.Write(s.Pending())
				return
			}
		case f := <-told:
			extra = f(s)
		}
	}
}

// heldH2Up starts an HTTP/2 server taking one stream at a time
// (MAX_CONCURRENT_STREAMS 1) whose first connection holds its first
// stream (heldApp); tell runs f on that connection's goroutine with its
// app and writes the frames f returns.
func heldH2Up(t *testing.T) (up *upstream, tell func(f func(*heldApp, *h2.Server) []byte)) {
	var first atomic.Bool
	first.Store(true)
	told := make(chan func(*h2.Server) []byte)
	var holder *heldApp // (set and read on the first connection's goroutine)
	up = newUpstream(t, func(c net.Conn) {
		a := &heldApp{hold: first.CompareAndSwap(true, false)}
		var ch chan func(*h2.Server) []byte
		if a.hold {
			holder, ch = a, told
		}
		serveH2Told(c, a, &h2.Config{MaxConcurrentStreams: 1}, ch)
	})
	return up, func(f func(*heldApp, *h2.Server) []byte) {
		told <- func(s *h2.Server) []byte { return f(holder, s) }
	}
}

// TestH2UpGoAwayServesWaitingRequest: a request waiting for a stream (the
// server takes one at a time, h2_max_connections 1, its one stream held)
// is served on a new connection where the server retires the connection
// with a graceful GOAWAY naming the stream it holds, and ends that stream
// later or in the same write, over HTTP/2 and HTTP/1.1 clients alike, in
// a drain too (begun before the GOAWAY, which then ends once the
// requests did); the stream held finishes. The GOAWAY and the end read
// at once closed the connection as finished (h2.Client.Done) with no
// connection dialed in its place, and a drain dialed none at all
// (upH2.replace): the waiting request failed over, and with no other
// server got 502 SC.
func TestH2UpGoAwayServesWaitingRequest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, tc := range []struct {
			name     string
			h2c      bool
			together bool // the GOAWAY and the held stream's end in one write
			drain    bool // the drain begins before the GOAWAY
		}{
			{"h2/goaway-then-end", true, false, false},
			{"h2/goaway-with-end", true, true, false},
			{"http1/goaway-then-end", false, false, false},
			{"http1/goaway-with-end", false, true, false},
			{"h2/drain/goaway-then-end", true, false, true},
			{"h2/drain/goaway-with-end", true, true, true},
			{"http1/drain/goaway-then-end", false, false, true},
			{"http1/drain/goaway-with-end", false, true, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				up, tell := heldH2Up(t)
				cfg := h2cPoolConfig(b, up.addr)
				cfg.Listeners[0].H2C = tc.h2c
				cfg.Pools[0].H2MaxConnections = 1
				p, stop, path := runLogged(t, cfg, 20*time.Second)
				t.Cleanup(func() {
					if err := stop(); err != nil {
						t.Error(err)
					}
				})
				c, base := client(t, p)
				if tc.h2c {
					c, base = h2Client(t, p)
				}
				held := getAsync(c, base+"/held")
				waitFor(t, "the held stream at the server", func() bool { return serverTotals(p, up.addr).H2Streams == 1 })
				waiting := getAsync(c, base+"/x")
				waitFor(t, "the second request waiting", func() bool { return serverTotals(p, up.addr).Active == 2 })
				done := make(chan error, 1)
				if tc.drain {
					go func() { done <- stop() }()
					time.Sleep(100 * time.Millisecond) // (the drain under way)
				}
				if tc.together {
					tell((*heldApp).goAwayWithEnd)
				} else {
					tell((*heldApp).goAway)
					waitFor(t, "the GOAWAY", func() bool { return serverTotals(p, up.addr).H2GoAways == 1 })
					tell((*heldApp).end)
				}
				if got := <-held; got != "200 held" {
					t.Errorf("the held stream: %q, want 200 held", got)
				}
				if got := <-waiting; got != "200 ok" {
					t.Errorf("the waiting request: %q, want 200 ok", got)
				}
				checkFields(t, waitLine(t, path, "the waiting request's line", func(m map[string]any) bool { return field(m, "target") == "/x" }),
					map[string]string{"status": "200", "term": "-"})
				if n := up.accepted.Load(); n != 2 {
					t.Errorf("%d connections to the server, want 2", n)
				}
				if !tc.drain {
					return
				}
				c.CloseIdleConnections()
				runEnds(t, done, "the requests ended")
			})
		}
	})
}
