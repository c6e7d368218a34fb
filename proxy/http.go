package proxy

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
)

// The HTTP/1.1 reverse proxy (mode http). A client connection is an
// hsession on the loop that accepted it: it reads one request head,
// routes it, sends a rewritten head and the body to an upstream connection
// (from the loop's idle pool or dialed), reads the response head, sends a
// rewritten head and the body back, and then reads the next request. One
// request is in flight per client: the client is not read while its
// response is outstanding (pipelined requests wait, in the kernel or in
// the one buffer the session holds, copied off the loop's receive ring:
// unring). Body bytes are passed on as received buffers (zero copy) where
// a whole buffer, or a buffer's tail, is body; only a body that ends
// inside a buffer (another message follows) and the heads are copied.

// Phases of an hsession.
const (
	phIdle    uint8 = iota // waiting for a request's first byte (keepalive_timeout)
	phHead                 // a request head partly received (request_timeout)
	phConnect              // head parsed, waiting for an upstream connection
	phWait                 // head sent; the response is outstanding (response_timeout)
	phClosing              // the client is being closed (its queue's progress: response_timeout)
	phQueue                // in the pool's queue for a slot (max_conns; queue_timeout)
)

// lingerTime and lingerBytes bound how long a client closed after a
// response may still send (engine.Conn.CloseLinger) before it is reset.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 256 << 10
)

// maxInterim bounds the 1xx responses a request may get before its final
// one (Go's client takes 5 at most, without counting 100 Continue): a
// server sending more gets the client 502.
const maxInterim = 16

// hsession is one HTTP client connection and its current upstream
// connection. It is the Context of both and lives on the client's loop.
type hsession struct {
	p      *Proxy
	ls     *loopState
	ln     *listener
	client *engine.Conn
	idx    int // in ls.sessions

	up   *engine.Conn // the current request's upstream, nil for none
	pool *pool        // the current request's pool (its route's)
	srv  int          // up's server
	hkey uint64       // the current request's key hash (balance hash)
	// hpeer is the current request's client as key client takes it
	// (forwardedClient, once a request: hashKey), which a reload's
	// rekey hashes and rate_limit's key client spends the budget of.
	hpeer netip.Addr
	dialing
	upOpen bool  // up is connected
	reused bool  // up came from the idle pool
	retry  bool  // the request was retried once on a fresh connection
	upBP   bool  // up's reading paused by the client's queue
	h2     *h1up // requests to h2c pools (h2up_h1.go): made at the first, kept
	sniff  bool  // h2c: the client's first bytes may be the HTTP/2 preface

	phase   uint8
	reading bool // the client's reading is on (PauseRead not in force)
	eof     bool // the client has sent its FIN
	done    bool // the client has closed

	// The current request.
	req       h1.Request
	reqBody   h1.Body
	minor     int    // the client's HTTP/1.minor
	head      bool   // HEAD: the response has no body
	idem      bool   // may be retried: GET, HEAD or OPTIONS without a body
	keep      bool   // the client may send another request after this one
	upgrade   bool   // the request asks for a protocol upgrade the listener allows
	upg       []byte // the upgrades asked for that the listener allows
	reqDone   bool   // the whole request body went to up
	bodyN     int64  // bytes of a chunked request body so far (max_request_body; discardBytes)
	discard   bool   // the body of a request a rate limit refused is read and dropped (discardBody)
	interim   bool   // a 1xx response went to the client
	interims  int    // 1xx responses received for the request
	respHead  bool   // the final response head went to the client
	closeAft  bool   // the client is closed after this response
	resp      h1.Response
	respBody  h1.Body
	respLocal bool // the proxy answered itself
	x         exchange

	// Chunked bodies' trailer sections, held to their ends (trailer.go).
	trl, respTrl heldTrailer // the request's, the response's

	in   []byte // a client head received in parts, until complete
	uin  []byte // an upstream head received in parts, until complete
	out  []byte // the rewritten request head (kept for failover and retry)
	pend engine.Buffer
	poff int  // pend's first byte not yet consumed
	hasP bool // pend holds client bytes not yet consumed

	timer   engine.Timer
	timerFn func()
	armed   bool  // timer pending
	armedAt int64 // p.now() it fires at
	mark    int64 // p.now() the current phase's timeout counts from
	closeQ  int   // phClosing, and phWait with upBP: outstanding when last looked at

	w waiter // its place in the pool's queue for a slot (phQueue)

	rt retryState // the request's retry policy (retry.go)
}

// idleTag is the Context of an idle pooled upstream connection: its
// server's share on its loop, whose idle list holds it. One per loop and
// server (srvLoop.tag), made with the server.
type idleTag struct {
	sl *srvLoop
}

// idleConn is one idle pooled upstream connection and when it was pooled.
type idleConn struct {
	c  *engine.Conn
	at int64
}

// route is a compiled RouteConfig.
type route struct {
	host     []byte     // lower case; nil: any host
	wildcard bool       // host is a suffix (".example.com")
	addr     netip.Addr // host's address, where it is one ("[::1]", "127.0.0.1"; IPv4-mapped unmapped)
	prefix   []byte
	pool     *pool
	reqOps   *headerOps // request_headers
	respOps  *headerOps // response_headers
	rw       *rewrites  // rewrite_prefix, host_rewrite
}

// compileRoutes compiles a listener's routes; pools by name.
func compileRoutes(rcs []RouteConfig, pools map[string]*pool) []route {
	var rs []route
	for _, rc := range rcs {
		r := route{prefix: []byte(rc.PathPrefix), pool: pools[rc.Pool],
			reqOps: compileOps(rc.RequestHeaders), respOps: compileOps(rc.ResponseHeaders), rw: compileRewrites(&rc)}
		if rc.Host != "" {
			h := bytes.ToLower([]byte(rc.Host))
			if bytes.HasPrefix(h, []byte("*.")) {
				h, r.wildcard = h[1:], true
			}
			if a, ok := hostAddr(h); ok && !r.wildcard {
				r.addr = a
			}
			r.host = h
		}
		rs = append(rs, r)
	}
	return rs
}

// match reports whether a request for host (lower or upper case, its port
// removed) and path matches r.
func (r *route) match(host, path []byte) bool {
	if r.addr.IsValid() {
		// (An address however it is written: "[0::1]" is "[::1]",
		// "[::ffff:127.0.0.1]" is "127.0.0.1".)
		if a, ok := hostAddr(host); !ok || a != r.addr {
			return false
		}
	} else if r.host != nil {
		if r.wildcard {
			if len(host) <= len(r.host) || !bytes.EqualFold(host[len(host)-len(r.host):], r.host) {
				return false
			}
		} else if !bytes.EqualFold(host, r.host) {
			return false
		}
	}
	_, ok := hasPathPrefix(path, r.prefix)
	return ok
}

// hasPathPrefix reports whether path begins with prefix, the two compared
// as RFC 3986 6.2.2 has paths compared (pathUnit) and with a run of '/'
// read as one, and how many bytes of path the prefix took (a prefix
// ending in '/' takes the run). A server decodes "/%6Cogin" to "/login",
// and nginx's and Apache's (merge_slashes, MergeSlashes: on by default)
// read "//login" as "/login": a route for "/login" that matched bytes
// alone would be passed by with them, its rate_limit and rules with it,
// to the listener's pool serving /login.
func hasPathPrefix(path, prefix []byte) (int, bool) {
	i := 0
	for j := 0; j < len(prefix); {
		if i >= len(path) {
			return 0, false
		}
		c, enc, n := pathUnit(path, i)
		pc, penc, pn := pathUnit(prefix, j)
		if c != pc || enc != penc {
			return 0, false
		}
		i, j = i+n, j+pn
		if c == '/' && !enc {
			i, j = pastSlashes(path, i), pastSlashes(prefix, j)
		}
	}
	return i, true
}

// pastSlashes returns the index in p of the first byte from i on that is
// not a '/'.
func pastSlashes(p []byte, i int) int {
	for i < len(p) && p[i] == '/' {
		i++
	}
	return i
}

// pathUnit returns the character of path p at i as RFC 3986 6.2.2
// compares paths, and how many bytes of p it took: a percent-encoded
// unreserved character (ALPHA, DIGIT, "-", ".", "_", "~") is that
// character (6.2.2.2), another percent-encoding its octet with enc set,
// whatever the case of its hex digits (6.2.2.1: "%2f" is "%2F", not
// "/"), any other byte itself.
func pathUnit(p []byte, i int) (c byte, enc bool, n int) {
	c, n = pathByte(p, i)
	if n == 1 {
		return c, false, 1
	}
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
		return c, false, n
	}
	return c, true, n
}

// hostAddr returns the address of a host that is an IPv6 address in
// brackets ("[::1]") or an IPv4 one in dotted decimal (RFC 3986's
// IPv4address: four fields, no leading zeros), an IPv4-mapped IPv6
// address as its IPv4 address (RFC 4291 2.5.5.2: "[::ffff:127.0.0.1]"
// names 127.0.0.1). Another spelling of an IPv4 address ("127.1",
// "0x7f.0.0.1", "127.000.000.001") is a name to RFC 3986, and read as
// different addresses by different parsers (inet_aton reads "010" as 8):
// Validate refuses it as a route's host. No allocation.
func hostAddr(host []byte) (netip.Addr, bool) {
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		a, ok := parseIPv6(host[1 : len(host)-1])
		return a.Unmap(), ok
	}
	var ip [4]byte
	if !parseIPv4(host, ip[:]) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(ip), true
}

