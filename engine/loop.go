package engine

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// backend is the kernel side of a loop. All methods run on the loop thread
// except wake.
type backend interface {
	// init sets the backend up on the (already pinned) loop thread.
	init(l *Loop) error
	// addListener starts accepting on fd (where the kernel refuses for
	// now, after a pause, saying so); removeListener stops and closes it
	// (possibly later, once no operation refers to it).
	addListener(s *lnSock)
	removeListener(s *lnSock)
	// startConn begins receiving on an open connection; dial waits for
	// the non-blocking connect of c to finish. On failure they abort c.
	startConn(c *Conn)
	dial(c *Conn)
	// setRead turns receiving on c on or off.
	setRead(c *Conn, on bool)
	// flush starts sending c's write queue.
	flush(c *Conn)
	// closeConn releases kernel references to c's fd, closes it and
	// eventually calls l.finishClose(c).
	closeConn(c *Conn)
	// poll submits pending work, waits up to timeout (<0: forever) and
	// dispatches what completed.
	poll(timeout time.Duration) error
	// recvBuf returns receive buffer id's memory; releaseRecv gives it back.
	recvBuf(id int32) []byte
	releaseRecv(id int32)
	// idle reports whether no kernel operation is in flight, so the loop
	// may exit; inFlight says which are, for a loop slow to stop.
	idle() bool
	inFlight() string
	// msgRing wakes loop dst, whose ring has fd ringFd, by MSG_RING from
	// this loop's ring; false if this backend cannot.
	msgRing(dst *Loop, ringFd int) bool
	// wakeAt has a kernel timer end the loop's waits from at (nanotime,
	// the loop's deadline) on, and reports whether it did: false, and
	// the loop bounds its wait instead.
	wakeAt(at int64) bool
	// runs reports the backend the loop runs, once init has succeeded:
	// the engine's, or uring where the kernel refused uring-sqpoll's
	// SQPOLL ring or uring-napi's NAPI registration.
	runs() Backend
	// minWait reports the minimum wait the loop's waits use once init
	// has succeeded: Config.BatchWait on a uring loop whose kernel has
	// IORING_FEAT_MIN_TIMEOUT (6.12) and no SQPOLL thread, else 0.
	minWait() time.Duration
	// close frees the backend's kernel objects.
	close()
}

// lnSock is one loop's socket of a Listener.
type lnSock struct {
	ln    *Listener
	fd    int   // -1 once the loop has closed it (closeListener)
	index int32 // in Loop.lns
	done  bool
	// conns counts the connections accepted on the socket that name it
	// (Conn.lnSlot) until their OnClose has returned: its place in
	// Loop.lns is not taken by another socket before.
	conns int32
	// backoff is the pause before accepting again after running out of
	// descriptors or memory, or an accept error that repeats
	// (acceptBackoff); 0 after an accept.
	backoff time.Duration
	// failed is set by an accept error that pauses only once it repeats
	// (acceptBackoff); cleared by an accept.
	failed bool
}

