package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spindlenet/spindle/bench"
)

// runBenchProxy is `spindle bench proxy`: L4 or HTTP/1.1 proxies, or
// HTTP/2 clients through HTTP reverse proxies, side by side in front of one
// upstream server (the bench server's echo, or an h2c server of bench
// http2).
func runBenchProxy(ctx context.Context, args []string) error {
	fs := newBenchFlagSet("bench proxy", "usage: spindle bench proxy [flags]    L4 (or, with --protocol http, HTTP/1.1) proxies (spindle uring and epoll, HAProxy, nginx) and no proxy, side by side in front of one echo server, closed loop;\n"+
		"       with --protocol h2, HTTP/2 clients (h2load, apt-get install nghttp2-client, pinned to the client CPUs; every request's status and body length checked, a reply checked whole before and after each load) through those proxies to the HTTP/1.1 echo;\n"+
		"       with --protocol h2h2, the same clients through those proxies speaking HTTP/2 to an h2c server of bench http2 (--upstream-arm), and straight to it (direct);\n"+
		"       with --tls, in any protocol, the proxies terminating TLS 1.3 on the client side (a throwaway certificate made at the start; no direct arm);\n"+
		"       with --tls-handshakes (tcp, http), a connection and a full TLS handshake per request, --tls-resume a resumed one\n\n"+
		"The h2 measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):\n"+
		"  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench proxy --protocol h2 --duration 120s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2-report\n"+
		"The h2h2 measurement (5 arms × 2 streams values × 5 reps: 3 s each):\n"+
		"  /tmp/spindle bench proxy --protocol h2h2 --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2h2-report\n"+
		"The TLS measurement (4 arms × 5 reps: 7.5 s each, 1.5 s of it warm-up):\n"+
		"  /tmp/spindle bench proxy --tls --protocol http --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-tls-report\n"+
		"The TLS handshake measurement (4 arms × 3 reps: 7.5 s each):\n"+
		"  /tmp/spindle bench proxy --tls-handshakes --protocol http --duration 90s --reps 3 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-tls-handshakes-report")
	protocol := fs.String("protocol", bench.DefaultProxyProtocol, "tcp: L4 proxies, the RPC echo; http: HTTP/1.1 reverse proxies, keep-alive POSTs of the payload, echoed; h2: HTTP/2 clients (h2load GETs, h2c with prior knowledge) through reverse proxies to the HTTP/1.1 echo (no direct arm: the echo does not speak h2c); h2h2: those clients through reverse proxies speaking HTTP/2 to an h2c upstream (spindle's pool protocol h2c, HAProxy's proto h2, nginx's grpc_pass), and direct")
	var s sideFlags
	s.register(fs, sideDefaults{
		duration: bench.DefaultProxyDuration, reps: bench.DefaultProxyReps, conns: bench.DefaultProxyConns, out: "bench-proxy-report",
		armsHelp:    "comma-separated arms, of " + bench.ProxyArmsFlag() + "; ratios are to the first",
		connsHelp:   "client connections, one request in flight each (with --protocol h2 and h2h2, --streams each)",
		streamsHelp: "with --protocol h2 or h2h2: streams in flight per connection (h2load -m, at most 100), each value a load point of its own",
		jsonHelp:    "print the report as one JSON document on stdout",

		ratioFigures: "proxy CPU, upstream CPU and their sum per request and p99 (direct has no proxy CPU)",
		ratioDefault: bench.DefaultProxyRatioTo,
	})
	payload := fs.Int("payload", bench.DefaultProxyPayload, "payload bytes (the RPC payload, or the HTTP request and response body; with h2 and h2h2 the response body)")
	proxyCPU := fs.String("proxy-cpu", "", "CPUs the proxy is pinned to (default: the first CPU this process may run on)")
	clientCPUs := fs.String("client-cpus", "", "CPUs the client threads, and the harness's own (its Go runtime's included), are pinned to (default: the second CPU this process may run on, the first that is not --proxy-cpu's when that one is, the first on one CPU)")
	upstreamCPUs := fs.String("upstream-cpus", "", "CPUs the upstream server is pinned to (default: the client CPUs)")
	useTLS := fs.Bool("tls", false, "the proxies terminate TLS 1.3 on the client side (spindle's tls:, HAProxy's bind … ssl crt, nginx's listen … ssl) with a throwaway self-signed ECDSA P-256 certificate made at the run's start; the clients speak TLS on keep-alive connections, each handshaking once before its measurement (h2 and h2h2: h2load over https, HTTP/2 by ALPN); the upstream side stays plain; no direct arm")
	handshakes := fs.Bool("tls-handshakes", false, "with --protocol tcp or http (implies --tls): every request on a connection of its own, with a full TLS 1.3 handshake (the client offers no resumption), --conns connection slots in closed loop, each connecting, handshaking, sending one request, verifying the reply and closing (the client first); the run fails where a connection resumed")
	resume := fs.Bool("tls-resume", false, "--tls-handshakes with session resumption: the client offers the last ticket it was sent on every connection; the run fails where more than one connection a slot made a full handshake")
	upstreamArm := fs.String("upstream-arm", "", "the upstream server's arm: with --protocol tcp, http or h2 one of bench server's, each answering the RPC echo and HTTP/1.1: "+strings.Join(bench.ProxyUpstreamArms(bench.ProxyProtocolTCP), ", ")+" (default "+bench.DefaultProxyUpstreamArm+"); with --protocol h2h2 one of bench http2's h2c servers: "+strings.Join(bench.ProxyUpstreamArms(bench.ProxyProtocolH2H2), ", ")+" (default "+bench.DefaultProxyH2UpstreamArm+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !slices.Contains(bench.ProxyProtocols, *protocol) {
		return usageError{err: fmt.Errorf("want a --protocol of %s", strings.Join(bench.ProxyProtocols, " or "))}
	}
	if err := s.check(); err != nil {
		return err
	}
	if err := bench.CheckProxyArms(s.armList()); err != nil {
		return usageError{err: fmt.Errorf("--arms: %w", err)}
	}
	if *payload < bench.MinPayload || *payload > bench.MaxPayload {
		return usageError{err: fmt.Errorf("want a --payload of %d to %d bytes", bench.MinPayload, bench.MaxPayload)}
	}
	// --tls-resume is --tls-handshakes with resumption: both make a
	// connection per request, which h2load, for h2 and h2h2, does not.
	if (*handshakes || *resume) && *protocol != bench.ProxyProtocolTCP && *protocol != bench.ProxyProtocolHTTP {
		return usageError{err: fmt.Errorf("--tls-handshakes and --tls-resume take --protocol %s or %s, not %s (h2load makes its connections once)", bench.ProxyProtocolTCP, bench.ProxyProtocolHTTP, *protocol)}
	}
	if *upstreamArm != "" {
		if err := bench.CheckProxyUpstreamArm(*protocol, *upstreamArm); err != nil {
			return usageError{err: fmt.Errorf("--upstream-arm: %w", err)}
		}
	}
	if err := s.checkRatioTo(slices.Concat(bench.ProxyArms, bench.ProxyExtraArms)); err != nil {
		return err
	}
	cfg := bench.ProxyConfig{Protocol: *protocol, Duration: s.duration, Reps: s.reps, Conns: s.conns, Payload: *payload, TLS: *useTLS, TLSHandshakes: *handshakes, TLSResume: *resume, UpstreamArm: *upstreamArm, Arms: s.armList(), RatioTo: ratioToList(s.ratioTo), Progress: os.Stderr}
	var err error
	switch {
	case *protocol == bench.ProxyProtocolH2 || *protocol == bench.ProxyProtocolH2H2:
		if cfg.Streams, err = s.streamList(); err != nil {
			return err
		}
	case flagGiven(fs, "streams"):
		return usageError{err: errors.New("--streams is for --protocol h2 and h2h2")}
	}
	err = parseCPUFlags(cpuListFlag{"proxy-cpu", *proxyCPU, &cfg.ProxyCPUs}, cpuListFlag{"client-cpus", *clientCPUs, &cfg.ClientCPUs}, cpuListFlag{"upstream-cpus", *upstreamCPUs, &cfg.UpstreamCPUs})
	if err != nil {
		return err
	}
	return runSide(&s, fs, func() (*bench.ProxyReport, error) { return bench.RunProxy(ctx, cfg) }, bench.WriteProxyReport, bench.WriteProxyTable)
}
