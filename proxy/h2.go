package proxy

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// HTTP/2 clients (h2c with prior knowledge) of a mode http listener with
// h2c. A client whose first bytes are the client preface becomes an
// h2conn, on its loop, running an internal/h2 Server; each of its streams
// is an h2stream, one request forwarded as HTTP/1.1 over a connection of
// the pool it routes to (the loop's idle keep-alive ones, or a dial), the
// Context of that upstream connection. Flow control is the backpressure:
// a stream's DATA is Consumed (its window returned to the client) only
// once its upstream took the bytes, and its upstream is not read while
// the stream's or the connection's send window, or the client's write
// queue, is full.

// h2conn is one HTTP/2 client connection: the Context of the client's
// engine.Conn and the h2.Handler of its Server.
type h2conn struct {
	p      *Proxy
	ls     *loopState
	ln     *listener // for new streams (a reload's listener, refreshed per stream)
	client *engine.Conn
	srv    *h2.Server
	idx    int                         // in ls.h2conns
	in     []byte                      // the start of a frame (or of the preface) a read ended in (Server.FeedTail)
	writev func([][]byte) (int, error) // client.Writev, made once

	streams []*h2stream // open
	free    []*h2stream // kept for the next streams, their buffers with them
	rests   []localRest // the proxy's answers whose body waits for window

	closing bool // the client is being closed
	done    bool // the client has closed
	// endTerm is the term of the streams the client's end cuts
	// (clientClosed): CD, or CT where the client was reset for
	// write_timeout, KD where the engine's stop cut it; termNone before.
	endTerm uint8
	cbp     bool // a stream's upstream is paused by the client's queue
	rpaused bool // the client's reading is paused by its queue (flush)
	scratch []byte

	timer   engine.Timer
	timerFn func()
	armed   bool
	armedAt int64
	idleAt  int64 // Proxy.now since when no stream is open
	finalAt int64 // Proxy.now when the final GOAWAY goes without the PING's ACK (goAway), 0 before

	// feeding: inside srv.FeedTail. ups are the upstream connections a
	// request head was written to meanwhile, flushed at its end.
	feeding bool
	ups     laterFlush[*upH2]

	// h2_response_hold (h2up_stream.go: h2Hold): upResv is what the
	// streams to h2c pools may hold of their responses, upWait the
	// streams waiting to go upstream until it has room, upWake set
	// where it shrank with streams waiting (flush starts them).
	upResv int64
	upWait []*h2stream
	upWake bool
}

// laterFlush holds the connections a head was written to while a Feed of
// the other side ran, flushed at its end (flushAll): the body that follows
// the head in the same read then goes with it (WriteDataTo sends what is
// pending with its frames), one TLS record. Loop goroutine.
type laterFlush[T interface {
	comparable
	flush()
}] struct{ list []T }

// add flushes x now, or, while feeding, at the Feed's end.
func (l *laterFlush[T]) add(x T, feeding bool) {
	if !feeding {
		x.flush()
		return
	}
	if n := len(l.list); n == 0 || l.list[n-1] != x {
		l.list = append(l.list, x)
	}
}

// flushAll flushes what add left for the end of the Feed.
func (l *laterFlush[T]) flushAll() {
	for _, x := range l.list {
		x.flush()
	}
	clear(l.list)
	l.list = l.list[:0]
}

// localRest is the rest of the body of the proxy's own answer on stream
// id (respond), which the send windows did not take: sent as they open
// (OnWritable), the stream reset past write_timeout as a stalled one is.
// The stream itself is released: nothing else of it is kept.
type localRest struct {
	id     uint32
	rest   []byte // a slice of localResponse's, not the stream's
	reqEnd bool   // the request ended: no RST_STREAM(NO_ERROR) after the body
	since  int64  // Proxy.now when the window closed
}

// h2stream is one stream of an h2conn and its upstream connection, whose
// Context it is.
type h2stream struct {
	c    *h2conn
	id   uint32
	ln   *listener // the listener in force at the stream's start
	pool *pool
	up   *engine.Conn
	srv  int
	hkey uint64 // the request's key hash (balance hash)
	// hpeer is the request's client as key client takes it
	// (forwardedClient, once a request: hashKey), which a reload's
	// rekey hashes and rate_limit's key client spends the budget of.
	hpeer netip.Addr
	dialing
	upOpen bool
	reused bool
	retry  bool

	head    bool  // HEAD: the response has no body
	idem    bool  // may be retried: GET, HEAD or OPTIONS without a body
	chunked bool  // the request body goes chunked (no content-length)
	reqEnd  bool  // the client's request ended (END_STREAM)
	reqDone bool  // the whole request went to up
	held    int   // DATA bytes written to up (or body) not yet Consumed
	reqN    int64 // request body bytes received
	local   bool  // the proxy answered the stream itself
	out     []byte
	body    []byte // the request body (framed) received before up connected

	respHead bool
	resp     h1.Response
	respBody h1.Body
	uin      []byte
	interims int
	trl      []byte // the response's chunked trailer section
	respConn []byte // the response head's connection options (appendConnOptions)
	respN    int64  // response body data bytes sent
	pend     engine.Buffer
	pbuf     bool   // pend is held (else the bytes held are in pc)
	pc       []byte // what was left of pend when a window closed (unring)
	poff     int    // the held bytes' next one
	dataEnd  int    // the held bytes' end of the data span being sent (from poff)
	hasP     bool   // response bytes held (pend or pc): the send window closed before their end
	bodyDone bool   // the response body ended (all of it is held, or sent)
	extra    bool   // bytes followed the response: up is not reused
	paused   bool   // up's reading paused (hasP or cbp)
	cbp      bool   // paused by the client's write queue
	waiting  bool   // response_timeout runs from mark
	mark     int64

	hb         []byte
	fields     []hpack.Field
	x          exchange
	retryAfter int64 // a 429's Retry-After, seconds (rate_limit)

	u2 upSide // toward an h2c pool (h2up_stream.go)

	rt retryState // the request's retry policy (retry.go)

	w waiter // its place in the pool's queue for a slot (max_conns)
}

// sniffH2 looks at a new client's first bytes on an h2c listener, or over
// TLS where ALPN chose h2: while they are the start of the client preface
// they are kept (in s.in) and it reports true; once they are all of it
// the client becomes an h2conn. At the first byte that differs it reports
// false and the client stays HTTP/1.1 (s.in, its bytes so far, is the
// head's start); but a client ALPN gave h2 has agreed to speak HTTP/2
// only, and bytes that are not the preface are a connection error
// (PROTOCOL_ERROR, RFC 9113 3.4): it is closed, without a GOAWAY (which
// the RFC lets go unsent to a peer that does not speak HTTP/2) and
// without an HTTP/1.1 answer, counted and logged (prefaceFailed), and it
// reports true. Loop goroutine.
func (s *hsession) sniffH2(b engine.Buffer) bool {
	switch h2.SniffPreface(len(s.in), b.Bytes()) {
	case h2.SniffOther:
		s.sniff = false
		if st := s.client.TLS(); st != nil && st.NegotiatedProtocol == "h2" {
			s.prefaceFailed(b.Bytes())
			b.Release()
			s.client.Close()
			return true
		}
		return false
	case h2.SniffPartial:
		s.in = append(s.in, b.Bytes()...)
		b.Release()
		return true
	}
	s.sniff = false
	s.startH2(b)
	return true
}

