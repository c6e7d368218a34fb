package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// pinChildEnv makes TestPinNarrowedByCpuset the child that starts a
// program pinned to the CPUs it names.
const pinChildEnv = "SPINDLE_BENCH_TEST_PIN"

// TestPinNarrowedByCpuset: a server child asked to pin to CPUs of which
// its cpuset allows only some fails to start, naming the CPUs it got,
// instead of serving on those alone while the report names them all:
// sched_setaffinity silently leaves out the CPUs outside the caller's
// cpuset and fails only when none is left; so does the start of a proxy
// or h2load pinned to them. The children (a Go arm, the C server where it
// can be built, this test starting a program) run in a cgroup v1 cpuset
// of the last CPU, made for the test and removed after it.
func TestPinNarrowedByCpuset(t *testing.T) {
	skipUnlessLinux(t)
	if cpus := os.Getenv(pinChildEnv); cpus != "" {
		// In the cpuset: the harness's start of a proxy or h2load.
		list, err := ParseCPUList(cpus)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/true")
		if err := startPinned(cmd, list); err == nil {
			cmd.Wait()
			t.Fatalf("a program pinned to CPUs %s in a cpuset of fewer started", cpus)
		} else {
			fmt.Println(err)
		}
		return
	}
	root := "/sys/fs/cgroup/cpuset"
	mems, err := os.ReadFile(filepath.Join(root, "cpuset.mems"))
	if err != nil {
		t.Skipf("no cgroup v1 cpuset hierarchy at %s: %v", root, err)
	}
	allowed, err := allowedCPUs()
	if err != nil || len(allowed) < 2 {
		t.Skipf("needs two CPUs this process may run on, has %v (%v)", allowed, err)
	}
	last := allowed[len(allowed)-1]
	cpus := FormatCPUList(allowed[len(allowed)-2:])
	dir := filepath.Join(root, fmt.Sprintf("spindle-bench-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			t.Skipf("a cpuset of the test's own (CPU %d) needs write access to the cgroup-v1 cpuset hierarchy, root's: %v", last, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test cpuset: %v", err)
		}
	})
	for name, v := range map[string]string{"cpuset.cpus": fmt.Sprint(last), "cpuset.mems": strings.TrimSpace(string(mems))} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	t.Run("startPinned", func(t *testing.T) {
		// The test binary in the cpuset starts a program as the harness
		// starts a proxy or h2load.
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir, os.Args[0], "-test.run=^TestPinNarrowedByCpuset$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), pinChildEnv+"="+cpus, noRaceExitSleep())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if want := fmt.Sprintf("the kernel let it run on CPU %d only", last); !strings.Contains(string(out), want) {
			t.Errorf("the child does not say %q:\n%s", want, out)
		}
	})
	for _, tc := range []struct {
		arm   string
		child func(t *testing.T) (argv, env []string)
	}{
		{"go-net", func(*testing.T) ([]string, []string) { return testChildCommand() }},
		{CPeerArm, func(t *testing.T) ([]string, []string) {
			skipUnlessCPeer(t)
			argv, err := BuildCPeer(context.Background(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return argv, nil
		}},
	} {
		t.Run(tc.arm, func(t *testing.T) {
			argv, env := tc.child(t)
			// The shell moves itself into the cpuset, then becomes the child.
			argv = append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir}, argv...)
			argv = append(argv, "-arm", tc.arm, "-listen", "127.0.0.1:0", "-cpus", cpus, "-control")
			p, err := startServerProc(context.Background(), argv, env)
			if err == nil {
				p.stop()
				t.Fatalf("a server pinned to CPUs %s in a cpuset of CPU %d started", cpus, last)
			}
			t.Logf("refused: %v", err)
			if want := fmt.Sprintf("the kernel let it run on CPU %d only", last); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

// TestPinHarness: pinHarness puts every thread of the process, those
// started after it included, on the CPUs given, and restore gives each the
// mask it had.
func TestPinHarness(t *testing.T) {
	cpus := needTwoAllowedCPUs(t)
	want := cpus[len(cpus)-1:]
	restore, err := pinHarness(want)
	if err != nil {
		t.Fatal(err)
	}
	// A thread started now, locked, inherits the mask.
	started := make(chan struct{})
	end := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(started)
		<-end
	}()
	<-started
	for tid, m := range threadMasks(t) {
		if !slices.Equal(m, want) {
			t.Errorf("thread %s may run on CPUs %v, want %v", tid, m, want)
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	close(end)
	for tid, m := range threadMasks(t) {
		if !slices.Equal(m, cpus) {
			t.Errorf("restored: thread %s may run on CPUs %v, want %v", tid, m, cpus)
		}
	}
}

// TestPinHarnessKeepsGOMAXPROCS: the runtime follows the process's CPU
// affinity when GOMAXPROCS was not set (Go 1.25), and pinning the harness to
// one client CPU dropped it to 1 about a second later: the load generator's
// system calls then lost their P to sysmon, which woke every 20 µs on the
// client's CPU (12-17 % of it) and cut the closed-loop rate by a fifth or
// more. The testing package sets GOMAXPROCS, so the test gives the runtime
// its default back first.
func TestPinHarnessKeepsGOMAXPROCS(t *testing.T) {
	cpus := needTwoAllowedCPUs(t)
	runtime.SetDefaultGOMAXPROCS()
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	restore, err := pinHarness(cpus[len(cpus)-1:])
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := runtime.GOMAXPROCS(0); n != procs {
			t.Fatalf("GOMAXPROCS %d after the pin, %d before", n, procs)
		}
	}
}

// threadMasks returns the CPUs each thread of the process may run on, by
// TID.
func threadMasks(t *testing.T) map[string][]int {
	t.Helper()
	m, err := taskMasks()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// taskMasks is threadMasks for any goroutine: the CPUs each thread of the
// process may run on (Cpus_allowed_list), by TID.
func taskMasks() (map[string][]int, error) {
	out := map[string][]int{}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "status"))
		if err != nil {
			continue // exited
		}
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				if out[e.Name()], err = ParseCPUList(strings.TrimSpace(v)); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// TestPinHarnessFailed: a pin the kernel narrows (a CPU the machine does
// not have, beside one it has: sched_setaffinity keeps the one without an
// error) fails, naming the CPU it got, and leaves every thread on the
// CPUs it had, none on the one CPU left.
func TestPinHarnessFailed(t *testing.T) {
	cpus := needTwoAllowedCPUs(t)
	const absent = 1023 // the last of a unix.CPUSet, past any CPU here
	if slices.Contains(cpus, absent) {
		t.Skipf("CPU %d is allowed", absent)
	}
	restore, err := pinHarness([]int{cpus[0], absent})
	if err == nil {
		restore()
		t.Fatalf("a pin to CPUs %d and %d succeeded", cpus[0], absent)
	}
	if want := fmt.Sprintf("the kernel let it run on CPU %d only", cpus[0]); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	for tid, m := range threadMasks(t) {
		if !slices.Equal(m, cpus) {
			t.Errorf("after the failed pin: thread %s may run on CPUs %v, want %v", tid, m, cpus)
		}
	}
}
