package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// maxStreamCap returns the largest capacity of the buffer of(st) among
// p's HTTP/2 client streams, read on their loops.
func maxStreamCap(p *Proxy, of func(st *h2stream) []byte) int {
	most := 0
	for k, el := range p.e.Loops() {
		done := make(chan struct{})
		el.Post(func() {
			for _, c := range p.loops[k].h2conns {
				for _, st := range c.streams {
					most = max(most, cap(of(st)))
				}
			}
			close(done)
		})
		<-done
	}
	return most
}

// backlog and heldBody are the response backlog to an HTTP/2 client from
// an h2c pool, and the request body held for its server.
func backlog(st *h2stream) []byte  { return st.u2.rbuf }
func heldBody(st *h2stream) []byte { return st.body }

// TestH2UpBacklogBounded: an HTTP/2 client that reads a large response
// from an h2c pool slowly (a small stream window, so the proxy holds
// what the upstream sent and the client's window did not take) costs
// the proxy a backlog bounded by the upstream stream window (64 KiB), a
// frame and append's growth, not by the response: the backlog's sent
// front is reclaimed as it grows. (Before: the front stayed until the
// backlog emptied, which a client slower than the upstream never let it
// do, so the backlog grew with the response: 2 MiB here.)
func TestH2UpBacklogBounded(t *testing.T) {
	const size = 2 << 20
	forBackends(t, func(t *testing.T, b engine.Backend) {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(body)
		}), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		c.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 4 << 10}
		resp, err := c.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got bytes.Buffer
		most := 0
		buf := make([]byte, 4<<10)
		for {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if got.Len()%(64<<10) < n {
				most = max(most, maxStreamCap(p, backlog))
				time.Sleep(time.Millisecond) // slower than the upstream
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got.Bytes(), body) {
			t.Fatalf("got %d bytes, not the %d sent", got.Len(), len(body))
		}
		const bound = 256 << 10
		t.Logf("largest backlog capacity: %d bytes", most)
		if most > bound {
			t.Errorf("the stream's response backlog grew to %d bytes of capacity for a %d-byte response, want at most %d", most, size, bound)
		}
	})
}

// TestH2UpBodyBacklogBounded: the request side of
// TestH2UpBacklogBounded: an HTTP/2 client's large upload to an h2c
// server that reads it slower than the client sends costs the proxy a
// held body bounded by the client's stream window (h2_initial_window), a
// frame and append's growth, not by the body. (Before: the body's sent
// front stayed until what was held emptied, which an upstream slower
// than its client never let it do: 4 MiB here.)
func TestH2UpBodyBacklogBounded(t *testing.T) {
	const size = 4 << 20
	forBackends(t, func(t *testing.T, b engine.Backend) {
		p := new(Proxy)
		var most int
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, 4<<10)
			n := 0
			for {
				k, err := r.Body.Read(buf)
				n += k
				if n%(64<<10) < k {
					most = max(most, maxStreamCap(p, heldBody))
					time.Sleep(time.Millisecond) // slower than the client
				}
				if err != nil {
					break
				}
			}
			fmt.Fprint(w, n)
		}), func(s *http.Server) {
			// A small stream window: the server takes the body as it reads.
			s.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10}
		})
		p = startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		resp, err := c.Post(base+"/", "application/octet-stream", bytes.NewReader(make([]byte, size)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != fmt.Sprint(size) {
			t.Fatalf("the server read %q bytes, not the %d sent", got, size)
		}
		const bound = 512 << 10
		t.Logf("largest held body capacity: %d bytes", most)
		if most > bound {
			t.Errorf("the stream's held request body grew to %d bytes of capacity for a %d-byte body, want at most %d", most, size, bound)
		}
	})
}
