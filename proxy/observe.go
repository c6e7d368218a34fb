package proxy

import (
	"bufio"
	"fmt"
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
}

// observe sets up l's per-route counters on every loop and opens its
// access log. Any goroutine (New).
func (p *Proxy) observe(l *listener) error {
	if l.http {
		for _, ls := range p.loops {
			ls.ln[l.idx].routes = make([]routeStats, len(l.routes)+1)
		}
	}
	a, err := openAccessLog(&l.cfg, p.e.Loops(), p.opt.Logf)
	if err != nil {
		return fmt.Errorf("listener %s: %w", l.name, err)
	}
	l.alog = a
	return nil
}

// startLogs starts the access logs' writers. Any goroutine (Run).
func (p *Proxy) startLogs() {
	for _, l := range p.lns {
		if l.alog != nil {
			l.alog.start()
		}
	}
}

// stopLogs writes out and closes the access logs, once the loops are done
// (started: their writers run). Any goroutine (Run, Close).
func (p *Proxy) stopLogs(started bool) {
	for _, l := range p.lns {
		if l.alog != nil {
			l.alog.stop(started)
		}
	}
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
	for _, l := range p.lns {
		if l.alog == nil {
			continue
		}
		if err := l.alog.reopen(); err != nil && first == nil {
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
		for _, ls := range p.loops {
			s := &ls.ln[l.idx].routes[i]
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