// routeIndex returns the index of the route for a request (its target
// and Host header), len(l.routes) for none (the listener's pool).
func (l *listener) routeIndex(target, hostHdr []byte) int {
	if len(l.routes) == 0 {
		return 0
	}
	host, path := splitTarget(target)
	if len(path) > 0 && path[0] == '*' {
		path = []byte("/") // OPTIONS *: matches the routes of every path
	}
	host = routeHost(host, hostHdr)
	for i := range l.routes {
		if l.routes[i].match(host, path) {
			return i
		}
	}
	return len(l.routes)
}

// routeHost returns the host a request routes by (and balance hash's
// key header:Host hashes, lower-cased): its absolute-form target's
// authority, else hostHdr (Host, an HTTP/2 request's :authority), with
// its port and a trailing dot (a fully qualified name: the same host)
// removed; in the case it was sent in (routes compare it without).
func routeHost(authority, hostHdr []byte) []byte {
	host := authority
	if host == nil {
		host = hostHdr
	}
	host = stripPort(host)
	if len(host) > 1 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	return host
}

// splitTarget returns an absolute-form target's authority (nil for
// another form) and path, and another form's target as its path.
func splitTarget(target []byte) (authority, path []byte) {
	authority, path = h1.SplitTarget(target)
	if authority != nil && (len(path) == 0 || path[0] == '?') {
		// An empty path is "/" (RFC 9112 3.2.1); its query is dropped.
		return authority, []byte("/")
	}
	return authority, path
}

// stripPort returns host without a ":port" (an IPv6 literal keeps its
// brackets).
func stripPort(host []byte) []byte {
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && bytes.IndexByte(host[i:], ']') < 0 {
		return host[:i]
	}
	return host
}

// startHTTP starts an HTTP session for an accepted client. Loop
// goroutine.
func (p *Proxy) startHTTP(c *engine.Conn, ls *loopState, l *listener) {
	s := &hsession{p: p, ls: ls, ln: l, client: c, reading: true, phase: phIdle, sniff: l.sniffsH2(c)}
	s.timerFn = s.onTimer
	s.w.of = s
	c.SetContext(s)
	s.idx = len(ls.sessions)
	ls.sessions = append(ls.sessions, s)
	// A new connection's first request head must arrive within
	// request_timeout, counted from the accept.
	s.setPhase(phHead)
}

// setPhase enters ph and starts its timeout from now, re-arming the timer
// only when the new deadline comes before the armed one.
func (s *hsession) setPhase(ph uint8) {
	s.phase = ph
	d := s.timeout()
	if d == 0 {
		return
	}
	s.mark = s.p.now()
	if dl := deadline(s.mark, d); !s.armed || dl < s.armedAt {
		s.arm(dl)
	}
}

// timeout is the current phase's timeout, 0 for none.
func (s *hsession) timeout() time.Duration {
	switch s.phase {
	case phIdle:
		if s.discard {
			return time.Duration(s.ln.cfg.RequestTimeout) // (a refused request's body: rateLimited)
		}
		return time.Duration(s.ln.cfg.KeepaliveTimeout)
	case phHead:
		return time.Duration(s.ln.cfg.RequestTimeout)
	case phWait:
		return s.waitTimeout() // (per_try_timeout: retry.go)
	case phClosing:
		return time.Duration(s.ln.cfg.ResponseTimeout)
	case phQueue:
		return time.Duration(s.pool.queueCfg().QueueTimeout)
	}
	return 0
}

func (s *hsession) arm(at int64) {
	s.timer.Stop()
	s.armed, s.armedAt = true, at
	s.timer = s.client.Loop().AfterFunc(time.Duration(at-s.p.now()), s.timerFn)
}

// onTimer acts on the current phase's timeout, or re-arms the timer for
// the rest of it: phases move on without touching the timer unless their
// deadline comes earlier. Loop goroutine.
func (s *hsession) onTimer() {
	s.armed = false
	if s.done {
		return
	}
	d := s.timeout()
	if d == 0 {
		return
	}
	now := s.p.now()
	dl := deadline(s.mark, d)
	if s.phase == phWait && s.h2 != nil && s.h2.on {
		dl = s.h2.waitDeadline()
	}
	if now < dl {
		s.arm(dl)
		return
	}
	switch s.phase {
	case phIdle:
		if s.discard {
			s.ln.stats[s.ls.id].discardClosed.inc()
		} else {
			s.ln.stats[s.ls.id].idleClosed.inc()
		}
		s.closeIdle()
	case phHead:
		s.head = false // (no request: not the last one's method)
		s.respond(408)
	case phWait:
		if s.respHead {
			if s.upBP && s.clientMoved(s.outstanding(), now, d) {
				return
			}
			s.x.term = termServerTO
			s.closeUp(true)
			s.client.Reset()
			return
		}
		if s.retryTimeout() {
			return
		}
		if s.timeoutFailed() {
			s.passive(false)
		}
		s.closeUp(true)
		s.respond(504)
	case phQueue:
		s.w.leave(s.pool, &s.x.queued, true)
		s.x.term = termQueue
		s.respond(503)
	case phClosing:
		// The client took nothing of its queue for the timeout: drop it.
		if q := s.outstanding(); q > 0 && !s.clientMoved(q, now, d) {
			s.client.Reset()
		}
	}
}

// clientMoved reports whether the client took some of what was written
// to it, q being outstanding now, since closeQ was taken (nothing was
// added meanwhile: the session is closing, or the server's reading is
// paused by the client's queue), and then counts the timeout d again from
// now. Loop goroutine.
func (s *hsession) clientMoved(q int, now int64, d time.Duration) bool {
	if q == s.closeQ {
		return false
	}
	s.closeQ, s.mark = q, now
	s.arm(deadline(now, d))
	return true
}

// closing enters phClosing before the client is closed: a Close or
// CloseLinger sends the queue first, and waits for good for a client that
// reads nothing of it, so a queue that does not move for response_timeout
// is dropped with a reset. Loop goroutine.
func (s *hsession) closing() {
	s.closeQ = s.outstanding()
	s.setPhase(phClosing)
}

// outstanding is what the client has yet to receive of what was written
// to it: the write queue and the socket's unacknowledged bytes (a client
// reading slowly drains the socket's buffer, megabytes, long before the
// queue moves again). Loop goroutine.
func (s *hsession) outstanding() int {
	return s.client.Buffered() + s.client.Unacked()
}

// clientData takes bytes from the client. Loop goroutine.
func (s *hsession) clientData(b engine.Buffer) {
	if s.phase == phWait && !s.reqDone && s.h2 != nil && s.h2.on {
		s.h2.bodyRead()
	}
	switch {
	case s.sniff && s.sniffH2(b):
	case s.phase == phIdle || s.phase == phHead:
		s.feedHead(b, 0)
	case s.phase == phWait && !s.reqDone && s.upOpen && !s.hasP:
		s.forwardBody(b, 0)
	case !s.hasP:
		// While the request waits (waiting: a body's start, or the
		// next request), else not expected: syncRead pauses the client
		// in every other phase (and the engine holds what arrives after
		// PauseRead). Kept for the request or the next all the same.
		s.pend, s.poff, s.hasP = b, 0, true
		s.unring()
	default:
		b.Release()
		s.respond(400) // as above, with nowhere to keep it
	}
	s.syncRead()
}

// feedHead parses a request head from b[off:], copying only while the head
// is incomplete. Loop goroutine.
func (s *hsession) feedHead(b engine.Buffer, off int) {
	for {
		p := b.Bytes()[off:]
		if len(p) == 0 {
			b.Release()
			return
		}
		if s.discard {
			n, ok := s.discardBody(p)
			if !ok {
				b.Release()
				return
			}
			off += n
			continue
		}
		n, err := feed(&s.in, p, func(b []byte) (int, error) {
			if headParsed != nil {
				headParsed(false)
			}
			return s.req.Parse(b, h1.Limits{})
		})
		if err != nil {
			b.Release()
			s.in = emptied(s.in)
			s.head = false // (a head refused unparsed: not the last request's method)
			s.ln.stats[s.ls.id].requests.inc()
			var he *h1.Error
			if errors.As(err, &he) {
				s.respond(he.Status)
			} else {
				s.respond(400)
			}
			return
		}
		if n == 0 {
			b.Release()
			if s.phase == phIdle {
				s.setPhase(phHead)
			}
			return
		}
		s.gotHead()
		s.in = emptied(s.in)
		switch s.phase {
		case phClosing:
			b.Release()
			return
		case phIdle:
			// Answered at once, the connection kept (a rate limit's
			// 429): the next request, if it came in b.
			off += n
			continue
		}
		if off+n < b.Len() {
			s.pend, s.poff, s.hasP = b, off+n, true
		} else {
			// Nothing followed the head: the client is read while the
			// request waits (syncRead), so that its FIN is seen.
			b.Release()
		}
		s.acquire()
		if s.reqDone {
			s.unring() // (a request without a body: what followed its head waits for its response)
		}
		return
	}
}