// prefaceFailed counts a client ALPN gave h2 whose first bytes, s.in
// then b, are not the HTTP/2 preface, and logs it (a line a second at
// most for each listener: lnLogs) with what they were (sentSummary), not
// what they said. It has no line in the access log, as a client whose
// handshake failed has none: no request was made. Loop goroutine.
func (s *hsession) prefaceFailed(b []byte) {
	l := s.ln
	l.stats[s.ls.id].h2Preface.inc()
	l.logs.preface.logf(s.p, "proxy: listener %s: client %v chose h2 by ALPN but did not send the HTTP/2 preface, closed; its first bytes: %s",
		l.name, s.client.RemoteAddr(), sentSummary(s.in, b))
}

// maxLoggedMethod bounds the method sentSummary shows: a longer one is a
// client's text as much as a target is.
const maxLoggedMethod = 16

// sentSummary describes a client's first bytes, in then b, without their
// content, decrypted TLS data that may carry a credential (a bearer
// token, a cookie): their count, and where they begin with an HTTP/1.x
// request line (the mistake a client makes that chose h2 and speaks
// HTTP/1.1), its version and method, which is a token of at most
// maxLoggedMethod bytes, not its target.
func sentSummary(in, b []byte) string {
	n := strconv.Itoa(len(in)+len(b)) + " bytes"
	p := append(in[:len(in):len(in)], b...)
	end := bytes.IndexByte(p, '\n')
	if end < 0 {
		return n
	}
	line := bytes.TrimSuffix(p[:end], []byte("\r"))
	method, rest, ok := bytes.Cut(line, []byte(" "))
	sp := bytes.LastIndexByte(rest, ' ')
	if !ok || sp < 0 || !validToken(string(method)) {
		return n
	}
	v := rest[sp+1:]
	if len(v) != len("HTTP/1.1") || !bytes.HasPrefix(v, []byte("HTTP/1.")) || v[7] < '0' || v[7] > '9' {
		return n
	}
	if len(method) > maxLoggedMethod {
		return n + ", an " + string(v) + " request line (its method longer than " + strconv.Itoa(maxLoggedMethod) + " bytes)"
	}
	return n + ", an " + string(v) + " request line, method " + string(method)
}

// startH2 turns the session into an h2conn, b being the bytes that
// completed the preface. Loop goroutine.
func (s *hsession) startH2(b engine.Buffer) {
	s.done = true
	s.timer.Stop()
	s.armed = false
	s.unlist()
	ls, l := s.ls, s.ln
	c := &h2conn{p: s.p, ls: ls, ln: l, client: s.client, in: s.in, idleAt: s.p.now()}
	s.in = nil
	c.srv = h2.NewServer(c, l.h2Settings())
	c.writev = c.client.Writev
	c.timerFn = c.onTimer
	c.client.SetContext(c)
	c.idx = len(ls.h2conns)
	ls.h2conns = append(ls.h2conns, c)
	l.stats[ls.id].h2Conns.inc()
	if !s.reading {
		c.client.ResumeRead()
	}
	c.armAt(deadline(c.idleAt, time.Duration(l.cfg.KeepaliveTimeout)))
	if ls.draining || s.retired() {
		c.shutdown()
	}
	c.clientData(b)
}

// clientData feeds the client's bytes to the Server: whole frames from
// b, the frame b ends in copied into c.in (FeedTail). An error leaves the
// Server done with its GOAWAY pending, which flush sends before closing.
// Loop goroutine.
func (c *h2conn) clientData(b engine.Buffer) {
	c.feeding = true
	c.srv.FeedTail(&c.in, b.Bytes())
	c.feeding = false
	b.Release()
	c.ups.flushAll()
	c.flush()
}

// flush writes the Server's output to the client, unless the client's
// queue holds the high-water mark (then the client's OnWritable does),
// and closes the client once the Server is done. While the queue holds
// the mark the client is not read (readClient resumes it): each request
// read adds its response to the queue or to what the Server holds, so a
// client that sends and does not read would otherwise grow them for as
// long as it sends, streams that end at once (the proxy's own answers,
// a server's short responses) never pausing an upstream. What the Server
// holds meanwhile is the output of one read of the client's and of
// responses the streams open had in hand. Loop goroutine.
func (c *h2conn) flush() {
	if c.done || c.closing {
		return
	}
	if c.upWake {
		c.upWake = false
		c.h2Wake()
	}
	full := c.client.QueuedMemory() >= c.p.cfg.Engine.WriteHighWater
	if out := c.srv.Pending(); len(out) > 0 && (!full || c.srv.Done()) {
		c.client.Write(out)
		c.srv.Written(len(out))
		full = c.client.QueuedMemory() >= c.p.cfg.Engine.WriteHighWater
	}
	if c.srv.Done() {
		c.closing = true
		c.client.CloseLinger(lingerTime, lingerBytes) // (reading resumes)
		return
	}
	if full && !c.rpaused {
		c.rpaused = true
		c.client.PauseRead()
	}
}

// readClient resumes reading the client flush paused, once its queue is
// below the mark. Called last in the client's OnWritable: ResumeRead may
// deliver held data at once. Loop goroutine.
func (c *h2conn) readClient() {
	if c.rpaused && !c.done && !c.closing && c.client.QueuedMemory() < c.p.cfg.Engine.WriteHighWater {
		c.rpaused = false
		c.client.ResumeRead()
	}
}

// goAway starts a graceful close: GOAWAY, the streams open finish, then
// the client is closed. Loop goroutine.
func (c *h2conn) goAway() {
	c.shutdown()
	c.flush()
}

// goAwayWait bounds the round trip between the two GOAWAYs of a graceful
// close (h2.Server.Shutdown): a client that has not answered the PING of
// the first by then gets the final one (ShutdownNow), and the close goes
// on, instead of waiting for the client's PING ACK without end.
const goAwayWait = time.Second

// shutdown starts the Server's graceful shutdown, its final GOAWAY due
// at the PING's ACK or goAwayWait later (onTimer). Loop goroutine.
func (c *h2conn) shutdown() {
	if c.finalAt != 0 {
		return
	}
	c.srv.Shutdown()
	c.finalAt = c.p.now() + int64(goAwayWait)
	c.armAt(c.finalAt)
}

// retired reports whether a reload removed or replaced c's listener.
func (c *h2conn) retired() bool { return c.ln.stats[c.ls.id].cur == nil }

// armAt arms the connection's timer for at, unless it fires before.
func (c *h2conn) armAt(at int64) {
	if c.armed && c.armedAt <= at || c.done {
		return
	}
	c.timer.Stop()
	c.armed, c.armedAt = true, at
	c.timer = c.client.Loop().AfterFunc(time.Duration(at-c.p.now()), c.timerFn)
}