// Loop is one event loop, bound to one CPU. Unless a method says otherwise it
// may be called only on the loop goroutine (in Handler callbacks, timer
// functions and functions run by Post).
type Loop struct {
	e   *Engine
	id  int
	cpu int
	be  backend
	h   Handler
	hwm int
	// readPast is Config.ReadPastHighWater: the mark does not pause
	// reading.
	readPast bool
	// failed is why the loop left before the engine stopped (its kernel
	// queue failed). Written by the loop, read once the loops have exited.
	failed error
	// ringLimit is Config.MaxQueuedReadBuffers where receive buffers come
	// from a ring the loop's connections share (the uring backends); 0
	// where they come from the send slab (epoll) or the bound is off (-1):
	// then nothing is copied off the ring. ringHeld counts the receive
	// buffers that write queues and paused connections hold; from
	// ringShare (half the ring) on, more are copied to the send slab.
	ringLimit, ringHeld, ringShare int
	wakeFd                         int // eventfd, -1 once closed; guarded by mu outside the loop

	// left is closed with wakeFd (closeWakeFd): see Left.
	left chan struct{}

	// Post queue: producers append under mu; the loop swaps it out.
	mu          sync.Mutex
	posted      []func()
	spare       []func()
	wakePending atomic.Bool
	ringFd      atomic.Int32 // io_uring fd for MSG_RING wake-ups, -1 if none
	tid         atomic.Int32 // loop thread id (in loopThreads while it serves)
	// msgIn counts the MSG_RING wake-ups loops' rings have prepared with
	// ringFd and not yet seen complete (or given back, their ring closed),
	// plus msgHeld once the loop's ring has closed with some counted: the
	// ring's fd number, heldFd, then names the loop's eventfd until the
	// last of them is given back, whose loop closes it
	// (uringBackend.close, msgGone).
	msgIn  atomic.Int32
	heldFd atomic.Int32
	// keepThread: the backend changed kernel state of the loop's thread
	// that cannot be put back (its io-wq workers pinned to the loop's
	// CPU): the thread exits with the loop. Loop goroutine.
	keepThread bool
	// keepSlab: the ring's Close could not confirm that its requests
	// have ended, so a send may still read the send slab: cleanup leaves
	// it mapped. Loop goroutine.
	keepSlab bool

	conns     []*Conn  // slot table
	slotGen   []uint32 // generation per slot, part of every kernel handle
	free      []int32
	dirty     []*Conn
	closed    []*Conn   // closed, their OnClose not yet called (runCloses)
	lns       []*lnSock // at their index (lnSock.index)
	lnFree    []int32   // places in lns to take: their sockets closed, no connection names them (freeListener)
	timers    timerHeap
	chunks    slab          // write-queue chunks (and epoll receive buffers)
	pages     string        // page kind of the buffers, set at start
	pagesRecv string        // page kind of the uring receive ring
	backend   Backend       // what the loop runs (backend.runs), set at start as pages is
	batchWait time.Duration // its waits' minimum wait (backend.minWait), set at start as pages is
	// tlsScratch is where a TLS Conn's Writev gathers plaintext (up to
	// tlsGather), on the Go heap; crypto/tls copies it as it encrypts.
	tlsScratch []byte
	// tlsStarved are TLS connections whose pump found the send slab
	// without a free chunk and unable to grow (pauseStarved), first
	// starved first; an entry is nil once its connection has closed.
	// starvedTry paces their tries with no chunk free.
	tlsStarved []*Conn
	starvedTry starveTry

	// owned counts the times each receive buffer id was given to the
	// handler, odd while it owns the buffer: delivered to OnData or held
	// for it, not yet released or queued (own, disown); ownedCopies the
	// same for data copied off the ring, by slab chunk. A Buffer carries
	// the count it was given with, so a release of a buffer not owned,
	// or owned again since for a later receive, panics instead of giving
	// its memory back twice.
	owned, ownedCopies ownSet

	stopping bool
	// reaping is set while reapAll's poll runs: the backend is to reap
	// every completion the kernel holds, not a batch of them.
	reaping bool
	// stopAt is when serve first saw the loop stopping (nanotime), 0
	// before; stallSaid that it has said what a slow stop waits for.
	stopAt    int64
	stallSaid bool
	st        counters

	// woke is when the loop's last wait returned, yielded when it last
	// passed through the Go scheduler (nanotime); see yieldEvery. A
	// timer due after woke became due while the loop was not waiting:
	// serve reaps before it runs.
	woke, yielded int64
	// waitCPU is set once a busy-poll loop (uring-napi, epoll-busypoll) has
	// a socket with a NAPI id, that is once its waits can busy poll: each
	// wait then also reads the thread's CPU clock (Stats.WaitCPUNanos), from
	// cpu0 at its start. Before that (loopback, or devices without NAPI) the
	// waits cannot poll and the two clock reads would be pure cost.
	waitCPU bool
	cpu0    int64

	// WriteTimeout and CloseTimeout (see sweep): cto is
	// Config.CloseTimeout; the sweep runs every sweepEvery (0: never)
	// while sweepAt (nanotime) is not 0, counts stalls every tickSweeps-th
	// time, and resets a connection whose stall count passes wtoTicks (0:
	// no WriteTimeout).
	cto        time.Duration
	sweepEvery time.Duration
	sweepAt    int64
	tickSweeps int
	wtoTicks   uint8
	// queues lists the connections the sweep visits: those with a write
	// queue, from the flush that finds it (flushDirty) until it empties
	// (Conn.sent) or is dropped (Conn.dropQueue, which finishClose calls),
	// so that a sweep's cost follows the queues, not the connections.
	// queuePos is per slot: 1 + the index of its connection in queues, 0
	// if not there.
	queues   []connRef
	queuePos []int32
	// sweeps counts the sweeps (for the ticks, and tests); sweepVisits
	// the connections they looked at, for tests.
	sweeps, sweepVisits int
}

// ID is the loop's index in Engine.Loops. Any goroutine.
func (l *Loop) ID() int { return l.id }

// CPU is the CPU the loop's thread is pinned to. Any goroutine.
func (l *Loop) CPU() int { return l.cpu }

// ThreadID is the Linux thread id of the loop's thread, 0 before it
// started: read /proc/self/task/<id>/schedstat for the loop's CPU time.
// Any goroutine.
func (l *Loop) ThreadID() int { return int(l.tid.Load()) }

// Engine returns the engine the loop belongs to. Any goroutine.
func (l *Loop) Engine() *Engine { return l.e }

// Stats returns a snapshot of the loop's counters. Any goroutine.
func (l *Loop) Stats() Stats { return l.st.snapshot() }

// Post queues f to run on the loop goroutine and wakes the loop. Wake-ups are
// coalesced: many Posts before the loop runs cost one eventfd write. Functions
// run in the order posted. Once the loop has exited (the engine stopped, or
// was shut down without running) f can never run and is dropped. Any
// goroutine; f must not block.
func (l *Loop) Post(f func()) { l.post(f) }

// Left returns a channel closed once the loop has exited (the engine
// stopped, or the loop left early, its kernel queue failed, the others
// serving on) or will never run: from then on no posted function runs,
// those queued before included. A caller that waits for a posted
// function waits for this too. Any goroutine.
func (l *Loop) Left() <-chan struct{} { return l.left }

// post is Post, reporting whether f was queued: false once the loop has
// exited. Any goroutine.
func (l *Loop) post(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wakeFd < 0 {
		return false
	}
	if l.enqueueLocked(f) {
		l.wakeLocked()
	}
	return true
}

// enqueueLocked queues f unless the loop has exited, and reports whether
// the loop is to be woken: no wake-up was pending. l.mu held.
func (l *Loop) enqueueLocked(f func()) bool {
	if l.wakeFd < 0 { // exited: f could never run
		return false
	}
	l.posted = append(l.posted, f)
	return l.wakePending.CompareAndSwap(false, true)
}

// PostTo queues f to run on dst's loop goroutine, like dst.Post, but wakes
// dst with an IORING_OP_MSG_RING from l's ring when both loops run io_uring
// in the same engine (a ring-to-ring message, no eventfd write). Call it on
// l's goroutine.
func (l *Loop) PostTo(dst *Loop, f func()) {
	dst.mu.Lock()
	if dst.enqueueLocked(f) {
		// MSG_RING only within the engine: its completion names dst by
		// its index in l's engine, to wake it through its eventfd should
		// the message fail.
		if fd := dst.ringFd.Load(); fd < 0 || l.stopping || dst.e != l.e || !l.be.msgRing(dst, int(fd)) {
			dst.wakeLocked()
		}
	}
	dst.mu.Unlock()
}

