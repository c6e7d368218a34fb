package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// ErrNotSupported is returned where the engine cannot run (outside Linux).
var ErrNotSupported = engine.ErrNotSupported

// Options are the run-time settings that are not in the config file. A nil
// *Options means the defaults.
type Options struct {
	// Drain is how long Run waits, once its context is done, for open
	// connections to finish before resetting them. Default 10s.
	Drain time.Duration
	// Logf receives start-up messages (the engine's among them). Default
	// log.Printf.
	Logf func(format string, args ...any)
	// Resolver resolves server names in New and Reload. Default
	// net.DefaultResolver.
	Resolver *net.Resolver
}

// ResolveTimeout bounds the resolution of each server name in New and
// Reload.
const ResolveTimeout = 10 * time.Second

// DefaultDrain is the default of Options.Drain.
const DefaultDrain = 10 * time.Second

// Proxy is a running proxy (L4 and HTTP/1.1 listeners): an engine with one listener per configured
// listener, health checkers and an admin server. Its methods may be called
// from any goroutine.
type Proxy struct {
	cfg   *Config // the config New was given: its engine section is the one in force
	opt   Options
	e     *engine.Engine
	loops []*loopState // by engine.Loop.ID
	start time.Time    // the monotonic clock's origin for activity times

	// mu guards the configuration in force (Reload replaces it) for
	// the readers off the loops, and Run's state. The loops take no lock:
	// each has its own copy of what it reads (loopState.apply).
	mu       sync.RWMutex
	cur      *Config     // the config in force
	lns      []*listener // in force, in config order
	pools    []*pool     // in force, in config order
	running  bool        // Run has started the loops
	stopping bool        // Run is stopping: Reload refuses
	stopc    chan struct{}
	cctx     context.Context // parent of the health checkers' contexts (Run's)
	checks   map[*pool]*checker
	alogs    []*accessLog // the access logs of the listeners in force and of the TLS ones kept for their handshakes (a reload that changes one makes another)
	// retiredLogs are the access logs a reload retired whose writers
	// may still run (retireLogs): Run's end stops them with the others.
	retiredLogs []*accessLog
	reload      reloadState

	admin    *adminServer
	checkers sync.WaitGroup
	ran      atomic.Bool
	abort    chan struct{} // closed by Abort
	aborted  sync.Once
}

// listener is one config listener.
type listener struct {
	name  string
	cfg   ListenerConfig
	pool  *pool
	ln    *engine.Listener
	conns *atomic.Int64 // open clients, for MaxConns (bound or not: a reload may set one); shared by a listener's generations
	stats []*lnStats    // per loop (by engine.Loop.ID); shared by a listener's generations
	// refusedBase is ln's TLSHandshakesRefused when stats were made: the
	// listener's own count is what ln counted since. A socket a reload
	// keeps for a new listener (rebase) counted the old one's before: it
	// is read as the reload's commit puts the listener in force (under
	// Proxy.mu, where Totals reads the listeners), so that a refusal
	// made while the generation was being made, under the old listener,
	// is not the new one's (TestTLSRefusedBaseAtCommit). (A Totals that
	// took the listeners before the commit and reads the count after it
	// credits the old listener with a refusal made just after: a
	// reading concurrent with the reload, as of any counter.)
	refusedBase uint64
	rebase      bool

	http   bool    // mode http
	routes []route // mode http
	// tls is its socket's TLS state, shared with the listeners before
	// and after it on the socket (nil: plain); tlsCfg is what its
	// config made of it, which its generation puts in force (reload.go).
	tls    *tlsSocket
	tlsCfg *tls.Config
	// scheme is its clients' X-Forwarded-Proto: "https" over TLS, else
	// "http".
	scheme []byte
	// limit and rlimits (by route index; nil where no route has one)
	// are the rate limits (ratelimit.go), nil for none.
	limit   *limiter
	rlimits []*limiter
	alog    *accessLog
	// logJSON and logRoutes are how alog's lines are written: JSON or
	// text, and the route names by route index (the listener's pool
	// last).
	logJSON   bool
	logRoutes [][]byte
	rstats    [][]*routeStats // mode http: per loop, by route (its pool last); a route kept by a reload keeps its own
	// reqOps and respOps are request_headers and response_headers (mode
	// http; noOps for none).
	reqOps, respOps *headerOps
	// retries are the retry policies by route index, the listener's
	// last (retry.go); nil where there are none.
	retries []*retryPolicy
	// logs limits its log lines; shared by the listeners of its name
	// (a reload's).
	logs *lnLogs
}

