package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spindlenet/spindle/bench"
)

// abUsage is bench ab's synopsis and example.
const abUsage = "usage: spindle bench ab [flags] \"NAME=COMMAND ARGS...\" \"NAME=COMMAND ARGS...\" ...\n" +
	"  server builds paired: each repetition starts every arm's server in turn (with -listen 127.0.0.1:0 -cpus SERVER-CPUS -control\n" +
	"  appended: any program speaking `spindle bench server`'s flags and -control), the arms alternated, in reverse order in even\n" +
	"  repetitions, runs the bench client against it, and takes the server process's CPU (getrusage, exited threads included) per request\n" +
	"  over the window; each arm's is divided by the first arm's (the base) of the same repetition. Flags go before the arms;\n" +
	"  each arm is one argument (quote it), its command split at white space.\n\n" +
	"Example, a build against the one before it at 60,000 req/s, 10 repetitions:\n" +
	"  spindle bench ab --reps 10 --rate 60000 \"base=/tmp/spindle-base bench server -arm uring\" \"new=/tmp/spindle bench server -arm uring\"\n" +
	"The C server: cc -O2 -o /tmp/cecho bench/cpeer/echo.c -luring, and the arm \"c=/tmp/cecho -arm c-liburing\"."

// abFlags are bench ab's flags.
type abFlags struct {
	reps, conns, payload   int
	rate                   float64
	duration, warmup       time.Duration
	serverCPUs, clientCPUs string
	emit                   benchFlags
}

func (f *abFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.reps, "reps", bench.DefaultABReps, "repetitions (each measures every arm once, the arms alternated, in reverse order in even ones)")
	fs.Float64Var(&f.rate, "rate", 0, "offered requests per second (0: closed loop)")
	fs.IntVar(&f.payload, "payload", bench.DefaultABPayload, "RPC payload bytes")
	fs.IntVar(&f.conns, "conns", bench.DefaultABConns, "client connections")
	fs.DurationVar(&f.duration, "duration", bench.DefaultABWindow, "each measurement's measured window")
	fs.DurationVar(&f.warmup, "warmup", bench.DefaultABWarmup, "each measurement's dropped warm-up")
	fs.StringVar(&f.serverCPUs, "server-cpus", "", "the servers' -cpus (default: the first CPU this process may run on)")
	fs.StringVar(&f.clientCPUs, "client-cpus", "", "CPUs the client threads, and the harness's own, are pinned to (default: the next CPU this process may run on)")
	fs.StringVar(&f.emit.out, "out", "bench-ab-report", "directory for report.json and report.md (\"\" for none; with --json, none unless set)")
	fs.BoolVar(&f.emit.jsonOut, "json", false, "print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)")
}

// parseABArgs parses bench ab's command line into a configuration: the
// flags, then the arms. Its errors are usageErrors.
func parseABArgs(fs *flag.FlagSet, f *abFlags, args []string) (bench.ABConfig, error) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(nil)
	if err != nil {
		fs.Usage()
		if errors.Is(err, flag.ErrHelp) {
			return bench.ABConfig{}, err
		}
		return bench.ABConfig{}, usageError{err: err, shown: true}
	}
	switch {
	case f.reps < 1 || f.conns < 1:
		return bench.ABConfig{}, usageError{err: errors.New("want --reps and --conns of at least 1")}
	case f.duration <= 0 || f.warmup <= 0:
		return bench.ABConfig{}, usageError{err: errors.New("want a positive --duration and --warmup")}
	case !(f.rate >= 0 && f.rate <= bench.MaxRate): // NaN too
		return bench.ABConfig{}, usageError{err: fmt.Errorf("--rate %v: want 0 (closed loop) to %v requests per second", f.rate, bench.MaxRate)}
	case f.payload < bench.MinPayload || f.payload > bench.MaxPayload:
		return bench.ABConfig{}, usageError{err: fmt.Errorf("want a --payload of %d to %d bytes", bench.MinPayload, bench.MaxPayload)}
	}
	cfg := bench.ABConfig{
		Reps: f.reps, Rate: f.rate, Payload: f.payload, Conns: f.conns, Warmup: f.warmup, Window: f.duration, Progress: os.Stderr,
	}
	for _, s := range fs.Args() {
		if strings.HasPrefix(s, "-") {
			return cfg, usageError{err: fmt.Errorf("%q after the arms: flags go before them", s)}
		}
		a, err := bench.ParseABArm(s)
		if err != nil {
			return cfg, usageError{err: err}
		}
		cfg.Arms = append(cfg.Arms, a)
	}
	if err := bench.CheckABArms(cfg.Arms); err != nil {
		return cfg, usageError{err: err}
	}
	if err := parseCPUFlags(cpuListFlag{"server-cpus", f.serverCPUs, &cfg.ServerCPUs}, cpuListFlag{"client-cpus", f.clientCPUs, &cfg.ClientCPUs}); err != nil {
		return cfg, err
	}
	f.emit.jsonOnly(fs)
	return cfg, nil
}

// runBenchAB is `spindle bench ab`: server builds, or any servers speaking
// bench server's flags, paired (bench.RunAB).
func runBenchAB(ctx context.Context, args []string) error {
	fs := newBenchFlagSet("bench ab", abUsage)
	var f abFlags
	f.register(fs)
	cfg, err := parseABArgs(fs, &f, args)
	if err != nil {
		return err
	}
	return runAndEmit(&f.emit, func() (*bench.ABReport, error) { return bench.RunAB(ctx, cfg) }, func(rep *bench.ABReport) error {
		return f.emit.emitReport(rep, func(dir string) error { return bench.WriteABReport(dir, rep) },
			func(w io.Writer) { bench.WriteABTable(w, rep) }, bench.ReportMarkdown, bench.ReportJSON)
	})
}