// feed parses a head from p with parse, p being the next bytes received
// after those in *acc (a head that came in parts): it parses p in place
// where *acc is empty, and copies p to *acc only while the head is
// incomplete. A head in parts is parsed again only where the new bytes
// may end it (headMayEnd): a head that trickles in is not parsed from its
// start on every read (CPU quadratic in its size). It returns the head's end in p (0: incomplete) or parse's
// error; *acc is the caller's to empty once the head is used.
func feed(acc *[]byte, p []byte, parse func([]byte) (int, error)) (int, error) {
	if len(*acc) == 0 {
		n, err := parse(p)
		if err == nil && n == 0 {
			*acc = append(*acc, p...)
		}
		return n, err
	}
	prev := len(*acc)
	*acc = append(*acc, p...)
	if !headMayEnd(*acc, prev) {
		return 0, nil
	}
	n, err := parse(*acc)
	if n > 0 {
		n -= prev
	}
	return n, err
}

// headMayEnd reports whether the bytes of b from from on, received after
// an incomplete head's b[:from], may complete it or make it an error that
// parsing would not have found before: a line's end followed by an empty
// line ("\n\r\n", and "\n\n", a bare LF's, which internal/h1 refuses) in
// the new bytes or across their start, or b past internal/h1's longest
// head (431, or 414 for a long target). Other errors (a bare LF, a bad
// field) wait for one of these; request_timeout bounds the wait.
func headMayEnd(b []byte, from int) bool {
	t := b[max(from-2, 0):]
	return len(b) > h1.DefaultMaxHead || bytes.Contains(t, []byte("\n\r\n")) || bytes.Contains(t, []byte("\n\n"))
}

// headParsed, when set (by tests, before a proxy starts), is called at
// each parse of a request head (resp false) or a response head.
var headParsed func(resp bool)

// keptHeadBuf is the capacity up to which a session keeps its buffer for
// heads that arrive in parts; a larger one (a head of up to 16 KiB) is let
// go once used, so that an idle client does not hold it.
const keptHeadBuf = 4 << 10

// emptied returns b emptied, or nil where it has grown past keptHeadBuf.
func emptied(b []byte) []byte { return trimmed(b, keptHeadBuf) }

// trimmed returns s emptied for its next use, or nil where its capacity
// passes limit elements, so that what is kept for the next request or
// stream is bounded whatever the last one needed. Elements other than
// bytes (fields: slices of other buffers) are zeroed up to the capacity
// kept, so that they keep none of those buffers alive.
func trimmed[T any](s []T, limit int) []T {
	if cap(s) > limit {
		return nil
	}
	if _, isBytes := any((*T)(nil)).(*byte); !isBytes {
		clear(s[:cap(s)])
	}
	return s[:0]
}

// gotHead takes a parsed request: it checks it, routes it and writes the
// rewritten head into s.out (the route's rewrites and the
// request_headers rules applied, and headers_with_underscores:
// rejectsUnderscores, dropUnderscored). Loop goroutine.
func (s *hsession) gotHead() {
	r := &s.req
	s.refreshListener() // a reload's listener settings, from this request on
	s.ln.stats[s.ls.id].requests.inc()
	s.begin(r)
	s.head = string(r.Method) == "HEAD" // (before the refusals: theirs have no content either)
	if string(r.Method) == "CONNECT" {
		s.respond(501)
		return
	}
	if dotSegments(r.Target) || rejectsUnderscores(s.ln, r.Headers, h1Name) {
		s.respond(400)
		return
	}
	if m := s.ln.cfg.MaxRequestBody; m > 0 && r.Framing == h1.Length && r.ContentLength > m {
		s.respond(413)
		return
	}
	s.minor = r.Minor
	s.idem = r.Framing == h1.NoBody && (s.head || string(r.Method) == "GET" || string(r.Method) == "OPTIONS")
	s.keep = r.KeepAlive
	s.upg = s.ln.allowedUpgrades(s.upg[:0], r.Upgrade)
	s.upgrade = len(s.upg) > 0
	s.reqDone = r.Framing == h1.NoBody || r.Framing == h1.Length && r.ContentLength == 0 // (an empty body: whole with its head)
	s.reqBody.Reset(r.Framing, r.ContentLength)
	s.trl.reset(r.Headers)
	s.bodyN = 0
	s.w.began = false // (a new request: its own wait, if any)
	s.interim, s.respHead, s.closeAft, s.respLocal, s.retry, s.interims = false, false, false, false, false, 0
	s.pool = s.route(r.Target, r.Host)
	s.hashKey(r)
	s.rt.startH1(s.ln.retryFor(s.x.route-1), r)
	if s.h2 != nil {
		s.h2.on = false
	}
	if s.pool.h2 && s.upgrade {
		s.respond(501) // (no Upgrade over HTTP/2: see doc.go; before the rate limit, which it spends nothing of)
		return
	}
	if s.rateLimited() {
		return
	}
	if s.pool.h2 {
		s.h2Head()
		s.phase = phConnect
		return
	}

	rules, rw := s.ln.reqRules(s.x.route - 1)
	o := append(s.out[:0], r.Method...)
	o = append(o, ' ')
	o = rw.appendTarget(o, r.Target, string(r.Method) == "OPTIONS")
	o = append(o, " HTTP/1."...)
	o = append(o, byte('0'+r.Minor), '\r', '\n')
	if rw.host != nil {
		o = h1.AppendHeader(o, hdrHost, rw.host)
	}
	client := s.client.RemoteAddr().Addr().Unmap()
	trusted := s.ln.trusts(client)
	xff, xfp, xfh := false, false, false
	h2cUpgrade := h1.ListHas(s.upg, "h2c")
	for _, h := range r.Headers {
		switch {
		case r.HopByHop(h.Name), framingField(h.Name),
			bytes.EqualFold(h.Name, hdrH2Settings) && !h2cUpgrade,
			rw.host != nil && bytes.EqualFold(h.Name, hdrHost), !rules.keep(h.Name), s.ln.dropUnderscored(s.ls.id, h.Name):
			// (HTTP2-Settings only goes with an h2c upgrade.)
			// (The framing is written once below, whatever equivalent
			// spelling the client used: repeated or listed lengths, empty
			// Transfer-Encoding fields or elements, which the server might
			// read otherwise.)
		case bytes.EqualFold(h.Name, hdrXFF):
			xff = true
		case !trusted && forwardingField(h.Name):
			// (An untrusted client's X-Forwarded-Proto, X-Forwarded-Host,
			// X-Real-IP and Forwarded are dropped: see trusted_proxies.)
		case bytes.EqualFold(h.Name, hdrXFP):
			xfp = true
			o = h1.AppendHeader(o, h.Name, h.Value)
		case bytes.EqualFold(h.Name, hdrXFH):
			xfh = true
			o = h1.AppendHeader(o, h.Name, h.Value)
		default:
			o = h1.AppendHeader(o, h.Name, h.Value)
		}
	}
	o = rules.appendH1(o)
	switch r.Framing {
	case h1.Length:
		o = appendLength(o, r.ContentLength)
	case h1.Chunked:
		o = append(o, "Transfer-Encoding: chunked\r\n"...) // (internal/h1: the only coding)
	}
	// X-Forwarded-For: a trusted client's values received, in order, and
	// the client.
	o = append(o, "X-Forwarded-For: "...)
	if xff && trusted {
		for _, h := range r.Headers {
			if bytes.EqualFold(h.Name, hdrXFF) && len(h.Value) > 0 {
				o = append(o, h.Value...)
				o = append(o, ", "...)
			}
		}
	}
	o = client.AppendTo(o)
	o = append(o, "\r\n"...)
	if !xfp {
		o = h1.AppendHeader(o, hdrXFP, s.ln.scheme)
	}
	if host := requestHost(r); !xfh && len(host) > 0 {
		o = h1.AppendHeader(o, hdrXFH, host)
	}
	o = append(o, "Via: 1."...)
	o = append(o, byte('0'+r.Minor))
	o = append(o, " spindle\r\n"...)
	switch {
	case s.upgrade:
		o = append(o, "Connection: upgrade\r\nUpgrade: "...)
		o = append(o, s.upg...)
		o = append(o, "\r\n"...)
	case r.Minor == 0:
		o = append(o, "Connection: keep-alive\r\n"...)
	}
	s.out = append(o, "\r\n"...)
	s.phase = phConnect
}

// trusts reports whether trusted_proxies lists a client address (not
// IPv4-mapped: the caller unmaps it).
func (l *listener) trusts(a netip.Addr) bool {
	a = a.WithZone("")
	for _, p := range l.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardingField reports the fields a client tells its forwarding
// proxies' view with (any case): X-Forwarded-For, X-Forwarded-Proto,
// X-Forwarded-Host, X-Real-IP, Forwarded, Front-End-Https, and the rest
// of the X-Forwarded-* family (forwardingPrefix). Only a trusted client's
// pass.
func forwardingField(name []byte) bool {
	if len(name) >= len(forwardingPrefix) && bytes.EqualFold(name[:len(forwardingPrefix)], forwardingPrefix) {
		return true
	}
	for _, f := range forwardingFields {
		if bytes.EqualFold(name, f) {
			return true
		}
	}
	return false
}

// requestHost returns a request's host: its Host field, else (HTTP/1.0
// without one) an absolute target's authority; empty for none.
func requestHost(r *h1.Request) []byte {
	if len(r.Host) > 0 {
		return r.Host
	}
	a, _ := splitTarget(r.Target)
	return a
}

// allowedUpgrades appends to dst the elements of an Upgrade field's value
// v whose protocol (without its version) the listener's upgrades allow,
// comma-separated.
func (l *listener) allowedUpgrades(dst, v []byte) []byte {
	for len(v) > 0 {
		var e []byte
		if e, v = h1.NextElem(v); len(e) == 0 || !l.upgradeAllowed(e) {
			continue
		}
		if len(dst) > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, e...)
	}
	return dst
}