// onTimer acts on the streams whose response_timeout ran out, those a
// closed send window held for write_timeout, on keepalive_timeout (no
// stream open for that long: GOAWAY and close), and on goAwayWait (the
// final GOAWAY), and re-arms for the next deadline. Loop goroutine.
func (c *h2conn) onTimer() {
	c.armed = false
	if c.done || c.closing {
		return
	}
	now := c.p.now()
	next := int64(-1)
	if c.finalAt != 0 {
		if now >= c.finalAt {
			c.srv.ShutdownNow() // (nothing if the ACK came first)
		} else {
			next = c.finalAt
		}
	}
	for i := len(c.streams) - 1; i >= 0; i-- {
		if i >= len(c.streams) {
			continue
		}
		st := c.streams[i]
		if st.w.q != nil {
			if dl := deadline(st.w.since, time.Duration(st.pool.queueCfg().QueueTimeout)); now < dl {
				if next < 0 || dl < next {
					next = dl
				}
			} else {
				st.w.leave(st.pool, &st.x.queued, true)
				st.x.term = termQueue
				st.respond(503)
			}
			continue
		}
		if !st.waiting || st.cbp {
			continue
		}
		dl := st.waitDeadline()
		if st.paused {
			dl = deadline(st.mark, time.Duration(c.p.cfg.Engine.WriteTimeout))
		}
		if now < dl {
			if next < 0 || dl < next {
				next = dl
			}
			continue
		}
		if st.paused {
			st.stalled()
		} else {
			st.timedOut()
		}
	}
	for i := 0; i < len(c.rests); i++ {
		if dl := deadline(c.rests[i].since, time.Duration(c.p.cfg.Engine.WriteTimeout)); now >= dl {
			c.srv.Reset(c.rests[i].id, h2.Cancel) // (stalled, as a proxied response's)
			c.dropRest(i)
			i--
		} else if next < 0 || dl < next {
			next = dl
		}
	}
	if len(c.streams) == 0 && len(c.rests) == 0 && c.finalAt == 0 {
		if dl := deadline(c.idleAt, time.Duration(c.ln.cfg.KeepaliveTimeout)); now >= dl {
			c.ln.stats[c.ls.id].idleClosed.inc()
			c.shutdown() // (flushed below)
		} else if next < 0 || dl < next {
			next = dl
		}
	}
	if next >= 0 {
		c.armAt(next)
	}
	c.flush()
}

// clientWritable resumes the upstreams the client's queue paused, while
// it stays below the mark, and has the streams waiting for room in
// h2_response_hold looked at again. A resume may deliver held data at once and end
// streams: the walk starts again after each. Loop goroutine.
func (c *h2conn) clientWritable() {
	if len(c.upWait) > 0 {
		c.upWake = true // (the queue h2Over counts drained: flush starts them)
	}
	if !c.cbp {
		return
	}
	c.cbp = false
	for i := 0; i < len(c.streams); i++ {
		if c.client.QueuedMemory() >= c.p.cfg.Engine.WriteHighWater {
			c.cbp = true // the rest at the next OnWritable
			return
		}
		if st := c.streams[i]; st.cbp {
			st.cbp = false
			st.resume()
			i = -1
		}
	}
}

// clientEOF: the client sent its FIN; an HTTP/2 client that half-closes is
// done: its streams end and it is closed. Loop goroutine.
func (c *h2conn) clientEOF() {
	c.srv.Close()
	c.closing = true
	c.client.Close()
}

// clientClosed ends the connection, its client closed with err: every
// stream's upstream is closed. Loop goroutine.
func (c *h2conn) clientClosed(err error) {
	c.endTerm = sideTerm(err, termClient, termClientTO)
	c.closing = true
	c.srv.Close() // OnReset for each stream
	c.done = true
	c.timer.Stop()
	c.rests = nil
	for len(c.streams) > 0 { // (streams the Server had ended already)
		st := c.streams[len(c.streams)-1]
		st.x.term = c.clientTerm()
		st.abandon()
	}
	ls := c.ls
	last := ls.h2conns[len(ls.h2conns)-1]
	ls.h2conns[c.idx], last.idx = last, c.idx
	ls.h2conns[len(ls.h2conns)-1] = nil
	ls.h2conns = ls.h2conns[:len(ls.h2conns)-1]
	c.ln.stats[ls.id].active.dec()
	c.ln.conns.Add(-1)
	ls.moveLog(c.ln, nil)
}

func (c *h2conn) find(id uint32) *h2stream {
	for _, st := range c.streams {
		if st.id == id {
			return st
		}
	}
	return nil
}

// newStream returns a stream for id, reusing a freed one and its buffers
// (trimmed at its release).
func (c *h2conn) newStream(id uint32) *h2stream {
	var st *h2stream
	if n := len(c.free); n > 0 {
		st = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
	} else {
		st = &h2stream{c: c}
	}
	resp := st.resp
	*st = h2stream{c: c, id: id, ln: c.ln, out: st.out[:0], body: st.body[:0], uin: st.uin[:0], trl: st.trl[:0], respConn: st.respConn[:0],
		hb: st.hb[:0], fields: st.fields[:0], x: exchange{meta: st.x.meta[:0]}, resp: h1.Response{Headers: resp.Headers[:0]}, u2: st.u2.reuse(),
		w: waiter{of: st}, rt: retryState{kept: st.rt.kept[:0]}}
	c.streams = append(c.streams, st)
	c.ls.moveLog(nil, c.ln) // (its lines go to its listener's log: a stream is a user of it of its own)
	return st
}

// keptStreams is how many ended streams a connection keeps for its next
// ones, with their buffers (trim: each up to keptHeadBuf bytes or
// keptFields fields). A client's usual concurrency (a browser's handful,
// a gRPC channel's few) finds its streams there and allocates none; one
// that once had more in flight, up to h2_max_concurrent_streams (100 by
// default, any number configured), does not leave them all kept for the
// connection's life: the streams of a burst beyond keptStreams are
// allocated, and go when they end. What an idle connection keeps of its
// streams is so bounded by about keptStreams times 60 KiB (some ten
// buffers of keptHeadBuf, six field lists of keptFields), 1 MiB at the
// worst, and a few KiB for ordinary streams.
const keptStreams = 16

// keptFields is the capacity, in fields, up to which an ended stream
// keeps a field list for the next (trimmed): about keptHeadBuf's worth
// of hpack.Field, more fields than an ordinary head or trailer section
// has.
const keptFields = 64

// trim bounds what st, ended, keeps for the next stream of its
// connection: each buffer up to keptHeadBuf bytes (emptied), each field
// list up to keptFields fields, zeroed (trimmed), and the response head's
// other slices, into up's reads, dropped; so that a stream that once
// carried a large head, trailers or body does not keep them, nor the
// buffers its fields point into, for the connection's life. (x.meta is
// bounded by the access log's limits, rt.kept by dropKept.)
func (st *h2stream) trim() {
	st.out, st.body, st.uin, st.trl, st.hb = emptied(st.out), emptied(st.body), emptied(st.uin), emptied(st.trl), emptied(st.hb)
	st.pc, st.respConn = emptied(st.pc), emptied(st.respConn)
	st.fields = trimmed(st.fields, keptFields)
	st.resp = h1.Response{Headers: trimmed(st.resp.Headers, keptFields)}
	st.u2.trim()
}

