package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spindlenet/spindle/bench"
)

func init() {
	register("bench", "measure arms side by side: latency and CPU per request (bench sweep|proxy|http2|ab|server|client)", runBench)
}

// benchFlags are the flags shared by bench and bench sweep.
type benchFlags struct {
	arms, topology, serverCPUs, clientCPUs, spareCPUs, peersDir, out, ratioTo string
	duration, warmup, window                                                  time.Duration
	reps, conns, inflight, payload, compute, loops                            int
	threads                                                                   int
	jsonOut, block                                                            bool
	serverRPS                                                                 []string
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	var names, optIn []string
	for _, a := range bench.Arms() {
		names = append(names, a.Name)
		if a.OptIn {
			optIn = append(optIn, a.Name)
		}
	}
	def := "every arm that can run here"
	if len(optIn) > 0 {
		def += " but " + strings.Join(optIn, ", ") + ", run only when named"
	}
	fs.StringVar(&f.arms, "arms", "", "comma-separated arms to run, of "+strings.Join(names, ", ")+" (default: "+def+")")
	fs.StringVar(&f.topology, "topology", "loopback", "loopback, or wire (two netns joined by a veth pair; root)")
	fs.DurationVar(&f.duration, "duration", 100*time.Second, "total measuring budget, shared among the measurements (start-up and drains add about a fifth); each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report")
	fs.DurationVar(&f.warmup, "warmup", 0, "each measurement's dropped warm-up (default: a fifth of its share of --duration, at least 50ms and at most 1s; with --window, the two within the share)")
	fs.DurationVar(&f.window, "window", 0, "each measurement's measured window (default: the rest of its share of --duration; with --warmup, the two within the share)")
	fs.IntVar(&f.reps, "reps", 3, "repetitions of each measurement (arms alternate within each, in reverse order in even ones)")
	fs.IntVar(&f.conns, "conns", 50, "client connections")
	fs.IntVar(&f.inflight, "inflight", 1, "closed-loop requests in flight per connection")
	fs.IntVar(&f.payload, "payload", bench.DefaultPayload, "RPC payload bytes")
	fs.IntVar(&f.compute, "compute-us", 0, "µs the server spins per request before replying, on the wall clock (CLOCK_MONOTONIC, not the thread's CPU time: an interrupt, softirq or preemption meanwhile is inside them, not added)")
	fs.IntVar(&f.loops, "loops", 1, "server event loops")
	fs.StringVar(&f.serverCPUs, "server-cpus", "", "CPUs the server is pinned to (default: the first CPUs this process may run on, one per loop)")
	fs.StringVar(&f.clientCPUs, "client-cpus", "", "CPUs the client threads, and the harness's own (its Go runtime's included), are pinned to (default: the first CPU this process may run on that is not the server's, looked for from the one after the default server CPUs, or from the second when --server-cpus is given, and then from the start; the last when every one is the server's)")
	fs.StringVar(&f.spareCPUs, "spare-cpus", "", "CPUs for arms' polling threads (uring-sqpoll), default: CPUs neither server nor client")
	fs.IntVar(&f.threads, "client-threads", 0, "client threads, at most --conns (default: one per client CPU, at most --conns)")
	fs.BoolVar(&f.block, "client-block", false, "client threads sleep in epoll_wait instead of polling (the server then pays for waking them)")
	fs.Func("server-rps", "wire topology: RPS CPUs (a CPU list, or none) for the server veth's receive queues; repeat it to measure every arm under each, alternated", func(v string) error {
		v = strings.TrimSpace(v)
		if slices.Contains(f.serverRPS, v) {
			return fmt.Errorf("%s given twice", v) // measured twice, summarised as one
		}
		if v != "none" {
			if cpus, err := bench.ParseCPUList(v); err != nil || len(cpus) == 0 {
				return fmt.Errorf("%q is neither a CPU list nor none", v)
			}
		}
		f.serverRPS = append(f.serverRPS, v)
		return nil
	})
	fs.StringVar(&f.ratioTo, "ratio-to", "", "comma-separated reference arms: the report divides every other arm's server CPU per request and p99 by each one's of the same repetition (\"none\" for no ratios; default: go-net, gnet and c-liburing, those of them that run)")
	fs.StringVar(&f.peersDir, "peers-dir", "", "bench/peers module source (default: found from the working directory)")
	fs.StringVar(&f.out, "out", "bench-report", "directory for report.json, report.md and report.html (\"\" for none; with --json, none unless set)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)")
}

