// Package cgrouptest makes cgroup v2 cgroups for the tests that need real
// cpuset partitions, and undoes each change in the test's cleanup, on
// failure too, so that the host is left as it was.
package cgrouptest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Hold takes, for the rest of t, a lock that every test making cpuset
// partitions holds while it does, across processes: go test runs the
// packages of one command line side by side, and two tests partitioning
// the same CPU at once hold each other's partition invalid (the kernel's
// "not exclusive"), and one's cgroup keeps the other from disabling the
// controller again. Call it before the first change, so that the lock is
// released after every cleanup.
func Hold(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "spindle-cgrouptest.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases the lock
}

// Write writes v to the cgroup file p; its error names both.
func Write(p, v string) error {
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}

// EnableCpuset enables the cpuset controller for the children of cgroup
// dir (its cgroup.subtree_control) where it is not, and disables it again
// in t's cleanup, which must run after that of every child made.
func EnableCpuset(t testing.TB, dir string) {
	t.Helper()
	ctl := filepath.Join(dir, "cgroup.subtree_control")
	sub, err := os.ReadFile(ctl)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(strings.Fields(string(sub)), "cpuset") {
		return
	}
	if err := Write(ctl, "+cpuset"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Write(ctl, "-cpuset"); err != nil {
			t.Error(err)
		}
	})
}

// Mkdir makes cgroup dir and, in t's cleanup, moves any task in it to the
// root cgroup (of the hierarchy mounted at mount) and removes it.
func Mkdir(t testing.TB, mount, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(b)) {
				if err := Write(filepath.Join(mount, "cgroup.procs"), pid); err != nil {
					t.Errorf("moving task %s out of %s: %v", pid, dir, err)
				}
			}
		}
		if err := os.Remove(dir); err != nil {
			t.Error(err)
		}
	})
}

// SetPartition writes typ ("root" or "isolated") to cgroup dir's
// cpuset.cpus.partition, and "member" back in t's cleanup. The kernel may
// take the write and hold the partition invalid: the file says so.
func SetPartition(t testing.TB, dir, typ string) {
	t.Helper()
	part := filepath.Join(dir, "cpuset.cpus.partition")
	if err := Write(part, typ); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Write(part, "member"); err != nil {
			t.Error(err)
		}
	})
}
