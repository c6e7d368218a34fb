package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// Reload: a new config, applied while the proxy runs. Reload builds a
// generation (makeGen) off the loops: pools and listeners as new objects,
// the servers and listener sockets it keeps taken over from the current
// ones; then it hands it to each loop (loopState.apply, by Loop.Post), which
// puts it in force for its new connections. A connection made under an
// earlier config keeps the objects it was made with (its listener, pool and
// server index), which hold each loop's share of them (pool.loops,
// server.loops, listener.stats): nothing it refers to changes under it, and
// a generation no connection holds any more is garbage.

// ErrStopped is returned by Reload once Run is stopping.
var ErrStopped = errors.New("proxy: stopped")

// reloadState is Reload's serialization and its counts for /metrics.
type reloadState struct {
	mu     sync.Mutex // held by Reload throughout
	ok     atomic.Uint64
	failed atomic.Uint64
	last   atomic.Int64 // time.Now().UnixNano() of the last config applied (New's at first)

	lnMu   sync.Mutex
	opened map[*engine.Listener]*generation // sockets opened for a generation not every loop has applied

	// retiring are the tls listeners whose sockets a reload closed while
	// handshakes accepted on them may still be in progress; Reload's
	// goroutine (or New's).
	retiring []retiringLn

	// conns are the servers' connection counts (server.conns) by pool
	// name and address: of the servers in force, and of those reloads
	// removed while connections to them are open, so that a server
	// added again takes the count its connections still go by (they
	// count against its max_conns); shared are the pools' shared states
	// by name likewise (a pool removed, while connections to its
	// servers are open, and added again takes the queue their releases
	// wake). Reload's goroutine (or New's).
	conns  map[srvKey]*atomic.Int64
	shared map[string]*poolShared
}

// srvKey names a server of a pool: its pool's name and its address.
type srvKey struct{ pool, addr string }

// connsOf returns the connection count for a server of pool at addr
// that a generation makes: the one of a server of pool at addr in force
// or removed with connections open, else a new one. Reload's goroutine
// (or New's).
func (rs *reloadState) connsOf(pool, addr string) *atomic.Int64 {
	if c := rs.conns[srvKey{pool, addr}]; c != nil {
		return c
	}
	return new(atomic.Int64)
}

// keepConns keeps the connection counts of the servers of pools (the
// generation put in force) and their shared states and, of the others,
// those with connections open. Reload's goroutine (or New's).
func (rs *reloadState) keepConns(pools []*pool) {
	m := make(map[srvKey]*atomic.Int64)
	sh := make(map[string]*poolShared)
	for _, pl := range pools {
		sh[pl.name] = pl.shared
		for _, s := range pl.servers {
			m[srvKey{pl.name, s.addr}] = s.conns
		}
	}
	for k, c := range rs.conns {
		if _, ok := m[k]; !ok && c.Load() > 0 {
			m[k] = c
			if sh[k.pool] == nil {
				sh[k.pool] = rs.shared[k.pool]
			}
		}
	}
	rs.conns, rs.shared = m, sh
}

// retiringLn is a tls listener whose socket a reload closed: the clients
// it accepted finish their handshakes within its handshake_timeout, and
// until then the generations keep it in byLn, so that such a client is
// served under it (as when no reload follows) rather than closed.
type retiringLn struct {
	l     *listener
	until int64 // Proxy.now after which none of its handshakes is left
}

// srvLoop is one loop's share of a server: its counters and its idle
// connections, written by that loop only.
type srvLoop struct {
	srv   *server // whose share it is
	stats srvStats
	idle  idleList
	tag   idleTag // its idle connections' Context: this srvLoop
	h2    h2Share // protocol h2c: its HTTP/2 connections (h2up.go)
}

// newSrvLoop returns a server's share for one loop.
func newSrvLoop() *srvLoop {
	sl := new(srvLoop)
	sl.tag.sl = sl
	return sl
}

// idleList is a server's idle pooled connections on one loop, oldest
// first; gone once a reload removed the server (none is kept any more,
// and no dial is made to it: dialing.next).
type idleList struct {
	conns []idleConn
	gone  bool
}

