package engine

import (
	"strconv"
	"testing"

	"github.com/spindlenet/spindle/internal/proctask"
)

func TestSQPollPlacement(t *testing.T) {
	for _, tc := range []struct {
		p    SQPollPlacement
		cpu  int
		ok   bool
		name string
	}{
		{SQPollAuto, -1, false, "auto"},
		{SQPollPlacement{}, -1, false, "auto"},
		{SQPollUnpinned, -1, false, "unpinned"},
		{SQPollOnCPU(0), 0, true, "CPU 0"},
		{SQPollOnCPU(3), 3, true, "CPU 3"},
		{SQPollOnCPU(-1), -1, false, "invalid"},
	} {
		cpu, ok := tc.p.CPU()
		if cpu != tc.cpu || ok != tc.ok || tc.p.String() != tc.name {
			t.Errorf("%#v: CPU() = %d, %v; String() = %q; want %d, %v, %q", tc.p, cpu, ok, tc.p.String(), tc.cpu, tc.ok, tc.name)
		}
	}
	if _, err := New(&Config{SQPoll: SQPollOnCPU(-1)}, &echoHandler{}); err == nil {
		t.Error("New accepted SQPollOnCPU(-1)")
	}
}

// TestSQPollThreadCPU reads the iou-sqp thread's affinity with the loop on
// the second allowed CPU: SQPollOnCPU(0) must pin it to CPU 0, which the
// earlier integer field could not express (0 meant "pick one"), and
// SQPollAuto to the first allowed CPU, which an earlier version missed by
// reading the affinity of the loop thread, already pinned to its own CPU.
func TestSQPollThreadCPU(t *testing.T) {
	cpus := allowedCPUList(t)
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs, have %v", cpus)
	}
	for _, tc := range []struct {
		name string
		p    SQPollPlacement
		want int
	}{
		{"auto", SQPollAuto, cpus[0]},
		{"cpu0", SQPollOnCPU(0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if cpus[0] != 0 && tc.want == 0 {
				t.Skipf("CPU 0 is not allowed here (%v)", cpus)
			}
			cfg := testConfig(BackendURingSQPoll)
			cfg.CPUs, cfg.SQPoll = []int{cpus[1]}, tc.p
			e, addr := startEngine(t, cfg, &echoHandler{})
			if err := echoOnce(addr, 1, 4096, 4096, nil); err != nil {
				t.Fatal(err)
			}
			// The engine's SQ thread, named by its ring's fdinfo: not a
			// new iou-sqp thread in /proc/self/task, whose listing can
			// skip threads that exit meanwhile (those of engines stopped
			// before, pinned as their engines wanted).
			fdc := make(chan int, 1)
			l := e.Loops()[0]
			l.Post(func() { fdc <- l.be.(*uringBackend).r.Fd() })
			tid := sqThreadOf(t, <-fdc)
			got, err := proctask.CPUsAllowed(tid)
			if err != nil {
				t.Fatal(err)
			}
			if want := strconv.Itoa(tc.want); got != want {
				t.Errorf("SQPOLL thread %d may run on CPUs %s, want %s", tid, got, want)
			}
		})
	}
}

// allowedCPUList is the CPUs this process may run on, ascending.
func allowedCPUList(t *testing.T) []int {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}
