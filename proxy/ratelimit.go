package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/internal/h1"
)

// Rate limiting (rate_limit on a listener or a route): GCRA, the generic
// cell rate algorithm, over atomic cells (see RateLimitConfig and the
// package doc).

// Rate limit keys.
const (
	// RateKeyClient gives each client address its own budget: an IPv4
	// address, or an IPv6 one's /64.
	RateKeyClient = "client"
	// RateKeyAll gives the route or listener one budget over every
	// client and loop.
	RateKeyAll = "all"
)

// Rate limit table bounds (key client).
const (
	DefaultRateTableSize = 1 << 16
	MaxRateTableSize     = 1 << 24
)

// RateLimitConfig limits the rate of a listener's or a route's requests
// (mode http) or a listener's new connections (mode tcp), as nginx's
// limit_req (nodelay), Envoy's local rate limit and HAProxy's sc rate
// do: Rate of them per Per, with bursts of up to Burst at once. Beyond
// it a request gets 429 with Retry-After, a connection is closed at once.
type RateLimitConfig struct {
	// Rate is the requests (connections) allowed per Per at the
	// steady rate, at least 1: one each Per/Rate (the emission
	// interval, at least 1ns; rounded up to whole nanoseconds, so
	// that the rate is never exceeded, and refused where that moves
	// it by more than 1%).
	Rate int `yaml:"rate" json:"rate"`
	// Per is Rate's period. Default 1s; at most 24h.
	Per Duration `yaml:"per" json:"per"`
	// Burst is how many may come at once after a pause (a client
	// that sent nothing for Burst intervals has Burst of them): the
	// bucket's size. Default Rate (Rate at once, then one each
	// interval); 1 spaces them out strictly.
	Burst int `yaml:"burst" json:"burst"`
	// Key is whose budget a request spends: RateKeyClient (default:
	// the client connection's address, or from a proxy in the
	// listener's trusted_proxies the X-Forwarded-For address nearest
	// the end that trusted_proxies does not list; an IPv6 one's /64)
	// or RateKeyAll (one budget).
	Key string `yaml:"key" json:"key"`
	// TableSize (key client) is the number of budgets (8-byte cells)
	// the clients' addresses are hashed to: a power of two from 2 to
	// MaxRateTableSize, default DefaultRateTableSize (512 KiB).
	TableSize int `yaml:"table_size,omitempty" json:"table_size,omitempty"`
}

// setDefaults fills in r's defaults; nil is none. Any goroutine.
func (r *RateLimitConfig) setDefaults() {
	if r == nil {
		return
	}
	setDuration(&r.Per, time.Second)
	if r.Burst == 0 {
		r.Burst = r.Rate
	}
	if r.Key == "" {
		r.Key = RateKeyClient
	}
	if r.Key == RateKeyClient && r.TableSize == 0 {
		r.TableSize = DefaultRateTableSize
	}
}

// validate checks r (nil: none); the error begins with "rate_limit.".
func (r *RateLimitConfig) validate() error {
	if r == nil {
		return nil
	}
	err := func() error {
		switch {
		case r.Rate < 1:
			return fmt.Errorf("rate: %d below 1", r.Rate)
		case r.Per <= 0:
			return fmt.Errorf("per: %v is not positive", time.Duration(r.Per))
		case time.Duration(r.Per) > 24*time.Hour:
			return fmt.Errorf("per: %v longer than 24h", time.Duration(r.Per))
		case int64(r.Per)/int64(r.Rate) < 1:
			return fmt.Errorf("rate: %d per %v: more than one a nanosecond", r.Rate, time.Duration(r.Per))
		case int64(r.Per)%int64(r.Rate) != 0 && int64(r.Per)/int64(r.Rate) < 100:
			// (Rounded up, an interval of 100ns or more is at most 1%
			// longer.)
			return fmt.Errorf("rate: %d per %v: an interval of %.3fns is not whole nanoseconds to within 1%%", r.Rate, time.Duration(r.Per), float64(r.Per)/float64(r.Rate))
		case r.Burst < 1:
			return fmt.Errorf("burst: %d below 1", r.Burst)
		case int64(r.Burst) > math.MaxInt64/4/r.interval():
			return fmt.Errorf("burst: %d intervals of %v are past an int64 of nanoseconds", r.Burst, time.Duration(r.interval()))
		}
		switch r.Key {
		case RateKeyClient:
			if n := r.TableSize; n < 2 || n > MaxRateTableSize || n&(n-1) != 0 {
				return fmt.Errorf("table_size: %d is not a power of two from 2 to %d", n, MaxRateTableSize)
			}
		case RateKeyAll:
			if r.TableSize != 0 {
				return fmt.Errorf("table_size: only with key %s", RateKeyClient)
			}
		default:
			return fmt.Errorf("key: unknown %q (want %q or %q)", r.Key, RateKeyClient, RateKeyAll)
		}
		return nil
	}()
	if err != nil {
		return fmt.Errorf("rate_limit.%w", err)
	}
	return nil
}

