package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spindlenet/spindle/internal/h1"
)

// adminTimeout bounds what the admin server waits for a client: a
// request's head and body (a body announced and not sent would otherwise
// hold its connection and goroutine for good: the handlers read none,
// and net/http reads it before it answers), and a kept-alive
// connection's next request (net/http waits for it without a bound where
// neither IdleTimeout nor ReadTimeout is set). The answer's writing has
// twice that, from the request's head: a client that does not read it
// is closed too.
const adminTimeout = 5 * time.Second

// adminMaxHead bounds an admin request's head: the largest the loops read
// (internal/h1's default), where net/http would read a megabyte.
const adminMaxHead = h1.DefaultMaxHead

// adminServer serves /metrics, /healthz and /debug/config, on Go's
// net/http, off the loops.
type adminServer struct {
	ln  net.Listener
	srv *http.Server
}

func newAdmin(p *Proxy, addr string) (*adminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		p.WriteMetrics(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /debug/config", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(p.Config())
	})
	return &adminServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: adminTimeout, ReadTimeout: adminTimeout,
		WriteTimeout: 2 * adminTimeout, IdleTimeout: adminTimeout, MaxHeaderBytes: adminMaxHead}}, nil
}

func (a *adminServer) serve() { a.srv.Serve(a.ln) }

func (a *adminServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if a.srv.Shutdown(ctx) != nil {
		a.srv.Close()
	}
	a.ln.Close() // in case serve never ran
}