// checker is a running health checker of one pool.
type checker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// generation is what one config makes: the listeners and pools in force
// after it.
type generation struct {
	cfg   *Config
	lns   []*listener // in config order
	pools []*pool     // in config order
	made  []*pool     // the pools new in it, in config order
	kept  []*server   // servers of made pools taken over from the pools before
	gone  []*server   // servers of the pools before that it has not
	byLn  map[*engine.Listener]*listener
	// opened are the sockets opened for it, closed again if it is not
	// applied; closing are the earlier sockets it does not keep.
	opened, closing []*engine.Listener
	alogs           []*accessLog // access logs opened for it
	retiring        []retiringLn // the closed tls listeners it keeps in byLn
	// upTLS are the client configs (their files read again) of the TLS
	// pools it keeps, put in force by commit.
	upTLS []keptUpTLS
	// stale are the pools before whose replacements in it secure their
	// connections otherwise (tls added, removed or changed): the kept
	// servers' connections made for them are not reused (apply).
	stale []*pool
}

// keptUpTLS is a kept TLS pool's client side and its new configs.
type keptUpTLS struct {
	u      *upTLS
	cfgs   []*tls.Config
	caches map[string]tls.ClientSessionCache // the session caches cfgs take
}

// Reload applies cfg while the proxy runs (or before Run), as New would
// have made it, without cutting a transfer: it fills in cfg's defaults
// and validates it, resolves the server names again (Options.Resolver),
// and refuses a change of the engine section or admin.listen (they need a
// restart), naming the field; a refused config changes nothing. Then:
//
//   - Connections open keep the listener, pool and server they were made
//     with; new connections, and in mode http new requests on the client
//     connections open (from their next request head), follow cfg.
//   - A server kept (same pool name, same resolved address) keeps its
//     health state (active and passive), counters and idle keep-alive
//     connections (but where its pool's protocol or tls changed, or the
//     name its certificate is checked for: its host as written in servers
//     when the pool's tls has no server_name: a connection made plain, or
//     checked for another name or against other roots, is not used again,
//     the idle ones closed at once and those in use when done), as many
//     of those as its pool's max_idle keeps (a lower one closes the
//     oldest past it at once); one removed takes no new connection, its idle ones are
//     closed and those in use finish (and are then closed, not pooled); one
//     added starts up, as at New, until its pool's checks or passive health
//     say otherwise. A pool whose settings or servers changed gets its
//     health checker restarted (a kept server's consecutive pass and fail
//     counts start again; its state stands); without health checks a kept
//     server counts as up again, and without passive health its ejection
//     ends (without http_errors, an ejection for failed exchanges does).
//     Passive health's counts, ejection and its streak stand otherwise,
//     and the pool's new thresholds apply from the next event.
//   - A listener added is opened; one removed is closed (its connections
//     finish, and a client in its TLS handshake there is served under it
//     once done, for up to twice its handshake_timeout, however many
//     reloads follow); one whose listen address changed is opened on the new one
//     and the old closed (an address written another way, "localhost:80"
//     for "127.0.0.1:80", is no change). A listener whose mode changed keeps its socket
//     (no moment without one) but is a new listener: its counters start
//     again and its open connections stay in the old mode. Other listener
//     settings (pool, routes, timeouts, max_conns, upgrades) apply to new
//     connections and, in mode http, to the next requests of the open ones
//     (a request in progress finishes under the settings it began with).
//     In mode http, a client of a listener removed, moved or whose mode
//     changed is not served on under the old config (as nginx and HAProxy
//     reload): one idle is closed at once, one with a request in progress
//     after its response (Connection: close on it where its head is still
//     to go).
//   - A route's counters follow its name (a route kept keeps them). A
//     listener keeps its access log (file, writer, drops count) while its
//     access_log path stays, whatever its routes or format (lines in the
//     new format and route names follow on in the file); on a path new
//     for it a new one is opened, and the old one, which the connections
//     made before may still write to, is written out and closed once none
//     is left that could (a kept-alive client's next request goes to the
//     new one), or when Run returns. A log is opened once per listener
//     name and path while a listener has it.
//
// Reload returns once every loop has applied cfg (but a loop that left
// early, its kernel queue failed, the others serving on: it serves no
// client any more, and the listeners' sockets cfg opens have none for it)
// and the health checkers it stopped have ended, which they do at once: a check in progress is
// cut short (the checker's context is canceled; a check must end on it)
// and counts for nothing, so Reload does not wait out health.timeout.
//
// A failed Reload is counted and changes nothing (but where Run stopped
// during it). Concurrent Reloads run one after the other; Reload after Run
// has begun to stop returns ErrStopped. The config applied must not change
// afterwards. Any goroutine.
func (p *Proxy) Reload(cfg *Config) error {
	rs := &p.reload
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := p.reloadLocked(cfg); err != nil {
		rs.failed.Add(1)
		return err
	}
	rs.ok.Add(1)
	rs.last.Store(time.Now().UnixNano())
	return nil
}