// interval is r's emission interval, Per/Rate rounded up to whole
// nanoseconds (rounded down, the limiter would let more through than
// Rate per Per).
func (r *RateLimitConfig) interval() int64 {
	return (int64(r.Per) + int64(r.Rate) - 1) / int64(r.Rate)
}

// validateRateLimits checks l's rate limits and its routes'; the error
// begins with the field's name.
func (l *ListenerConfig) validateRateLimits() error {
	if err := l.RateLimit.validate(); err != nil {
		return err
	}
	for i := range l.Routes {
		if err := l.Routes[i].RateLimit.validate(); err != nil {
			return fmt.Errorf("routes[%d].%w", i, err)
		}
	}
	return nil
}

// setRateDefaults fills in the defaults of l's rate limits and its
// routes'.
func (l *ListenerConfig) setRateDefaults() {
	l.RateLimit.setDefaults()
	for i := range l.Routes {
		l.Routes[i].RateLimit.setDefaults()
	}
}

// limiter is one rate_limit of a listener or route in one generation: its
// settings, and its budgets (a table its generations share while its key
// and size stay).
type limiter struct {
	cfg   RateLimitConfig
	t     int64 // emission interval: Per/Rate rounded up, ns
	tau   int64 // Burst intervals: how far ahead of now a budget may run
	tab   *rateTable
	clock func() int64 // Proxy.now
}

// rateTable is a rate limit's budgets and counters. Its cells hold each
// budget's theoretical arrival time (GCRA's TAT) as Proxy.now: 0 is a
// budget never spent. Written by every loop, with atomics.
type rateTable struct {
	all   bool // key all: one cell
	seed  maphash.Seed
	mask  uint64
	cells []atomic.Int64
	stats []rateStats // per loop (by engine.Loop.ID)
	low   lowering
}

// lowering counts what moved a rate table's cells back (giveBack reads
// it to bound what it gives): the times gcra brought a cell back to a
// shorter burst (a reload's), and the ns giveBack took back (counted
// before its swap, also where the swap then fails, so that it only
// grows; modulo 2^64). Written by every loop, with atomics.
type lowering struct {
	clamps atomic.Uint64
	back   atomic.Uint64
}

// lowMark is a lowering as read before an arrival's spending.
type lowMark struct{ clamps, back uint64 }

// mark reads lw. Any goroutine.
func (lw *lowering) mark() lowMark { return lowMark{lw.clamps.Load(), lw.back.Load()} }

// rateStats are one loop's decisions of a rate limit, a cache line of
// their own.
type rateStats struct {
	allowed counter
	limited counter
	_       [48]byte
}

