package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spindlenet/spindle/bench"
)

// runBenchHTTP2 is `spindle bench http2`: HTTP/2 servers (h2c with prior
// knowledge) side by side under h2load.
func runBenchHTTP2(ctx context.Context, args []string) error {
	fs := newBenchFlagSet("bench http2", "usage: spindle bench http2 [flags]    HTTP/2 servers (spindle uring and epoll, Go's net/http, nginx) side by side, h2c with prior knowledge,\n"+
		"       under h2load (apt-get install nghttp2-client) pinned to the client CPUs, closed loop; every request's status and body length checked, a reply checked whole before and after each load\n\n"+
		"The measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):\n"+
		"  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench http2 --duration 120s --reps 5 --server-cpus 0 --client-cpus 1 --out bench-http2-report")
	var s sideFlags
	s.register(fs, sideDefaults{
		duration: bench.DefaultHTTP2Duration, reps: bench.DefaultHTTP2Reps, conns: bench.DefaultHTTP2Conns, out: "bench-http2-report",
		armsHelp:    "comma-separated arms, of " + bench.HTTP2ArmsFlag() + " (default: all); ratios are to the first that runs",
		connsHelp:   "h2load connections (-c)",
		streamsHelp: "streams in flight per connection (h2load -m, at most 100), each value a load point of its own",
		jsonHelp:    "print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)",

		ratioFigures: "server CPU per request and p99",
		ratioDefault: bench.DefaultHTTP2RatioTo,
	})
	body := fs.Int("body", bench.DefaultHTTP2Body, "response body bytes")
	serverCPUs := fs.String("server-cpus", "", "CPUs the server is pinned to (default: the first CPU this process may run on)")
	clientCPUs := fs.String("client-cpus", "", "CPUs h2load is pinned to, one thread each (default: the second CPU this process may run on, the first that is not --server-cpus' when that one is, the first on one CPU)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if err := bench.CheckHTTP2Arms(s.armList()); err != nil {
		return usageError{err: fmt.Errorf("--arms: %w", err)}
	}
	if *body < bench.MinHTTP2Body || *body > bench.MaxHTTP2Body {
		return usageError{err: fmt.Errorf("want a --body of %d to %d bytes", bench.MinHTTP2Body, bench.MaxHTTP2Body)}
	}
	if err := s.checkRatioTo(bench.HTTP2Arms); err != nil {
		return err
	}
	cfg := bench.HTTP2Config{Duration: s.duration, Reps: s.reps, Conns: s.conns, Body: *body, Arms: s.armList(), RatioTo: ratioToList(s.ratioTo), Progress: os.Stderr}
	var err error
	if cfg.Streams, err = s.streamList(); err != nil {
		return err
	}
	if err := parseCPUFlags(cpuListFlag{"server-cpus", *serverCPUs, &cfg.ServerCPUs}, cpuListFlag{"client-cpus", *clientCPUs, &cfg.ClientCPUs}); err != nil {
		return err
	}
	return runSide(&s, fs, func() (*bench.HTTP2Report, error) { return bench.RunHTTP2(ctx, cfg) }, bench.WriteHTTP2Report, bench.WriteHTTP2Table)
}
