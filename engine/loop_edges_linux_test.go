package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/uring"
)

// TestPostToFromBrokenRing: a PostTo from a loop whose ring has just broken
// (a full SQ that cannot be submitted; the loop leaves at its next poll)
// prepared its MSG_RING wake-up on the spare SQE that never reaches the
// kernel: the destination loop, asleep with nothing else to do, never ran
// the function. It must be woken through its eventfd.
func TestPostToFromBrokenRing(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	e := runBreakable(t, &echoHandler{})
	src, dst := e.Loops()[0], e.Loops()[1]
	sync := make(chan struct{})
	dst.Post(func() { close(sync) }) // dst running, then asleep
	<-sync
	done := make(chan struct{})
	src.Post(func() {
		fillSQ(src.be.(*uringBackend))
		src.PostTo(dst, func() { close(done) })
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a function PostTo sent from a loop whose ring broke did not run in 5 s")
	}
}

// TestPostToWakeUpLostWithBrokenRing: a PostTo's MSG_RING wake-up that the
// kernel fails is answered by its completion, on which the sender wakes
// the destination through its eventfd (opMsgSent). One whose completion
// the sender's ring never handles, broken before its next wait, was only
// given back (msgDone) as the ring closed: the destination, asleep with
// nothing else to do, did not run the function, nor any posted to it after
// (its wake-up pending, they wake it no more). Here the wake-up names a
// file that is not a ring, so that it fails when the broken ring's Close
// submits it, and the Close reaps its completion unseen: as for any
// wake-up the kernel took and failed, or never took (that Close's
// submissions refused too: a dead SQPOLL thread). The destination must be
// woken all the same.
func TestPostToWakeUpLostWithBrokenRing(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	efd := notARing(t)
	for _, b := range uringBackends() {
		t.Run(string(b), func(t *testing.T) {
			e := runBreakableOn(t, b, &echoHandler{})
			src, dst := e.Loops()[0], e.Loops()[1]
			syncLoop(dst)
			waitAsleep(t, dst)
			done := make(chan struct{})
			src.Post(func() {
				sb := src.be.(*uringBackend)
				ringFd := dst.ringFd.Swap(int32(efd))
				src.PostTo(dst, func() { close(done) })
				dst.ringFd.Store(ringFd)
				if n := sb.msgOut[dst.id]; n != 1 {
					t.Errorf("%d MSG_RING wake-ups prepared for the destination, want 1", n)
				}
				fillSQ(sb)
			})
			select {
			case <-done:
			case <-src.Left():
			case <-time.After(10 * time.Second):
				t.Fatal("the sender, its ring broken, has not left in 10 s")
			}
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				t.Fatal("a function PostTo sent did not run in 2 s after the sender's ring closed with the wake-up's completion unhandled")
			}
		})
	}
}

// waitAsleep waits until loop l's thread sleeps in its ring's wait
// (io_cqring_wait): a wait entered with nothing posted, which only a
// wake-up ends.
func waitAsleep(t testing.TB, l *Loop) {
	t.Helper()
	path := fmt.Sprintf("/proc/self/task/%d/wchan", l.tid.Load())
	waitFor(t, "the loop to sleep in its ring's wait", func() bool {
		w, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(w) == "io_cqring_wait"
	})
}

// countDrains is a Drainer that counts OnDrain and leaves the connection
// open.
type countDrains struct {
	BaseHandler
	drained atomic.Int64
}

func (h *countDrains) OnDrain(*Conn) { h.drained.Add(1) }

// TestDrainOnceForTwoShutdowns: a second Shutdown while a first is still
// draining (a signal handler and a handler's own Shutdown, say) called
// OnDrain a second time for every connection, where Drainer promises once.
func TestDrainOnceForTwoShutdowns(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &countDrains{}
			e, addr, done := listenAndRun(t, testConfig(b), h)
			const n = 3
			for range n {
				mustDial(t, "tcp", addr)
			}
			waitFor(t, "the connections to open", func() bool { return e.Stats().Open == n })
			first := make(chan error, 1)
			go func() { first <- e.Shutdown(context.Background()) }()
			waitFor(t, "the first drain", func() bool { return h.drained.Load() == n })
			// The second drains (its OnDrain calls are posted before it
			// waits, and run as the loops stop), then gives up.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			e.Shutdown(ctx)
			<-first
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := h.drained.Load(); got != n {
				t.Errorf("two Shutdowns called OnDrain %d times for %d connections, want once each", got, n)
			}
		})
	}
}

// TestAfterFuncFarPast schedules a timer with the most negative duration,
// what time.Until gives for a zero time.Time (a deadline never set): it
// must run at the next iteration, as any d <= 0. Its deadline less the
// clock overflowed to a large positive wait, and the loop slept an hour
// (maxWait) unless something else woke it.
func TestAfterFuncFarPast(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			l := e.Loops()[0]
			ran := make(chan struct{})
			l.Post(func() {
				// From a timer, once the Post's wake-up is consumed.
				l.AfterFunc(time.Millisecond, func() {
					l.AfterFunc(time.Until(time.Time{}), func() { close(ran) })
				})
			})
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatal("a timer set with time.Until(time.Time{}) did not run in 5 s")
			}
		})
	}
}

