package engine

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// loopWatch tells a loop that left its peer waiting from one the machine
// did not run. Over a window (from restart) it measures how long the
// loop's thread ran and how long it was kept off a CPU, runnable: the
// run-queue wait of /proc/self/task/<tid>/schedstat (run ns, wait ns,
// timeslices), which counts a wait once it is over (the thread runs), and
// a wait not over yet: from a look (silent) that found the thread
// runnable (state R) to the last look, where it has not run since. A test
// that fails when nothing comes for a while counts only the time the loop
// could have run (silent), and says what the loop was doing when it fails
// (String).
type loopWatch struct {
	l         *Loop
	tid       int
	at        time.Time // the window's start
	run, wait time.Duration
	// lastRun is the thread's run time at the last look (or the window's
	// start); rSince the time of the look that found the thread runnable
	// where those after found it had not run since (zero: the last look
	// found it asleep); pending is the wait not over yet: from rSince to
	// the last look.
	lastRun time.Duration
	rSince  time.Time
	pending time.Duration
	// seen counts the thread's states (thread) the looks found, in the
	// order first seen.
	seen  []string
	times []int
}

func newLoopWatch(l *Loop) *loopWatch {
	// The loop's thread id is known once it has started: by the time it
	// runs a posted function.
	ran := make(chan struct{})
	l.Post(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
	}
	w := &loopWatch{l: l, tid: l.ThreadID()}
	w.restart()
	return w
}

// schedstat reads the loop thread's run and run-queue wait times (0 where
// they cannot be read).
func (w *loopWatch) schedstat() (run, wait time.Duration) {
	run, wait, _ = threadSchedstat(w.tid)
	return run, wait
}

// threadSchedstat reads thread tid's (of this process) time on a CPU and
// time waiting on a run queue, ready to run but not running: the first two
// fields of /proc/self/task/<tid>/schedstat.
func threadSchedstat(tid int) (run, wait time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0, 0, err
	}
	var r, q int64
	if _, err := fmt.Sscan(string(b), &r, &q); err != nil {
		return 0, 0, fmt.Errorf("schedstat %q: %w", b, err)
	}
	return time.Duration(r), time.Duration(q), nil
}

// restart starts a new window now.
func (w *loopWatch) restart() {
	w.at = time.Now()
	w.run, w.wait = w.schedstat()
	w.lastRun, w.rSince, w.pending = w.run, time.Time{}, 0
	if w.thread()[0] == 'R' {
		w.rSince = w.at
	}
	w.seen, w.times = w.seen[:0], w.times[:0]
}

// thread reports the loop thread's state (R running or runnable, S
// asleep, ...) and, asleep, its kernel wait channel: io_cqring_wait or
// ep_poll, a wait for completions or events; futex_wait..., the Go
// scheduler's (for a P, or a locked goroutine's handoff).
func (w *loopWatch) thread() string {
	task := fmt.Sprintf("/proc/self/task/%d/", w.tid)
	st, err := os.ReadFile(task + "stat")
	i := strings.LastIndexByte(string(st), ')')
	if err != nil || i < 0 || i+3 >= len(st) {
		return "gone"
	}
	state := string(st[i+2])
	if wchan, err := os.ReadFile(task + "wchan"); err == nil && len(wchan) > 0 && string(wchan) != "0" {
		state += " in " + string(wchan)
	}
	return state
}

// window reports how long the window has lasted, and how long in it the
// loop's thread ran and was kept off a CPU (as of the last look, for a
// wait not over yet).
func (w *loopWatch) window() (wall, ran, waited time.Duration) {
	run, wait := w.schedstat()
	wall = time.Since(w.at)
	// A wait counts whole once over, from before the window's start too.
	return wall, run - w.run, min(wait-w.wait+w.pending, wall)
}