// lnLogs are the limits of a listener's log lines, by the listener's
// name: a reload's listener takes its name's (makeGen), so that the
// limits hold over reloads, and the lines of one listener hold back
// none of another's.
type lnLogs struct {
	tls     logLimit // failed TLS handshakes (handshakeFailed)
	preface logLimit // h2 clients without the preface (prefaceFailed)
}

// tlsSocket is a TLS listener socket's state: the crypto/tls config its
// handshakes take, which a reload replaces (with the certificate files
// read again) for the handshakes that follow. The engine's config for the
// socket only asks for it (GetConfigForClient); its own session ticket
// keys, which crypto/tls uses whatever config a handshake takes, last as
// long as the socket, so that a client resumes its session across reloads.
// h2 is the HTTP/2 settings of the last listener on the socket that
// offered h2 by ALPN (put), nil before one did.
type tlsSocket struct {
	cur atomic.Pointer[tls.Config]
	h2  atomic.Pointer[h2.Config]
}

// put makes l's crypto/tls config the one the next handshakes on the
// socket take, and where l offers h2 its HTTP/2 settings the socket's
// (first: a handshake that takes l's config finds them). A listener that
// offers no h2 keeps the last ones, for a handshake that chose h2 under
// a config before it and ends once it is in force (h2Settings). Reload's
// goroutine (or New's).
func (ts *tlsSocket) put(l *listener) {
	if l.cfg.servesH2() {
		ts.h2.Store(&h2.Config{MaxConcurrentStreams: l.cfg.H2MaxConcurrentStreams, InitialWindowSize: l.cfg.H2InitialWindow})
	}
	ts.cur.Store(l.tlsCfg)
}

// h2Settings returns the HTTP/2 settings of l's clients: its own where it
// serves HTTP/2, else, for a client ALPN gave h2 under the config of a
// listener before it on the socket (a reload that took h2 off alpn came
// during its handshake), those of the last listener that offered h2
// (tlsSocket.put). Loop goroutine.
func (l *listener) h2Settings() *h2.Config {
	if !l.cfg.servesH2() && l.tls != nil {
		if c := l.tls.h2.Load(); c != nil {
			return c
		}
	}
	return &h2.Config{MaxConcurrentStreams: l.cfg.H2MaxConcurrentStreams, InitialWindowSize: l.cfg.H2InitialWindow}
}

// listenConfig returns the engine's options for the socket of t: TLS
// with handshakes bounded by its handshake_timeout, at most its
// max_handshakes in progress.
func (ts *tlsSocket) listenConfig(t *TLSConfig) *engine.ListenConfig {
	get := func(*tls.ClientHelloInfo) (*tls.Config, error) { return ts.cur.Load(), nil }
	return &engine.ListenConfig{TLS: &tls.Config{GetConfigForClient: get}, HandshakeTimeout: time.Duration(t.HandshakeTimeout), MaxHandshakes: t.MaxHandshakes}
}

// schemeHTTPS is a TLS listener's scheme (listener.scheme; a plain one's
// is schemeHTTPVal).
var schemeHTTPS = []byte("https")

// sniffsH2 reports whether a client c of l may speak HTTP/2, its first
// bytes then looked at for the client preface (sniffH2): on an h2c
// listener, or over TLS where ALPN chose h2 (RFC 9113 3.3: over TLS only
// ALPN says HTTP/2, prior knowledge being for cleartext). Loop goroutine.
func (l *listener) sniffsH2(c *engine.Conn) bool {
	if st := c.TLS(); st != nil {
		return st.NegotiatedProtocol == "h2"
	}
	return l.cfg.H2C
}

