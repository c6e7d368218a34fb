package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestRateLimitDiscardLinger: a client pipelines a GET (its 256 KiB
// response fills the client's small receive buffer) and a POST (a
// 60000-byte body, under discardBytes) a rate limit refuses, and goes on
// sending the body slowly, reading nothing, while the proxy closes it
// mid-body: by request_timeout (the discarded body's bound), or by a
// drain (Shutdown). It then reads
// both responses whole: the close lingers (engine.Conn.CloseLinger),
// reading and dropping the body; a Close left the body's bytes unread in
// the proxy's socket, and the kernel reset the connection, dropping the
// rest of the response and the 429 still in its send buffer (RFC 9112
// section 9.6).
func TestRateLimitDiscardLinger(t *testing.T) {
	for _, how := range []string{"request_timeout", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				big := strings.Repeat("b", 256<<10)
				u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
				cfg := httpConfig(b, u.addr)
				if how == "request_timeout" {
					cfg.Listeners[0].RequestTimeout = Duration(200 * time.Millisecond)
				}
				cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}
				// A drain of 5s, not runProxy's 1s: the client, slowed by a
				// loaded machine, reads the responses after its writes, and
				// a drain ending before it resets the connection as a Close
				// would.
				p, err := New(cfg, &Options{Drain: 5 * time.Second, Logf: func(string, ...any) {}})
				if err != nil {
					t.Fatal(err)
				}
				stop := run(p)
				defer stop()
				// A small receive buffer: the response to the GET (allowed)
				// fills it, and the 429 after it waits in the proxy's socket.
				d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
					return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
				}}
				c, err := d.Dial("tcp", p.Addr("web").String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				chunk := strings.Repeat("x", 1000)
				if _, err := c.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n" + chunk)); err != nil {
					t.Fatal(err)
				}
				stopped := make(chan struct{})
				if how == "shutdown" {
					go func() {
						time.Sleep(200 * time.Millisecond)
						stop()
						close(stopped)
					}()
				}
				// 40 more KB over 800 ms: the close comes at about 200 ms.
				for range 40 {
					time.Sleep(20 * time.Millisecond)
					if _, err := c.Write([]byte(chunk)); err != nil {
						break // (a reset: the reads below fail)
					}
				}
				br := bufio.NewReader(c)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || len(body) != len(big) {
					t.Fatalf("the GET: %d, %d bytes", resp.StatusCode, len(body))
				}
				resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
				if err != nil {
					t.Fatalf("the 429: %v", err)
				}
				resp.Body.Close()
				if resp.StatusCode != 429 {
					t.Fatalf("%d, want 429", resp.StatusCode)
				}
				if how == "shutdown" {
					c.Close()
					<-stopped
				}
			})
		})
	}
}

// TestRateLimitDiscardClosedCounted: a refused request's body read and
// dropped that turns out past discardBytes, or malformed, closes the
// client after its 429, counted (ListenerTotals.DiscardClosed, the
// metric spindle_proxy_listener_discard_closed_total); one read to its
// end is not.
func TestRateLimitDiscardClosedCounted(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].RateLimit = &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}
		p := startProxy(t, cfg)
		if code := getStatus(dial(t, p), "/first"); code != 200 {
			t.Fatalf("the first: %d, want 200", code)
		}
		for _, body := range []string{
			"5\r\nhello\r\n0\r\n\r\n", // read to its end: kept, not counted
			fmt.Sprintf("%x\r\n%s", discardBytes+1, strings.Repeat("x", discardBytes+1)),
			"zz\r\nhello\r\n",
		} {
			c := dial(t, p)
			go io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+body)
			if resp, _ := readResponseFrom(t, c, bufio.NewReader(c), "POST"); resp.StatusCode != 429 {
				t.Fatalf("%d, want 429", resp.StatusCode)
			}
		}
		waitFor(t, "the two closes counted", func() bool { return p.Totals().Listeners[0].DiscardClosed == 2 })
		time.Sleep(50 * time.Millisecond)
		if n := p.Totals().Listeners[0].DiscardClosed; n != 2 {
			t.Fatalf("%d counted, want 2", n)
		}
		if got := scrape(t, p)[`spindle_proxy_listener_discard_closed_total{listener="web"}`]; got != 2 {
			t.Errorf("the metric: %v, want 2", got)
		}
	})
}
