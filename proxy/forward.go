package proxy

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// counter is a count with one writer, its loop, and any number of readers
// (the admin server): an atomic load and store rather than an atomic add,
// race-free and uncontended, since no other loop writes it. (The store is
// still an atomic store: an XCHG on amd64.)
type counter struct{ v atomic.Uint64 }

func (c *counter) add(n uint64) { c.v.Store(c.v.Load() + n) }
func (c *counter) inc()         { c.add(1) }
func (c *counter) addInt(n int) { c.add(uint64(n)) }
func (c *counter) load() uint64 { return c.v.Load() }

// gauge is a level with one writer, its loop.
type gauge struct{ v atomic.Int64 }

func (g *gauge) add(n int64) { g.v.Store(g.v.Load() + n) }
func (g *gauge) inc()        { g.add(1) }
func (g *gauge) dec()        { g.add(-1) }
func (g *gauge) load() int64 { return g.v.Load() }

// lnStats are one loop's counters for one listener.
type lnStats struct {
	accepted   counter // clients accepted (rejected ones included)
	rejected   counter // closed at once: max_conns reached
	noServer   counter // closed: no server of the pool was up (mode http: a 503)
	failed     counter // closed: every server up failed to connect (mode http: a 502)
	idleClosed counter // closed by idle_timeout (mode http: keepalive_timeout; a tunnel: idle_timeout)
	// closed reading a refused request's body (discardBody): malformed, past discardBytes, or past request_timeout
	discardClosed counter
	active        gauge // clients open

	// Mode http.
	requests  counter    // request heads received (bad ones included)
	respUp    [5]counter // responses from servers, by class 1xx..5xx
	respLocal [5]counter // responses the proxy made (errors), by class

	// Request fields dropped for an underscore in their name.
	underscoreDropped counter

	// TLS handshakes that failed or timed out (the engine's OnClose
	// without OnOpen).
	tlsFailed counter
	// Clients ALPN gave h2 whose first bytes were not the HTTP/2
	// preface (prefaceFailed).
	h2Preface counter

	// h2c.
	h2Conns        counter // HTTP/2 client connections (the preface received)
	h2Streams      counter // streams opened (requests)
	h2ResetsClient counter // streams the client reset
	h2ResetsProxy  counter // streams the proxy reset (the upstream broke after the response began)
	h2RespHeld     gauge   // response bytes from h2c pools held for the clients' windows (upSide.rbuf)

	// cur is the listener in force for this one's socket and mode (a
	// reload made a new one: refreshListener), nil once none is. Its
	// loop only.
	cur *listener
}

// share returns loop ls's share of server i of pl: its counters and idle
// connections. Loop goroutine.
func (ls *loopState) share(pl *pool, i int) *srvLoop { return pl.servers[i].loops[ls.id] }

// stats returns loop ls's counters for server i of pl. Loop goroutine.
func (ls *loopState) stats(pl *pool, i int) *srvStats { return &ls.share(pl, i).stats }

// srvStats are one loop's counters for one server of a pool.
type srvStats struct {
	connects  counter // connects that succeeded
	failures  counter // connects that failed (refused, timed out)
	tlsFailed counter // of those, TLS handshakes that failed (a pool with tls)
	active    gauge   // upstream connections open or connecting (mode http: in use)
	bytesIn   counter // bytes received from the server
	bytesOut  counter // bytes received from clients for the server

	// Mode http.
	requests   counter // requests sent (a retried one twice)
	reusedReqs counter // requests on a connection from the idle pool
	newReqs    counter // requests on a new connection
	idle       gauge   // idle connections in the loop's pool

	// Protocol h2c.
	h2Conns   gauge   // HTTP/2 connections set up (the server's SETTINGS arrived: connects counted) and not closed
	h2Streams counter // streams opened
	h2GoAways counter // GOAWAYs received
	h2Retires counter // connections retired for the early resets sent on them (upH2MaxEarlyResets)
	h2Refused counter // streams the server did not process (REFUSED_STREAM, above a GOAWAY's last)
	h2Retried counter // of those, sent again
	h2Pings   counter // PINGs sent (h2_ping_interval)
	h2PingTOs counter // connections closed for a PING's ACK not in time
	h2PingRTT gauge   // the last PING's round trip, ns
}