// TestResetIsNotTimedOut: a handler's Reset of a connection whose
// CloseLinger had armed its CloseTimeout timer (a queue still to drain
// before the FIN) is not a timeout. On the uring backends the reset
// connection waits for its cancel to complete; the timer, due meanwhile,
// counted a Stats.TimedOut for a reset that was the handler's (epoll,
// closing at once, stopped the timer first).
func TestResetIsNotTimedOut(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			closed := make(chan error, 1)
			h := &BaseHandlerFunc{
				data: func(c *Conn, buf Buffer) bool {
					c.Write(buf.Bytes())
					c.CloseLinger(time.Hour, 1<<20)
					c.Reset()
					return false
				},
				closed: func(c *Conn, err error) { closed <- err },
			}
			cfg := testConfig(b)
			cfg.CloseTimeout = time.Nanosecond // due at the next iteration
			e, addr := startEngine(t, cfg, h)
			c := mustDial(t, "tcp", addr)
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := <-closed; err != nil {
				t.Errorf("OnClose(%v) after Reset, want nil", err)
			}
			if n := e.Stats().TimedOut; n != 0 {
				t.Errorf("Stats.TimedOut %d after a handler's Reset, want 0", n)
			}
		})
	}
}

// TestSQPollFirstLoopCannotStart: when the first loop of a uring-sqpoll
// engine cannot start (here its CPU cannot be set: a CPU gone offline since
// New), Run must return its error. The other loops waited for the first to
// share its SQPOLL thread (sqpollShare.ready), which it never made, and
// Run waited for them: it hung for good.
func TestSQPollFirstLoopCannotStart(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	cfg := testConfig(BackendURingSQPoll)
	cfg.CPUs = []int{0, 1}
	e := newEngine(t, cfg, &echoHandler{})
	e.loops[0].cpu = 4096 // beyond unix.CPUSet: sched_setaffinity fails
	ran := make(chan error, 1)
	go func() { ran <- e.Run(context.Background()) }()
	select {
	case err := <-ran:
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("Run returned %v, want loop 0's EINVAL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return in 10 s after its first loop could not start")
	}
}

// bigReplyHandler answers each byte it receives with reply, from a
// socket whose send buffer is small (so that replies wait in the write
// queue until the peer reads), and records OnWritable calls that find the
// queue not below half the high-water mark.
type bigReplyHandler struct {
	BaseHandler
	reply     []byte
	hwm       int
	writables atomic.Int64
	full      atomic.Int64 // OnWritable with the queue above half the mark
}

func (h *bigReplyHandler) OnOpen(c *Conn) {
	unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
}

func (h *bigReplyHandler) OnData(c *Conn, b Buffer) bool {
	for range b.Len() {
		c.Write(h.reply)
	}
	return false
}

func (h *bigReplyHandler) OnWritable(c *Conn) {
	h.writables.Add(1)
	if c.QueuedMemory() > h.hwm/2 {
		h.full.Add(1)
	}
}

// TestOnWritableBelowHalf: OnWritable says the queue has drained below half
// the high-water mark. On the uring backends a request that arrived while
// reading was paused is held, and delivered as the queue drains, before
// OnWritable: its reply filled the queue to the mark again, reading paused
// again, and OnWritable came all the same, with the queue full (epoll,
// which leaves such a request in the socket, called it with the queue
// drained). It must wait until the queue drains below half again.
func TestOnWritableBelowHalf(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			const hwm = 64 << 10
			h := &bigReplyHandler{reply: make([]byte, hwm), hwm: hwm}
			cfg := testConfig(b)
			cfg.WriteHighWater = hwm
			cfg.ReadBufferSize = 4096
			_, addr := startEngine(t, cfg, h)
			// A small receive buffer from the SYN on: the replies wait in
			// the server's queue until the client reads.
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) {
					unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
				})
			}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The second request arrives while the reply to the first
			// fills the queue, reading paused.
			for range 2 {
				if _, err := c.Write([]byte{1}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, 2*hwm)); err != nil {
				t.Fatal(err)
			}
			if n := h.full.Load(); n != 0 {
				t.Errorf("%d of %d OnWritable calls found the queue above half the mark", n, h.writables.Load())
			}
		})
	}
}

// lingerDrains closes a connection with CloseLinger when it receives
// "linger", and as a Drainer counts the OnDrain calls, those for a
// lingering connection apart, and closes the others.
type lingerDrains struct {
	BaseHandler
	drained, lingering atomic.Int64
}

func (h *lingerDrains) OnData(c *Conn, b Buffer) bool {
	if string(b.Bytes()) == "linger" {
		c.CloseLinger(time.Hour, 1<<20)
	}
	return false
}

func (h *lingerDrains) OnDrain(c *Conn) {
	h.drained.Add(1)
	if c.lingering {
		h.lingering.Add(1)
		return
	}
	c.Close()
}

