package proxy

import (
	"errors"
	"net/netip"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// An HTTP/2 client's stream to an h2c pool (h2→h2): its request head and
// fields go as HEADERS on an upstream connection (upH2) with the
// forwarding fields as the HTTP/1.1 path writes them, its DATA and
// trailers as DATA and trailers, and the response back the same way, not
// re-framed. Each side's DATA is Consumed only once the other side took
// it, so what the proxy holds of a stream is bounded by the windows: the
// client's stream window for the request body (h2_initial_window), the
// upstream stream window (64 KiB) for the response.

// upSide is an h2stream's state toward an h2c pool.
type upSide struct {
	on      bool // the stream's pool is h2c
	u       *upH2
	uid     uint32
	wsl     *srvLoop // the server share whose queue it waits in
	counted bool     // counted in its server's active (streams in flight)
	retries int      // sent again after a refusal or GOAWAY
	req     h2.Request
	boff    int   // body[boff:] is still to send
	sent    int64 // request body bytes sent upstream
	hasTrl  bool  // request trailers held behind the body
	trl     []hpack.Field
	tb      []byte
	rbuf    []byte // response DATA the client's windows did not take
	roff    int
	rend    bool // the response ended upstream (after rbuf and trailers)
	rtrl    bool // response trailers held behind rbuf
	rtf     []hpack.Field
	rtb     []byte
	owe     int   // response bytes the client took, not yet Consumed upstream
	held    int   // rbuf's unsent bytes as counted in the listener's h2RespHeld (h2Hold)
	up      bool  // may get response bytes from upstream: counts a window in h2_response_hold
	resv    int64 // what it counts in its client connection's upResv
	bwait   bool  // waits in upWait for room in h2_response_hold
	headWait
	rfs []hpack.Field
}

// headWait is a try's wait for its response head from an h2c pool's
// server, an HTTP/2 client's stream's (upSide) or an HTTP/1.1 client's
// request's (h1up). since: when it began (0: not yet), its waits for room
// in h2_response_hold and in its server's queue included, moved on by the
// request body's reads as the try's mark is: response_timeout runs from
// it; per_try_timeout runs from mark, the try's start at its server
// (until). queued: the try was left in its server's queue, for room or a
// connection on its way; waited: it waited for room in this try, in
// h2_response_hold or in that queue before a connection that had carried
// streams, and a 504 is not held against the server, which had less than
// response_timeout (a wait for a new connection is its connect's, as for
// an HTTP/1.1 server); cleared where since moves on at the server (a body
// read, an interim head), which has all of response_timeout from there.
// A new try starts from the zero value.
type headWait struct {
	since  int64
	queued bool
	waited bool
}

// begin starts the wait at now, unless it began before (a wait for room
// going on to the server). Loop goroutine.
func (w *headWait) begin(now int64) {
	if w.since == 0 {
		w.since = now
	}
}

// started notes the try's start at its server, on a connection that had
// carried streams before (reused) or a new one. Loop goroutine.
func (w *headWait) started(reused bool) {
	w.waited = w.waited || w.queued && reused
	w.queued = false
}

// moveOn starts the wait again at now (a read of the request body, an
// interim head); at its server (atServer), the server has all of
// response_timeout from there. Loop goroutine.
func (w *headWait) moveOn(now int64, atServer bool) {
	w.since = now
	w.waited = w.waited && !atServer
}

// until is when the wait runs out, the try at its server since mark
// (atServer) or not there yet, try its timeout (per_try_timeout where
// shorter than resp, response_timeout): before the response head
// (headCame false) resp from since and, at the server, try from mark;
// a wait for room counts in the first only
// (TestH2UpQueueWaitNotInPerTryTimeout). Else, or before the wait began,
// try from mark. Loop goroutine.
func (w *headWait) until(mark int64, try, resp time.Duration, atServer, headCame bool) int64 {
	if w.since == 0 || headCame {
		return deadline(mark, try)
	}
	dl := deadline(w.since, resp)
	if atServer {
		dl = min(dl, deadline(mark, try))
	}
	return dl
}

// trim bounds the buffers s keeps for the stream's next use, at its
// release, as h2stream.trim does the stream's: each up to keptHeadBuf
// bytes or keptFields fields, the fields zeroed, and the request head's
// other slices (into the stream's hb) dropped.
func (s *upSide) trim() {
	s.req = h2.Request{Fields: trimmed(s.req.Fields, keptFields)}
	s.trl, s.rtf, s.rfs = trimmed(s.trl, keptFields), trimmed(s.rtf, keptFields), trimmed(s.rfs, keptFields)
	s.tb, s.rbuf, s.rtb = emptied(s.tb), emptied(s.rbuf), emptied(s.rtb)
}

// reuse returns a fresh upSide keeping s's buffers (trimmed at the
// stream's release).
func (s *upSide) reuse() upSide {
	return upSide{req: h2.Request{Fields: s.req.Fields[:0]}, trl: s.trl[:0], tb: s.tb[:0], rbuf: s.rbuf[:0],
		rtf: s.rtf[:0], rtb: s.rtb[:0], rfs: s.rfs[:0]}
}

var (
	hdrXFFLower   = []byte("x-forwarded-for")
	hdrXFPLower   = []byte("x-forwarded-proto")
	hdrXFHLower   = []byte("x-forwarded-host")
	valHTTP       = []byte("http")
	valVia20      = []byte("2.0 spindle")
	schemeHTTPVal = valHTTP
)

// copyFields copies fs into hb (grown once, so that the fields' slices
// stay valid) and returns the copies in dst.
func copyFields(hb []byte, dst, fs []hpack.Field) ([]byte, []hpack.Field) {
	size := 0
	for _, f := range fs {
		size += len(f.Name) + len(f.Value)
	}
	hb = hb[:0]
	if cap(hb) < size {
		hb = make([]byte, 0, size)
	}
	dst = dst[:0]
	for _, f := range fs {
		n0 := len(hb)
		hb = append(hb, f.Name...)
		v0 := len(hb)
		hb = append(hb, f.Value...)
		dst = append(dst, hpack.Field{Name: hb[n0:v0], Value: hb[v0:], Sensitive: f.Sensitive})
	}
	return hb, dst
}

// h2Head keeps the request's head for the upstream (st.u2.req, its bytes
// in st.hb: a stream may wait for a connection, and be sent again): the
// method, :authority from host (or host_rewrite), the path (after
// rewrite_prefix), the fields but host (:scheme is the upstream
// connection's, set by onStart: upH2.scheme; not the client's own, which
// travels in x-forwarded-proto), the forwarding ones
// a client not in trusted_proxies sent and those request_headers and
// headers_with_underscores drop (dropUnderscored)
// (a field the client sent never-indexed still so, pseudo-header fields
// and Host as :authority too),
// the fields request_headers write, then x-forwarded-for (a trusted client's values and the client),
// x-forwarded-proto and x-forwarded-host where none passed, and via.
func (st *h2stream) h2Head(r *h2.Request, host []byte) {
	c := st.c
	client := c.client.RemoteAddr().Addr().Unmap()
	trusted := st.ln.trusts(client)
	rules, rw := st.ln.reqRules(st.x.route - 1)
	size := len(r.Method) + len(r.Path) + len(host) + len(rw.path) + len(rw.host) + 128
	for _, f := range r.Fields {
		size += len(f.Name) + len(f.Value) + 2
	}
	hb := st.hb[:0]
	if cap(hb) < size {
		hb = make([]byte, 0, size)
	}
	fs := st.fields[:0]
	hb = append(hb, r.Method...)
	p0 := len(hb)
	hb = rw.appendPath(hb, r.Path)
	a0 := len(hb)
	hb = append(hb, host...) // (X-Forwarded-Host's)
	e0 := len(hb)
	ua0, ue0 := a0, e0
	if rw.host != nil {
		hb = append(hb, rw.host...)
		ua0, ue0 = e0, len(hb)
	}
	xfp, xfh := false, false
	ni := r.NeverIndexed // (RFC 7541 6.2.3)
	for _, f := range r.Fields {
		n := f.Name
		if string(n) == "host" && f.Sensitive && len(r.Authority) == 0 { // the :authority sent
			ni |= h2.PseudoAuthority
		}
		switch {
		case string(n) == "host", string(n) == "x-forwarded-for", !rules.keep(n), st.ln.dropUnderscored(c.ls.id, n):
			continue
		case !trusted && forwardingField(n):
			continue
		case string(n) == "x-forwarded-proto":
			xfp = true
		case string(n) == "x-forwarded-host":
			xfh = true
		}
		n0 := len(hb)
		hb = append(hb, n...)
		v0 := len(hb)
		hb = append(hb, f.Value...)
		fs = append(fs, hpack.Field{Name: hb[n0:v0], Value: hb[v0:], Sensitive: f.Sensitive}) // (RFC 7541 6.2.3)
	}
	fs = rules.appendH2(fs)
	x0 := len(hb)
	hb = appendXFF(hb, r.Fields, trusted, client)
	fs = append(fs, hpack.Field{Name: hdrXFFLower, Value: hb[x0:]})
	if !xfp {
		fs = append(fs, hpack.Field{Name: hdrXFPLower, Value: st.ln.scheme})
	}
	if !xfh {
		fs = append(fs, hpack.Field{Name: hdrXFHLower, Value: hb[a0:e0]})
	}
	fs = append(fs, hpack.Field{Name: hdrVia, Value: valVia20})
	st.hb, st.fields = hb, fs
	st.u2.req = h2.Request{Method: hb[:p0], Authority: hb[ua0:ue0], Path: hb[p0:a0], Fields: fs, ContentLength: -1, NeverIndexed: ni} // (:scheme the connection's: onStart)
}

// appendXFF appends the X-Forwarded-For value for an HTTP/2 client's
// request with fields fs: a trusted client's x-forwarded-for values, in
// order, then the client.
func appendXFF(o []byte, fs []hpack.Field, trusted bool, client netip.Addr) []byte {
	if trusted {
		for _, f := range fs {
			if string(f.Name) == "x-forwarded-for" && len(f.Value) > 0 {
				o = append(o, f.Value...)
				o = append(o, ", "...)
			}
		}
	}
	return client.AppendTo(o)
}

// h2Pick starts the stream's walk over its pool's servers, from the one
// the balance picks.
func (st *h2stream) h2Pick() { st.h2Walk(0) }

// h2Walk is h1up.h2Walk for a stream.
func (st *h2stream) h2Walk(failed uint64) {
	st.dialing = dialing{start: pickServer(st.c.ls, st.pool, st.hkey), failed: failed}
	st.h2Next()
}

// h2Next finds the stream a connection to the next server up of its
// walk that it did not fail at (a retry's: tried): one with room, a
// queue (and a dial); with none left it answers 502 (servers failed to
// connect) or 503 (none up). A dial the stopping loop refuses ends the
// stream (KD). Loop goroutine.
func (st *h2stream) h2Next() {
	c, ls, pl := st.c, st.c.ls, st.pool
	if !st.h2Room() {
		return
	}
	for {
		i, ok := st.nextUp(ls, pl)
		if !ok {
			break
		}
		if failedTo(st.failed, i) {
			continue
		}
		st.srv = i
		st.u2.counted = true
		ls.stats(pl, i).active.inc()
		st.markWait()
		// The queue it may wait in, recorded before: a stream that starts
		// at once (onStart clears it) and fails may be retried meanwhile
		// and wait in another server's queue, recorded by that call.
		st.u2.wsl = ls.share(pl, i)
		err := ls.h2Acquire(c.p, st, pl, i, c.client, time.Duration(st.ln.cfg.ConnectTimeout))
		if err == nil {
			st.u2.queued = st.u2.u == nil
			return
		}
		st.u2.wsl = nil
		st.uncount()
		if errors.Is(err, engine.ErrClosed) {
			// The engine's stop (the drain ran out) refused the dial, and
			// cuts the client next: the stream ends here (KD), neither
			// answered nor counted as a failed connect, as where the stop
			// cut the connection it waited for (onReset).
			st.kill()
			return
		}
		st.failedAt(i)
	}
	st.respond(st.exhausted(ls, st.ln, &st.x))
}

// markWait starts the stream's wait for its response, or goes on with
// it: response_timeout runs from the try's first wait (since), kept as
// the stream waits for room in h2_response_hold or in its server's queue
// and goes to the server, which would otherwise start it again, twice
// response_timeout at most (TestH2ResponseHoldWaitCountsInResponseTimeout,
// TestH2UpQueueWaitCountsInResponseTimeout); per_try_timeout runs from
// now. Loop goroutine.
func (st *h2stream) markWait() {
	c := st.c
	st.mark = c.p.now()
	st.u2.begin(st.mark)
	st.waiting = true
	c.armAt(st.waitDeadline())
}

// waitDeadline is when the stream's wait for its response runs out
// (headWait.until; to a pool other than h2c, the try's timeout from
// mark). Loop goroutine.
func (st *h2stream) waitDeadline() int64 {
	return st.u2.until(st.mark, st.waitTimeout(), time.Duration(st.ln.cfg.ResponseTimeout), st.u2.u != nil, st.respHead)
}

// uncount takes the stream off its server's streams in flight.
func (st *h2stream) uncount() {
	if st.u2.counted {
		st.u2.counted = false
		st.c.ls.stats(st.pool, st.srv).active.dec()
	}
}

// onStart opens the stream on u: HEADERS, then what the client sent of
// the body and trailers; the client's connection is flushed, as onStart
// may come from u's side (its SETTINGS, a stream's end) where nothing
// else writes the WINDOW_UPDATE that h2Credit queued: a client whose
// window the body held spent waits for it (TestH2UpBodyBeforeSettings).
func (st *h2stream) onStart(u *upH2) {
	c := st.c
	st.u2.wsl = nil
	end := st.reqEnd && len(st.body) == 0 && !st.u2.hasTrl
	reused := u.used
	st.u2.started(reused)
	st.u2.req.Scheme = u.scheme()
	uid, err := u.cl.Request(&st.u2.req, end)
	if err != nil { // (room said it could: the connection failed since)
		st.uncount()
		st.h2Next()
		c.flush()
		return
	}
	u.add(uid, st)
	st.u2.u, st.u2.uid = u, uid
	sst := st.c.ls.stats(st.pool, st.srv)
	sst.requests.inc()
	if reused {
		sst.reusedReqs.inc()
	} else {
		sst.newReqs.inc()
	}
	st.x.srv, st.x.reused = st.pool.servers[st.srv], reused
	st.markWait() // (per_try_timeout: retry.go)
	if end {
		st.reqDone = true
	} else {
		st.h2SendBody()
	}
	c.ups.add(u, c.feeding) // (with the body, if it comes in the same read)
	c.flush()               // (the window h2Credit returned: the client may wait for it)
}

// h2SendBody sends the request body held (as far as the send windows
// allow: onWritable goes on), then the request's end (trailers, or an
// empty DATA with END_STREAM) once the client's came.
func (st *h2stream) h2SendBody() {
	u, id := st.u2.u, st.id
	for st.u2.boff < len(st.body) {
		p := st.body[st.u2.boff:]
		end := st.reqEnd && !st.u2.hasTrl
		w, err := u.cl.WriteDataTo(st.u2.uid, p, end, u.writev)
		if st.id != id || st.u2.u != u {
			return // (the connection failed: the stream was told)
		}
		st.u2.boff += w
		st.u2.sent += int64(w)
		if err != nil || w < len(p) {
			st.h2Credit()
			return
		}
		if end {
			st.reqDone = true
		}
	}
	st.body, st.u2.boff = st.body[:0], 0
	if st.reqEnd && !st.reqDone {
		st.reqDone = true
		if st.u2.hasTrl {
			u.cl.WriteTrailers(st.u2.uid, st.u2.trl)
		} else {
			u.cl.WriteDataTo(st.u2.uid, nil, true, u.writev)
		}
		if st.id != id || st.u2.u != u {
			return
		}
	}
	st.h2Credit()
}

// h2Credit returns to the client's windows the request body its upstream
// took, while the upstream's queue is below the high-water mark (else
// onQueue does).
func (st *h2stream) h2Credit() {
	u := st.u2.u
	if u == nil || st.held == 0 {
		return
	}
	n := st.held - (len(st.body) - st.u2.boff)
	if n > 0 && u.conn.QueuedMemory() < st.c.p.cfg.Engine.WriteHighWater {
		st.c.srv.Consumed(st.id, n)
		st.held -= n
	}
}

// h2Body takes request body bytes from the client: sent at once where
// nothing waits before them, else held (bounded by the client's window:
// held bytes are not Consumed).
func (st *h2stream) h2Body(p []byte, end bool) {
	if st.rt.hold && len(p) > 0 {
		st.keepBody(p) // (all of the body that came: retry.go)
	}
	st.held += len(p)
	if len(p) > 0 {
		st.mark = st.c.p.now() // a body on its way: response_timeout counts from here
		st.u2.moveOn(st.mark, st.u2.u != nil)
	}
	st.reqEnd = st.reqEnd || end
	u, id := st.u2.u, st.id
	if u == nil || st.u2.boff < len(st.body) || st.reqDone {
		if !st.reqDone {
			st.body, st.u2.boff = appendBacklog(st.body, st.u2.boff, p)
		}
		if u != nil && !st.reqDone {
			st.h2SendBody()
			u.flush()
		}
		return
	}
	w, err := u.cl.WriteDataTo(st.u2.uid, p, end, u.writev)
	if st.id != id || st.u2.u != u {
		return
	}
	st.u2.sent += int64(w)
	switch {
	case err != nil:
	case w < len(p):
		st.body = append(st.body[:0], p[w:]...)
		st.u2.boff = 0
	case end:
		st.reqDone = true
	}
	st.h2Credit()
	u.flush()
}

// h2ReqTrailers ends the request with its trailers: sent at once, or
// after the body held.
func (st *h2stream) h2ReqTrailers(fields []hpack.Field) {
	st.reqEnd = true
	u := st.u2.u
	if st.reqDone {
		return
	}
	// (Kept even when sent at once: a stream refused unprocessed is sent
	// again with them, TestH2UpRetryKeepsTrailers.)
	st.u2.tb, st.u2.trl = copyFields(st.u2.tb, st.u2.trl, fields)
	st.u2.trl = keepTrailerFields(st.u2.trl, st.trailerRules()) // (trailer.go)
	st.u2.hasTrl = true
	if u != nil && st.u2.boff == len(st.body) {
		st.reqDone = true
		u.cl.WriteTrailers(st.u2.uid, st.u2.trl)
		u.flush()
	}
}

// onFailover: the server's connects failed; the next server.
func (st *h2stream) onFailover() {
	st.u2.wsl = nil
	st.uncount()
	st.failedAt(st.srv)
	st.h2Next()
	st.c.flush()
}

// onResponse passes the response head: an interim one as interim
// HEADERS, the final one with via added, :status never-indexed where the
// server sent it so (RFC 7541 6.2.3; the fields passed on keep theirs).
// content-length goes once at
// most and on neither a 1xx nor a 204 (RFC 9110 8.6), as from an
// HTTP/1.1 server (respFields): internal/h2 takes a server's head with
// it repeated (the values agree) or on those, and a strict client
// (nghttp2, so curl) resets the stream as malformed where it comes
// twice, in a 1xx, or other than 0 in a 204.
func (st *h2stream) onResponse(u *upH2, r *h2.Response, end bool) {
	c := st.c
	st.mark = c.p.now()
	st.u2.moveOn(st.mark, true) // (an interim head: the final one's wait starts again)
	if r.Status < 200 {
		if st.interims++; st.interims > maxInterim {
			st.passive(false)
			st.x.term = termResponse
			st.respond(502)
			c.flush()
			return
		}
		fs := st.u2.rfs[:0]
		for _, f := range r.Fields {
			if string(f.Name) != "content-length" {
				fs = append(fs, f)
			}
		}
		st.u2.rfs = fs
		c.srv.WriteResponse(st.id, &h2.Response{Status: r.Status, Fields: fs, NeverIndexed: r.NeverIndexed}, false)
		c.flush()
		return
	}
	st.resp.Status = r.Status
	if st.rt.pol != nil && st.retryStatus(0) {
		c.flush()
		return
	}
	st.respHead = true
	st.passiveStatus(r.Status)
	st.ln.countResp(c.ls.id, r.Status, false)
	rules := st.ln.respRules(&st.x)
	fs := st.u2.rfs[:0]
	clDone := r.Status == 204 // no (more) content-length
	for _, f := range r.Fields {
		if string(f.Name) == "content-length" {
			if clDone {
				continue
			}
			clDone = true
		}
		if rules.keep(f.Name) {
			fs = append(fs, f)
		}
	}
	fs = rules.appendH2(fs)
	fs = append(fs, hpack.Field{Name: hdrVia, Value: valVia20})
	st.u2.rfs = fs
	if c.srv.WriteResponse(st.id, &h2.Response{Status: r.Status, Fields: fs, NeverIndexed: r.NeverIndexed}, end) != nil {
		st.x.term = termClient
		st.abandon()
		c.flush()
		return
	}
	if end {
		st.h2Finish()
		c.flush()
		return
	}
	u.heads.add(c, u.feeding) // (with the body, if it came in the same read)
}

// onData passes response body bytes: written to the client as far as its
// windows allow, the rest held until OnWritable (bounded by the upstream
// stream's window: held bytes are not Consumed).
func (st *h2stream) onData(u *upH2, p []byte, end bool) {
	c := st.c
	st.mark = c.p.now()
	if st.u2.roff < len(st.u2.rbuf) {
		st.u2.rbuf, st.u2.roff = appendBacklog(st.u2.rbuf, st.u2.roff, p)
		st.u2.rend = end
		st.h2Hold()
		if st.h2UpEnded() {
			c.flush()
		}
		return
	}
	w, err := c.srv.WriteDataTo(st.id, p, end, c.writev)
	if err != nil {
		st.x.term = termClient
		st.abandon()
		c.flush()
		return
	}
	st.respN += int64(w)
	st.u2.owe += w
	switch {
	case w < len(p):
		st.u2.rbuf = append(st.u2.rbuf[:0], p[w:]...)
		st.u2.roff = 0
		st.u2.rend = end
		st.h2Hold()
		st.h2Stall()
	case end:
		st.h2Finish()
		c.flush()
		return
	}
	st.h2CreditUp()
	st.h2UpEnded()
	c.flush()
}

// h2UpEnded lets go of the upstream stream once the server has ended
// it both ways (the response's end came, the request had ended), where
// its client's windows still hold the response's end back (rbuf): the
// stream is the server's no more, and kept it took a stream of the
// connection's h2_max_concurrent_streams until the client had read the
// last byte, the requests queued behind it waiting for a stream the
// server had finished (TestH2UpEndedResponseFreesStream). What is held
// stays bounded by the stream window, whose credit the stream's end
// gave back (its bytes return to the connection's window at its end).
// It reports whether it let go: the stream counts what it holds in
// h2_response_hold from then on, not a window, and the caller flushes,
// where the room may start a stream waiting (h2Wake) though nothing
// else is written (TestH2ResponseHoldEndedStartsWaiting).
func (st *h2stream) h2UpEnded() bool {
	if st.u2.rend && st.reqDone && st.u2.u != nil {
		st.h2Detach(false)
		return true
	}
	return false
}

// h2Hold counts the response bytes the stream holds for its client's
// windows (rbuf's unsent ones) in its listener's h2RespHeld. Called at
// each change of rbuf or roff, and at the stream's release (rbuf let go
// of). Loop goroutine.
func (st *h2stream) h2Hold() {
	c := st.c
	held := len(st.u2.rbuf) - st.u2.roff
	st.ln.stats[c.ls.id].h2RespHeld.add(int64(held - st.u2.held))
	st.u2.held = held
	resv := int64(held)
	if st.u2.up {
		resv = upH2Window // (rbuf and the window left add up to it)
	}
	c.upResv += resv - st.u2.resv
	if resv < st.u2.resv && len(c.upWait) > 0 {
		c.upWake = true
	}
	st.u2.resv = resv
}

// h2Room reports whether the stream fits in its client connection's
// h2_response_hold with a stream window to an h2c pool's server counted
// for it, and counts it where it does: what the server may send unasked
// on it, which flow control lets the proxy withhold only past that
// window (RFC 9113 6.9.2), so that the bound is on the streams sent, not
// on the bytes coming. One that does not fit waits in upWait
// (response_timeout runs) until the client has taken enough (h2Wake).
// Loop goroutine.
func (st *h2stream) h2Room() bool {
	c := st.c
	if st.u2.up {
		return true
	}
	if c.h2Over(st) {
		if !st.u2.bwait {
			st.u2.bwait = true
			c.upWait = append(c.upWait, st)
			st.markWait()
			st.u2.waited = true
		}
		return false
	}
	st.u2.up = true
	st.h2Hold()
	return true
}

// h2Over reports whether a stream window more for st would pass its
// client connection's h2_response_hold: what the other streams count
// (upResv), and what the client's write queue holds past the high-water
// mark, responses that went there whole (within the client's windows)
// and whose streams are gone, which a client that does not read its
// socket would otherwise have pile up a window a stream. Loop goroutine.
func (c *h2conn) h2Over(st *h2stream) bool {
	q := max(int64(c.client.QueuedMemory()-c.p.cfg.Engine.WriteHighWater), 0)
	return c.upResv-st.u2.resv+q+upH2Window > st.ln.cfg.H2ResponseHold
}

// h2Wake starts the streams waiting for room in h2_response_hold, in
// order, while they fit (h2Hold found it shrunk). From flush: a stream
// that starts may end at once, as it would from OnRequest. Loop
// goroutine.
func (c *h2conn) h2Wake() {
	for len(c.upWait) > 0 {
		st := c.upWait[0]
		if c.h2Over(st) {
			return
		}
		st.h2Unwait()
		st.h2Next()
	}
}

// h2Unwait takes the stream out of upWait, if it waits there.
func (st *h2stream) h2Unwait() {
	if !st.u2.bwait {
		return
	}
	st.u2.bwait = false
	c := st.c
	for i, x := range c.upWait {
		if x == st {
			c.upWait = append(c.upWait[:i], c.upWait[i+1:]...)
			break
		}
	}
}

// h2Stall marks the response held by the client's windows: write_timeout
// runs (onTimer: stalled).
func (st *h2stream) h2Stall() {
	c := st.c
	if !st.paused {
		st.paused = true
		st.mark = c.p.now()
		c.armAt(deadline(st.mark, time.Duration(c.p.cfg.Engine.WriteTimeout)))
	}
}

// appendBacklog appends p to a backlog b whose front b[:off] is sent,
// and returns it and its new offset. The sent front goes (the rest moved
// down) before the backlog would grow: a peer slower than the other side
// may never let it empty, and what is held is bounded by a window only
// with the front reclaimed. Each byte moves once at most per growth.
func appendBacklog(b []byte, off int, p []byte) ([]byte, int) {
	if off > 0 && len(b)+len(p) > cap(b) {
		b, off = b[:copy(b, b[off:])], 0
	}
	return append(b, p...), off
}

// h2Pump sends the response held as the client's windows open, then its
// end (trailers, or END_STREAM).
func (st *h2stream) h2Pump() {
	c := st.c
	for st.u2.roff < len(st.u2.rbuf) {
		p := st.u2.rbuf[st.u2.roff:]
		w, err := c.srv.WriteDataTo(st.id, p, false, c.writev)
		if err != nil {
			st.x.term = termClient
			st.abandon()
			return
		}
		st.u2.roff += w
		st.respN += int64(w)
		st.u2.owe += w
		if w < len(p) {
			if w > 0 {
				st.mark = c.p.now()
				st.h2Hold()
			}
			st.h2CreditUp()
			return
		}
	}
	st.u2.rbuf, st.u2.roff = st.u2.rbuf[:0], 0
	st.h2Hold()
	st.paused = false
	st.mark = c.p.now()
	if st.u2.rend {
		var fs []hpack.Field
		if st.u2.rtrl {
			fs = st.u2.rtf
		}
		if st.endResp(fs) {
			st.h2Finish()
		}
		return
	}
	st.h2CreditUp()
}

// h2CreditUp returns to the upstream's windows the response bytes the
// client took, while the client's queue is below the high-water mark
// (else the client's OnWritable does: clientWritable, resume).
func (st *h2stream) h2CreditUp() {
	u := st.u2.u
	if st.u2.owe == 0 || u == nil {
		return
	}
	c := st.c
	if c.client.QueuedMemory() >= c.p.cfg.Engine.WriteHighWater {
		st.cbp, c.cbp = true, true
		return
	}
	u.cl.Consumed(st.u2.uid, st.u2.owe)
	st.u2.owe = 0
	u.flush()
}

// onTrailers passes the response's trailers (grpc-status), after the
// body held, but those its respTrailerRules drop.
func (st *h2stream) onTrailers(u *upH2, fields []hpack.Field) {
	c := st.c
	tr := st.ln.respTrailerRules(&st.x)
	kept := st.u2.rfs[:0] // (the head's, sent)
	for _, f := range fields {
		if tr.kept(f.Name) {
			kept = append(kept, f)
		}
	}
	st.u2.rfs = kept
	if st.u2.roff < len(st.u2.rbuf) {
		st.u2.rtb, st.u2.rtf = copyFields(st.u2.rtb, st.u2.rtf, kept)
		st.u2.rtrl, st.u2.rend = true, true
		if st.h2UpEnded() {
			c.flush()
		}
		return
	}
	if st.endResp(kept) { // (none kept: END_STREAM on an empty DATA)
		st.h2Finish()
	}
	c.flush()
}

// h2Finish ends a stream whose response was all passed on: logged, its
// upstream stream let go of (reset where the request was still going),
// a request still coming stopped (RST_STREAM NO_ERROR).
func (st *h2stream) h2Finish() {
	c := st.c
	st.end(st.resp.Status, false)
	st.h2Detach(!st.reqDone)
	if !st.reqEnd {
		c.srv.Reset(st.id, h2.NoError)
	}
	c.release(st)
}

// h2Detach lets go of the stream's upstream: out of the queue it waits
// in, its upstream stream reset with CANCEL where reset (and still open).
func (st *h2stream) h2Detach(reset bool) {
	if sl := st.u2.wsl; sl != nil {
		st.u2.wsl = nil
		st.c.ls.unwait(st, sl)
	}
	if u := st.u2.u; u != nil {
		uid := st.u2.uid
		st.u2.u, st.u2.uid = nil, 0
		u.letGo(uid, reset)
	}
	st.uncount()
	st.u2.up = false
	st.h2Hold()
}

// onReset: the upstream stream ended before its end. Unprocessed, with no
// response and no body byte sent, it is sent again (on another connection:
// a GOAWAY left this one; or another server), up to 3 times. The server's
// own reset is passed on to the client with its code (NO_ERROR as CANCEL:
// a cut response must not look whole), before the response head as after
// it (a gRPC server's at a deadline is CANCEL, which its client takes for
// DEADLINE_EXCEEDED). Else (the connection's end, a response in error:
// logged SD, ST where write_timeout reset the connection, PH): before the
// response head 502 (a failed exchange for passive health, but for a
// stream the server left unprocessed, whose body went), after it the
// client's stream reset. A connection the engine's stop cut ends the
// stream there (KD).
func (st *h2stream) onReset(u *upH2, code h2.ErrCode, cause h2.ResetCause) {
	c := st.c
	st.u2.u, st.u2.uid = nil, 0
	st.uncount()
	st.u2.up = false // (a retry counts it again: h2Next)
	st.h2Hold()
	if u.endTerm == termKilled {
		// The engine's stop cut the connection, and the client with
		// it: neither sent again nor answered (KD).
		st.kill()
		c.flush()
		return
	}
	if st.respHead && st.u2.rend {
		st.reqDone = true // (the response is all here: the request stops)
		return
	}
	if cause == h2.ResetUnprocessed && !st.respHead && st.u2.sent == 0 && st.u2.retries < 3 {
		st.u2.retries++
		u.sl.stats.h2Retried.inc()
		st.reqDone = false
		st.h2Walk(st.failed) // (a retry's: not to the servers it tried)
		c.flush()
		return
	}
	if !st.respHead && st.retryReset(cause, code) {
		c.flush()
		return
	}
	if cause == h2.ResetByServer {
		if !st.respHead && !resetOnPurpose(code) {
			st.passive(false)
		}
		if code == h2.NoError {
			code = h2.Cancel
		}
		st.x.term = termServerReset
		st.resetStream(code)
		c.flush()
		return
	}
	st.x.term = u.connTerm()
	if cause == h2.ResetStreamError {
		st.x.term = termResponse
	}
	if !st.respHead {
		if cause != h2.ResetUnprocessed {
			// (Not processed, RFC 9113 8.7: the server refused it, or
			// its GOAWAY left it out; no retry only as the body went.)
			st.passive(false)
		}
		st.respond(502)
		c.flush()
		return
	}
	if code == h2.NoError || code == h2.RefusedStream {
		code = h2.InternalError
	}
	st.resetStream(code)
	c.flush()
}

// resetOnPurpose reports whether a server's RST_STREAM with code ended the
// stream on purpose (CANCEL: a deadline passed, the work was abandoned;
// NO_ERROR), so that passive health does not count it: any client could
// eject a healthy gRPC server with short grpc-timeout values.
func resetOnPurpose(code h2.ErrCode) bool { return code == h2.Cancel || code == h2.NoError }

// onWritable goes on with the request body.
func (st *h2stream) onWritable(u *upH2) {
	if st.u2.u == u && !st.reqDone {
		st.h2SendBody()
		st.c.flush()
	}
}

// onQueue returns request body bytes its upstream's queue took.
func (st *h2stream) onQueue(u *upH2) {
	st.h2Credit()
	st.c.flush()
}