// wake interrupts the loop's wait. Any goroutine.
func (l *Loop) wake() {
	l.mu.Lock()
	l.wakeLocked()
	l.mu.Unlock()
}

// starveRetry is how long connections starved of chunks (the epoll
// backends' reads, TLS decryption) wait, with no chunk freed, before one
// of them tries again (and the slab to grow).
const starveRetry = 100 * time.Millisecond

// starveTry paces a list of connections starved of chunks (epollBackend's
// starved, Loop.tlsStarved): when they last tried with no chunk free, or
// when the first was listed, nanotime. With none free one tries again
// every starveRetry: the slab may grow by then (memory freed elsewhere)
// though no chunk of the loop's came back.
type starveTry int64

// listed notes the first connection listed: the first try with none free
// comes starveRetry after it.
func (t *starveTry) listed() { *t = starveTry(nanotime()) }

// left is how long until the next try with no chunk free; 0 or less when
// it is due.
func (t starveTry) left() time.Duration {
	return starveRetry - time.Duration(nanotime()-int64(t))
}

// budget returns how many starved connections may try now, with free
// chunks free: as many (each read takes one at least), or with none one
// once a try is due (which it counts), else 0.
func (t *starveTry) budget(free int) int {
	switch {
	case free > 0:
		return free
	case t.left() > 0:
		return 0
	}
	t.listed()
	return 1
}

// resumeStarved pumps again the TLS connections listed in tlsStarved, first
// starved first, as many as the slab has chunks free (each pump takes one
// at least), or one once starveRetry has passed since the last try with
// none free: the slab may grow by then (memory freed elsewhere) though no
// chunk of this loop's came back. One that finds none is listed again at
// the end; one paused otherwise meanwhile leaves the list without being
// counted, its resume pumping it. Called before each wait, so that chunks
// freed anywhere (a send's completion, a flush, a released buffer) reach
// them. It returns how long that wait may last, -1 for no bound: 0 while
// chunks are free for connections still listed, until the next try while
// none are. Loop goroutine.
func (l *Loop) resumeStarved() time.Duration {
	if len(l.tlsStarved) == 0 {
		return -1
	}
	n := l.starvedTry.budget(len(l.chunks.free))
	if n == 0 {
		return max(l.starvedTry.left(), 0)
	}
	// Those listed again while this runs come after end: each is tried
	// once.
	i, end := 0, len(l.tlsStarved)
	for ; i < end && n > 0; i++ {
		c := l.tlsStarved[i]
		if c == nil {
			continue
		}
		l.tlsStarved[i] = nil
		if c.state == stateOpen && c.paused&^(pauseStarved|pauseEOF) == 0 {
			n--
		}
		c.resume(pauseStarved)
	}
	k := copy(l.tlsStarved, l.tlsStarved[i:])
	clear(l.tlsStarved[k:])
	l.tlsStarved = l.tlsStarved[:k]
	switch {
	case k == 0:
		return -1
	case len(l.chunks.free) > 0:
		return 0
	}
	return max(l.starvedTry.left(), 0)
}

// runPosts runs the queued functions. Loop goroutine.
func (l *Loop) runPosts() {
	l.wakePending.Store(false)
	l.mu.Lock()
	fs := l.posted
	l.posted = l.spare[:0]
	l.mu.Unlock()
	for i, f := range fs {
		f()
		fs[i] = nil
	}
	l.mu.Lock()
	l.spare = fs[:0]
	l.mu.Unlock()
}

// Dirty connections are flushed once per iteration so writes batch.
func (l *Loop) markDirty(c *Conn) {
	if !c.dirty {
		c.dirty = true
		l.dirty = append(l.dirty, c)
	}
}

func (l *Loop) flushDirty() {
	for i := 0; i < len(l.dirty); i++ {
		c := l.dirty[i]
		l.dirty[i] = nil
		c.dirty = false
		if c.state == stateOpen || c.state == stateClosing {
			if c.queued > 0 {
				if l.sweepEvery > 0 {
					l.listQueue(c)
					if l.sweepAt == 0 {
						l.sweepAt = l.woke + int64(l.sweepEvery)
					}
				}
				l.be.flush(c)
			} else {
				c.afterDrain()
			}
		}
	}
	l.dirty = l.dirty[:0]
}

// setTimeouts sets the sweep up for Config.WriteTimeout (wto) and
// CloseTimeout (cto): every quarter of the shorter, but no more often
// than every millisecond and at least every maxWait (a wait's bound).
// WriteTimeout's count of stalled ticks keeps to a byte: a tick is every
// tickSweeps-th sweep, tickSweeps sweep periods making at least a 200th of
// wto, so that a long WriteTimeout neither overflows the count nor
// stretches the sweep period that checks a short CloseTimeout. Nothing
// here overflows, up to math.MaxInt64 for either.
func (l *Loop) setTimeouts(wto, cto time.Duration) {
	l.cto = cto
	if wto <= 0 && cto <= 0 {
		return
	}
	every := maxWait
	for _, d := range []time.Duration{wto, cto} {
		if d > 0 {
			every = min(every, d/4)
		}
	}
	l.sweepEvery = max(every, time.Millisecond)
	if wto > 0 {
		tick := max(wto/200, l.sweepEvery)
		l.tickSweeps = int((tick + l.sweepEvery - 1) / l.sweepEvery)
		tick = time.Duration(l.tickSweeps) * l.sweepEvery
		ticks := wto / tick
		if wto%tick != 0 {
			ticks++
		}
		l.wtoTicks = uint8(ticks) // at most 201: tick >= wto/200 >= 1ms, or wto < 200ms
	}
}

