package proxy

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// Per-server connection caps (max_conns) and the pool's queue. A server
// counts the upstream connections the proxy has to it over every loop
// (server.conns: connecting, in use, idle pooled), and a dial takes a slot
// first (server.take: a CompareAndSwap below the cap, no lock). A client
// or request that finds every server up of its pool at its cap waits in
// the pool's queue: one FIFO list per loop (waitQueue, written by its loop
// only), with the pool's count of waiters over all loops (waiting) and
// each loop's own (n) as atomics. A slot let go of (server.release) with
// waiters anywhere wakes the queue of the loop whose first waiter has
// waited longest (first; the releasing loop's where it ties), by
// Loop.Post of its serve (one posted at a time per loop) where that is
// another loop: a freed slot is not lost while a loop has waiters, nor
// kept by the loop that let it go while an older waiter waits elsewhere. A waiter announces
// itself (n, then waiting) before it looks for a slot once more, and a
// release frees its slot before it looks at waiting, so that one of the
// two sees the other (no wake-up is lost between them).

// waiter is one client's or request's place in a pool's queue. Kept in the
// session or stream it belongs to (no allocation per wait).
type waiter struct {
	prev, next *waiter
	q          *waitQueue // the queue it is in, nil for none
	since      int64      // Proxy.now it first waited (queue_timeout counts from it)
	seg        int64      // Proxy.now it went in at the tail last
	began      bool       // since is set: the request or client has waited
	front      bool       // in its woken (serve): a slot not found, it waits again first
	partial    bool       // its walks leave out servers: it failed to connect to them, or its pool is one a reload replaced (by an h2c one: repool)
	of         waker      // its owner, woken at its turn: bound where the owner is made (a pointer in an interface: no allocation)
}

// waker is a waiter's owner (a session, hsession or h2stream): woken, out
// of the queue, it looks for a slot again.
type waker interface{ woken() }

// waitQueue is one loop's waiters of a pool (its poolShared), oldest
// first, and that loop's queue counters. Written by its loop; n and kick
// are read and set by the others.
type waitQueue struct {
	head, tail *waiter
	after      *waiter      // in serve: the last waiter put back (nil: none yet)
	n          atomic.Int64 // waiters in the list
	first      atomic.Int64 // the seg of the waiter at the head, 0 for none: read by the other loops (wakeOne)
	kick       atomic.Bool  // a serve is posted to the loop
	shed       atomic.Bool  // a shedFn is posted to the loop
	serveFn    func()
	shedFn     func()       // shedFor of the pool's latest on the loop; made once
	endAt      int64        // Proxy.now at which endTimer runs (0: none set)
	endTimer   engine.Timer // an ejection's end: serve the queue
	endFn      func()
	id         int // its loop's

	queued   counter // waits begun (at the tail)
	timeouts counter // requests or clients whose queue_timeout ran out
	refused  counter // clients or requests refused at once: the queue was full (max_queue)
	served   counter // waits that ended with their turn (a slot, mostly)
	waitNs   counter // time the served ones waited, ns
	_        [32]byte
}

// queueShared is the queue part of a poolShared: made with it, one
// waitQueue per loop.
type queueShared struct {
	waiting atomic.Int64 // waiters over all loops
	qs      []waitQueue  // by engine.Loop.ID
	p       *Proxy
	pool    atomic.Pointer[pool] // the pool's latest (setCaps): whose servers passOn looks at
}

// newPoolShared returns a pool's shared state for p's loops.
func newPoolShared(p *Proxy) *poolShared {
	sh := &poolShared{}
	sh.q.p = p
	sh.q.qs = make([]waitQueue, len(p.loops))
	sh.retry = newRetryLoops(p)
	for k := range sh.q.qs {
		q := &sh.q.qs[k]
		q.id = k
		q.serveFn = func() { sh.q.serve(q) }
		q.endFn = func() {
			q.endAt = 0
			if q.n.Load() > 0 {
				sh.q.kick(k, k)
			}
		}
		q.shedFn = func() {
			q.shed.Store(false)
			if pl := sh.q.pool.Load(); pl != nil {
				p.loops[k].shedFor(pl)
			}
		}
	}
	return sh
}

