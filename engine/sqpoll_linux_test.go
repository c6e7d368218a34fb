package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/cpulist"
	"github.com/spindlenet/spindle/internal/proctask"
	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/uring"
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
	list := rootCpuset(t)
	if list[len(list)-1] == 0 {
		t.Skipf("needs a CPU other than CPU 0: root cpuset %v", list)
	}
	dir := makeCpuset(t, strconv.Itoa(list[len(list)-1]))
	t.Setenv(sqpollCpusetDirEnv, dir)
	runChild(t, "TestSQPollCPUOutsideCpuset", sqpollCpusetEnv, nil)
}

// cpusetRoot is the cgroup-v1 cpuset hierarchy the cpuset tests make their
// cpusets in.
const cpusetRoot = "/sys/fs/cgroup/cpuset"

// rootCpuset returns the root cpuset's CPUs; the test skips without the
// cgroup-v1 cpuset hierarchy.
func rootCpuset(t *testing.T) []int {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cpusetRoot, "cgroup.procs")); err != nil {
		t.Skipf("needs the cgroup-v1 cpuset hierarchy at %s (root): %v", cpusetRoot, err)
	}
	cpus, err := os.ReadFile(filepath.Join(cpusetRoot, "cpuset.cpus"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := cpulist.Parse(string(cpus))
	if err != nil || len(list) == 0 {
		t.Fatalf("root cpuset.cpus %q: %v", cpus, err)
	}
	return list
}

// makeCpuset makes a cpuset of cpus (a CPU list) and the root's memory
// nodes, removed when the test ends, and returns its directory.
func makeCpuset(t *testing.T, cpus string) string {
	t.Helper()
	mems, err := os.ReadFile(filepath.Join(cpusetRoot, "cpuset.mems"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cpusetRoot, fmt.Sprintf("spindle-engine-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			t.Skipf("a cpuset of the test's own (cpus %s) needs write access to the cgroup-v1 cpuset hierarchy, root's: %v", cpus, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The child has exited: its threads have left the cpuset.
		if err := os.Remove(dir); err != nil {
			t.Errorf("cpuset %s left behind: %v", dir, err)
		}
	})
	for _, f := range []struct{ file, v string }{
		{"cpuset.cpus", cpus},
		{"cpuset.mems", strings.TrimSpace(string(mems))},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.file), []byte(f.v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sqpollShrunkEnv cues the child of TestBackendSaysSQPollRefusedAtRun; its
// cpuset's directory is in sqpollCpusetDirEnv.
const sqpollShrunkEnv = "SPINDLE_TEST_SQPOLL_SHRUNK"

// TestBackendSaysSQPollRefusedAtRun runs a child in a cpuset of two CPUs:
// New takes uring-sqpoll with the loop on the first and the SQPOLL thread
// on the second, then the cpuset shrinks to the first (an orchestrator
// moving the process) before Run. The kernel refuses the SQPOLL ring's
// CPU, and the loop runs plain uring. Backend said uring-sqpoll all the
// same, and so did Run's start-up line, with no SQ thread anywhere: once
// Run has started the loops it must say uring.
func TestBackendSaysSQPollRefusedAtRun(t *testing.T) {
	if os.Getenv(sqpollShrunkEnv) != "" {
		dir := os.Getenv(sqpollCpusetDirEnv)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			t.Fatal(err)
		}
		cpus := allowedCPUList(t)
		var mu sync.Mutex
		var logs []string
		cfg := testConfig(BackendURingSQPoll)
		cfg.CPUs, cfg.SQPoll = cpus[:1], SQPollOnCPU(cpus[len(cpus)-1])
		cfg.Logf = func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		e := newEngine(t, cfg, &echoHandler{})
		if e.Backend() != BackendURingSQPoll {
			t.Fatalf("New: backend %s, want %s", e.Backend(), BackendURingSQPoll)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(strconv.Itoa(cpus[0])), 0o644); err != nil {
			t.Fatal(err)
		}
		ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		runEngine(t, e)
		if err := echoOnce(ln.Addr().String(), 1, 4096, 4096, nil); err != nil {
			t.Fatal(err)
		}
		// Run's start-up line comes once every loop has started.
		started := func(l string) bool { return strings.Contains(l, " loops on CPUs ") }
		waitFor(t, "Run's start-up line", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.ContainsFunc(logs, started)
		})
		fdc := make(chan int, 1)
		l := e.Loops()[0]
		l.Post(func() { fdc <- l.be.(*uringBackend).r.Fd() })
		info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", <-fdc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(info), "SqThread:\t-1\n") {
			t.Fatalf("the loop's ring has an SQ thread on CPU %d, the cpuset shrunk from %v to CPU %d under it (the kernel refuses an SQ thread CPU outside the cpuset since 6.11):\n%s", cpus[len(cpus)-1], cpus, cpus[0], info)
		}
		mu.Lock()
		defer mu.Unlock()
		if got := e.Backend(); got != BackendURing {
			t.Errorf("loop without SQ thread: Backend() = %s, want %s; logs: %q", got, BackendURing, logs)
		}
		if i := slices.IndexFunc(logs, started); !strings.Contains(logs[i], "backend uring, ") {
			t.Errorf("Run's start-up line does not say backend uring: %q", logs[i])
		}
		return
	}
	list := rootCpuset(t)
	if len(list) < 2 {
		t.Skipf("needs two CPUs: root cpuset %v", list)
	}
	t.Setenv(sqpollCpusetDirEnv, makeCpuset(t, fmt.Sprintf("%d,%d", list[0], list[1])))
	runChild(t, "TestBackendSaysSQPollRefusedAtRun", sqpollShrunkEnv, nil)
}

// TestSQPollKeptWhenBufferRingRefused runs uring-sqpoll on two loops where
// the kernel refuses the first buffer ring set up (ENOMEM, as under a low
// RLIMIT_MEMLOCK), so that its loop closes its ring and runs epoll. The
// other loop attached to that ring, the first made, as soon as it was
// made: once it had closed again, the attach failed and the loop ran
// uring without SQPOLL (a ring attaching here waits up to a second for the
// one it attaches to to close, as a loop woken late would find it). It
// must keep SQPOLL.
func TestSQPollKeptWhenBufferRingRefused(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("needs 2 CPUs this process may run on, has %v", allowed)
	}
	realNew, realSetup := newRing, setupBufRing
	t.Cleanup(func() { newRing, setupBufRing = realNew, realSetup })
	var refused atomic.Bool
	setupBufRing = func(r *uring.Ring, group uint16, entries, size int, huge bool) (*uring.BufRing, error) {
		if refused.CompareAndSwap(false, true) {
			return nil, os.NewSyscallError("io_uring_register", unix.ENOMEM)
		}
		return realSetup(r, group, entries, size, huge)
	}
	newRing = func(c *uring.Config) (*uring.Ring, error) {
		for end := time.Now().Add(time.Second); c.AttachWQ != nil && c.AttachWQ.Fd() >= 0 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		return realNew(c)
	}
	var logs logLines
	cfg := testConfig(BackendURingSQPoll)
	cfg.CPUs, cfg.SQPoll, cfg.Logf = allowed[:2], SQPollUnpinned, logs.logf
	e, addr := startEngine(t, cfg, &echoHandler{})
	waitFor(t, "the loops to start", func() bool { return e.BufferPages() != "" })
	if err := echoOnce(addr, 1, 4096, 4096, nil); err != nil {
		t.Fatal(err)
	}
	want := []Backend{"loop 0: epoll; loop 1: uring-sqpoll", "loop 0: uring-sqpoll; loop 1: epoll"}
	if got := e.Backend(); !slices.Contains(want, got) {
		t.Errorf("Backend %q, want one of %q; logs: %q", got, want, logs.all())
	}
	if logs.count("running uring without SQPOLL") != 0 {
		t.Errorf("a loop lost SQPOLL: %q", logs.all())
	}
}
