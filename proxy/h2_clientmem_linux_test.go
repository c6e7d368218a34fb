package proxy

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// onLoops runs f with each loop's state of p on that loop, one loop
// after the other.
func onLoops(p *Proxy, f func(ls *loopState)) {
	for k, el := range p.e.Loops() {
		done := make(chan struct{})
		el.Post(func() {
			f(p.loops[k])
			close(done)
		})
		<-done
	}
}

// h2ClientOut returns the largest output an HTTP/2 client connection of
// p holds for its client: the client's write queue (QueuedMemory) and
// the capacity of what its Server has not handed to it (Pending).
func h2ClientOut(p *Proxy) int {
	most := 0
	onLoops(p, func(ls *loopState) {
		for _, c := range ls.h2conns {
			most = max(most, c.client.QueuedMemory()+cap(c.srv.Pending()))
		}
	})
	return most
}

// TestH2ClientNotReadingRequests: an HTTP/2 client that keeps sending
// requests but reads none of the responses (its windows wide open, as a
// client that means to read later announces them) costs the proxy its
// write queue's mark and what one read of requests adds to it, not every
// response: the proxy stops reading the client while the client's queue
// holds the mark, as it stops reading an upstream. Each request is
// answered whole (the proxy's 400 to a path with dot segments; a 4 KiB
// response from the server), its stream ended, so the client stays
// within the streams it may open. Once the client reads, every request
// sent is answered. (Before: the client was read whatever its queue
// held; the proxy's 400s went to the Server's Pending for as long as the
// client sent, 8.7 MB for 300000 of them, the kernel's buffers holding
// the first few MB; the server's responses were bounded by the streams
// the client may open, each stream's response going to the queue past
// the mark, 1.1 MB.)
func TestH2ClientNotReadingRequests(t *testing.T) {
	body := strings.Repeat("z", 4<<10)
	for _, tc := range []struct {
		name string
		path string
		n    int
		// round: requests sent at once, each round once the last is all
		// answered (the proxy's answers end their streams at once; the
		// server's come after: half the streams the proxy allows)
		round int
	}{
		{"local", "/a/../b", 300000, 1000},
		{"upstream", "/x", 4000, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					w.Write([]byte(body))
				})
				p := startProxy(t, h2cConfig(b, u.addr))
				c := dialReadBuffer(t, p, 16<<10) // (set before the connect: dialReadBuffer says why)
				enc := hpack.NewEncoder()
				block := func() []byte {
					blk := enc.StartBlock(nil)
					for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", tc.path}} {
						blk = enc.AppendField(blk, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
					}
					return blk
				}
				out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: h2.MaxWindow}})...)
				out = h2.AppendWindowUpdate(out, 0, h2.MaxWindow-65535)
				id := uint32(1)
				// The requests read, less one while any stream is open.
				requests := func() uint64 {
					n := p.Totals().Listeners[0].Requests
					if h2Open(p) > 0 {
						n--
					}
					return n
				}
				sent := sendUnread(t, c, tc.n, func() ([]byte, int) {
					for range tc.round {
						out = h2.AppendHeaders(out, id, block(), true, h2.MinMaxFrameSize)
						id += 2
					}
					b := out
					out = nil
					return b, tc.round
				}, requests, func() int { return h2ClientOut(p) })
				// Once the client reads, every request sent is answered.
				c.SetReadBuffer(1 << 20)
				r := &rawH2{t: t, c: c, tmp: make([]byte, 64<<10)}
				c.SetReadDeadline(time.Now().Add(time.Minute))
				for ended := 0; ended < sent; {
					f, err := r.next()
					if err != nil {
						t.Fatalf("%d of %d responses read: %v", ended, sent, err)
					}
					switch {
					case f.Type == h2.FrameRSTStream || f.Type == h2.FrameGoAway:
						t.Fatalf("%d of %d responses read: %v", ended, sent, f.Type)
					case (f.Type == h2.FrameData || f.Type == h2.FrameHeaders) && f.Flags.Has(h2.FlagEndStream):
						ended++
					}
				}
			})
		})
	}
}

// sendUnread sends requests to the proxy on c, whose client reads
// nothing, a round at a time (next returns its bytes, and how many
// requests they are), each once the proxy has read all those before
// (requests), until n are sent or the proxy reads no more, and returns
// how many were sent. It fails t where the output the proxy holds for
// the client (held, read after each round) passes 1 MiB.
func sendUnread(t *testing.T, c net.Conn, n int, next func() ([]byte, int), requests func() uint64, held func() int) int {
	t.Helper()
	most, sent := 0, 0
	for sent < n {
		b, k := next()
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err) // (what the proxy does not read the kernel's buffers hold)
		}
		sent += k
		ok := reached(requests, uint64(sent))
		most = max(most, held())
		if !ok {
			break
		}
	}
	got := requests()
	t.Logf("%d of %d requests read, the proxy held %d bytes of output for the client at most", got, sent, most)
	const bound = 1 << 20
	if most > bound {
		t.Errorf("a client that reads nothing had the proxy hold %d bytes of output for it (%d requests read), want at most %d", most, got, bound)
	}
	return sent
}

// reached waits for count to reach want, as long as it moves: false once
// it stood still for a second short of it.
func reached(count func() uint64, want uint64) bool {
	last, since := count(), time.Now()
	for last < want {
		if time.Since(since) > time.Second {
			return false
		}
		time.Sleep(time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
	return true
}

// h2Open returns the streams open on p's HTTP/2 client connections.
func h2Open(p *Proxy) int {
	n := 0
	onLoops(p, func(ls *loopState) {
		for _, c := range ls.h2conns {
			n += len(c.streams)
		}
	})
	return n
}