// pool is one config pool.
type pool struct {
	name      string
	cfg       PoolConfig // as configured: Reload keeps a pool whose config and servers are unchanged
	leastConn bool
	maglev    *maglev // balance hash's table (hash.go), nil for the others
	servers   []*server
	loops     []*poolLoop // by engine.Loop.ID
	health    *HealthConfig
	passive   *PassiveConfig // nil: failed connects are only counted
	shared    *poolShared    // a pool's, over reloads (by name)
	// errStatuses are the statuses passive health counts as failed
	// exchanges (passive.http_error_statuses): those of the generation in
	// force when the response comes (server.answered).
	errStatuses statusSet

	maxIdle     int           // mode http: idle connections kept per server and loop, <= 0 none
	idleTimeout time.Duration // mode http: an idle connection's life

	// Protocol h2c (h2up.go): requests go as HTTP/2 streams, at most
	// h2Streams on a connection and h2Conns connections per server and
	// loop; a connection that received nothing for pingEvery (0: never)
	// is sent a PING, and closed without its ACK within pingWait.
	h2        bool
	h2Streams int
	h2Conns   int
	pingEvery time.Duration
	pingWait  time.Duration

	// tls is the pool's client side (tls); nil for a plain pool.
	tls *upTLS
}

// poolShared is what a pool's generations (a reload that changes it makes
// another) share: passive health's gate and its count of ejections
// max_ejected_percent refused, and the limit of its log of failed TLS
// handshakes (dialFailed: a pool's lines hold back none of another's).
type poolShared struct {
	gate    atomic.Bool // held while an ejection is decided under max_ejected_percent
	refused atomic.Uint64
	q       queueShared // the queue for a slot (max_conns: maxconn.go)
	retry   []retryLoop // by engine.Loop.ID: retries' counters and budget (retry.go)
	tlsLog  logLimit    // the log of failed TLS handshakes (dialFailed)
}

// poolLoop is one loop's share of a pool, written by that loop only. A
// cache line of its own: the loops' cursors are written per connection.
type poolLoop struct {
	rr uint32 // least-conn's cursor
	// stale: a reload replaced the pool by one whose connections are
	// secured otherwise (tls); its connections are not pooled (putIdle).
	stale bool
	cur   []int // smooth weighted round-robin: each server's current weight (pickServer)
	_     [32]byte
}

// newPoolLoop returns a loop's share of a pool of n servers. A pool made
// anew (New, or a reload that changed it) starts its weighted round-robin
// afresh, and a pool it replaced keeps its own for the requests that still
// pick from it.
func newPoolLoop(n int) *poolLoop { return &poolLoop{cur: make([]int, n)} }

// server is one server of a pool. Its active health state is written by
// its checker goroutine (one per server of a pool with health checks) and
// read by the loops; its passive health state is written by any loop,
// with atomics (no lock).
type server struct {
	addr string
	// loops holds each loop's counters and idle connections for the
	// server: they follow it over reloads. By engine.Loop.ID.
	loops []*srvLoop
	down  atomic.Bool // false: up (the state without health checks)
	// checkFails and checkPasses count failed and passed health checks,
	// before the state they move; written by the checker only.
	checkFails, checkPasses atomic.Uint64

	// Passive health (with PoolConfig.Passive): fails counts consecutive
	// failed connects from every loop, errs consecutive failed HTTP
	// exchanges (with http_errors); until is the Proxy.now at which an
	// ejection ends and, in its low bit, the ejection's reason (untilOf),
	// 0 for none (or an http_errors ejection run out, until an exchange
	// succeeds); streak counts the ejections in a row (the next lasts
	// streak+1 cooldowns, up to max_cooldown), cleared by a recovery;
	// ejections counts ejections by reason (ejectConnect, ejectHTTP).
	//
	// until is one value so that a loop that ends an ejection (a
	// CompareAndSwap from what it read) ends the one whose end and reason
	// it decided on. streak is apart: it is read by eject before its
	// CompareAndSwap on until and stored after, and a recovery stores 0
	// after its own, so a store can land out of order with another loop's
	// (an ejection's streak after a recovery cleared it, or the reverse).
	// That costs one ejection's length, within cooldown and max_cooldown,
	// never whether a server is ejected, and the next recovery clears it.
	fails, errs   atomic.Int64
	until, streak atomic.Int64
	ejections     [2]atomic.Uint64
	now           func() int64 // the proxy's clock

	// conns counts the upstream connections to s over every loop (the
	// HTTP/1.1 and tcp paths: connecting, in use, idle), maxConns is its
	// cap (0: none; a reload stores it), and shared is its pool's (the
	// queue its releases wake). maxconn.go. A server a reload adds to a
	// pool that had it before, connections to it still open, shares
	// their count (reloadState.conns): they are held against its cap.
	conns    *atomic.Int64
	maxConns atomic.Int64
	shared   *poolShared
}

