package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/testnet"
	"github.com/spindlenet/spindle/uring"
)

// failSubmits makes the uring backend's submissions from a full SQ fail
// with err for the first n calls (n < 0: every call), then submit for
// real, until the test ends. It returns the count of calls.
func failSubmits(t *testing.T, n int64, err error) *atomic.Int64 {
	var calls atomic.Int64
	real := submitSQ
	submitSQ = func(r *uring.Ring) (int, error) {
		// Past 10,000 a spinning sqe gets out, and the test fails on the
		// count rather than hanging.
		if c := calls.Add(1); (n < 0 || c <= n) && c <= 10000 {
			return 0, err
		}
		return real(r)
	}
	t.Cleanup(func() { submitSQ = real })
	return &calls
}

// fillSQ prepares one NOP more than the loop's SQ has room for, as
// completions of cancels (opCancel, counted in flight), so that the last
// takes a submission from a full SQ. It returns the number prepared.
func fillSQ(b *uringBackend) int {
	n := int(b.r.SQEntries()-b.r.SQReady()) + 1
	for range n {
		b.sqe().PrepNop(udata(opCancel, 0, 0))
		b.inflight++
	}
	return n
}

// TestFullSQSubmitFails makes the submission of a full SQ fail for good:
// with an error other than EAGAIN and EBUSY at once, with those after
// sqeRetries attempts. The loop must stop, closing its connections and
// saying why, instead of submitting again forever on its thread (sqe
// ignored Submit's error: a dead SQPOLL thread, EOWNERDEAD, spun the loop
// for good).
func TestFullSQSubmitFails(t *testing.T) {
	for _, tc := range []struct {
		err   error
		calls int64
	}{
		{os.NewSyscallError("io_uring_enter", unix.EOWNERDEAD), 1},
		{unix.EAGAIN, sqeRetries + 1},
	} {
		t.Run(unix.ErrnoName(errnoOf(tc.err)), func(t *testing.T) {
			calls := failSubmits(t, -1, tc.err)
			logs := make(chan string, 16)
			cfg := testConfig(BackendURing)
			cfg.CPUs = []int{0}
			cfg.Logf = func(f string, a ...any) {
				select {
				case logs <- fmt.Sprintf(f, a...):
				default:
				}
			}
			e := newEngine(t, cfg, &echoHandler{})
			// On a port the test holds: once the loop has stopped, nothing
			// else's listener can have it (see the dial below).
			ln, err := e.Listen("tcp", testnet.RefusedAddr(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- e.Run(ctx) }()
			c := mustDial(t, "tcp", addr)
			if err := roundTrip(c, []byte("x")); err != nil {
				t.Fatal(err)
			}
			l := e.Loops()[0]
			done := make(chan struct{})
			l.Post(func() {
				fillSQ(l.be.(*uringBackend))
				close(done)
			})
			<-done
			if n := calls.Load(); n != tc.calls {
				t.Fatalf("%d submissions of the full SQ, want %d", n, tc.calls)
			}
			<-e.exited // the loop stops by itself
			var said bool
			for len(logs) > 0 {
				m := <-logs
				said = said || strings.Contains(m, "closing its connections") && strings.Contains(m, tc.err.Error())
			}
			if !said {
				t.Error("the loop did not say why it stopped")
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard: it is closed already
			if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Error("the connection is still open")
			}
			if c2, err := net.Dial("tcp", addr); err == nil {
				c2.Close()
				t.Error("the loop's listener socket still takes connections")
			}
			// Run returns by itself, no loop being left to serve (it
			// waited for ctx), and says why the loop left. The timer is a
			// guard against a hang, not a measurement.
			select {
			case err := <-ran:
				if !errors.Is(err, errnoOf(tc.err)) {
					t.Errorf("Run returned %v, want the loop's %v", err, tc.err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run still running 10 s after its only loop left")
				cancel()
				<-ran
			}
		})
	}
}

func errnoOf(err error) unix.Errno {
	var errno unix.Errno
	if se, ok := err.(*os.SyscallError); ok {
		err = se.Err
	}
	errno, _ = err.(unix.Errno)
	return errno
}

// TestFullSQSubmitRecovers makes the submission of a full SQ fail twice
// with EAGAIN, the kernel out of requests, while completions wait in the
// CQ: sqe must set them aside and submit again, poll must handle them,
// and the loop go on serving.
func TestFullSQSubmitRecovers(t *testing.T) {
	calls := failSubmits(t, 2, unix.EAGAIN)
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0}
	e, addr := startEngine(t, cfg, &echoHandler{})
	l := e.Loops()[0]
	type state struct {
		inflight, aside int
		cqes            uint64
	}
	var mu sync.Mutex
	var before, filled state
	var n int
	done := make(chan struct{})
	l.Post(func() {
		b := l.be.(*uringBackend)
		before = state{b.inflight, len(b.aside), l.st.cqes.Load()}
		// Three completions in the CQ, unreaped.
		for range 3 {
			b.sqe().PrepNop(udata(opCancel, 0, 0))
			b.inflight++
		}
		b.r.Submit()
		n = fillSQ(b)
		mu.Lock()
		filled = state{b.inflight, len(b.aside), l.st.cqes.Load()}
		mu.Unlock()
		close(done)
	})
	<-done
	if got := calls.Load(); got != 3 {
		t.Errorf("%d submissions of the full SQ, want 3 (two refused)", got)
	}
	if filled.aside < 3 {
		t.Errorf("%d completions set aside, want at least the 3 in the CQ", filled.aside)
	}
	after := make(chan state)
	l.Post(func() {
		b := l.be.(*uringBackend)
		after <- state{b.inflight, len(b.aside), l.st.cqes.Load()}
	})
	a := <-after
	if a.inflight != before.inflight || a.aside != 0 || a.cqes < before.cqes+uint64(3+n) {
		t.Errorf("after the completions: %d in flight (want %d), %d aside (want 0), %d handled (want at least %d)", a.inflight, before.inflight, a.aside, a.cqes-before.cqes, 3+n)
	}
	c := mustDial(t, "tcp", addr)
	if err := roundTrip(c, []byte("still serving")); err != nil {
		t.Fatal(err)
	}
}

// TestListenAfterLoopLeft: a Listen after one loop has left (its ring
// broke, the other serving on) gave that loop a socket in the SO_REUSEPORT
// group all the same, which no loop accepted on and nothing closed, not
// even Listener.Close (the loop's removal was posted to a loop that had
// exited): connections steered to it, those arriving on the left loop's
// CPU, waited in its queue for good. The listener must keep no socket for
// that loop, and a client on its CPU must be served by the other loop.
func TestListenAfterLoopLeft(t *testing.T) {
	e := runBreakable(t, &echoHandler{})
	l := e.Loops()[1]
	l.Post(func() { fillSQ(l.be.(*uringBackend)) })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		gone := l.wakeFd < 0
		l.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(end) {
			t.Fatal("loop 1 has not left 10 s after its submission failed")
		}
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.mu.Lock()
	fd := ln.fds[1]
	ln.mu.Unlock()
	if fd >= 0 {
		t.Errorf("the new listener keeps socket %d for the loop that left", fd)
	}
	if err := dialFromCPU(1, ln.Addr().String()); err != nil {
		t.Errorf("a client on the left loop's CPU: %v", err)
	}
}

// runBreakable runs a uring engine with loops on CPUs 0 and 1 whose
// submissions from a full SQ fail for good (EOWNERDEAD), so that fillSQ
// breaks a loop's ring. When the test ends it shuts the engine down and
// checks that Run returned that error.
func runBreakable(t *testing.T, h Handler) *Engine {
	return runBreakableOn(t, BackendURing, h)
}

// runBreakableOn is runBreakable on backend b, one of the uring backends.
func runBreakableOn(t *testing.T, b Backend, h Handler) *Engine {
	failSubmits(t, -1, os.NewSyscallError("io_uring_enter", unix.EOWNERDEAD))
	cfg := testConfig(b)
	cfg.CPUs = []int{0, 1}
	e := newEngine(t, cfg, h)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(context.Background()) }()
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-ran; !errors.Is(err, unix.EOWNERDEAD) {
			t.Errorf("Run returned %v, want the broken loop's EOWNERDEAD", err)
		}
	})
	return e
}

