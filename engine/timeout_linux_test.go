package engine

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dialRcvBuf connects to addr with a receive buffer of size, set before
// the handshake so that the window stays that small (4 KiB: a peer that
// takes almost nothing). It is closed when the test ends.
func dialRcvBuf(t *testing.T, addr string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size) })
		return err
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// timeoutHandler writes payload to each connection it opens, then calls
// end (Close, say) if set; it keeps the time of OnOpen and OnClose and
// OnClose's error. With sndbuf, OnOpen first sets SO_SNDBUF.
type timeoutHandler struct {
	BaseHandler
	payload        []byte
	end            func(c *Conn)
	sndbuf         int
	opened, closed atomic.Int64 // nanotime
	err            atomic.Value
}

func (h *timeoutHandler) OnOpen(c *Conn) {
	h.opened.Store(nanotime())
	if h.sndbuf > 0 {
		unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, h.sndbuf)
	}
	c.Write(h.payload)
	if h.end != nil {
		h.end(c)
	}
}

func (h *timeoutHandler) OnClose(c *Conn, err error) {
	if err != nil {
		h.err.Store(err)
	}
	h.closed.Store(nanotime())
}

// checkExpired checks that h's connection was closed for a timeout, no
// later than within after OnOpen, and that the peer c sees a reset.
func checkExpired(t *testing.T, h *timeoutHandler, c net.Conn, within time.Duration) {
	t.Helper()
	waitFor(t, "OnClose", func() bool { return h.closed.Load() != 0 })
	if d := time.Duration(h.closed.Load() - h.opened.Load()); d > within {
		t.Errorf("closed %v after OnOpen, want within %v", d, within)
	}
	err, _ := h.err.Load().(error)
	var oe *net.OpError
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) {
		t.Errorf("OnClose got %v, want a *net.OpError wrapping os.ErrDeadlineExceeded", err)
	}
	if got, err := readReply(c); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the peer read %d bytes, then %v; want a reset", len(got), err)
	}
}

// TestWriteTimeout: a peer that reads nothing, sent more than the socket
// buffers hold: with WriteTimeout 200ms its connection is reset (RST,
// OnClose with a deadline error) within a second or so (bounded at 10 s,
// well under the 30 s of a CloseTimeout default: what counts is that it
// happens, and a loaded 2-CPU host has held a loop up past 5 s); without
// it, it stays open.
func TestWriteTimeout(t *testing.T) {
	testPeerNotReading(t, nil, func(cfg *Config, bound bool) {
		if bound {
			cfg.WriteTimeout = 200 * time.Millisecond
		}
	})
}

// testPeerNotReading runs timeoutHandler (ending with end) against a peer
// that reads nothing, on every backend, with a Config that set bounds
// (bound) or not: bounded, the connection must be reset for its timeout;
// unbounded, it must still be open a second later.
func testPeerNotReading(t *testing.T, end func(c *Conn), set func(cfg *Config, bound bool)) {
	payload := pattern(7, 8<<20)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, bound := range []bool{true, false} {
				cfg := testConfig(b)
				set(cfg, bound)
				h := &timeoutHandler{payload: payload, end: end}
				e, addr := startEngine(t, cfg, h)
				c := dialRcvBuf(t, addr, 4096)
				if !bound {
					// From the accept on: an SQPOLL ring's comes from its
					// SQ thread, which a loaded host may hold up.
					waitFor(t, "OnOpen", func() bool { return h.opened.Load() != 0 })
					time.Sleep(time.Second)
					if h.closed.Load() != 0 || e.Stats().Open != 1 {
						t.Errorf("with no bound: a connection whose peer does not read ended (%v)", h.err.Load())
					}
					if n := e.Stats().TimedOut; n != 0 {
						t.Errorf("with no bound: Stats.TimedOut = %d", n)
					}
					continue
				}
				checkExpired(t, h, c, 10*time.Second)
				if n := checkQueues(t, e); n != 0 {
					t.Errorf("%d connections listed for the sweep after the reset, want 0", n)
				}
				if n := e.Stats().TimedOut; n != 1 {
					t.Errorf("Stats.TimedOut = %d after one connection timed out, want 1", n)
				}
			}
		})
	}
}

// TestWriteTimeoutSlowReader: a peer that reads slowly but steadily keeps
// its connection under WriteTimeout: the queue moves. The socket buffers
// are kept small (64 KiB each way, doubled by the kernel): what they hold
// is drained by the reader well within WriteTimeout, so the sender's queue
// moves at the reader's pace (with default buffers the reader spends
// longer than that on what the kernel took at the start, and the queue
// rightly counts as stuck).
func TestWriteTimeoutSlowReader(t *testing.T) {
	payload := pattern(8, 8<<20)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.WriteTimeout = 300 * time.Millisecond
			h := &timeoutHandler{payload: payload, sndbuf: 64 << 10}
			_, addr := startEngine(t, cfg, h)
			c := dialRcvBuf(t, addr, 64<<10)
			buf := make([]byte, 16<<10)
			total := 0
			for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, err := c.Read(buf)
				total += n
				if err != nil {
					t.Fatalf("after %d bytes: %v", total, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if h.closed.Load() != 0 || total >= len(payload) {
				t.Errorf("read %d of %d bytes; OnClose: %v", total, len(payload), h.err.Load())
			}
		})
	}
}