// sweep resets the connections whose write queue has not moved for
// Config.WriteTimeout, or that a Close has not drained in CloseTimeout, and
// sets the next sweep if some other connection has a queue (else the next
// flush of a queue sets it). It visits only the connections in l.queues. A
// connection's stall count is 1 at the first tick (every tickSweeps-th
// sweep) after its queue last moved (or filled), and wtoTicks ticks, each
// at least tickSweeps sweep periods after the last, later it passes
// wtoTicks: WriteTimeout has passed. The
// OnClose of the connections it resets comes after it (runCloses), so no
// handler takes another connection out of l.queues during the sweep. Loop
// goroutine.
func (l *Loop) sweep() {
	l.sweepAt = 0
	now := nanotime()
	l.sweeps++
	tick := l.wtoTicks > 0 && l.sweeps%l.tickSweeps == 0
	for i := 0; i < len(l.queues); {
		l.sweepVisits++
		c := l.conn(l.queues[i].slot, l.queues[i].gen)
		if c == nil { // cannot be: finishClose took it out
			l.unlistAt(i)
			continue
		}
		if c.queued > 0 && !c.k.closing && (c.state == stateOpen || c.state == stateClosing) {
			if tick && c.stall < math.MaxUint8 {
				c.stall++
			}
			if !(l.wtoTicks > 0 && c.stall > l.wtoTicks || c.state == stateClosing && l.cto > 0 && now-c.tmo >= int64(l.cto)) {
				i++
				continue
			}
			c.expire()
		}
		// c leaves the list (its reset took it out already unless sends
		// were in flight); place i then holds the next one to visit.
		l.unlistQueue(c)
	}
	if len(l.queues) > 0 {
		l.sweepAt = now + int64(l.sweepEvery)
	}
}

// connRef names a connection by slot and generation.
type connRef struct {
	slot int32
	gen  uint32
}

// listQueue puts c, whose queue is being flushed, in l.queues for the
// sweep, unless it is there. Loop goroutine.
func (l *Loop) listQueue(c *Conn) {
	if l.queuePos[c.slot] != 0 {
		return
	}
	l.queues = append(l.queues, connRef{c.slot, c.gen})
	l.queuePos[c.slot] = int32(len(l.queues))
}

// unlistQueue takes c out of l.queues, if it is there: its queue emptied
// or was dropped. The generation check keeps a closed c from taking out
// the connection that has its slot now. Loop goroutine.
func (l *Loop) unlistQueue(c *Conn) {
	if p := l.queuePos[c.slot]; p != 0 && l.queues[p-1].gen == c.gen {
		l.unlistAt(int(p - 1))
	}
}

// unlistAt takes entry i out of l.queues, moving the last one into its
// place.
func (l *Loop) unlistAt(i int) {
	l.queuePos[l.queues[i].slot] = 0
	last := len(l.queues) - 1
	if i != last {
		m := l.queues[last]
		l.queues[i] = m
		l.queuePos[m.slot] = int32(i + 1)
	}
	l.queues[last] = connRef{}
	l.queues = l.queues[:last]
}

// addConn puts c in the slot table.
func (l *Loop) addConn(c *Conn) {
	if n := len(l.free); n > 0 {
		c.slot = l.free[n-1]
		l.free = l.free[:n-1]
		l.conns[c.slot] = c
	} else {
		c.slot = int32(len(l.conns))
		l.conns = append(l.conns, c)
		l.slotGen = append(l.slotGen, 0)
		l.queuePos = append(l.queuePos, 0)
	}
	l.slotGen[c.slot]++
	c.gen = l.slotGen[c.slot]
	l.st.open.Add(1)
}

// conn returns the connection in slot if its generation matches.
func (l *Loop) conn(slot int32, gen uint32) *Conn {
	if slot < 0 || int(slot) >= len(l.conns) {
		return nil
	}
	c := l.conns[slot]
	if c == nil || c.gen&0xffffff != gen&0xffffff { // user_data keeps 24 bits
		return nil
	}
	return c
}

// finishClose is called by the backend once c's fd is closed.
func (l *Loop) finishClose(c *Conn) {
	if c.state == stateClosed {
		return
	}
	c.state = stateClosed
	c.fd = -1     // closed: the number may name another file already
	c.dropQueue() // and out of l.queues, before the slot is reused
	if c.tls != nil {
		c.tls.closed()
	}
	c.stopTimer()
	if c.paused&pauseStarved != 0 {
		// Not deleted: resumeStarved may be going through the list.
		l.tlsStarved[slices.Index(l.tlsStarved, c)] = nil
	}
	l.conns[c.slot] = nil
	l.free = append(l.free, c.slot)
	l.st.open.Add(-1)
	l.st.closed.Add(1)
	// OnClose waits for runCloses: never inside the callback whose
	// Reset (or other abort) closed c, which on epoll closes the socket
	// at once, so that a handler may touch its state after Reset on
	// every backend.
	l.closed = append(l.closed, c)
}

// runCloses calls OnClose for the connections closed since it last ran,
// in the order they closed, those its OnClose calls close too. The loop
// calls it after each of its steps (timers, posted functions, flushes, a
// wait's completions), so OnClose comes in the iteration that closed the
// connection, once the callback that closed it has returned. Loop
// goroutine.
func (l *Loop) runCloses() {
	if len(l.closed) > 0 {
		l.callOnClose()
	}
}

// callOnClose is runCloses with connections to tell about.
func (l *Loop) callOnClose() {
	for i := 0; i < len(l.closed); i++ {
		c := l.closed[i]
		l.closed[i] = nil
		l.h.OnClose(c, c.err)
		if c.lnSlot != 0 {
			s := l.lns[c.lnSlot-1]
			c.lnSlot = 0 // Listener: nil from here on
			s.conns--
			l.freeListener(s)
		}
	}
	l.closed = l.closed[:0]
}