// silent looks at the loop's thread and reports how long of the window it
// was not kept off a CPU: asleep (waiting for a completion, an event, or
// the Go scheduler) or running.
func (w *loopWatch) silent() time.Duration {
	state := w.thread()
	if i := slices.Index(w.seen, state); i >= 0 {
		w.times[i]++
	} else {
		w.seen, w.times = append(w.seen, state), append(w.times, 1)
	}
	run, _ := w.schedstat()
	now := time.Now()
	switch {
	case state[0] != 'R':
		w.rSince, w.pending = time.Time{}, 0
	case run != w.lastRun || w.rSince.IsZero():
		w.rSince, w.pending = now, 0
	default:
		w.pending = now.Sub(w.rSince)
	}
	w.lastRun = run
	wall, _, waited := w.window()
	return wall - waited
}

// String says what the window measured and what the loop is doing: its
// thread's state, and, from a function posted to it (which wakes it), its
// connections and, on the uring backends, its receive ring's bookkeeping:
// the receives waiting for a buffer (starved, retry), the buffers out of
// the ring (out) and held by write queues and paused connections
// (ringHeld), whether some wait to be committed (dirty), and how many the
// kernel can pick.
func (w *loopWatch) String() string {
	var sb strings.Builder
	wall, ran, waited := w.window()
	fmt.Fprintf(&sb, "in %v the loop's thread ran %v and was kept off a CPU %v (%v of it in a wait not over at the last look); looks found it", wall.Round(time.Millisecond), ran, waited.Round(time.Microsecond), w.pending.Round(time.Microsecond))
	for i, state := range w.seen {
		fmt.Fprintf(&sb, " %s %d times,", state, w.times[i])
	}
	fmt.Fprintf(&sb, " now %s", w.thread())
	s := w.l.Stats()
	fmt.Fprintf(&sb, "; stats: %d waits, %d SQEs, %d CQEs, %d bytes read, %d written, %d receives found no buffer, %d quiet waits",
		s.Waits, s.SQEs, s.CQEs, s.BytesRead, s.BytesWritten, s.NoBufs, s.QuietWaits)
	snap := make(chan string, 1)
	w.l.Post(func() { snap <- loopState(w.l) })
	select {
	case st := <-snap:
		sb.WriteString("; the loop (woken for a posted function): ")
		sb.WriteString(st)
	case <-time.After(3 * time.Second):
		run, wait := w.schedstat()
		fmt.Fprintf(&sb, "; a function posted to the loop did not run in 3s (its thread has run %v in all, and waited %v for a CPU, now %s)", run, wait, w.thread())
	}
	return sb.String()
}

// loopState describes l's receive bookkeeping and open connections.
// Loop goroutine.
func loopState(l *Loop) string {
	var sb strings.Builder
	if b, ok := l.be.(*uringBackend); ok {
		fmt.Fprintf(&sb, "starved %d, retry %d, out %d, ringHeld %d, dirty %v, commits %d, quiet %d, behind %d, overflowed %v, aside %d, inflight %d",
			len(b.starved), len(b.retry), b.out, l.ringHeld, b.dirty, b.commits, b.quiet, b.behind, b.overflowed, len(b.aside), b.inflight)
		// The kernel's side: a buffer it took without a completion's
		// saying so would be neither out nor available.
		if n, err := b.br.Available(); err == nil {
			fmt.Fprintf(&sb, ", %d of the ring's %d buffers available to the kernel", n, b.br.Entries())
		}
	}
	for _, c := range l.conns {
		if c == nil || c.state != stateOpen {
			continue
		}
		inq, _ := unix.IoctlGetInt(c.fd, unix.SIOCINQ)
		outq, _ := unix.IoctlGetInt(c.fd, unix.SIOCOUTQ)
		fmt.Fprintf(&sb, "; connection %d: %d bytes unread in its socket, %d unsent, %d queued, paused %#x, receive %d (armed at commit %d), %d sends in flight, bits %#x",
			c.slot, inq, outq, c.Buffered(), c.paused, c.k.recv, c.k.events, c.k.sends, c.bits)
	}
	return sb.String()
}