func (p *Proxy) reloadLocked(cfg *Config) error {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := restartOnly(p.cfg, cfg); err != nil {
		return err
	}
	addrs, err := p.resolveAll(cfg)
	if err != nil {
		return err
	}
	p.mu.RLock()
	stopping := p.stopping
	p.mu.RUnlock()
	if stopping {
		return ErrStopped
	}
	g, err := p.makeGen(cfg, addrs)
	if err != nil {
		return err
	}
	return p.commit(g)
}

// restartOnly reports a change from old to cfg that Reload cannot apply,
// naming the field.
func restartOnly(old, cfg *Config) error {
	e, n := &old.Engine, &cfg.Engine
	for _, f := range []struct {
		name string
		same bool
	}{
		{"backend", e.Backend == n.Backend},
		{"cpus", slices.Equal(e.CPUs, n.CPUs)},
		{"write_high_water", e.WriteHighWater == n.WriteHighWater},
		{"write_timeout", e.WriteTimeout == n.WriteTimeout},
		{"close_timeout", e.CloseTimeout == n.CloseTimeout},
	} {
		if !f.same {
			return fmt.Errorf("engine.%s: changed; the engine section applies only at start (restart the proxy)", f.name)
		}
	}
	if old.Admin.Listen != cfg.Admin.Listen {
		return fmt.Errorf("admin.listen: changed from %q to %q; it applies only at start (restart the proxy)", old.Admin.Listen, cfg.Admin.Listen)
	}
	return nil
}

// resolveAll resolves the servers of cfg's pools (resolve), each pool's
// addresses in its order, and refuses a pool with two servers at one
// address.
func (p *Proxy) resolveAll(cfg *Config) ([][]string, error) {
	addrs := make([][]string, len(cfg.Pools))
	for i, pc := range cfg.Pools {
		seen := map[netip.AddrPort]int{}
		for j, sc := range pc.Servers {
			s := sc.Address
			ap, err := p.resolve(s)
			if err != nil {
				return nil, fmt.Errorf("pools[%d] (%s).servers[%d]: %q: %w", i, pc.Name, j, s, err)
			}
			if k, ok := seen[ap]; ok {
				return nil, fmt.Errorf("pools[%d] (%s).servers[%d]: %q is %v, as servers[%d] %q is", i, pc.Name, j, s, ap, k, pc.Servers[k].Address)
			}
			seen[ap] = j
			addrs[i] = append(addrs[i], ap.String())
		}
	}
	return addrs, nil
}