// deliver hands a received buffer to the handler.
func (l *Loop) deliver(c *Conn, id int32, n int) {
	l.st.bytesRead.Add(uint64(n))
	if c.state != stateOpen || c.paused&pauseClosing != 0 {
		l.be.releaseRecv(id)
		return
	}
	if c.lingering {
		l.be.releaseRecv(id)
		if c.lingerLeft -= int32(n); c.lingerLeft < 0 {
			c.Close()
		}
		return
	}
	if c.tls != nil {
		c.tls.received(c, id, n)
		return
	}
	if c.paused&(pauseHWM|pauseUser) != 0 || len(c.held) > 0 {
		// Reading is paused but the kernel had already received this
		// (multishot recv ends only after its cancel is processed): hold
		// the data, out of the write queue, until reading resumes; off the
		// shared receive ring once paused connections and write queues
		// hold half of it, since they may keep it for as long as their
		// peers do not read.
		if l.ringLimit > 0 && l.ringHeld >= l.ringShare {
			id = l.copyOffRing(id, n)
		}
		if id >= 0 {
			l.ringHeld++
		}
		l.own(id, 0)
		c.held = append(c.held, heldBuf{id, int32(n)})
		return
	}
	l.deliverNow(c, id, n)
}

func (l *Loop) deliverNow(c *Conn, id int32, n int) {
	l.st.reads.Add(1)
	b := Buffer{l: l, id: id, n: int32(n), gen: l.own(id, 0)}
	if !l.h.OnData(c, b) {
		l.releaseBuf(id, b.gen)
	}
}

// eof handles the peer's FIN, or the socket's end after a write that met
// the peer's reset (bitSendFailed: no FIN, the write took the socket's
// error), which ends c with the write's error once what came before has
// been delivered (Conn.peerReset).
func (l *Loop) eof(c *Conn) {
	if c.bits&bitSendFailed != 0 {
		// Paused with nothing held, c has nothing more to deliver.
		if c.state == stateOpen && c.holding() {
			c.bits |= bitHeldEOF // deliverHeld comes back here
			return
		}
		c.abort(c.err)
		return
	}
	if c.tls != nil && !c.tls.ended && !c.lingering {
		// The socket's: the stream's comes from crypto/tls (a lingering
		// c, which reads nothing more, closes at the socket's).
		c.tls.sockEOF(c)
		return
	}
	if c.state != stateOpen || c.gotEOF {
		return
	}
	if len(c.held) > 0 || c.paused&(pauseUser|pauseHWM) != 0 {
		// After the data held, or once reading resumes: a backend whose
		// pause is lazy (uring) may see the FIN while paused.
		c.bits |= bitHeldEOF
		return
	}
	c.gotEOF = true
	if c.lingering {
		c.Close()
		return
	}
	c.pause(pauseEOF)
	if c.paused&pauseClosing == 0 {
		l.h.OnEOF(c)
	}
}

// stopStall is how long a stopping loop may wait for its connections to
// close and its kernel operations to end before it says what it waits
// for (Engine.stall: its value at New); tests shorten it.
var stopStall = 5 * time.Second

// sayStall, on a loop stopping for longer than stopStall, says once what it
// waits for: a loop can exit only once the kernel has ended every
// operation that refers to its memory, however long Shutdown's ctx.
// Loop goroutine, stopping.
func (l *Loop) sayStall() {
	if l.stallSaid {
		return
	}
	now := nanotime()
	if l.stopAt == 0 {
		l.stopAt = now
		return
	}
	if d := time.Duration(now - l.stopAt); d >= l.e.stall {
		l.stallSaid = true
		l.e.cfg.Logf("engine: loop %d (CPU %d) has been stopping for %v: %d connections open, %s",
			l.id, l.cpu, d.Round(time.Millisecond), l.st.open.Load(), l.be.inFlight())
	}
}

// freeListener gives s's place in lns to the sockets to come once its
// socket is closed and no connection names it. Loop goroutine.
func (l *Loop) freeListener(s *lnSock) {
	if s.fd < 0 && s.conns == 0 && l.lns[s.index] == s {
		l.lns[s.index] = nil
		l.lnFree = append(l.lnFree, s.index)
	}
}

// drain reports whether the loop may exit: stopping, no connections, no
// kernel work in flight.
func (l *Loop) drained() bool {
	return l.stopping && l.st.open.Load() == 0 && l.be.idle()
}

// abortAll closes every connection with ErrClosed and every listener. A
// connection is reset where its handler had not ended what it sends
// (open, neither CloseWrite nor CloseLinger called) or where its queue is
// dropped, as one CloseTimeout gives up on: a FIN would tell the peer it
// had all that was sent, where the connection was cut (a proxy's tunnel
// at the end of a drain, its server mid-stream: the client read a stream
// cut short as a whole one, whether the server's bytes were still queued
// for it or not, and the server the client's). One whose handler ended
// its stream (Close, CloseWrite, CloseLinger) with nothing left queued
// ends with its FIN, as it would have: a reset would drop what its socket
// still holds of a whole stream, and the peer, were it still sending,
// gets a reset from the kernel for what comes after the close.
func (l *Loop) abortAll() {
	for _, s := range l.lns {
		if s != nil && !s.done {
			s.done = true
			l.be.removeListener(s)
		}
	}
	for _, c := range l.conns {
		if c != nil && c.state != stateClosed {
			if !c.k.closing {
				l.e.cut.Add(1) // closed here, not drained (Shutdown)
			}
			if c.state != stateConnecting && (c.queued > 0 || c.state == stateOpen && !c.lingering && !c.wantShutWr) {
				c.reset(ErrClosed)
				continue
			}
			c.abort(ErrClosed)
		}
	}
}