// Reasons for an ejection, ejections' indexes.
const (
	ejectConnect = iota // fails failed connects
	ejectHTTP           // http_errors failed exchanges
)

// untilHTTP is until's low bit: set for an ejection for failed exchanges
// (ejectHTTP), clear for failed connects.
const untilHTTP = 1

// untilOf returns until's value for an ejection for reason that ends at
// end: end rounded up to even (a nanosecond later at most), the low bit
// the reason's. Never 0 (end is past a Proxy.now, which is not negative).
func untilOf(end int64, reason int) int64 {
	u := (min(end, math.MaxInt64-1) + 1) &^ untilHTTP
	if reason == ejectHTTP {
		u |= untilHTTP
	}
	return u
}

// ejectedAt reports whether until's value u is an ejection that has not
// ended at now.
func ejectedAt(u, now int64) bool { return u != 0 && now < u&^untilHTTP }

// up reports whether s may take new connections: neither the active checks
// nor passive health mark it down. Any goroutine.
func (s *server) up() bool { return !s.down.Load() && !s.ejected() }

// ejected reports whether passive health has s down: its cooldown has not
// ended. The clock is read only while an ejection is recorded. Any
// goroutine.
func (s *server) ejected() bool {
	u := s.until.Load()
	return u != 0 && ejectedAt(u, s.now())
}

// inForce returns the generation of pl whose passive health an event of
// its server s follows: pl's latest (a reload made it since: its
// thresholds apply from the next event, and without passive health it
// ejects nothing, whatever the pool the connection or request was made
// with), where s is one of its servers, else pl (the reload removed s,
// whose state decides nothing). Any loop.
func (pl *pool) inForce(s *server) *pool {
	if np := pl.shared.q.pool.Load(); np != nil && np != pl && slices.Contains(np.servers, s) {
		return np
	}
	return pl
}

// connectFailed records a failed connect for passive health: the fails-th
// in a row ejects s (eject), once (a loop whose failure lands while s is
// ejected changes nothing but the count). After a cooldown the count still
// stands, so the next failure ejects it again. pl is the pool the connect
// was made for (its generation in force decides: inForce). Any loop.
func (s *server) connectFailed(pl *pool) {
	pl = pl.inForce(s)
	pc := pl.passive
	if pc == nil {
		return
	}
	if s.fails.Add(1) < int64(pc.Fails) {
		return
	}
	s.eject(pl, ejectConnect)
}

// connected records a successful connect for passive health: it clears the
// count of failed connects and an ejection for them that has run out (and
// its streak); an ejection for failed exchanges stands (the server
// accepts, its answers decide). A connect that succeeds while s is
// ejected for failed connects was dialed before the ejection (an ejected
// server gets no new ones): it changes nothing, so that the cooldown runs
// whole, the count stands for the first connect after it, and the next
// ejection is longer (as exchanged). Stores only where something changes,
// so that a healthy server's connects write nothing shared. pl is the
// pool the connect was made for (inForce). Any loop.
func (s *server) connected(pl *pool) {
	if pc := pl.inForce(s).passive; pc == nil {
		return
	}
	u := s.until.Load()
	if u&untilHTTP == 0 && ejectedAt(u, s.now()) {
		return
	}
	if s.fails.Load() != 0 {
		s.fails.Store(0)
	}
	if u != 0 && u&untilHTTP == 0 && s.until.CompareAndSwap(u, 0) {
		s.streak.Store(0)
	}
}

