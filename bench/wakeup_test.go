package bench

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// TestWakeupReaderCPUSteal: steal on the reader's CPU is time the
// hypervisor ran someone else there, not busy time of this machine, so it
// stays out of ReaderCPUBusyPercent and is reported on its own. Before,
// Busy counted it, and the busy share grew with the neighbours' load.
// Guest and guest_nice are inside user and nice and must not count again.
// The fixture pair is 1 s of two CPUs (see TestFillMachineSteal): CPU 0 is
// 60 user (5 of it guest), 20 system, 2 irq, 8 softirq, 10 steal ticks;
// CPU 1 40 user, 4 nice (all guest_nice), 10 system, 16 idle, 30 steal.
func TestWakeupReaderCPUSteal(t *testing.T) {
	var st [2]*topo.Stat
	for i, dir := range []string{"before", "after"} {
		s, err := Proc{Root: filepath.Join("testdata", "steal", dir)}.Stat()
		if err != nil {
			t.Fatal(err)
		}
		st[i] = s
	}
	for _, tc := range []struct {
		cpu         int
		busy, steal float64
	}{
		{0, 90, 10},
		{1, 54, 30},
	} {
		var r WakeupResult
		r.fillReaderCPU(st[0], st[1], tc.cpu, time.Second)
		if math.Abs(r.ReaderCPUBusyPercent-tc.busy) > 1e-9 || math.Abs(r.ReaderCPUStealPercent-tc.steal) > 1e-9 {
			t.Errorf("reader on CPU %d: busy %v%%, steal %v%%; want %v%% and %v%%", tc.cpu, r.ReaderCPUBusyPercent, r.ReaderCPUStealPercent, tc.busy, tc.steal)
		}
	}
	// A failed read or a CPU missing from either leaves both at 0.
	for _, tc := range []struct {
		name   string
		s0, s1 *topo.Stat
		cpu    int
	}{
		{"no start", nil, st[1], 0},
		{"no end", st[0], nil, 0},
		{"no such CPU", st[0], st[1], 7},
	} {
		var r WakeupResult
		r.fillReaderCPU(tc.s0, tc.s1, tc.cpu, time.Second)
		if r.ReaderCPUBusyPercent != 0 || r.ReaderCPUStealPercent != 0 {
			t.Errorf("%s: busy %v%%, steal %v%%; want 0", tc.name, r.ReaderCPUBusyPercent, r.ReaderCPUStealPercent)
		}
	}
}

// TestWakeupReportShowsSteal: the reader CPU's steal, left out of its busy
// share, is shown beside it, a column of the text table, and a note names
// the modes where it reached 5 % of the CPU's busy plus steal time.
func TestWakeupReportShowsSteal(t *testing.T) {
	rep := &WakeupReport{Schema: WakeupSchema, Topology: "wire", IntervalMS: 50, WriterCPU: 1, Results: []WakeupResult{
		{Mode: WakeBlock, Samples: 60, ReaderCPUBusyPercent: 2, ReaderCPUStealPercent: 0.5},
		{Mode: WakeSpin, Samples: 60, ReaderCPUBusyPercent: 99, ReaderCPUStealPercent: 1},
		{Mode: WakeURing, Samples: 60, ReaderCPUBusyPercent: 3},
		{Mode: WakeURingNAPI, Skipped: "not available"},
	}}
	n := wakeupStealNote(rep.Results)
	if !strings.Contains(n, "steal") || !strings.Contains(n, "block 20%") || strings.Contains(n, "spin") || strings.Contains(n, "uring") {
		t.Errorf("steal note does not name block (20%%), and only block: %q", n)
	}
	if n := wakeupStealNote(rep.Results[1:]); n != "" {
		t.Errorf("note without a mode past 5%% steal: %q", n)
	}
	var tbl strings.Builder
	WriteWakeupTable(&tbl, rep)
	lines := strings.Split(tbl.String(), "\n")
	if len(lines) < 4 || !strings.HasSuffix(lines[2], "steal%") || !strings.HasSuffix(strings.Join(strings.Fields(lines[3]), " "), " 2.0 0.5") {
		t.Errorf("text table has no steal%% column with block's 0.5 beside its busy 2.0:\n%s", tbl.String())
	}
}

// TestWakeupTickNote: runs too short for /proc/stat's 10 ms ticks are
// noted (a 25 ms run read 118 % busy), runs of half a second and more not.
func TestWakeupTickNote(t *testing.T) {
	for _, tc := range []struct {
		run  time.Duration
		note bool
	}{{25 * time.Millisecond, true}, {300 * time.Millisecond, true}, {500 * time.Millisecond, false}, {3 * time.Second, false}, {0, false}} {
		n := wakeupTickNote(tc.run)
		if (n != "") != tc.note {
			t.Errorf("run %v: note %q, want one: %v", tc.run, n, tc.note)
		}
		if tc.note && !strings.Contains(n, "ticks") {
			t.Errorf("run %v: note %q does not say why", tc.run, n)
		}
	}
}

// TestWakeupTableInterval: the table's title gives the interval between
// writes as measured, to the microsecond; it rounded to whole milliseconds,
// so --interval 250us was "a write every 0 ms" and 1500us "every 2 ms".
func TestWakeupTableInterval(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     string
	}{
		{50 * time.Millisecond, "a write every 50 ms,"},
		{250 * time.Microsecond, "a write every 0.25 ms,"},
		{1500 * time.Microsecond, "a write every 1.5 ms,"},
		{time.Microsecond, "a write every 0.001 ms,"},
	} {
		var tbl strings.Builder
		WriteWakeupTable(&tbl, &WakeupReport{Topology: "loopback", IntervalMS: float64(tc.interval) / 1e6})
		if !strings.Contains(tbl.String(), tc.want) {
			t.Errorf("interval %v: title does not say %q:\n%s", tc.interval, tc.want, tbl.String())
		}
	}
}
