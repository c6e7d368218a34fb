package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
)

// RetryConfig (mode http, a listener's or a route's: a route's replaces
// its listener's) sends a request that failed again, to another server
// of its pool, before the client sees anything of the failure, as
// Envoy's retry_policy and HAProxy's retry-on do (see the package doc).
type RetryConfig struct {
	// On lists what is retried: RetryConnectFailure (the failover over
	// the pool's servers, always on: naming it changes nothing),
	// RetryReset (the server closed or reset its connection before a
	// complete response head), RetryResponseTimeout (no response head
	// within the try's timeout: PerTryTimeout, else the listener's
	// response_timeout), RetryRefusedStream (to an h2c pool: a stream
	// the server did not process, RST_STREAM REFUSED_STREAM or above its
	// GOAWAY's last stream id, sent again whatever its method once its
	// body went, RFC 9113 8.7), and response statuses from 500 to 599,
	// each a status or a range ("503", "502-504"; "5xx" is 500-599). At
	// least one.
	On []string `yaml:"on" json:"on"`
	// Attempts is the retries after the first try, from 1 to
	// MaxRetryAttempts. Default 1.
	Attempts int `yaml:"attempts,omitempty" json:"attempts"`
	// PerTryTimeout, where shorter than the listener's response_timeout,
	// bounds each try's wait for its response head (from the request
	// head's sending, counted again while the body goes, as
	// response_timeout is): past it the try is given up (its connection
	// reset), retried where On has RetryResponseTimeout, else 504.
	// Default 0: response_timeout.
	PerTryTimeout Duration `yaml:"per_try_timeout,omitempty" json:"per_try_timeout,omitempty"`
	// Buffer bounds the request body, in bytes, kept to be sent again:
	// a request whose body passed it is not retried once sent. 0: a
	// request with a body is not retried once sent. Default
	// DefaultRetryBuffer; at most MaxRetryBuffer.
	Buffer *int64 `yaml:"buffer,omitempty" json:"buffer"`
	// Budget is the retries in flight per pool and loop, in percent of
	// the requests in flight (at least RetryBudgetFloor whatever the
	// percent): over it a failure goes to the client. From 0 to 100;
	// default DefaultRetryBudget.
	Budget *int `yaml:"budget,omitempty" json:"budget"`
}

// Retry conditions and bounds.
const (
	RetryConnectFailure  = "connect-failure"
	RetryReset           = "reset"
	RetryResponseTimeout = "response-timeout"
	RetryRefusedStream   = "refused-stream"

	MaxRetryAttempts   = 5
	DefaultRetryBuffer = 64 << 10
	MaxRetryBuffer     = 16 << 20
	DefaultRetryBudget = 20
	// RetryBudgetFloor is the retries in flight a pool's loop may have
	// whatever its budget says, so that a quiet pool retries too.
	RetryBudgetFloor = 3
)

// maxHeldBufs and maxLoopHeldBufs bound the received buffers an
// HTTP/1.1 request, and all those of a loop over its pools, keep for
// retries: the loop's receive ring is every connection's, and a body
// trickled in small reads would otherwise hold a buffer for each few
// bytes. Past either the request is not retried once sent. The loop's
// bound is a quarter of its ring (the engine's default 512 buffers: the
// proxy leaves engine.Config.ReadBuffers as it is): the engine itself
// copies off the ring what paused connections and write queues hold
// past half of it (MaxQueuedReadBuffers), so that with retries' quarter
// a quarter is left for the loop to receive with, whatever the clients
// and servers do. A bound per pool grew with the pools: five pools of
// 128 each took the ring, and the loop read nothing more
// (TestRetryHeldBuffersLoop).
const (
	maxHeldBufs     = 16
	maxLoopHeldBufs = 512 / 4
)

// maxLoopKept bounds the request body bytes the copies kept for retries
// (retryState.kept: an HTTP/2 client's, or a request's to an h2c pool)
// hold, of all the requests of a loop over its pools: what
// maxLoopHeldBufs of the engine's default receive buffers (16 KiB) hold,
// so that the copies' memory, off the ring, is bounded per loop as the
// received buffers are, not per pool (TestRetryH2UpCapLoop). Past it a
// request is not retried once sent.
const maxLoopKept = maxLoopHeldBufs * 16 << 10

// setDefaults fills in r's defaults; nil is none. Any goroutine.
func (r *RetryConfig) setDefaults() {
	if r == nil {
		return
	}
	if r.Attempts == 0 {
		r.Attempts = 1
	}
	if r.Buffer == nil {
		r.Buffer = new(int64(DefaultRetryBuffer))
	}
	if r.Budget == nil {
		r.Budget = new(DefaultRetryBudget)
	}
}

