package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/memlocktest"
)

// TestEngineArmUnpinnedUsesAllowedCPUs: an engine arm given no CPUs (`bench
// server` without -cpus) puts its loops on CPUs the process may run on.
// Under taskset or a cpuset those need not start at CPU 0: here the
// starting thread may run on the last CPU only, and the arm must serve from
// there (it took CPUs 0..n-1 and failed: CPU 0 is not in the affinity
// mask).
func TestEngineArmUnpinnedUsesAllowedCPUs(t *testing.T) {
	allowed := needTwoAllowedCPUs(t)
	last := allowed[len(allowed)-1]
	var srv Server
	var err error
	onCPU(t, last, func() { srv, err = startEngine(context.Background(), engine.BackendEpoll, 0, ServerConfig{}) })
	if err != nil {
		t.Fatalf("an unpinned engine arm on a process allowed CPU %d only: %v", last, err)
	}
	defer srv.Close()
	if err := selfCheck(srv.Addr().String()); err != nil {
		t.Fatal(err)
	}
}

// TestSQPollArmUnpinnedOffLoopCPU: the uring-sqpoll arm given neither CPUs
// nor spare CPUs puts its SQPOLL thread on the first CPU outside its loop's,
// as SpareCPUs says. It compared with the configured CPUs (none) instead of
// the loop's, and put the busy polling thread on the loop's own CPU.
func TestSQPollArmUnpinnedOffLoopCPU(t *testing.T) {
	allowed := needTwoAllowedCPUs(t)
	before := sqpollThreads(t)
	srv, err := startEngine(context.Background(), engine.BackendURingSQPoll, 0, ServerConfig{})
	if err != nil {
		t.Skipf("uring-sqpoll arm unavailable here: %v", err)
	}
	defer srv.Close()
	// The loop has its ring once it serves.
	if err := selfCheck(srv.Addr().String()); err != nil {
		t.Fatal(err)
	}
	var found int
	for tid, cpus := range sqpollThreads(t) {
		if _, old := before[tid]; old {
			continue
		}
		found++
		list, err := ParseCPUList(cpus)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(list, allowed[0]) {
			t.Errorf("SQPOLL thread %s may run on CPUs %s, which has the loop (CPU %d)", tid, cpus, allowed[0])
		}
	}
	if found != 1 {
		t.Fatalf("found %d new SQPOLL threads, want 1", found)
	}
}

// needTwoAllowedCPUs returns the CPUs this process may run on, and skips
// the test off Linux or where there are fewer than two.
func needTwoAllowedCPUs(t *testing.T) []int {
	t.Helper()
	skipUnlessLinux(t)
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("needs two CPUs this process may run on, has %v", allowed)
	}
	return allowed
}

// sqpollThreads returns this process's SQPOLL threads (iou-sqp-*) and the
// CPUs each may run on (Cpus_allowed_list).
func sqpollThreads(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		comm, err := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
		if err != nil || !strings.HasPrefix(string(comm), "iou-sqp-") {
			continue
		}
		status, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err != nil {
			continue // exited
		}
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				out[e.Name()] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// onCPU runs fn on the calling goroutine's thread allowed cpu alone, then
// gives the thread its CPUs back.
func onCPU(t *testing.T, cpu int, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	fn()
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		t.Fatal(err) // the thread stays locked, and exits with the test
	}
	runtime.UnlockOSThread()
}

