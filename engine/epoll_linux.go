package engine

import (
	"math"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// epoll event data: Fd carries a connection slot or listener index, Pad the
// slot generation's low 24 bits (all Loop.conn compares; never negative) or
// one of these kinds.
const (
	epKindListener int32 = -1
	epKindWake     int32 = -2
)

// epollBackend is level-triggered epoll on the loop's own thread. Receive
// buffers are chunks of the loop's slab.
type epollBackend struct {
	l        *Loop
	epfd     int
	events   []unix.EpollEvent
	iov      [][]byte // flush's writev vector, reused
	ctls     uint64   // epoll_ctl calls on connections (tests)
	busy     bool
	busyPoll time.Duration
	prefer   bool
	// busyUsecs is Config.BusyPoll in whole microseconds; params what
	// the epoll instance has in effect (busyFor).
	busyUsecs uint32
	params    sys.EpollParams
	// starved are connections whose read found the slab without a free
	// chunk and unable to grow, first starved first: their input is not
	// watched (kstate.recv 1) until chunks are free again (rearm), or
	// one at a time as starvedTry paces them with none free.
	starved    []*Conn
	starvedTry starveTry
}

// maxWritev is how many queued segments one writev takes: at most
// unix.Writev's on-stack iovec array, so that it does not allocate.
const maxWritev = 8

func (b *epollBackend) init(l *Loop) error {
	b.l = l
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	b.epfd = fd
	b.events = make([]unix.EpollEvent, 256)
	b.starved = make([]*Conn, 0, 64)
	if b.busy {
		// Whole microseconds rounded up, as uring-napi's registration
		// does (truncated, below 1µs is 0: no busy polling), and at most
		// what the kernel takes (S32_MAX; beyond, EPIOCSPARAMS fails).
		b.busyUsecs = sys.CeilUnits(b.busyPoll, time.Microsecond, math.MaxInt32)
		p := sys.EpollParams{BusyPollUsecs: b.busyUsecs, BusyPollBudget: 8}
		if b.prefer {
			p.PreferBusyPoll = 1
		}
		if err := sys.EpollSetParams(fd, &p); err != nil {
			return err
		}
		b.params = p
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Pad: epKindWake}
	if err := unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, l.wakeFd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

func (b *epollBackend) close() {
	if b.epfd >= 0 {
		unix.Close(b.epfd)
		b.epfd = -1
	}
}

func (b *epollBackend) idle() bool { return true }

// minWait: epoll_wait has no minimum wait.
func (b *epollBackend) minWait() time.Duration { return 0 }

// runs: a loop whose EPIOCSPARAMS the kernel refuses does not start.
func (b *epollBackend) runs() Backend {
	if b.busy {
		return BackendEpollBusyPoll
	}
	return BackendEpoll
}

func (b *epollBackend) inFlight() string { return "no kernel operations in flight (epoll)" }

func (b *epollBackend) msgRing(*Loop, int) bool { return false }

// wakeAt: epoll has no timer of its own here; the loop bounds its waits.
func (b *epollBackend) wakeAt(int64) bool { return false }

// listenerCtl is epoll_ctl(2) for watch; tests replace it to see epoll
// refuse to watch a listening socket (ENOSPC past
// fs.epoll.max_user_watches, ENOMEM), which they cannot bring about
// without starving the host.
var listenerCtl = unix.EpollCtl

// addListener watches s's socket; where epoll refuses, watch says so and
// tries again.
func (b *epollBackend) addListener(s *lnSock) { b.watch(s, true) }

// watch watches s's socket, at its add (added set) and after an accept's
// back-off. Where epoll refuses (ENOSPC past fs.epoll.max_user_watches,
// ENOMEM: the shortage may last), it says so and tries again after the
// next, longer pause: a TCP socket left unwatched would keep its share of
// the connections (SO_REUSEPORT) in its backlog, never accepted, and one
// closed instead would leave a listener of one loop refusing every
// connection, its Listen having succeeded. The add's pauses end once the
// socket is watched, so that an accept's back-off to come starts from
// 5 ms and is said; an accept's go on until an accept succeeds. Loop
// goroutine.
func (b *epollBackend) watch(s *lnSock, added bool) {
	// EPOLLEXCLUSIVE: of the loops watching one Unix listening socket,
	// only one wakes per connection.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: s.index, Pad: epKindListener}
	err := listenerCtl(b.epfd, unix.EPOLL_CTL_ADD, s.fd, &ev)
	if err == nil {
		if added {
			s.backoff = 0
		}
		return
	}
	l := b.l
	l.pauseAccept(s, func() { b.watch(s, added) })
	l.e.cfg.Logf("engine: loop %d: watching %v: %v; trying again in %v", l.id, s.ln.Addr(), os.NewSyscallError("epoll_ctl", err), s.backoff)
}

func (b *epollBackend) removeListener(s *lnSock) {
	unix.EpollCtl(b.epfd, unix.EPOLL_CTL_DEL, s.fd, nil) // ENOENT while backing off
	b.l.closeListener(s)
}

// update sets the epoll interest of c from its state. A pause is applied
// lazily (lazy true): a paused connection that is watched for EPOLLIN stays
// watched until an event comes for it, when poll removes it (update with
// lazy false). So a pause undone before the peer sends anything (an HTTP
// proxy's client while its response is outstanding, paused and resumed per
// request) costs no epoll_ctl at all, where it cost two.
func (b *epollBackend) update(c *Conn, wantOut, lazy bool) {
	var want uint32
	have := c.k.events
	switch c.state {
	case stateConnecting:
		want = unix.EPOLLOUT
	case stateOpen, stateClosing:
		if c.k.recv == 0 && (c.paused == 0 || lazy && have&unix.EPOLLIN != 0) {
			want = unix.EPOLLIN
		}
		if wantOut {
			want |= unix.EPOLLOUT
		}
	}
	if want == have {
		return
	}
	b.ctls++
	ev := unix.EpollEvent{Events: want, Fd: c.slot, Pad: int32(c.gen & 0xffffff)}
	var err error
	switch {
	case have == 0:
		err = unix.EpollCtl(b.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev)
	case want == 0:
		err = unix.EpollCtl(b.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	default:
		err = unix.EpollCtl(b.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev)
	}
	if err != nil {
		c.k.events = 0
		c.abort(c.opError("epoll_ctl", "epoll_ctl", err))
		return
	}
	c.k.events = want
}

func (b *epollBackend) startConn(c *Conn) { b.update(c, false, false) }

func (b *epollBackend) dial(c *Conn) { b.update(c, false, false) }

func (b *epollBackend) setRead(c *Conn, on bool) {
	if c.k.closing {
		return
	}
	b.update(c, c.k.events&unix.EPOLLOUT != 0, true)
}

// flush writes c's queue, up to maxWritev segments per system call
// (writev, or write for one). Nothing is written once a write has met the
// peer's reset (bitSendFailed): a Close then ends c (Conn.peerReset).
func (b *epollBackend) flush(c *Conn) {
	if c.bits&bitSendFailed != 0 {
		c.sendFailedFlush()
		return
	}
	for c.queued > 0 {
		n, err := b.write(c)
		if n > 0 {
			b.l.st.writes.Add(1)
			c.sent(n)
			if c.state == stateClosed || c.k.closing {
				return
			}
			continue
		}
		switch err {
		case unix.EAGAIN:
			b.update(c, true, true)
			return
		case unix.EINTR:
			continue
		}
		// A peer that answered and reset (an HTTP server's early 413 to
		// an upload it did not read, closed with the upload unread) has
		// its answer in the socket: flush runs before the read of the
		// same event, and the iteration's flush after its events, so
		// the answer was lost with c (TestWriteFailureDeliversWhatCameBefore).
		// Kept (peerReset), c is read as any other until the read that
		// finds the socket's end, unless paused: no EPOLLOUT, which
		// would come back at every wait (level-triggered) and ask for
		// nothing.
		b.update(c, false, false)
		c.peerReset(c.opError("write", "write", err))
		return
	}
	if c.k.events&unix.EPOLLOUT != 0 {
		b.update(c, false, true)
	}
	c.afterDrain()
}

// write writes the head of c's queue: one segment with write(2), more with
// writev(2). The segments are off-heap (slab chunks or receive buffers).
func (b *epollBackend) write(c *Conn) (int, error) {
	segs := c.wq[c.wqHead:]
	if len(segs) == 1 {
		return unix.Write(c.fd, c.segBytes(segs[0]))
	}
	iov := b.iov[:0]
	for _, s := range segs[:min(len(segs), maxWritev)] {
		iov = append(iov, c.segBytes(s))
	}
	b.iov = iov
	return unix.Writev(c.fd, iov)
}

func (b *epollBackend) closeConn(c *Conn) {
	if c.k.closing {
		return
	}
	c.k.closing = true
	if c.k.recv != 0 {
		c.k.recv = 0
		if i := slices.Index(b.starved, c); i >= 0 {
			b.starved = slices.Delete(b.starved, i, i+1)
		}
	}
	if c.k.events != 0 {
		unix.EpollCtl(b.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
		c.k.events = 0
	}
	unix.Close(c.fd)
	b.l.finishClose(c)
}

func (b *epollBackend) recvBuf(id int32) []byte { return b.l.chunks.buf(id) }

func (b *epollBackend) releaseRecv(id int32) { b.l.chunks.put(id) }

func (b *epollBackend) poll(timeout time.Duration) error {
	// A reap for the timers (Loop.reapAll) takes every descriptor ready,
	// not one wait's worth (b.events): epoll_wait returns the first ones
	// of its ready list and puts those still ready (level-triggered) at
	// its end, so a round more for each len(b.events) slots covers them.
	rounds := 1
	if timeout == 0 && b.l.reaping {
		rounds += len(b.l.conns) / len(b.events)
	}
	for ; rounds > 0; rounds-- {
		n, err := b.wait(timeout)
		if err != nil || n < len(b.events) {
			return err
		}
	}
	return nil
}

// wait is one epoll_wait and the handling of what it returned: how many
// events. Loop goroutine.
func (b *epollBackend) wait(timeout time.Duration) (int, error) {
	msec := -1
	if timeout >= 0 {
		msec = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	if timeout > 0 {
		b.l.st.timedWaits.Add(1)
	}
	if len(b.starved) > 0 {
		if n := b.starvedTry.budget(len(b.l.chunks.free)); n > 0 {
			b.rearm(n)
		} else if ms := int((max(b.starvedTry.left(), 0) + time.Millisecond - 1) / time.Millisecond); msec < 0 || msec > ms {
			msec = ms
		}
	}
	if b.busy && msec != 0 {
		b.busyFor(msec)
	}
	t0 := b.l.waitStart()
	n, err := unix.EpollWait(b.epfd, b.events, msec)
	b.l.waited(t0)
	b.l.st.waits.Add(1)
	if err != nil {
		if err == unix.EINTR {
			b.l.st.interrupted.Add(1)
			return 0, nil
		}
		return 0, os.NewSyscallError("epoll_wait", err)
	}
	l := b.l
	l.st.cqes.Add(uint64(n))
	for i := 0; i < n; i++ {
		ev := &b.events[i]
		switch ev.Pad {
		case epKindWake:
			l.readWake()
			continue
		case epKindListener:
			if int(ev.Fd) < len(l.lns) {
				if s := l.lns[ev.Fd]; s != nil && !s.done {
					b.accept(s)
				}
			}
			continue
		}
		c := l.conn(ev.Fd, uint32(ev.Pad))
		if c == nil {
			continue
		}
		if c.state == stateConnecting {
			l.connected(c)
			continue
		}
		if ev.Events&unix.EPOLLOUT != 0 {
			b.flush(c)
		}
		switch {
		case c.state == stateOpen && c.paused == 0 && ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0:
			b.read(c)
		case ev.Events&unix.EPOLLERR != 0 && c.state != stateClosed && c.bits&bitSendFailed == 0:
			// (A write that met the reset took the socket's error: c
			// waits for its reading, peerReset.) A c paused with what
			// came before the reset unread in its socket is kept the
			// same way, to deliver it once reading resumes: ended now,
			// it dropped it (TestPausedResetDeliversHeld). Unwatched
			// now, as the lazy pause's next event would have it.
			soerr, _ := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			err := c.opError("read", "read", unix.Errno(soerr))
			if c.paused == 0 || !c.peerReset(err) {
				c.abort(err)
				break
			}
			b.update(c, false, false)
		case c.state != stateClosed && !c.k.closing && c.paused != 0 && c.k.events&unix.EPOLLIN != 0:
			// A paused connection still watched (update's lazy pause):
			// stop watching its input now that some came. Level-triggered,
			// the event (or an EPOLLHUP, which epoll reports whatever the
			// interest) would come back at every wait.
			b.update(c, c.k.events&unix.EPOLLOUT != 0, false)
		}
	}
	return n, nil
}

// busyFor sets the busy-poll time of a wait of msec milliseconds (-1: no
// bound; a wait of 0 does not busy poll): the kernel's busy loop
// (ep_busy_loop) ends at an event or after busy_poll_usecs, whatever the
// wait's timeout, so a wait shorter than Config.BusyPoll spun past its
// timeout and the loop's next timer (a CloseTimeout's sweep too) ran up to
// BusyPoll late. A wait busy polls for its timeout at most, and for
// BusyPoll again once a wait is longer. Timed waits are whole milliseconds,
// so only a BusyPoll above a millisecond ever changes it, one ioctl per
// change. Where the kernel refuses the change (it took the same parameters
// at init) the wait busy polls as before. Loop goroutine.
func (b *epollBackend) busyFor(msec int) {
	want := b.busyUsecs
	if msec > 0 && uint64(msec)*1000 < uint64(want) {
		want = uint32(msec) * 1000
	}
	if want == b.params.BusyPollUsecs {
		return
	}
	p := b.params
	p.BusyPollUsecs = want
	if sys.EpollSetParams(b.epfd, &p) == nil {
		b.params = p
	}
}

func (b *epollBackend) accept(s *lnSock) {
	for i := 0; i < 64; i++ {
		fd, _, err := unix.Accept4(s.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			// Level-triggered, the socket stays readable while out of
			// descriptors, while an error repeats, and once
			// Listener.Close has shut it down: stop watching it, for a
			// while or until its removal.
			if errno, ok := err.(unix.Errno); s.ln.closed.Load() || ok && b.l.acceptBackoff(s, errno, func() { b.watch(s, false) }) {
				unix.EpollCtl(b.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
			}
			return
		}
		s.backoff, s.failed = 0, false
		b.l.accepted(fd, s)
		if s.done {
			return
		}
	}
}

func (b *epollBackend) read(c *Conn) {
	l := b.l
	for i := 0; i < 8; i++ {
		id, err := l.chunks.get()
		if err != nil {
			l.st.noBufs.Add(1)
			b.starve(c)
			return
		}
		buf := l.chunks.buf(id)
		n, err := unix.Read(c.fd, buf)
		if n > 0 {
			if b.busy && !l.waitCPU && !c.k.napiSeen {
				// Busy polling starts once a socket has a NAPI id.
				_, l.waitCPU = l.napiSocket(c)
			}
			l.deliver(c, id, n)
			if n < len(buf) || c.state != stateOpen || c.paused != 0 {
				return
			}
			continue
		}
		l.chunks.put(id)
		switch {
		case n == 0 && err == nil:
			l.eof(c)
			return
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR:
			continue
		}
		c.abort(c.opError("read", "read", err))
		return
	}
}

// starve stops watching c's input, its read having found no chunk free and
// the slab unable to grow (out of memory), until rearm watches it again.
// Level-triggered, its socket would otherwise be reported by every wait,
// the loop spinning until a chunk came back. Loop goroutine.
func (b *epollBackend) starve(c *Conn) {
	if c.k.recv != 0 {
		return
	}
	c.k.recv = 1
	if len(b.starved) == 0 {
		b.starvedTry.listed()
	}
	b.starved = append(b.starved, c)
	b.update(c, c.k.events&unix.EPOLLOUT != 0, false)
}

// rearm watches the input of up to n starved connections again, first
// starved first: n is as many as the slab has chunks free (each read takes
// one at least), or one to try whether the slab can grow. One that finds
// none is listed again at the end. Connections
// paused meanwhile (or closing) leave the list without being counted:
// their resume watches their input again (update). Called before a wait
// once chunks are free, whatever freed them (a write queue's progress, a
// released buffer). Loop goroutine.
func (b *epollBackend) rearm(n int) {
	i := 0
	for ; i < len(b.starved) && n > 0; i++ {
		c := b.starved[i]
		b.starved[i] = nil
		c.k.recv = 0 // first: an epoll_ctl failing closes c (closeConn)
		if c.state == stateOpen && c.paused == 0 && !c.k.closing {
			b.update(c, c.k.events&unix.EPOLLOUT != 0, false)
			n--
		}
	}
	k := copy(b.starved, b.starved[i:])
	clear(b.starved[k:])
	b.starved = b.starved[:k]
}
