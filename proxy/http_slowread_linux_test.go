package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestHTTPSlowReaderTimeout: while a response arrives, a client that reads, if
// slowly, counts as activity for response_timeout: the server's reading
// is paused while the client's queue is full, so no read from the server
// comes for longer than the timeout, and the client was reset although
// it read. It gets the whole response.
func TestHTTPSlowReaderTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		// Its time is the reader's pauses, and each backend has its proxy
		// and server: they run together.
		t.Parallel()
		const size = 4 << 20
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.Write(make([]byte, size))
		})
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(300 * time.Millisecond)
		p := startProxy(t, cfg)
		c := dialSmall(t, p)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
		if err != nil {
			t.Fatal(err)
		}
		// 8 KiB every 50 ms: 160 KiB/s, half the queue's mark (256 KiB of
		// buffers) in 0.8 s, well past the timeout.
		n, buf := 0, make([]byte, 32<<10)
		t0 := time.Now()
		for {
			m, err := io.ReadFull(resp.Body, buf)
			n += m
			if err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n != size {
			t.Errorf("a slow reader got %d bytes of %d in %v", n, size, time.Since(t0))
		}
	})
}
