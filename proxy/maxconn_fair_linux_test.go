package proxy

import (
	"strings"
	"testing"
	"time"

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

// TestMaxConnsKeptAliveGoesToOldestWaiter: two loops, max_conns 1; /ka
// holds the slot on loop 1 over a kept-alive connection; /w0 waits on
// loop 0, then /w1 on loop 1. /ka's answer ends its exchange on loop 1,
// whose connection could serve /w1 at once; /w0 waited longer, so the
// connection closes and its slot goes to loop 0: /w0 reaches the server
// and /w1 after it. Pooled for /w1, the slot would stay on loop 1 under
// a steady keep-alive load, /w0 waiting out queue_timeout.
func TestMaxConnsKeptAliveGoesToOldestWaiter(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u, at, release := newHoldUpstream(t, "/ka", "/w0", "/w1")
		p := startTwoLoops(t, b, 1, u.addr)
		ka, w0, w1 := onLoop(t, p, 1), onLoop(t, p, 0), onLoop(t, p, 1)
		sendGet(t, ka, "/ka")
		waitFor(t, "/ka at the server", at("/ka"))
		sendGet(t, w0, "/w0")
		queued(t, p, 1)
		sendGet(t, w1, "/w1")
		queued(t, p, 2)
		close(release["/ka"])
		if !within(2*time.Second, at("/w0")) {
			t.Errorf("/w0 not at the server (/w1 at it: %v)", at("/w1")())
		}
		close(release["/w0"])
		close(release["/w1"])
		allOK(t, ka, w0, w1)
	})
}

// TestMaxConnsKeptAliveStaysForOwnOldest: as above but /w1 waits on loop
// 1 before /w0 on loop 0: /ka's kept-alive connection carries /w1 next,
// reused on its loop (one connection to the server, one request reused).
func TestMaxConnsKeptAliveStaysForOwnOldest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u, at, release := newHoldUpstream(t, "/ka", "/w0", "/w1")
		p := startTwoLoops(t, b, 1, u.addr)
		ka, w0, w1 := onLoop(t, p, 1), onLoop(t, p, 0), onLoop(t, p, 1)
		sendGet(t, ka, "/ka")
		waitFor(t, "/ka at the server", at("/ka"))
		queueOn2(t, p, w0, w1)
		close(release["/ka"])
		waitFor(t, "/w1 at the server", at("/w1"))
		if n, st := u.accepted.Load(), serverTotals(p, u.addr); n != 1 || st.ReusedRequests != 1 || at("/w0")() {
			t.Errorf("server connections %d, reused requests %d, /w0 at the server %v: want 1, 1, false", n, st.ReusedRequests, at("/w0")())
		}
		close(release["/w1"])
		close(release["/w0"])
		allOK(t, ka, w0, w1)
	})
}