// newLimiter makes the limiter of rc for a proxy of loops loops and
// clock (Proxy.now: monotonic, ns; any goroutine), taking over old's
// table (budgets and counters) where old (nil: none) has the same key
// and table size: a reload changes the rate and burst of the decisions
// after it, against the budgets as spent. Where the emission interval
// changes, the budgets are taken over rescaled (rateTable.rescaled): a
// budget's lead over now is the intervals it spent, which keep their
// number, not their time. Reload's goroutine (or New's).
func newLimiter(rc *RateLimitConfig, old *limiter, loops int, clock func() int64) *limiter {
	T := rc.interval()
	lm := &limiter{cfg: *rc, t: T, tau: int64(rc.Burst) * T, clock: clock}
	if old != nil && old.cfg.Key == rc.Key && old.cfg.TableSize == rc.TableSize && len(old.tab.stats) == loops {
		lm.tab = old.tab
		if old.t != T {
			lm.tab = old.tab.rescaled(clock(), old.t, T, lm.tau)
		}
		return lm
	}
	n := rc.TableSize
	if rc.Key == RateKeyAll {
		n = 1
	}
	lm.tab = &rateTable{all: rc.Key == RateKeyAll, seed: maphash.MakeSeed(), mask: uint64(n - 1),
		cells: make([]atomic.Int64, n), stats: make([]rateStats, loops)}
	return lm
}

// rescaled returns a copy of tab's budgets, of emission interval ot, for
// emission interval t and tolerance tau, as of now: a budget ahead of now
// by a lead (lead/ot intervals spent) is ahead by as many intervals of t
// (rounded up), at most tau; one not ahead (unspent) is kept. Each cell
// is scaled alone, and the scaling only grows with the lead, so a cell
// stays no lower than the budget of any client hashed to it. The
// counters are tab's, shared. Decisions on tab after its cell was read
// (on the loops, until they take the reload's limiter) are not carried
// over: looser by those. Reload's goroutine; allocates the table.
func (tab *rateTable) rescaled(now, ot, t, tau int64) *rateTable {
	nt := &rateTable{all: tab.all, seed: tab.seed, mask: tab.mask, cells: make([]atomic.Int64, len(tab.cells)), stats: tab.stats}
	for k := range tab.cells {
		v := tab.cells[k].Load()
		if v > now {
			lead := tau
			// (lead×t/ot in 128 bits: up to 24h × 24h overflows an
			// int64.)
			if hi, lo := bits.Mul64(uint64(v-now), uint64(t)); hi < uint64(ot) {
				if q, r := bits.Div64(hi, lo, uint64(ot)); q < uint64(tau) {
					if r > 0 {
						q++
					}
					lead = int64(q)
				}
			}
			v = now + lead
		}
		nt.cells[k].Store(v)
	}
	return nt
}

// allow decides a request (connection) of client a now and counts it on
// loop id: allowed, or refused with the time until one would be allowed
// (ns, positive). No lock, no allocation. Any goroutine (loop id's for
// the counters).
func (lm *limiter) allow(id int, a netip.Addr) (bool, int64) {
	x, y := lm.cells(a)
	ok, wait, _ := gcra(x, y, &lm.tab.low, lm.clock, lm.t, lm.tau)
	lm.count(id, ok)
	return ok, wait
}

// cells returns the cells of client a's budget: key all's one cell
// twice. Key client hashes a (seeded) to two cells of the table, from
// the hash's two halves, and decides on the lower (the budget less
// spent), spending both (a count-min sketch with conservative update):
// each cell is never behind any client hashed to it, so a client sharing
// its cells is only refused more, never allowed more, and that only
// where both its cells are shared with clients that spend. Any
// goroutine; no allocation.
func (lm *limiter) cells(a netip.Addr) (*atomic.Int64, *atomic.Int64) {
	tab := lm.tab
	if tab.all {
		return &tab.cells[0], &tab.cells[0]
	}
	var k [8]byte
	n := 4
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		copy(k[:], b[:])
	} else {
		b := a.As16()
		copy(k[:], b[:8]) // (its /64)
		n = 8
	}
	h := maphash.Bytes(tab.seed, k[:n])
	i, j := h&tab.mask, (h>>32)&tab.mask
	if i == j {
		j ^= 1
	}
	return &tab.cells[i], &tab.cells[j]
}

// count counts a decision on loop id. Any goroutine (loop id's).
func (lm *limiter) count(id int, ok bool) {
	if st := &lm.tab.stats[id]; ok {
		st.allowed.inc()
	} else {
		st.limited.inc()
	}
}

