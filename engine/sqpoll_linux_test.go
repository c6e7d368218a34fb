package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// TestSQPollOnCPU0 pins the SQPOLL thread to CPU 0, which the earlier
// integer field could not express (0 meant "pick one"), with the loop on
// another CPU, and reads the kernel thread's affinity.
func TestSQPollOnCPU0(t *testing.T) {
	cpus := allowedCPUList(t)
	if len(cpus) < 2 || cpus[0] != 0 {
		t.Skipf("needs CPU 0 and another CPU, have %v", cpus)
	}
	cfg := testConfig(BackendURingSQPoll)
	cfg.CPUs, cfg.SQPoll = []int{cpus[1]}, SQPollOnCPU(0)
	_, addr := startEngine(t, cfg, &echoHandler{})
	if err := echoOnce(addr, 1, 4096, 4096, nil); err != nil {
		t.Fatal(err)
	}
	tasks, _ := filepath.Glob("/proc/self/task/*")
	found := false
	for _, task := range tasks {
		comm, err := os.ReadFile(filepath.Join(task, "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "iou-sqp-") {
			continue
		}
		found = true
		status, err := os.ReadFile(filepath.Join(task, "status"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != "0" {
				t.Errorf("SQPOLL thread %s may run on CPUs %s, want 0", strings.TrimSpace(string(comm)), strings.TrimSpace(v))
			}
		}
	}
	if !found {
		t.Fatal("no iou-sqp thread in this process")
	}
}

// allowedCPUList is the CPUs this process may run on, ascending.
func allowedCPUList(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		t.Fatal("no allowed CPU")
	}
	return cpus
}