// release ends st: its upstream must be let go of already. It is kept for
// the connection's next streams, trimmed, up to keptStreams of them.
func (c *h2conn) release(st *h2stream) {
	st.w.leave(st.pool, &st.x.queued, false)
	st.dropHeld()
	if st.u2.on {
		st.h2Unwait()
		st.u2.rbuf, st.u2.roff, st.u2.up = st.u2.rbuf[:0], 0, false
		st.h2Hold()
	}
	for i, x := range c.streams {
		if x == st {
			last := len(c.streams) - 1
			c.streams[i] = c.streams[last]
			c.streams[last] = nil
			c.streams = c.streams[:last]
			c.ls.moveLog(st.ln, nil)
			break
		}
	}
	st.id = 0
	if len(c.free) < keptStreams {
		st.trim()
		c.free = append(c.free, st)
	}
	if len(c.streams) == 0 && !c.done {
		c.idleAt = c.p.now()
		c.armAt(deadline(c.idleAt, time.Duration(c.ln.cfg.KeepaliveTimeout)))
	}
}

// OnRequest starts a stream's exchange: checked as an HTTP/1.1 request is
// (CONNECT 501, dot-segments 400, max_request_body 413), routed by its
// :authority (else Host) and :path, and sent on an upstream connection.
func (c *h2conn) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	c.ln = c.ls.current(c.ln)
	st := c.newStream(id)
	lst := c.ln.stats[c.ls.id]
	lst.requests.inc()
	lst.h2Streams.inc()
	st.reqEnd = end
	host := r.Authority
	if len(host) == 0 {
		for _, f := range r.Fields {
			if string(f.Name) == "host" {
				host = f.Value
			}
		}
	}
	st.begin(r, host)
	st.head = string(r.Method) == "HEAD"
	switch {
	case string(r.Method) == "CONNECT":
		st.respond(501)
		return
	case !h1.ValidAuthority(host) || dotSegments(r.Path) || !h1.ValidTarget(r.Method, r.Path) || !h1Fields(r.Fields),
		rejectsUnderscores(st.ln, r.Fields, h2Name):
		st.respond(400)
		return
	case st.ln.cfg.MaxRequestBody > 0 && r.ContentLength > st.ln.cfg.MaxRequestBody:
		st.respond(413)
		return
	}
	st.idem = end && (st.head || string(r.Method) == "GET" || string(r.Method) == "OPTIONS")
	st.chunked = !end && r.ContentLength < 0
	st.pool = st.ln.routeExchange(c.ls, &st.x, r.Path, host)
	st.hashKey(r, host)
	st.rt.start(st.ln.retryFor(st.x.route-1), r.Method, end, r.ContentLength, st.pool.h2)
	if st.rateLimited() {
		return
	}
	if st.pool.h2 {
		st.u2.on = true
		st.h2Head(r, host)
		st.h2Pick()
		return
	}
	st.writeHead(r, host)
	st.acquire()
}

// begin starts the stream's exchange for the access log.
func (st *h2stream) begin(r *h2.Request, host []byte) {
	x := &st.x
	*x = exchange{open: true, h2: true, meta: x.meta[:0]}
	if st.ln.alog == nil {
		return
	}
	x.start, x.parsed, x.minor = st.c.p.now(), true, 1
	x.meta = append(x.meta, r.Method[:min(len(r.Method), logMethodMax)]...)
	x.mlen = len(x.meta)
	x.meta = append(x.meta, host[:min(len(host), logHostMax)]...)
	x.hlen = len(x.meta) - x.mlen
	x.meta = append(x.meta, r.Path[:min(len(r.Path), logTargetMax)]...)
}

// writeHead writes the request's HTTP/1.1 head into st.out: the path
// after rewrite_prefix, Host from host (or host_rewrite), the fields but
// the connection's, content-length, te and the forwarding ones (as
// gotHead treats an HTTP/1.1 request's, after trusted_proxies) and those
// request_headers and headers_with_underscores drop (dropUnderscored),
// the cookie crumbs as one field (RFC 9113 8.2.3), the fields
// request_headers write, the framing, X-Forwarded-* and Via.
func (st *h2stream) writeHead(r *h2.Request, host []byte) {
	c := st.c
	rules, rw := st.ln.reqRules(st.x.route - 1)
	o := append(st.out[:0], r.Method...)
	o = append(o, ' ')
	o = rw.appendPath(o, r.Path)
	o = append(o, " HTTP/1.1\r\n"...)
	if rw.host != nil {
		o = h1.AppendHeader(o, hdrHost, rw.host)
	} else {
		o = h1.AppendHeader(o, hdrHost, host)
	}
	client := c.client.RemoteAddr().Addr().Unmap()
	trusted := st.ln.trusts(client)
	xfp, xfh, cookie := false, false, false
	for _, f := range r.Fields {
		switch n := f.Name; {
		case string(n) == "host", string(n) == "content-length", string(n) == "te", string(n) == "x-forwarded-for",
			!rules.keep(n), st.ln.dropUnderscored(c.ls.id, n):
		case string(n) == "cookie":
			cookie = true
		case !trusted && forwardingField(n):
		case string(n) == "x-forwarded-proto":
			xfp = true
			o = h1.AppendHeader(o, n, f.Value)
		case string(n) == "x-forwarded-host":
			xfh = true
			o = h1.AppendHeader(o, n, f.Value)
		default:
			o = h1.AppendHeader(o, n, f.Value)
		}
	}
	if cookie {
		o = append(o, "cookie: "...)
		first := true
		for _, f := range r.Fields {
			if string(f.Name) == "cookie" {
				if !first {
					o = append(o, "; "...)
				}
				o, first = append(o, f.Value...), false
			}
		}
		o = append(o, "\r\n"...)
	}
	o = rules.appendH1(o)
	switch {
	case r.ContentLength >= 0:
		o = appendLength(o, r.ContentLength)
	case st.chunked:
		o = append(o, "Transfer-Encoding: chunked\r\n"...)
	}
	// X-Forwarded-For: a trusted client's values received, in order, and
	// the client.
	o = append(o, "X-Forwarded-For: "...)
	o = appendXFF(o, r.Fields, trusted, client)
	o = append(o, "\r\n"...)
	if !xfp {
		o = h1.AppendHeader(o, hdrXFP, st.ln.scheme)
	}
	if !xfh {
		o = h1.AppendHeader(o, hdrXFH, host)
	}
	st.out = append(o, "Via: 2.0 spindle\r\n\r\n"...)
}

var hdrHost = []byte("Host")

// acquire gets the stream an upstream connection, as hsession.acquire.
func (st *h2stream) acquire() {
	ls := st.c.ls
	if st.w.front {
		st.restart(pickServer(ls, st.pool, st.hkey)) // (its turn in the queue came)
	} else {
		st.dialing = dialing{start: pickServer(ls, st.pool, st.hkey)}
	}
	if up, i := ls.takeIdleFor(st.pool, st.start, st.w.front); up != nil {
		st.reuse(up, i)
		return
	}
	st.connect()
}

// reuse sends the request on up, an idle connection to server i taken
// from the loop's pool.
func (st *h2stream) reuse(up *engine.Conn, i int) {
	st.up, st.srv, st.upOpen, st.reused = up, i, true, true
	up.SetContext(st)
	sst := st.c.ls.stats(st.pool, i)
	sst.active.inc()
	sst.reusedReqs.inc()
	st.sendHead()
}