// makeGen makes cfg's generation from the one in force (none in New):
// pools (the same object where nothing of a pool changed), servers (kept
// by pool name and address), listeners (sockets kept by name and listen
// address, or taken over by address from a listener renamed or removed),
// and opens the sockets it needs. Reload's goroutine, rs.mu held (or New).
func (p *Proxy) makeGen(cfg *Config, addrs [][]string) (*generation, error) {
	g := &generation{cfg: cfg, byLn: map[*engine.Listener]*listener{}}
	oldPools := map[string]*pool{}
	for _, pl := range p.pools {
		oldPools[pl.name] = pl
	}
	byName := map[string]*pool{}
	kept := map[*server]bool{}
	for i, pc := range cfg.Pools {
		old := oldPools[pc.Name]
		tlsCfgs, err := pc.clientConfigs()
		if err != nil {
			return nil, fmt.Errorf("pools[%d] (%s).%w", i, pc.Name, err)
		}
		if old != nil && reflect.DeepEqual(old.cfg, pc) && slices.EqualFunc(old.servers, addrs[i], func(s *server, a string) bool { return s.addr == a }) {
			for _, s := range old.servers {
				kept[s] = true
			}
			if old.tls != nil {
				caches := keepCaches(old, tlsCfgs, old.tls)
				g.upTLS = append(g.upTLS, keptUpTLS{old.tls, tlsCfgs, caches})
			}
			g.pools = append(g.pools, old)
			byName[pc.Name] = old
			continue
		}
		pl := &pool{name: pc.Name, cfg: pc, leastConn: pc.Balance == LeastConn, health: pc.Health, passive: pc.Passive,
			maxIdle: pc.MaxIdle, idleTimeout: time.Duration(pc.IdleTimeout),
			h2: pc.isH2(), h2Streams: pc.H2MaxConcurrentStreams, h2Conns: pc.H2MaxConnections,
			pingEvery: time.Duration(pc.H2PingInterval), pingWait: time.Duration(pc.H2PingTimeout)}
		stale := false // old's connections are not to be used again
		switch {
		case old != nil:
			pl.shared = old.shared
			stale = !reflect.DeepEqual(old.cfg.TLS, pc.TLS)
		case p.reload.shared[pc.Name] != nil:
			// Removed with connections open, whose releases wake its
			// queue.
			pl.shared = p.reload.shared[pc.Name]
		default:
			pl.shared = newPoolShared(p)
		}
		if ps := pc.Passive; ps != nil && ps.HTTPErrors > 0 {
			pl.errStatuses, _ = errorStatuses(ps.HTTPErrorStatuses) // (validated)
		}
		if pc.Balance == Hash {
			pl.maglev = newMaglev(pc.Hash, pc.Servers)
		}
		for range p.loops {
			pl.loops = append(pl.loops, newPoolLoop(len(addrs[i])))
		}
		for j, a := range addrs[i] {
			var s *server
			if old != nil {
				if k := slices.IndexFunc(old.servers, func(s *server) bool { return s.addr == a }); k >= 0 {
					s = old.servers[k]
					kept[s] = true
					g.kept = append(g.kept, s)
					// Without server_name a server's certificate is checked
					// for its host as configured, which a reload may change
					// while the address stays: the connections checked for
					// the old name are not to be reused.
					stale = stale || old.tls != nil && tlsCfgs != nil && old.tlsFor(k).ServerName != tlsCfgs[j].ServerName
				}
			}
			if s == nil {
				s = &server{addr: a, now: p.now, shared: pl.shared, conns: p.reload.connsOf(pc.Name, a)}
				for range p.loops {
					sl := newSrvLoop()
					sl.srv = s
					s.loops = append(s.loops, sl)
				}
			}
			pl.servers = append(pl.servers, s)
		}
		if stale {
			g.stale = append(g.stale, old)
		}
		if tlsCfgs != nil {
			pl.tls = newUpTLS(pl, tlsCfgs, old)
			if pc.TLS.InsecureSkipVerify {
				p.opt.Logf("proxy: pool %s: tls.insecure_skip_verify: the servers' certificates are not checked; anyone on the path can read and change the connections", pc.Name)
			}
		}
		g.pools = append(g.pools, pl)
		g.made = append(g.made, pl)
		byName[pc.Name] = pl
	}
	for _, pl := range p.pools {
		for _, s := range pl.servers {
			if !kept[s] {
				g.gone = append(g.gone, s)
			}
		}
	}

	// Listeners: a socket is kept by name and listen address first (the
	// address as listenAddr reads it: "localhost:80" is "127.0.0.1:80",
	// the same listener with its counters and clients, not one moved),
	// then taken over by an equal listen address (port 0 aside).
	claimed := map[*engine.Listener]bool{}
	prev := map[*listener]*listener{} // the listener each follows (same socket and mode)
	from := map[*listener]*listener{} // the listener whose socket each keeps
	for _, lc := range cfg.Listeners {
		scheme := schemeHTTPVal
		if lc.TLS != nil {
			scheme = schemeHTTPS
		}
		g.lns = append(g.lns, &listener{name: lc.Name, cfg: lc, pool: byName[lc.Pool], http: lc.Mode == ModeHTTP, routes: compileRoutes(lc.Routes, byName),
			reqOps: compileOps(lc.RequestHeaders), respOps: compileOps(lc.ResponseHeaders), scheme: scheme})
	}
	for _, l := range g.lns {
		p.makeLimiters(l)
		l.retries = l.compileRetries()
		if k := slices.IndexFunc(p.lns, func(o *listener) bool { return o.name == l.name }); k >= 0 {
			l.logs = p.lns[k].logs
		} else {
			l.logs = new(lnLogs)
		}
	}
	for _, l := range g.lns {
		ap, _ := listenAddr(l.cfg.Listen) // (validated)
		for _, o := range p.lns {
			if oap, _ := listenAddr(o.cfg.Listen); o.name == l.name && oap == ap {
				l.ln = o.ln
				claimed[o.ln] = true
				from[l] = o
				if o.cfg.Mode == l.cfg.Mode {
					l.conns, l.stats, l.refusedBase = o.conns, o.stats, o.refusedBase
					prev[l] = o
				}
			}
		}
	}
	for _, l := range g.lns {
		if l.ln != nil {
			continue
		}
		ap, _ := listenAddr(l.cfg.Listen) // (validated)
		for _, o := range p.lns {
			if oap, _ := listenAddr(o.cfg.Listen); !claimed[o.ln] && ap.Port() != 0 && oap == ap {
				l.ln = o.ln
				claimed[o.ln] = true
				from[l] = o
				break
			}
		}
	}
	for i, l := range g.lns {
		if err := l.setTLS(i, from[l]); err != nil {
			return nil, err
		}
	}
	for _, l := range g.lns {
		if l.stats == nil {
			l.rebase = l.ln != nil // a kept socket: its refusals until the commit are another listener's
			l.conns = new(atomic.Int64)
			for range p.loops {
				l.stats = append(l.stats, new(lnStats))
			}
		}
	}
	for _, o := range p.lns {
		if !claimed[o.ln] {
			// Until its socket is closed, what it accepted goes on
			// under its old settings.
			g.byLn[o.ln] = o
			g.closing = append(g.closing, o.ln)
		}
	}
	// Sockets closed by the reloads before whose handshakes may not have
	// ended: their clients are served under the listener that accepted
	// them.
	now := p.now()
	for _, r := range p.reload.retiring {
		if now < r.until {
			g.byLn[r.l.ln] = r.l
			g.retiring = append(g.retiring, r)
		}
	}
	// lnMu from the first socket opened to pend: a loop that accepts on
	// one meanwhile waits for its generation (pending).
	var err error
	p.reload.lnMu.Lock()
	for _, l := range g.lns {
		var a *accessLog
		a, err = p.observe(l, prev[l])
		if a != nil {
			g.alogs = append(g.alogs, a)
		}
		if err == nil {
			err = p.open(g, l)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		p.pend(g)
	}
	p.reload.lnMu.Unlock()
	if err != nil {
		g.abandon(p)
		return nil, err
	}
	return g, nil
}

// setTLS sets up l's TLS, if it has any, as listeners[i] of its config:
// its crypto/tls config (the certificate files read), and its socket's
// state, o's where l keeps the socket of o (nil for none: a socket to
// open). TLS is set when a socket opens: a kept socket's cannot be turned
// on or off, nor its handshake timeout changed. Reload's goroutine (or
// New's).
func (l *listener) setTLS(i int, o *listener) error {
	where := fmt.Sprintf("listeners[%d] (%s).tls", i, l.name)
	t := l.cfg.TLS
	var kept string
	if o != nil {
		kept = fmt.Sprintf("the socket the reload keeps (%v, listener %s's): it is set when a socket opens; give the listener another listen address, or restart the proxy", o.ln.Addr(), o.name)
		switch {
		case o.tls == nil && t != nil:
			return fmt.Errorf("%s: added on %s", where, kept)
		case o.tls != nil && t == nil:
			return fmt.Errorf("%s: removed from %s", where, kept)
		case t != nil && o.cfg.TLS.HandshakeTimeout != t.HandshakeTimeout:
			return fmt.Errorf("%s.handshake_timeout: changed from %v to %v on %s", where, time.Duration(o.cfg.TLS.HandshakeTimeout), time.Duration(t.HandshakeTimeout), kept)
		case t != nil && o.cfg.TLS.MaxHandshakes != t.MaxHandshakes:
			return fmt.Errorf("%s.max_handshakes: changed from %d to %d on %s", where, o.cfg.TLS.MaxHandshakes, t.MaxHandshakes, kept)
		}
	}
	if t == nil {
		return nil
	}
	cfg, err := t.serverConfig(l.cfg.Mode)
	if err != nil {
		return fmt.Errorf("listeners[%d] (%s).%w", i, l.name, err)
	}
	l.tlsCfg = cfg
	if o != nil {
		l.tls = o.tls // (commit puts cfg in force)
	} else {
		l.tls = new(tlsSocket)
		l.tls.put(l)
	}
	return nil
}

// open opens l's socket, if it has none, for g. lnMu held; Reload's
// goroutine (or New's).
func (p *Proxy) open(g *generation, l *listener) error {
	if l.ln != nil {
		return nil
	}
	var lc *engine.ListenConfig
	if l.tls != nil {
		lc = l.tls.listenConfig(l.cfg.TLS)
	}
	eln, err := p.e.Listen("tcp", l.cfg.Listen, lc)
	if err != nil {
		return fmt.Errorf("listener %s: %w", l.name, err)
	}
	l.ln = eln
	g.opened = append(g.opened, eln)
	return nil
}

// pend completes g, which no one changes afterwards: until every loop has
// applied it, a loop that accepts on a socket it opened finds it by
// pending and applies it then, so that the socket takes connections as
// soon as it is open. lnMu held; Reload's goroutine (or New's).
func (p *Proxy) pend(g *generation) {
	rs := &p.reload
	for _, l := range g.lns {
		g.byLn[l.ln] = l
	}
	if rs.opened == nil {
		rs.opened = map[*engine.Listener]*generation{}
	}
	for _, eln := range g.opened {
		rs.opened[eln] = g
	}
}

// pending returns the generation that opened eln while a loop has yet to
// apply it, nil for none. Loop goroutine (a rare path: a connection
// accepted in that moment).
func (p *Proxy) pending(eln *engine.Listener) *generation {
	rs := &p.reload
	rs.lnMu.Lock()
	defer rs.lnMu.Unlock()
	return rs.opened[eln]
}

// forgetOpened drops the sockets of g from pending, once every loop has
// applied g or they are closed.
func (p *Proxy) forgetOpened(g *generation) {
	rs := &p.reload
	rs.lnMu.Lock()
	for _, eln := range g.opened {
		delete(rs.opened, eln)
	}
	rs.lnMu.Unlock()
}

// abandon closes the sockets and access logs opened for a generation not
// applied.
func (g *generation) abandon(p *Proxy) {
	for _, eln := range g.opened {
		eln.Close()
	}
	for _, a := range g.alogs {
		a.stop(false)
	}
	p.forgetOpened(g)
}

// commit puts g in force: the fields the readers off the loops see, every
// loop's state (directly before Run, else posted to each loop, waiting for
// all but those that left), the sockets g does not keep closed, the servers' health states and
// the health checkers. Reload's goroutine, rs.mu held (or New's).
func (p *Proxy) commit(g *generation) error {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		g.abandon(p)
		return ErrStopped
	}
	for _, l := range g.lns {
		if l.rebase {
			l.refusedBase = l.ln.TLSHandshakesRefused()
		}
	}
	p.cur, p.lns, p.pools = g.cfg, g.lns, g.pools
	p.reload.keepConns(g.pools)
	g.setCaps()
	for _, l := range g.lns {
		if l.tls != nil {
			l.tls.put(l) // the next handshakes on its socket take its config
		}
	}
	for _, k := range g.upTLS {
		k.u.cur.Store(&k.cfgs) // the next connections to its servers take them
		k.u.caches = k.caches
	}
	p.alogs = append(p.alogs, g.alogs...)
	running := p.running
	if running {
		for _, a := range g.alogs {
			a.start()
		}
	}
	if !running {
		for k, ls := range p.loops {
			ls.apply(k, g)
		}
	}
	p.mu.Unlock()
	if running {
		// A loop that left early (its kernel queue failed, the engine
		// serving on with the others) runs nothing posted to it, and
		// is not waited for: it serves no client any more (its
		// connections were reset and its listener sockets closed as it
		// left, and the engine gives the sockets g opened none for
		// it), so that the clients its CPU receives go to the other
		// loops, under g.
		done := make([]chan struct{}, len(p.loops))
		for k, el := range p.e.Loops() {
			ls, d := p.loops[k], make(chan struct{})
			done[k] = d
			el.Post(func() {
				ls.apply(k, g)
				close(d)
			})
		}
		for k, el := range p.e.Loops() {
			select {
			case <-done[k]:
			case <-el.Left():
			case <-p.stopc:
				p.forgetOpened(g)
				return ErrStopped
			}
		}
	}
	p.forgetOpened(g)
	for _, eln := range g.closing {
		eln.Close()
		if l := g.byLn[eln]; l.tls != nil {
			// Its handshakes end within handshake_timeout of their
			// accepts, the last just before the close; twice that
			// leaves room for their results to reach the loops.
			until, d := p.now(), int64(l.cfg.TLS.HandshakeTimeout)
			until += min(d, math.MaxInt64-until)
			until += min(d, math.MaxInt64-until)
			g.retiring = append(g.retiring, retiringLn{l, until})
		}
	}
	p.reload.retiring = g.retiring
	p.retireLogs(g)
	p.swapCheckers(g)
	return nil
}

