package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spindlenet/spindle/bench"
)

// runBenchProxy is `spindle bench proxy`: L4 proxies side by side in front
// of one upstream echo server.
func runBenchProxy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench proxy", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spindle bench proxy [flags]    L4 proxies (spindle uring and epoll, HAProxy, nginx) and no proxy, side by side in front of one echo server, closed loop")
		fs.PrintDefaults()
	}
	arms := fs.String("arms", "", "comma-separated arms, of "+bench.ProxyArmsFlag()+" (default: all; ratios are to the first)")
	duration := fs.Duration("duration", 60*time.Second, "total measuring budget, shared among the measurements")
	reps := fs.Int("reps", 3, "repetitions (arms alternate within each)")
	conns := fs.Int("conns", 50, "client connections, one request in flight each")
	payload := fs.Int("payload", 64, "RPC payload bytes")
	proxyCPU := fs.String("proxy-cpu", "", "CPUs the proxy is pinned to (default 0)")
	clientCPUs := fs.String("client-cpus", "", "CPUs the client threads are pinned to (default 1, or 0 on one CPU)")
	upstreamCPUs := fs.String("upstream-cpus", "", "CPUs the upstream echo server is pinned to (default: the client CPUs)")
	upstreamArm := fs.String("upstream-arm", "epoll", "the upstream echo server's `spindle bench server` arm")
	out := fs.String("out", "bench-proxy-report", "directory for report.json and report.md (\"\" for none; with --json, none unless set)")
	jsonOut := fs.Bool("json", false, "print the report as one JSON document on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *duration <= 0:
		return usageError{errors.New("want a positive --duration")}
	case *reps < 1 || *conns < 1:
		return usageError{errors.New("want --reps and --conns of at least 1")}
	case *payload < bench.MinPayload || *payload > bench.MaxPayload:
		return usageError{fmt.Errorf("want a --payload of %d to %d bytes", bench.MinPayload, bench.MaxPayload)}
	}
	cfg := bench.ProxyConfig{Duration: *duration, Reps: *reps, Conns: *conns, Payload: *payload, UpstreamArm: *upstreamArm, Progress: os.Stderr}
	if *arms != "" {
		cfg.Arms = strings.Split(*arms, ",")
	}
	var err error
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
	f := benchFlags{out: *out}
	undo, err := f.prepareOut()
	if err != nil {
		return err
	}
	rep, err := bench.RunProxy(ctx, cfg)
	if err != nil {
		undo()
		return err
	}
	var werr error
	if *out != "" {
		if err := bench.WriteProxyReport(*out, rep); err != nil {
			werr = fmt.Errorf("writing the report to %s: %w", *out, err)
		}
	}
	if *jsonOut {
		return errors.Join(printJSON(os.Stdout, rep), werr)
	}
	bench.WriteProxyTable(os.Stdout, rep)
	if *out != "" && werr == nil {
		fmt.Printf("report: %s/%s, %s\n", *out, bench.ReportMarkdown, bench.ReportJSON)
	}
	return werr
}