// TestCloseTimeout: a Close, or a CloseLinger before its FIN, whose queue
// a peer that reads nothing never takes ends at CloseTimeout (300ms) with
// a reset; with no bound (negative) it waits on.
func TestCloseTimeout(t *testing.T) {
	ends := map[string]func(c *Conn){
		"close":  func(c *Conn) { c.Close() },
		"linger": func(c *Conn) { c.CloseLinger(time.Hour, 1<<30) },
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			testPeerNotReading(t, end, func(cfg *Config, bound bool) {
				cfg.CloseTimeout = -1
				if bound {
					cfg.CloseTimeout = 300 * time.Millisecond
				}
			})
		})
	}
}

// TestCloseLingerSlowReader: CloseLinger's timeout counts from the FIN
// handed to the socket, whose send buffer (SO_SNDBUFFORCE 1 MiB, which the
// kernel doubles) still holds the reply's tail: a peer reading it slowly
// while it goes on sending must still get all of it and the FIN, not a
// reset cutting the tail at the timeout (before the timeout was extended
// while the unacknowledged bytes shrink, it read 2.2 of 3 MiB). The linger
// is the longest the scheduler may hold the reader up without failing the
// test (under -race on a loaded host a 200 ms one saw no progress between
// two checks, a 500 ms one once in CI beside four other test jobs, and a
// 1 s one once in 20 runs beside two CPU hogs and other test binaries: the
// reset then reached the writer, and the reader saw EOF short of the
// reply): 2 s, and the reader takes 8 KiB every 20 ms, so that what the
// socket holds at the FIN takes it about 5 s, more than twice the linger,
// which without the extension ends it half-way.
func TestCloseLingerSlowReader(t *testing.T) {
	reply := pattern(10, 3<<20)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			var sndErr atomic.Value
			h := &lingerHandler{reply: reply,
				open: func(c *Conn) {
					if err := unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 1<<20); err != nil {
						sndErr.Store(err)
					}
				},
				end: func(c *Conn) { c.CloseLinger(2*time.Second, 1<<30) }}
			_, addr := startEngine(t, testConfig(b), h)
			c := mustDial(t, "tcp", addr)
			if _, err := c.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				// The peer keeps sending while it reads, as a client still
				// uploading: a close on the server now answers with a reset.
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					if _, err := c.Write(make([]byte, 1024)); err != nil {
						return
					}
				}
			}()
			var got []byte
			buf := make([]byte, 8<<10)
			var err error
			var gap time.Duration // the longest between two reads
			for last := time.Now(); ; {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				var n int
				n, err = c.Read(buf)
				got = append(got, buf[:n]...)
				gap, last = max(gap, time.Since(last)), time.Now()
				if err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err, _ := sndErr.Load().(error); err != nil {
				t.Skipf("SO_SNDBUFFORCE: %v (needs CAP_NET_ADMIN)", err)
			}
			if len(got) != len(reply) || err.Error() != "EOF" {
				t.Errorf("the slow reader read %d of %d bytes, then %v, at most %v between two reads; want all of it and EOF", len(got), len(reply), err, gap)
			}
		})
	}
}

// TestTimeoutDefaults: CloseTimeout defaults to 30 s, WriteTimeout to
// none; a negative WriteTimeout is refused; the sweep comes every quarter
// of the shorter timeout (1 ms to an hour) and keeps WriteTimeout's count
// of ticks in a byte, a tick every so many sweeps: a WriteTimeout of an
// hour made the sweep that checks a CloseTimeout of a second come every
// 18 s, and math.MaxInt64 overflowed the count.
func TestTimeoutDefaults(t *testing.T) {
	c, err := (&Config{}).withDefaults()
	if err != nil || c.CloseTimeout != 30*time.Second || c.WriteTimeout != 0 {
		t.Errorf("defaults: CloseTimeout %v, WriteTimeout %v, %v", c.CloseTimeout, c.WriteTimeout, err)
	}
	if _, err := (&Config{WriteTimeout: -1}).withDefaults(); err == nil {
		t.Error("a negative WriteTimeout was accepted")
	}
	for _, tc := range []struct {
		wto, cto, every time.Duration
		perTick         int
		ticks           uint8
	}{
		{0, -1, 0, 0, 0},
		{0, 30 * time.Second, 7500 * time.Millisecond, 0, 0},
		{200 * time.Millisecond, 30 * time.Second, 50 * time.Millisecond, 1, 4},
		{time.Hour, time.Second, 250 * time.Millisecond, 72, 200},
		{time.Microsecond, -1, time.Millisecond, 1, 1},
		{3, -1, time.Millisecond, 1, 1},
		{0, math.MaxInt64, time.Hour, 0, 0},
		{math.MaxInt64, -1, time.Hour, 12811, 200},
		{math.MaxInt64, 300 * time.Millisecond, 75 * time.Millisecond, 614891470, 200},
	} {
		var l Loop
		l.setTimeouts(tc.wto, tc.cto)
		if l.sweepEvery != tc.every || l.tickSweeps != tc.perTick || l.wtoTicks != tc.ticks {
			t.Errorf("WriteTimeout %v, CloseTimeout %v: sweep every %v, a tick every %d sweeps, %d ticks; want %v, %d, %d",
				tc.wto, tc.cto, l.sweepEvery, l.tickSweeps, l.wtoTicks, tc.every, tc.perTick, tc.ticks)
		}
		if tick := time.Duration(l.tickSweeps) * l.sweepEvery; tc.wto > 0 && float64(tick)*float64(l.wtoTicks) < float64(tc.wto) {
			t.Errorf("WriteTimeout %v: %d ticks of %v fall short of it", tc.wto, l.wtoTicks, tick)
		}
	}
}

