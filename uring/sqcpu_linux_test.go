package uring

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/cpulist"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestSQThreadCPUErrorReasons reads a fixture of a 4-CPU host with CPU 1
// offline: each CPU the kernel would refuse gets its own reason.
func TestSQThreadCPUErrorReasons(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/devices/system/cpu")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, v := range map[string]string{"possible": "0-3\n", "online": "0,2-3\n"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := func(cpu int) (bool, error) { return cpu != 3, nil }
	for _, tc := range []struct {
		cpu  int
		want string // "" for no error
	}{
		{0, ""},
		{1, "SQ thread CPU 1 is offline (online CPUs 0,2-3)"},
		{3, "SQ thread CPU 3 is outside the process's cpuset"},
		{4, "SQ thread CPU 4 does not exist (possible CPUs 0-3)"},
		{-1, "negative SQ thread CPU -1"},
	} {
		err := sqThreadCPUError(root, tc.cpu, outside)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
			t.Errorf("CPU %d: %v, want %q", tc.cpu, err, tc.want)
		}
	}
}

// TestSetupErrorNamesMissingCPU: a ring whose SQ thread is to run on a CPU
// the host does not have fails with EINVAL and says so, where the error
// said only "offline, or outside the cpuset".
func TestSetupErrorNamesMissingCPU(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL", "IORING_SETUP_SQ_AFF")
	possible := possibleCPUs(t)
	cpu := possible[len(possible)-1] + 1
	_, err := New(&Config{SQPoll: true, SQAffinity: true, SQThreadCPU: cpu})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("SQ thread on CPU %d of %v: %v, want EINVAL saying it does not exist", cpu, possible, err)
	}
}

// TestSQThreadCPUOutsideAffinity: the kernel takes an SQ thread CPU the
// calling thread may not run on as long as its cpuset holds it, and so
// does SQThreadCPUError: a process confined with sched_setaffinity may
// still pin its SQPOLL thread beside itself.
func TestSQThreadCPUOutsideAffinity(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL", "IORING_SETUP_SQ_AFF")
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("needs two allowed CPUs, have %v", cpus)
	}
	done := make(chan struct{})
	go sys.LockedThread(func() {
		defer close(done)
		var set unix.CPUSet
		set.Set(cpus[1])
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
			return
		}
		if err := SQThreadCPUError(cpus[0]); err != nil {
			t.Errorf("SQThreadCPUError(%d) on a thread confined to CPU %d: %v", cpus[0], cpus[1], err)
		}
		r, err := New(&Config{SQPoll: true, SQAffinity: true, SQThreadCPU: cpus[0]})
		if err != nil {
			t.Errorf("SQ thread on CPU %d from a thread confined to CPU %d: %v", cpus[0], cpus[1], err)
			return
		}
		r.Close()
	})
	<-done
}

// possibleCPUs is the host's possible CPUs (sysfs).
func possibleCPUs(t *testing.T) []int {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		t.Skipf("no list of possible CPUs: %v", err)
	}
	cpus, err := cpulist.Parse(string(b))
	if err != nil || len(cpus) == 0 {
		t.Fatalf("possible CPUs %q: %v", b, err)
	}
	return cpus
}