// compile checks r (after setDefaults) and returns its policy; the error
// begins with the field's name.
func (r *RetryConfig) compile() (*retryPolicy, error) {
	if r == nil {
		return nil, nil
	}
	rp := &retryPolicy{attempts: r.Attempts, buffer: *r.Buffer, budget: *r.Budget}
	if len(r.On) == 0 {
		return nil, errors.New("retry.on: none listed")
	}
	for i, c := range r.On {
		switch {
		case c == RetryConnectFailure:
		case c == RetryReset:
			rp.reset = true
		case c == RetryResponseTimeout:
			rp.timeout = true
		case c == RetryRefusedStream:
			rp.refused = true
		case c == "5xx" || c != "" && c[0] >= '0' && c[0] <= '9' && !strings.Contains(c, ","):
			if c == "5xx" {
				c = "500-599"
			}
			rs, err := parseExpect(c)
			if err != nil {
				return nil, fmt.Errorf("retry.on[%d]: %w", i, err)
			}
			for _, sr := range rs {
				if sr.lo < 500 {
					return nil, fmt.Errorf("retry.on[%d]: %q: %d is below 500", i, c, sr.lo)
				}
				for st := sr.lo; st <= sr.hi; st++ {
					k := uint(st - 500)
					rp.statuses[k/64] |= 1 << (k % 64)
				}
			}
			rp.status = true
		default:
			return nil, fmt.Errorf("retry.on[%d]: unknown %q (want %s, %s, %s, %s, 5xx, or a status or range from 500 to 599)", i, c, RetryConnectFailure, RetryReset, RetryResponseTimeout, RetryRefusedStream)
		}
	}
	switch {
	case r.Attempts < 1 || r.Attempts > MaxRetryAttempts:
		return nil, fmt.Errorf("retry.attempts: %d is not from 1 to %d", r.Attempts, MaxRetryAttempts)
	case *r.Buffer < 0 || *r.Buffer > MaxRetryBuffer:
		return nil, fmt.Errorf("retry.buffer: %d is not from 0 to %d", *r.Buffer, MaxRetryBuffer)
	case *r.Budget < 0 || *r.Budget > 100:
		return nil, fmt.Errorf("retry.budget: %d is not from 0 to 100", *r.Budget)
	case r.PerTryTimeout < 0:
		return nil, fmt.Errorf("retry.per_try_timeout: negative %v", time.Duration(r.PerTryTimeout))
	}
	rp.perTry = time.Duration(r.PerTryTimeout)
	return rp, nil
}

// setRetryDefaults fills in the defaults of l's retry policies and its
// routes'.
func (l *ListenerConfig) setRetryDefaults() {
	l.Retry.setDefaults()
	for i := range l.Routes {
		l.Routes[i].Retry.setDefaults()
	}
}

// validateRetries checks the retry policies: only in mode http, each as
// compile does.
func (c *Config) validateRetries() error {
	for i, l := range c.Listeners {
		where := fmt.Sprintf("listeners[%d] (%s)", i, l.Name)
		if l.Mode != ModeHTTP {
			if l.Retry != nil || slices.ContainsFunc(l.Routes, func(r RouteConfig) bool { return r.Retry != nil }) {
				return fmt.Errorf("%s.retry: only in mode %s", where, ModeHTTP)
			}
			continue
		}
		if _, err := l.Retry.compile(); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
		for j, r := range l.Routes {
			if _, err := r.Retry.compile(); err != nil {
				return fmt.Errorf("%s.routes[%d].%w", where, j, err)
			}
		}
	}
	return nil
}

// retryPolicy is a compiled RetryConfig.
type retryPolicy struct {
	reset    bool // retry on a close or reset before a complete response head
	timeout  bool // retry on no response head within the try's timeout
	refused  bool // retry a stream an h2c server did not process, any method
	perTry   time.Duration
	status   bool      // statuses lists some
	statuses statusSet // retry on these response statuses
	attempts int
	buffer   int64
	budget   int
}

// compileRetries returns l's retry policies by route index, the
// listener's own last (nil for none; a route without one takes the
// listener's). Nil where none has one.
func (ln *listener) compileRetries() []*retryPolicy {
	l := &ln.cfg
	own, _ := l.Retry.compile() // (validated)
	var rps []*retryPolicy
	for i := range l.Routes {
		rp, _ := l.Routes[i].Retry.compile()
		if rp == nil {
			rp = own
		}
		if rp != nil && rps == nil {
			rps = make([]*retryPolicy, len(l.Routes)+1)
		}
		if rps != nil {
			rps[i] = rp
		}
	}
	if own != nil && rps == nil {
		rps = make([]*retryPolicy, len(l.Routes)+1)
		for i := range rps {
			rps[i] = own
		}
	}
	if rps != nil {
		rps[len(l.Routes)] = own
	}
	return rps
}

// retryFor returns the retry policy of route i (len(routes): the
// listener's pool), nil for none.
func (l *listener) retryFor(i int) *retryPolicy {
	if i < 0 || i >= len(l.retries) {
		return nil
	}
	return l.retries[i]
}

