package hello

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// TestH2WriteRefusedWithRequest: an h2c request in the first read of a
// connection whose writes are refused (as after engine.Conn.Write's slab
// failure): WriteDataTo's lost write resets every stream (OnReset, which
// forgets the stream), and sendBody must not forget it a second time.
func TestH2WriteRefusedWithRequest(t *testing.T) {
	addr, e := startHandler(t, engine.Backends[0], &shutWrites{})
	for _, tc := range []struct {
		name string
		req  []byte
	}{
		{"one GET", h2.AppendHeaders(nil, 1, getBlock, true, h2.MinMaxFrameSize)},
		{"two GETs", h2.AppendHeaders(h2.AppendHeaders(nil, 1, getBlock, true, h2.MinMaxFrameSize), 3, getBlock, true, h2.MinMaxFrameSize)},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			c := dialServer(t, addr, 10*time.Second)
			in := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
			in = append(in, tc.req...)
			if _, err := c.Write(in); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(c); err != nil || len(b) > 0 {
				t.Fatalf("read %q, %v; want the end of the stream", b, err)
			}
			for deadline := time.Now().Add(5 * time.Second); e.Stats().Open != 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the server still holds %d connections 5 s after a write it refused", e.Stats().Open)
				}
			}
		})
	}
}

// shutSecond is the Handler on connections whose writing is shut
// (CloseWrite) before their second OnData.
type shutSecond struct {
	Handler
	mu   sync.Mutex
	seen map[*engine.Conn]int
}

func (h *shutSecond) OnData(c *engine.Conn, b engine.Buffer) bool {
	h.mu.Lock()
	h.seen[c]++
	n := h.seen[c]
	h.mu.Unlock()
	if n == 2 {
		c.CloseWrite()
	}
	return h.Handler.OnData(c, b)
}

// TestH2WriteRefusedBlocked: a response body the stream's window held
// back, whose rest OnWritable sends into a connection that refuses the
// write: the connection ends (no panic), the client sees the first
// response's part, then the end of the stream.
func TestH2WriteRefusedBlocked(t *testing.T) {
	addr, e := startHandler(t, engine.Backends[0], &shutSecond{seen: map[*engine.Conn]int{}})
	k := dialH2(t, addr, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: 5}})
	k.send(h2.AppendHeaders(nil, 1, getBlock, true, h2.MinMaxFrameSize))
	if f := k.until(h2.FrameData); f.StreamID != 1 || string(f.Data) != hello[:5] {
		t.Fatalf("stream %d: DATA %q, want %q", f.StreamID, f.Data, hello[:5])
	}
	k.send(h2.AppendWindowUpdate(nil, 1, 100))
	k.eof()
	for deadline := time.Now().Add(5 * time.Second); e.Stats().Open != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server still holds %d connections 5 s after a write it refused", e.Stats().Open)
		}
	}
}

// TestH2HeadOverMaxHeader: MaxHeader's doc says a request head larger
// than it gets 431; on HTTP/1.1 it does, on HTTP/2 (h2.Config's default
// MaxHeaderListSize, 64 KiB) a 20 KB head was answered 200.
func TestH2HeadOverMaxHeader(t *testing.T) {
	addr, _ := startServer(t, engine.Backends[0])
	k := dialH2(t, addr, nil)
	v := strings.Repeat("a", 20000)
	block := append([]byte{}, getBlock...)
	block = append(block, 0x00, 0x01, 'x', 0x7f) // literal, new name "x", value length 127+
	for n := len(v) - 127; ; n >>= 7 {
		if n < 128 {
			block = append(block, byte(n))
			break
		}
		block = append(block, byte(n&0x7f|0x80))
	}
	block = append(block, v...)
	k.send(h2.AppendHeaders(nil, 1, block, true, h2.MinMaxFrameSize))
	if status, _ := k.response(1); status != 431 {
		t.Errorf("a %d-byte head over HTTP/2: %d, want 431 as over HTTP/1.1 (MaxHeader %d)", len(block), status, MaxHeader)
	}
}