// connect dials the next server up, as hsession.connect.
func (st *h2stream) connect() {
	up, i, status := st.dialNext(st.c.ls, st.ln, st.pool, st.c.client, &st.x)
	switch status {
	case statusQueued:
		st.queue()
		return
	case statusStopping:
		// The engine's stop refused the dial, and cuts the client next:
		// the stream ends here (KD), as hsession.connect's exchange.
		st.kill()
		return
	}
	if up == nil {
		st.respond(status)
		return
	}
	st.up, st.srv, st.upOpen, st.reused = up, i, false, false
	up.SetContext(st)
}

// queue puts the stream in its pool's queue for a slot, every server up
// being at its max_conns (queue_timeout, then 503), or answers 503 where
// the queue is full. A stream waiting holds no slot: its body, up to its
// window, is held as while its upstream connects.
func (st *h2stream) queue() {
	if !st.c.ls.wait(st.pool, &st.w, st.failed, &st.x.term) {
		st.respond(503)
		return
	}
	st.c.armAt(deadline(st.w.since, time.Duration(st.pool.queueCfg().QueueTimeout))) // (from its first wait)
}

// woken: the queue's turn came (a slot may be free): the stream looks for
// a connection again, an idle one first.
func (st *h2stream) woken() {
	st.repool()
	c := st.c
	st.x.queued = st.w.waited(c.p.now())
	st.acquire()
	c.flush()
}

// upOpened sends the request once a dialed upstream connected.
func (st *h2stream) upOpened(up *engine.Conn) {
	if up != st.up {
		up.SetContext(nil)
		up.Close()
		return
	}
	st.upOpen = true
	sst := st.c.ls.stats(st.pool, st.srv)
	sst.connects.inc()
	sst.newReqs.inc()
	st.pool.servers[st.srv].connected(st.pool)
	st.sendHead()
	st.c.flush()
}

// sendHead sends the head and the body received so far.
func (st *h2stream) sendHead() {
	st.x.srv, st.x.reused = st.pool.servers[st.srv], st.reused
	sst := st.c.ls.stats(st.pool, st.srv)
	sst.requests.inc()
	sst.bytesOut.addInt(len(st.out) + len(st.body))
	_, err := st.up.Write(st.out)
	if err == nil && len(st.body) > 0 {
		_, err = st.up.Write(st.body)
	}
	if err != nil {
		if st.reused {
			st.closeUp(false)
			st.redial()
			return
		}
		st.writeFailed(err)
		return
	}
	st.body = st.body[:0]
	st.reqDone = st.reqEnd
	st.waiting, st.mark = true, st.c.p.now()
	st.c.armAt(deadline(st.mark, st.waitTimeout()))
	st.credit()
}

// redial sends the request again on a new connection.
func (st *h2stream) redial() {
	st.dialing = dialing{start: pickServer(st.c.ls, st.pool, st.hkey)}
	st.connect()
}

// toUp sends request body bytes (framed) to up, or keeps them until it
// connects.
func (st *h2stream) toUp(p []byte) {
	if st.rt.hold && st.rt.pol.buffer > 0 {
		st.keepBody(p)
	}
	if !st.upOpen {
		st.body = append(st.body, p...)
		return
	}
	st.c.ls.stats(st.pool, st.srv).bytesOut.addInt(len(p))
	if _, err := st.up.Write(p); err != nil {
		st.writeFailed(err)
	}
}

// credit returns the DATA up took to the client's windows while up's
// queue is below the high-water mark (else up's OnWritable does).
func (st *h2stream) credit() {
	if st.held == 0 || st.up == nil || !st.upOpen || st.up.QueuedMemory() >= st.c.p.cfg.Engine.WriteHighWater {
		return
	}
	st.c.srv.Consumed(st.id, st.held)
	st.held = 0
}

// OnData forwards request body bytes.
func (c *h2conn) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	st := c.find(id)
	if st == nil || st.local {
		s.Consumed(id, len(p))
		return
	}
	st.reqN += int64(len(p))
	if m := st.ln.cfg.MaxRequestBody; m > 0 && st.reqN > m {
		s.Consumed(id, len(p))
		st.abortBody()
		return
	}
	if st.u2.on {
		st.h2Body(p, end)
		return
	}
	if len(p) > 0 {
		st.held += len(p)
		if st.chunked {
			c.scratch = append(strconv.AppendInt(c.scratch[:0], int64(len(p)), 16), "\r\n"...)
			st.toUp(c.scratch)
			st.toUp(p)
			st.toUp(crlf)
		} else {
			st.toUp(p)
		}
		st.mark = c.p.now()
	}
	if end && c.find(id) == st {
		st.finishReq(nil)
	}
	if c.find(id) == st {
		st.credit()
	}
}

var crlf = []byte("\r\n")

// OnTrailers ends the request with its trailers (a chunked body's; with
// content-length they are dropped). Trailers HTTP/1.1 cannot carry reset
// the stream: the request's head is gone already.
func (c *h2conn) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) {
	st := c.find(id)
	switch {
	case st == nil || st.local:
	case st.u2.on:
		st.h2ReqTrailers(fields)
	case !h1Fields(fields):
		st.x.term = termRequest
		s.Local(id) // (the reset counts as the client's early one)
		st.resetStream(h2.ProtocolError)
	default:
		st.finishReq(fields)
	}
}

// h1Fields reports whether HTTP/1.1 carries fs as they are
// (h1.ValidField: each name a token, no control character but HTAB, nor
// DEL, in a value). internal/h2 lets control characters but NUL, CR and LF
// through in values (RFC 9113 8.2.1), which a server parsing HTTP/1.1
// strictly (internal/h1 among them) refuses, and a lax one may read
// otherwise.
func h1Fields(fs []hpack.Field) bool {
	for _, f := range fs {
		if !h1.ValidField(f.Name, f.Value) {
			return false
		}
	}
	return true
}

// finishReq ends the request body: the last chunk and trailers (but
// those its trailerRules drop).
func (st *h2stream) finishReq(trailers []hpack.Field) {
	st.reqEnd = true
	if st.chunked {
		tr := st.trailerRules()
		o := append(st.c.scratch[:0], "0\r\n"...)
		for _, f := range trailers {
			if tr.kept(f.Name) {
				o = h1.AppendHeader(o, f.Name, f.Value)
			}
		}
		o = append(o, "\r\n"...)
		st.c.scratch = o
		st.toUp(o)
	}
	if st.upOpen && st.up != nil {
		st.reqDone = true
	}
}

// abortBody ends a stream whose body passed max_request_body: 413, or a
// reset once the response has begun.
func (st *h2stream) abortBody() {
	st.closeUp(true)
	if st.respHead {
		st.x.term = termRequest
		st.resetStream(h2.Cancel)
		return
	}
	st.respond(413)
}

// OnReset: the client reset the stream, or the connection ended.
func (c *h2conn) OnReset(s *h2.Server, id uint32, code h2.ErrCode) {
	st := c.find(id)
	if st == nil {
		if i := c.findRest(id); i >= 0 {
			c.dropRest(i)
		}
		return
	}
	if c.srv.Err() == nil { // (not the connection's end)
		st.ln.stats[c.ls.id].h2ResetsClient.inc()
	}
	st.x.term = c.clientTerm()
	st.abandon()
}

