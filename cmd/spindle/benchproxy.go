package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
	fs := flag.NewFlagSet("bench proxy", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spindle bench proxy [flags]    L4 (or, with --protocol http, HTTP/1.1) proxies (spindle uring and epoll, HAProxy, nginx) and no proxy, side by side in front of one echo server, closed loop;\n"+
			"       with --protocol h2, HTTP/2 clients (h2load, apt-get install nghttp2-client, pinned to the client CPUs; every request verified) through those proxies to the HTTP/1.1 echo;\n"+
			"       with --protocol h2h2, the same clients through those proxies speaking HTTP/2 to an h2c server of bench http2 (--upstream-arm), and straight to it (direct)\n\n"+
			"The h2 measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):\n"+
			"  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench proxy --protocol h2 --duration 120s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2-report\n"+
			"The h2h2 measurement (5 arms × 2 streams values × 5 reps: 3 s each):\n"+
			"  /tmp/spindle bench proxy --protocol h2h2 --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2h2-report")
		fs.PrintDefaults()
	}
	protocol := fs.String("protocol", bench.DefaultProxyProtocol, "tcp: L4 proxies, the RPC echo; http: HTTP/1.1 reverse proxies, keep-alive POSTs of the payload, echoed; h2: HTTP/2 clients (h2load GETs, h2c with prior knowledge) through reverse proxies to the HTTP/1.1 echo (no direct arm: the echo does not speak h2c); h2h2: those clients through reverse proxies speaking HTTP/2 to an h2c upstream (spindle's pool protocol h2c, HAProxy's proto h2, nginx's grpc_pass), and direct")
	streams := fs.String("streams", "1,10", "with --protocol h2 or h2h2: streams in flight per connection (h2load -m), each value a load point of its own")
	arms := fs.String("arms", "", "comma-separated arms, of "+bench.ProxyArmsFlag()+"; ratios are to the first")
	duration := fs.Duration("duration", bench.DefaultProxyDuration, "total measuring budget, shared among the measurements")
	reps := fs.Int("reps", bench.DefaultProxyReps, "repetitions (arms alternate within each)")
	conns := fs.Int("conns", bench.DefaultProxyConns, "client connections, one request in flight each")
	payload := fs.Int("payload", bench.DefaultProxyPayload, "payload bytes (the RPC payload, or the HTTP request and response body; with h2 the response body)")
	proxyCPU := fs.String("proxy-cpu", "", "CPUs the proxy is pinned to (default: the first CPU this process may run on)")
	clientCPUs := fs.String("client-cpus", "", "CPUs the client threads are pinned to (default: the second CPU this process may run on, the first on one CPU)")
	upstreamCPUs := fs.String("upstream-cpus", "", "CPUs the upstream server is pinned to (default: the client CPUs)")
	upstreamArm := fs.String("upstream-arm", "", "the upstream echo server's `spindle bench server` arm (default "+bench.DefaultProxyUpstreamArm+"; with --protocol http or h2 one that answers HTTP/1.1: go-net, epoll, uring); with --protocol h2h2 the upstream h2c server's `spindle bench http2` arm, of "+bench.HTTP2ArmsFlag()+" (default "+bench.DefaultProxyH2UpstreamArm+")")
	out := fs.String("out", "bench-proxy-report", "directory for report.json and report.md (\"\" for none; with --json, none unless set)")
	jsonOut := fs.Bool("json", false, "print the report as one JSON document on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case !slices.Contains(bench.ProxyProtocols, *protocol):
		return usageError{fmt.Errorf("want a --protocol of %s", strings.Join(bench.ProxyProtocols, " or "))}
	case *duration <= 0:
		return usageError{errors.New("want a positive --duration")}
	case *reps < 1 || *conns < 1:
		return usageError{errors.New("want --reps and --conns of at least 1")}
	case *payload < bench.MinPayload || *payload > bench.MaxPayload:
		return usageError{fmt.Errorf("want a --payload of %d to %d bytes", bench.MinPayload, bench.MaxPayload)}
	}
	cfg := bench.ProxyConfig{Protocol: *protocol, Duration: *duration, Reps: *reps, Conns: *conns, Payload: *payload, UpstreamArm: *upstreamArm, Progress: os.Stderr}
	if *arms != "" {
		cfg.Arms = strings.Split(*arms, ",")
	}
	var err error
	switch {
	case *protocol == bench.ProxyProtocolH2 || *protocol == bench.ProxyProtocolH2H2:
		if cfg.Streams, err = intList("--streams", *streams, 1); err != nil {
			return usageError{err}
		}
	case flagGiven(fs, "streams"):
		return usageError{errors.New("--streams is for --protocol h2 and h2h2")}
	}
	for _, l := range []struct {
		name string
		s    string
		dst  *[]int
	}{{"proxy-cpu", *proxyCPU, &cfg.ProxyCPUs}, {"client-cpus", *clientCPUs, &cfg.ClientCPUs}, {"upstream-cpus", *upstreamCPUs, &cfg.UpstreamCPUs}} {
		if *l.dst, err = bench.ParseCPUList(l.s); err != nil {
			return usageError{fmt.Errorf("--%s: %w", l.name, err)}
		}
	}
	if *jsonOut && !flagGiven(fs, "out") {
		*out = ""
	}
	f := benchFlags{out: *out, jsonOut: *jsonOut}
	return runAndEmit(&f, func() (*bench.ProxyReport, error) { return bench.RunProxy(ctx, cfg) }, func(rep *bench.ProxyReport) error {
		return f.emitReport(rep, func(dir string) error { return bench.WriteProxyReport(dir, rep) },
			func(w io.Writer) { bench.WriteProxyTable(w, rep) }, bench.ReportMarkdown, bench.ReportJSON)
	})
}