// gcra decides one arrival now (clock's time, read after the cells:
// never before the decision that stored what they hold) against the
// budget in cells a and b (the same cell for one budget), of emission
// interval t and tolerance tau (burst × t): the arrival is allowed where
// its theoretical arrival time, the budget's (the lower cell's) or now
// if later, plus t, is no further than tau ahead of now, and then
// stored; else it returns the time until that would be so. The decision
// is one compare-and-swap on the lower cell, from the value it was
// decided on, and is taken again where another loop's decision changed
// it meanwhile: exact over the loops, as one lock would be. The other
// cell is raised first: a decision that reads it after the swap sees the
// spending (cells only grow, but below), and where the swap then fails
// the raise stands, which only refuses more of the clients hashed there.
// A budget further ahead than tau (a reload shortened the limit) is
// first brought back to tau ahead: spent to the new burst, counted in
// lw first (giveBack). An arrival allowed returns the theoretical
// arrival time it stored (for giveBack). No lock, no allocation; any
// goroutine.
func gcra(a, b *atomic.Int64, lw *lowering, clock func() int64, t, tau int64) (ok bool, wait, tat int64) {
	for {
		va, vb := a.Load(), b.Load()
		now := clock()
		low, other := a, b
		v := va
		if vb < va {
			low, other, v = b, a, vb
		}
		if v-now > tau {
			// Further ahead than the limit lets a budget run (now is
			// read after v, so no decision under this limit stored it):
			// a reload made it shorter. Spent to it, not past it (the
			// one time a cell goes back).
			lw.clamps.Add(1)
			low.CompareAndSwap(v, now+tau)
			continue
		}
		tat := max(v, now) + t
		if tat-now > tau {
			return false, tat - tau - now, 0
		}
		if other != low {
			for o := other.Load(); o < tat && !other.CompareAndSwap(o, tat); o = other.Load() {
			}
		}
		if low.CompareAndSwap(v, tat) {
			return true, 0, tat
		}
	}
}

// gcraWait is gcra's decision of an arrival now, without storing it: 0
// where it would be allowed, else the time until it would be (ns,
// positive). Any goroutine.
func gcraWait(a, b *atomic.Int64, now, t, tau int64) int64 {
	v := min(a.Load(), b.Load())
	if v-now > tau {
		v = now + tau // (as gcra brings it back)
	}
	if tat := max(v, now) + t; tat-now > tau {
		return tat - tau - now
	}
	return 0
}

// giveBack undoes an arrival gcra allowed in cell c (key all's one cell)
// storing tat, of emission interval t, m being c's lowering (lw) read
// before it: the cell goes back by what of the interval the arrival
// added is still ahead of now, min(t, tat-now), nothing once tat has
// passed; where other give-backs took back L ns since m, by min(t,
// tat-L-now): the arrival's interval is then up to L earlier than tat
// says. It is exact where no decision stored in c since (c holds tat:
// back to max(tat-t, now), which the decisions after now read as the
// value before the arrival), and never gives more than the arrival took
// where others did, on any loop: each allowed after it, at a time up to
// now (read after c), stored its own interval on top of it (c is never
// below tat-L), and the arrival's share of c's lead over the budget
// without it is t less how far those times came after its start,
// tat-L-t or later; that share only shrinks as the arrival's
// interval passes, so it is at least min(t, tat-L-now), and c less it is
// never below the value the decisions without the arrival would have
// left (refusing more, never allowing more). Concurrent give-backs of
// arrivals at the same time add up as the arrivals did (one of an
// arrival after ours counted in L gives less: stricter). A cell brought
// back to a shorter burst since m (a reload's, gcra) is not given back:
// the budget without the arrival would have been brought back to the
// same. A give-back whose swap fails because the cell moved reads lw
// again: a lowering after the arrival's spending loaded c after it, so
// is counted in lw before it can swap. A CAS loop: no lock, no
// allocation; any goroutine.
//
// Key client's two cells are not given back: the lower's lead may be
// another client's, raised there as the upper bound of its own budget
// (conservative update), which lowering it would undercut; admit gives
// back only where another loop's decision came between its check and
// its spending (the budget is spent, refusing more).
func giveBack(c *atomic.Int64, lw *lowering, m lowMark, clock func() int64, t, tat int64) {
	var own uint64 // (counted in lw by this call's swaps that failed)
	for {
		v := c.Load()
		if lw.clamps.Load() != m.clamps {
			return // (read after v: a clamp after it fails the swap)
		}
		L := int64(lw.back.Load() - m.back - own)
		g := min(t, tat-L-clock())
		if g <= 0 {
			return
		}
		lw.back.Add(uint64(g))
		if c.CompareAndSwap(v, v-g) {
			return
		}
		own += uint64(g)
	}
}

