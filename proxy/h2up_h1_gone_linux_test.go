package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestH2UpH1ClientGoneCancelsStream: an HTTP/1.1 client that closes its
// connection while its response from an h2c server is still coming (a
// stream of chunks, the first passed on, the request whole) gets the
// upstream stream reset: the server's request context ends. Before, the proxy let
// go of the stream without RST_STREAM once the response head had gone to
// the client, and the server went on producing the response for nobody,
// the stream held among its concurrent streams until it ended.
func TestH2UpH1ClientGoneCancelsStream(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		canceled := make(chan struct{}, 1)
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
				io.WriteString(w, "first")
				rc.Flush()
				select {
				case <-r.Context().Done():
					canceled <- struct{}{}
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c := dial(t, p)
		if _, err := io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 5)
		if _, err := io.ReadFull(resp.Body, chunk); err != nil || string(chunk) != "first" {
			t.Fatalf("the response's first bytes: %q %v", chunk, err)
		}
		c.Close()
		select {
		case <-canceled:
		case <-time.After(5 * time.Second):
			t.Fatal("the server's stream was not reset when the client went")
		}
	})
}