// take takes a slot of s: below its cap (none: always), counted in conns.
// It reports false where s is at its cap. Any loop.
func (s *server) take() bool {
	m := s.maxConns.Load()
	if m <= 0 {
		s.conns.Add(1)
		return true
	}
	for {
		n := s.conns.Load()
		if n >= m {
			return false
		}
		if s.conns.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// takeFor takes a slot of s (take) for a walk over its pool, where none
// waits in the pool's queue or the walk is a waiter's whose turn came
// (woken): a new arrival goes behind the waiters (as HAProxy, whose
// queue is served first), also where a slot came free in the events of
// the loop's batch before their serve runs. Any loop.
func (s *server) takeFor(woken bool) bool {
	if !woken && s.queued() {
		return false
	}
	return s.take()
}

// queued reports whether s has a cap and its pool waiters: its slots
// are theirs first. Any goroutine.
func (s *server) queued() bool { return s.maxConns.Load() > 0 && s.shared.q.waiting.Load() > 0 }

// hasRoom reports whether s is below its cap (or has none). Any goroutine.
func (s *server) hasRoom() bool {
	m := s.maxConns.Load()
	return m <= 0 || s.conns.Load() < m
}

// release lets go of a slot of s (a connection closed, or its dial
// refused), on loop k, and wakes a waiter of its pool if any: the one
// that has waited longest, on whichever loop (wakeOne). Any loop.
func (s *server) release(k int) {
	s.conns.Add(-1)
	if q := &s.shared.q; q.waiting.Load() > 0 {
		q.wakeOne(k, -1)
	}
}

// cameUp: s is up again (its health checks passed), its slots free
// while it was down: they go to its pool's waiters (every loop's queue
// woken), as HAProxy has a server up again take from the queue. Any
// goroutine.
func (s *server) cameUp() {
	if q := &s.shared.q; q.waiting.Load() > 0 {
		q.kickAll()
	}
}

// wakeOne posts a serve to the queue, of a loop other than skip (-1:
// none), whose first waiter went in longest ago (first; FIFO over the
// loops, as within one), where any loop has waiters; of those that tie,
// the first from from, the caller's loop (kick). Any goroutine.
func (qs *queueShared) wakeOne(from, skip int) {
	n := len(qs.qs)
	best, bestAt := -1, int64(0)
	for d := range n {
		j := (from + d) % n
		q := &qs.qs[j]
		if j == skip || q.n.Load() == 0 {
			continue
		}
		at := q.first.Load()
		if at == 0 {
			at = math.MaxInt64 // (its head being linked or unlinked: none older)
		}
		if best < 0 || at < bestAt {
			best, bestAt = j, at
		}
	}
	if best >= 0 {
		qs.kick(best, from)
	}
}

// elsewhereFirst reports whether a loop other than k has a waiter that
// went in before loop k's first (or loop k has none while the pool has
// waiters): a slot loop k would keep for its own waiters by pooling a
// kept-alive connection (putIdle) is theirs, and goes to them by the
// connection's close. Where they tie, loop k's keeps it. Loop goroutine
// (k's: its own queue's head is read as it stands).
func (qs *queueShared) elsewhereFirst(k int) bool {
	if qs.waiting.Load() == 0 {
		return false
	}
	own := &qs.qs[k]
	if own.n.Load() == 0 {
		return true
	}
	mine := own.head.seg
	for j := range qs.qs {
		q := &qs.qs[j]
		if j == k || q.n.Load() == 0 {
			continue
		}
		if at := q.first.Load(); at != 0 && at < mine {
			return true
		}
	}
	return false
}

// kickAll posts a serve to every loop with waiters: slots may have come
// free without a release (a reload raised a cap). Any goroutine.
func (qs *queueShared) kickAll() {
	for j := range qs.qs {
		if qs.qs[j].n.Load() > 0 {
			qs.kick(j, -1)
		}
	}
}

// kick has loop j run its serve, unless it is to already: from loop j
// itself (from == j) by a timer of no delay (no wake-up to write and
// read), from another goroutine by Loop.Post. Any goroutine (from -1 off
// the loops).
func (qs *queueShared) kick(j, from int) {
	q := &qs.qs[j]
	if !q.kick.CompareAndSwap(false, true) {
		return
	}
	if el := qs.p.e.Loops()[j]; j == from {
		el.AfterFunc(0, q.serveFn)
	} else {
		el.Post(q.serveFn)
	}
}

// serve wakes q's waiters in turn, oldest first, until one that may use
// every server finds no slot (none is left for those behind it). One
// whose walks leave out servers (partial: it failed to connect to them,
// or it walks a pool a reload replaced, without the servers added: by a
// reload between its walk and its wait, or by an h2c pool) and
// that found no slot waits again in its place, and the next is woken: a
// slot of a server it cannot use goes to one behind it. Loop goroutine
// (q's).
func (qs *queueShared) serve(q *waitQueue) {
	q.kick.Store(false)
	for {
		w := q.head
		if q.after != nil {
			w = q.after.next
		}
		if w == nil {
			q.after = nil
			qs.passOn(q.id)
			return
		}
		seg := w.seg
		qs.unlink(w)
		w.front = true
		w.of.woken()
		w.front = false
		if w.q != nil {
			if !w.partial {
				q.after = nil
				return // no slot: it waits again in its place
			}
			q.after = w
			continue
		}
		q.served.inc()
		q.waitNs.add(uint64(qs.p.now() - seg))
	}
}

// passOn wakes another loop with waiters than loop k, whose queue is
// empty (but of waiters that cannot use every server), the one whose
// first waiter has waited longest (wakeOne), where a server up has room:
// the slot its serve was for was not taken (its waiters went before
// their turn, or the one woken took an idle connection instead), and no
// release is to come for it. The idle connections loop k pooled for its
// waiters (putIdle) are closed first (shedFor): no waiter of its is left
// to take them. Loop goroutine (k's).
func (qs *queueShared) passOn(k int) {
	pl := qs.pool.Load()
	if qs.waiting.Load() == 0 || pl == nil {
		return
	}
	qs.p.loops[k].shedFor(pl)
	for _, s := range pl.servers {
		if s.up() && s.hasRoom() {
			qs.wakeOne(k, k)
			return
		}
	}
}

// enqueue puts w in loop k's queue: at its tail, or back in its place
// for a waiter serve woke that found no slot (w.front, its wait going
// on: after the waiters serve put back before it, else at the head). It
// reports false where max_queue waiters are queued already (counted), for
// a new waiter. The caller then looks for a slot once more (recheck).
// Loop goroutine.
func (qs *queueShared) enqueue(k int, w *waiter, maxQueue int) bool {
	q := &qs.qs[k]
	front := w.front
	if !front && maxQueue >= 0 && qs.waiting.Load() >= int64(maxQueue) {
		q.refused.inc()
		return false
	}
	if front {
		next := q.head
		if w.prev = q.after; w.prev != nil {
			next, w.prev.next = w.prev.next, w
		} else {
			q.head = w
		}
		if w.next = next; next != nil {
			next.prev = w
		} else {
			q.tail = w
		}
	} else {
		w.seg = qs.p.now()
		if !w.began {
			w.began, w.since = true, w.seg
		}
		q.queued.inc()
		w.prev = q.tail
		if q.tail != nil {
			q.tail.next = w
		} else {
			q.head = w
		}
		q.tail = w
	}
	w.q = q
	q.first.Store(q.head.seg)
	q.n.Add(1)
	qs.waiting.Add(1)
	return true
}

// recheck wakes loop k's queue where a server of pl that a walk would
// try (dialing.next; failed: those the waiter failed to connect to) has
// room: a slot freed between the walk that found none and the enqueue
// that followed (whose release saw no waiter) is not lost. Where passive
// health has a server of pl ejected, it sets the loop's timer for the
// earliest such ejection's end still to come (endAt), which serves the
// queue: an ejection runs out with no event of its own (ejected is read
// lazily), and its server's slots, freed while it was out, go to the
// waiters, as a server's coming up by its checks (cameUp). An ejection
// that has run out stays on record until its server's next success, and
// is not the earliest end: it would leave the timer unset for the one
// still running (TestMaxConnsEjectionEndServesQueueBesideRunOut). Loop
// goroutine.
func (qs *queueShared) recheck(k int, pl *pool, failed uint64) {
	var end int64
	now := qs.p.now()
	for i, s := range pl.servers {
		if s.up() && !s.loops[k].idle.gone && !failedTo(failed, i) && s.hasRoom() {
			qs.kick(k, k)
			return
		}
		if u := s.until.Load(); u != 0 {
			if e := u &^ untilHTTP; e > now && (end == 0 || e < end) {
				end = e
			}
		}
	}
	if end > now {
		q := &qs.qs[k]
		if q.endAt == 0 || end < q.endAt {
			q.endTimer.Stop()
			q.endAt = end
			q.endTimer = qs.p.e.Loops()[k].AfterFunc(time.Duration(end-now), q.endFn)
		}
	}
}

// unlink takes w out of its queue. Loop goroutine (the queue's).
func (qs *queueShared) unlink(w *waiter) {
	q := w.q
	if q == nil {
		return
	}
	if q.after == w {
		q.after = w.prev // (it left during serve)
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.q = nil, nil, nil
	if q.head != nil {
		q.first.Store(q.head.seg)
	} else {
		q.first.Store(0)
	}
	q.n.Add(-1)
	qs.waiting.Add(-1)
}

// failedTo reports server i in a dialing's failed set.
func failedTo(failed uint64, i int) bool { return i < 64 && failed&(1<<i) != 0 }

// failedAt adds server i to d's failed set: a client's (a request's) walks
// over the pool, however many waits they are apart, try each server once
// (a dead server freeing its slot at each failure would wake the same
// waiter to dial it again, at the rate it refuses). Servers past the 64th
// are not kept. Loop goroutine.
func (d *dialing) failedAt(i int) {
	if i < 64 {
		d.failed |= 1 << i
	}
}

// restart begins a walk over the pool from start for a waiter whose turn
// came: the servers it failed to connect to stay out. Loop goroutine.
func (d *dialing) restart(start int) { *d = dialing{start: start, failed: d.failed, woken: true} }

// repool returns the pool a waiter of pl walks at its turn: pl's latest
// generation where a reload replaced pl (the queue is the pool's over
// reloads), with failed, the servers its walks failed to connect to, at
// their indexes in it (a server the reload did not keep is left out with
// its bit); pl itself where it is the latest, or where the latest is of
// the other protocol (h2c: another path). No allocation. Loop goroutine.
func repool(pl *pool, failed *uint64) *pool {
	np := pl.queue().pool.Load()
	if np == nil || np == pl || np.h2 != pl.h2 {
		return pl
	}
	var f uint64
	if *failed != 0 {
		for j, s := range np.servers {
			if i := slices.Index(pl.servers, s); i >= 0 && failedTo(*failed, i) && j < 64 {
				f |= 1 << j
			}
		}
	}
	*failed = f
	return np
}

// waited is how long w has waited, at now (its first wait's start on).
func (w *waiter) waited(now int64) int64 { return now - w.since }

// leave takes w out of its queue for good, where it is in one: its
// client went away, or (timedOut) its queue_timeout ran out, counted;
// queued gets how long it waited. It reports whether w was in a queue.
// pl is its owner's pool. Loop goroutine.
func (w *waiter) leave(pl *pool, queued *int64, timedOut bool) bool {
	q := w.q
	if q == nil {
		return false
	}
	qs := pl.queue()
	*queued = w.waited(qs.p.now())
	if timedOut {
		q.timeouts.inc()
	}
	qs.unlink(w)
	return true
}

// queue returns the queue state of pl. Any goroutine.
func (pl *pool) queue() *queueShared { return &pl.shared.q }

// wait puts waiter w of a client of pl on loop ls in the queue (see
// enqueue and recheck; failed: the servers its walks failed to connect
// to); false: the queue is full, term set (termQueueFull) for the caller
// to answer. Loop goroutine.
func (ls *loopState) wait(pl *pool, w *waiter, failed uint64, term *uint8) bool {
	qs := pl.queue()
	front := w.front
	w.partial = failed != 0 || pl != qs.pool.Load() // (a pool a reload replaced lacks servers the new one may have)
	if !qs.enqueue(ls.id, w, pl.queueCfg().MaxQueue) {
		*term = termQueueFull
		return false
	}
	qs.recheck(ls.id, pl, failed)
	if !front {
		// (Once a wait: a waiter woken that could not take this loop's
		// idle connection, to a server down, would wake itself again
		// and again. Idle connections made later on other loops are
		// not pooled while it waits: putIdle.)
		ls.shedIdle(pl)
	}
	return true
}

// shedIdle asks the other loops with idle pooled connections to a server
// of pl at its cap to close them (shedFor), so that the slots they hold
// go to the waiters; this loop's own go to its waiters as they are (its
// queue woken: takeIdleFor). No allocation: each loop's shed is made
// once (shedFn, of the pool's latest generation, as passOn's), posted
// one at a time. Loop goroutine.
func (ls *loopState) shedIdle(pl *pool) {
	qs := pl.queue()
	for k, el := range qs.p.e.Loops() {
		for _, s := range pl.servers {
			if s.loops[k].stats.idle.load() > 0 && !s.hasRoom() {
				if k == ls.id {
					qs.kick(k, k)
				} else if q := &qs.qs[k]; q.shed.CompareAndSwap(false, true) {
					el.Post(q.shedFn)
				}
				break
			}
		}
	}
}

// shedFor closes this loop's idle pooled connections to the servers of
// pl at their caps while the pool has waiters. Loop goroutine.
func (ls *loopState) shedFor(pl *pool) {
	qs := pl.queue()
	for _, s := range pl.servers {
		sl := s.loops[ls.id]
		for len(sl.idle.conns) > 0 && qs.waiting.Load() > 0 && !s.hasRoom() {
			ls.dropIdle(sl.idle.conns[0].c, &sl.tag)
		}
	}
}
