package engine

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// seccompRefused starts the line a child prints, or skips with, when the
// kernel refuses its seccomp filter: the parent test skips with that line.
const seccompRefused = "cannot install a seccomp filter"

// runChild runs the test named name again in a child process of the test
// binary, with env=1 in its environment (the child's cue to do the work)
// and attr for its start (nil, or clone flags for namespaces of its own).
// t fails unless the child's test passed; it skips where the child could
// not install its seccomp filter.
func runChild(t *testing.T, name, env string, attr *syscall.SysProcAttr) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if i := strings.Index(string(out), seccompRefused); i >= 0 {
		t.Skip(strings.SplitN(string(out[i:]), "\n", 2)[0])
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name+" ") {
		t.Fatalf("child with %s=1: %v\n%s", env, err, out)
	}
}
