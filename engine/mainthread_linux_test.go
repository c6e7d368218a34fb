package engine

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mainThreadEnv names the backend a child of TestLoopOffMainThread runs;
// TestMain hands such a process to mainThreadChild.
const mainThreadEnv = "SPINDLE_TEST_MAIN_THREAD_BACKEND"

// A child of TestLoopOffMainThread keeps its main goroutine on the main
// thread until mainThreadChild lets go just before Run: the runtime
// unlocks the main goroutine after the package inits, and without this
// lock it could move to another thread before TestMain (seen once in CI
// under -race: "TestMain is not on the main thread").
func init() {
	if os.Getenv(mainThreadEnv) != "" {
		runtime.LockOSThread()
	}
}

// TestLoopOffMainThread: a loop whose goroutine the runtime starts on the
// process's main thread serves from another thread, and the main thread
// keeps its affinity. A child process does it: its TestMain runs on the
// main thread with one P, so the goroutine Run starts for the loop runs
// there when Run blocks (see mainThreadChild). Without the hand-off the
// loop's thread is the main thread, pinned to the loop's CPU, and a uring
// loop's (keepThread) stays pinned after the engine stopped: the runtime
// never ends the main thread, and /proc/PID's affinity is the process's as
// tools read it.
func TestLoopOffMainThread(t *testing.T) {
	if cpus := allowedCPUList(t); len(cpus) < 2 {
		t.Skipf("needs two allowed CPUs, to tell the main thread pinned to one; allowed: %v", cpus)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), mainThreadEnv+"="+string(b))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "served off the main thread") {
				t.Fatalf("child said:\n%s", out)
			}
			t.Logf("%s", strings.TrimSpace(string(out)))
		})
	}
}

// mainThreadChild runs an engine of one loop from the main goroutine on
// the main thread with GOMAXPROCS 1: Run starts the loop's goroutine (the
// next to run) and waits, so the loop starts on the main thread. It echoes
// a message, stops, and reports the loop's thread and the main thread's
// affinity before and after. The exit code is non-zero on a failure.
func mainThreadChild(b Backend) int {
	fail := func(format string, args ...any) int {
		fmt.Printf(format+"\n", args...)
		return 1
	}
	pid := unix.Getpid()
	if unix.Gettid() != pid {
		return fail("TestMain is not on the main thread (tid %d, pid %d)", unix.Gettid(), pid)
	}
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &before); err != nil {
		return fail("sched_getaffinity: %v", err)
	}
	cpu := -1
	for c := range 1024 {
		if before.IsSet(c) {
			cpu = c // the last allowed: not what the main thread has alone
		}
	}
	if before.Count() < 2 {
		return fail("needs two allowed CPUs to tell a pinned main thread, has %d", before.Count())
	}
	runtime.GOMAXPROCS(1)
	cfg := testConfig(b)
	cfg.CPUs = []int{cpu}
	cfg.KeepGOMAXPROCS = true
	e, err := New(cfg, &echoHandler{})
	if err != nil {
		return fail("New: %v", err)
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		return fail("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan string, 1)
	go func() {
		defer cancel()
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			result <- fmt.Sprintf("dial: %v", err)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := roundTrip(c, []byte("through a loop started on the main thread")); err != nil {
			result <- fmt.Sprintf("echo: %v", err)
			return
		}
		var during unix.CPUSet
		unix.SchedGetaffinity(pid, &during)
		result <- fmt.Sprintf("loop thread %d (pid %d), main thread on %d CPU(s) while serving", e.Loops()[0].tid.Load(), pid, during.Count())
	}()
	// Still on the main thread (locked since init): from here the main
	// goroutine blocks in Run, and the loop's goroutine, next to run on
	// the one P, starts on this thread.
	if unix.Gettid() != pid {
		return fail("the main goroutine left the main thread before Run (tid %d, pid %d)", unix.Gettid(), pid)
	}
	runtime.UnlockOSThread()
	if err := e.Run(ctx); err != nil {
		return fail("Run: %v", err)
	}
	said := <-result
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &after); err != nil {
		return fail("sched_getaffinity: %v", err)
	}
	if tid := e.Loops()[0].tid.Load(); tid == int32(pid) || tid == 0 {
		return fail("%s: the loop served on thread %d, the main thread is %d", said, tid, pid)
	}
	if after != before {
		return fail("%s: the main thread's affinity is %d CPU(s) after the engine stopped, %d before", said, after.Count(), before.Count())
	}
	fmt.Printf("%s: served off the main thread, whose affinity is unchanged\n", said)
	return 0
}