// upgradeAllowed reports whether the listener's upgrades allow the
// protocol of an Upgrade element ("websocket", "h2c", "TLS/1.2").
func (l *listener) upgradeAllowed(e []byte) bool {
	if i := bytes.IndexByte(e, '/'); i >= 0 {
		e = e[:i]
	}
	for _, u := range l.cfg.Upgrades {
		if bytes.EqualFold(e, []byte(u)) {
			return true
		}
	}
	return false
}

var (
	hdrH2Settings = []byte("HTTP2-Settings")
	hdrXFF        = []byte("X-Forwarded-For")
	hdrXFP        = []byte("X-Forwarded-Proto")
	hdrXFH        = []byte("X-Forwarded-Host")
	hdrCL         = []byte("Content-Length")
	hdrTE         = []byte("Transfer-Encoding")

	// forwardingFields are what forwardingField reports, but the
	// X-Forwarded-* family.
	forwardingFields = [][]byte{hdrXFF, hdrXFP, hdrXFH, []byte("X-Real-IP"), []byte("Forwarded"), []byte("Front-End-Https")}
	// forwardingPrefix begins the names of the X-Forwarded-* family:
	// beside the three the proxy writes, the fields servers take a
	// client's scheme, host, port, path prefix or certificate from
	// (X-Forwarded-Ssl, -Port, -Prefix and -Proto for Spring's
	// ForwardedHeaderFilter, -Ssl and -Scheme for Rack, -Server and
	// -Protocol for Ktor, -Client-Cert for Envoy's servers), which a
	// client at the edge may forge as well as X-Forwarded-Proto.
	forwardingPrefix = []byte("X-Forwarded-")
)

// framingField reports Content-Length and Transfer-Encoding (any case):
// the proxy writes a message's framing itself, one field, from what
// internal/h1 made of the received ones.
func framingField(name []byte) bool {
	return bytes.EqualFold(name, hdrCL) || bytes.EqualFold(name, hdrTE)
}

// appendLength appends a Content-Length field.
func appendLength(o []byte, n int64) []byte {
	o = append(o, "Content-Length: "...)
	o = strconv.AppendInt(o, n, 10)
	return append(o, "\r\n"...)
}

// appendCodings appends one Transfer-Encoding field with the non-empty
// codings of the fields hs has, in order.
func appendCodings(o []byte, hs []h1.Header) []byte {
	o = append(o, "Transfer-Encoding: "...)
	first := true
	for _, h := range hs {
		if !bytes.EqualFold(h.Name, hdrTE) {
			continue
		}
		for v := h.Value; len(v) > 0; {
			var e []byte
			if e, v = h1.NextElem(v); len(e) == 0 {
				continue
			}
			if !first {
				o = append(o, ", "...)
			}
			o, first = append(o, e...), false
		}
	}
	return append(o, "\r\n"...)
}

// acquire gets the request an upstream connection: an idle pooled one of
// the first server up, else a dial, failing over as the L4 proxy does.
// Loop goroutine.
func (s *hsession) acquire() {
	if s.h2 != nil && s.h2.on {
		s.h2.h2Pick()
		return
	}
	if s.w.front {
		s.restart(pickServer(s.ls, s.pool, s.hkey)) // (its turn in the queue came)
	} else {
		s.dialing = dialing{start: pickServer(s.ls, s.pool, s.hkey)}
	}
	if c, i := s.ls.takeIdleFor(s.pool, s.start, s.w.front); c != nil {
		s.reuse(c, i)
		return
	}
	s.connect()
}

// reuse sends the request on c, an idle connection to server i taken
// from the loop's pool. Loop goroutine.
func (s *hsession) reuse(c *engine.Conn, i int) {
	s.up, s.srv, s.upOpen, s.reused = c, i, true, true
	c.SetContext(s)
	st := s.ls.stats(s.pool, i)
	st.active.inc()
	st.reusedReqs.inc()
	s.sendHead()
}

// takeIdleFor pops an idle connection for a request: to the first server
// up of pl from start on (takeFirstIdle), or for a waiter whose turn in the queue came (woken), to any
// server up: a connection pooled while this loop had waiters is theirs
// (putIdle). Loop goroutine.
func (ls *loopState) takeIdleFor(pl *pool, start int, woken bool) (*engine.Conn, int) {
	if !woken {
		return ls.takeFirstIdle(pl, dialing{start: start})
	}
	for d := (dialing{start: start}); ; {
		i, ok := d.step(pl)
		if !ok {
			break
		}
		if pl.servers[i].up() {
			if c := ls.takeIdle(pl, i); c != nil {
				return c, i
			}
		}
	}
	return nil, 0
}

// takeFirstIdle pops an idle connection to the first server up of pl
// along d's walk (a copy) that d has not failed at (only that one: the
// pool does not move load), and returns it and its server; nil for none,
// or where that server's slots go to the pool's waiters first
// (server.queued: the request goes behind them). A first try walks from
// its start with nothing failed; a retry walks its request's dialing.
// Loop goroutine.
func (ls *loopState) takeFirstIdle(pl *pool, d dialing) (*engine.Conn, int) {
	var tot poolLoads
	for {
		i, ok := d.step(pl)
		if !ok {
			break
		}
		if !pl.servers[i].up() || pl.overloaded(i, &tot) || failedTo(d.failed, i) {
			continue
		}
		if pl.servers[i].queued() {
			return nil, 0
		}
		return ls.takeIdle(pl, i), i
	}
	return nil, 0
}

// connect dials the next server of the pool that is up; with none left it
// answers 502 (servers failed) or 503 (none up). A dial the stopping loop
// refuses ends the exchange (KD). Loop goroutine.
func (s *hsession) connect() {
	up, i, status := s.dialNext(s.ls, s.ln, s.pool, s.client, &s.x)
	switch status {
	case statusQueued:
		s.queue()
		return
	case statusStopping:
		// The engine's stop (the drain ran out) refused the dial, and
		// cuts the client next: the exchange ends here (KD), neither
		// answered nor counted, as where the stop cut the connection it
		// had (upFailed).
		s.kill()
		return
	}
	if up == nil {
		s.respond(status)
		return
	}
	s.up, s.srv, s.upOpen, s.reused = up, i, false, false
	up.SetContext(s)
	s.unring() // (until it connects: connect_timeout)
}

// queue puts the request in its pool's queue for a slot, every server up
// being at its max_conns (phQueue: queue_timeout, then 503), or answers
// 503 where the queue is full. The client is read meanwhile (waiting), so
// that one that closes is seen. Loop goroutine.
func (s *hsession) queue() {
	if !s.ls.wait(s.pool, &s.w, s.failed, &s.x.term) {
		s.respond(503)
		return
	}
	// queue_timeout counts from its first wait: one whose turn came and
	// whose connect failed waits again with the rest of it.
	s.phase, s.mark = phQueue, s.w.since
	s.unring()
	if dl := deadline(s.mark, s.timeout()); !s.armed || dl < s.armedAt {
		s.arm(dl)
	}
}

// woken: the queue's turn came (a slot may be free): the request looks
// for a connection again, an idle one first. Loop goroutine.
func (s *hsession) woken() {
	s.repool()
	s.x.queued = s.w.waited(s.p.now())
	s.phase = phConnect
	s.acquire()
	s.syncRead()
}

// dialNext's statuses that are not answers.
const (
	// statusQueued: the walk found every server up at its max_conns,
	// and the request waits in the pool's queue.
	statusQueued = -1
	// statusStopping: the loop is stopping and refused the dial
	// (engine.ErrClosed, as dialing.next): no server failed or was
	// down, and the stop cuts the client next, so the exchange ends
	// there (KD).
	statusStopping = -2
)

// dialNext dials the next server of pl that is up for exchange x of a
// client of l: it returns the connection (its Context not yet set) and
// its server, or nil and the status to answer with, counted: 502 where
// every server failed to connect, 503 where none was up; statusQueued
// where servers were at their max_conns, statusStopping (nothing
// counted) where the loop is stopping. Loop goroutine.
func (d *dialing) dialNext(ls *loopState, l *listener, pl *pool, client *engine.Conn, x *exchange) (*engine.Conn, int, int) {
	up, i, err := d.next(ls, pl, client, time.Duration(l.cfg.ConnectTimeout), "")
	switch {
	case err != nil:
		return nil, 0, statusStopping
	case up != nil:
		return up, i, 0
	case d.full:
		return nil, 0, statusQueued
	}
	return nil, 0, d.exhausted(ls, l, x)
}

