package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

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
		100: {TID: 100, Comm: "spindle (srv) x", State: 'R', UTime: 250, STime: 37, Processor: 0, RunNS: 2873012345, Timeslices: 1200, Start: 32309, PGrp: 100},
		101: {TID: 101, Comm: "worker", State: 'S', UTime: 10, STime: 5, Processor: 1, RunNS: 150000000, Timeslices: 30, Start: 32309, PGrp: 100},
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

// TestProcErrorsNameTheFile: Proc's readers name the file whose contents
// do not parse, under its root. topo's parsers leave the name to their
// callers since b654006c, and a damaged file read by the bench said "no
// cpu line" and named none.
func TestProcErrorsNameTheFile(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Proc{Root: root}
	for _, tc := range []struct {
		file string
		read func() error
	}{
		{"stat", func() error { _, err := p.Stat(); return err }},
		{"softirqs", func() error { _, err := p.Softirqs(); return err }},
		{"interrupts", func() error { _, err := p.Interrupts(); return err }},
	} {
		path := filepath.Join(root, "proc", tc.file)
		if err := os.WriteFile(path, []byte("damaged\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := tc.read(); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want it to name %s", tc.file, err, path)
		}
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

// TestProcessCPUTIDReused: two reads of a process whose thread exited
// between them and a new thread got its TID list the same TIDs, but they
// are not of the same threads: the new thread's run time counts from its
// start, and the exited one's between the first read and its exit is in
// no schedstat. proxyCPU takes the ticks (utime+stime of the process,
// exited threads included) for them, as it does when a TID changes;
// before, it subtracted the exited thread's run time from the new one's
// (here 1 ms of CPU where 6 ms were used).
func TestProcessCPUTIDReused(t *testing.T) {
	root := t.TempDir()
	thread := func(tid int, start, run string) {
		dir := filepath.Join(root, "proc", "100", "task", itoa(tid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strings.Replace(statLine(tid, "t", 100, 1, 1), " 12345 ", " "+start+" ", 1)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "schedstat"), []byte(run+" 5 3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := Proc{Root: root}
	read := func(utime uint64) GroupCPU {
		t.Helper()
		writeFakeProc(t, root, map[string]string{"100": statLine(100, "proxy", 100, utime, 0)})
		g, err := p.ProcessCPU(100)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	thread(100, "500", "1000000")
	thread(101, "500", "5000000")
	a := read(10)
	thread(100, "500", "3000000")
	thread(101, "900", "4000000") // 101 exited, a new thread has its TID
	b := read(11)
	if !slices.Equal(a.TIDs, b.TIDs) {
		t.Fatalf("TIDs %v then %v, want the same", a.TIDs, b.TIDs)
	}
	t0 := time.Now()
	us, _, fine := proxyCPU(cpuEdge{g: a, at: t0}, cpuEdge{g: b, at: t0.Add(time.Second)}, windowRate{replies: 1000, window: time.Second})
	if fine || us != ClockTick/1e3/1000 {
		t.Errorf("a TID reused: %v µs/req from run times %v, want the tick's %v µs/req", us, fine, ClockTick/1e3/1000)
	}
	thread(101, "500", "9000000") // the same thread as at a
	b = read(11)
	if us, _, fine = proxyCPU(cpuEdge{g: a, at: t0}, cpuEdge{g: b, at: t0.Add(time.Second)}, windowRate{replies: 1000, window: time.Second}); !fine || us != 6 {
		t.Errorf("the same threads: %v µs/req from run times %v, want 6 from run times", us, fine)
	}
}