// exchanged records an HTTP exchange's outcome for passive health (with
// http_errors): a failure counts, and the http_errors-th in a row ejects s
// (eject); a success clears the count and, once an ejection has run out,
// ends it and its streak (one that succeeds while s is ejected was sent
// before: the ejection stands). Stores only where something changes. pl
// is the pool the request was sent for (inForce). Any loop.
func (s *server) exchanged(pl *pool, ok bool) { s.judged(pl.inForce(s), ok) }

// judged is exchanged with pl, the generation in force for s, found
// already. Any loop.
func (s *server) judged(pl *pool, ok bool) {
	pc := pl.passive
	if pc == nil || pc.HTTPErrors == 0 {
		return
	}
	if !ok {
		if s.errs.Add(1) >= int64(pc.HTTPErrors) {
			s.eject(pl, ejectHTTP)
		}
		return
	}
	if s.errs.Load() != 0 {
		s.errs.Store(0)
	}
	if u := s.until.Load(); u != 0 && !ejectedAt(u, s.now()) && s.until.CompareAndSwap(u, 0) {
		s.streak.Store(0)
	}
}

// answered records an HTTP exchange's final response status st for
// passive health (exchanged): a failure where st is one of the
// http_error_statuses of pl's generation in force (inForce), whose
// http_errors it counts against, not those of the pool the request was
// sent for. Any loop.
func (s *server) answered(pl *pool, st int) {
	pl = pl.inForce(s)
	s.judged(pl, !pl.errStatuses.has(st))
}

// eject ejects s, a server of pl, for reason unless it is ejected already
// or max_ejected_percent refuses: for a cooldown times its ejections in a
// row, up to max_cooldown. Under a percent below 100 the pool's count of
// servers out (outCount) and the ejection are made under the pool's gate, an
// atomic flag taken without waiting: a loop that finds it taken (another
// is ejecting a server of the pool at that moment) ejects nothing now,
// and the server's next failure, its count standing, tries again. Under
// the gate s is looked at again: another loop may have ejected it since,
// and s counted among the ejected would count a refusal. Any loop.
func (s *server) eject(pl *pool, reason int) {
	pc := pl.passive
	now := s.now()
	u := s.until.Load()
	if ejectedAt(u, now) {
		return // ejected already
	}
	if ejectStep != nil {
		ejectStep(s, ejectRead)
	}
	if pct := *pc.MaxEjectedPercent; pct < 100 {
		sh := pl.shared
		if !sh.gate.CompareAndSwap(false, true) {
			return
		}
		defer sh.gate.Store(false)
		if u = s.until.Load(); ejectedAt(u, now) {
			// Another loop ejected s since: no refusal to count.
			return
		}
		if pl.outCount(now) >= maxEjected(len(pl.servers), pct) {
			sh.refused.Add(1)
			return
		}
	}
	k := s.streak.Load() + 1
	base, top := int64(pc.Cooldown), int64(pc.MaxCooldown)
	d := top
	if k <= top/base {
		d = base * k
	}
	if s.until.CompareAndSwap(u, untilOf(now+min(d, math.MaxInt64-now), reason)) {
		if ejectStep != nil {
			ejectStep(s, ejectMade)
		}
		s.streak.Store(k)
		s.ejections[reason].Add(1)
	}
}

// ejectStep, when set (by tests), is called by eject at each stage:
// ejectRead (the server's state read, found not ejected) and ejectMade
// (the ejection recorded, before its streak and count), so that a test can
// run another loop's call in between.
var ejectStep func(s *server, stage int)

// eject's stages, for ejectStep.
const (
	ejectRead = iota
	ejectMade
)