// upOpened sends the request once a dialed upstream has connected. Loop
// goroutine.
func (s *hsession) upOpened(c *engine.Conn) {
	if c != s.up || s.done {
		c.Close()
		return
	}
	s.upOpen = true
	st := s.ls.stats(s.pool, s.srv)
	st.connects.inc()
	st.newReqs.inc()
	s.pool.servers[s.srv].connected(s.pool)
	s.sendHead()
	s.syncRead()
}

// unring takes what pend holds off the loop's receive ring
// (engine.Buffer.Unring: a copy) for a request that waits (in its
// pool's queue, for its connection or stream, for a window), and for
// the requests a client pipelined behind one that went whole, which wait
// for its response (nextHead): the ring is shared by every connection
// of the loop, and without it each such request kept the buffer its
// head and body came in, so that clients queued behind a slow server,
// or pipelining to one, took every buffer from the loop's other
// connections (TestHTTPQueuedRingHold, TestHTTPPipelinedRingHold). The
// client is not read while pend is held: one buffer's worth a request.
// A pend a body kept for a retry shares stays (retry.go bounds those).
// The request that goes on at once sends from the buffer without a
// copy. Loop goroutine.
func (s *hsession) unring() {
	if !s.hasP {
		return
	}
	for _, h := range s.rt.held {
		if h.shared {
			return
		}
	}
	s.pend = s.pend.Unring()
}

// sendHead sends the rewritten head and what the client has sent of the
// body. Loop goroutine.
func (s *hsession) sendHead() {
	s.sent()
	st := s.ls.stats(s.pool, s.srv)
	st.requests.inc()
	st.bytesOut.addInt(len(s.out))
	if _, err := s.up.Write(s.out); err != nil {
		if s.reused {
			// Closing already (its OnClose is on the way): nothing of the
			// request left, so any request may go on a new connection.
			s.closeUp(false)
			s.redial()
			return
		}
		s.writeFailed(err)
		return
	}
	if s.rt.heldN > 0 {
		if err := s.resendHeld(); err != nil {
			s.writeFailed(err)
			return
		}
	}
	s.setPhase(phWait)
	if !s.reqDone && s.hasP {
		s.hasP = false
		s.forwardBody(s.pend, s.poff)
	}
}

// forwardBody sends the request body's bytes in b[off:] to up: a buffer's
// whole tail without a copy, a body that ends inside the buffer by a copy
// (the rest, the next request, stays in pend), a chunked body's trailer
// section held to its end and sent filtered (sendTrailer). Loop
// goroutine.
func (s *hsession) forwardBody(b engine.Buffer, off int) {
	if s.h2 != nil && s.h2.on {
		s.h2.forward(b, off)
		return
	}
	p := b.Bytes()[off:]
	n, held, done, err := s.trl.next(&s.reqBody, p)
	if err != nil {
		b.Release()
		s.abortBody(400)
		return
	}
	if m := s.ln.cfg.MaxRequestBody; m > 0 && s.req.Framing == h1.Chunked {
		// (A length over the bound was refused with the head.)
		if s.bodyN += int64(n); s.bodyN > m {
			b.Release()
			s.abortBody(413)
			return
		}
	}
	s.ls.stats(s.pool, s.srv).bytesOut.addInt(n)
	s.mark = s.p.now() // a body on its way: response_timeout counts from here
	switch {
	case held >= 0:
		// (A trailer section goes rewritten: a request with one is not
		// retried once it went, retry.go.)
		s.retryDecided()
		err = sendTrailer(&s.trl, s.up, p[:held], done, trailerRules{s.ln, s.ls.id, s.x.route - 1})
		if n == len(p) {
			b.Release()
		} else {
			s.pend, s.poff, s.hasP = b, off+n, true
		}
	case s.rt.hold:
		// Kept for a retry (retry.go): sent by a copy.
		_, err = s.up.Write(p[:n])
		if n < len(p) {
			s.pend, s.poff, s.hasP = b, off+n, true
		}
		s.keepBody(b, off, n, n < len(p))
	case n == len(p):
		err = s.up.WriteBufferFrom(b, off)
	default:
		_, err = s.up.Write(p[:n])
		s.pend, s.poff, s.hasP = b, off+n, true
	}
	if done {
		s.reqDone = true
		s.unring() // (what followed the body waits for the response)
	}
	if err != nil {
		s.writeFailed(err)
	}
}

// abortBody ends an exchange whose request body cannot go on (malformed,
// or over max_request_body): the upstream is reset, and the client gets
// status, or a reset where the response has begun. Loop goroutine.
func (s *hsession) abortBody(status int) {
	s.closeUp(true)
	if s.respHead {
		s.x.term = termRequest
		s.client.Reset()
		return
	}
	s.respond(status)
}

// upData takes bytes from the upstream: the response head, then its body.
// Loop goroutine.
func (s *hsession) upData(c *engine.Conn, b engine.Buffer) {
	if c != s.up {
		b.Release()
		c.Close()
		return
	}
	s.ls.stats(s.pool, s.srv).bytesIn.addInt(b.Len())
	s.mark = s.p.now() // response_timeout counts between reads
	off := 0
	for !s.respHead {
		p := b.Bytes()[off:]
		if len(p) == 0 {
			b.Release()
			return
		}
		n, err := feed(&s.uin, p, func(b []byte) (int, error) {
			if headParsed != nil {
				headParsed(true)
			}
			return s.resp.Parse(b, s.head, h1.Limits{})
		})
		if err != nil {
			b.Release()
			s.uin = emptied(s.uin)
			s.passive(false)
			s.closeUp(true)
			s.x.term = termResponse
			s.respond(502)
			return
		}
		if n == 0 {
			b.Release()
			return
		}
		off += n
		s.uin = emptied(s.uin)
		if s.rt.pol != nil && s.retryStatus(b, off) {
			b.Release()
			return
		}
		if s.refused() {
			b.Release()
			if s.resp.Status < 200 {
				// A 101 unasked or to a protocol not offered, or 1xx
				// past maxInterim: the server's, whatever the request. A
				// chunked response to HTTP/1.0 is not counted, nor does
				// it clear the count: the client chose the version.
				s.passive(false)
			}
			s.closeUp(true)
			s.x.term = termResponse
			s.respond(502)
			return
		}
		if s.respondHead() {
			// 101: the connections are a tunnel from now on.
			s.tunnel(b, off)
			return
		}
		if s.phase == phClosing || s.done {
			b.Release()
			return
		}
		if s.respHead && s.resp.Framing == h1.NoBody {
			extra := off < b.Len()
			b.Release()
			s.respDone(!extra)
			return
		}
	}
	s.forwardResp(b, off)
}

// refused reports a response head that is not passed on (the client
// gets 502): a 101 nobody asked for (the server speaks another protocol
// on the connection now); a 1xx past maxInterim (a server that would hold
// the exchange, and fill the client's queue, for good); a chunked
// response to an HTTP/1.0 request (sent as HTTP/1.0: RFC 9112 6.1 forbids
// it, and the client would read the chunks' framing as the body). Loop
// goroutine.
func (s *hsession) refused() bool {
	r := &s.resp
	switch {
	case r.Status == 101 && s.upgrade:
		// Only to a protocol allowed (and asked for: the server's
		// business).
		return !s.ln.upgradeAllowed(bytes.Trim(r.Upgrade, " \t")) || bytes.IndexByte(r.Upgrade, ',') >= 0
	case r.Status < 200:
		s.interims++
		return r.Status == 101 || s.interims > maxInterim
	case r.Status >= 200:
		return s.minor == 0 && r.Framing == h1.Chunked
	}
	return false
}

// respondHead writes the response head just parsed to the client; it
// reports whether it was a 101 that starts a tunnel. Loop goroutine.
func (s *hsession) respondHead() bool {
	r := &s.resp
	if r.Status < 200 {
		if r.Status == 101 && s.upgrade {
			s.respHead = true
			s.respBody.Reset(h1.NoBody, 0) // (the log's resp_bytes: none, not the last response's)
			s.passive(true)
			s.countResp(101, false)
			s.writeRespHead(true)
			return true
		}
		if s.minor == 0 {
			return false // not for HTTP/1.0: dropped
		}
		s.interim = true
		s.writeRespHead(false)
		return false
	}
	s.respHead = true
	s.passiveStatus(r.Status)
	s.countResp(r.Status, false)
	s.closeAft = !s.keep || !s.reqDone || r.Framing == h1.UntilClose || s.eof || s.ls.draining || s.retired()
	s.writeRespHead(false)
	s.respBody.Reset(r.Framing, r.ContentLength)
	s.respTrl.reset(r.Headers)
	return false
}