// setCaps stores the max_conns of the servers of the pools g made (a
// reload's new cap applies at once to every connection to a kept server,
// whichever generation made it), and wakes their pools' waiters, for
// whom a raised cap may have made room. Any goroutine.
func (g *generation) setCaps() {
	for _, pl := range g.made {
		for j, s := range pl.servers {
			s.maxConns.Store(int64(pl.cfg.serverMaxConns(j)))
		}
		pl.shared.q.pool.Store(pl)
		if pl.shared.q.waiting.Load() > 0 {
			pl.shared.q.kickAll()
		}
	}
}

// queueCfg returns the config whose max_queue and queue_timeout bound
// the waits of pl's clients and requests: pl's, but where no server of
// pl has a max_conns (capped), the pool in force's where one of its has.
// A reload that gives a pool's servers a cap applies it at once,
// whatever generation a client or request was routed to (setCaps), and a
// generation without a cap has no queue bounds (0: every waiter refused,
// and timed out at once). Any goroutine.
func (pl *pool) queueCfg() *PoolConfig {
	if !pl.cfg.capped() {
		if np := pl.queue().pool.Load(); np != nil && np.cfg.capped() {
			return &np.cfg
		}
	}
	return &pl.cfg
}

// resetKept brings the servers g took over into a pool without health
// checks up again, and out of an ejection (and its streak) into one
// without passive health, or out of an ejection for failed exchanges into
// one without http_errors; a server so brought up has its pool's waiters
// take its slots (cameUp), as one its checks bring up. Any goroutine.
func (g *generation) resetKept() {
	for _, pl := range g.made {
		for _, s := range pl.servers {
			if !slices.Contains(g.kept, s) {
				continue
			}
			out := !s.up()
			if pl.health == nil {
				s.down.Store(false)
			}
			switch ps := pl.passive; {
			case ps == nil:
				s.fails.Store(0)
				s.errs.Store(0)
				s.until.Store(0)
				s.streak.Store(0)
			case ps.HTTPErrors == 0:
				s.errs.Store(0)
				if u := s.until.Load(); u&untilHTTP != 0 && s.until.CompareAndSwap(u, 0) {
					s.streak.Store(0)
				}
			}
			if out && s.up() {
				s.cameUp()
			}
		}
	}
}