// TestChainCutWhenSubmitFails: a write queue of five segments to flush with
// room for two SENDs in the SQ, and the submission that was to make room
// failing (EAGAIN). The chain must not go to the kernel in two
// submissions (sqe's own, from the full SQ, mid-chain, and the next): two
// chains, whose SENDs could run out of order. flush cuts it to the room
// there is, and the rest goes after; the peer gets every byte in order.
// (flush submitted by itself, not through submitSQ, and ignored the
// error.)
func TestChainCutWhenSubmitFails(t *testing.T) {
	calls := failSubmits(t, 1, unix.EAGAIN)
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0}
	conns := make(chan *Conn, 1)
	e, addr := startEngine(t, cfg, &BaseHandlerFunc{open: func(c *Conn) { conns <- c }})
	peer := mustDial(t, "tcp", addr)
	c := recv(t, conns, "OnOpen")
	l := e.Loops()[0]
	want := make([]byte, 5*l.chunks.size)
	for i := range want {
		want[i] = byte(i * 7 / 3)
	}
	type flushed struct{ tried, sends, segs int }
	res := make(chan flushed, 1)
	l.Post(func() {
		b := l.be.(*uringBackend)
		for b.r.SQEntries()-b.r.SQReady() > 2 {
			b.sqe().PrepNop(udata(opCancel, 0, 0))
			b.inflight++
		}
		if _, err := c.Write(want); err != nil {
			t.Error(err)
		}
		b.flush(c)
		res <- flushed{int(calls.Load()), int(c.k.sends), len(c.wq) - int(c.wqHead)}
	})
	got := recv(t, res, "the flush")
	if got.tried != 1 || got.sends != 2 {
		t.Errorf("%d submissions tried, %d SENDs of %d segments prepared with room for 2; want 1 and 2", got.tried, got.sends, got.segs)
	}
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(peer, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, want) {
		t.Error("the peer got the queue's bytes out of order")
	}
}