// writeRespHead writes the rewritten response head (or a 1xx) to the
// client, response_headers applied to a final one and to the 101 of an
// upgrade (upgrade), the last HTTP response of the connection: no final
// response follows to carry the rules' fields. Loop goroutine.
func (s *hsession) writeRespHead(upgrade bool) {
	r := &s.resp
	o := h1.AppendStatusLine(s.ls.scratch[:0], 1, r.Status, r.Reason)
	// The framing fields go as the client is to read the body: one
	// Content-Length or Transfer-Encoding, never both (RFC 9112 6.3), none
	// on a 1xx or 204 (RFC 9110 8.6, 9112 6.1); a 304's or a HEAD
	// response's pass (they describe a body not sent), but
	// Transfer-Encoding to an HTTP/1.0 client (RFC 9112 6.1: a server
	// sends it only in a response to an HTTP/1.1 request), and
	// Content-Length once, its first field's first element: internal/h1
	// checked that the fields and their lists say one number, and a
	// client may refuse several (RFC 9110 8.6; Go's net/http does where
	// they are not written alike).
	keepFraming := r.Framing == h1.NoBody && r.Status >= 200 && r.Status != 204
	keepTE := keepFraming && s.minor == 1
	clSent := !keepFraming
	rules := noRules // (none on an interim 1xx)
	if r.Status >= 200 || upgrade {
		rules = s.ln.respRules(&s.x)
	}
	for _, h := range r.Headers {
		switch {
		case r.HopByHop(h.Name), !rules.keep(h.Name):
		case bytes.EqualFold(h.Name, hdrTE):
			if keepTE {
				o = h1.AppendHeader(o, h.Name, h.Value)
			}
		case bytes.EqualFold(h.Name, hdrCL):
			if !clSent {
				v, _ := h1.NextElem(h.Value)
				o, clSent = h1.AppendHeader(o, h.Name, v), true
			}
		default:
			o = h1.AppendHeader(o, h.Name, h.Value)
		}
	}
	o = rules.appendH1(o)
	switch r.Framing {
	case h1.Length:
		o = appendLength(o, r.ContentLength)
	case h1.Chunked:
		o = appendCodings(o, r.Headers)
	}
	if r.Status >= 200 || upgrade {
		o = append(o, "Via: 1."...)
		o = append(o, byte('0'+r.Minor))
		o = append(o, " spindle\r\n"...)
	}
	switch {
	case upgrade:
		o = append(o, "Connection: upgrade\r\nUpgrade: "...)
		o = append(o, r.Upgrade...) // (internal/h1: a 101 has one)
		o = append(o, "\r\n"...)
	case r.Status >= 200:
		o = s.appendConnection(o)
	}
	o = append(o, "\r\n"...)
	s.ls.scratch = o
	s.client.Write(o)
}

// appendConnection appends the Connection field of a final response head:
// close where the client is closed after it, keep-alive to an HTTP/1.0
// client that keeps it, else none.
func (s *hsession) appendConnection(o []byte) []byte {
	switch {
	case s.closeAft:
		return append(o, "Connection: close\r\n"...)
	case s.minor == 0:
		return append(o, "Connection: keep-alive\r\n"...)
	}
	return o
}

// forwardResp sends the response body's bytes in b[off:] to the client:
// a buffer's whole tail without a copy, a chunked body's trailer
// section held to its end and sent filtered (sendTrailer). Loop
// goroutine.
func (s *hsession) forwardResp(b engine.Buffer, off int) {
	if s.respLocal || s.done {
		b.Release()
		return
	}
	p := b.Bytes()[off:]
	n, held, done, err := s.respTrl.next(&s.respBody, p)
	if err != nil {
		b.Release()
		s.closeUp(true)
		s.x.term = termResponse
		s.client.Reset() // the response is broken half-way
		return
	}
	extra := n < len(p)
	switch {
	case held >= 0:
		// (A chunked body's trailer section goes held to its end and
		// filtered, as a request's: trailer.go.)
		sendTrailer(&s.respTrl, s.client, p[:held], done, s.ln.respTrailerRules(&s.x))
		b.Release()
	case n == len(p):
		s.client.WriteBufferFrom(b, off)
	default:
		s.client.Write(p[:n])
		b.Release()
	}
	if done {
		s.respDone(!extra)
		return
	}
	if s.client.QueuedMemory() >= s.p.cfg.Engine.WriteHighWater && !s.upBP {
		// Until OnWritable, no read from the server comes: response_timeout
		// counts the client's progress (clientMoved) from here.
		s.upBP = true
		s.closeQ = s.outstanding()
		s.up.PauseRead()
	}
}

// respDone ends a response: the upstream goes back to the idle pool if
// both sides allow it (clean says nothing followed the response), and
// the client reads its next request or is closed. Loop goroutine.
func (s *hsession) respDone(clean bool) {
	s.end(s.resp.Status, false)
	s.out = emptied(s.out)
	if up := s.up; up != nil {
		reuse := clean && s.resp.KeepAlive && s.reqDone && s.resp.Framing != h1.UntilClose && !s.ls.draining
		s.up = nil
		s.ls.stats(s.pool, s.srv).active.dec()
		if reuse && s.ls.putIdle(up, s.pool, s.srv, s.p.now()) {
			if s.upBP {
				up.ResumeRead()
			}
		} else {
			up.SetContext(nil)
			up.Close()
			s.pool.servers[s.srv].release(s.ls.id)
		}
	}
	s.upBP = false
	if s.closeAft || s.ls.draining || s.retired() || s.eof && !s.hasP {
		s.closeClient()
		return
	}
	s.setPhase(phIdle)
	s.nextHead()
}

// nextHead goes on with the requests the client pipelined behind the
// one answered, held in pend, unless the client's queue holds the mark:
// then its OnWritable does, as syncRead reads no new request from it
// meanwhile. A client that sends requests and reads no response would
// otherwise have each response appended to its queue for as long as it
// sends: a response that ends within what the proxy reads of it (no
// body, a short one) never pauses the server. Loop goroutine.
func (s *hsession) nextHead() {
	if s.phase == phIdle && s.hasP && s.client.QueuedMemory() < s.p.cfg.Engine.WriteHighWater {
		s.hasP = false
		s.feedHead(s.pend, s.poff)
	}
}

// countResp counts a response by class, from the upstream or the proxy.
func (s *hsession) countResp(status int, local bool) { s.ln.countResp(s.ls.id, status, local) }

// countResp counts a response of the listener on loop id by class, from
// the upstream or the proxy.
func (l *listener) countResp(id, status int, local bool) {
	k := min(max(status/100, 1), 5) - 1
	st := l.stats[id]
	if local {
		st.respLocal[k].inc()
	} else {
		st.respUp[k].inc()
	}
}

// respond answers the current request from the proxy (an error) and
// closes the client once it is sent. Loop goroutine.
func (s *hsession) respond(status int) {
	if s.done || s.phase == phClosing {
		return
	}
	s.respLocal = true
	s.countResp(status, true)
	if !s.x.open {
		s.begin(nil) // a head refused unparsed, or none in time
	}
	s.end(status, true)
	r := localResponse(status)
	if s.head {
		r = r[:bytes.Index(r, []byte("\r\n\r\n"))+4] // (a HEAD's response has no content: RFC 9112 6.3)
	}
	s.client.Write(r)
	s.closeClient()
}

// closeClient closes the client after its queue, lingering for what it
// may still send (engine.Conn.CloseLinger). Loop goroutine.
func (s *hsession) closeClient() {
	s.closing()
	if s.hasP {
		s.hasP = false
		s.pend.Release()
	}
	s.closeUp(false)
	s.client.CloseLinger(lingerTime, lingerBytes)
}

// closeIdle closes a client between requests (keepalive_timeout, a drain,
// a reload retiring its listener): with a Close where it has sent nothing
// since its last response, lingering (closeClient) where it is sending the
// body of a request a rate limit refused (discard), or has sent a request
// held unparsed behind its last response (hasP: nextHead waits for its
// queue to drain below the mark), which it may still be sending: a Close
// would leave the bytes unread, and the kernel would answer them with a
// reset, which drops what the client has yet to receive (the 429, the
// response and what came before it) and may have it discard what it
// received unread (RFC 9112 section 9.6; TestDrainPipelinedHeld). The held
// request is not answered. Loop goroutine.
func (s *hsession) closeIdle() {
	if s.discard || s.hasP {
		s.discard = false
		s.closeClient()
		return
	}
	s.closing()
	s.client.Close()
}

// closeUp closes the current upstream connection, if any: with a reset
// where it is broken (its response is not to be read). Loop goroutine.
func (s *hsession) closeUp(reset bool) {
	if s.h2 != nil && s.h2.on {
		s.h2.detach(true)
	}
	up := s.up
	if up == nil {
		return
	}
	s.up = nil
	s.upBP = false
	s.uin = emptied(s.uin) // what up sent of a head is not the next one's
	s.ls.stats(s.pool, s.srv).active.dec()
	s.pool.servers[s.srv].release(s.ls.id)
	up.SetContext(nil)
	if reset {
		up.Reset()
	} else {
		up.Close()
	}
}

// kill ends the exchange as the engine's stop ends those it cuts (KD),
// the stop having refused its dial or cut the upstream (or h2c
// connection) it had: neither sent again nor answered, counted against
// no server, its upstream (or stream) reset and the client reset, whose
// OnClose logs the exchange. Loop goroutine.
func (s *hsession) kill() {
	s.x.term = termKilled
	s.closeUp(true)
	s.client.Reset()
}