// retrySeconds is a wait (ns) in whole seconds, rounded up: Retry-After.
func retrySeconds(wait int64) int64 {
	return (wait + int64(time.Second) - 1) / int64(time.Second)
}

// RateLimitTotals are a rate limit's decisions: requests (connections)
// allowed (a request under a listener's and a route's limit: passed
// both) and refused by it (a request refused by the other limit is not
// counted).
type RateLimitTotals struct{ Allowed, Limited uint64 }

// totals sums lm's counters over the loops. Any goroutine.
func (lm *limiter) totals() RateLimitTotals {
	var t RateLimitTotals
	for k := range lm.tab.stats {
		t.Allowed += lm.tab.stats[k].allowed.load()
		t.Limited += lm.tab.stats[k].limited.load()
	}
	return t
}

// rateTotals returns lm's totals, nil for no limit. Any goroutine.
func (lm *limiter) rateTotals() *RateLimitTotals {
	if lm == nil {
		return nil
	}
	t := lm.totals()
	return &t
}

// makeLimiters makes l's limiters (its own and its routes', by route
// index), taking over the tables of the listener of its name and mode in
// force before, if any, and of its routes by name. Reload's goroutine
// (or New's).
func (p *Proxy) makeLimiters(l *listener) {
	var o *listener
	for _, x := range p.lns {
		if x.name == l.name && x.cfg.Mode == l.cfg.Mode {
			o = x
		}
	}
	if rc := l.cfg.RateLimit; rc != nil {
		var old *limiter
		if o != nil {
			old = o.limit
		}
		l.limit = newLimiter(rc, old, len(p.loops), p.now)
	}
	for i, r := range l.cfg.Routes {
		if r.RateLimit == nil {
			continue
		}
		if l.rlimits == nil {
			l.rlimits = make([]*limiter, len(l.cfg.Routes))
		}
		var old *limiter
		if o != nil {
			for j, or := range o.cfg.Routes {
				if or.Name == r.Name && j < len(o.rlimits) {
					old = o.rlimits[j]
				}
			}
		}
		l.rlimits[i] = newLimiter(r.RateLimit, old, len(p.loops), p.now)
	}
}

// admit decides a request of client a on loop id, routed to route i
// (len(routes): the listener's pool), against the listener's limit and
// then the route's: 0 where both allow it, else the wait until both
// would (ns; the longer of the waits of the limits that would refuse it,
// the route's read without spending where the listener's refuses it:
// Retry-After). A refusal spends neither budget, as nginx's
// limit_req charges none of its zones unless all pass: both limits are
// first decided without spending, then spent in turn, the listener's
// given back (giveBack, key all) where the route's was spent by another
// loop meanwhile. The counters say what happened to the request: one
// that passes is allowed by both limits, one refused is limited by the
// limit that refused it and not counted by the other (the listener's does
// not count a request the route's refused: it did not pass). Loop
// goroutine.
func (l *listener) admit(id, i int, a netip.Addr) int64 {
	lm, rm := l.limit, (*limiter)(nil)
	if i < len(l.rlimits) {
		rm = l.rlimits[i]
	}
	if lm == nil || rm == nil {
		if lm == nil {
			lm = rm
		}
		if lm == nil {
			return 0
		}
		ok, wait := lm.allow(id, a)
		if ok {
			return 0
		}
		return wait
	}
	lx, ly := lm.cells(a)
	rx, ry := rm.cells(a)
	if wait := gcraWait(lx, ly, lm.clock(), lm.t, lm.tau); wait > 0 {
		lm.count(id, false)
		return max(wait, gcraWait(rx, ry, rm.clock(), rm.t, rm.tau))
	}
	if wait := gcraWait(rx, ry, rm.clock(), rm.t, rm.tau); wait > 0 {
		rm.count(id, false)
		return wait
	}
	m := lm.tab.low.mark()
	ok, wait, tat := gcra(lx, ly, &lm.tab.low, lm.clock, lm.t, lm.tau)
	if !ok {
		lm.count(id, false)
		return max(wait, gcraWait(rx, ry, rm.clock(), rm.t, rm.tau))
	}
	ok, wait, _ = gcra(rx, ry, &rm.tab.low, rm.clock, rm.t, rm.tau)
	rm.count(id, ok)
	if !ok {
		if lx == ly {
			giveBack(lx, &lm.tab.low, m, lm.clock, lm.t, tat)
		}
		return wait
	}
	lm.count(id, true)
	return 0
}

