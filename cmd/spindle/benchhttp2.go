package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spindlenet/spindle/bench"
)

// runBenchHTTP2 is `spindle bench http2`: HTTP/2 servers (h2c with prior
// knowledge) side by side under h2load.
func runBenchHTTP2(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench http2", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spindle bench http2 [flags]    HTTP/2 servers (spindle uring and epoll, Go's net/http, nginx) side by side, h2c with prior knowledge,\n"+
			"       under h2load (apt-get install nghttp2-client) pinned to the client CPUs, closed loop; every request verified\n\n"+
			"The measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):\n"+
			"  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench http2 --duration 120s --reps 5 --server-cpus 0 --client-cpus 1 --out bench-http2-report")
		fs.PrintDefaults()
	}
	arms := fs.String("arms", "", "comma-separated arms, of "+bench.HTTP2ArmsFlag()+" (default: all); ratios are to the first that runs")
	duration := fs.Duration("duration", bench.DefaultHTTP2Duration, "total measuring budget, shared among the measurements")
	reps := fs.Int("reps", bench.DefaultHTTP2Reps, "repetitions (arms alternate within each)")
	conns := fs.Int("conns", bench.DefaultHTTP2Conns, "h2load connections (-c)")
	streams := fs.String("streams", "1,10", "streams in flight per connection (h2load -m), each value a load point of its own")
	body := fs.Int("body", bench.DefaultHTTP2Body, "response body bytes")
	serverCPUs := fs.String("server-cpus", "", "CPUs the server is pinned to (default: the first CPU this process may run on)")
	clientCPUs := fs.String("client-cpus", "", "CPUs h2load is pinned to, one thread each (default: the second CPU this process may run on, the first on one CPU)")
	out := fs.String("out", "bench-http2-report", "directory for report.json and report.md (\"\" for none; with --json, none unless set)")
	jsonOut := fs.Bool("json", false, "print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *duration <= 0:
		return usageError{errors.New("want a positive --duration")}
	case *reps < 1 || *conns < 1:
		return usageError{errors.New("want --reps and --conns of at least 1")}
	case *body < bench.MinHTTP2Body || *body > bench.MaxHTTP2Body:
		return usageError{fmt.Errorf("want a --body of %d to %d bytes", bench.MinHTTP2Body, bench.MaxHTTP2Body)}
	}
	cfg := bench.HTTP2Config{Duration: *duration, Reps: *reps, Conns: *conns, Body: *body, Progress: os.Stderr}
	var err error
	if cfg.Streams, err = intList("--streams", *streams, 1); err != nil {
		return usageError{err}
	}
	if *arms != "" {
		cfg.Arms = strings.Split(*arms, ",")
	}
	if cfg.ServerCPUs, err = bench.ParseCPUList(*serverCPUs); err != nil {
		return usageError{fmt.Errorf("--server-cpus: %w", err)}
	}
	if cfg.ClientCPUs, err = bench.ParseCPUList(*clientCPUs); err != nil {
		return usageError{fmt.Errorf("--client-cpus: %w", err)}
	}
	if *jsonOut && !flagGiven(fs, "out") {
		*out = ""
	}
	f := benchFlags{out: *out, jsonOut: *jsonOut}
	return runAndEmit(&f, func() (*bench.HTTP2Report, error) { return bench.RunHTTP2(ctx, cfg) }, func(rep *bench.HTTP2Report) error {
		return f.emitReport(rep, func(dir string) error { return bench.WriteHTTP2Report(dir, rep) },
			func(w io.Writer) { bench.WriteHTTP2Table(w, rep) }, bench.ReportMarkdown, bench.ReportJSON)
	})
}