func (f *benchFlags) config(fs *flag.FlagSet) (bench.Config, error) {
	// The package takes zero for a default and some negatives for zero;
	// a value given here means what it says, or is refused.
	switch {
	case f.duration <= 0 || f.warmup < 0 || f.window < 0:
		return bench.Config{}, usageError{err: errors.New("want a positive --duration, and --warmup and --window not negative")}
	case f.reps < 1 || f.conns < 1 || f.inflight < 1 || f.loops < 1:
		return bench.Config{}, usageError{err: errors.New("want --reps, --conns, --inflight and --loops of at least 1")}
	case f.compute < 0 || f.threads < 0:
		return bench.Config{}, usageError{err: errors.New("want --compute-us and --client-threads not negative")}
	case f.threads > f.conns:
		// A client thread drives at least one connection: the load
		// generator would run --conns threads, the report saying more.
		return bench.Config{}, usageError{err: fmt.Errorf("--client-threads %d is more than --conns %d (each thread needs one of them)", f.threads, f.conns)}
	case f.payload < bench.MinPayload || f.payload > bench.MaxPayload:
		return bench.Config{}, usageError{err: fmt.Errorf("want a --payload of %d to %d bytes", bench.MinPayload, bench.MaxPayload)}
	}
	cfg := bench.Config{
		Topology: f.topology, Duration: f.duration, Warmup: f.warmup, Window: f.window, Reps: f.reps, Conns: f.conns, InFlight: f.inflight,
		Payload: f.payload, ComputeUS: f.compute, Loops: f.loops, ClientThreads: f.threads, ClientBlock: f.block,
		PeersDir: f.peersDir, Progress: os.Stderr, ServerRPS: f.serverRPS,
	}
	if f.arms != "" {
		cfg.Arms = strings.Split(f.arms, ",")
		// An arm named twice would be measured twice in a row and
		// summarised as one arm of twice --reps.
		if a := givenTwice(cfg.Arms); a != "" {
			return cfg, usageError{err: fmt.Errorf("--arms: %s given twice", a)}
		}
		for _, a := range cfg.Arms {
			if _, err := bench.LookupArm(a); err != nil {
				return cfg, usageError{err: fmt.Errorf("--arms: %w", err)}
			}
		}
	}
	if err := bench.CheckTopology(f.topology); err != nil {
		return cfg, usageError{err: fmt.Errorf("--topology: %w", err)}
	}
	if len(f.serverRPS) > 0 && f.topology != "wire" {
		return cfg, usageError{err: errors.New("--server-rps needs --topology wire (loopback has no veth to steer)")}
	}
	cfg.RatioTo = ratioToList(f.ratioTo)
	// A reference is one of --arms, or of every arm when none is given
	// (the package checks it against the arms that run).
	refArms := cfg.Arms
	if refArms == nil {
		for _, a := range bench.Arms() {
			refArms = append(refArms, a.Name)
		}
	}
	if err := bench.CheckRatioTo(cfg.RatioTo, refArms); err != nil {
		return cfg, usageError{err: fmt.Errorf("--ratio-to: %w", err)}
	}
	err := parseCPUFlags(cpuListFlag{"server-cpus", f.serverCPUs, &cfg.ServerCPUs}, cpuListFlag{"client-cpus", f.clientCPUs, &cfg.ClientCPUs}, cpuListFlag{"spare-cpus", f.spareCPUs, &cfg.SpareCPUs})
	if err != nil {
		return cfg, err
	}
	f.jsonOnly(fs)
	return cfg, nil
}