// byClient reports whether a request routed to route i (len(routes):
// the listener's pool) is decided by a limit of key client: where each
// limit in play has key all, no client address is read (admit's cells
// for key all read none), nor X-Forwarded-For walked for it. Loop
// goroutine.
func (l *listener) byClient(i int) bool {
	if l.limit != nil && !l.limit.tab.all {
		return true
	}
	return i < len(l.rlimits) && l.rlimits[i] != nil && !l.rlimits[i].tab.all
}

// discardBytes bounds the body of a request a rate limit refuses that is
// read and dropped to keep its connection (nginx reads any, within its
// lingering timeouts): past it the connection is closed.
const discardBytes = 64 << 10

// rateLimited decides the current request against its listener's and
// route's rate limits; over one it answers 429 with Retry-After and
// returns true. The client's connection is kept where the request asked
// to keep it, its body, if any, has a Content-Length up to discardBytes
// or is chunked (then read and dropped as it comes, within
// request_timeout: discardBody, as nginx's
// ngx_http_discard_request_body) and is not awaited with
// Expect: 100-continue (whether the client sends it is not known), and
// the client's queue is below the high-water mark (a client that sends
// requests faster than it reads their refusals is closed); else the
// response says Connection: close and the client is closed after it.
// Loop goroutine.
func (s *hsession) rateLimited() bool {
	if s.ln.limit == nil && s.ln.rlimits == nil {
		return false
	}
	r := &s.req
	var a netip.Addr
	if s.ln.byClient(s.x.route - 1) {
		a = s.hpeer // (hashKey's forwardedClient)
	}
	wait := s.ln.admit(s.ls.id, s.x.route-1, a)
	if wait == 0 {
		return false
	}
	body := r.Framing == h1.Chunked || r.Framing == h1.Length && r.ContentLength > 0
	keep := s.keep && (!body || !r.Expect100 && (r.Framing == h1.Chunked || r.ContentLength <= discardBytes)) &&
		!s.eof && !s.ls.draining && !s.retired() && s.client.QueuedMemory() < s.p.cfg.Engine.WriteHighWater
	s.respLocal = true
	s.countResp(429, true)
	s.out = appendTooMany(s.out[:0], retrySeconds(wait), s.minor, keep, s.head)
	s.client.Write(s.out)
	s.out = s.out[:0]
	s.end(429, true)
	if !keep {
		s.closeClient()
		return true
	}
	s.discard = body
	s.setPhase(phIdle)
	return true
}

// discardBody reads and drops the bytes of p that are the body of a
// request a rate limit refused (s.discard): it returns how many it took
// (all of p where the body goes on after it), and false where the client
// was closed instead (counted: discardClosed): the body malformed, or past
// discardBytes (framing counted). The body's wait is bounded by
// request_timeout from the 429 (phIdle's timeout while s.discard; past
// it the client is closed, counted, as nginx bounds a discarded body by
// lingering_time), and keepalive_timeout counts from the body's end, when
// the client is idle. Loop goroutine.
func (s *hsession) discardBody(p []byte) (int, bool) {
	n, done, err := s.reqBody.Next(p)
	if s.bodyN += int64(n); err != nil || s.bodyN > discardBytes {
		s.discard = false
		s.ln.stats[s.ls.id].discardClosed.inc()
		s.closeClient()
		return n, false
	}
	if done {
		s.discard = false
		s.setPhase(phIdle)
	}
	return n, true
}

