package engine

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestEpollBusyPollWaitEndsAtTimer: an epoll-busypoll loop whose socket has
// a NAPI id (over a veth with GRO on) busy polls in its next wait, and the
// kernel's busy loop ends at an event or after busy_poll_usecs, not at the
// wait's timeout: with a BusyPoll of a second, a 20 ms timer set as a
// message came ran a second later. The wait now busy polls for its timeout
// at most, and the timer runs on time; BusyPoll is in effect again once
// the loop waits without a timer.
func TestEpollBusyPollWaitEndsAtTimer(t *testing.T) {
	if err := sys.EpollBusyPollUsable(); err != nil {
		t.Skipf("epoll busy-poll parameters (EPIOCSPARAMS, Linux 6.9): %v", err)
	}
	nsA, nsB, ip := wireTopology(t)
	const (
		busy = time.Second
		wait = 20 * time.Millisecond
	)
	type ran struct {
		after time.Duration
		napi  int
	}
	runs := make(chan ran, 8)
	h := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
		napi, _ := unix.GetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
		t0 := nanotime()
		c.Loop().AfterFunc(wait, func() {
			runs <- ran{time.Duration(nanotime() - t0), napi}
			c.Write([]byte{1})
		})
		return false
	}}
	cfg := testConfig(BackendEpollBusyPoll)
	cfg.BusyPoll = busy
	e := newEngine(t, cfg, h)
	if e.Backend() != BackendEpollBusyPoll {
		t.Fatalf("engine runs %s", e.Backend())
	}
	var (
		ln  *Listener
		err error
		c   net.Conn
	)
	inNetns(t, nsA, func() { ln, err = e.Listen("tcp", ip+":0", nil) })
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	// Each loop's epoll instance, taken on the loop, to read its
	// parameters from here.
	epfds := make([]int, len(e.Loops()))
	for i, l := range e.Loops() {
		got := make(chan int, 1)
		l.Post(func() { got <- l.be.(*epollBackend).epfd })
		epfds[i] = <-got
	}
	inNetns(t, nsB, func() { c, err = net.Dial("tcp", ln.Addr().String()) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			t.Fatal(err)
		}
		r := <-runs
		if r.napi < 257 {
			t.Fatalf("accepted socket over veth (GRO on, TSO off) has NAPI id %d: no busy polling to test", r.napi)
		}
		if r.after > wait+busy/2 {
			t.Fatalf("message %d: a %v timer ran %v after it was set (BusyPoll %v)", i, wait, r.after, busy)
		}
		t.Logf("message %d: a %v timer ran after %v", i, wait, r.after)
	}
	// Once a loop waits without a timer it busy polls for BusyPoll again.
	// Read from here: a function posted to the loop would run after a
	// wait of 0, which leaves the setting as it was.
	for i, epfd := range epfds {
		var p sys.EpollParams
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if p, err = sys.EpollGetParams(epfd); err != nil {
				t.Fatal(err)
			}
			if p.BusyPollUsecs == uint32(busy/time.Microsecond) {
				break
			}
		}
		if p.BusyPollUsecs != uint32(busy/time.Microsecond) {
			t.Errorf("loop %d: busy_poll_usecs %d 5s after its last timer, want %d", i, p.BusyPollUsecs, busy/time.Microsecond)
		}
	}
}