// loopState is what one loop owns: what it reads of the config in force
// and its HTTP state. Only that loop writes it. A loop's share of a pool,
// server or listener (its round-robin cursor, counters, idle connections)
// is in that object, by loop ID (pool.loops, server.loops,
// listener.stats), not in tables here: a connection made under an earlier
// config finds its share in the objects it holds, and the garbage
// collector takes a generation's once no connection holds them.
type loopState struct {
	id   int // its loop's engine.Loop.ID
	byLn map[*engine.Listener]*listener
	// pools and lns are those in force (sweepIdle, drainHTTP; apply).
	pools   []*pool
	lns     []*listener
	applied *generation // the last applied (reload.go)

	// retryHeld is what the loop's requests keep for retries, over the
	// pools (retry.go; each pool's retryLoop of the loop points to it).
	retryHeld retryHold

	// Mode http.
	sweep    engine.Timer // closes idle connections past their pool's idle_timeout
	sweepFn  func()
	sweeping bool  // sweep is armed
	sweepAt  int64 // Proxy.now it fires at
	// goneH2 are the HTTP/2 connections of servers a reload removed
	// (apply), retired with streams still open: no pool in force holds
	// them, and the sweep sends their PINGs until their last stream ends.
	goneH2   []*h2Share
	sessions []*hsession // open HTTP clients, for a drain
	h2conns  []*h2conn   // open HTTP/2 clients, for a drain
	draining bool        // a drain has begun: no client or connection is kept
	scratch  []byte      // response heads are written here
}

// newLoopState returns loop id's state with no listener or pool
// (loopState.apply adds them).
func newLoopState(id int) *loopState { return &loopState{id: id} }

// session is one proxied connection: a client and its upstream. It is the
// Context of both Conns and lives on the client's loop.
type session struct {
	p      *Proxy
	ls     *loopState
	ln     *listener
	pool   *pool // the listener's, or (a tunnel after an HTTP upgrade) the route's
	client *engine.Conn
	up     *engine.Conn // nil while no dial is in progress
	srv    int          // index of up's server in the pool
	hkey   uint64       // the client's key hash (balance hash)
	proto  string       // the protocol the client chose by ALPN, offered to a TLS pool's servers ("" none)
	dialing

	upOpen, clientEOF, upEOF bool
	done                     bool // the client has closed (or clientCut is closing it)

	last   int64 // p.now() of the last byte either way (with an idle timeout)
	queued int   // both sides' Buffered and Unacked at the last idle check
	idle   engine.Timer
	idleFn func()

	// In the pool's queue for a slot (max_conns): its place, its
	// queue_timeout, and the client's first bytes read meanwhile (a copy
	// off the loop's receive ring: OnData).
	w    waiter
	qt   engine.Timer
	qtFn func()
	pend engine.Buffer
	hasP bool

	x  connLog    // for the access log
	hx *tunnelLog // a tunnel an HTTP upgrade made: its exchange, logged at its end
}

// handler is the engine's Handler: Proxy's callbacks, kept off its
// exported method set.
type handler Proxy

// OnOpen starts a session for an accepted client, or resumes a client
// whose upstream has connected. Loop goroutine.
func (h *handler) OnOpen(c *engine.Conn) {
	p := (*Proxy)(h)
	switch s := c.Context().(type) {
	case *session:
		s.upOpened(c)
		return
	case *hsession:
		s.upOpened(c)
		return
	case *h2stream:
		s.upOpened(c)
		return
	case *upH2:
		s.opened()
		return
	}
	ls := p.loops[c.Loop().ID()]
	l := ls.byLn[c.Listener()]
	if l == nil {
		l = ls.early(p, c) // opened by a Reload this loop has yet to apply
	}
	if l == nil {
		// Cannot happen: every listener is in byLn, and a tls listener
		// whose socket a reload closed stays there for twice its
		// handshake_timeout (reloadState.retiring), past any handshake
		// it accepted.
		c.Close()
		return
	}
	st := l.stats[ls.id]
	st.accepted.inc()
	// (Counted also without a bound: a reload that sets one counts the
	// clients open.)
	if n := l.conns.Add(1); l.cfg.MaxConns > 0 && n > int64(l.cfg.MaxConns) {
		l.conns.Add(-1)
		st.rejected.inc()
		c.Close()
		return
	}
	if l.connLimited(ls.id, c.RemoteAddr().Addr()) { // (after max_conns: one it turns away spends no budget)
		l.conns.Add(-1)
		c.Close()
		return
	}
	st.active.inc()
	ls.moveLog(nil, l)
	if l.http {
		p.startHTTP(c, ls, l)
		return
	}
	s := &session{p: p, ls: ls, ln: l, pool: l.pool, client: c}
	s.w.of = s
	if l.alog != nil {
		s.x.start = p.now()
	}
	if st := c.TLS(); st != nil {
		s.proto = st.NegotiatedProtocol
	}
	c.SetContext(s)
	// Nothing is read from the client until its upstream is connected.
	c.PauseRead()
	if mg := l.pool.maglev; mg != nil {
		s.hkey = mg.keyAddr(c.RemoteAddr().Addr())
	}
	s.start = pickServer(ls, l.pool, s.hkey)
	s.connect()
}