// clientTerm is the term of a stream the client ended: its reset (CD),
// or its connection's end (endTerm).
func (c *h2conn) clientTerm() uint8 {
	if c.endTerm != termNone {
		return c.endTerm
	}
	return termClient
}

// OnWritable goes on with a response the stream's window held.
func (c *h2conn) OnWritable(s *h2.Server, id uint32) {
	if st := c.find(id); st != nil {
		st.pump()
	} else if i := c.findRest(id); i >= 0 {
		c.sendRest(i)
	}
}

// sendRest sends what the window allows of rest i, and ends its stream
// once all of it went.
func (c *h2conn) sendRest(i int) {
	r := &c.rests[i]
	n, err := c.srv.WriteData(r.id, r.rest, true)
	if r.rest = r.rest[n:]; err == nil && len(r.rest) > 0 {
		return
	}
	if err == nil && !r.reqEnd {
		c.srv.Reset(r.id, h2.NoError)
	}
	c.dropRest(i)
}

func (c *h2conn) findRest(id uint32) int {
	for i := range c.rests {
		if c.rests[i].id == id {
			return i
		}
	}
	return -1
}

func (c *h2conn) dropRest(i int) {
	c.rests = append(c.rests[:i], c.rests[i+1:]...)
}

// OnGoAway: the client opens no more streams; those open go on.
func (c *h2conn) OnGoAway(*h2.Server, h2.ErrCode, []byte) {}

// resetStream resets the stream (the proxy's doing) and ends it.
func (st *h2stream) resetStream(code h2.ErrCode) {
	c := st.c
	c.srv.Reset(st.id, code)
	st.ln.stats[c.ls.id].h2ResetsProxy.inc()
	st.abandon()
}

// abandon ends the stream before its end: its upstream reset, its
// exchange logged (with the response's status once its head went out).
func (st *h2stream) abandon() {
	st.closeUp(true)
	status := 0
	if st.respHead {
		status = st.resp.Status
	}
	st.end(status, false)
	st.c.release(st)
}

// kill ends the stream as the engine's stop ends the exchanges it cuts
// (KD), the stop having refused its dial or cut the upstream (or h2c
// connection) it had: neither sent again nor answered, counted against
// no server, abandoned (its upstream reset, its exchange logged); the
// stop cuts the client next. Loop goroutine.
func (st *h2stream) kill() {
	st.x.term = termKilled
	st.abandon()
}

// respond answers the stream from the proxy (an error), stops the
// request if it is still coming, and ends the stream. Such a stream
// gives the connection no early reset back (h2.Server.Local): no server
// answered it, and a 400 that costs the client one small request could
// pay for each rapid reset.
func (st *h2stream) respond(status int) {
	c := st.c
	st.local = true
	c.srv.Local(st.id)
	st.closeUp(true)
	st.ln.countResp(c.ls.id, status, true)
	body := localBody(status)
	hb := strconv.AppendInt(append(st.hb[:0], "text/plain; charset=utf-8"...), int64(len(body)), 10)
	n := len(hb)
	if status == 429 {
		hb = strconv.AppendInt(hb, st.retryAfter, 10)
	}
	st.hb = hb
	st.fields = append(st.fields[:0], hpack.Field{Name: hdrContentType, Value: hb[:25]}, hpack.Field{Name: hdrContentLength, Value: hb[25:n]})
	if status == 429 {
		st.fields = append(st.fields, hpack.Field{Name: hdrRetryAfter, Value: hb[n:]})
	}
	rest := false
	if c.srv.WriteHeaders(st.id, status, st.fields, st.head) == nil && !st.head {
		// (A HEAD's has no content.) What the windows do not take goes
		// as they open, the request stopped after it (sendRest).
		if n, err := c.srv.WriteData(st.id, body, true); err == nil && n < len(body) {
			rest = true
			c.rests = append(c.rests, localRest{id: st.id, rest: body[n:], reqEnd: st.reqEnd, since: c.p.now()})
			c.armAt(deadline(c.p.now(), time.Duration(c.p.cfg.Engine.WriteTimeout)))
		}
	}
	st.end(status, true)
	if !st.reqEnd && !rest {
		c.srv.Reset(st.id, h2.NoError)
	}
	c.release(st)
}

var (
	hdrContentType   = []byte("content-type")
	hdrContentLength = []byte("content-length")
	hdrVia           = []byte("via")
)

// localBody is the body of the proxy's response for status.
func localBody(status int) []byte {
	r := localResponse(status)
	return r[bytes.Index(r, []byte("\r\n\r\n"))+4:]
}

// end ends the stream's exchange (route counts, access log).
func (st *h2stream) end(status int, local bool) {
	if st.rt.pol != nil {
		st.retryEnd()
	}
	var respN int64
	if st.respHead && !local {
		respN = st.respN
	}
	st.waiting = false
	st.w.leave(st.pool, &st.x.queued, false) // (the client reset the stream, or went away)
	st.ln.endExchange(st.c.ls, &st.x, st.c.client.RemoteAddr(), status, local, st.reqN, respN, st.c.p.now())
}

// closeUp closes the stream's upstream, if any (a reset where it broke).
func (st *h2stream) closeUp(reset bool) {
	if st.u2.on {
		st.h2Detach(reset)
		return
	}
	up := st.up
	if up == nil {
		return
	}
	st.up = nil
	st.paused, st.cbp = false, false
	st.uin = emptied(st.uin)
	st.c.ls.stats(st.pool, st.srv).active.dec()
	st.pool.servers[st.srv].release(st.c.ls.id)
	up.SetContext(nil)
	if reset {
		up.Reset()
	} else {
		up.Close()
	}
}

// passive records the exchange's outcome for passive health.
func (st *h2stream) passive(ok bool) { st.pool.servers[st.srv].exchanged(st.pool, ok) }

// passiveStatus records the exchange's final response status for passive
// health (server.answered).
func (st *h2stream) passiveStatus(status int) { st.pool.servers[st.srv].answered(st.pool, status) }

// writeFailed handles a write to the upstream that failed with err, as
// hsession.writeFailed: a refused one (net.ErrClosed) waits for the
// connection's OnClose, whose error says how the stream's exchange
// ended (upFailed). Loop goroutine.
func (st *h2stream) writeFailed(err error) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	st.upFailed(err)
}

// upFailed: the upstream broke (closed, reset, a write refused), as
// hsession.upFailed: failover, a retry, 502, or a reset of the stream
// once the response has begun.
func (st *h2stream) upFailed(err error) {
	if st.up == nil {
		return
	}
	switch {
	case errors.Is(err, net.ErrClosed):
		// The engine's stop cut it, and the client with it: the
		// stream ends here (KD), as hsession.upFailed's exchange.
		st.kill()
	case !st.upOpen:
		sst := st.c.ls.stats(st.pool, st.srv)
		sst.active.dec()
		st.pool.servers[st.srv].release(st.c.ls.id)
		st.c.p.dialFailed(st.pool, st.srv, sst, err)
		st.failedAt(st.srv)
		st.up.SetContext(nil)
		st.up = nil
		st.connect()
	case st.respHead:
		if st.resp.Framing == h1.UntilClose && err == nil {
			st.closeUp(false)
			st.bodyDone = true
			st.pump()
			return
		}
		st.x.term = sideTerm(err, termServer, termServerTO)
		st.resetStream(h2.InternalError)
	case st.reused && st.idem && !st.retry && st.interims == 0 && len(st.uin) == 0:
		st.closeUp(false)
		st.retry = true
		st.redial()
	case st.retryReset(h2.ResetConnection, h2.NoError):
	default:
		st.passive(false)
		st.x.term = sideTerm(err, termServer, termServerTO)
		st.respond(502)
	}
}