// Buffer is received data, living in the loop's off-heap buffer memory. It
// is a small value; copying it does not copy the data. Its methods may be
// called only on the loop goroutine that delivered it.
type Buffer struct {
	l   *Loop
	id  int32 // a receive buffer (>= 0), or a send-slab chunk c as -c-1 (see bufBytes)
	n   int32
	gen uint64 // the id's count in Loop.owned (or ownedCopies) when given; 64 bits fill Buffer's padding
}

// Bytes returns the received bytes. The slice is valid until the buffer is
// released. Loop goroutine.
func (b Buffer) Bytes() []byte { return b.l.bufBytes(b.id)[:b.n] }

// Len is the number of received bytes. Loop goroutine.
func (b Buffer) Len() int { return int(b.n) }

// Release gives a kept buffer back to the loop. Call it exactly once for each
// buffer OnData returned true for (unless it went to Conn.WriteBuffer).
// Releasing a buffer twice, or one OnData returned false for, or one
// given to Conn.WriteBuffer, panics ("engine: Buffer released twice or
// not owned"): its memory would go back to the loop twice and carry two
// later receives at once. Loop goroutine.
func (b Buffer) Release() { b.l.releaseBuf(b.id, b.gen) }

// Unring returns b's bytes off the loop's receive ring, for a handler
// about to keep a buffer while its connection waits on something else (a
// queue, a peer's window): the bytes are copied into a send-slab chunk and
// the receive buffer goes back to the ring at once, as WriteBuffer does
// past MaxQueuedReadBuffers. The ring is shared by every connection of the
// loop and buffers a handler keeps are not bounded by the engine, so a
// handler holding one per waiting connection could take it all. A buffer
// already off the ring (every buffer of the epoll backends), one the slab
// cannot grow for, and any with MaxQueuedReadBuffers -1 (nothing copied
// off the ring) is returned as it is. b is not to be used after
// the call; the buffer returned is released as b would have been. The
// handler keeps the buffer returned: OnData that calls Unring returns
// true, for if it returns false the engine releases b, which Unring has
// given up, and that panics as a second Release does. A buffer released
// already, or given to Conn.WriteBuffer, panics as a second Release does.
// Loop goroutine.
func (b Buffer) Unring() Buffer {
	l := b.l
	l.disown(b.id, b.gen)
	if b.id < 0 || l.ringLimit == 0 {
		l.own(b.id, b.gen)
		return b
	}
	id := l.copyOffRing(b.id, int(b.n))
	if id == b.id {
		l.own(id, b.gen) // not copied: the slab cannot grow
		return b
	}
	return Buffer{l: l, id: id, n: b.n, gen: l.own(id, 0)}
}

// A buffer id names a receive buffer (id >= 0: the backend's) or, for data
// copied off the receive ring (MaxQueuedReadBuffers), a send-slab chunk c as
// -c-1.
func (l *Loop) bufBytes(id int32) []byte {
	if id < 0 {
		return l.chunks.buf(-id - 1)
	}
	return l.be.recvBuf(id)
}

// releaseBuf takes buffer id from the handler (disown: gen as there) and
// gives it back. Loop goroutine.
func (l *Loop) releaseBuf(id int32, gen uint64) {
	l.disown(id, gen)
	l.freeBuf(id)
}

// freeBuf gives buffer id back to the ring or the slab, its ownership
// already taken (disown). Loop goroutine.
func (l *Loop) freeBuf(id int32) {
	if id < 0 {
		l.chunks.put(-id - 1)
		return
	}
	l.be.releaseRecv(id)
}

// own marks buffer id as the handler's: delivered to OnData, or held to
// be, until it is released (Loop.disown). It returns the id's count, the
// Buffer's gen: a new one unless the handler owns id already (held, then
// delivered) or gen is given (Unring's b, given back as it was). Loop
// goroutine.
func (l *Loop) own(id int32, gen uint64) uint64 {
	if id >= 0 {
		return l.owned.own(id, gen)
	}
	return l.ownedCopies.own(-id-1, gen)
}

// disown takes buffer id from the handler as it is released or queued; it
// panics if the handler does not own it (released already), or owns it
// under another count than gen (a Buffer released already whose id came
// back for a later receive; 0: the engine's own release of what it held).
// Loop goroutine.
func (l *Loop) disown(id int32, gen uint64) {
	ok := false
	if id >= 0 {
		ok = l.owned.take(id, gen)
	} else {
		ok = l.ownedCopies.take(-id-1, gen)
	}
	if !ok {
		panic("engine: Buffer released twice or not owned")
	}
}

// ownSet counts, per small non-negative integer, the times it was taken
// and given back: odd while taken. A count given with a Buffer tells that
// Buffer from a later one of the same id: 64 bits, as a 32-bit count came
// back to a Buffer's after 2^31 receives in its id.
type ownSet []uint64

// own takes i, growing s as needed, and returns its count (odd): the next
// one, or gen if not 0 (i given back just before under gen, taken again as
// it was). If i is taken already its count stays.
func (s *ownSet) own(i int32, gen uint64) uint64 {
	if int(i) >= len(*s) {
		*s = append(*s, make(ownSet, int(i)+1-len(*s))...)
	}
	switch {
	case (*s)[i]&1 != 0:
	case gen != 0:
		(*s)[i] = gen
	default:
		(*s)[i]++
	}
	return (*s)[i]
}

// take gives i back and reports whether it was taken, under count gen
// unless gen is 0.
func (s ownSet) take(i int32, gen uint64) bool {
	if int(i) >= len(s) || s[i]&1 == 0 || gen != 0 && s[i] != gen {
		return false
	}
	s[i]++
	return true
}

