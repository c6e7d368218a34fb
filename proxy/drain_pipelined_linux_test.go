package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestDrainPipelinedHeld: a client whose response ended with its queue
// at the high-water mark (it reads nothing yet), a request pipelined
// behind it held unparsed (nextHead waits for the queue to drain), still
// sending that request's body, is closed by a drain lingering, its queue
// sent first and its bytes read and dropped: it reads the whole response,
// then the end. The drain took it for an idle client (between requests)
// and closed it at once, the body's bytes unread, and the kernel reset
// the connection (RFC 9112 section 9.6): TestRateLimitDiscardLinger/
// shutdown's "unexpected EOF" on epoll under two CPU hogs, where the
// drain came before its POST was parsed.
func TestDrainPipelinedHeld(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const mark = 64 << 10
		var p *Proxy
		var c net.Conn
		// queued is the client's queue's memory (0 before it connects).
		queued := func() (n int) {
			onLoops(p, func(ls *loopState) {
				for _, s := range ls.sessions {
					n += s.client.QueuedMemory()
				}
			})
			return n
		}
		// The server sends the response 8 KiB at a time, each read by the
		// proxy on its own (a buffer in the client's queue, counted whole,
		// once the client's socket is full), until the queue is a buffer
		// short of the mark; then the response's end, which takes it to
		// the mark.
		var sent atomic.Int64
		u := newUpstream(t, rawServer(func(uc net.Conn, req *http.Request, _ int) bool {
			io.WriteString(uc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			piece := fmt.Sprintf("2000\r\n%s\r\n", strings.Repeat("b", 8192))
			for range 64 << 10 {
				io.WriteString(uc, piece)
				sent.Add(8192)
				time.Sleep(2 * time.Millisecond)
				if queued() >= mark-16<<10 {
					break
				}
			}
			io.WriteString(uc, "1\r\nb\r\n0\r\n\r\n")
			sent.Add(1)
			return true
		}))
		cfg := httpConfig(b, u.addr)
		cfg.Engine.WriteHighWater = mark
		var err error
		if p, err = New(cfg, &Options{Drain: 10 * time.Second, Logf: func(string, ...any) {}}); err != nil {
			t.Fatal(err)
		}
		stop := run(p)
		defer stop()
		// A small receive buffer: the response fills the client's socket.
		d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		if c, err = d.Dial("tcp", p.Addr("web").String()); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		chunk := strings.Repeat("x", 1000)
		if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n"+chunk); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the response's end with the proxy, the POST held behind it", func() bool {
			n := 0
			onLoops(p, func(ls *loopState) {
				for _, s := range ls.sessions {
					if s.phase == phIdle && s.hasP {
						n++
					}
				}
			})
			return n == 1
		})
		// More of the body, unread by the proxy, then the drain, and more
		// of it while the drain closes the client.
		if _, err := io.WriteString(c, chunk); err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		for range 10 {
			time.Sleep(20 * time.Millisecond)
			if _, err := io.WriteString(c, chunk); err != nil {
				break // (a reset: the reads below fail)
			}
		}
		br := bufio.NewReader(c)
		resp, body := readResponseWithin(t, c, br, "GET", 30*time.Second)
		if resp.StatusCode != 200 || int64(len(body)) != sent.Load() {
			t.Fatalf("the GET: %d, %d bytes of %d", resp.StatusCode, len(body), sent.Load())
		}
		if n, err := io.Copy(io.Discard, br); n != 0 || err != nil {
			t.Errorf("after the response: %d bytes, %v; want the end", n, err)
		}
		c.Close()
		if err := <-stopped; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