// outCount is the number of pl's servers out at now: ejected by passive
// health or held down by the active checks. max_ejected_percent bounds
// both together, so that below 100 passive health never takes out the
// last server the checks leave up (Envoy counts only ejected hosts, its
// panic threshold covering the rest; there is none such here).
func (pl *pool) outCount(now int64) int {
	n := 0
	for _, s := range pl.servers {
		if s.down.Load() || ejectedAt(s.until.Load(), now) {
			n++
		}
	}
	return n
}

// maxEjected is the bound max_ejected_percent pct puts on a pool of n
// servers: passive health ejects one only while fewer are out (outCount).
// n*pct/100 rounded down, but at least 1 and, below 100, at most n-1 (0
// for pct 0).
func maxEjected(n, pct int) int {
	switch {
	case pct >= 100:
		return n
	case pct <= 0:
		return 0
	}
	return min(max(n*pct/100, 1), n-1)
}

// New makes a proxy from cfg: the engine, its listeners and the admin
// server's socket. It fills in cfg's defaults (SetDefaults, which
// ParseConfig has done already) and validates it; the proxy keeps cfg,
// which must not change afterwards. Nothing runs until Run. Any
// goroutine.
func New(cfg *Config, opt *Options) (*Proxy, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, start: time.Now(), abort: make(chan struct{}), stopc: make(chan struct{}), checks: map[*pool]*checker{}}
	if opt != nil {
		p.opt = *opt
	}
	if p.opt.Drain == 0 {
		p.opt.Drain = DefaultDrain
	}
	if p.opt.Logf == nil {
		p.opt.Logf = log.Printf
	}
	if p.opt.Resolver == nil {
		p.opt.Resolver = net.DefaultResolver
	}
	addrs, err := p.resolveAll(cfg)
	if err != nil {
		return nil, err
	}
	ecfg := &engine.Config{
		Backend:        engine.Backend(cfg.Engine.Backend),
		CPUs:           cfg.Engine.CPUs,
		WriteHighWater: cfg.Engine.WriteHighWater,
		// The proxy pauses the side that feeds a full queue (OnData,
		// syncRead) and resumes it on OnWritable; the full side may
		// still answer (an HTTP server's early 413 to an upload), so the
		// engine must keep reading it.
		ReadPastHighWater: true,
		WriteTimeout:      time.Duration(cfg.Engine.WriteTimeout),
		CloseTimeout:      time.Duration(cfg.Engine.CloseTimeout),
		Logf:              p.opt.Logf,
	}
	e, err := engine.New(ecfg, (*handler)(p))
	if err != nil {
		return nil, err
	}
	p.e = e
	fail := func(err error) (*Proxy, error) {
		p.Close() // never run: releases what New made
		return nil, err
	}
	for _, el := range e.Loops() {
		ls := newLoopState(el.ID())
		ls.sweepFn = func() { ls.sweepIdle(el, ls.pools, p.now()) }
		p.loops = append(p.loops, ls)
	}
	g, err := p.makeGen(cfg, addrs)
	if err != nil {
		return fail(err)
	}
	if err := p.commit(g); err != nil {
		return fail(err)
	}
	p.reload.last.Store(time.Now().UnixNano())
	if cfg.Admin.Listen != "" {
		a, err := newAdmin(p, cfg.Admin.Listen)
		if err != nil {
			return fail(fmt.Errorf("admin: %w", err))
		}
		p.admin = a
	}
	return p, nil
}