// jsonOnly drops --out's default when --json is given without --out: the
// report then goes to stdout alone.
func (f *benchFlags) jsonOnly(fs *flag.FlagSet) {
	if f.jsonOut && !flagGiven(fs, "out") {
		f.out = ""
	}
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// prepareOut makes the --out directory and checks that the report's files
// can be written there before the run, so that a directory that cannot
// be made, or a report file that is a directory, fails at once, not after
// the run with its results lost (and an earlier report partly replaced).
// It returns a function that removes the directory again, if it made it
// and it is still empty, for a run that fails.
func (f *benchFlags) prepareOut() (undo func(), err error) {
	undo = func() {}
	if f.out == "" {
		return undo, nil
	}
	_, statErr := os.Stat(f.out)
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return undo, fmt.Errorf("--out: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		undo = func() { os.Remove(f.out) }
	}
	for _, name := range []string{bench.ReportJSON, bench.ReportMarkdown, bench.ReportHTML} {
		path := filepath.Join(f.out, name)
		if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
			undo()
			return func() {}, fmt.Errorf("--out: %s exists and is not a regular file", path)
		}
	}
	tmp, err := os.CreateTemp(f.out, ".spindle-write-check-")
	if err != nil {
		undo()
		return func() {}, fmt.Errorf("--out: %w", err)
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return undo, nil
}

// emit writes the report to --out and prints it; a report that cannot be
// written is still printed, so the run's results are not lost, and the
// write's error returned.
func (f *benchFlags) emit(rep *bench.Report) error {
	return f.emitReport(rep, func(dir string) error { return bench.WriteReport(dir, rep) },
		func(w io.Writer) { bench.WriteTable(w, rep) }, bench.ReportHTML, bench.ReportMarkdown, bench.ReportJSON)
}

// runAndEmit checks --out (prepareOut), runs, and emits the report; a run
// that fails removes the --out directory prepareOut made.
func runAndEmit[R any](f *benchFlags, run func() (R, error), emit func(R) error) error {
	undo, err := f.prepareOut()
	if err != nil {
		return err
	}
	rep, err := run()
	if err != nil {
		undo()
		return err
	}
	return emit(rep)
}

// emitReport is emit for any report: write writes its files (named files)
// into a directory, table prints it.
func (f *benchFlags) emitReport(rep any, write func(dir string) error, table func(io.Writer), files ...string) error {
	var werr error
	if f.out != "" {
		if err := write(f.out); err != nil {
			werr = fmt.Errorf("writing the report to %s: %w", f.out, err)
		}
	}
	if f.jsonOut {
		return errors.Join(printJSON(os.Stdout, rep), werr)
	}
	table(os.Stdout)
	if f.out != "" && werr == nil {
		fmt.Printf("report: %s/%s\n", f.out, strings.Join(files, ", "))
	}
	return werr
}

func runBench(ctx context.Context, args []string) error {
	if len(args) > 0 {
		var run func(ctx context.Context, args []string) error
		switch args[0] {
		case "server":
			run = func(ctx context.Context, args []string) error {
				return serveUsage(bench.ServeMain(ctx, args, os.Stdin, os.Stdout))
			}
		case "client":
			run = runBenchClient
		case "sweep":
			run = runBenchSweep
		case "proxy":
			run = runBenchProxy
		case "http2":
			run = runBenchHTTP2
		case "ab":
			run = runBenchAB
		case "http2-server":
			run = func(ctx context.Context, args []string) error { return serveUsage(bench.ServeHTTP2Main(ctx, args)) }
		}
		if run != nil {
			return inSubcommand(args[0], run(ctx, args[1:]))
		}
	}
	fs := newBenchFlagSet("bench", "usage: spindle bench [flags]            every arm: closed-loop peak, then open loop at 50% and 80% of the slowest peak\n"+
		"       spindle bench sweep [flags]      closed-loop grid of loops × compute-us × arm\n"+
		"       spindle bench proxy [flags]      proxies side by side (spindle, HAProxy, nginx, none), L4, HTTP/1.1 or HTTP/2 (--protocol), in front of one upstream server\n"+
		"       spindle bench http2 [flags]      HTTP/2 servers side by side (spindle, Go's net/http, nginx), h2c under h2load\n"+
		"       spindle bench ab [flags] ARMS    server builds paired by repetition: server CPU per request, each arm ÷ the first (\"NAME=COMMAND ARGS...\" each)\n"+
		"       spindle bench server [flags]     the server half (-arm, -listen, -loops, -cpus, -compute-us)\n"+
		"       spindle bench client [flags]     the client half against -addr")
	var f benchFlags
	f.register(fs)
	fractions := fs.String("fractions", "0.5,0.8", "open-loop rates as fractions of the slowest arm's peak")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.config(fs)
	if err != nil {
		return err
	}
	cfg.OpenFractions = []float64{}
	for _, s := range strings.Split(*fractions, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0 && v <= 2) { // NaN too
			return usageError{err: fmt.Errorf("bad --fractions value %q", s)}
		}
		if slices.Contains(cfg.OpenFractions, v) {
			return usageError{err: fmt.Errorf("--fractions: %v given twice", v)} // two rows of one load point
		}
		cfg.OpenFractions = append(cfg.OpenFractions, v)
	}
	// One arm at least runs: each of its repetitions measures the
	// closed-loop peak and every fraction, under each RPS setting.
	if err := f.checkSplit(cfg.Reps * max(len(cfg.ServerRPS), 1) * (1 + len(cfg.OpenFractions))); err != nil {
		return err
	}
	return runAndEmit(&f, func() (*bench.Report, error) { return bench.Run(ctx, cfg) }, f.emit)
}