// TestBatchArmOptIn: the uring-batch arm (Config.BatchWait) runs when named,
// and a run that names no arms leaves it out, as it does test-only arms.
func TestBatchArmOptIn(t *testing.T) {
	if _, err := LookupArm("uring-batch"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range defaultArms() {
		names = append(names, a.Name)
	}
	if !slices.Contains(names, "uring") || slices.Contains(names, "uring-batch") {
		t.Errorf("default arms %v: want uring and not uring-batch", names)
	}
}

// sqpollPidsEnv names the pids cgroup the child of
// TestSQPollArmRefusedAtStartUp runs in, and is its cue.
const sqpollPidsEnv = "SPINDLE_TEST_SQPOLL_PIDS"

// TestSQPollArmRefusedAtStartUp starts the uring-sqpoll arm in a child
// whose pids cgroup lets it start no task: the kernel refuses the SQPOLL
// thread when Run sets the loop's ring up, and the loop runs plain uring
// (the Go runtime runs on threads it made before). The arm checked the
// engine's backend at New only, and served, to be measured and reported
// as uring-sqpoll without an SQPOLL thread; it must refuse, saying what
// the loop runs.
func TestSQPollArmRefusedAtStartUp(t *testing.T) {
	if dir := os.Getenv(sqpollPidsEnv); dir != "" {
		allowed := needTwoAllowedCPUs(t)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			t.Fatal(err)
		}
		// Threads for the runtime to run the engine's goroutines on,
		// each held by a goroutine of its own at once, then idle: the
		// runtime keeps them and needs to start no other.
		const threads = 16
		var held, done sync.WaitGroup
		held.Add(threads)
		done.Add(threads)
		release := make(chan struct{})
		for range threads {
			go func() {
				defer done.Done()
				runtime.LockOSThread()
				held.Done()
				<-release
				runtime.UnlockOSThread()
			}()
		}
		held.Wait()
		close(release)
		done.Wait()
		pidsMax := filepath.Join(dir, "pids.max")
		if err := os.WriteFile(pidsMax, []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
		srv, err := startEngine(context.Background(), engine.BackendURingSQPoll, 0, ServerConfig{CPUs: allowed[:1], SpareCPUs: allowed[1:2]})
		sq := len(sqpollThreads(t))
		if err := os.WriteFile(pidsMax, []byte("max"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			srv.Close()
			t.Fatalf("the uring-sqpoll arm served with %d SQPOLL threads, the kernel refusing them", sq)
		}
		if strings.Contains(err.Error(), "unavailable, it would fall back") {
			t.Skipf("uring-sqpoll arm unavailable here: %v", err)
		}
		if want := "degraded at start-up, its loops run uring"; !strings.Contains(err.Error(), want) {
			t.Fatalf("start: %v, want %q", err, want)
		}
		return
	}
	needTwoAllowedCPUs(t)
	if os.Geteuid() != 0 {
		t.Skip("a cgroup of the test's own in the cgroup-v1 pids hierarchy (pids.max 1, so that the kernel refuses the SQPOLL thread) needs write access to it, root's")
	}
	const root = "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Skipf("needs the cgroup-v1 pids hierarchy at %s (root): %v", root, err)
	}
	dir := filepath.Join(root, fmt.Sprintf("spindle-bench-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The child has exited: its threads have left the cgroup.
		if err := os.Remove(dir); err != nil {
			t.Errorf("pids cgroup %s left behind: %v", dir, err)
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSQPollArmRefusedAtStartUp$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), sqpollPidsEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "--- SKIP: TestSQPollArmRefusedAtStartUp ") {
		t.Skipf("child skipped:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSQPollArmRefusedAtStartUp ") {
		t.Fatalf("child in pids cgroup %s: %v\n%s", dir, err, out)
	}
}

// memlockEnv marks the child of TestURingArmRefusedShortOfLockedMemory.
const memlockEnv = "SPINDLE_TEST_MEMLOCK_CHILD"

// TestURingArmRefusedShortOfLockedMemory starts the uring arm in a child
// without CAP_IPC_LOCK (setpriv) under a 64 KiB RLIMIT_MEMLOCK (prlimit):
// the kernel charges the loop's ring to the limit and refuses it, and the
// engine runs the loop on epoll. The arm must refuse to serve what would
// be measured as uring, saying that its loop runs epoll and why (the
// limit).
func TestURingArmRefusedShortOfLockedMemory(t *testing.T) {
	if os.Getenv(memlockEnv) != "" {
		srv, err := startEngine(context.Background(), engine.BackendURing, 0, ServerConfig{})
		if err == nil {
			srv.Close()
			t.Fatal("the uring arm served, its ring refused")
		}
		if strings.Contains(err.Error(), "unavailable, it would fall back") {
			t.Skipf("uring arm unavailable here: %v", err)
		}
		for _, want := range []string{"degraded at start-up, its loops run epoll", "RLIMIT_MEMLOCK is 64 KiB without CAP_IPC_LOCK"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("start: %v, want %q", err, want)
			}
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const name = "TestURingArmRefusedShortOfLockedMemory"
	cmd := memlocktest.Command(t, 64<<10, exe, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), memlockEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "--- SKIP: "+name+" ") {
		t.Skipf("child skipped:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name+" ") {
		t.Fatalf("child without CAP_IPC_LOCK under 64 KiB: %v\n%s", err, out)
	}
}

// TestBatchArmRefusedWithoutMinTimeout starts the uring-batch arm where
// the engine's loops wait with Config.BatchWait and where they wait
// without it, as on a kernel without IORING_FEAT_MIN_TIMEOUT (before
// 6.12: engineBatchWait replaced by the 0 the engine reports there). That
// arm served plain uring, to be measured and reported as uring-batch; it
// must refuse, saying what the loops wait with.
func TestBatchArmRefusedWithoutMinTimeout(t *testing.T) {
	t.Run("minTimeout", func(t *testing.T) {
		srv, err := startEngine(context.Background(), engine.BackendURing, batchArmWait, ServerConfig{})
		if err != nil && strings.Contains(err.Error(), "its loops wait with 0s") && !kver.AtLeast(kver.Release(), "6.12") {
			t.Skipf("IORING_FEAT_MIN_TIMEOUT not supported (requires >= 6.12): %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
	})
	t.Run("none", func(t *testing.T) {
		real := engineBatchWait
		engineBatchWait = func(*engine.Engine) time.Duration { return 0 }
		t.Cleanup(func() { engineBatchWait = real })
		srv, err := startEngine(context.Background(), engine.BackendURing, batchArmWait, ServerConfig{})
		if err == nil {
			srv.Close()
			t.Fatal("the uring-batch arm served with loops that wait without Config.BatchWait")
		}
		if want := "degraded at start-up, its loops wait with 0s"; !strings.Contains(err.Error(), want) {
			t.Fatalf("start: %v, want %q", err, want)
		}
	})
}
