package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spindlenet/spindle/bench"
)

func init() {
	register("wakeup", "wake-up latency and CPU: block vs spin vs busy-poll vs io_uring", runWakeup)
}

func runWakeup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wakeup", flag.ContinueOnError)
	modes := fs.String("modes", strings.Join(bench.WakeupModes, ","), "wait modes to measure")
	interval := fs.Duration("interval", 50*time.Millisecond, "time between writes")
	samples := fs.Int("samples", 60, "wake-ups measured per mode")
	reader := fs.Int("reader-cpu", -1, "CPU of the reader thread, -1 for the first CPU this process may run on")
	writer := fs.Int("writer-cpu", -1, "CPU of the writer thread, -1 for the first CPU this process may run on other than the reader's (1 with the reader on 0), else the reader's")
	topology := fs.String("topology", "loopback", "loopback, or wire (two netns joined by a veth pair; root)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The package takes zero for its default: zero and below are refused.
	if *samples < 1 || *interval <= 0 {
		return usageError{err: errors.New("want --samples of at least 1 and a positive --interval")}
	}
	list := strings.Split(*modes, ",")
	if m := givenTwice(list); m != "" {
		return usageError{err: fmt.Errorf("--modes: %s given twice", m)} // two rows of one mode
	}
	if err := bench.CheckWakeupModes(list); err != nil {
		return usageError{err: fmt.Errorf("--modes: %w", err)}
	}
	if err := bench.CheckTopology(*topology); err != nil {
		return usageError{err: fmt.Errorf("--topology: %w", err)}
	}
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	// -1 is the flags' default; a value below it is no CPU, not "the
	// default", a usage error. A CPU the process may not run on is refused
	// here, naming the flag: the thread would otherwise fail to pin (a CPU
	// missing or outside the cpuset) without saying whose CPU it was, or
	// widen its affinity past a taskset the process was started under.
	// That refusal is this host's (or this taskset's), not the command
	// line's, so it exits 1 (the package doc).
	for _, f := range []struct {
		name string
		cpu  int
	}{{"reader-cpu", *reader}, {"writer-cpu", *writer}} {
		if f.cpu < -1 {
			return usageError{err: fmt.Errorf("--%s %d: not a CPU number", f.name, f.cpu)}
		}
		if f.cpu >= 0 && !slices.Contains(allowed, f.cpu) {
			return fmt.Errorf("--%s %d: not a CPU this process may run on (%s)", f.name, f.cpu, bench.FormatCPUList(allowed))
		}
	}
	if *reader < 0 && len(allowed) > 0 {
		// The package's default is CPU 0, which a taskset or a cpuset
		// may not give the process.
		*reader = allowed[0]
	}
	cfg := bench.WakeupConfig{
		Modes: list, Interval: *interval, Samples: *samples,
		ReaderCPU: *reader, Topology: *topology, Progress: os.Stderr,
	}
	if *writer >= 0 {
		// Below zero leaves the package's default: the first CPU the
		// process may run on other than the reader's, else the reader's.
		cfg.WriterCPU = writer
	}
	rep, err := bench.Wakeup(ctx, cfg)
	if err != nil {
		return err
	}
	if *jsonOut {
		return printJSON(os.Stdout, rep)
	}
	bench.WriteWakeupTable(os.Stdout, rep)
	return nil
}
