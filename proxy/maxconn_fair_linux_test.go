package proxy

import (
	"strings"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestMaxConnsSlotGoesToOldestWaiter: two loops, max_conns 1; /w0 waits
// on loop 0, then /w1 on loop 1; the slot the request before them held
// is let go of on loop 1 (its server closes the connection), and goes to
// /w0, which waited longer, not to /w1 for being on the loop that let it
// go: a loop whose clients hold the slots would otherwise keep them while
// it has waiters, the other loop's waiting out queue_timeout.
func TestMaxConnsSlotGoesToOldestWaiter(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		cs := newCapServer(t, false, 0, true)
		p := startTwoLoops(t, b, 1, cs.addr)
		h, w0, w1 := onLoop(t, p, 1), onLoop(t, p, 0), onLoop(t, p, 1)
		sendGet(t, h, "/h")
		waitFor(t, "/h at the server", func() bool { return len(cs.got()) == 1 })
		sendGet(t, w0, "/w0")
		queued(t, p, 1)
		sendGet(t, w1, "/w1")
		queued(t, p, 2)
		for range 3 {
			cs.hold <- struct{}{}
		}
		allOK(t, h, w0, w1)
		if got, want := strings.Join(cs.got(), " "), "/h /w0 /w1"; got != want {
			t.Errorf("the server got %s, want %s", got, want)
		}
	})
}