// TestSweepVisitsQueuesOnly: the sweep behind WriteTimeout and
// CloseTimeout visits the connections that have a write queue, not every
// connection of the loop. One loop holds 1,000 idle connections, each
// sent a greeting that drained into its socket at once, and one whose
// peer reads nothing (8 MiB queued): each sweep (every 10 ms, CloseTimeout
// 40 ms) must visit that one alone; it visited all 1,001 slots before.
func TestSweepVisitsQueuesOnly(t *testing.T) {
	const idle = 1000
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0} // one loop: every connection in its table
			cfg.CloseTimeout = 40 * time.Millisecond
			payload := pattern(11, 8<<20)
			// The connection opened after the idle ones is the stalled one,
			// counted in OnOpen: a flag the test set once Stats().Open
			// reached idle raced with the last idle connection's OnOpen
			// (Open counts it before OnOpen runs), which then got the
			// payload too and stalled (seen under -race with BatchWait).
			var opened atomic.Int32
			h := &BaseHandlerFunc{open: func(c *Conn) {
				if opened.Add(1) > idle {
					c.Write(payload)
				} else {
					c.Write([]byte("hello"))
				}
			}}
			e, addr := startEngine(t, cfg, h)
			l := e.Loops()[0]
			for range idle {
				mustDial(t, "tcp", addr)
			}
			waitFor(t, "the idle connections", func() bool { return e.Stats().Open == idle })
			c := dialRcvBuf(t, addr, 4096)
			counts := func() (sweeps, visits int) {
				res := make(chan [2]int)
				l.Post(func() { res <- [2]int{l.sweeps, l.sweepVisits} })
				r := <-res
				return r[0], r[1]
			}
			// From the second sweep after the stalled connection opened on,
			// its queue is the only one.
			waitFor(t, "the stalled connection", func() bool { return e.Stats().Open == idle+1 })
			s, _ := counts()
			waitFor(t, "two sweeps", func() bool { n, _ := counts(); return n >= s+2 })
			s0, v0 := counts()
			waitFor(t, "ten more sweeps", func() bool { n, _ := counts(); return n >= s0+10 })
			s1, v1 := counts()
			if v1-v0 != s1-s0 {
				t.Errorf("%d sweeps visited %d connections, want one each (the stalled one; %d are idle)", s1-s0, v1-v0, idle)
			}
			if n := checkQueues(t, e); n != 1 {
				t.Errorf("%d connections listed for the sweep, want 1 (the stalled one)", n)
			}
			c.Close() // unread data: a reset, which closes the stalled connection
			waitFor(t, "the stalled connection's close", func() bool { return e.Stats().Open == idle })
			if n := checkQueues(t, e); n != 0 {
				t.Errorf("%d connections listed for the sweep after the stalled one closed, want 0", n)
			}
		})
	}
}

// checkQueues checks, on each of e's loops, the list of connections with a
// write queue that the sweep visits (Loop.queues) and returns how many it
// holds: each entry a connection still in its slot (same generation, not
// closed) with a queue, each slot's position right, no position left over.
func checkQueues(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	for _, l := range e.Loops() {
		res := make(chan []string)
		l.Post(func() {
			n += len(l.queues)
			res <- queueErrors(l)
		})
		for _, msg := range <-res {
			t.Errorf("loop %d: %s", l.ID(), msg)
		}
	}
	return n
}

// queueErrors is what is wrong with l.queues. Loop goroutine, or after the
// loop exited.
func queueErrors(l *Loop) []string {
	var bad []string
	for i, r := range l.queues {
		switch c := l.conn(r.slot, r.gen); {
		case c == nil:
			bad = append(bad, fmt.Sprintf("entry %d (slot %d, generation %d): no such connection", i, r.slot, r.gen))
		case c.queued == 0:
			bad = append(bad, fmt.Sprintf("entry %d (slot %d): no queue", i, r.slot))
		case l.queuePos[r.slot] != int32(i+1):
			bad = append(bad, fmt.Sprintf("entry %d (slot %d): position %d", i, r.slot, l.queuePos[r.slot]))
		}
	}
	listed := 0
	for _, p := range l.queuePos {
		if p != 0 {
			listed++
		}
	}
	if listed != len(l.queues) {
		bad = append(bad, fmt.Sprintf("%d slots have a position, %d entries", listed, len(l.queues)))
	}
	return bad
}