// upFailed handles an upstream that broke (closed, reset, or a write
// refused) while it was the session's: before any response byte it fails
// over, retries or answers 502; after one it resets the client. Loop
// goroutine.
func (s *hsession) upFailed(err error) {
	if s.up == nil {
		return
	}
	switch {
	case errors.Is(err, net.ErrClosed):
		// The engine's stop cut it (the drain ran out), and the client
		// with it, whose OnClose may come after this one: the exchange
		// ends here (KD), neither sent again nor answered, and counts
		// against no server. A dial would be refused (ended KD too:
		// connect).
		s.kill()
	case !s.upOpen:
		// The dial failed: the next server.
		st := s.ls.stats(s.pool, s.srv)
		st.active.dec()
		s.pool.servers[s.srv].release(s.ls.id)
		s.p.dialFailed(s.pool, s.srv, st, err)
		s.failedAt(s.srv)
		s.up.SetContext(nil)
		s.up = nil
		s.connect()
	case s.respHead:
		if s.resp.Framing == h1.UntilClose && err == nil {
			s.respDone(false)
			return
		}
		s.x.term = sideTerm(err, termServer, termServerTO)
		s.closeUp(true)
		s.client.Reset()
	case s.reused && s.idem && !s.retry && !s.interim && len(s.uin) == 0:
		// A kept connection the server closed as the request went out
		// (no byte of a response came): once more on a new connection.
		s.closeUp(false)
		s.retry = true
		s.redial()
	case s.retryReset(h2.ResetConnection, h2.NoError):
	default:
		s.passive(false)
		s.closeUp(true)
		if err != nil {
			// (The 502 alone is logged SD.)
			s.x.term = sideTerm(err, termServer, termServerTO)
		}
		s.respond(502)
	}
}

// writeFailed handles a write to the upstream that failed with err. One
// refused because the connection is closing (net.ErrClosed: its server's
// reset, a write_timeout, both seen in this loop iteration) waits for
// its OnClose, on its way, whose error says how the exchange ended
// (upFailed): taken for the engine's stop, the net.ErrClosed was logged
// KD. Any other failure ends the try at once. Loop goroutine.
func (s *hsession) writeFailed(err error) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	s.upFailed(err)
}

// passive records the exchange's outcome with its server, a response head
// or a failure before one, for passive health (http_errors). Loop
// goroutine.
func (s *hsession) passive(ok bool) { s.pool.servers[s.srv].exchanged(s.pool, ok) }

// passiveStatus records the exchange's final response status for passive
// health (server.answered). Loop goroutine.
func (s *hsession) passiveStatus(st int) { s.pool.servers[s.srv].answered(s.pool, st) }

// redial sends the request again on a new connection. Loop goroutine.
func (s *hsession) redial() {
	s.phase = phConnect
	s.dialing = dialing{start: pickServer(s.ls, s.pool, s.hkey)}
	s.connect()
}

// upEOF: the upstream's FIN. It ends an until-close response; anywhere
// else it is a broken exchange. Loop goroutine.
func (s *hsession) upEOF(c *engine.Conn) {
	if c != s.up {
		c.Close()
		return
	}
	s.upFailed(endErr(c))
}

// errTLSTruncated is the end of a TLS server's stream without close_notify
// (engine.Conn.TLSTruncated).
var errTLSTruncated = errors.New("the server's TLS stream ended without close_notify")

// endErr returns the error of up's end of the stream (OnEOF), for
// upFailed: nil (an until-close response's end) but over TLS without
// close_notify, a FIN that anyone on the path can send at a record
// boundary: such a response may be cut short, and is passed on as one cut
// inside its length is. Loop goroutine.
func endErr(up *engine.Conn) error {
	if up.TLSTruncated() {
		return errTLSTruncated
	}
	return nil
}

// clientEOF: the client's FIN. An idle client is closed, and so is one
// whose request waits for a server to see it (waiting), the request let
// go of; a request in flight is answered first (and then the client
// closed), but with abort_on_close before its response head (abortable);
// a request body cut short ends the exchange (with a reset where a
// response had begun). Loop goroutine.
func (s *hsession) clientEOF() {
	s.eof = true
	switch {
	case s.phase == phIdle || s.phase == phHead:
		s.closing()
		if s.hasP {
			s.hasP = false
			s.pend.Release()
		}
		s.client.Close()
	case s.waiting() || s.abortable():
		// Nothing went to a server yet: the request leaves what it
		// waits in, the pool's queue, or with abort_on_close (as
		// HAProxy's option abortonclose) its connect (its slot going to
		// the next waiter) or its h2c server's queue for a stream. Or
		// abort_on_close past that: the server's connection is reset, an
		// h2c server's stream too.
		s.w.leave(s.pool, &s.x.queued, false)
		s.closeUp(true)
		s.x.term = termClient
		s.closing()
		s.client.Close()
	case !s.reqIn():
		s.closeUp(true)
		if s.respHead {
			// The response is cut: a FIN after an until-close body would
			// read as its end.
			s.client.Reset()
			return
		}
		s.closing()
		s.client.Close()
	}
	// Else the response is awaited: closeAft or respDone's closeClient.
}

// clientClosed ends the session, its client closed with err. Loop
// goroutine.
func (s *hsession) clientClosed(err error) {
	s.done = true
	s.w.leave(s.pool, &s.x.queued, false)
	s.phase = phClosing
	s.timer.Stop()
	if s.x.open {
		if s.x.term == termNone {
			s.x.term = sideTerm(err, termClient, termClientTO)
		}
		st := 0
		if s.respHead {
			st = s.resp.Status
		}
		s.end(st, false)
	}
	if s.hasP {
		s.hasP = false
		s.pend.Release()
	}
	if s.up != nil || s.h2 != nil && s.h2.on {
		s.closeUp(true)
	}
	s.unlist()
	st := s.ln.stats[s.ls.id]
	st.active.dec()
	s.ln.conns.Add(-1)
	s.ls.moveLog(s.ln, nil)
}

// unlist removes the session from its loop's sessions. Loop goroutine.
func (s *hsession) unlist() {
	ls := s.ls
	last := ls.sessions[len(ls.sessions)-1]
	ls.sessions[s.idx], last.idx = last, s.idx
	ls.sessions[len(ls.sessions)-1] = nil
	ls.sessions = ls.sessions[:len(ls.sessions)-1]
}

// waiting reports whether the request waits for a server to see it where
// the client's FIN ends it: in the pool's queue for a slot (phQueue), and
// with abort_on_close also for its connect (phConnect) or, to an h2c
// pool, for a stream (in its server's queue, for room on a connection or
// for one dialed). Without abort_on_close a connect's FIN is a half close,
// as a sent request's: a client that sends its request and then its FIN
// (printf ... | nc -N) is answered whether or not an idle connection was
// at hand (HAProxy's default; only the queue, which overload fills, lets
// such a request go). The client is read meanwhile where nothing is held
// (a body's start or a next request), so that its FIN is seen
// (clientEOF). Loop goroutine.
func (s *hsession) waiting() bool {
	return s.phase == phQueue ||
		s.ln.cfg.AbortOnClose && (s.phase == phConnect || s.phase == phWait && s.h2 != nil && s.h2.on && s.h2.wsl != nil)
}

// abortable reports whether the client's FIN ends the request once it
// went whole to its server (abort_on_close), no response head having
// come: the client is read meanwhile where nothing is held, for its FIN.
// Loop goroutine.
func (s *hsession) abortable() bool {
	return s.ln.cfg.AbortOnClose && s.phase == phWait && s.reqIn() && !s.respHead
}

// reqIn reports whether the client sent its request whole: its body went
// to up (reqDone), or, to an h2c pool, its end was read (a retry's body
// kept may still be on its way again: the client is read meanwhile, and
// its FIN is no body cut short). Loop goroutine.
func (s *hsession) reqIn() bool { return s.reqDone || s.h2 != nil && s.h2.on && s.h2.done }

// syncRead turns the client's reading on where the session wants the
// next bytes (a head, or a body the upstream has room for), off
// elsewhere. Called last in each event: ResumeRead may deliver held data
// at once. Loop goroutine.
func (s *hsession) syncRead() {
	if s.done || s.phase == phClosing || s.client.Closed() {
		return
	}
	want := s.phase == phIdle && !s.hasP && s.client.QueuedMemory() < s.p.cfg.Engine.WriteHighWater || // (pipelined: nextHead)
		s.phase == phHead || (s.waiting() || s.abortable()) && !s.hasP ||
		s.phase == phWait && !s.reqDone && s.upOpen && !s.hasP && s.up != nil && s.up.QueuedMemory() < s.p.cfg.Engine.WriteHighWater ||
		s.phase == phWait && !s.reqDone && s.h2 != nil && s.h2.on && s.h2.wantBody()
	if s.eof {
		want = false
	}
	if want == s.reading {
		return
	}
	s.reading = want
	if want {
		s.client.ResumeRead()
	} else {
		s.client.PauseRead()
	}
}