// resolve returns the address of server s (validated): its own when
// numeric, else the first its name resolves to, IPv4-mapped addresses as
// IPv4.
func (p *Proxy) resolve(s string) (netip.AddrPort, error) {
	host, ap, err := serverAddr(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if ap.Addr().IsValid() {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	addrs, err := p.opt.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if len(addrs) == 0 { // (the resolver reports no address as an error)
		return netip.AddrPort{}, fmt.Errorf("%s resolves to no address", host)
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), ap.Port()), nil
}

// Addr returns the bound address of the named listener, nil if there is
// none. Any goroutine.
func (p *Proxy) Addr(name string) net.Addr {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, l := range p.lns {
		if l.name == name {
			return l.ln.Addr()
		}
	}
	return nil
}

// AdminAddr returns the admin server's address, nil without one. Any
// goroutine.
func (p *Proxy) AdminAddr() net.Addr {
	if p.admin == nil {
		return nil
	}
	return p.admin.ln.Addr()
}

// Config returns the effective config in force (defaults filled in): New's,
// or the last one Reload applied. Do not modify it. Any goroutine.
func (p *Proxy) Config() *Config {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cur
}

// Engine returns the engine the proxy runs on. Any goroutine.
func (p *Proxy) Engine() *engine.Engine { return p.e }

// Run serves until ctx is done, then stops accepting, waits up to
// Options.Drain for open connections to finish, resets the rest (a
// tunnel's client and server each read a reset, not an end of stream,
// but for a side whose peer had ended its stream: it reads it whole) and
// returns. It returns nil after a stop by ctx (drained or not) and the
// engine's error if its loops failed. Call it once. Any goroutine.
func (p *Proxy) Run(ctx context.Context) error {
	if p.ran.Swap(true) {
		return errors.New("proxy: Run called twice")
	}
	cctx, stopChecks := context.WithCancel(context.Background())
	p.mu.Lock()
	p.running, p.cctx = true, cctx
	for _, pl := range p.pools {
		p.startCheck(pl)
	}
	p.startLogs()
	p.mu.Unlock()
	if p.admin != nil {
		go p.admin.serve()
	}
	errc := make(chan error, 1)
	go func() { errc <- p.e.Run(context.Background()) }()
	var err error
	select {
	case <-ctx.Done():
		p.stop()
		p.drainHTTP()
		dctx, cancel := context.WithTimeout(context.Background(), p.opt.Drain)
		go func() {
			select {
			case <-p.abort:
				cancel()
			case <-dctx.Done():
			}
		}()
		if p.e.Shutdown(dctx) != nil {
			p.opt.Logf("proxy: connections still open after the %v drain were closed", p.opt.Drain)
		}
		cancel()
		err = <-errc
	case err = <-errc:
		p.stop()
	}
	p.stopLogs(true) // the loops are done
	stopChecks()
	p.checkers.Wait()
	if p.admin != nil {
		p.admin.close()
	}
	return err
}

// drainHTTP starts the HTTP listeners' drain on every loop
// (loopState.drainHTTP). Any goroutine.
func (p *Proxy) drainHTTP() {
	for i, el := range p.e.Loops() {
		ls := p.loops[i]
		el.Post(ls.drainHTTP)
	}
}

// Abort cuts Run's drain short: the connections still open are closed at
// once (before the drain, as soon as it starts), as a second SIGINT or
// SIGTERM does to `spindle proxy`. It does not stop Run by itself: Run's
// context does. Any goroutine.
func (p *Proxy) Abort() { p.aborted.Do(func() { close(p.abort) }) }

// Close releases a proxy that was never run: its engine, listener sockets
// and admin socket (Run releases them itself when it returns). After Run
// it returns an error: end Run's context instead. Any goroutine.
func (p *Proxy) Close() error {
	if p.ran.Swap(true) {
		return errors.New("proxy: Close after Run: end Run's context to stop it")
	}
	err := p.e.Shutdown(context.Background())
	p.stopLogs(false)
	if p.admin != nil {
		p.admin.close()
	}
	return err
}

// Run makes a proxy from cfg and runs it until ctx is done. Any goroutine.
func Run(ctx context.Context, cfg *Config, opt *Options) error {
	p, err := New(cfg, opt)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// now is the time since the proxy was made, on the monotonic clock.
func (p *Proxy) now() int64 { return int64(time.Since(p.start)) }

// deadline returns the Proxy.now at plus the timeout d (neither
// negative), saturated at math.MaxInt64, as the engine's timers are: a
// timeout up to Duration's largest (2562047h) is a deadline that never
// comes, later than every other, not one wrapped past an int64 into the
// past, which timed out at once where compared with now, and, where a
// timer was armed for it, kept every earlier deadline from re-arming it
// (TestMaxConnsQueueTimeoutLongest, TestTimeoutsLongest).
func deadline(at int64, d time.Duration) int64 { return at + min(int64(d), math.MaxInt64-at) }
