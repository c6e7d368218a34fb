package proxy

import "time"

// Totals are the proxy's counters summed over its loops, as /metrics
// shows them.
type Totals struct {
	Listeners []ListenerTotals
	Servers   []ServerTotals
	Pools     []PoolTotals
}

// PoolTotals are one pool's counters.
type PoolTotals struct {
	Name string
	// EjectionsRefused counts the ejections passive health did not make
	// because max_ejected_percent of the pool's servers were out (ejected
	// or held down by the active checks) (each failure past the threshold while the bound held). A pool a
	// reload changed keeps it.
	EjectionsRefused uint64
	// The queue for a slot (servers with max_conns), over all loops:
	// QueueLength waiting now; Queued waits begun; QueueTimeouts those
	// queue_timeout ended; QueueRefused clients or requests refused at
	// once, max_queue waiting; QueueServed waits that ended with their
	// turn (a slot, mostly) and QueueWait their total time. Following
	// the pool's name over reloads.
	QueueLength                                      int64
	Queued, QueueTimeouts, QueueRefused, QueueServed uint64
	QueueWait                                        time.Duration
}

// ListenerTotals are one listener's counters.
type ListenerTotals struct {
	Name                                             string
	Accepted, Rejected, NoServer, Failed, IdleClosed uint64
	Active                                           int64
	// Mode http: request heads received (bad ones included), and
	// responses by class (index 0 for 1xx to 4 for 5xx) from the
	// servers and made by the proxy (errors).
	Requests                          uint64
	ResponsesUpstream, ResponsesProxy [5]uint64
	// Routes (mode http) are the counters by route, the listener's own
	// pool last.
	Routes []RouteTotals
	// AccessLogDropped counts the access log's lines dropped.
	AccessLogDropped uint64
	// h2c: HTTP/2 client connections, their streams (requests, counted
	// in Requests too), and the streams reset by the client and by the
	// proxy.
	H2Connections, H2Streams, H2ResetsClient, H2ResetsProxy uint64
	// H2ResponseHeld is the response bytes from h2c pools the proxy
	// holds now for its HTTP/2 clients, their windows not open to them
	// (h2_response_hold bounds them per client connection).
	H2ResponseHeld int64
	// UnderscoreDropped counts the request fields dropped for an
	// underscore in their name: headers_with_underscores drop's, and
	// the forwarding fields so spelled.
	UnderscoreDropped uint64
	// DiscardClosed counts the clients closed after a 429 because the
	// body of the refused request, read and dropped, was malformed, past
	// 64 KiB, or not all come within request_timeout of the 429 (mode
	// http).
	DiscardClosed uint64
	// RateLimit is the listener's rate_limit's decisions, nil for none.
	RateLimit *RateLimitTotals
	// TLSHandshakeFailures counts the clients (of a listener with tls)
	// whose handshake failed or timed out: closed, never accepted.
	TLSHandshakeFailures uint64
	// TLSHandshakesRefused counts the clients (of a listener with tls)
	// reset at the accept, the listener holding its max_handshakes
	// (engine.Listener.TLSHandshakesRefused); a reload that keeps the
	// listener's socket and counters keeps it, and one that makes a new
	// listener on the socket starts it again as it puts it in force.
	TLSHandshakesRefused uint64
	// H2PrefaceFailures counts the clients (of a listener with tls) ALPN
	// gave h2 whose first bytes were not the HTTP/2 client preface:
	// closed without an answer.
	H2PrefaceFailures uint64
}

// ServerTotals are one server's counters, in one pool.
type ServerTotals struct {
	Pool, Server                          string
	Connects, Failures, BytesIn, BytesOut uint64
	Active                                int64
	// TLSHandshakeFailures (a pool with tls) counts the connects whose
	// TLS handshake failed, counted in Failures too.
	TLSHandshakeFailures uint64
	// Mode http: requests sent (a retried one twice), those on a
	// connection from the idle pool and on a new one, and the idle
	// connections pooled.
	Requests, ReusedRequests, NewRequests uint64
	Idle                                  int64
	// Protocol h2c: HTTP/2 connections open (set up: from the server's
	// SETTINGS, which make the connect one of Connects, to the close;
	// not those still connecting or waiting for them, nor a failed
	// connect), streams opened, GOAWAYs received, streams the server did
	// not process (REFUSED_STREAM, or above a GOAWAY's last stream) and
	// those of them sent again.
	H2Connections                              int64
	H2Streams, H2GoAways, H2Refused, H2Retried uint64
	// H2Pings counts the PINGs sent (h2_ping_interval), H2PingTimeouts
	// the connections closed for an ACK not back within
	// h2_ping_timeout; H2PingRTT is the last PING's round trip, the
	// longest of the loops'.
	H2Pings, H2PingTimeouts uint64
	H2PingRTT               time.Duration
	// H2ResetRetires counts the connections retired for the early resets
	// the proxy sent on them (a stream reset before its response sent
	// DATA: the clients' resets passed on), lest the server end one for
	// rapid reset with the other streams on it.
	H2ResetRetires uint64
	// Connections: the upstream connections open to the server over
	// every loop (protocol http1 and mode tcp: connecting, in use and
	// idle), which MaxConns caps (0: no cap).
	Connections, MaxConns int64
	// Up: the server takes new connections (neither the active checks
	// nor passive health mark it down).
	Up                         bool
	CheckFailures, CheckPasses uint64
	// PassiveDown: passive health has the server ejected; Ejections
	// counts its ejections, EjectionsConnect those for failed connects
	// (passive.fails) and EjectionsHTTP those for failed HTTP exchanges
	// (passive.http_errors).
	PassiveDown                     bool
	Ejections                       uint64
	EjectionsConnect, EjectionsHTTP uint64
	// ConsecutiveFails and ConsecutiveErrors are passive health's
	// counts: failed connects and failed HTTP exchanges in a row.
	ConsecutiveFails, ConsecutiveErrors int64
	// HashEntries (balance hash) is the server's entries in its pool's
	// table: its share of the keys is HashEntries over table_size.
	HashEntries int
}

