package uring

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

// The user_data of the requests in TestMultishotRecvAfterReset.
const (
	quirkRecv   = 1 // the multishot receive
	quirkOnce   = 2 // the single-shot receive after it
	quirkCancel = 3
	quirkSend   = 4 // the server's SEND that meets the reset
)

// quirkTail is what the peer sends before its end: 48 buffers of 1 KiB,
// more than one issue of a multishot receive takes (the kernel's
// MULTISHOT_MAX_RETRY, 32 retries after the first receive, io_uring/net.c),
// so that the last of it is taken by a run of the receive's poll task work.
const (
	quirkBufSize = 1 << 10
	quirkTail    = 48 * quirkBufSize
)

// TestMultishotRecvAfterReset reproduces with io_uring alone the kernel
// behaviour engine's recvOnce works around (docs/KERNEL-QUIRKS.md): a
// multishot receive armed on a TCP socket after the peer's reset came, with
// more queued than one issue takes, posts the data and then nothing: the
// receive that empties the socket finds the inquiry hint 0 (tcp_inq_hint
// counts a FIN, not a reset) and waits for a wake-up the reset gave before
// the receive existed. It logs whether the running kernel does so (a kernel
// that ends the receive does not fail the test: the workaround stays
// correct there), and asserts what the engine relies on: that a single-shot
// receive armed on the socket then completes at once, with 0 or
// -ECONNRESET. It fails where its own setup did not come about: the reset
// not seen, the tail not queued or not taken. The same sequence ended by a
// FIN must end the multishot receive (res 0), and a receive armed before the
// tail and the reset arrive is logged for comparison.
func TestMultishotRecvAfterReset(t *testing.T) {
	needFeatures(t, FeatMultishotRecv)
	deferred := Config{Entries: 16, CQEntries: 256, SingleIssuer: true, DeferTaskrun: true}
	plain := Config{Entries: 16, CQEntries: 256}
	for _, tc := range []struct {
		name  string
		cfg   Config
		fin   bool // the peer ends with a FIN, not a reset
		first bool // the receive is armed before the tail and the reset come
		wrote bool // the server's SEND meets the reset before the receive is armed
	}{
		{name: "reset/defer", cfg: deferred},
		{name: "reset/defer/wrote", cfg: deferred, wrote: true},
		{name: "reset/plain", cfg: plain},
		{name: "reset/plain/wrote", cfg: plain, wrote: true},
		// Only where task work waits for the ring's enter (DEFER_TASKRUN)
		// do the tail and the reset both come before the receive runs.
		{name: "reset/defer/armed-first", cfg: deferred, first: true},
		{name: "fin/defer", cfg: deferred, fin: true},
		{name: "fin/plain", cfg: plain, fin: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The peer's syscalls and the ring's task work share this
			// thread: on a ring without DEFER_TASKRUN task work runs as
			// any of its syscalls returns, so the order below holds.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cfg := tc.cfg
			r := newRing(t, &cfg)
			b, err := r.SetupBufRing(1, 64, quirkBufSize)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			peer, srv, closePeer := peerPair(t, !tc.fin)
			tail := strings.Repeat("x", quirkTail)
			if tc.wrote {
				// Unread by the peer, as an answer the engine wrote.
				if _, err := unix.Write(srv, []byte("request")); err != nil {
					t.Fatal(err)
				}
			}
			arm := func() {
				sqe(t, r).PrepRecvMultishot(srv, b.Group(), false, 0, quirkRecv)
				if _, err := r.Submit(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.first {
				arm()
			}
			if _, err := unix.Write(peer, []byte(tail)); err != nil {
				t.Fatal(err)
			}
			awaitInq(t, srv, quirkTail)
			state := uint8(unix.BPF_TCP_CLOSE)
			if tc.fin {
				if err := unix.Shutdown(peer, unix.SHUT_WR); err != nil {
					t.Fatal(err)
				}
				state = unix.BPF_TCP_CLOSE_WAIT
			} else {
				closePeer()
			}
			awaitState(t, srv, state)
			if tc.wrote {
				one := offHeap(t, 1)
				sqe(t, r).PrepSend(srv, one, 0, quirkSend)
				c := reap(t, r, 1)[0]
				if c.UserData != quirkSend || !errors.Is(c.Err(), unix.ECONNRESET) && !errors.Is(c.Err(), unix.EPIPE) {
					t.Fatalf("the server's SEND after the reset: %+v (%v), want ECONNRESET or EPIPE", c, c.Err())
				}
			}
			if !tc.first {
				arm()
			}
			o := collectRecv(t, r, b, 300*time.Millisecond)
			if o.got != tail {
				t.Fatalf("the multishot receive took %d bytes of the %d-byte tail: %v", len(o.got), quirkTail, o)
			}
			end := "the reset"
			if tc.fin {
				end = "the FIN"
			}
			switch {
			case o.silent && tc.fin:
				t.Errorf("kernel %s: multishot recv silent after the tail and the FIN (%v): the engine relies on it reporting the end of stream", kver.Release(), o)
			case o.silent:
				inq, err := unix.IoctlGetInt(srv, unix.SIOCINQ)
				if err != nil {
					t.Fatal(err)
				}
				pfd := []unix.PollFd{{Fd: int32(srv), Events: unix.POLLIN}}
				if _, err := unix.Poll(pfd, 0); err != nil {
					t.Fatal(err)
				}
				if inq != 0 || pfd[0].Revents&(unix.POLLIN|unix.POLLHUP) != unix.POLLIN|unix.POLLHUP {
					t.Fatalf("silent receive on a socket with %d bytes unread, poll %#x: want none and POLLIN|POLLHUP", inq, pfd[0].Revents)
				}
				t.Logf("kernel %s: multishot recv silent after data+RST (armed %s): quirk present: %v; the socket in TCP_CLOSE, nothing unread, poll POLLIN|POLLHUP", kver.Release(), armedWhen(tc.first), o)
			default:
				last := o.cqes[len(o.cqes)-1]
				if last.Res != 0 && (tc.fin || !errors.Is(last.Err(), unix.ECONNRESET)) {
					t.Errorf("the multishot receive ended after %s with %d (%v), want 0 or ECONNRESET", end, last.Res, last.Err())
				}
				if tc.fin {
					break
				}
				if tc.first {
					t.Logf("kernel %s: multishot recv armed %s ended (res %d): %v", kver.Release(), armedWhen(tc.first), last.Res, o)
				} else {
					t.Logf("kernel %s: multishot recv armed %s ended (res %d): quirk not present: the engine's recvOnce workaround could be reconsidered", kver.Release(), armedWhen(tc.first), last.Res)
				}
			}
			// What the engine relies on: a single-shot receive finds the end.
			start := time.Now()
			sqe(t, r).PrepRecvBufSelect(srv, b.Group(), 0, quirkOnce)
			c := reap(t, r, 1)[0]
			if c.UserData != quirkOnce || c.Res != 0 && !errors.Is(c.Err(), unix.ECONNRESET) {
				t.Fatalf("single-shot receive after %s: %+v (%v), want res 0 or ECONNRESET", end, c, c.Err())
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("single-shot receive after %s completed after %v", end, el)
			}
			if o.silent {
				// Still armed: the cancel ends it.
				sqe(t, r).PrepCancel(quirkRecv, 0, quirkCancel)
				expectRemoved(t, r, quirkRecv, quirkCancel)
			}
		})
	}
}

func armedWhen(first bool) string {
	if first {
		return "before the tail and the reset came"
	}
	return "after the reset"
}

// recvOutcome is what a multishot receive posted.
type recvOutcome struct {
	got    string // the bytes its CQEs carried
	cqes   []CQE
	silent bool // still armed (the last CQE had More) and quiet
}

func (o recvOutcome) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%d bytes in %d CQEs", len(o.got), len(o.cqes))
	if n := len(o.cqes); n > 0 {
		last := o.cqes[n-1]
		fmt.Fprintf(&s, ", the last res %d, More %v, SockNonEmpty %v", last.Res, last.More(), last.SockNonEmpty())
	}
	if o.silent {
		s.WriteString(", then nothing")
	}
	return s.String()
}

