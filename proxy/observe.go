package proxy

import (
	"bufio"
	"fmt"
	"slices"
)

// routeStats are one loop's counters for one route of a listener (mode
// http), or for its own pool (the requests no route matches).
type routeStats struct {
	requests  counter    // requests routed to it
	respUp    [5]counter // responses from servers, by class 1xx..5xx
	respLocal [5]counter // responses the proxy made (errors), by class
}

// RouteTotals are one route's counters (mode http), summed over the loops.
type RouteTotals struct {
	// Name is the route's name, DefaultRouteName for the listener's own
	// pool.
	Name string
	// Requests routed (those refused before routing, such as malformed
	// heads, count only for the listener), and responses to them by
	// class (index 0 for 1xx to 4 for 5xx), from the servers and made by
	// the proxy.
	Requests                          uint64
	ResponsesUpstream, ResponsesProxy [5]uint64
	// RateLimit is the route's rate_limit's decisions, nil for none.
	RateLimit *RateLimitTotals
}

// observe sets up l's per-route counters, taking over those of o (the
// listener l follows, nil for none) whose route names l keeps, and its
// access log: the one a listener of its name had on its path, if any (a
// reload keeps it: its lines follow on in the file, its writer and its
// drops count go on), else a new one, which it returns (nil for none). A
// log is made once for each listener name and path while a listener has
// it: reloads do not add writers (a log no listener has is retired:
// retireLogs). Reload's goroutine, rs.mu held (p.alogs changes only then), or
// New's.
func (p *Proxy) observe(l, o *listener) (*accessLog, error) {
	if l.http {
		for k := range p.loops {
			rs := make([]*routeStats, len(l.routes)+1)
			for i := range rs {
				if o != nil && o.http {
					if j := slices.Index(o.routeNames(), l.routeName(i)); j >= 0 {
						rs[i] = o.rstats[k][j]
						continue
					}
				}
				rs[i] = new(routeStats)
			}
			l.rstats = append(l.rstats, rs)
		}
	}
	ac := l.cfg.AccessLog
	if ac == nil {
		return nil, nil
	}
	l.logJSON = ac.Format != AccessLogText
	for _, n := range l.routeNames() {
		l.logRoutes = append(l.logRoutes, []byte(n))
	}
	for _, a := range p.alogs {
		if a.name == l.name && a.path == ac.Path {
			l.alog = a
			return nil, nil
		}
	}
	a, err := openAccessLog(&l.cfg, p.e.Loops(), p.opt.Logf)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", l.name, err)
	}
	l.alog = a
	return a, nil
}

// routeName is the name of route i, DefaultRouteName for the listener's
// pool (i = len(routes)).
func (l *listener) routeName(i int) string {
	if i < len(l.cfg.Routes) {
		return l.cfg.Routes[i].Name
	}
	return DefaultRouteName
}

// routeNames are the names of l's routes, DefaultRouteName last.
func (l *listener) routeNames() []string {
	var ns []string
	for i := range len(l.cfg.Routes) + 1 {
		ns = append(ns, l.routeName(i))
	}
	return ns
}

// startLogs starts the access logs' writers. p.mu held (Run).
func (p *Proxy) startLogs() {
	for _, a := range p.alogs {
		a.start()
	}
}

// stopLogs writes out and closes the access logs, once the loops are done
// (started: their writers run). Any goroutine (Run, Close).
func (p *Proxy) stopLogs(started bool) {
	for _, a := range p.alogs {
		a.stop(started)
	}
	for _, a := range p.retiredLogs {
		a.stop(started)
	}
}