// retryMethod reports the methods retried once sent: those RFC 9110
// 9.2.2 makes idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE).
func retryMethod(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// Retry reasons, the metric's label.
const (
	retryReasonReset = iota
	retryReasonStatus
	retryReasonTimeout
	retryReasonRefused
	retryReasons
)

var retryReasonNames = [retryReasons]string{"reset", "status", "response_timeout", "refused_stream"}

// retryLoop is one loop's share of a pool's retries (poolShared.retry):
// its counters, and the retries in flight its budget bounds. Written by
// that loop only.
type retryLoop struct {
	retries  [retryReasons]counter
	exceeded counter    // retries the budget refused
	inFlight gauge      // requests retried whose exchange has not ended
	buffered gauge      // request body bytes held for retries
	held     *retryHold // the loop's, over all its pools
	_        [64]byte
}

// retryHold is what one loop's requests keep for retries, over all the
// pools (loopState.retryHeld; each pool's retryLoop of the loop points to
// it). Written by that loop only; a cache line of its own.
type retryHold struct {
	bufs gauge // received buffers held (HTTP/1.1 clients): maxLoopHeldBufs
	kept gauge // request body bytes of the copies kept: maxLoopKept
	_    [48]byte
}

// newRetryLoops returns a pool's per-loop retry state for p's loops
// (newPoolShared).
func newRetryLoops(p *Proxy) []retryLoop {
	rls := make([]retryLoop, len(p.loops))
	for k := range rls {
		rls[k].held = &p.loops[k].retryHeld
	}
	return rls
}

// retryLoops returns pl's per-loop retry state, made with its shared
// state. Loop goroutine.
func (ls *loopState) retryLoop(pl *pool) *retryLoop { return &pl.shared.retry[ls.id] }

// retryAllowed reports whether a retry of pl from loop ls is within its
// budget, and counts it (retry) or its refusal; counted: the request's
// try is still counted in its server's active; again: the request is
// among the requests retried (inFlight) already, its retry adding none.
// Loop goroutine.
func (ls *loopState) retryAllowed(pl *pool, rp *retryPolicy, reason int, counted, again bool) bool {
	rl := ls.retryLoop(pl)
	// Requests in flight: the pool's upstream connections (streams, to
	// an h2c pool) in use or connecting from this loop, this one's among
	// them, or this one where its try was let go of (its stream reset).
	var active int64
	if !counted {
		active = 1
	}
	for i := range pl.servers {
		active += ls.stats(pl, i).active.load()
	}
	n := rl.inFlight.load()
	if again {
		n-- // (itself: the bound is on the others)
	}
	if n >= max(RetryBudgetFloor, active*int64(rp.budget)/100) {
		rl.exceeded.inc()
		return false
	}
	rl.retries[reason].inc()
	return true
}

// heldBuf is a received buffer holding request body bytes b[off:off+n]
// kept to be sent again; shared where the session's pend holds it too
// (the body ended inside it: pend releases it).
type heldBuf struct {
	b      engine.Buffer
	off, n int
	shared bool
}

// retryState is a request's retry policy and what it keeps for it.
type retryState struct {
	pol     *retryPolicy // nil: none
	tries   int          // retries made
	safe    bool         // the method may be sent again
	hold    bool         // the body so far is held: the request may be sent again (unsafe: only unprocessed)
	counted *retryLoop   // the budget's inFlight counts the request
	held    []heldBuf
	heldN   int64
	kept    []byte // an HTTP/2 client's body: a copy (below)
}

// start takes a request's policy: its method and body (none, or its
// length: -1 unknown) decide whether it may be sent again once sent; to
// an h2c pool (toH2C) under refused-stream any method's may, but only
// where the server did not process it. Loop goroutine.
func (rs *retryState) start(rp *retryPolicy, method []byte, noBody bool, length int64, toH2C bool) {
	rs.pol, rs.tries = rp, 0
	if rp == nil {
		rs.hold = false
		return
	}
	rs.safe = retryMethod(method)
	rs.hold = (rs.safe || toH2C && rp.refused) && (noBody || rp.buffer > 0 && length <= rp.buffer)
}

// startH1 is start for an HTTP/1.1 request, to an HTTP/1.1 pool.
func (rs *retryState) startH1(rp *retryPolicy, r *h1.Request) { rs.startH1To(rp, r, false) }

// startH1To is start for an HTTP/1.1 request, to an h2c pool where
// toH2C.
func (rs *retryState) startH1To(rp *retryPolicy, r *h1.Request, toH2C bool) {
	length := int64(-1)
	if r.Framing == h1.Length {
		length = r.ContentLength
	}
	rs.start(rp, r.Method, r.Framing == h1.NoBody, length, toH2C)
}

// keepBody holds b[off:off+n], body bytes just sent, for a retry: while
// the body held stays within the buffer (and the buffers within
// maxHeldBufs and maxLoopHeldBufs); past it everything held is let go of
// (b too unless shared) and the request is not retried any more once
// sent. Loop goroutine.
func (s *hsession) keepBody(b engine.Buffer, off, n int, shared bool) {
	rs := &s.rt
	rl := s.ls.retryLoop(s.pool)
	if rs.heldN+int64(n) > rs.pol.buffer || len(rs.held) >= maxHeldBufs || rl.held.bufs.load() >= maxLoopHeldBufs || n == 0 {
		if n > 0 {
			s.releaseHeld()
			rs.hold = false
		}
		if !shared {
			b.Release()
		}
		return
	}
	rs.held = append(rs.held, heldBuf{b, off, n, shared})
	rs.heldN += int64(n)
	rl.buffered.add(int64(n))
	rl.held.bufs.inc()
}

// releaseHeld lets go of the body held for a retry. Loop goroutine.
func (s *hsession) releaseHeld() {
	rs := &s.rt
	for i, h := range rs.held {
		if !h.shared {
			h.b.Release()
		}
		rs.held[i] = heldBuf{}
	}
	if len(rs.held) > 0 {
		rl := s.ls.retryLoop(s.pool)
		rl.buffered.add(-rs.heldN)
		rl.held.bufs.add(-int64(len(rs.held)))
		rs.held, rs.heldN = rs.held[:0], 0
	}
}

// retryDecided: a final response head came (or the exchange ended): the
// request is not sent again, and what was held for that goes, but for
// the body kept that a retry to an h2c pool is still sending again (a
// server may answer before it read the body: h1up.resend lets go of it
// once sent). Loop goroutine.
func (s *hsession) retryDecided() {
	if s.rt.pol == nil {
		return
	}
	s.releaseHeld()
	if !s.h2.resending() {
		s.rt.dropKept(s.ls.retryLoop(s.pool))
	}
	s.rt.hold = false
}

// retryEnd ends the request's retries: its body held and its count in
// the budget go. Loop goroutine.
func (s *hsession) retryEnd() {
	s.retryDecided()
	s.rt.dropKept(s.ls.retryLoop(s.pool))
	s.rt.finish()
}

// finish lets go of the request's count in the budget and its policy.
// Loop goroutine.
func (rs *retryState) finish() {
	if rl := rs.counted; rl != nil {
		rl.inFlight.dec()
		rs.counted = nil
	}
	rs.pol = nil
}

// left reports a policy with attempts left for a request whose body is
// kept whole and whose method may be sent again.
func (rs *retryState) left() bool { return rs.leftUnprocessed() && rs.safe }

// leftUnprocessed reports a policy with attempts left for a request
// whose body is kept whole, whatever its method: the server did not
// process it (refused-stream).
func (rs *retryState) leftUnprocessed() bool {
	return rs.pol != nil && rs.tries < rs.pol.attempts && rs.hold
}

// A retrier is a request's session as its retries see it: an HTTP/1.1
// client's (hsession, to an HTTP/1.1 pool, or to an h2c pool through its
// h1up) or an HTTP/2 client's stream (h2stream). What decides a retry is
// one for all (the reasons below, decideStatus, retryFailed); what
// differs is the session's own, in these methods: what a response byte
// gone to the client is, how a try is let go of, how the request goes
// again. Loop goroutine.
type retrier interface {
	// retryable reports whether nothing of a response went to the
	// client (no 1xx either) and the client is still there.
	retryable() bool
	// tryCounted reports whether the try is still counted in its
	// server's active: its upstream connection, or its stream to an h2c
	// pool, not let go of yet.
	tryCounted() bool
	// passive records the try's outcome with its server (passive
	// health).
	passive(ok bool)
	// passiveStatus records the try's final response status with its
	// server (passive health: server.answered).
	passiveStatus(st int)
	// retryDecided: a final response head came: the request is not
	// sent again, and what was kept for that goes.
	retryDecided()
	// closeUp lets go of the try's upstream connection (reset where
	// reset), or of its stream to an h2c pool.
	closeUp(reset bool)
	// retryAgain sends the request again, its try let go of.
	retryAgain()
}

// statusReason returns retryReasonStatus where rs's policy retries the
// final response status st (and attempts are left, the method may be
// sent again, its body is held), else -1.
func (rs *retryState) statusReason(st int) int {
	if rs.pol.hasStatus(st) && rs.left() {
		return retryReasonStatus
	}
	return -1
}

// timeoutReason returns retryReasonTimeout where rs's policy retries a
// try whose response head did not come within its timeout (and attempts
// are left, the method may be sent again, its body is held), else -1.
func (rs *retryState) timeoutReason() int {
	if rs.pol != nil && rs.pol.timeout && rs.left() {
		return retryReasonTimeout
	}
	return -1
}

// resetReason returns the reason a try's end before its response head
// (an h2c pool's stream reset, cause and code; an HTTP/1.1 pool's
// connection closed or reset, h2.ResetConnection) is retried for under
// rs's policy, -1 for none: a stream not processed (refused_stream); the
// connection's end, or the server's RST_STREAM but one on purpose
// (resetOnPurpose: a deadline passed), under reset. A response in error
// (h2.ResetStreamError) is not retried, as a malformed HTTP/1.1 response
// head is not. Loop goroutine.
func (rs *retryState) resetReason(cause h2.ResetCause, code h2.ErrCode) int {
	rp := rs.pol
	switch {
	case rp == nil:
	case cause == h2.ResetUnprocessed:
		if rp.refused && rs.leftUnprocessed() || rp.reset && rs.left() {
			return retryReasonRefused
		}
	case cause == h2.ResetConnection || cause == h2.ResetByServer && !resetOnPurpose(code):
		if rp.reset && rs.left() {
			return retryReasonReset
		}
	}
	return -1
}

// decide reports whether r's request (of pool pl, on loop ls), whose try
// failed for reason (-1: its policy does not retry it), is sent again:
// where nothing of a response went to the client, a server of pl is up
// and the budget allows it (counted). Loop goroutine.
func (rs *retryState) decide(r retrier, ls *loopState, pl *pool, reason int) bool {
	return reason >= 0 && r.retryable() && rs.possible(ls, pl, reason, r.tryCounted())
}

// decideStatus reports whether r's request is sent again on the final
// response status st of its try (a 1xx decides nothing): where it is,
// st is the try's outcome for passive health, and the caller lets go of
// the try and calls retryAgain; where it is not, the request is not
// sent again any more (retryDecided). Loop goroutine.
func (rs *retryState) decideStatus(r retrier, ls *loopState, pl *pool, st int) bool {
	if st < 200 {
		return false
	}
	if !rs.decide(r, ls, pl, rs.statusReason(st)) {
		r.retryDecided()
		return false
	}
	r.passiveStatus(st)
	return true
}

// retryFailed sends r's request again where decide says so after its
// try failed for reason with no response head (a reset, a timeout): the
// try counted a failure for passive health where failed, and let go of
// (reset). It reports whether it did. Loop goroutine.
func (rs *retryState) retryFailed(r retrier, ls *loopState, pl *pool, reason int, failed bool) bool {
	if !rs.decide(r, ls, pl, reason) {
		return false
	}
	if failed {
		r.passive(false)
	}
	r.closeUp(true)
	r.retryAgain()
	return true
}

// keepCopy keeps a copy of request body bytes p for a retry, counted in
// rl (the request's pool's, on its loop), and reports whether it did:
// not where the body kept would pass the policy's buffer, nor the copies
// of the loop's requests (over its pools) maxLoopKept. Loop goroutine.
func (rs *retryState) keepCopy(rl *retryLoop, p []byte) bool {
	n := int64(len(p))
	if int64(len(rs.kept))+n > rs.pol.buffer || rl.held.kept.load()+n > maxLoopKept {
		return false
	}
	rs.kept = append(rs.kept, p...)
	rl.buffered.add(n)
	rl.held.kept.add(n)
	return true
}

// dropKept lets go of the copy kept for a retry, counted in rl. Loop
// goroutine.
func (rs *retryState) dropKept(rl *retryLoop) {
	if n := int64(len(rs.kept)); n > 0 {
		rl.buffered.add(-n)
		rl.held.kept.add(-n)
	}
	rs.kept = emptied(rs.kept)
}

// retryable reports whether nothing of a response went to the client
// (no 1xx either) and the client is still there. Loop goroutine.
func (s *hsession) retryable() bool {
	return !s.interim && !s.respHead && !s.done && s.phase != phClosing && !s.upgrade
}

// tryCounted reports whether the request's try is counted in its
// server's active: its upstream connection, or its h2c stream (h1up).
// Loop goroutine.
func (s *hsession) tryCounted() bool { return s.up != nil || s.h2 != nil && s.h2.counted }

// retryStatus sends the request again where its policy retries the
// final response status just parsed (decideStatus), b[off:] what
// followed its head: the response is thrown away, and its connection
// goes back to the idle pool where the response ended in b and both
// sides keep it (a 503 with a short body mostly), else is closed (its
// body unread). It reports whether it did. Loop goroutine.
func (s *hsession) retryStatus(b engine.Buffer, off int) bool {
	r := &s.resp
	if !s.rt.decideStatus(s, s.ls, s.pool, r.Status) {
		return false
	}
	if s.ls.idleRetried(s.up, s.pool, s.srv, r, b.Len()-off, s.reqDone, s.upBP, s.p.now()) {
		s.up, s.upBP = nil, false
	} else {
		s.closeUp(false)
	}
	s.retryAgain()
	return true
}

// idleRetried gives up, the connection to server srv of pl whose
// response r (rest: the bytes that followed its head in its read) is
// retried, back to the idle pool where that response ended in the read
// (a 503 with a short body mostly; nothing may follow: bytes nobody
// asked for close it), both sides keep the connection and the request
// went whole (reqDone), its reading resumed where paused. It reports
// whether it did (up is no longer the try's, nor counted in its
// server's active), else the caller closes up. Loop goroutine.
func (ls *loopState) idleRetried(up *engine.Conn, pl *pool, srv int, r *h1.Response, rest int, reqDone, paused bool, now int64) bool {
	ended := r.Framing == h1.NoBody && rest == 0 || r.Framing == h1.Length && r.ContentLength == int64(rest)
	if !ended || !r.KeepAlive || !reqDone || ls.draining {
		return false
	}
	ls.stats(pl, srv).active.dec()
	if paused {
		up.ResumeRead()
	}
	if !ls.putIdle(up, pl, srv, now) {
		up.SetContext(nil)
		up.Close()
		pl.servers[srv].release(ls.id)
	}
	return true
}

// hasStatus reports a status rp retries; nil retries none.
func (rp *retryPolicy) hasStatus(st int) bool { return rp != nil && rp.status && rp.statuses.has(st) }

// retryReset sends the request again where its policy retries its try's
// end before a complete response head (resetReason: an HTTP/1.1 pool's
// connection closed or reset, h2.ResetConnection; an h2c pool's stream
// reset); it reports whether it did. Loop goroutine.
func (s *hsession) retryReset(cause h2.ResetCause, code h2.ErrCode) bool {
	reason := s.rt.resetReason(cause, code)
	return s.rt.retryFailed(s, s.ls, s.pool, reason, reason == retryReasonReset)
}

// waitTimeout is the timeout of phWait: per_try_timeout before the
// response head, where the policy has a shorter one, else
// response_timeout. Loop goroutine.
func (s *hsession) waitTimeout() time.Duration {
	return s.rt.pol.tryTimeout(time.Duration(s.ln.cfg.ResponseTimeout), s.respHead)
}

// tryTimeout is the wait for a response (or between its reads) under
// rp, given response_timeout d: its per_try_timeout before the head
// (head false) where shorter. rp nil is none.
func (rp *retryPolicy) tryTimeout(d time.Duration, head bool) time.Duration {
	if rp != nil && !head && rp.perTry > 0 && rp.perTry < d {
		return rp.perTry
	}
	return d
}

// retryTimeout sends the request again where its policy retries a try
// whose response head did not come in time; it reports whether it did.
// Loop goroutine.
func (s *hsession) retryTimeout() bool {
	return s.rt.retryFailed(s, s.ls, s.pool, s.rt.timeoutReason(), s.timeoutFailed())
}

// timeoutFailed reports whether a try whose response head did not come
// in time is a failed exchange for passive health, retried or not: its
// request all sent (a body still on its way may be the client's stall,
// not the server's), and, to an h2c pool, no wait for room in its
// server's queue before the server had all of response_timeout
// (headWait.waited). Loop goroutine.
func (s *hsession) timeoutFailed() bool {
	return s.reqDone && (s.h2 == nil || !s.h2.on || !s.h2.waited)
}

// possible reports whether a server of pl is up to retry on and the
// budget of loop ls allows the retry (counted: retryAllowed), counting
// it. Loop goroutine.
func (rs *retryState) possible(ls *loopState, pl *pool, reason int, counted bool) bool {
	if !anyUp(pl) || !ls.retryAllowed(pl, rs.pol, reason, counted, rs.counted == ls.retryLoop(pl)) {
		return false
	}
	if rs.counted == nil {
		rs.counted = ls.retryLoop(pl)
		rs.counted.inFlight.inc()
	}
	return true
}

// anyUp reports a server of pl up.
func anyUp(pl *pool) bool {
	for _, srv := range pl.servers {
		if srv.up() {
			return true
		}
	}
	return false
}

// retryAgain sends the request again (its upstream let go of): to a
// server of the pool up that it was not sent to yet, where one is, else
// to any server up. Loop goroutine.
func (s *hsession) retryAgain() {
	s.rt.tries++
	s.x.retries++
	s.interims = 0
	s.w.since = rewait(&s.w, s.x.queued, s.p.now())
	retryWalk(s.pool, &s.dialing, s.srv)
	if s.h2 != nil && s.h2.on {
		s.h2.again()
		return
	}
	s.phase = phConnect
	if c, i := s.ls.takeFirstIdle(s.pool, s.dialing); c != nil {
		s.reuse(c, i)
		return
	}
	s.connect()
}

// rewait returns the start of a retry's wait in its pool's queue, if it
// waits, for a request whose waiter is w, that waited queued in all
// before (ns), at now: queue_timeout bounds the request's waits
// together, as it does a wait again after a failed connect, and the
// time its tries took at the servers is no wait. From its first wait,
// a request whose try took longer than queue_timeout was refused at once
// (SQ) where its retry waited, while one that had not waited before
// waited the whole of it. Loop goroutine.
func rewait(w *waiter, queued, now int64) int64 {
	if !w.began {
		return w.since
	}
	return now - queued
}

// retryWalk begins d's walk over the pool for a retry after a try on
// server srv: from the first server up after srv not tried yet for the
// request, the tried ones left out; where every server up was tried,
// over them all again from the one after srv. The balancer is not asked
// (a retry taking a turn would send the next request to the server that
// failed). A hash pool's walk (its start a table entry, not a server)
// goes on from the key's entry, the tried servers left out: to the key's
// next server, as where its server is down; where every server up was
// tried, from the key's entry again. Loop goroutine.
func retryWalk(pl *pool, d *dialing, srv int) {
	tried := d.failed
	if srv < 64 {
		tried |= 1 << srv
	}
	n := len(pl.servers)
	start := (srv + 1) % n
	found := false
	for k := range n {
		if i := (start + k) % n; pl.servers[i].up() && !failedTo(tried, i) {
			start, found = i, true
			break
		}
	}
	if !found {
		tried = 0
	}
	if pl.maglev != nil {
		start = d.start
	}
	*d = dialing{start: start, failed: tried}
}

// resendHeld writes the body held to up after the head, for a retry.
// Loop goroutine.
func (s *hsession) resendHeld() error {
	for _, h := range s.rt.held {
		if _, err := s.up.Write(h.b.Bytes()[h.off : h.off+h.n]); err != nil {
			return err
		}
	}
	if s.rt.heldN > 0 {
		s.ls.stats(s.pool, s.srv).bytesOut.addInt(int(s.rt.heldN))
	}
	return nil
}

// writeRetries writes the retry metrics of pools by name.
func writeRetries(bw *bufio.Writer, pools []*pool, family func(name, typ, help string)) {
	sum := func(pl *pool, f func(*retryLoop) int64) int64 {
		var n int64
		for k := range pl.shared.retry {
			n += f(&pl.shared.retry[k])
		}
		return n
	}
	family("spindle_proxy_pool_retries_total", "counter", "Requests sent again (retry.on) to the pool, by what the try before got: a close or reset before a complete response head (reason=\"reset\"), a status retry.on lists (reason=\"status\"), no response head in the try's timeout (reason=\"response_timeout\"), or its stream not processed by an h2c server once its body went (reason=\"refused_stream\").")
	for _, pl := range pools {
		for r, name := range retryReasonNames {
			fmt.Fprintf(bw, "spindle_proxy_pool_retries_total{pool=\"%s\",reason=\"%s\"} %d\n", escape(pl.name), name, sum(pl, func(rl *retryLoop) int64 { return int64(rl.retries[r].load()) }))
		}
	}
	family("spindle_proxy_pool_retry_budget_exceeded_total", "counter", "Retries retry.budget refused (the failure went to the client).")
	for _, pl := range pools {
		fmt.Fprintf(bw, "spindle_proxy_pool_retry_budget_exceeded_total{pool=\"%s\"} %d\n", escape(pl.name), sum(pl, func(rl *retryLoop) int64 { return int64(rl.exceeded.load()) }))
	}
	family("spindle_proxy_pool_retry_buffered_bytes", "gauge", "Request body bytes held now to be sent again (retry.buffer).")
	for _, pl := range pools {
		fmt.Fprintf(bw, "spindle_proxy_pool_retry_buffered_bytes{pool=\"%s\"} %d\n", escape(pl.name), sum(pl, func(rl *retryLoop) int64 { return rl.buffered.load() }))
	}
}

// HTTP/2 clients' streams (h2.go). internal/h2 hands a stream's DATA as
// slices of its connection's buffer, not as buffers of their own: the
// body kept for a retry is a copy (retryState.kept), within retry.buffer
// and maxLoopKept, kept by the stream (and its successors on the
// connection) for the next.

// keepBody keeps a copy of request body bytes p (framed for an HTTP/1.1
// pool), sent or to be sent, for a retry: while the body kept stays
// within the buffer and the loop's copies within maxLoopKept; past
// either what was kept goes and the request is not retried once sent.
// Loop goroutine.
func (st *h2stream) keepBody(p []byte) {
	if !st.rt.keepCopy(st.c.ls.retryLoop(st.pool), p) {
		st.retryDecided()
	}
}

// retryDecided: a final response head came (or the stream ended): the
// request is not sent again, and what was kept for that goes. Loop
// goroutine.
func (st *h2stream) retryDecided() {
	rs := &st.rt
	if rs.pol == nil {
		return
	}
	rs.dropKept(st.c.ls.retryLoop(st.pool))
	rs.hold = false
}

// retryEnd ends the stream's retries: its body kept and its count in
// the budget go. Loop goroutine.
func (st *h2stream) retryEnd() {
	st.retryDecided()
	st.rt.finish()
}

// retryable is hsession.retryable for a stream: nothing of a response
// went to the client (no interim HEADERS either), and the stream is
// open. Loop goroutine.
func (st *h2stream) retryable() bool {
	return st.interims == 0 && !st.respHead && !st.local && st.c.find(st.id) == st
}

// tryCounted is hsession.tryCounted for a stream. Loop goroutine.
func (st *h2stream) tryCounted() bool { return st.up != nil || st.u2.counted }

// retryStatus is hsession.retryStatus for a stream, rest the bytes that
// followed the response head in its read (an HTTP/1.1 pool's): its
// response thrown away, its connection back to the idle pool where the
// response ended there (idleRetried), else closed; an h2c pool's stream
// reset (its body is not read). Loop goroutine.
func (st *h2stream) retryStatus(rest int) bool {
	if !st.rt.decideStatus(st, st.c.ls, st.pool, st.resp.Status) {
		return false
	}
	switch {
	case st.u2.on:
		st.closeUp(true)
	case st.c.ls.idleRetried(st.up, st.pool, st.srv, &st.resp, rest, st.reqDone, st.paused, st.c.p.now()):
		st.up, st.paused, st.cbp = nil, false, false
	default:
		st.closeUp(false)
	}
	st.retryAgain()
	return true
}

// retryReset is hsession.retryReset for a stream. Loop goroutine.
func (st *h2stream) retryReset(cause h2.ResetCause, code h2.ErrCode) bool {
	reason := st.rt.resetReason(cause, code)
	return st.rt.retryFailed(st, st.c.ls, st.pool, reason, reason == retryReasonReset)
}

// waitTimeout is hsession.waitTimeout for a stream.
func (st *h2stream) waitTimeout() time.Duration {
	return st.rt.pol.tryTimeout(time.Duration(st.ln.cfg.ResponseTimeout), st.respHead)
}

// retryTimeout is hsession.retryTimeout for a stream. Loop goroutine.
func (st *h2stream) retryTimeout() bool {
	return st.rt.retryFailed(st, st.c.ls, st.pool, st.rt.timeoutReason(), st.timeoutFailed())
}

// timeoutFailed is hsession.timeoutFailed for a stream: no wait for
// room, in h2_response_hold or in its server's queue, before the server
// had all of response_timeout (headWait.waited). Loop goroutine.
func (st *h2stream) timeoutFailed() bool { return st.reqDone && !st.u2.waited }

// retryAgain sends the stream's request again (its upstream let go of),
// as hsession.retryAgain, with the body kept. Loop goroutine.
func (st *h2stream) retryAgain() {
	st.rt.tries++
	st.x.retries++
	st.interims = 0
	st.w.since = rewait(&st.w, st.x.queued, st.c.p.now())
	st.waiting = false
	st.reqDone = false
	if st.u2.on {
		// (The body kept is all that came: it is sent from its start.)
		st.body = append(st.body[:0], st.rt.kept...)
		st.u2.boff, st.u2.sent = 0, 0
		st.u2.headWait = headWait{} // (a new try: response_timeout from its start)
		retryWalk(st.pool, &st.dialing, st.srv)
		st.h2Next()
		return
	}
	// Not open until the next connection is: the body arriving meanwhile
	// (the retry connecting, or waiting in the queue for a slot with no
	// connection at all) is kept in body for it, not written to the one
	// let go of.
	st.upOpen = false
	st.body = append(st.body[:0], st.rt.kept...)
	retryWalk(st.pool, &st.dialing, st.srv)
	if up, i := st.c.ls.takeFirstIdle(st.pool, st.dialing); up != nil {
		st.reuse(up, i)
		return
	}
	st.connect()
}

// Retries to h2c pools (h2up_h1.go, h2up_stream.go). The request body is
// kept as a copy (retryState.kept), bounded by retry.buffer and, for all
// the requests of the loop, by maxLoopKept; an HTTP/2
// client's as it comes, an HTTP/1.1 client's as it is sent (its data, a
// chunked body's framing left out). A stream the server did not process
// (h2.ResetUnprocessed) with no body byte sent is sent again whatever
// the policy (as without one); once body bytes went, under
// refused-stream whatever its method, under reset where the method may
// be sent again.

// retryStatus sends the request again where its policy retries the final
// response status st (decideStatus): its stream is reset (again). It
// reports whether it did. Loop goroutine.
func (x *h1up) retryStatus(st int) bool {
	s := x.s
	if !s.rt.decideStatus(s, s.ls, s.pool, st) {
		return false
	}
	s.retryAgain()
	return true
}

// again is the rest of hsession.retryAgain for a request to an h2c pool:
// its stream let go of (reset), the body kept sent from its start on the
// next server's connection. Loop goroutine.
func (x *h1up) again() {
	s := x.s
	x.detach(true)
	s.reqDone, s.upOpen = false, false
	x.sent, x.ksent = 0, 0
	x.headWait = headWait{} // (a new try: response_timeout from its start)
	x.next()
	s.syncRead()
}

// keep keeps body data p, just sent, for a retry: past the buffer (or
// maxLoopKept) what was kept goes and the request is not retried once
// sent. Loop goroutine.
func (x *h1up) keep(p []byte) {
	s := x.s
	if !s.rt.keepCopy(s.ls.retryLoop(s.pool), p) {
		s.retryDecided()
		return
	}
	x.ksent += len(p)
}