// pickServer returns the index of pl's server to try first. Round-robin
// is nginx's smooth weighted round-robin over the servers up: each pick
// adds each one's weight to its current weight (the loop's own, in the
// pool's poolLoop: 0 in a pool New or a reload made, while a pool it
// replaced keeps its own for the retries that still pick from it), takes the
// one with the largest (the first of equals) and takes the total of the
// weights off it; so each server's share of a loop's picks is its share
// of the weights, spread out (5:1:1 picks aabacaa). A server down is left
// out, its turns going to the others by their weights. Least-conn takes
// the server up with the fewest connections from this loop for its
// weight (conns/weight, compared by cross-multiplication), equals in
// cursor order; the cursor moves past the server picked. With none up it
// returns 0 (round-robin) or the cursor's server (least-conn); connect
// skips it. Hash returns key's entry of the pool's table, where the walk
// (dialing.step) begins. No lock, no allocation. Loop goroutine of ls.
func pickServer(ls *loopState, pl *pool, key uint64) int {
	if pl.maglev != nil {
		return pl.maglev.entry(key)
	}
	ws := pl.cfg.Servers
	if !pl.leastConn {
		cur := pl.loops[ls.id].cur
		best, total := -1, 0
		for i, s := range pl.servers {
			if !s.up() {
				continue
			}
			cur[i] += ws[i].Weight
			total += ws[i].Weight
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		if best < 0 {
			return 0
		}
		cur[best] -= total
		return best
	}
	n := len(pl.servers)
	rr := &pl.loops[ls.id].rr
	first := int(*rr % uint32(n))
	best, bestN, bestW := first, int64(-1), int64(1)
	for k := range n {
		i := (first + k) % n
		if !pl.servers[i].up() {
			continue
		}
		a, w := ls.stats(pl, i).active.load(), int64(ws[i].Weight)
		if bestN < 0 || a*bestW < bestN*w {
			best, bestN, bestW = i, a, w
		}
	}
	*rr = uint32(best + 1)
	return best
}

// dialing is a client's walk over its pool's servers: each is tried once.
type dialing struct {
	start  int    // first server tried (balance hash: the table entry the walk begins at)
	tries  int    // servers tried (skipped as down included)
	scan   int    // balance hash: table entries looked at
	seen   uint64 // balance hash: the servers taken (step)
	over   uint64 // balance hash: the servers up passed over at balance_factor's bound
	dialed bool   // a dial was started: "failed" rather than "no server"
	full   bool   // a server up was skipped at its cap (max_conns): the walk ends in the queue
	woken  bool   // a waiter whose turn came: it goes before the new arrivals (maxconn.go)
	// failed are the servers (their indexes below 64) a dial failed to,
	// kept over the waits in the queue (failedAt).
	failed uint64
}

// next dials the next server of pl that is up and that no reload has
// removed (a walk begun under an earlier config), for the client c, a
// server at its max_conns skipped (d.full), offering a TLS server proto
// by ALPN where not "" (pool.dial). It returns the connection
// (counted active, holding a slot of its server until it is let go of:
// server.release; its Context not yet set) and its server; nil when none
// is left; engine.ErrClosed when the engine is shutting down. Loop
// goroutine.
func (d *dialing) next(ls *loopState, pl *pool, c *engine.Conn, timeout time.Duration, proto string) (*engine.Conn, int, error) {
	for {
		i, ok := d.nextUp(ls, pl)
		if !ok {
			return nil, 0, nil
		}
		srv := pl.servers[i]
		if failedTo(d.failed, i) {
			continue // (tried before this client's wait in the queue)
		}
		if !srv.takeFor(d.woken) {
			d.full = true
			continue
		}
		st := ls.stats(pl, i)
		up, err := pl.dial(c.Loop(), i, timeout, proto)
		if errors.Is(err, engine.ErrClosed) {
			srv.release(ls.id)
			return nil, 0, err
		}
		if err != nil || up.Closed() {
			// Refused before the dial could start (or closed by the
			// backend inside Dial, whose OnClose found no session).
			srv.release(ls.id)
			d.failedAt(i)
			st.failures.inc()
			srv.connectFailed(pl)
			continue
		}
		st.active.inc()
		return up, i, nil
	}
}

// kill ends the session as the engine's stop ends those it cuts (KD),
// the stop having refused its dial or cut its connect: the client reset
// (a close would tell it the server's stream ended whole), its OnClose
// logging the session. Loop goroutine.
func (s *session) kill() {
	s.x.term = termKilled
	s.client.Reset()
}

// connect dials the next server of the pool that is up, each server once
// per session; when none is left it closes the client. Loop goroutine.
func (s *session) connect() {
	up, i, err := s.next(s.ls, s.pool, s.client, time.Duration(s.ln.cfg.ConnectTimeout), s.proto)
	if err != nil {
		// The engine's stop refused the dial (its turn in the queue came
		// as the loop stopped), and cuts the client next: KD, as where
		// the stop cut its connect (OnClose).
		s.kill()
		return
	}
	if up != nil {
		s.up, s.srv = up, i
		up.SetContext(s)
		s.client.PauseRead() // (read while it waited in the queue)
		if s.clientEOF && !s.hasP {
			up.CloseWrite() // after it connects
		}
		return
	}
	if s.full {
		s.queue()
		return
	}
	if s.dialed {
		s.ln.stats[s.ls.id].failed.inc()
		s.x.term = termConnect
	} else {
		s.ln.stats[s.ls.id].noServer.inc()
		s.x.term = termNoServer
	}
	s.client.Close()
}

// queue puts the client in its pool's queue for a slot, every server up
// being at its max_conns: it waits there for queue_timeout at most, its
// first bytes read and held (so that a client that resets is seen), and
// is closed where the queue is full. Loop goroutine.
func (s *session) queue() {
	front := s.w.front
	if !s.ls.wait(s.pool, &s.w, s.failed, &s.x.term) {
		s.client.Close()
		return
	}
	if front {
		return // (its timer runs)
	}
	if s.qtFn == nil {
		s.qtFn = s.queueTimedOut
	}
	// From its first wait: one whose connect failed waits again with the
	// rest of it.
	s.qt.Stop()
	s.qt = s.client.Loop().AfterFunc(time.Duration(deadline(s.w.since, time.Duration(s.pool.queueCfg().QueueTimeout))-s.p.now()), s.qtFn)
	if !s.hasP && !s.clientEOF {
		s.client.ResumeRead()
	}
}

// woken: the queue's turn came (a slot may be free): the walk over the
// pool begins again. Loop goroutine.
func (s *session) woken() {
	s.repool()
	s.restart(pickServer(s.ls, s.pool, s.hkey))
	s.x.queued = s.w.waited(s.p.now())
	s.connect()
	if s.w.q == nil {
		s.qt.Stop()
	}
}

// queueTimedOut closes a client still in the queue. Loop goroutine.
func (s *session) queueTimedOut() {
	if s.done || !s.w.leave(s.pool, &s.x.queued, true) {
		return
	}
	s.x.term = termQueue
	s.client.Close()
}

// upOpened starts forwarding once the upstream has connected: what the
// client sent while it waited in the queue first. Loop goroutine.
func (s *session) upOpened(up *engine.Conn) {
	if up != s.up || s.done {
		up.Close()
		return
	}
	s.upOpen = true
	st := s.ls.stats(s.pool, s.srv)
	st.connects.inc()
	s.pool.servers[s.srv].connected(s.pool)
	if s.hasP {
		s.hasP = false
		st.bytesOut.addInt(s.pend.Len())
		s.x.fromClient += int64(s.pend.Len())
		up.WriteBuffer(s.pend) // (an error closes up: OnClose)
		if s.clientEOF {
			up.CloseWrite()
		}
	}
	s.startIdle()
	s.client.ResumeRead()
}

// startIdle starts the listener's idle_timeout, if it has one, once both
// sides are connected (or an HTTP upgrade made them a tunnel). Loop
// goroutine.
func (s *session) startIdle() {
	if d := time.Duration(s.ln.cfg.IdleTimeout); d > 0 {
		s.last = s.p.now()
		s.idleFn = s.idleCheck
		s.idle = s.client.Loop().AfterFunc(d, s.idleFn)
	}
}

// idleCheck closes both sides when nothing has passed for IdleTimeout,
// else waits for the rest of it: the timer is re-armed lazily, once per
// timeout at most, never per read. A write queue that moved since the last
// check counts as activity (a side still sending what it holds after the
// other closed), and so do the bytes a socket holds that its peer has not
// acknowledged (Unacked: a slow reader drains megabytes of socket buffer
// after the queue is empty; two system calls a check). A side whose queue
// did not move is reset, not closed: a Close would wait for a peer that
// reads nothing to take its queue, and hold the connection for good. Loop
// goroutine.
func (s *session) idleCheck() {
	if s.done {
		return
	}
	if q := s.client.Buffered() + s.up.Buffered() + s.client.Unacked() + s.up.Unacked(); q != s.queued {
		s.queued = q
		s.last = s.p.now()
	}
	d := time.Duration(s.ln.cfg.IdleTimeout)
	el := time.Duration(s.p.now() - s.last)
	if el < d {
		s.idle = s.client.Loop().AfterFunc(d-el, s.idleFn)
		return
	}
	s.ln.stats[s.ls.id].idleClosed.inc()
	s.x.term = termIdle
	closeIdle(s.client)
	closeIdle(s.up)
}

// closeIdle closes c, or resets it where its queue has not drained. Loop
// goroutine.
func closeIdle(c *engine.Conn) {
	if c.Buffered() > 0 {
		c.Reset()
		return
	}
	c.Close()
}

// OnData hands b to the other side without copying it, and stops reading
// this side while the other's queue holds WriteHighWater of buffer memory
// (QueuedMemory, as the engine's mark counts: a queue of small messages
// holds a whole buffer each). Loop goroutine.
func (h *handler) OnData(c *engine.Conn, b engine.Buffer) bool {
	var s *session
	switch x := c.Context().(type) {
	case *session:
		s = x
	case *hsession:
		if c == x.client {
			x.clientData(b)
		} else {
			x.upData(c, b)
		}
		x.syncRead()
		return true
	case *h2conn:
		x.clientData(b)
		return true
	case *h2stream:
		x.upData(c, b)
		x.c.flush()
		return true
	case *upH2:
		x.data(b)
		return true
	case *idleTag:
		h.loop(c).dropIdle(c, x) // data nobody asked for
		return false
	default:
		return false // an upstream an HTTP session let go of
	}
	if c == s.client && !s.upOpen {
		// Read while it waits in the queue: held until its upstream
		// connects (one buffer: its reading stops here), off the loop's
		// receive ring (engine.Buffer.Unring: a copy). The ring is shared
		// by every connection of the loop and a buffer kept for as long
		// as the client waits (queue_timeout, then connect_timeout) is
		// not bounded by MaxQueuedReadBuffers: clients queued behind a
		// slow server would take every buffer from the loop's other
		// connections (TestTCPQueuedRingHold). What it sends after is
		// the engine's to hold (reading paused), bounded as such.
		if s.hasP {
			b.Release() // (cannot happen: paused after the first)
			c.Reset()
			return true
		}
		s.pend, s.hasP = b.Unring(), true
		c.PauseRead()
		return true
	}
	st := s.ls.stats(s.pool, s.srv)
	dst := s.client
	if c == s.client {
		dst = s.up
		st.bytesOut.addInt(b.Len())
		s.x.fromClient += int64(b.Len())
	} else {
		st.bytesIn.addInt(b.Len())
		s.x.fromServer += int64(b.Len())
	}
	if s.idleFn != nil {
		s.last = s.p.now()
	}
	if err := dst.WriteBuffer(b); err != nil { // dst owns b now, even on error
		c.Close()
		return true
	}
	if dst.QueuedMemory() >= h.cfg.Engine.WriteHighWater {
		c.PauseRead()
	}
	return true
}

// OnWritable resumes reading the side that feeds c. Loop goroutine.
func (h *handler) OnWritable(c *engine.Conn) {
	switch x := c.Context().(type) {
	case *h2conn:
		x.clientWritable()
		x.flush()
		x.readClient()
		return
	case *h2stream:
		x.credit()
		x.c.flush()
		return
	case *upH2:
		x.writable()
		return
	}
	if x, ok := c.Context().(*hsession); ok {
		if c == x.client && x.h2 != nil && x.h2.on {
			x.h2.clientWritable()
		}
		if c == x.client && x.upBP && x.up != nil {
			x.upBP = false
			x.mark = x.p.now() // the server's time counts from here
			x.up.ResumeRead()
		}
		if c == x.client {
			x.nextHead()
		}
		x.syncRead()
		return
	}
	s, ok := c.Context().(*session)
	if !ok || !s.upOpen {
		return
	}
	if c == s.client {
		s.up.ResumeRead()
	} else {
		s.client.ResumeRead()
	}
}

// OnEOF passes a FIN on to the other side; when both sides have sent
// theirs, both close. A TLS server's FIN without close_notify resets the
// client instead, and a TLS client's the server (clientCut). Loop
// goroutine.
func (h *handler) OnEOF(c *engine.Conn) {
	var s *session
	switch x := c.Context().(type) {
	case *session:
		s = x
	case *hsession:
		if c == x.client {
			x.clientEOF()
		} else {
			x.upEOF(c)
		}
		x.syncRead()
		return
	case *h2conn:
		x.clientEOF()
		return
	case *h2stream:
		if c != x.up {
			c.SetContext(nil)
			c.Close()
			return
		}
		x.upFailed(endErr(c))
		x.c.flush()
		return
	case *upH2:
		x.ended()
		return
	case *idleTag:
		h.loop(c).dropIdle(c, x)
		return
	default:
		c.Close()
		return
	}
	if c == s.client {
		if c.TLSTruncated() {
			s.clientCut()
			return
		}
		if !s.hasP && s.w.leave(s.pool, &s.x.queued, false) {
			// Its FIN while it waits in the queue, nothing sent: it
			// leaves (as HAProxy's queue, which drops a client closed
			// with nothing to pass on). Bytes held keep its place,
			// passed on with the FIN at its turn.
			s.x.term = termClient
			s.client.Close()
			return
		}
		s.clientEOF = true
		if s.up != nil {
			s.up.CloseWrite()
		}
	} else {
		if c.TLSTruncated() {
			// The server's FIN without close_notify, which anyone on
			// the path can send: the client is reset, as for the
			// server's reset, not given an end that would read as the
			// server's own (over TLS, close_notify). So is the server
			// while the client's stream is open: a close would send it
			// close_notify, the client's end, for a stream cut.
			if s.x.term == termNone {
				s.x.term = termServer
			}
			s.client.Reset()
			if s.clientEOF {
				s.up.Close()
			} else {
				s.up.Reset()
			}
			return
		}
		s.upEOF = true
		s.client.CloseWrite()
	}
	if s.clientEOF && s.upEOF {
		s.client.Close()
		s.up.Close()
	}
}

// clientCut ends the session at a TLS client's FIN without close_notify,
// which anyone on the path can send: the server is reset, as for the
// client's reset, not given an end that would read as the client's own
// (its FIN, or over TLS close_notify), and so is the client, whose close
// would send it close_notify for a server's stream that did not end. It
// is the client's abort (CD). A client in the pool's queue gives up its
// place here, before a turn could come to it ahead of its OnClose. The
// proxy reads nothing of a client while it connects (the FIN comes once
// a server took what the client sent), but up may still be a dial where
// that changes: Reset abandons it, and done, set before either OnClose,
// keeps the upstream's, which may come first, from taking the abandoned
// dial for a failed connect and dialing the next server. Loop goroutine.
func (s *session) clientCut() {
	if s.x.term == termNone {
		s.x.term = termClient
	}
	s.done = true
	s.w.leave(s.pool, &s.x.queued, false)
	if s.up != nil {
		s.up.Reset()
	}
	s.client.Reset()
}

// OnClose ends the session with either side: a failed dial tries the next
// server, anything else closes the other side, with a reset where this one
// ended in an error. Loop goroutine.
func (h *handler) OnClose(c *engine.Conn, err error) {
	var s *session
	switch x := c.Context().(type) {
	case *session:
		s = x
	case *hsession:
		if c == x.client {
			x.clientClosed(err)
		} else if c == x.up {
			x.upFailed(err)
			x.syncRead()
		}
		return
	case *h2conn:
		x.clientClosed(err)
		return
	case *h2stream:
		if c == x.up {
			x.upFailed(err)
			x.c.flush()
		}
		return
	case *upH2:
		x.closed(err)
		return
	case *idleTag:
		h.loop(c).dropIdle(c, x)
		return
	default:
		// Rejected by max_conns, a dial Dial itself closed, an upstream
		// let go of, or a TLS client whose handshake failed.
		h.handshakeFailed(c, err)
		return
	}
	if c == s.client {
		s.done = true
		s.idle.Stop()
		s.w.leave(s.pool, &s.x.queued, false)
		s.qt.Stop()
		if s.hasP {
			s.hasP = false
			s.pend.Release()
		}
		s.logConn(err)
		s.ln.stats[s.ls.id].active.dec()
		s.ln.conns.Add(-1)
		s.ls.moveLog(s.ln, nil)
		if s.up != nil && !s.up.Closed() {
			closePeer(s.up, err)
		}
		return
	}
	if c != s.up {
		return
	}
	st := s.ls.stats(s.pool, s.srv)
	st.active.dec()
	s.pool.servers[s.srv].release(s.ls.id)
	if !s.upOpen {
		if s.done {
			return // the client left while its upstream was connecting
		}
		if errors.Is(err, net.ErrClosed) {
			// The engine's stop cut the connect, and the client with
			// it: no connect failed, and none is tried again (KD), as
			// hsession.upFailed.
			s.kill()
			return
		}
		s.p.dialFailed(s.pool, s.srv, st, err)
		s.failedAt(s.srv)
		s.up = nil
		s.connect()
		return
	}
	if err != nil && s.x.term == termNone {
		s.x.term = sideTerm(err, termServer, termServerTO)
	}
	if !s.client.Closed() {
		closePeer(s.client, err)
	}
}

// handshakeFailed counts and logs (a line a second at most for each
// listener: lnLogs) the failed handshake of c, closed with err and never
// opened, if it is a client of a TLS listener in force: the engine's
// OnClose alone, as a failed dial's. (One cut by the engine's
// shutdown, net.ErrClosed, did not fail; one accepted on a socket a
// reload has closed since is not counted.) Loop goroutine.
func (h *handler) handshakeFailed(c *engine.Conn, err error) {
	if err == nil || c.Listener() == nil || c.TLS() != nil || errors.Is(err, net.ErrClosed) {
		return // closed by the proxy, a dial, a client opened, or the shutdown
	}
	ls := h.loop(c)
	if l := ls.byLn[c.Listener()]; l != nil && l.tls != nil {
		l.stats[ls.id].tlsFailed.inc()
		l.logs.tls.logf((*Proxy)(h), "proxy: listener %s: TLS handshake with %v failed: %v", l.name, c.RemoteAddr(), err)
	}
}

// loop returns the state of c's loop.
func (h *handler) loop(c *engine.Conn) *loopState { return h.loops[c.Loop().ID()] }

// closePeer closes c after its queue; when the other side ended in an
// error (a reset, a failed send) rather than a close, it resets c at once
// (engine.Conn.Reset: its queue dropped), so that its peer learns that the
// stream broke instead of seeing an orderly end. Engine shutdown
// (net.ErrClosed) is not an error here. Loop goroutine.
func closePeer(c *engine.Conn, err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.Reset()
		return
	}
	c.Close()
}