// swapCheckers stops the health checkers of the pools g does not keep,
// resets the servers it kept (resetKept) and starts the checkers of the
// pools it made. Reload's goroutine.
func (p *Proxy) swapCheckers(g *generation) {
	p.mu.Lock()
	if !p.running || p.stopping {
		p.mu.Unlock()
		g.resetKept()
		return // Run starts them, or has stopped them
	}
	var stopped []*checker
	for pl, c := range p.checks {
		if !slices.Contains(g.pools, pl) {
			c.cancel()
			stopped = append(stopped, c)
			delete(p.checks, pl)
		}
	}
	p.mu.Unlock()
	// The old checkers end before the new ones start: a kept server's
	// state is not written by both. The wait is short: cancel cuts their
	// checks in progress short (TestReloadCheckInProgress).
	for _, c := range stopped {
		<-c.done
	}
	g.resetKept()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return
	}
	for _, pl := range g.made {
		p.startCheck(pl)
	}
}

// startCheck starts pl's health checker, if it has health checks and none
// runs. p.mu held, Run started and not stopping.
func (p *Proxy) startCheck(pl *pool) {
	if pl.health == nil || p.checks[pl] != nil {
		return // (Run started it, after a Reload made the pool)
	}
	ctx, cancel := context.WithCancel(p.cctx)
	c := &checker{cancel: cancel, done: make(chan struct{})}
	p.checks[pl] = c
	p.checkers.Add(1)
	go func() {
		defer close(c.done)
		p.check(ctx, pl)
	}()
}