// rateLimited decides the stream's request against its listener's and
// route's rate limits; over one it answers 429 with retry-after on the
// stream (the connection goes on) and returns true. Loop goroutine.
func (st *h2stream) rateLimited() bool {
	c := st.c
	if st.ln.limit == nil && st.ln.rlimits == nil {
		return false
	}
	var a netip.Addr
	if st.ln.byClient(st.x.route - 1) {
		a = st.hpeer // (hashKey's forwardedClient)
	}
	wait := st.ln.admit(c.ls.id, st.x.route-1, a)
	if wait == 0 {
		return false
	}
	st.retryAfter = retrySeconds(wait)
	st.respond(429)
	return true
}

var hdrRetryAfter = []byte("retry-after")

// appendTooMany appends the proxy's 429 response: Retry-After in
// seconds, a short body (none for HEAD), and Connection: close where the
// client is closed after it (keep-alive for an HTTP/1.0 client kept).
func appendTooMany(o []byte, retry int64, minor int, keep, head bool) []byte {
	body := localBody(429)
	o = append(o, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: "...)
	o = strconv.AppendInt(o, retry, 10)
	o = append(o, "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "...)
	o = strconv.AppendInt(o, int64(len(body)), 10)
	switch {
	case !keep:
		o = append(o, "\r\nConnection: close"...)
	case minor == 0:
		o = append(o, "\r\nConnection: keep-alive"...)
	}
	o = append(o, "\r\n\r\n"...)
	if !head {
		o = append(o, body...)
	}
	return o
}

// connLimited decides a new connection of mode tcp listener l on loop
// id against its rate limit: true where it is refused (counted). Called
// after max_conns took the connection's place (one it turns away spends
// nothing). Loop goroutine.
func (l *listener) connLimited(id int, a netip.Addr) bool {
	if l.limit == nil || l.http {
		return false
	}
	ok, _ := l.limit.allow(id, a)
	return !ok
}

// rateLimitTotals fills in lt's rate limit totals: the listener's and
// its routes'. Any goroutine.
func (l *listener) rateLimitTotals(lt *ListenerTotals) {
	lt.RateLimit = l.limit.rateTotals()
	for i := range lt.Routes {
		if i < len(l.rlimits) {
			lt.Routes[i].RateLimit = l.rlimits[i].rateTotals()
		}
	}
}

// writeRateLimits writes the rate limits' metrics.
func writeRateLimits(bw *bufio.Writer, t Totals, family func(name, typ, help string)) {
	family("spindle_proxy_rate_limit_decisions_total", "counter", "Requests (mode http) or connections (mode tcp) a rate_limit let pass (result=\"allowed\": a request under a listener's and a route's limit passed both) or refused (result=\"limited\": 429, or the connection closed), by listener and route (route=\"\": the listener's own); a request is limited by the limit that refused it only, not counted by the other.")
	line := func(l, r string, rt *RateLimitTotals) {
		if rt == nil {
			return
		}
		fmt.Fprintf(bw, "spindle_proxy_rate_limit_decisions_total{listener=\"%s\",route=\"%s\",result=\"allowed\"} %d\n", escape(l), escape(r), rt.Allowed)
		fmt.Fprintf(bw, "spindle_proxy_rate_limit_decisions_total{listener=\"%s\",route=\"%s\",result=\"limited\"} %d\n", escape(l), escape(r), rt.Limited)
	}
	for _, l := range t.Listeners {
		line(l.Name, "", l.RateLimit)
		for _, r := range l.Routes {
			line(l.Name, r.Name, r.RateLimit)
		}
	}
}

// forwardedClient returns the address a request of the client at peer
// spends the budget of (key client): peer, or where trusted_proxies
// lists peer (unmapped), the last address of its X-Forwarded-For values
// (in the n fields field returns, in order, each a list) that
// trusted_proxies does not list, as
// nginx's real_ip_recursive finds it; where every one is listed, the
// first; an element that is not an address (a name, "unknown", a port or
// brackets) ends the walk at the address after it. Loop goroutine; no
// allocation.
func (l *listener) forwardedClient(peer netip.Addr, n int, field func(k int) (name, value []byte)) netip.Addr {
	a := peer
	if len(l.cfg.TrustedProxies) == 0 || !l.trusts(peer) {
		return a
	}
	for k := n - 1; k >= 0; k-- {
		name, v := field(k)
		if !h1.EqualFold(name, hdrXFF) {
			continue
		}
		for len(v) > 0 {
			e := v
			if c := bytes.LastIndexByte(v, ','); c >= 0 {
				e, v = v[c+1:], v[:c]
			} else {
				v = nil
			}
			e = bytes.Trim(e, " \t")
			if len(e) == 0 {
				continue
			}
			x, ok := parseAddr(e)
			if !ok {
				return a
			}
			if a = x.Unmap(); !l.trusts(a) {
				return a
			}
		}
	}
	return a
}

// parseAddr parses an IPv4 or IPv6 address without a zone, as
// netip.ParseAddr does, allocating nothing (netip.ParseAddr takes a
// string).
func parseAddr(b []byte) (netip.Addr, bool) {
	for _, c := range b {
		switch c {
		case '.':
			var ip [4]byte
			if !parseIPv4(b, ip[:]) {
				return netip.Addr{}, false
			}
			return netip.AddrFrom4(ip), true
		case ':':
			return parseIPv6(b)
		case '%':
			return netip.Addr{}, false
		}
	}
	return netip.Addr{}, false
}

// parseIPv4 parses dotted-decimal s into ip's 4 bytes (net/netip's
// parseIPv4Fields: no leading zeros, each field 0 to 255).
func parseIPv4(s []byte, ip []byte) bool {
	val, pos, digits := 0, 0, 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			if digits == 1 && val == 0 {
				return false
			}
			val = val*10 + int(c-'0')
			digits++
			if val > 255 {
				return false
			}
		case c == '.':
			if i == 0 || i == len(s)-1 || s[i-1] == '.' || pos == 3 {
				return false
			}
			ip[pos] = byte(val)
			pos++
			val, digits = 0, 0
		default:
			return false
		}
	}
	if pos < 3 {
		return false
	}
	ip[3] = byte(val)
	return true
}