// checkSplit refuses a --warmup and --window that do not fit in the share
// of --duration of each of least measurements, the fewest the run can
// make whichever arms run here (bench.CheckSplit): a usage error. With
// more arms that can run here, the package may still refuse them once it
// knows the measurements' number, as this host's refusal (exit status 1).
func (f *benchFlags) checkSplit(least int) error {
	if err := bench.CheckSplit(f.duration, least, f.warmup, f.window); err != nil {
		return usageError{err: err}
	}
	return nil
}

// serveUsage is the error of bench server or bench http2-server, which
// parse their own flags (the peers binary runs the first too): their
// bench.UsageError is a usageError.
func serveUsage(err error) error {
	var ue *bench.UsageError
	if errors.As(err, &ue) {
		return usageError{err: ue.Err, shown: ue.UsagePrinted}
	}
	return err
}

func runBenchSweep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench sweep", flag.ContinueOnError)
	var f benchFlags
	f.register(fs)
	loops := fs.String("loops-list", "", "server loop counts (default 1,2 on two or more CPUs, 1 with one CPU in --server-cpus)")
	compute := fs.String("compute-list", "0,10,50", "per-request compute µs values (as --compute-us: spun on the wall clock)")
	fs.Lookup("loops").Usage = "not for a sweep: give --loops-list (the sweep measures each of its loop counts)"
	fs.Lookup("compute-us").Usage = "not for a sweep: give --compute-list (the sweep measures each of its values)"
	// A sweep refuses them: bench's default (--loops 1) is not the
	// sweep's, and its usage prints none.
	fs.Lookup("loops").DefValue = "0"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The grid's axes are the lists: a single --loops or --compute-us
	// would be ignored by the sweep, so it is refused.
	for name, list := range map[string]string{"loops": "loops-list", "compute-us": "compute-list"} {
		if flagGiven(fs, name) {
			return usageError{err: fmt.Errorf("--%s does not apply to a sweep: give --%s", name, list)}
		}
	}
	cfg, err := f.config(fs)
	if err != nil {
		return err
	}
	sc := bench.SweepConfig{Config: cfg}
	if sc.Loops, err = intList("--loops-list", *loops, 1); err != nil {
		return err
	}
	if sc.ComputeUS, err = intList("--compute-list", *compute, 0); err != nil {
		return err
	}
	// The default grid's 2 loops need two server CPUs: with one given in
	// --server-cpus, the sweep was refused, so it is 1 loop alone there,
	// as on a host of one CPU.
	if sc.Loops == nil && len(slices.Compact(slices.Sorted(slices.Values(cfg.ServerCPUs)))) == 1 {
		sc.Loops = []int{1}
	}
	// The harness checks each arm once, at Config.Loops: check it at the
	// smallest loop count of the grid, so that an arm serving none of
	// the grid's cells is skipped with its reason (and a sweep with no
	// arm left fails) instead of measuring nothing.
	if len(sc.Loops) > 0 {
		sc.Config.Loops = slices.Min(sc.Loops)
	}
	// One arm at least runs, at one loop count at least (c-liburing serves
	// one loop only), at each compute value (at least one: the package's
	// own when none is given).
	if err := f.checkSplit(sc.Reps * max(len(sc.ServerRPS), 1) * max(len(sc.ComputeUS), 1)); err != nil {
		return err
	}
	return runAndEmit(&f, func() (*bench.Report, error) { return bench.Sweep(ctx, sc) }, f.emit)
}