// collectRecv reaps the multishot receive's CQEs (recycling their buffers)
// until one comes without More, or none has come for quiet: the receive is
// then silent.
func collectRecv(t *testing.T, r *Ring, b *BufRing, quiet time.Duration) recvOutcome {
	t.Helper()
	var o recvOutcome
	buf := make([]CQE, 16)
	last := time.Now()
	for time.Since(last) < quiet {
		if _, err := r.SubmitAndWait(1, 20*time.Millisecond); err != nil && !errors.Is(err, unix.ETIME) {
			t.Fatal(err)
		}
		n := r.PeekCQEs(buf)
		for _, c := range buf[:n] {
			if c.UserData != quirkRecv {
				t.Fatalf("unexpected CQE %+v (%v)", c, c.Err())
			}
			last = time.Now()
			o.cqes = append(o.cqes, c)
			if id, ok := c.BufferID(); ok {
				if c.Res > 0 {
					o.got += string(b.Buf(id)[:c.Res])
				}
				b.Recycle(id)
				b.Commit()
			}
			if !c.More() {
				return o
			}
		}
	}
	o.silent = true
	return o
}

// peerPair returns a connected loopback pair (peer, srv), srv closed at
// cleanup. closePeer closes the peer, once (also at cleanup); with reset
// it lingers 0, so that its close resets the connection.
func peerPair(t *testing.T, reset bool) (peer, srv int, closePeer func()) {
	t.Helper()
	lfd, ap := listenTCP(t)
	peer, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closePeer = func() {
		if !closed {
			closed = true
			unix.Close(peer)
		}
	}
	t.Cleanup(closePeer)
	if err := unix.Connect(peer, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		t.Fatal(err)
	}
	if reset {
		if err := unix.SetsockoptLinger(peer, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
			t.Fatal(err)
		}
	}
	srv, _, err = unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, srv)
	return peer, srv, closePeer
}

// awaitInq waits until fd has n bytes unread (SIOCINQ).
func awaitInq(t *testing.T, fd, n int) {
	t.Helper()
	got := 0
	waitFor(t, fmt.Sprintf("%d bytes unread in the server's socket", n), func() bool {
		var err error
		if got, err = unix.IoctlGetInt(fd, unix.SIOCINQ); err != nil {
			t.Fatal(err)
		}
		return got == n
	})
}

// awaitState waits until fd's TCP state is state (TCP_CLOSE: the peer's
// reset is in; TCP_CLOSE_WAIT: its FIN).
func awaitState(t *testing.T, fd int, state uint8) {
	t.Helper()
	waitFor(t, fmt.Sprintf("TCP state %d (the peer's end seen)", state), func() bool {
		ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Fatal(err)
		}
		return ti.State == state
	})
}