// TestSetAsideInRearmEndsWait: a receive re-armed in poll, after poll has
// looked at what sqe set aside (a starved connection's, once a buffer has
// come back), takes a submission from a full SQ that fails (EAGAIN): sqe
// sets the CQ's completions aside, among them another connection's data.
// The wait that follows must not sleep with them unhandled: nothing else
// may come (the peer waits for its echo). Here the data is a's message,
// its receive run by the enter that set it aside; s, starved, has sent
// nothing, so its receive posts nothing. Before, poll decided whether to
// wait from what was aside before the re-arm and slept on; a's echo did
// not come.
func TestSetAsideInRearmEndsWait(t *testing.T) {
	calls := failSubmits(t, 1, unix.EAGAIN)
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0}
	cfg.ReadBuffers, cfg.ReadBufferSize = 4, 512
	cfg.CloseTimeout = -1 // no sweep to wake the loop
	e, addr := startEngine(t, cfg, keepOrForward{})
	l := e.Loops()[0]
	// a's receive is armed while the ring has buffers; then k keeps all
	// four, and s's receive, armed on the empty ring, ends with ENOBUFS:
	// s is starved until a buffer comes back.
	a := mustDial(t, "tcp", addr)
	a.SetDeadline(time.Now().Add(5 * time.Second))
	if err := roundTrip(a, []byte("a's first")); err != nil {
		t.Fatal(err)
	}
	k := mustDial(t, "tcp", addr)
	k.SetDeadline(time.Now().Add(5 * time.Second))
	for range 4 {
		if err := roundTrip(k, []byte{'K'}); err != nil {
			t.Fatal(err)
		}
	}
	mustDial(t, "tcp", addr)
	for end := time.Now().Add(5 * time.Second); e.Stats().NoBufs == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("s's receive did not find the ring empty")
		}
	}
	// With the loop held, a's message arrives; then two of k's buffers
	// go back (poll commits them and re-arms s) and the SQ is filled
	// with NOPs that post nothing, so that s's receive takes a
	// submission, which fails.
	held, release := make(chan struct{}), make(chan struct{})
	l.Post(func() {
		close(held)
		<-release
		b := l.be.(*uringBackend)
		for _, c := range l.conns {
			if c == nil {
				continue
			}
			if kept, ok := c.Context().(*[]Buffer); ok && len(*kept) == 4 {
				(*kept)[0].Release()
				(*kept)[1].Release()
				*kept = (*kept)[2:]
			}
		}
		for b.r.SQReady() < b.r.SQEntries() {
			q := b.sqe()
			q.PrepNop(udata(opQuietEnd, 0, 0))
			q.SetFlags(uring.FlagCQESkipSuccess)
		}
	})
	<-held
	msg := []byte("a's message")
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	a.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(a, buf); err != nil {
		t.Fatalf("a's echo %q: %v (%d submissions of the full SQ, want 2: one refused)", buf, err, calls.Load())
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d submissions of the full SQ, want 2 (one refused): the test did not take the path", n)
	}
	k.(*net.TCPConn).CloseWrite()
}
