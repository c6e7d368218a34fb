package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spindlenet/spindle/bench"
)

// newBenchFlagSet is the flag set of a bench command: its usage is usage
// (the synopsis, and examples), then the flags.
func newBenchFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}

// sideFlags are the flags bench http2 and bench proxy share, which run
// arms side by side: the arms, the budget, the streams values and where
// the report goes.
type sideFlags struct {
	arms, streams, ratioTo string
	duration               time.Duration
	reps, conns            int
	// emit has --out and --json.
	emit benchFlags
}

// sideDefaults are what differs between those commands' shared flags:
// the defaults, and the help of the flags whose help differs.
type sideDefaults struct {
	duration                                   time.Duration
	reps, conns                                int
	out                                        string
	armsHelp, connsHelp, streamsHelp, jsonHelp string
	// ratioFigures are the figures the paired ratios divide, ratioDefault
	// the default references.
	ratioFigures string
	ratioDefault []string
}

// register adds the shared flags to fs, with d's defaults and help.
func (s *sideFlags) register(fs *flag.FlagSet, d sideDefaults) {
	fs.StringVar(&s.arms, "arms", "", d.armsHelp)
	fs.DurationVar(&s.duration, "duration", d.duration, "total measuring budget, shared among the measurements; each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report")
	fs.IntVar(&s.reps, "reps", d.reps, "repetitions (arms alternate within each, in reverse order in even ones)")
	fs.IntVar(&s.conns, "conns", d.conns, d.connsHelp)
	fs.StringVar(&s.streams, "streams", "1,10", d.streamsHelp)
	fs.StringVar(&s.ratioTo, "ratio-to", "", fmt.Sprintf("comma-separated reference arms: the report divides every other arm's %s by each one's of the same repetition (\"none\" for no ratios; default: %s, those of them that run)", d.ratioFigures, strings.Join(d.ratioDefault, " and ")))
	fs.StringVar(&s.emit.out, "out", d.out, "directory for report.json and report.md (\"\" for none; with --json, none unless set)")
	fs.BoolVar(&s.emit.jsonOut, "json", false, d.jsonHelp)
}

// check refuses a budget the package would take for its default.
func (s *sideFlags) check() error {
	switch {
	case s.duration <= 0:
		return usageError{err: errors.New("want a positive --duration")}
	case s.reps < 1 || s.conns < 1:
		return usageError{err: errors.New("want --reps and --conns of at least 1")}
	}
	return nil
}

// armList is --arms as a list, nil (every arm) when not given.
func (s *sideFlags) armList() []string {
	if s.arms == "" {
		return nil
	}
	return strings.Split(s.arms, ",")
}

// checkRatioTo refuses a --ratio-to reference given twice, or not among
// --arms (all, the command's arms, when --arms is not given).
func (s *sideFlags) checkRatioTo(all []string) error {
	arms := s.armList()
	if arms == nil {
		arms = all
	}
	if err := bench.CheckRatioTo(ratioToList(s.ratioTo), arms); err != nil {
		return usageError{err: fmt.Errorf("--ratio-to: %w", err)}
	}
	return nil
}

// streamList is --streams as a list, each value one that h2load may be
// given against every server (bench.MaxHTTP2Streams at most).
func (s *sideFlags) streamList() ([]int, error) {
	list, err := intList("--streams", s.streams, 1)
	for _, v := range list {
		if v > bench.MaxHTTP2Streams {
			return nil, usageError{err: fmt.Errorf("--streams: %d is more than %d (the least of the servers' concurrent streams limits)", v, bench.MaxHTTP2Streams)}
		}
	}
	return list, err
}

// cpuListFlag is a CPU list flag's name (without --), its value, and where
// the list goes.
type cpuListFlag struct {
	name, value string
	dst         *[]int
}

// parseCPUFlags parses each of flags into its dst, in order.
func parseCPUFlags(flags ...cpuListFlag) error {
	for _, f := range flags {
		var err error
		if *f.dst, err = bench.ParseCPUList(f.value); err != nil {
			return usageError{err: fmt.Errorf("--%s: %w", f.name, err)}
		}
	}
	return nil
}

// runSide runs a side-by-side harness (run), then writes its report
// (write: report.json and report.md) to --out and prints it (table, or
// the JSON with --json), as runAndEmit does.
func runSide[R any](s *sideFlags, fs *flag.FlagSet, run func() (R, error), write func(dir string, rep R) error, table func(io.Writer, R)) error {
	s.emit.jsonOnly(fs)
	return runAndEmit(&s.emit, run, func(rep R) error {
		return s.emit.emitReport(rep, func(dir string) error { return write(dir, rep) }, func(w io.Writer) { table(w, rep) }, bench.ReportMarkdown, bench.ReportJSON)
	})
}