// stop marks Run as stopping: Reload refuses from now on, and one waiting
// for the loops returns. Run's goroutine.
func (p *Proxy) stop() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	close(p.stopc)
}

// apply puts g in force on loop k: the listeners in force (byLn, and each
// one's stats[k].cur), the pools (sweepIdle; a made one's round-robin
// starts afresh in its own poolLoop), and the idle connections of
// the servers g removed closed, their HTTP/2 ones retired (goneH2), and
// the idle connections swept by the idle_timeout in force and cut to the
// max_idle in force. It keeps nothing of the generations
// before: what connections made under them hold stays with them. Once per generation, in
// their order (a Reload makes the next only once every loop applied
// this one). Loop goroutine (before Run: Reload's, the loops not
// running).
func (ls *loopState) apply(k int, g *generation) {
	if ls.applied == g {
		return // (applied early: handler.OnOpen)
	}
	ls.applied = g
	for _, l := range ls.lns {
		l.stats[k].cur = nil
	}
	for _, l := range g.lns {
		l.stats[k].cur = l
	}
	ls.byLn, ls.pools, ls.lns = g.byLn, g.pools, g.lns
	ls.closeIdleClients(true)
	ls.goneH2 = slices.DeleteFunc(ls.goneH2, (*h2Share).empty)
	for _, s := range g.gone {
		sl := s.loops[k]
		sl.idle.gone = true
		for len(sl.idle.conns) > 0 {
			ls.dropIdle(sl.idle.conns[0].c, &sl.tag)
		}
		// Its HTTP/2 connections finish their streams, swept (their
		// PINGs) from the loop's goneH2, no pool in force holding them.
		sl.h2.retire(false)
		if !sl.h2.empty() {
			ls.goneH2 = append(ls.goneH2, &sl.h2)
		}
	}
	// The pools whose connections are secured otherwise are marked
	// first: a connection dialed below for the requests waiting on a
	// server (h2Share.retire) is dialed under the pool's latest
	// generation, not theirs (h2Dial).
	for _, pl := range g.stale {
		pl.loops[k].stale = true
	}
	// A pool whose protocol changed reuses no connection of the other:
	// an h2c pool's servers' idle HTTP/1.1 ones close, an http1 pool's
	// HTTP/2 ones finish their streams and close. An http1 pool keeps
	// no more idle ones than its max_idle: those past it close, the
	// oldest first, as putIdle would have kept none of them.
	for _, pl := range g.made {
		for _, s := range pl.servers {
			sl := s.loops[k]
			if pl.h2 {
				for len(sl.idle.conns) > 0 {
					ls.dropIdle(sl.idle.conns[0].c, &sl.tag)
				}
			} else {
				for len(sl.idle.conns) > max(pl.maxIdle, 0) {
					ls.dropIdle(sl.idle.conns[0].c, &sl.tag)
				}
				sl.h2.retire(true)
			}
		}
	}
	// Nor one secured otherwise: a plain connection is not TLS, nor one
	// checked for another name or against other roots. Those in use for
	// the pool before close when done.
	for _, pl := range g.stale {
		for _, s := range pl.servers {
			sl := s.loops[k]
			for len(sl.idle.conns) > 0 {
				ls.dropIdle(sl.idle.conns[0].c, &sl.tag)
			}
			sl.h2.retire(true)
		}
	}
	// The sweep of idle connections, armed by the idle_timeout of the
	// pools before, runs now by those in force: a shorter one closes
	// the connections idle past it and arms the sweep by it.
	if ls.sweeping && len(g.made) > 0 {
		ls.sweep.Stop()
		ls.sweepFn()
	}
}

