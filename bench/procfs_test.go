package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/spindlenet/spindle/topo"
)

func TestProcFixture(t *testing.T) {
	p := Proc{Root: "testdata"}
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CPU) != 2 || st.Ctxt == 0 || st.Intr == 0 {
		t.Fatalf("stat: %d CPUs ctxt=%d intr=%d", len(st.CPU), st.Ctxt, st.Intr)
	}
	var sum topo.CPUTime
	for _, c := range st.CPU {
		sum.User += c.User
		sum.SoftIRQ += c.SoftIRQ
	}
	// The total line is the sum of the per-CPU lines (the kernel sums them
	// at slightly different instants, so allow a few ticks).
	if d := int64(st.Total.User) - int64(sum.User); d < -5 || d > 5 {
		t.Errorf("total user %d, per-CPU sum %d", st.Total.User, sum.User)
	}
	si, err := p.Softirqs()
	if err != nil {
		t.Fatal(err)
	}
	if len(si["NET_RX"]) != 2 || len(si["TIMER"]) != 2 || si["TIMER"][0] == 0 {
		t.Fatalf("softirqs: %v", si)
	}
	in, err := p.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Total) != 2 || in.Total[0] <= in.Device[0] || in.Device[1] == 0 {
		t.Fatalf("interrupts: %+v", in)
	}
	tasks, err := p.Tasks(0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]TaskStat{
		100: {TID: 100, Comm: "spindle (srv) x", UTime: 250, STime: 37, Processor: 0, RunNS: 2873012345, Timeslices: 1200, PGrp: 100},
		101: {TID: 101, Comm: "worker", UTime: 10, STime: 5, Processor: 1, RunNS: 150000000, Timeslices: 30, PGrp: 100},
	}
	if len(tasks) != len(want) {
		t.Fatalf("tasks: %+v", tasks)
	}
	for _, tk := range tasks {
		if tk != want[tk.TID] {
			t.Errorf("task %d = %+v, want %+v", tk.TID, tk, want[tk.TID])
		}
	}
}

func TestProcLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	var p Proc
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CPU) < runtime.NumCPU() {
		t.Errorf("stat lists %d CPUs, runtime sees %d", len(st.CPU), runtime.NumCPU())
	}
	if _, err := p.Softirqs(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Interrupts(); err != nil {
		t.Fatal(err)
	}
	tasks, err := p.Tasks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 2 {
		t.Fatalf("a Go test process has several threads; read %d", len(tasks))
	}
	var run uint64
	for _, tk := range tasks {
		run += tk.RunNS
	}
	if run == 0 {
		t.Error("no thread has run time")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func([]byte) error
		in   string
	}{
		{"stat without cpu", func(b []byte) error { _, err := topo.ParseStat(b); return err }, "ctxt 5\n"},
		{"stat bad number", func(b []byte) error { _, err := topo.ParseStat(b); return err }, "cpu 1 2 3 x 5 6 7 8\n"},
		{"softirqs bad header", func(b []byte) error { _, err := ParseSoftirqs(b); return err }, "foo bar\nNET_RX: 1 2\n"},
		{"interrupts no colon", func(b []byte) error { _, err := ParseInterrupts(b); return err }, "CPU0\n 5 6\n"},
		{"task no comm", func(b []byte) error { _, err := ParseTaskStat(b); return err }, "12 R 1 2 3"},
		{"task short", func(b []byte) error { _, err := ParseTaskStat(b); return err }, "12 (x) R 1 2 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.fn([]byte(tc.in)); err == nil {
				t.Fatalf("parsed %q without error", tc.in)
			}
		})
	}
}

func addFixtures(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "proc", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseSoftirqs(f *testing.F) {
	addFixtures(f, "softirqs")
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseSoftirqs(b) })
}

func FuzzParseInterrupts(f *testing.F) {
	addFixtures(f, "interrupts")
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInterrupts(b)
		if err == nil {
			for c := range in.Device {
				if in.Device[c] > in.Total[c] {
					t.Fatalf("cpu %d: device %d > total %d", c, in.Device[c], in.Total[c])
				}
			}
		}
	})
}

func FuzzParseTaskStat(f *testing.F) {
	addFixtures(f, "self/task/100/stat", "self/task/101/stat")
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseTaskStat(b) })
}

// TestParseInterruptsGlobalRows: the ERR and MIS rows hold one count for
// the whole machine, not one per CPU; they are in no CPU's total (they
// went to the first CPU's, a server pinned there counting them).
func TestParseInterruptsGlobalRows(t *testing.T) {
	in, err := ParseInterrupts([]byte("" +
		"           CPU0       CPU1\n" +
		" 24:         10         20   PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n" +
		"NMI:          1          2   Non-maskable interrupts\n" +
		"ERR:       1000\n" +
		"MIS:        500\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{11, 22}; !slices.Equal(in.Total, want) {
		t.Errorf("totals %v, want %v (ERR and MIS in no CPU's)", in.Total, want)
	}
}
