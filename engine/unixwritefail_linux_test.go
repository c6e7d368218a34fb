package engine

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestUnixPeerCloseEndsWriter: a Unix stream connection whose peer closes
// with the connection's writes unread (EPIPE on write, no reset: the end
// of the stream on read) ends at once, with what the peer sent before
// delivered and the peer's end as its error (the write's EPIPE or the
// reset of the peer's unread data), whether reading is paused (nothing
// received: nothing to keep it for) or not, on every backend.
func TestUnixPeerCloseEndsWriter(t *testing.T) {
	for _, b := range testBackends {
		for _, tc := range []struct {
			name   string
			pause  bool
			answer string
		}{
			{"answer", false, "bye"},
			{"silent", false, ""},
			{"paused", true, ""},
		} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
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
						if tc.pause {
							c.PauseRead()
						}
						opened <- c
					},
					data: func(c *Conn, b Buffer) bool {
						got = append(got, b.Bytes()...)
						return false
					},
					closed: func(c *Conn, err error) { ended <- end{string(got), err} },
				}
				cfg := testConfig(b)
				cfg.ReadPastHighWater = true
				cfg.CloseTimeout = time.Minute
				name := filepath.Join(t.TempDir(), "s")
				startListening(t, cfg, h, "unix", name)
				nc, err := net.Dial("unix", name)
				if err != nil {
					t.Fatal(err)
				}
				c := awaitConn(t, opened, "OnOpen not called")
				waitFor(t, "the connection's writes to block", func() bool {
					queued := make(chan int, 1)
					c.Loop().Post(func() { queued <- c.Buffered() })
					return <-queued > 0
				})
				if tc.answer != "" {
					if _, err := nc.Write([]byte(tc.answer)); err != nil {
						t.Fatal(err)
					}
				}
				nc.Close()
				start := time.Now()
				var e end
				select {
				case e = <-ended:
				case <-time.After(10 * time.Second):
					t.Fatal("the connection did not end")
				}
				if d := time.Since(start); e.got != tc.answer || !isWriteReset(e.err) || d > 5*time.Second {
					t.Errorf("ended (%v) %v after the peer's close with %q delivered, want at once, %q and the peer's end", e.err, d, e.got, tc.answer)
				}
			})
		}
	}
}
