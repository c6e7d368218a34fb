package engine

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestSweepUntimedWaits: on the uring backends the sweep's deadline
// (Config.CloseTimeout's, on by default) is a kernel timeout armed once per
// sweep (wakeAt), not a timeout on every wait: 200 echoes, each reply's
// queue listed for the sweep while the loop waits, make no wait with a
// timeout. (Before, every one of those waits had one: a clock read, the
// timeout's argument and an hrtimer per io_uring_enter.) That the kernel
// timeout wakes an idle loop for its sweep, TestWriteTimeout and
// TestCloseTimeout show: nothing else wakes theirs.
func TestSweepUntimedWaits(t *testing.T) {
	for _, b := range testBackends {
		if !strings.HasPrefix(string(b), "uring") {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.CloseTimeout = 40 * time.Millisecond // a sweep every 10 ms
			e, addr := startEngine(t, cfg, &echoHandler{})
			l := e.Loops()[0]
			c := mustDial(t, "tcp", addr)
			msg, got := []byte("ping"), make([]byte, 4)
			for range 200 {
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatal(err)
				}
			}
			res := make(chan [2]int)
			l.Post(func() { res <- [2]int{l.be.(*uringBackend).timedWaits, int(l.Stats().Waits)} })
			r := <-res
			if r[0] != 0 {
				t.Errorf("%d of the loop's %d waits had a timeout, want none", r[0], r[1])
			}
		})
	}
}
