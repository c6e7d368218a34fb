package proxy

import (
	"errors"
	"strconv"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// An HTTP/1.1 client's request to an h2c pool (h1→h2, as Envoy does): its
// head goes as HEADERS (Host as :authority, names lower case, the
// hop-by-hop and framing fields dropped, content-length from a
// Content-Length body, the forwarding fields as for a server spoken to in
// HTTP/1.1, via "1.x spindle"), its body's data (a chunked body's without
// the framing) as DATA, a chunked body's trailers as trailers. The response
// goes back as an HTTP/1.1 head (with Via: 2.0 spindle): with
// Content-Length where the server sent content-length, else chunked (to an
// HTTP/1.0 client: until the close), its DATA as the body, its trailers as
// the chunked body's trailer section (dropped with Content-Length). The
// client's connection is kept alive as with an HTTP/1.1 server.

// h1up is an hsession's request to an h2c pool: the upUser of its
// upstream stream. One per session, made at its first such request and
// kept for the next (its buffers with it).
type h1up struct {
	s       *hsession
	on      bool // the current request goes to an h2c pool
	u       *upH2
	uid     uint32
	wsl     *srvLoop
	counted bool
	retries int
	req     h2.Request
	hb      []byte
	fields  []hpack.Field
	sent    int64  // request body bytes sent upstream
	ksent   int    // of s.rt.kept (the body kept for a retry), the bytes this try sent
	bodyEnd int    // pend's end of the data span NextSpan found, not yet all sent
	hasBody bool   // pend[poff:bodyEnd] is body data to send
	done    bool   // reqBody's end was seen (all of it checked)
	trl     []byte // the chunked request body's trailer section
	tb      []byte // its fields' bytes
	chunked bool   // the response goes chunked to the client
	empty   bool   // the response has no content, which its head must say (Content-Length: 0)
	respN   int64  // response body bytes passed on
	owe     int    // response bytes written to the client, not yet Consumed upstream
	bp      bool   // owe waits for the client's queue to drain
	rfs     []hpack.Field
	headWait
}

var (
	valAsterisk = []byte("*")
	valVia10    = []byte("1.0 spindle")
	valVia11    = []byte("1.1 spindle")
)

// h2Head writes the request's head for an HTTP/2 pool into s.h2.req (its
// bytes in s.h2.hb), with the route's rewrites and the request_headers
// rules; its :scheme is set by the connection it goes on (upH2.scheme),
// the client's scheme going in X-Forwarded-Proto. Loop goroutine.
func (s *hsession) h2Head() {
	if s.h2 == nil {
		s.h2 = &h1up{s: s}
	}
	x := s.h2
	r := &s.req
	// An absolute-form target's path, "/" first where it is empty (RFC
	// 9112 3.2.1), its query kept (splitTarget's "/" drops it, for
	// routing); an OPTIONS with neither path nor query asks about the
	// server: "*" (RFC 9112 3.2.4, RFC 9113 8.3.1).
	path, authority := r.Target, requestHost(r)
	slash := false
	if a, p := h1.SplitTarget(r.Target); a != nil {
		path, slash = p, len(p) == 0 || p[0] == '?'
		if len(p) == 0 && string(r.Method) == "OPTIONS" {
			path, slash = valAsterisk, false
		}
	}
	client := s.client.RemoteAddr().Addr().Unmap()
	trusted := s.ln.trusts(client)
	rules, rw := s.ln.reqRules(s.x.route - 1)
	size := len(r.Method) + len(path) + 2*len(authority) + len(rw.path) + len(rw.host) + 160
	for _, h := range r.Headers {
		size += len(h.Name) + len(h.Value) + 2
	}
	hb := x.hb[:0]
	if cap(hb) < size {
		hb = make([]byte, 0, size)
	}
	fs := x.fields[:0]
	hb = append(hb, r.Method...)
	p0 := len(hb)
	switch {
	case slash && rw.path != nil:
		// (An empty path is "/", all of which path_prefix "/" matched.)
		hb = append(append(hb, rw.path...), path...)
	case slash:
		hb = append(append(hb, '/'), path...)
	default:
		hb = rw.appendPath(hb, path)
	}
	a0 := len(hb)
	hb = append(hb, authority...) // (X-Forwarded-Host's)
	e0 := len(hb)
	ua0, ue0 := a0, e0
	if rw.host != nil {
		hb = append(hb, rw.host...)
		ua0, ue0 = e0, len(hb)
	}
	xfp, xfh := false, false
	for _, h := range r.Headers {
		switch {
		case r.HopByHop(h.Name), framingField(h.Name), h1.EqualFold(h.Name, hdrHost), h1.EqualFold(h.Name, hdrXFF),
			h1.EqualFold(h.Name, hdrH2Settings), !rules.keep(h.Name), s.ln.dropUnderscored(s.ls.id, h.Name):
			continue
		case !trusted && forwardingField(h.Name):
			continue
		case h1.EqualFold(h.Name, hdrXFP):
			xfp = true
		case h1.EqualFold(h.Name, hdrXFH):
			xfh = true
		}
		n0 := len(hb)
		hb = appendLower(hb, h.Name)
		v0 := len(hb)
		hb = append(hb, h.Value...)
		fs = append(fs, hpack.Field{Name: hb[n0:v0], Value: hb[v0:]})
	}
	fs = rules.appendH2(fs)
	if r.Framing == h1.Length {
		v0 := len(hb)
		hb = strconv.AppendInt(hb, r.ContentLength, 10)
		fs = append(fs, hpack.Field{Name: hdrContentLength, Value: hb[v0:]})
	}
	x0 := len(hb)
	if trusted {
		for _, h := range r.Headers {
			if h1.EqualFold(h.Name, hdrXFF) && len(h.Value) > 0 {
				hb = append(hb, h.Value...)
				hb = append(hb, ", "...)
			}
		}
	}
	hb = client.AppendTo(hb)
	fs = append(fs, hpack.Field{Name: hdrXFFLower, Value: hb[x0:]})
	if !xfp {
		fs = append(fs, hpack.Field{Name: hdrXFPLower, Value: s.ln.scheme})
	}
	if !xfh && e0 > a0 {
		fs = append(fs, hpack.Field{Name: hdrXFHLower, Value: hb[a0:e0]})
	}
	via := valVia11
	if r.Minor == 0 {
		via = valVia10
	}
	fs = append(fs, hpack.Field{Name: hdrVia, Value: via})
	x.hb, x.fields = hb, fs
	x.req = h2.Request{Method: hb[:p0], Authority: hb[ua0:ue0], Path: hb[p0:a0], Fields: fs, ContentLength: -1} // (:scheme the connection's: onStart)
	x.on, x.retries, x.sent, x.ksent, x.hasBody = true, 0, 0, 0, false
	x.headWait = headWait{}
	s.rt.startH1To(s.rt.pol, r, true)
	x.done = r.Framing == h1.NoBody || r.Framing == h1.Length && r.ContentLength == 0
	s.reqDone, s.upOpen = false, false
	x.trl, x.chunked, x.respN, x.owe, x.bp = x.trl[:0], false, 0, 0, false
}

// h2Pick starts the request's walk over its h2c pool's servers. Loop
// goroutine.
func (x *h1up) h2Pick() { x.h2Walk(0) }

// h2Walk starts a walk over the pool's servers from the one the balance
// picks, those in failed left out (a refused stream's: the servers its
// walks failed at and its retries tried). Loop goroutine.
func (x *h1up) h2Walk(failed uint64) {
	s := x.s
	s.dialing = dialing{start: pickServer(s.ls, s.pool, s.hkey), failed: failed}
	x.next()
}

// next finds the request a connection to the next server up that its
// walk did not fail at (a retry's: tried): with none left, 502 or 503;
// a dial the stopping loop refuses ends it (KD), as h2stream.h2Next.
// Loop goroutine.
func (x *h1up) next() {
	s := x.s
	ls, pl := s.ls, s.pool
	for {
		i, ok := s.nextUp(ls, pl)
		if !ok {
			break
		}
		if failedTo(s.failed, i) {
			continue
		}
		s.srv = i
		x.counted = true
		ls.stats(pl, i).active.inc()
		x.markWait()
		// The queue it may wait in, recorded before: a stream that starts
		// at once (onStart clears it) and fails may be retried meanwhile
		// and wait in another server's queue, recorded by that call.
		x.wsl = ls.share(pl, i)
		err := ls.h2Acquire(s.p, x, pl, i, s.client, time.Duration(s.ln.cfg.ConnectTimeout))
		if err == nil {
			if x.u == nil {
				x.queued = true
				s.unring() // (waits for its stream or connection)
			}
			return
		}
		x.wsl = nil
		x.uncount()
		if errors.Is(err, engine.ErrClosed) {
			// The engine's stop refused the dial: KD, as h2stream.h2Next.
			s.kill()
			return
		}
		s.failedAt(i)
	}
	s.respond(s.exhausted(ls, s.ln, &s.x))
}

// markWait is h2stream.markWait for the request: phWait, response_timeout
// running from the try's first wait (since), per_try_timeout from now
// (TestH2UpQueueWaitCountsInResponseTimeout/http1). Loop goroutine.
func (x *h1up) markWait() {
	s := x.s
	s.phase, s.mark = phWait, s.p.now()
	x.begin(s.mark)
	if dl := x.waitDeadline(); !s.armed || dl < s.armedAt {
		s.arm(dl)
	}
}

// waitDeadline is h2stream.waitDeadline for the request, in phWait.
// Loop goroutine.
func (x *h1up) waitDeadline() int64 {
	s := x.s
	return x.until(s.mark, s.waitTimeout(), time.Duration(s.ln.cfg.ResponseTimeout), x.u != nil, s.respHead)
}

func (x *h1up) uncount() {
	if x.counted {
		x.counted = false
		x.s.ls.stats(x.s.pool, x.s.srv).active.dec()
	}
}

// onStart opens the stream on u: HEADERS, then the body the client sent.
func (x *h1up) onStart(u *upH2) {
	s := x.s
	x.wsl = nil
	reused := u.used
	x.started(reused)
	// (A body all read with a trailer section but no data, before the
	// stream started or on a retry, ends with its trailers: finish; a
	// retry's body kept goes first.)
	end := x.done && !x.hasBody && len(x.trl) == 0 && len(s.rt.kept) == 0
	x.req.Scheme = u.scheme()
	uid, err := u.cl.Request(&x.req, end)
	if err != nil {
		x.uncount()
		x.next()
		return
	}
	u.add(uid, x)
	x.u, x.uid = u, uid
	s.upOpen, s.reused = true, reused
	st := s.ls.stats(s.pool, s.srv)
	st.requests.inc()
	if reused {
		st.reusedReqs.inc()
	} else {
		st.newReqs.inc()
	}
	s.sent()
	x.markWait()
	if end {
		s.reqDone = true
	} else {
		x.body()
	}
	u.flush()
	s.syncRead()
}

// forward takes the request body's bytes in b[off:] (s.pend's, or a new
// read): validated (reqBody.Next), and sent as DATA as far as the
// stream's windows allow; the rest is held in pend, the client not read
// meanwhile. Loop goroutine.
func (x *h1up) forward(b engine.Buffer, off int) {
	s := x.s
	if !s.hasP {
		s.pend, s.poff, s.hasP = b, off, true
	}
	x.body()
}

// body sends what it can of the body bytes in pend (sendBody); what is
// left waits for a stream or a window off the loop's receive ring
// (hsession.unring). Loop goroutine.
func (x *h1up) body() {
	x.sendBody()
	x.s.unring()
}

// sendBody checks the body bytes in pend a span at a time
// (h1.Body.NextSpan: a chunked body's framing skipped, its trailer
// section kept) and sends their data. Loop goroutine.
func (x *h1up) sendBody() {
	s := x.s
	if x.u != nil && !x.resend() {
		return // (onWritable goes on)
	}
	for s.hasP && !s.reqDone {
		if x.hasBody {
			if x.u == nil {
				return // (waits for its stream: onStart)
			}
			if !x.send() {
				return
			}
			continue
		}
		p := s.pend.Bytes()[s.poff:]
		if x.done || len(p) == 0 {
			if len(p) == 0 {
				s.hasP = false
				s.pend.Release()
			}
			break
		}
		sp, err := s.reqBody.NextSpan(p)
		if err != nil {
			s.hasP = false
			s.pend.Release()
			s.abortBody(400)
			return
		}
		if m := s.ln.cfg.MaxRequestBody; m > 0 && s.req.Framing == h1.Chunked {
			// (A length over the bound was refused with the head.)
			if s.bodyN += int64(sp.Skip + sp.Len); s.bodyN > m {
				s.hasP = false
				s.pend.Release()
				s.abortBody(413)
				return
			}
		}
		s.poff += sp.Skip
		switch {
		case sp.Trailer:
			x.trl = append(x.trl, p[sp.Skip:sp.Skip+sp.Len]...)
			s.poff += sp.Len
		case sp.Len > 0:
			x.bodyEnd, x.hasBody = s.poff+sp.Len, true
		}
		x.done = sp.Done
	}
	if x.u != nil && x.done && !x.hasBody && !s.reqDone {
		x.finish()
	}
}

// bodyRead moves the request's wait for its response head on as a read
// from the client brings bytes of its body, as h2stream.h2Body: its
// response_timeout (since) and its try's timeout (mark) run from here,
// and a server it is at has all of them (waited cleared). Bytes read
// before, parsed and sent since, do not move them: a body read with the
// head while the request waited in its server's queue, sent at onStart
// (TestH2UpQueueWaitCountsInResponseTimeoutWithBody), or held by the
// server's window and sent as it opens, the server's time going on
// meanwhile (TestH2UpPerTryTimeoutNotMovedByWindow). Loop goroutine.
func (x *h1up) bodyRead() {
	if x.done {
		return // (the next request's bytes, pipelined)
	}
	s := x.s
	s.mark = s.p.now()
	x.moveOn(s.mark, x.u != nil)
}

// send sends the data span pend[poff:bodyEnd]; false where a window or an
// error stopped it.
func (x *h1up) send() bool {
	s, u := x.s, x.u
	d := s.pend.Bytes()[s.poff:x.bodyEnd]
	w, err := u.cl.WriteDataTo(x.uid, d, false, u.writev)
	if x.u != u || s.done {
		return false
	}
	s.poff += w
	x.sent += int64(w)
	if s.rt.hold && w > 0 {
		x.keep(d[:w])
	}
	if err != nil || w < len(d) {
		return false
	}
	x.hasBody = false
	return true
}

// resend sends what this try has not of the body kept for a retry (a
// retry's: all of it), before any more; false where a window or an error
// stopped it. Once all of it went, a body kept for a retry that was
// decided meanwhile (a response head came) is let go of.
func (x *h1up) resend() bool {
	s, u := x.s, x.u
	for x.ksent < len(s.rt.kept) {
		d := s.rt.kept[x.ksent:]
		w, err := u.cl.WriteDataTo(x.uid, d, false, u.writev)
		if x.u != u || s.done {
			return false
		}
		x.ksent += w
		x.sent += int64(w)
		if err != nil || w < len(d) {
			return false
		}
	}
	if !s.rt.hold && len(s.rt.kept) > 0 {
		s.rt.dropKept(s.ls.retryLoop(s.pool))
		x.ksent = 0
	}
	return true
}

// resending reports whether the request's try is still sending the body
// kept for a retry again. Loop goroutine.
func (x *h1up) resending() bool { return x != nil && x.on && x.ksent < len(x.s.rt.kept) }

// finish ends the request: the chunked body's trailers, or END_STREAM.
func (x *h1up) finish() {
	s, u := x.s, x.u
	s.reqDone = true
	if fs := x.trailers(); len(fs) > 0 {
		u.cl.WriteTrailers(x.uid, fs)
		u.flush() // (WriteDataTo writes its own; the trailers may end a read of their own)
	} else {
		u.cl.WriteDataTo(x.uid, nil, true, u.writev)
	}
}

// trailers returns the chunked request body's trailer fields, names in
// lower case, the connection-specific ones (those the head's Connection
// names among them) and those its trailerRules drop left out.
func (x *h1up) trailers() []hpack.Field {
	x.tb, x.rfs = trailerFields(x.tb, x.rfs, x.trl)
	tr := trailerRules{x.s.ln, x.s.ls.id, x.s.x.route - 1}
	x.rfs = keepTrailerFields(x.rfs, connDropped[trailerRules]{tr, x.s.trl.conn})
	return x.rfs
}

// onFailover: the server's connects failed; the next server.
func (x *h1up) onFailover() {
	x.wsl = nil
	x.uncount()
	x.s.failedAt(x.s.srv)
	x.next()
	x.s.syncRead()
}

// onResponse writes the response head to the client as HTTP/1.1.
func (x *h1up) onResponse(u *upH2, r *h2.Response, end bool) {
	s := x.s
	s.mark = s.p.now()
	x.moveOn(s.mark, true) // (an interim head: the final one's wait starts again)
	if r.Status < 200 {
		if s.interims++; s.interims > maxInterim {
			s.passive(false)
			s.x.term = termResponse
			x.detach(true)
			s.respond(502)
			return
		}
		if s.minor == 1 {
			s.interim = true
			x.writeHead(r, true)
		}
		return
	}
	if s.rt.pol != nil && x.retryStatus(r.Status) {
		return
	}
	s.respHead = true
	s.resp.Status = r.Status
	s.passiveStatus(r.Status)
	s.countResp(r.Status, false)
	noBody := end || s.head || r.Status == 204 || r.Status == 304
	x.chunked = !noBody && r.ContentLength < 0 && s.minor == 1
	// (HEADERS that end the stream, without content-length, are a
	// response with no content whatever its status; an HTTP/1.1 head
	// without framing is one read until the close, RFC 9112 6.3: it says
	// Content-Length: 0 where the client cannot know from the status or
	// the method.)
	x.empty = end && !s.head && r.Status != 204 && r.Status != 304 && r.ContentLength < 0
	// (A request body still coming does not close the client here, as it
	// does with an HTTP/1.1 server: HTTP/2 takes it after the response
	// head; only one unfinished at the response's end does: respEnd.)
	s.closeAft = !s.keep || s.eof || s.ls.draining || s.retired() || !noBody && r.ContentLength < 0 && s.minor == 0 ||
		x.unsent()
	x.writeHead(r, false)
	if end {
		x.respEnd()
	}
}

// unsent reports whether the request expected 100-continue and its
// client, given no 1xx, sent no body byte yet: with a final response it
// does not send the body (RFC 9110 10.1.1), which respEnd would not wait
// for, so the head says Connection: close.
func (x *h1up) unsent() bool {
	s := x.s
	return s.req.Expect100 && !s.interim && !x.done && x.sent == 0 && !x.hasBody && !s.hasP
}

// writeHead writes an HTTP/1.1 response head for r. A field HTTP/1.1
// does not carry as it is (h1.ValidField: internal/h2 lets control
// characters but NUL, CR and LF through in values, RFC 9113 8.2.1) is
// left out, as from a trailer section (keptH1): a strict recipient
// (internal/h1, Go's net/http) refuses the whole response with it, and a
// lax one may read otherwise.
func (x *h1up) writeHead(r *h2.Response, interim bool) {
	s := x.s
	o := append(s.ls.scratch[:0], "HTTP/1.1 "...)
	o = strconv.AppendInt(o, int64(r.Status), 10)
	o = append(o, ' ')
	o = append(o, reason(r.Status)...)
	o = append(o, "\r\n"...)
	rules := noRules // (none on a 1xx)
	if !interim {
		rules = s.ln.respRules(&s.x)
	}
	// (Content-Length goes once, written from the length internal/h2
	// read, however many content-length fields of that value came, as
	// from an HTTP/1.1 server; none on a 1xx or a 204, RFC 9110 8.6:
	// writeRespHead.)
	for _, f := range r.Fields {
		if rules.keep(f.Name) && h1.ValidField(f.Name, f.Value) && string(f.Name) != "content-length" {
			o = h1.AppendHeader(o, f.Name, f.Value)
		}
	}
	o = rules.appendH1(o)
	if !interim {
		switch {
		case x.chunked:
			o = append(o, "Transfer-Encoding: chunked\r\n"...)
		case x.empty:
			o = append(o, "Content-Length: 0\r\n"...)
		case r.ContentLength >= 0 && r.Status != 204:
			o = appendLength(o, r.ContentLength)
		}
		o = append(o, "Via: 2.0 spindle\r\n"...)
		o = s.appendConnection(o)
	}
	o = append(o, "\r\n"...)
	s.ls.scratch = o
	s.client.Write(o)
}

// onData passes response body bytes to the client (chunked where the
// head said so); they are Consumed upstream while the client's queue is
// below the high-water mark, else once it drains.
func (x *h1up) onData(u *upH2, p []byte, end bool) {
	s := x.s
	s.mark = s.p.now()
	if len(p) > 0 {
		if x.chunked {
			o := strconv.AppendInt(s.ls.scratch[:0], int64(len(p)), 16)
			o = append(o, "\r\n"...)
			s.ls.scratch = o
			s.client.Write(o)
			s.client.Write(p)
			s.client.Write(crlf)
		} else {
			s.client.Write(p)
		}
		x.respN += int64(len(p))
		x.owe += len(p)
	}
	if end {
		if x.chunked {
			s.client.Write(lastChunk)
		}
		x.respEnd()
		return
	}
	x.credit()
}

var lastChunk = []byte("0\r\n\r\n")

// reason is the reason phrase for status in a response head made from an
// HTTP/2 response (which has none): the common ones, else the proxy's
// own statuses', else none (RFC 9112 4: it may be empty).
func reason(status int) string {
	switch status {
	case 100:
		return "Continue"
	case 103:
		return "Early Hints"
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	case 204:
		return "No Content"
	case 206:
		return "Partial Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 304:
		return "Not Modified"
	case 307:
		return "Temporary Redirect"
	case 308:
		return "Permanent Redirect"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 429:
		return "Too Many Requests"
	case 500:
		return "Internal Server Error"
	}
	return statusText[status]
}

// credit returns the response bytes the client's queue took to the
// upstream's windows.
func (x *h1up) credit() {
	s := x.s
	if x.owe == 0 || x.u == nil {
		return
	}
	if s.client.QueuedMemory() >= s.p.cfg.Engine.WriteHighWater {
		if !x.bp {
			x.bp = true
			s.upBP = true
			s.closeQ = s.outstanding()
		}
		return
	}
	x.bp, s.upBP = false, false
	x.u.cl.Consumed(x.uid, x.owe)
	x.owe = 0
	x.u.flush()
}

// onTrailers ends the response: its trailers as the chunked body's
// trailer section (dropped where the body had Content-Length), but
// those its respTrailerRules drop and those HTTP/1.1 cannot carry
// (keptH1).
func (x *h1up) onTrailers(u *upH2, fields []hpack.Field) {
	s := x.s
	if x.chunked {
		tr := s.ln.respTrailerRules(&s.x)
		o := append(s.ls.scratch[:0], "0\r\n"...)
		for _, f := range fields {
			if tr.keptH1(f) {
				o = h1.AppendHeader(o, f.Name, f.Value)
			}
		}
		o = append(o, "\r\n"...)
		s.ls.scratch = o
		s.client.Write(o)
	}
	x.respEnd()
}

// respEnd ends the exchange once the response is all written: the
// upstream stream let go of (reset where the request was still going),
// and the client reads its next request or is closed.
func (x *h1up) respEnd() {
	s := x.s
	if !s.reqDone {
		s.closeAft = true // (the rest of its body is not read)
	}
	x.detach(!s.reqDone)
	s.respDone(true)
	s.syncRead()
}

// detach lets go of the upstream stream, or of the queue it waits in:
// the stream reset (CANCEL) where reset. Only respEnd lets go of it
// without, the response all here and the request whole: elsewhere the
// response is still coming, and a stream not reset there went on at the
// server, for nobody, once the response head had gone to the client
// (TestH2UpH1ClientGoneCancelsStream).
func (x *h1up) detach(reset bool) {
	s := x.s
	if sl := x.wsl; sl != nil {
		x.wsl = nil
		s.ls.unwait(x, sl)
	}
	if u := x.u; u != nil {
		uid := x.uid
		x.u, x.uid = nil, 0
		u.letGo(uid, reset)
	}
	x.uncount()
	x.bp = false
}

// onReset: the stream ended before its end: sent again where the server
// did not process it (nothing of the body sent), else 502 before the
// response head (nothing else can carry a reset to an HTTP/1.1 client), a
// reset of the client after it. The server's own reset is logged SR, and
// before the head counts as a failed exchange unless on purpose
// (resetOnPurpose), as does any other end before the head but that of a
// stream the server left unprocessed (its body went: no retry); a response
// in error is logged PH, the connection's end SD (ST where write_timeout
// reset it; one the engine's stop cut ends the exchange there, KD).
func (x *h1up) onReset(u *upH2, code h2.ErrCode, cause h2.ResetCause) {
	s := x.s
	x.u, x.uid = nil, 0
	x.uncount()
	if u.endTerm == termKilled {
		// The engine's stop cut the connection, and the client with
		// it: neither sent again nor answered (KD).
		s.kill()
		s.syncRead()
		return
	}
	if cause == h2.ResetUnprocessed && !s.respHead && x.sent == 0 && x.retries < 3 {
		x.retries++
		u.sl.stats.h2Retried.inc()
		s.reqDone = false  // (a trailer section or END_STREAM went: again)
		x.h2Walk(s.failed) // (a retry's: not to the servers it tried)
		s.syncRead()
		return
	}
	if !s.respHead && s.retryReset(cause, code) {
		return
	}
	byServer := cause == h2.ResetByServer
	switch cause {
	case h2.ResetByServer:
		s.x.term = termServerReset
	case h2.ResetStreamError:
		s.x.term = termResponse
	default:
		s.x.term = u.connTerm()
	}
	if !s.respHead {
		if !byServer && cause != h2.ResetUnprocessed || byServer && !resetOnPurpose(code) {
			// (Not one the server left unprocessed, RFC 9113 8.7: no
			// retry only as the body went.)
			s.passive(false)
		}
		s.respond(502)
		return
	}
	s.client.Reset()
	s.syncRead()
}

// onWritable goes on with the request body.
func (x *h1up) onWritable(u *upH2) {
	if x.u == u {
		x.body()
		x.s.syncRead()
	}
}

// onQueue: the upstream's queue drained: the client may be read again.
func (x *h1up) onQueue(u *upH2) { x.s.syncRead() }

// clientWritable returns the response bytes held for the client's queue.
func (x *h1up) clientWritable() {
	if x.bp {
		x.credit()
	}
}

// wantBody reports whether the session wants the client's next bytes of
// its body, nothing being held: the stream is open and the upstream's
// queue below the mark, or the try waits for its stream (room in its
// server's queue, a connection) with the body's end not read yet. A body
// that comes while the try waits is read as it comes, a buffer's worth,
// as an HTTP/2 client's is, so that its read moves the wait on from when
// it came (bodyRead), not from the stream's start at the server, the
// server having less than response_timeout
// (TestH2UpQueueWaitCountsInResponseTimeoutWithBodyLater).
func (x *h1up) wantBody() bool {
	s := x.s
	if s.hasP {
		return false
	}
	if x.u == nil {
		return !x.done
	}
	return x.u.conn.QueuedMemory() < s.p.cfg.Engine.WriteHighWater
}