// retired reports whether s's listener is no longer in force: a reload
// removed it, moved it to another address or changed its mode (its
// lineage has no listener in force on this loop). Such a client is not
// served on under the old config, as nginx and HAProxy do on a reload:
// it is closed when idle, and after the response in progress (with
// Connection: close where its head is still to go). Loop goroutine.
func (s *hsession) retired() bool {
	return s.ln.stats[s.ls.id].cur == nil
}

// refreshListener moves s to the listener in force for its own (a reload
// made a new one with the same socket and mode), carrying its place in
// max_conns' count. At a request's start. Loop goroutine.
func (s *hsession) refreshListener() { s.ln = s.ls.current(s.ln) }

// current returns the listener in force for l's socket and mode on the
// loop (l where none is), moving a client of l's there: its place in
// max_conns' count, which the two share, goes with it, and its use of
// l's access log becomes one of the new listener's (moveLog). Loop
// goroutine.
func (ls *loopState) current(l *listener) *listener {
	cur := l.stats[ls.id].cur
	if cur == nil {
		return l
	}
	ls.moveLog(l, cur)
	return cur
}

// writeReloadMetrics writes the reload counters. Any goroutine.
func (p *Proxy) writeReloadMetrics(bw *bufio.Writer, family func(name, typ, help string)) {
	rs := &p.reload
	family("spindle_proxy_config_reloads_total", "counter", "Config reloads (Reload, SIGHUP to spindle proxy) applied (result=\"ok\") and refused (result=\"error\").")
	fmt.Fprintf(bw, "spindle_proxy_config_reloads_total{result=\"ok\"} %d\n", rs.ok.Load())
	fmt.Fprintf(bw, "spindle_proxy_config_reloads_total{result=\"error\"} %d\n", rs.failed.Load())
	family("spindle_proxy_config_last_reload_success_timestamp_seconds", "gauge", "Unix time the config in force was applied (at start, or by the last reload that succeeded).")
	fmt.Fprintf(bw, "spindle_proxy_config_last_reload_success_timestamp_seconds %s\n", strconv.FormatFloat(float64(rs.last.Load())/1e9, 'f', 3, 64))
}

// early applies the generation that opened c's listener, if a Reload
// opened it and this loop has yet to apply it, and returns c's listener,
// nil for none. Loop goroutine.
func (ls *loopState) early(p *Proxy, c *engine.Conn) *listener {
	g := p.pending(c.Listener())
	if g == nil {
		return nil
	}
	ls.apply(c.Loop().ID(), g)
	return ls.byLn[c.Listener()]
}
