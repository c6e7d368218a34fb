package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/cpulist"
	"github.com/spindlenet/spindle/internal/proctask"
	"github.com/spindlenet/spindle/internal/sys"
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

// TestSQPollCPURefused: New refuses an SQPOLL thread CPU that runs a loop
// or that the host does not have, naming the CPU and the reason. Both were
// taken: the loop's CPU got a spinning SQPOLL thread beside the loop, and
// a missing CPU made the first ring's setup fail with EINVAL at Run, after
// which the engine ran without SQPOLL.
func TestSQPollCPURefused(t *testing.T) {
	cpus := allowedCPUList(t)
	possible, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		t.Skipf("no list of possible CPUs: %v", err)
	}
	list, err := cpulist.Parse(string(possible))
	if err != nil || len(list) == 0 {
		t.Fatalf("possible CPUs %q: %v", possible, err)
	}
	missing := list[len(list)-1] + 1
	for _, tc := range []struct {
		name string
		cpu  int
		want string
	}{
		{"loop", cpus[0], fmt.Sprintf("SQ thread CPU %d runs a loop", cpus[0])},
		{"missing", missing, fmt.Sprintf("SQ thread CPU %d does not exist", missing)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(BackendURingSQPoll)
			cfg.CPUs, cfg.SQPoll = cpus[:1], SQPollOnCPU(tc.cpu)
			e, err := New(cfg, &echoHandler{})
			if err == nil {
				e.Shutdown(context.Background())
				t.Fatalf("New took the SQPOLL thread on CPU %d with loops on %v", tc.cpu, cfg.CPUs)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSQPollCPUOutsideAffinity: an SQPOLL thread CPU outside the affinity
// of the thread calling New, but in its cpuset, is taken, as the kernel
// takes it: a process confined to its loops' CPUs (taskset) may pin the
// thread beside them.
func TestSQPollCPUOutsideAffinity(t *testing.T) {
	cpus := allowedCPUList(t)
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs, have %v", cpus)
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
		cfg := testConfig(BackendURingSQPoll)
		cfg.CPUs, cfg.SQPoll = cpus[1:2], SQPollOnCPU(cpus[0])
		e, err := New(cfg, &echoHandler{})
		if err != nil {
			t.Errorf("New with loops on %v and the SQPOLL thread on CPU %d, from a thread confined to CPU %d: %v", cfg.CPUs, cpus[0], cpus[1], err)
			return
		}
		e.Shutdown(context.Background())
	})
	<-done
}

// sqpollCpusetEnv cues the child of TestSQPollCPUOutsideCpuset, and
// sqpollCpusetDirEnv names its cpuset's directory.
const (
	sqpollCpusetEnv    = "SPINDLE_TEST_SQPOLL_CPUSET"
	sqpollCpusetDirEnv = "SPINDLE_TEST_SQPOLL_CPUSET_DIR"
)

// TestSQPollCPUOutsideCpuset runs a child in a cgroup-v1 cpuset of the
// root cpuset's last CPU: New there must refuse the SQPOLL thread on CPU
// 0, outside the cpuset, saying so. It was taken, and at Run the first
// ring's setup failed with EINVAL and the engine ran without SQPOLL.
func TestSQPollCPUOutsideCpuset(t *testing.T) {
	if os.Getenv(sqpollCpusetEnv) != "" {
		// The child: every thread into the cpuset, then New.
		dir := os.Getenv(sqpollCpusetDirEnv)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			t.Fatal(err)
		}
		cpus := allowedCPUList(t)
		cfg := testConfig(BackendURingSQPoll)
		cfg.CPUs, cfg.SQPoll = cpus, SQPollOnCPU(0)
		e, err := New(cfg, &echoHandler{})
		if err == nil {
			e.Shutdown(context.Background())
			t.Fatalf("New in a cpuset of CPUs %v took the SQPOLL thread on CPU 0", cpus)
		}
		if want := "SQ thread CPU 0 is outside the process's cpuset"; !strings.Contains(err.Error(), want) {
			t.Fatalf("New: %v, want %q", err, want)
		}
		return
	}
	const root = "/sys/fs/cgroup/cpuset"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Skipf("needs the cgroup-v1 cpuset hierarchy at %s (root): %v", root, err)
	}
	cpus, err := os.ReadFile(filepath.Join(root, "cpuset.cpus"))
	if err != nil {
		t.Fatal(err)
	}
	mems, err := os.ReadFile(filepath.Join(root, "cpuset.mems"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := cpulist.Parse(string(cpus))
	if len(list) == 0 || list[len(list)-1] == 0 {
		t.Skipf("needs a CPU other than CPU 0: cpuset.cpus %q", cpus)
	}
	dir := filepath.Join(root, fmt.Sprintf("spindle-engine-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The child has exited: its threads have left the cpuset.
		if err := os.Remove(dir); err != nil {
			t.Errorf("cpuset %s left behind: %v", dir, err)
		}
	}()
	for _, f := range []struct{ file, v string }{
		{"cpuset.cpus", strconv.Itoa(list[len(list)-1])},
		{"cpuset.mems", strings.TrimSpace(string(mems))},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.file), []byte(f.v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(sqpollCpusetDirEnv, dir)
	runChild(t, "TestSQPollCPUOutsideCpuset", sqpollCpusetEnv, nil)
}