// TestDrainSkipsLingering: OnDrain is for connections not yet closing. A
// connection in CloseLinger is closing (it ends by itself at its peer's
// FIN or its timeout), but was still open to the engine, and OnDrain came
// for it: a Drainer closing idle connections then closed it at once, with
// what its peer still sends unread, which the kernel answers with a reset
// that can destroy the reply CloseLinger was there to deliver.
func TestDrainSkipsLingering(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &lingerDrains{}
			e, addr, done := listenAndRun(t, testConfig(b), h)
			lingering := mustDial(t, "tcp", addr)
			mustDial(t, "tcp", addr) // open, to be drained
			if _, err := lingering.Write([]byte("linger")); err != nil {
				t.Fatal(err)
			}
			// The server's FIN says CloseLinger has run.
			lingering.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := lingering.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("read %v, want the lingering server's EOF", err)
			}
			waitFor(t, "both connections", func() bool { return e.Stats().Open == 2 })
			// The drain ends when the lingering connection does, at the
			// client's close once the open one was drained (a deadline
			// short enough to end it instead skipped the drain on a
			// loaded host: no OnDrain at all).
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			go e.Shutdown(ctx)
			waitFor(t, "the open connection drained", func() bool { return h.drained.Load() > 0 })
			lingering.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if d, l := h.drained.Load(), h.lingering.Load(); d != 1 || l != 0 {
				t.Errorf("OnDrain called %d times, %d of them for the lingering connection; want once, for the open one", d, l)
			}
		})
	}
}

// TestMsgRingNotIntoReusedFd: a PostTo's MSG_RING wake-up names the
// destination's ring by fd number, and goes to the kernel only at the
// sender's next wait (or with its ring's Close, should the ring break
// first). Here the sender is held in a posted function after preparing one
// while the engine stops, for longer than the destination takes to exit.
// The destination's ring waited up to a second for the wake-up, then
// freed the number: a ring the test opened took it, and the wake-up,
// submitted once the sender was let go, posted its completion into that
// ring, one it never asked for in a ring the engine has nothing to do with;
// the destination's exit had waited that second meanwhile. The number must
// name no ring from the destination's close until the wake-up has gone to
// the kernel (there it fails: the sender counts a MsgRingErr), then be
// closed, and the destination must exit without waiting for the sender.
func TestMsgRingNotIntoReusedFd(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	for _, tc := range []struct {
		name   string
		breaks bool // the sender's ring breaks before its next wait
	}{
		{"submitted at the sender's next wait", false},
		{"submitted by the sender's broken ring's Close", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.breaks {
				failSubmits(t, -1, os.NewSyscallError("io_uring_enter", unix.EOWNERDEAD))
			}
			cfg := testConfig(BackendURing)
			cfg.CPUs = []int{0, 1}
			e := newEngine(t, cfg, &echoHandler{})
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- e.Run(ctx) }()
			src, dst := e.Loops()[0], e.Loops()[1]
			syncLoop(src)
			syncLoop(dst)
			fd := int(dst.ringFd.Load())
			hold, held := make(chan struct{}), make(chan struct{})
			src.Post(func() {
				src.PostTo(dst, func() {})
				close(held)
				<-hold
				if tc.breaks {
					fillSQ(src.be.(*uringBackend))
				}
			})
			<-held
			start := time.Now()
			cancel()
			select {
			case <-dst.Left():
			case <-time.After(5 * time.Second):
				close(hold)
				t.Fatal("the destination loop did not exit in 5 s")
			}
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Errorf("the destination loop took %v to exit, with a wake-up for it held by another loop", took)
			}
			// While the wake-up is held its number must name a file
			// that is not a ring (nor be free for one).
			what, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			if err != nil || what == "anon_inode:[io_uring]" {
				t.Errorf("with a wake-up for it held, the closed ring's fd number %d names %q (%v), want a file that is not a ring", fd, what, err)
			}
			var mine *uring.Ring
			for range 16 {
				r, err := uring.New(&uring.Config{Entries: 8})
				if err != nil {
					close(hold)
					t.Fatal(err)
				}
				if r.Fd() == fd {
					mine = r
					break
				}
				defer r.Close()
			}
			close(hold)
			if err := <-ran; err != nil && !(tc.breaks && errors.Is(err, unix.EOWNERDEAD)) {
				t.Fatal(err)
			}
			if mine != nil {
				defer mine.Close()
				mine.SubmitAndWait(1, 200*time.Millisecond)
				if n := mine.CQReady(); n > 0 {
					t.Errorf("a ring opened on the fd number of a loop's closed ring got %d completions from the engine's MSG_RING", n)
				}
			} else if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
				t.Errorf("fd %d, the closed ring's number, still open once the engine stopped (F_GETFD: %v)", fd, err)
			}
			if n := src.Stats().MsgRingErrs; !tc.breaks && n != 1 {
				t.Errorf("%d MSG_RING wake-ups failed, want 1: the one to the closed ring", n)
			}
		})
	}
}