// tunnel turns the session into an L4 one after a 101 response: what
// followed the head in b goes to the client, what the client sent after
// its request to the upstream, and from then on bytes pass as they are.
// The client's FIN has not come (s.eof): while its request awaits the
// response the session reads the client only for the body's rest (a FIN
// there cuts the request short: clientEOF closes the upstream) or, with
// abort_on_close, for its FIN (which ends the exchange); a request in the
// pool's queue or connecting has no response to await. Once the body went
// whole syncRead pauses the client, and the engine holds what arrives
// after, the FIN too, until the tunnel reads on: its OnEOF gets the FIN,
// and tells a TLS client's end without close_notify apart (clientCut)
// (TestTLSClientFINBeforeUpgradeAfterBody). Loop goroutine.
func (s *hsession) tunnel(b engine.Buffer, off int) {
	t := &session{p: s.p, ls: s.ls, ln: s.ln, pool: s.pool, client: s.client, up: s.up, srv: s.srv, upOpen: true}
	t.w.of = t
	s.upgraded(t)
	s.timer.Stop()
	s.armed = false
	s.done = true // the session is t's now
	s.unlist()
	s.client.SetContext(t)
	s.up.SetContext(t)
	t.startIdle()
	// The first bytes through the tunnel, each way: counted as its
	// OnData counts the rest (b's were in the server's bytesIn already).
	t.x.fromServer += int64(b.Len() - off)
	s.client.WriteBufferFrom(b, off)
	if s.hasP {
		s.hasP = false
		n := s.pend.Len() - s.poff
		t.x.fromClient += int64(n)
		s.ls.stats(s.pool, s.srv).bytesOut.addInt(n)
		s.up.WriteBufferFrom(s.pend, s.poff)
	}
	if s.upBP {
		s.up.ResumeRead()
	}
	if !s.reading {
		s.client.ResumeRead()
	}
}

// takeIdle pops the newest idle connection to server i of pl, nil for
// none. Loop goroutine.
func (ls *loopState) takeIdle(pl *pool, i int) *engine.Conn {
	st := &ls.share(pl, i).idle.conns
	n := len(*st)
	if n == 0 {
		return nil
	}
	c := (*st)[n-1].c
	(*st)[n-1] = idleConn{}
	*st = (*st)[:n-1]
	ls.stats(pl, i).idle.dec()
	return c
}

// putIdle keeps c as an idle connection to server i of pl; it reports
// false (c to be closed) where the pool keeps none or is full (by the
// pool in force for the server: a reload's lower max_idle bounds the
// connections in use at it too, and a pool it made h2c or h2 keeps no
// HTTP/1.1 one), a reload removed the server or replaced pl by a pool
// secured otherwise (poolLoop.stale), or the pool's oldest waiter is on
// another loop (elsewhereFirst). Loop goroutine.
func (ls *loopState) putIdle(c *engine.Conn, pl *pool, i int, now int64) bool {
	sl := ls.share(pl, i)
	il := &sl.idle
	st := &il.conns
	qs := pl.queue()
	np := pl.inForce(sl.srv)
	if np.h2 || np.maxIdle <= 0 || len(*st) >= np.maxIdle || c.Closed() || il.gone || pl.loops[ls.id].stale || qs.elsewhereFirst(ls.id) {
		// (With a client waiting for a slot on another loop since before
		// this loop's first, or on other loops only, its slot goes to
		// them: closed, c's release wakes the oldest waiter's loop. An
		// upstream connection is its loop's, so that the slot moves
		// only by its close.)
		return false
	}
	if qs.waiting.Load() > 0 {
		qs.kick(ls.id, ls.id) // this loop's waiters take it (takeIdleFor)
	}
	*st = append(*st, idleConn{c, now})
	c.SetContext(&sl.tag)
	ls.stats(pl, i).idle.inc()
	ls.armSweep(c.Loop(), now, deadline(now, pl.idleTimeout))
	return true
}

// dropIdle removes c from its idle pool (it closed, sent an end or
// unasked data) and closes it. Loop goroutine.
func (ls *loopState) dropIdle(c *engine.Conn, t *idleTag) {
	st := &t.sl.idle.conns
	held := false
	for k, ic := range *st {
		if ic.c == c {
			copy((*st)[k:], (*st)[k+1:])
			(*st)[len(*st)-1] = idleConn{}
			*st = (*st)[:len(*st)-1]
			t.sl.stats.idle.dec()
			held = true
			break
		}
	}
	c.SetContext(nil)
	c.Close()
	if held {
		t.sl.srv.release(ls.id) // its slot
	}
}

// sweepIdle closes the idle connections kept longer than their pool's
// idle_timeout, closes the HTTP/2 connections whose server's SETTINGS
// are past due and sends their PINGs (those of pools, and of removed
// servers still carrying streams: goneH2) and re-arms itself
// for the next due. Loop goroutine.
func (ls *loopState) sweepIdle(l *engine.Loop, pools []*pool, now int64) {
	ls.sweeping = false
	next := int64(-1)
	for _, pl := range pools {
		for i := range pl.servers {
			sl := ls.share(pl, i)
			st := &sl.idle.conns
			for len(*st) > 0 && now-(*st)[0].at >= int64(pl.idleTimeout) {
				ls.dropIdle((*st)[0].c, &sl.tag)
			}
			if len(*st) > 0 {
				if at := deadline((*st)[0].at, pl.idleTimeout); next < 0 || at < next {
					next = at
				}
			}
			if at := sl.h2.sweep(now, pl); at >= 0 && (next < 0 || at < next) {
				next = at
			}
		}
	}
	for _, sh := range ls.goneH2 {
		if at := sh.sweep(now, nil); at >= 0 && (next < 0 || at < next) {
			next = at
		}
	}
	ls.goneH2 = slices.DeleteFunc(ls.goneH2, (*h2Share).empty)
	if next >= 0 {
		ls.sweeping, ls.sweepAt = true, next
		ls.sweep = l.AfterFunc(time.Duration(next-now), ls.sweepFn)
	}
}

// drainHTTP starts a drain on this loop: idle upstream connections and
// idle clients (between requests, or new ones that sent nothing) close
// now, and the others after their current response.
// Loop goroutine.
func (ls *loopState) drainHTTP() {
	ls.draining = true
	for _, pl := range ls.pools {
		for _, srv := range pl.servers {
			sl := srv.loops[ls.id]
			for len(sl.idle.conns) > 0 {
				ls.dropIdle(sl.idle.conns[0].c, &sl.tag)
			}
			sl.h2.drain()
		}
	}
	ls.closeIdleClients(false)
}

// closeIdleClients closes the idle HTTP clients (between requests, or new
// ones that sent nothing): all of them, or (retiredOnly) those of
// listeners a reload retired (hsession.retired). Loop goroutine.
func (ls *loopState) closeIdleClients(retiredOnly bool) {
	for k := len(ls.sessions) - 1; k >= 0; k-- {
		if k >= len(ls.sessions) {
			continue // (a Close took more than one)
		}
		s := ls.sessions[k]
		if (s.phase == phIdle || s.phase == phHead && len(s.in) == 0) && (!retiredOnly || s.retired()) {
			s.closeIdle()
		}
	}
	ls.drainH2(retiredOnly)
}

// localResponse returns the proxy's own response for status, with a short
// text body and Connection: close.
func localResponse(status int) []byte {
	if r, ok := localResponses[status]; ok {
		return r
	}
	return localResponses[400]
}

var localResponses = func() map[int][]byte {
	m := map[int][]byte{}
	for _, st := range []int{400, 405, 408, 413, 414, 417, 429, 431, 501, 502, 503, 504, 505} {
		body := strconv.Itoa(st) + " " + statusText[st] + "\n"
		m[st] = []byte("HTTP/1.1 " + strconv.Itoa(st) + " " + statusText[st] + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
	}
	return m
}()

var statusText = map[int]string{
	400: "Bad Request", 405: "Method Not Allowed", 408: "Request Timeout", 413: "Content Too Large", 414: "URI Too Long",
	417: "Expectation Failed", 429: "Too Many Requests", 431: "Request Header Fields Too Large", 501: "Not Implemented", 502: "Bad Gateway",
	503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
}

// dotSegments reports whether the path of a request target (origin- or
// absolute-form; its query aside) has a "." or ".." segment, its dots
// spelled out or percent-encoded (%2E), its segments separated by "/" or
// by what servers also take for one once decoded or on Windows: a backslash,
// "%2F", "%5C". Such a target is refused (400), not forwarded: routes
// match the target as received, so "/api/../admin" (or
// "/api/x%2F..%2Fadmin", for a server that decodes %2F before resolving
// dot-segments) would match path_prefix "/api/" and reach a server that
// serves /admin. Normalizing instead would have the proxy decide, for
// every server behind it, how it resolves paths; a client has no reason
// to send dot-segments (RFC 3986 5.2.4 has them removed before a request
// is made). A %2F elsewhere ("group%2Fproject") passes. A "." or ".."
// followed by a path parameter (";", or %3B) is one too: Tomcat, Jetty
// and Spring drop a segment's parameters before they resolve it, so
// "/api/..;/admin" is "/admin" to them.
func dotSegments(target []byte) bool {
	_, path := splitTarget(target)
	if i := bytes.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	dots := 0 // the current segment's dots; -1: it has anything else
	for i := 0; i < len(path); {
		c, n := pathByte(path, i)
		i += n
		switch {
		case isSeparator(c):
			if dots == 1 || dots == 2 {
				return true
			}
			dots = 0
		case c == ';' && (dots == 1 || dots == 2):
			return true // (the segment's name ends at its parameters)
		case c == '.' && dots >= 0:
			dots++
		default:
			dots = -1
		}
	}
	return dots == 1 || dots == 2
}