// intList parses flag name's comma-separated list of distinct integers of
// at least least; empty is nil (the default). Its errors are usageErrors.
func intList(name, s string, least int) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < least {
			return nil, usageError{err: fmt.Errorf("%s: bad value %q (want integers of at least %d)", name, p, least)}
		}
		if slices.Contains(out, v) {
			return nil, usageError{err: fmt.Errorf("%s: %d given twice", name, v)}
		}
		out = append(out, v)
	}
	return out, nil
}

func runBenchClient(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench client", flag.ContinueOnError)
	addr := fs.String("addr", "", "server host:port (required)")
	conns := fs.Int("conns", 50, "connections")
	inflight := fs.Int("inflight", 1, "closed-loop requests in flight per connection")
	rate := fs.Float64("rate", 0, "open-loop requests per second (0: closed loop)")
	protocol := fs.String("protocol", bench.ProtocolRPC, "rpc (length-prefixed echo) or http (HTTP/1.1 keep-alive POSTs, the payload as the body, each answered with it)")
	host := fs.String("host", "", "-protocol http: the requests' Host field (default -addr)")
	payload := fs.Int("payload", bench.DefaultPayload, "payload bytes (HTTP: request and response body bytes)")
	warmup := fs.Duration("warmup", time.Second, "warm-up, dropped")
	duration := fs.Duration("duration", 10*time.Second, "measured window")
	cpus := fs.String("cpus", "", "CPUs to pin the client to: each load thread to one of them in turn, the process's other threads (the Go runtime's) to all of them")
	threads := fs.Int("threads", 1, "client threads (at most -conns)")
	block := fs.Bool("block", false, "client threads sleep in epoll_wait instead of polling")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *addr == "" {
		return usageError{err: errors.New("-addr is required (the server's host:port)")}
	}
	// The load generator takes 0 for a default (a 128-byte payload, a
	// 200 ms warm-up): a value given here means what it says, or is
	// refused.
	if *conns < 1 || *inflight < 1 || *threads < 1 || *duration <= 0 || *warmup <= 0 {
		return usageError{err: errors.New("want -conns, -inflight and -threads of at least 1, and a positive -duration and -warmup")}
	}
	// A thread drives at least one connection: the load generator would
	// run -conns threads, not the number asked for.
	if *threads > *conns {
		return usageError{err: fmt.Errorf("-threads %d is more than -conns %d (each thread needs one of them)", *threads, *conns)}
	}
	if *payload < bench.MinPayload || *payload > bench.MaxPayload {
		return usageError{err: fmt.Errorf("want a -payload of %d to %d bytes", bench.MinPayload, bench.MaxPayload)}
	}
	if *protocol != bench.ProtocolRPC && *protocol != bench.ProtocolHTTP {
		return usageError{err: fmt.Errorf("-protocol %q: want %s or %s", *protocol, bench.ProtocolRPC, bench.ProtocolHTTP)}
	}
	if !(*rate >= 0 && *rate <= bench.MaxRate) { // NaN too
		return usageError{err: fmt.Errorf("-rate %v: want 0 (closed loop) to %v requests per second", *rate, bench.MaxRate)}
	}
	if *host != "" && *protocol != bench.ProtocolHTTP {
		return usageError{err: fmt.Errorf("-host applies to -protocol %s only", bench.ProtocolHTTP)}
	}
	var cpuList []int
	if err := parseCPUFlags(cpuListFlag{"cpus", *cpus, &cpuList}); err != nil {
		return err
	}
	res, err := bench.RunLoad(ctx, bench.LoadConfig{
		Addr: *addr, Protocol: *protocol, Host: *host, Conns: *conns, InFlight: *inflight, Rate: *rate, Payload: *payload,
		Warmup: *warmup, Duration: *duration, CPUs: cpuList, PinProcess: len(cpuList) > 0, Threads: *threads, Block: *block,
	})
	if err != nil {
		return err
	}
	out := struct {
		OfferedRPS       float64           `json:"offered_rps"`
		AchievedRPS      float64           `json:"achieved_rps"`
		Requests         uint64            `json:"requests"`   // replies received in the window
		Answered         uint64            `json:"answered"`   // requests of the window answered, in it or in the drain
		Unanswered       uint64            `json:"unanswered"` // requests of the window never answered
		Latency          bench.Percentiles `json:"latency"`
		ClientCPUPercent float64           `json:"client_cpu_percent"`
		SendLagP99US     float64           `json:"send_lag_p99_us,omitempty"`
		// Notes are what a bench report would note of this measurement.
		Notes []string `json:"notes,omitempty"`
	}{OfferedRPS: *rate, AchievedRPS: res.Throughput(), Requests: res.Replies, Answered: res.Answered, Unanswered: res.Unanswered,
		Latency: res.Hist.Percentiles(), ClientCPUPercent: res.ClientCPUPercent(), Notes: res.Notes()}
	if res.SendLag != nil {
		out.SendLagP99US = float64(res.SendLag.Quantile(99)) / 1e3
	}
	if *jsonOut {
		return printJSON(os.Stdout, out)
	}
	p := out.Latency
	fmt.Printf("%.0f req/s (%d verified replies, %d unanswered), client CPU %.0f%%\np50 %.1fµs p90 %.1fµs p99 %.1fµs p99.9 %.1fµs p99.99 %.1fµs max %.1fµs\n",
		out.AchievedRPS, out.Requests, out.Unanswered, out.ClientCPUPercent, p.P50, p.P90, p.P99, p.P999, p.P9999, p.Max)
	if res.SendLag != nil {
		fmt.Printf("send lag p99 %.1fµs (how late requests left relative to their intended send times)\n", out.SendLagP99US)
	}
	for _, n := range out.Notes {
		fmt.Println("note: " + n)
	}
	return nil
}

// ratioToList is a --ratio-to value as a list: nil (the default
// references) for "", empty for "none"; bench refuses an arm not run, or
// given twice.
func ratioToList(v string) []string {
	switch v {
	case "":
		return nil
	case "none":
		return []string{}
	}
	var refs []string
	for _, a := range strings.Split(v, ",") {
		refs = append(refs, strings.TrimSpace(a))
	}
	return refs
}
