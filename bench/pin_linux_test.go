package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinNarrowedByCpuset: a server child asked to pin to CPUs of which
// its cpuset allows only some fails to start, naming the CPUs it got,
// instead of serving on those alone while the report names them all:
// sched_setaffinity silently leaves out the CPUs outside the caller's
// cpuset and fails only when none is left. The children (a Go arm, and
// the C server where it can be built) run in a cgroup v1 cpuset of the
// last CPU, made for the test and removed after it.
func TestPinNarrowedByCpuset(t *testing.T) {
	skipUnlessLinux(t)
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
		t.Skipf("cannot make a cpuset (root?): %v", err)
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