// parseIPv6 parses an IPv6 address without a zone, as net/netip's
// parseIPv6 does: hex fields of 1 to 4 digits, one "::" standing for at
// least one field of zeros, an IPv4 address in the last 4 bytes.
func parseIPv6(s []byte) (netip.Addr, bool) {
	var ip [16]byte
	ellipsis := -1
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
		if len(s) == 0 {
			return netip.IPv6Unspecified(), true
		}
	}
	i := 0
	for i < 16 {
		off, acc := 0, uint32(0)
	digits:
		for ; off < len(s); off++ {
			c := s[off]
			switch {
			case c >= '0' && c <= '9':
				acc = acc<<4 + uint32(c-'0')
			case c >= 'a' && c <= 'f':
				acc = acc<<4 + uint32(c-'a'+10)
			case c >= 'A' && c <= 'F':
				acc = acc<<4 + uint32(c-'A'+10)
			default:
				break digits
			}
			if off > 3 {
				return netip.Addr{}, false
			}
		}
		if off == 0 {
			return netip.Addr{}, false
		}
		if off < len(s) && s[off] == '.' {
			if ellipsis < 0 && i != 12 || i+4 > 16 || !parseIPv4(s, ip[i:i+4]) {
				return netip.Addr{}, false
			}
			s = nil
			i += 4
			break
		}
		ip[i], ip[i+1] = byte(acc>>8), byte(acc)
		i += 2
		s = s[off:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return netip.Addr{}, false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return netip.Addr{}, false
			}
			ellipsis = i
			s = s[1:]
			if len(s) == 0 {
				break
			}
		}
	}
	if len(s) != 0 {
		return netip.Addr{}, false
	}
	if i < 16 {
		if ellipsis < 0 {
			return netip.Addr{}, false
		}
		n := 16 - i
		for j := i - 1; j >= ellipsis; j-- {
			ip[j+n] = ip[j]
		}
		clear(ip[ellipsis : ellipsis+n])
	} else if ellipsis >= 0 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16(ip), true
}