// Totals sums the loops' counters, for the listeners and servers in force.
// The loops keep counting meanwhile: the sums are of values read one by
// one, not of one instant. A server or listener a reload kept keeps its
// counters. Any goroutine.
func (p *Proxy) Totals() Totals {
	var t Totals
	p.mu.RLock()
	lns, pools := p.lns, p.pools
	p.mu.RUnlock()
	for _, l := range lns {
		lt := ListenerTotals{Name: l.name}
		for _, s := range l.stats {
			lt.Accepted += s.accepted.load()
			lt.Rejected += s.rejected.load()
			lt.NoServer += s.noServer.load()
			lt.Failed += s.failed.load()
			lt.IdleClosed += s.idleClosed.load()
			lt.Active += s.active.load()
			lt.Requests += s.requests.load()
			lt.H2Connections += s.h2Conns.load()
			lt.H2Streams += s.h2Streams.load()
			lt.H2ResetsClient += s.h2ResetsClient.load()
			lt.H2ResetsProxy += s.h2ResetsProxy.load()
			lt.H2ResponseHeld += s.h2RespHeld.load()
			lt.UnderscoreDropped += s.underscoreDropped.load()
			lt.DiscardClosed += s.discardClosed.load()
			lt.TLSHandshakeFailures += s.tlsFailed.load()
			lt.H2PrefaceFailures += s.h2Preface.load()
			for k := range 5 {
				lt.ResponsesUpstream[k] += s.respUp[k].load()
				lt.ResponsesProxy[k] += s.respLocal[k].load()
			}
		}
		lt.TLSHandshakesRefused = l.ln.TLSHandshakesRefused() - l.refusedBase
		p.observedTotals(l, &lt)
		l.rateLimitTotals(&lt)
		t.Listeners = append(t.Listeners, lt)
	}
	for _, pl := range pools {
		pt := PoolTotals{Name: pl.name, EjectionsRefused: pl.shared.refused.Load(), QueueLength: pl.shared.q.waiting.Load()}
		for k := range pl.shared.q.qs {
			q := &pl.shared.q.qs[k]
			pt.Queued += q.queued.load()
			pt.QueueTimeouts += q.timeouts.load()
			pt.QueueRefused += q.refused.load()
			pt.QueueServed += q.served.load()
			pt.QueueWait += time.Duration(q.waitNs.load())
		}
		t.Pools = append(t.Pools, pt)
		for j, srv := range pl.servers {
			st := ServerTotals{HashEntries: pl.hashEntries(j), Pool: pl.name, Server: srv.addr, Up: srv.up(), Connections: srv.conns.Load(), MaxConns: srv.maxConns.Load(), CheckFailures: srv.checkFails.Load(), CheckPasses: srv.checkPasses.Load(), PassiveDown: srv.ejected(),
				EjectionsConnect: srv.ejections[ejectConnect].Load(), EjectionsHTTP: srv.ejections[ejectHTTP].Load(),
				ConsecutiveFails: srv.fails.Load(), ConsecutiveErrors: srv.errs.Load()}
			st.Ejections = st.EjectionsConnect + st.EjectionsHTTP
			for _, sl := range srv.loops {
				s := &sl.stats
				st.Connects += s.connects.load()
				st.Failures += s.failures.load()
				st.TLSHandshakeFailures += s.tlsFailed.load()
				st.BytesIn += s.bytesIn.load()
				st.BytesOut += s.bytesOut.load()
				st.Active += s.active.load()
				st.Requests += s.requests.load()
				st.ReusedRequests += s.reusedReqs.load()
				st.NewRequests += s.newReqs.load()
				st.Idle += s.idle.load()
				st.H2Connections += s.h2Conns.load()
				st.H2Streams += s.h2Streams.load()
				st.H2GoAways += s.h2GoAways.load()
				st.H2Refused += s.h2Refused.load()
				st.H2Retried += s.h2Retried.load()
				st.H2Pings += s.h2Pings.load()
				st.H2PingTimeouts += s.h2PingTOs.load()
				st.H2ResetRetires += s.h2Retires.load()
				st.H2PingRTT = max(st.H2PingRTT, time.Duration(s.h2PingRTT.load()))
			}
			t.Servers = append(t.Servers, st)
		}
	}
	return t
}