// releaseHeld releases a buffer a paused connection held.
func (l *Loop) releaseHeld(id int32) {
	if id >= 0 {
		l.ringHeld--
	}
	l.releaseBuf(id, 0)
}

// copyOffRing copies n bytes of receive buffer id into a send-slab chunk,
// gives id back to the receive ring and returns the chunk as a buffer id
// (-c-1). If the slab cannot grow it returns id unchanged.
func (l *Loop) copyOffRing(id int32, n int) int32 {
	c, err := l.chunks.get()
	if err != nil {
		return id
	}
	copy(l.chunks.buf(c), l.be.recvBuf(id)[:n])
	l.be.releaseRecv(id)
	l.st.ringCopies.Add(1)
	return -c - 1
}

// Timer is a handle to a function scheduled with Loop.AfterFunc. The zero
// Timer is inert.
type Timer struct {
	l   *Loop
	ref timerRef
}

// AfterFunc runs f on the loop goroutine after d (a d too large to add to
// the clock, math.MaxInt64 say, means never; d <= 0 means the next loop
// iteration, also when AfterFunc is called from a timer function, so a
// function that keeps setting itself again never stops the loop). A timer
// whose deadline passes while the loop is busy (in handlers, or its thread
// descheduled) runs after the data and completions that arrived by then,
// not ahead of them (on uring-sqpoll: that the SQ thread has posted by then;
// data a socket holds that the thread has not yet posted can still come
// after the timer). Loop goroutine.
func (l *Loop) AfterFunc(d time.Duration, f func()) Timer {
	return Timer{l: l, ref: l.afterFunc(d, f)}
}

// afterFunc is AfterFunc for the engine's own timers, whose holders know
// their loop: a Conn keeps a timerRef, not a Timer, to stay in its 256-byte
// size class (TestConnSize). Loop goroutine.
func (l *Loop) afterFunc(d time.Duration, f func()) timerRef {
	when := nanotime()
	if d > 0 && when > math.MaxInt64-int64(d) {
		when = math.MaxInt64
	} else {
		when += int64(d)
	}
	return l.timers.add(when, f)
}

// Stop cancels the timer; it reports whether it was still pending. Loop
// goroutine of the loop that made it.
func (t Timer) Stop() bool {
	if t.l == nil {
		return false
	}
	return t.l.timers.remove(t.ref)
}

type timerRec struct {
	when int64
	// seq is the order set: among equal whens, the earlier set runs
	// first. No two timers of a loop share one, so it also tells a
	// timer from the later ones its slot holds: a handle (timerRef) to a
	// timer that ran or was stopped never matches again, where a 32-bit
	// count per slot would come round after 2^31 reuses (under an hour at
	// a million timers a second: the free list gives every add the same
	// slot).
	seq  uint64
	f    func()
	hidx int32 // index in heap, -1 when not scheduled, setAside while runExpired holds it
}

// timerHeap is a binary min-heap of slots into recs; recs are reused.
type timerHeap struct {
	recs []timerRec
	free []int32
	heap []int32
	seq  uint64 // the last timer's timerRec.seq; the first one's is 1, so the zero timerRef names none
	// While runExpired runs (running), the timers its functions set wait
	// in set, off the heap (hidx setAside), until the pass ends: they run
	// at the next iteration, and none of them, however early its
	// deadline, keeps the pass from the timers due before it.
	running bool
	set     []timerRef
}

// timerRef names a timer: its slot in recs and its seq.
type timerRef struct {
	s   int32
	seq uint64
}

// setAside is the hidx of a timer set during runExpired, not yet on the heap.
const setAside = -2

func (h *timerHeap) add(when int64, f func()) timerRef {
	var s int32
	if n := len(h.free); n > 0 {
		s = h.free[n-1]
		h.free = h.free[:n-1]
	} else {
		s = int32(len(h.recs))
		h.recs = append(h.recs, timerRec{})
	}
	r := &h.recs[s]
	h.seq++
	r.when = when
	r.seq = h.seq
	r.f = f
	if h.running {
		r.hidx = setAside
		h.set = append(h.set, timerRef{s, r.seq})
	} else {
		h.push(s)
	}
	return timerRef{s, r.seq}
}

func (h *timerHeap) push(s int32) {
	h.recs[s].hidx = int32(len(h.heap))
	h.heap = append(h.heap, s)
	h.up(len(h.heap) - 1)
}

// remove cancels timer t; it reports whether t was still pending.
func (h *timerHeap) remove(t timerRef) bool {
	if int(t.s) >= len(h.recs) {
		return false
	}
	r := &h.recs[t.s]
	if r.seq != t.seq || r.hidx == -1 {
		return false
	}
	if r.hidx == setAside {
		h.release(t.s) // runExpired's end skips it: no longer set aside
		return true
	}
	h.removeAt(int(r.hidx))
	return true
}

