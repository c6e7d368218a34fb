package main

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/bench"
)

// parseAB parses a bench ab command line as runBenchAB does.
func parseAB(args ...string) (bench.ABConfig, *abFlags, error) {
	fs := newBenchFlagSet("bench ab", abUsage)
	fs.SetOutput(new(strings.Builder))
	var f abFlags
	f.register(fs)
	cfg, err := parseABArgs(fs, &f, args)
	return cfg, &f, err
}

// TestBenchABArgs: bench ab's flags, then its arms, each NAME=COMMAND in
// one argument, in order; --json without --out writes no files.
func TestBenchABArgs(t *testing.T) {
	cfg, f, err := parseAB("--reps", "10", "--rate", "60000", "--payload", "128", "--conns", "20", "--duration", "3s", "--warmup", "500ms",
		"--server-cpus", "2", "--client-cpus", "3", "--json",
		"base=/tmp/spindle-base bench server -arm uring", "new=/tmp/spindle bench server -arm uring", "c=/tmp/cecho -arm c-liburing")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reps != 10 || cfg.Rate != 60000 || cfg.Payload != 128 || cfg.Conns != 20 || cfg.Window != 3*time.Second || cfg.Warmup != 500*time.Millisecond {
		t.Errorf("config %+v", cfg)
	}
	if !slices.Equal(cfg.ServerCPUs, []int{2}) || !slices.Equal(cfg.ClientCPUs, []int{3}) {
		t.Errorf("server CPUs %v, client CPUs %v; want [2] and [3]", cfg.ServerCPUs, cfg.ClientCPUs)
	}
	var names []string
	for _, a := range cfg.Arms {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"base", "new", "c"}) || !slices.Equal(cfg.Arms[2].Command, []string{"/tmp/cecho", "-arm", "c-liburing"}) {
		t.Errorf("arms %+v", cfg.Arms)
	}
	if f.emit.out != "" || !f.emit.jsonOut {
		t.Errorf("--json alone: out %q, json %v; want no files, the JSON on stdout", f.emit.out, f.emit.jsonOut)
	}
	cfg, f, err = parseAB("a=/bin/a", "b=/bin/b")
	if err != nil || cfg.Reps != bench.DefaultABReps || cfg.Rate != 0 || cfg.Payload != 64 || cfg.Window != 5*time.Second || cfg.Warmup != time.Second || f.emit.out != "bench-ab-report" {
		t.Errorf("defaults: %+v, out %q, %v", cfg, f.emit.out, err)
	}
}

// TestBenchABArgsRefused: fewer than two arms, a name twice, an arm
// without =, a flag after the arms, and values out of range are usage
// errors naming what is wrong.
func TestBenchABArgsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a=/bin/a"}, "two arms"},
		{nil, "two arms"},
		{[]string{"a=/bin/a", "a=/bin/b"}, "a given twice"},
		{[]string{"a=/bin/a", "/bin/b"}, "NAME=COMMAND"},
		{[]string{"a=/bin/a", "b="}, "no command"},
		{[]string{"a=/bin/a", "b=/bin/b", "--reps", "3"}, "flags go before"},
		{[]string{"--reps", "0", "a=/bin/a", "b=/bin/b"}, "--reps"},
		{[]string{"--rate", "-1", "a=/bin/a", "b=/bin/b"}, "--rate"},
		{[]string{"--payload", "1", "a=/bin/a", "b=/bin/b"}, "--payload"},
		{[]string{"--duration", "0s", "a=/bin/a", "b=/bin/b"}, "--duration"},
		{[]string{"--server-cpus", "x", "a=/bin/a", "b=/bin/b"}, "--server-cpus"},
	} {
		_, _, err := parseAB(tc.args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
	if _, _, err := parseAB("-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}