// timedOut: response_timeout ran out: 504, or a reset once the response
// has begun.
func (st *h2stream) timedOut() {
	if st.u2.bwait {
		// Its own client's responses held it back (h2_response_hold):
		// no server's doing, not sent again.
		st.x.term = termClientTO
		st.respond(504)
		return
	}
	if !st.respHead {
		if st.retryTimeout() {
			return
		}
		if st.timeoutFailed() {
			st.passive(false)
		}
		st.x.term = termServerTO
		st.respond(504)
		return
	}
	st.x.term = termServerTO
	st.resetStream(h2.Cancel)
}

// stalled: the stream's send window (or the connection's) has not opened
// for write_timeout, the upstream paused all along: a client that reads
// but never opens its windows would otherwise hold the upstream for good.
// The stream is reset, its upstream closed; the client timed out, as one
// that takes nothing of its connection's queue (HAProxy's cD).
func (st *h2stream) stalled() {
	st.x.term = termClientTO
	st.resetStream(h2.Cancel)
}

// upData takes the upstream's bytes: the response head, then its body.
func (st *h2stream) upData(up *engine.Conn, b engine.Buffer) {
	if up != st.up || st.hasP {
		b.Release()
		if up == st.up {
			st.resetStream(h2.InternalError) // (read while paused: cannot happen)
		} else {
			up.SetContext(nil)
			up.Close()
		}
		return
	}
	c := st.c
	c.ls.stats(st.pool, st.srv).bytesIn.addInt(b.Len())
	st.mark = c.p.now()
	off := 0
	for !st.respHead {
		p := b.Bytes()[off:]
		if len(p) == 0 {
			b.Release()
			return
		}
		n, err := feed(&st.uin, p, func(b []byte) (int, error) {
			return st.resp.Parse(b, st.head, h1.Limits{})
		})
		if err == nil && n > 0 && st.resp.Status < 200 {
			if st.interims++; st.resp.Status == 101 || st.interims > maxInterim {
				err = errRefusedResp
			}
		}
		if err != nil {
			b.Release()
			st.passive(false)
			st.x.term = termResponse
			st.respond(502)
			return
		}
		if n == 0 {
			b.Release()
			return
		}
		off += n
		st.uin = emptied(st.uin)
		r := &st.resp
		if r.Status < 200 {
			c.srv.WriteHeaders(st.id, r.Status, st.respFields(), false)
			continue
		}
		if st.rt.pol != nil && st.retryStatus(b.Len()-off) {
			b.Release()
			return
		}
		st.respHead = true
		st.respConn = appendConnOptions(st.respConn[:0], r.Headers)
		st.passiveStatus(r.Status)
		st.ln.countResp(c.ls.id, r.Status, false)
		noBody := r.Framing == h1.NoBody || r.Framing == h1.Length && r.ContentLength == 0
		st.respBody.Reset(r.Framing, r.ContentLength)
		if c.srv.WriteHeaders(st.id, r.Status, st.respFields(), noBody) != nil {
			b.Release()
			st.x.term = termClient
			st.abandon()
			return
		}
		if noBody {
			st.extra = off < b.Len()
			b.Release()
			st.bodyDone = true
			st.respEnded()
			return
		}
	}
	st.pend, st.pbuf, st.poff, st.dataEnd, st.hasP = b, true, off, off, true
	st.pump()
}

var errRefusedResp = &h1.Error{Status: 502, Reason: "interim response refused"}

// pump sends the response body held in pend as DATA, as far as the send
// windows allow: the rest waits for OnWritable, the upstream paused. Its
// framing is checked as it goes (h1.Body.NextSpan), a span of data at a
// time; a chunked body's trailer section is kept for finishResp.
func (st *h2stream) pump() {
	if st.u2.on {
		st.h2Pump()
		return
	}
	c := st.c
	for st.hasP {
		if st.poff == st.dataEnd {
			p := st.pendBytes()[st.poff:]
			if len(p) == 0 || st.bodyDone {
				st.dropHeld()
				break
			}
			s, err := st.respBody.NextSpan(p)
			if err != nil {
				st.x.term = termResponse
				st.resetStream(h2.InternalError)
				return
			}
			st.poff += s.Skip
			st.dataEnd = st.poff + s.Len
			if s.Trailer {
				st.trl = append(st.trl, p[s.Skip:s.Skip+s.Len]...)
				st.poff = st.dataEnd
			}
			if s.Done {
				st.bodyDone = true
				st.extra = st.dataEnd < len(st.pendBytes())
			}
			continue
		}
		// A chunked body's last span is framing: only a Length body's
		// ends in data.
		last := st.bodyDone
		w, err := c.srv.WriteDataTo(st.id, st.pendBytes()[st.poff:st.dataEnd], last, c.writev)
		st.poff += w
		st.respN += int64(w)
		if err != nil {
			st.x.term = termClient
			st.abandon()
			return
		}
		if st.poff < st.dataEnd {
			if w > 0 || !st.paused { // the window's stall runs from here
				st.mark = c.p.now()
				c.armAt(deadline(st.mark, time.Duration(c.p.cfg.Engine.WriteTimeout)))
			}
			st.unring()
			st.pause()
			return
		}
		if last {
			st.dropHeld()
			st.respEnded()
			return
		}
	}
	if st.bodyDone {
		st.finishResp()
		return
	}
	if c.client.QueuedMemory() >= c.p.cfg.Engine.WriteHighWater {
		st.cbp, c.cbp = true, true
		st.pause()
		return
	}
	st.resume()
}

// pendBytes returns the response bytes held: pend's, or their copy (pc).
func (st *h2stream) pendBytes() []byte {
	if st.pbuf {
		return st.pend.Bytes()
	}
	return st.pc
}

// unring copies what is left of pend (from poff) to pc and releases it,
// for a stream whose window closed: pend is a buffer of the loop's
// receive ring, which every connection of the loop shares, and a client
// may keep its windows closed for write_timeout, each of its streams
// holding a buffer (MaxQueuedReadBuffers does not see buffers a handler
// keeps), so that a few such clients took the ring from the loop's
// other connections. The upstream stays paused while the bytes are
// held: pc holds at most one receive buffer's bytes. The open window's
// path sends from pend without a copy.
func (st *h2stream) unring() {
	if !st.pbuf {
		return
	}
	st.pc = append(st.pc[:0], st.pend.Bytes()[st.poff:]...)
	st.dataEnd -= st.poff
	st.poff = 0
	st.pbuf = false
	st.pend.Release()
}

// dropHeld lets go of the response bytes held.
func (st *h2stream) dropHeld() {
	if st.pbuf {
		st.pbuf = false
		st.pend.Release()
	}
	st.hasP = false
	st.pc = st.pc[:0]
}