// WriteMetrics writes the counters in the Prometheus text exposition
// format (version 0.0.4). Any goroutine.
func (p *Proxy) WriteMetrics(w io.Writer) error {
	t := p.Totals()
	bw := bufio.NewWriter(w)
	family := func(name, typ, help string) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	type lnMetric struct {
		name, typ, help string
		v               func(ListenerTotals) string
	}
	u := func(v uint64) string { return fmt.Sprint(v) }
	for _, m := range []lnMetric{
		{"spindle_proxy_listener_accepted_total", "counter", "Client connections accepted, those rejected included.", func(l ListenerTotals) string { return u(l.Accepted) }},
		{"spindle_proxy_listener_rejected_total", "counter", "Client connections closed at once because max_conns were open.", func(l ListenerTotals) string { return u(l.Rejected) }},
		{"spindle_proxy_listener_no_server_total", "counter", "Client connections closed because no server of the pool was up (mode http: requests answered 503).", func(l ListenerTotals) string { return u(l.NoServer) }},
		{"spindle_proxy_listener_upstream_failed_total", "counter", "Client connections closed because every server up failed to connect (mode http: requests answered 502).", func(l ListenerTotals) string { return u(l.Failed) }},
		{"spindle_proxy_listener_idle_closed_total", "counter", "Connections closed by idle_timeout (mode http: clients closed by keepalive_timeout, and upgraded tunnels by idle_timeout).", func(l ListenerTotals) string { return u(l.IdleClosed) }},
		{"spindle_proxy_listener_active", "gauge", "Client connections open.", func(l ListenerTotals) string { return fmt.Sprint(l.Active) }},
		{"spindle_proxy_listener_underscore_dropped_total", "counter", "Request fields dropped for an underscore in their name (mode http): by headers_with_underscores drop, and the forwarding fields so spelled (X_Forwarded_For, ...) whatever it says.", func(l ListenerTotals) string { return u(l.UnderscoreDropped) }},
		{"spindle_proxy_listener_discard_closed_total", "counter", "Clients closed after a rate_limit's 429 (mode http, HTTP/1.1) because the refused request's body, read and dropped, was malformed, past 64 KiB, or not all come within request_timeout of the 429.", func(l ListenerTotals) string { return u(l.DiscardClosed) }},
		{"spindle_proxy_listener_tls_handshake_failures_total", "counter", "Clients of a listener with tls whose handshake failed or timed out (handshake_timeout), closed without being accepted.", func(l ListenerTotals) string { return u(l.TLSHandshakeFailures) }},
		{"spindle_proxy_listener_tls_handshakes_refused_total", "counter", "Clients of a listener with tls reset at the accept, before any handshake, because max_handshakes were in progress (counted in spindle_proxy_engine_tls_handshakes_refused_total too).", func(l ListenerTotals) string { return u(l.TLSHandshakesRefused) }},
		{"spindle_proxy_listener_h2_preface_failures_total", "counter", "Clients of a listener with tls that ALPN gave h2 whose first bytes were not the HTTP/2 client preface (an HTTP/1.1 request, say), closed without an answer (RFC 9113 3.4).", func(l ListenerTotals) string { return u(l.H2PrefaceFailures) }},
	} {
		family(m.name, m.typ, m.help)
		for _, l := range t.Listeners {
			fmt.Fprintf(bw, "%s{listener=\"%s\"} %s\n", m.name, escape(l.Name), m.v(l))
		}
	}
	family("spindle_proxy_listener_http_requests_total", "counter", "HTTP request heads received (mode http), malformed ones included.")
	for _, l := range t.Listeners {
		fmt.Fprintf(bw, "spindle_proxy_listener_http_requests_total{listener=\"%s\"} %d\n", escape(l.Name), l.Requests)
	}
	family("spindle_proxy_listener_h2_connections_total", "counter", "HTTP/2 client connections (h2c, prior knowledge) of mode http listeners with h2c.")
	for _, l := range t.Listeners {
		fmt.Fprintf(bw, "spindle_proxy_listener_h2_connections_total{listener=\"%s\"} %d\n", escape(l.Name), l.H2Connections)
	}
	family("spindle_proxy_listener_h2_streams_total", "counter", "HTTP/2 streams opened by clients (requests; counted in spindle_proxy_listener_http_requests_total too).")
	for _, l := range t.Listeners {
		fmt.Fprintf(bw, "spindle_proxy_listener_h2_streams_total{listener=\"%s\"} %d\n", escape(l.Name), l.H2Streams)
	}
	family("spindle_proxy_listener_h2_resets_total", "counter", "HTTP/2 streams reset before their end, by the client (by=\"client\") or by the proxy (by=\"proxy\": the upstream failed after the response began).")
	for _, l := range t.Listeners {
		fmt.Fprintf(bw, "spindle_proxy_listener_h2_resets_total{listener=\"%s\",by=\"client\"} %d\n", escape(l.Name), l.H2ResetsClient)
		fmt.Fprintf(bw, "spindle_proxy_listener_h2_resets_total{listener=\"%s\",by=\"proxy\"} %d\n", escape(l.Name), l.H2ResetsProxy)
	}
	family("spindle_proxy_listener_h2_response_held_bytes", "gauge", "Response bytes from h2c pools held now for HTTP/2 clients whose windows do not take them (h2_response_hold bounds them per client connection).")
	for _, l := range t.Listeners {
		fmt.Fprintf(bw, "spindle_proxy_listener_h2_response_held_bytes{listener=\"%s\"} %d\n", escape(l.Name), l.H2ResponseHeld)
	}
	family("spindle_proxy_listener_http_responses_total", "counter", "HTTP responses sent to clients (mode http) by class, from the servers (source=\"upstream\") or made by the proxy (source=\"proxy\").")
	for _, l := range t.Listeners {
		for k := range 5 {
			fmt.Fprintf(bw, "spindle_proxy_listener_http_responses_total{listener=\"%s\",class=\"%dxx\",source=\"upstream\"} %d\n", escape(l.Name), k+1, l.ResponsesUpstream[k])
			fmt.Fprintf(bw, "spindle_proxy_listener_http_responses_total{listener=\"%s\",class=\"%dxx\",source=\"proxy\"} %d\n", escape(l.Name), k+1, l.ResponsesProxy[k])
		}
	}
	type srvMetric struct {
		name, typ, help string
		v               func(ServerTotals) string
	}
	for _, m := range []srvMetric{
		{"spindle_proxy_server_connects_total", "counter", "Upstream connects that succeeded.", func(s ServerTotals) string { return u(s.Connects) }},
		{"spindle_proxy_server_connect_failures_total", "counter", "Upstream connects that failed (refused, timed out).", func(s ServerTotals) string { return u(s.Failures) }},
		{"spindle_proxy_server_tls_handshake_failures_total", "counter", "Upstream connects of a pool with tls whose TLS handshake failed (an untrusted certificate, a wrong name, a timeout, no h2 by ALPN for protocol h2), counted in connect failures too.", func(s ServerTotals) string { return u(s.TLSHandshakeFailures) }},
		{"spindle_proxy_server_active", "gauge", "Upstream connections open or connecting (mode http: those in use, not the idle pooled ones).", func(s ServerTotals) string { return fmt.Sprint(s.Active) }},
		{"spindle_proxy_server_h2_connections", "gauge", "HTTP/2 connections open to the server (protocol h2c): set up, from the server's SETTINGS (the connect counted) to the close; not those connecting or waiting for them.", func(s ServerTotals) string { return fmt.Sprint(s.H2Connections) }},
		{"spindle_proxy_server_h2_streams_total", "counter", "HTTP/2 streams opened to the server (protocol h2c; a retried request twice).", func(s ServerTotals) string { return u(s.H2Streams) }},
		{"spindle_proxy_server_h2_goaways_total", "counter", "GOAWAY frames the server sent (protocol h2c).", func(s ServerTotals) string { return u(s.H2GoAways) }},
		{"spindle_proxy_server_h2_refused_streams_total", "counter", "HTTP/2 streams the server did not process: REFUSED_STREAM, or above a GOAWAY's last stream (protocol h2c).", func(s ServerTotals) string { return u(s.H2Refused) }},
		{"spindle_proxy_server_h2_retried_streams_total", "counter", "Of the streams the server did not process, those sent again (protocol h2c).", func(s ServerTotals) string { return u(s.H2Retried) }},
		{"spindle_proxy_server_h2_pings_total", "counter", "HTTP/2 PINGs sent to the server (protocol h2c, h2_ping_interval).", func(s ServerTotals) string { return u(s.H2Pings) }},
		{"spindle_proxy_server_h2_ping_timeouts_total", "counter", "HTTP/2 connections to the server closed for a PING not acknowledged within h2_ping_timeout (protocol h2c).", func(s ServerTotals) string { return u(s.H2PingTimeouts) }},
		{"spindle_proxy_server_h2_reset_retires_total", "counter", "HTTP/2 connections to the server retired for the early resets the proxy sent on them, the clients' passed on (protocol h2c): their streams finish, new ones go to another connection.", func(s ServerTotals) string { return u(s.H2ResetRetires) }},
		{"spindle_proxy_server_h2_ping_rtt_seconds", "gauge", "The last PING's round trip to the server, the longest of the loops' (protocol h2c).", func(s ServerTotals) string { return fmt.Sprint(s.H2PingRTT.Seconds()) }},
		{"spindle_proxy_server_connections", "gauge", "Upstream connections open to the server over every loop (protocol http1 and mode tcp: connecting, in use and idle), which max_conns caps.", func(s ServerTotals) string { return fmt.Sprint(s.Connections) }},
		{"spindle_proxy_server_hash_entries", "gauge", "The server's entries in its pool's hash table (balance hash; 0 for the others): its share of the keys is this over hash.table_size.", func(s ServerTotals) string { return fmt.Sprint(s.HashEntries) }},
		{"spindle_proxy_server_max_conns", "gauge", "The server's connection cap (max_conns), 0 for none.", func(s ServerTotals) string { return fmt.Sprint(s.MaxConns) }},
		{"spindle_proxy_server_http_idle", "gauge", "Idle keep-alive connections pooled for HTTP requests (mode http).", func(s ServerTotals) string { return fmt.Sprint(s.Idle) }},
		{"spindle_proxy_server_bytes_in_total", "counter", "Bytes received from the server.", func(s ServerTotals) string { return u(s.BytesIn) }},
		{"spindle_proxy_server_bytes_out_total", "counter", "Bytes from clients forwarded to the server.", func(s ServerTotals) string { return u(s.BytesOut) }},
		{"spindle_proxy_server_up", "gauge", "1 if the server takes new connections (neither health checks nor passive health mark it down), else 0.", func(s ServerTotals) string {
			if s.Up {
				return "1"
			}
			return "0"
		}},
		{"spindle_proxy_server_health_check_failures_total", "counter", "Health checks that failed.", func(s ServerTotals) string { return u(s.CheckFailures) }},
		{"spindle_proxy_server_health_check_passes_total", "counter", "Health checks that passed.", func(s ServerTotals) string { return u(s.CheckPasses) }},
		{"spindle_proxy_server_passive_down", "gauge", "1 if passive health has the server ejected (its cooldown running), else 0.", func(s ServerTotals) string {
			if s.PassiveDown {
				return "1"
			}
			return "0"
		}},
	} {
		family(m.name, m.typ, m.help)
		for _, s := range t.Servers {
			fmt.Fprintf(bw, "%s{pool=\"%s\",server=\"%s\"} %s\n", m.name, escape(s.Pool), escape(s.Server), m.v(s))
		}
	}
	// By reason: the sum over reason is the series this counter had
	// before http_errors, without the label.
	family("spindle_proxy_server_passive_ejections_total", "counter", "Times passive health ejected the server, for failed connects (reason=\"connect\", passive.fails) or failed HTTP exchanges (reason=\"http\", passive.http_errors).")
	for _, s := range t.Servers {
		fmt.Fprintf(bw, "spindle_proxy_server_passive_ejections_total{pool=\"%s\",server=\"%s\",reason=\"connect\"} %d\n", escape(s.Pool), escape(s.Server), s.EjectionsConnect)
		fmt.Fprintf(bw, "spindle_proxy_server_passive_ejections_total{pool=\"%s\",server=\"%s\",reason=\"http\"} %d\n", escape(s.Pool), escape(s.Server), s.EjectionsHTTP)
	}
	family("spindle_proxy_server_passive_consecutive_failures", "gauge", "Passive health's count of the server's failures in a row: failed connects (reason=\"connect\") and failed HTTP exchanges (reason=\"http\").")
	for _, s := range t.Servers {
		fmt.Fprintf(bw, "spindle_proxy_server_passive_consecutive_failures{pool=\"%s\",server=\"%s\",reason=\"connect\"} %d\n", escape(s.Pool), escape(s.Server), s.ConsecutiveFails)
		fmt.Fprintf(bw, "spindle_proxy_server_passive_consecutive_failures{pool=\"%s\",server=\"%s\",reason=\"http\"} %d\n", escape(s.Pool), escape(s.Server), s.ConsecutiveErrors)
	}
	family("spindle_proxy_pool_passive_ejections_refused_total", "counter", "Ejections passive health did not make because passive.max_ejected_percent of the pool's servers were out (ejected, or down by the health checks).")
	for _, pl := range t.Pools {
		fmt.Fprintf(bw, "spindle_proxy_pool_passive_ejections_refused_total{pool=\"%s\"} %d\n", escape(pl.Name), pl.EjectionsRefused)
	}
	type poolMetric struct {
		name, typ, help string
		v               func(PoolTotals) string
	}
	for _, m := range []poolMetric{
		{"spindle_proxy_pool_queue_length", "gauge", "Clients (mode tcp) and requests (mode http) waiting in the pool's queue for a slot (every server up at its max_conns).", func(p PoolTotals) string { return fmt.Sprint(p.QueueLength) }},
		{"spindle_proxy_pool_queued_total", "counter", "Waits begun in the pool's queue.", func(p PoolTotals) string { return u(p.Queued) }},
		{"spindle_proxy_pool_queue_timeouts_total", "counter", "Waits queue_timeout ended (mode http: 503, logged SQ; mode tcp: the client closed).", func(p PoolTotals) string { return u(p.QueueTimeouts) }},
		{"spindle_proxy_pool_queue_refused_total", "counter", "Clients and requests refused at once because max_queue were waiting (mode http: 503, logged UO).", func(p PoolTotals) string { return u(p.QueueRefused) }},
		// (A sum and a count: the package has no histograms.)
		{"spindle_proxy_pool_queue_served_total", "counter", "Waits in the pool's queue that ended with their turn (a slot, mostly).", func(p PoolTotals) string { return u(p.QueueServed) }},
		{"spindle_proxy_pool_queue_wait_seconds_total", "counter", "Time the waits that ended with their turn spent in the pool's queue (over spindle_proxy_pool_queue_served_total: the mean wait).", func(p PoolTotals) string {
			return strconv.FormatFloat(p.QueueWait.Seconds(), 'f', -1, 64)
		}},
	} {
		family(m.name, m.typ, m.help)
		for _, pl := range t.Pools {
			fmt.Fprintf(bw, "%s{pool=\"%s\"} %s\n", m.name, escape(pl.Name), m.v(pl))
		}
	}
	family("spindle_proxy_server_http_requests_total", "counter", "HTTP requests sent to the server (mode http; a retried one twice), on a connection from the idle pool (conn=\"reused\") or a new one (conn=\"new\").")
	for _, s := range t.Servers {
		fmt.Fprintf(bw, "spindle_proxy_server_http_requests_total{pool=\"%s\",server=\"%s\",conn=\"reused\"} %d\n", escape(s.Pool), escape(s.Server), s.ReusedRequests)
		fmt.Fprintf(bw, "spindle_proxy_server_http_requests_total{pool=\"%s\",server=\"%s\",conn=\"new\"} %d\n", escape(s.Pool), escape(s.Server), s.NewRequests)
	}
	writeObserved(bw, t, family)
	writeRateLimits(bw, t, family)
	p.mu.RLock()
	pools := p.pools
	p.mu.RUnlock()
	writeRetries(bw, pools, family)
	es := p.e.Stats()
	family("spindle_proxy_engine_open_connections", "gauge", "Engine connections open, client and upstream.")
	fmt.Fprintf(bw, "spindle_proxy_engine_open_connections %d\n", es.Open)
	family("spindle_proxy_engine_paused_reads_total", "counter", "Times a write queue reached the high-water mark (the proxy then pauses reading the side that feeds it).")
	fmt.Fprintf(bw, "spindle_proxy_engine_paused_reads_total %d\n", es.PausedReads)
	family("spindle_proxy_engine_timed_out_total", "counter", "Connections reset because their write queue did not move for engine.write_timeout, or their close did not finish within engine.close_timeout.")
	fmt.Fprintf(bw, "spindle_proxy_engine_timed_out_total %d\n", es.TimedOut)
	family("spindle_proxy_engine_tls_handshakes", "gauge", "TLS handshakes in progress, clients' and the pools' connections'.")
	fmt.Fprintf(bw, "spindle_proxy_engine_tls_handshakes %d\n", es.TLSHandshakes)
	family("spindle_proxy_engine_tls_handshakes_refused_total", "counter", "Clients reset at the accept by a tls listener holding its max_handshakes: every listener's since the start, those a reload removed or replaced included (by listener: spindle_proxy_listener_tls_handshakes_refused_total).")
	fmt.Fprintf(bw, "spindle_proxy_engine_tls_handshakes_refused_total %d\n", es.TLSHandshakesRefused)
	p.writeReloadMetrics(bw, family)
	return bw.Flush()
}

// labelEscaper escapes a label value: backslash, double quote and newline.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// escape escapes a label value (labelEscaper).
func escape(s string) string { return labelEscaper.Replace(s) }