// retireLogs retires the access logs no listener of g has (a reload
// changed their paths or removed their listeners): before Run they close
// at once; while it runs each is written out and closed once no client
// or stream that could write to it is left (accessLog.retire), and kept
// in retiredLogs until then, for Run's end. A TLS listener g keeps for
// the handshakes of its closed socket (generation.retiring) keeps its
// log: a client it accepts comes later. Reload's goroutine, rs.mu held,
// once every loop applied g and the sockets it does not keep are closed
// (no client of theirs is accepted after: Listener.Close waits for the
// loops).
func (p *Proxy) retireLogs(g *generation) {
	held := map[*accessLog]bool{}
	for _, l := range g.lns {
		held[l.alog] = true
	}
	for _, r := range g.retiring {
		held[r.l.alog] = true
	}
	var gone []*accessLog
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return // (Run's end stops them all)
	}
	p.alogs = slices.DeleteFunc(p.alogs, func(a *accessLog) bool {
		if !held[a] {
			gone = append(gone, a)
		}
		return !held[a]
	})
	if p.running {
		p.retiredLogs = slices.DeleteFunc(p.retiredLogs, (*accessLog).written)
		p.retiredLogs = append(p.retiredLogs, gone...)
	}
	for _, a := range gone {
		if p.running {
			a.retire(p.e.Loops()) // (under p.mu: Run's stop, which takes it, comes after)
		} else {
			a.stop(false)
		}
	}
	p.mu.Unlock()
}

// ReopenLogs opens the access log files again, by their paths, and
// closes the files they wrote to: after logrotate (or any other) has
// moved them away, lines go to new files of the same names (`spindle
// proxy` calls it on SIGUSR1). A buffer being written when it is called
// goes to the old file or the new one, whole. It returns the first error
// and reopens the other logs all the same (a log that fails keeps its old
// file). Any goroutine.
func (p *Proxy) ReopenLogs() error {
	var first error
	p.mu.RLock()
	alogs := p.alogs
	p.mu.RUnlock()
	for _, a := range alogs {
		if err := a.reopen(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// observedTotals fills in lt's per-route counters and access log drops.
// Any goroutine.
func (p *Proxy) observedTotals(l *listener, lt *ListenerTotals) {
	if l.alog != nil {
		lt.AccessLogDropped = l.alog.dropped()
	}
	if !l.http {
		return
	}
	lt.Routes = make([]RouteTotals, len(l.routes)+1)
	for i := range lt.Routes {
		rt := &lt.Routes[i]
		rt.Name = DefaultRouteName
		if i < len(l.routes) {
			rt.Name = l.cfg.Routes[i].Name
		}
		for _, rs := range l.rstats {
			s := rs[i]
			rt.Requests += s.requests.load()
			for k := range 5 {
				rt.ResponsesUpstream[k] += s.respUp[k].load()
				rt.ResponsesProxy[k] += s.respLocal[k].load()
			}
		}
	}
}

// writeObserved writes the per-route and access log metrics.
func writeObserved(bw *bufio.Writer, t Totals, family func(name, typ, help string)) {
	family("spindle_proxy_http_route_requests_total", "counter", "HTTP requests routed to a route (mode http; route=\""+DefaultRouteName+"\": the listener's pool, for requests no route matches).")
	for _, l := range t.Listeners {
		for _, r := range l.Routes {
			fmt.Fprintf(bw, "spindle_proxy_http_route_requests_total{listener=\"%s\",route=\"%s\"} %d\n", escape(l.Name), escape(r.Name), r.Requests)
		}
	}
	family("spindle_proxy_http_route_responses_total", "counter", "HTTP responses to the requests routed to a route (mode http), by class, from the servers (source=\"upstream\") or made by the proxy (source=\"proxy\").")
	for _, l := range t.Listeners {
		for _, r := range l.Routes {
			for k := range 5 {
				fmt.Fprintf(bw, "spindle_proxy_http_route_responses_total{listener=\"%s\",route=\"%s\",class=\"%dxx\",source=\"upstream\"} %d\n", escape(l.Name), escape(r.Name), k+1, r.ResponsesUpstream[k])
				fmt.Fprintf(bw, "spindle_proxy_http_route_responses_total{listener=\"%s\",route=\"%s\",class=\"%dxx\",source=\"proxy\"} %d\n", escape(l.Name), escape(r.Name), k+1, r.ResponsesProxy[k])
			}
		}
	}
	family("spindle_proxy_access_log_dropped_total", "counter", "Access log lines dropped: the log's writer was 4 MiB behind a loop (or could not write).")
	for _, l := range t.Listeners {
		fmt.Fprintf(bw, "spindle_proxy_access_log_dropped_total{listener=\"%s\"} %d\n", escape(l.Name), l.AccessLogDropped)
	}
}
