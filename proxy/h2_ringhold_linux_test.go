package proxy

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// TestH2WindowClosedRingHold: HTTP/2 clients whose stream windows stay
// closed (SETTINGS_INITIAL_WINDOW_SIZE 0) do not take the loop's receive
// ring from its other connections. Six clients of one loop each GET 100
// responses of 8 KiB from an HTTP/1.1 pool: 600 streams, each with its
// response's body waiting for a window, more than the ring's 512
// buffers. While they wait, an HTTP/1.1 client's GET is answered; then
// the clients open their windows and each gets its 100 bodies whole.
// (Before: each such stream held the receive buffer its body came in
// until the window opened, and with 496 of the 512 held the new
// client's GET was never read on the uring backends.)
func TestH2WindowClosedRingHold(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const clients, streams, size = 6, 100, 8 << 10
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		var served atomic.Int64
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.Write(body)
			if r.URL.Path == "/blocked" {
				served.Add(1)
			}
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		rs := make([]*rawH2, clients)
		for i := range rs {
			c := dial(t, p)
			enc := hpack.NewEncoder()
			out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: 0}})...)
			for k := range streams {
				blk := enc.StartBlock(nil)
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/blocked"}} {
					blk = enc.AppendField(blk, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
				}
				out = h2.AppendHeaders(out, uint32(2*k+1), blk, true, h2.MinMaxFrameSize)
			}
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			rs[i] = &rawH2{t: t, c: c, tmp: make([]byte, 64<<10)}
		}
		waitFor(t, "the server to answer every blocked GET", func() bool { return served.Load() == clients*streams })

		newClientGet(t, p, "/new", string(body), fmt.Sprintf("beside %d streams with closed windows", clients*streams))

		// The blocked clients are still there, every response head sent,
		// no data; once their windows open each body comes whole.
		for i, r := range rs {
			c := r.c.(*net.TCPConn)
			c.SetDeadline(time.Now().Add(20 * time.Second))
			heads := 0
			for heads < streams {
				f, err := r.next()
				if err != nil {
					t.Fatalf("client %d: %d response heads read: %v", i, heads, err)
				}
				switch f.Type {
				case h2.FrameHeaders:
					heads++
				case h2.FrameData, h2.FrameRSTStream, h2.FrameGoAway:
					t.Fatalf("client %d: %v on stream %d with its window closed", i, f.Type, f.StreamID)
				}
			}
			out := h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: 1 << 20}})
			out = h2.AppendWindowUpdate(out, 0, streams*size)
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			bodies := make(map[uint32][]byte)
			for ended := 0; ended < streams; {
				f, err := r.next()
				if err != nil {
					t.Fatalf("client %d: %d of %d bodies read: %v", i, ended, streams, err)
				}
				switch f.Type {
				case h2.FrameData:
					bodies[f.StreamID] = append(bodies[f.StreamID], f.Data...)
					if f.Flags.Has(h2.FlagEndStream) {
						ended++
					}
				case h2.FrameHeaders, h2.FrameRSTStream, h2.FrameGoAway:
					t.Fatalf("client %d: %v on stream %d", i, f.Type, f.StreamID)
				}
			}
			for id, got := range bodies {
				if !bytes.Equal(got, body) {
					t.Errorf("client %d stream %d: %d bytes of body not the server's %d", i, id, len(got), size)
				}
			}
		}
	})
}
