package engine

import (
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteFailureDeliversWhatCameBefore: a peer that answers while the
// connection's writes to it are blocked (it reads none of them) and then
// resets the connection, its answer and reset both received before the
// loop looks, gets its answer delivered (OnData) before the connection
// ends, on every backend, as an HTTP server's early 413 to an upload it
// stopped reading must reach the proxy.
//
// The epoll backend flushed the queue before reading the same event: the
// write met the reset and closed the connection with the answer unread
// in its socket (the proxy's client got 502 for the server's 413). The
// uring backends lost it the same way: the SEND's ECONNRESET was reaped
// before the receive's data, and the abort dropped that. The loop is held
// (Post) until the kernel has taken the reset (TCP_INFO's state), so that
// the answer and the reset come in one wait.
func TestWriteFailureDeliversWhatCameBefore(t *testing.T) {
	const answer = "HTTP/1.1 413 Content Too Large\r\n\r\n"
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			type end struct {
				got string
				err error
			}
			opened := make(chan *Conn, 1)
			ended := make(chan end, 1)
			var got []byte // loop goroutine
			h := &BaseHandlerFunc{
				open: func(c *Conn) {
					c.Write(make([]byte, 16<<20)) // more than the socket buffers take
					opened <- c
				},
				data: func(c *Conn, b Buffer) bool {
					got = append(got, b.Bytes()...)
					return false
				},
				closed: func(c *Conn, err error) { ended <- end{string(got), err} },
			}
			cfg := testConfig(b)
			cfg.ReadPastHighWater = true // as the proxy: the full side is read
			_, addr := startEngine(t, cfg, h)
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			var c *Conn
			select {
			case c = <-opened:
			case <-time.After(10 * time.Second):
				t.Fatal("OnOpen not called")
			}
			queued := make(chan int, 1)
			var fd int
			waitFor(t, "the connection's writes to block", func() bool {
				c.Loop().Post(func() { fd = c.Fd(); queued <- c.Buffered() })
				return <-queued > 0
			})
			release := make(chan struct{})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) }) // a failure before: Shutdown waits for the loop
			held := make(chan struct{})
			c.Loop().Post(func() { close(held); <-release })
			<-held // before the answer: the loop could end c first, its fd closed
			if _, err := nc.Write([]byte(answer)); err != nil {
				t.Fatal(err)
			}
			nc.(*net.TCPConn).SetLinger(0)
			nc.Close()
			waitFor(t, "the reset to reach the loop's socket", func() bool {
				ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
				return err == nil && ti.State == unix.BPF_TCP_CLOSE
			})
			releaseOnce.Do(func() { close(release) })
			select {
			case e := <-ended:
				if e.got != answer {
					t.Errorf("the connection ended (%v) with %q delivered, want the peer's answer %q", e.err, e.got, answer)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the reset connection did not end")
			}
		})
	}
}