// pause stops reading the upstream.
func (st *h2stream) pause() {
	if !st.paused && st.up != nil {
		st.paused = true
		st.up.PauseRead()
	}
}

// resume reads the upstream again where nothing holds it.
func (st *h2stream) resume() {
	if st.u2.on {
		st.h2CreditUp()
		return
	}
	if st.paused && !st.hasP && !st.cbp && st.up != nil {
		st.paused = false
		st.mark = st.c.p.now()
		st.c.armAt(deadline(st.mark, time.Duration(st.ln.cfg.ResponseTimeout)))
		st.up.ResumeRead()
	}
}

// finishResp ends a response whose body was all sent: its trailers (a
// chunked body's), else an empty DATA with END_STREAM.
func (st *h2stream) finishResp() {
	if st.endResp(st.trailerFields()) {
		st.respEnded()
	}
}

// endResp ends the response sent to the client: trailers fs, or (none)
// an empty DATA with END_STREAM. A client gone abandons the stream:
// false.
func (st *h2stream) endResp(fs []hpack.Field) bool {
	c := st.c
	var err error
	if len(fs) > 0 {
		err = c.srv.WriteTrailers(st.id, fs)
	} else {
		_, err = c.srv.WriteDataTo(st.id, nil, true, c.writev)
	}
	if err != nil {
		st.x.term = termClient
		st.abandon()
		return false
	}
	return true
}

// respEnded ends a stream whose response was all sent: up goes back to
// the idle pool where both messages ended cleanly; a request still coming
// is stopped (RST_STREAM NO_ERROR, RFC 9113 8.1).
func (st *h2stream) respEnded() {
	c := st.c
	st.end(st.resp.Status, false)
	if up := st.up; up != nil {
		st.up = nil
		c.ls.stats(st.pool, st.srv).active.dec()
		reuse := !st.extra && st.resp.KeepAlive && st.reqDone && st.resp.Framing != h1.UntilClose && !c.ls.draining
		if reuse && c.ls.putIdle(up, st.pool, st.srv, c.p.now()) {
			if st.paused {
				up.ResumeRead()
			}
		} else {
			up.SetContext(nil)
			up.Close()
			st.pool.servers[st.srv].release(c.ls.id)
		}
	}
	if !st.reqEnd {
		c.srv.Reset(st.id, h2.NoError)
	}
	c.release(st)
}

// respFields returns the response head's fields for HEADERS: lower case,
// without the connection-specific ones (Connection and those it names,
// Keep-Alive, Proxy-Connection, TE, Upgrade, Transfer-Encoding), with
// content-length as the body is framed (a HEAD's or 304's as received,
// but once and a single value: see keepCL), response_headers applied (to
// a final response) and via.
func (st *h2stream) respFields() []hpack.Field {
	r := &st.resp
	// keepCL: the length a HEAD's or 304's Content-Length announces is
	// passed on. HTTP/1.1 lets it come as a list of one value repeated
	// or on several lines (RFC 9110 8.6; internal/h1 checked that the
	// values are one number); HTTP/2 has no list form for it, and a
	// strict client (nghttp2, so curl) resets a stream whose
	// content-length is not a number or comes twice as malformed (RFC
	// 9113 8.1.1): it goes once, as its first field's first element.
	keepCL := r.Framing == h1.NoBody && r.Status >= 200 && r.Status != 204
	clSent := false
	size := 64
	for _, h := range r.Headers {
		size += len(h.Name) + len(h.Value)
	}
	hb := st.hb[:0]
	if cap(hb) < size {
		hb = make([]byte, 0, size)
	}
	fs := st.fields[:0]
	rules := noRules // (none on a 1xx)
	if r.Status >= 200 {
		rules = st.ln.respRules(&st.x)
	}
	for _, h := range r.Headers {
		cl := h1.EqualFold(h.Name, hdrCL)
		if r.HopByHop(h.Name) || h1.EqualFold(h.Name, hdrTE) || cl && (!keepCL || clSent) ||
			!rules.keep(h.Name) {
			continue
		}
		v := h.Value
		if cl {
			v, _ = h1.NextElem(v)
			clSent = true
		}
		n0 := len(hb)
		hb = appendLower(hb, h.Name)
		v0 := len(hb)
		hb = append(hb, v...)
		fs = append(fs, hpack.Field{Name: hb[n0:v0], Value: hb[v0:]})
	}
	fs = rules.appendH2(fs)
	if r.Framing == h1.Length && r.Status >= 200 {
		v0 := len(hb)
		hb = strconv.AppendInt(hb, r.ContentLength, 10)
		fs = append(fs, hpack.Field{Name: hdrContentLength, Value: hb[v0:]})
	}
	if r.Status >= 200 {
		v0 := len(hb)
		hb = append(hb, "1.x spindle"...)
		hb[v0+2] = byte('0' + r.Minor)
		fs = append(fs, hpack.Field{Name: hdrVia, Value: hb[v0:]})
	}
	st.hb, st.fields = hb, fs
	return fs
}

// trailerFields returns the chunked response's trailer fields (st.trl,
// which internal/h1 checked), as respFields, but those its
// respTrailerRules drop (the connection-specific ones among them) and
// those the head's Connection names.
func (st *h2stream) trailerFields() []hpack.Field {
	st.hb, st.fields = trailerFields(st.hb, st.fields, st.trl)
	st.fields = keepTrailerFields(st.fields, connDropped[respTrailerRules]{st.ln.respTrailerRules(&st.x), st.respConn})
	return st.fields
}

// trailerFields returns the fields of a chunked body's trailer section t
// (which internal/h1 checked) for HTTP/2, in fs, their bytes in hb: names
// in lower case. The caller leaves out those its trailer rules drop,
// which HTTP/2's connection-specific fields are among (trailerList).
func trailerFields(hb []byte, fs []hpack.Field, t []byte) ([]byte, []hpack.Field) {
	if len(t) == 0 {
		return hb, fs[:0]
	}
	hb = hb[:0]
	if cap(hb) < len(t) {
		hb = make([]byte, 0, len(t))
	}
	fs = fs[:0]
	for len(t) > 0 {
		i := bytes.IndexByte(t, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimRight(t[:i], "\r")
		t = t[i+1:]
		k := bytes.IndexByte(line, ':')
		if k <= 0 {
			continue
		}
		name := line[:k]
		n0 := len(hb)
		hb = appendLower(hb, name)
		v0 := len(hb)
		hb = append(hb, bytes.Trim(line[k+1:], " \t")...)
		fs = append(fs, hpack.Field{Name: hb[n0:v0], Value: hb[v0:]})
	}
	return hb, fs
}

// appendLower appends name in lower case.
func appendLower(o, name []byte) []byte {
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		o = append(o, c)
	}
	return o
}

// drainH2 starts the drain of the loop's HTTP/2 clients (all, or those
// of retired listeners): GOAWAY, and a close once their streams end.
// Loop goroutine.
func (ls *loopState) drainH2(retiredOnly bool) {
	for k := len(ls.h2conns) - 1; k >= 0; k-- {
		if k >= len(ls.h2conns) {
			continue
		}
		if c := ls.h2conns[k]; !retiredOnly || c.retired() {
			c.goAway()
		}
	}
}