func (h *timerHeap) removeAt(i int) {
	s := h.heap[i]
	last := len(h.heap) - 1
	if i != last {
		h.swap(i, last)
	}
	h.heap = h.heap[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	h.release(s)
}

// release frees timer record s, off the heap.
func (h *timerHeap) release(s int32) {
	r := &h.recs[s]
	r.hidx = -1
	r.f = nil
	h.free = append(h.free, s)
}

func (h *timerHeap) less(i, j int) bool {
	a, b := &h.recs[h.heap[i]], &h.recs[h.heap[j]]
	return a.when < b.when || a.when == b.when && a.seq < b.seq
}

func (h *timerHeap) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.recs[h.heap[i]].hidx = int32(i)
	h.recs[h.heap[j]].hidx = int32(j)
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap) down(i int) bool {
	start := i
	n := len(h.heap)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

// first returns the earliest timer's deadline (nanotime), false if none.
func (h *timerHeap) first() (int64, bool) {
	if len(h.heap) == 0 {
		return 0, false
	}
	return h.recs[h.heap[0]].when, true
}

// pending reports whether any timer is armed, so that the loop reads the
// clock for its timers only when it has some.
func (h *timerHeap) pending() bool { return len(h.heap) > 0 }

// dueAfter reports whether a timer due at now has its deadline after
// since. It looks at the due timers only (the heap's nodes at or before
// since, and their children), which runExpired is about to run anyway: a
// heap none of whose timers is due answers at its root.
func (h *timerHeap) dueAfter(since, now int64) bool {
	return h.dueAfterAt(0, since, now)
}

func (h *timerHeap) dueAfterAt(i int, since, now int64) bool {
	if i >= len(h.heap) {
		return false
	}
	switch when := h.recs[h.heap[i]].when; {
	case when > now:
		return false // nor any below it
	case when > since:
		return true
	}
	return h.dueAfterAt(2*i+1, since, now) || h.dueAfterAt(2*i+2, since, now)
}

// next returns the time until the earliest timer, or -1 if none.
func (h *timerHeap) next(now int64) time.Duration {
	if len(h.heap) == 0 {
		return -1
	}
	// At most maxWait: a wait's timeout must fit epoll_wait's int
	// milliseconds; a loop whose first timer is further off wakes once
	// in a while for nothing. Compared before subtracting: a deadline far
	// in the past (AfterFunc with time.Until of a zero time.Time) less
	// now would overflow to a long wait.
	when := h.recs[h.heap[0]].when
	if when <= now {
		return 0
	}
	return time.Duration(min(when-now, int64(maxWait)))
}

// maxWait bounds how long a loop sleeps for its next timer.
const maxWait = time.Hour

// runExpired runs the timers due at now in the order of their deadlines.
// Those that their functions set wait for the next iteration, however
// early their deadlines (set aside until the pass ends), so a function
// that keeps setting itself in the past neither holds the loop here nor
// keeps the other due timers from running.
func (h *timerHeap) runExpired(now int64) {
	h.running = true
	for len(h.heap) > 0 {
		s := h.heap[0]
		r := &h.recs[s]
		if r.when > now {
			break
		}
		f := r.f
		h.removeAt(0)
		f()
	}
	h.running = false
	for i, t := range h.set {
		if r := &h.recs[t.s]; r.seq == t.seq && r.hidx == setAside {
			h.push(t.s)
		}
		h.set[i] = timerRef{}
	}
	h.set = h.set[:0]
}

// yieldEvery bounds how long a loop goroutine runs without passing
// through the Go scheduler. The runtime's monitor thread (sysmon) counts a
// goroutine that has not been rescheduled for 10 ms as running too long:
// from then on, on every one of its ticks, it asks it to yield and, when it
// finds it in a system call, takes its P away, whether or not another P is
// idle. A loop that waits in io_uring_enter or epoll_wait through Syscall6
// and never yields is such a goroutine for its whole life: in a measured
// server at 86k requests/s sysmon stayed on its 20 µs tick and took the
// loop's P about 1,300 times a second, and each time the loop went through
// exitsyscall's slow path to get a P back: sysmon alone cost 1.6 µs per
// request (docs/BENCHMARKS.md, "The scheduler and the loops"). A Gosched
// every yieldEvery keeps the goroutine "new" to sysmon, which then backs
// off to 10 ms. A yield is not free: the Gosched of a locked goroutine
// hands its thread's M off and back (two futex wakes, four switches),
// 8-10 µs of CPU here, so it is made as seldom as keeps it under sysmon's
// 10 ms: 8 ms, where 2 ms cost about 2 µs per request more at 2,000
// requests/s (docs/BENCHMARKS.md, "How often the loop yields").
const yieldEvery = 8 * time.Millisecond

// deadline returns the loop's next deadline (nanotime): its first timer's
// or the sweep's, whichever comes first; false if it has neither. Loop
// goroutine.
func (l *Loop) deadline() (int64, bool) {
	at, ok := l.timers.first()
	if l.sweepAt != 0 && (!ok || l.sweepAt < at) {
		at, ok = l.sweepAt, true
	}
	return at, ok
}

// waitStart notes the start of a wait and returns its time (nanotime), for
// waited. Loop goroutine.
func (l *Loop) waitStart() int64 {
	t0 := nanotime()
	if l.waitCPU {
		l.cpu0 = threadCPU()
	}
	return t0
}

// waited records a wait that began at t0 (waitStart) and has just returned.
// Loop goroutine.
func (l *Loop) waited(t0 int64) {
	if l.waitCPU {
		l.st.waitCPUNanos.Add(uint64(max(threadCPU()-l.cpu0, 0)))
	}
	l.woke = nanotime()
	l.st.waitNanos.Add(uint64(l.woke - t0))
}

// yield passes through the Go scheduler when the loop has not done so for
// yieldEvery, judged by the time its last wait returned (no clock read of
// its own). Loop goroutine, before it waits.
func (l *Loop) yield() {
	if l.woke-l.yielded < int64(yieldEvery) {
		return
	}
	l.yielded = l.woke
	l.st.yields.Add(1)
	gosched(l)
}

// gosched is runtime.Gosched for loop l; a test replaces it to see a yield
// that the Go scheduler is slow to return from, on one loop only: other
// engines' loops may still be yielding while it runs.
var gosched = func(*Loop) { runtime.Gosched() }

var startTime = time.Now()

// nanotime is a monotonic clock in nanoseconds.
func nanotime() int64 { return int64(time.Since(startTime)) }
