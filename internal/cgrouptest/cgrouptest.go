// Package cgrouptest makes cgroup v2 cgroups for the tests that need real
// cpuset partitions, and undoes each change in the test's cleanup, on
// failure too, so that the host is left as it was.
package cgrouptest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// Isolate makes cgroup spindle-test-PID of the root cgroup (of the cgroup
// v2 hierarchy mounted at mount) a valid isolated cpuset partition of cpu
// for the rest of t, and returns its path below the mount
// ("/spindle-test-PID"). The caller holds the lock (Hold) and has checked
// that the cpuset controller is on that hierarchy, that the mount shows
// its root and that cpu is online and no partition's. It fails t where
// the kernel has no cpuset.cpus.partition (every kernel since 5.15 has)
// or holds the partition invalid. Everything is undone in t's cleanup.
func Isolate(t testing.TB, mount string, cpu int) string {
	t.Helper()
	EnableCpuset(t, mount)
	dir := filepath.Join(mount, fmt.Sprintf("spindle-test-%d", os.Getpid()))
	Mkdir(t, mount, dir)
	part := filepath.Join(dir, "cpuset.cpus.partition")
	if _, err := os.Stat(part); err != nil {
		t.Fatalf("no cgroup v2 cpuset partitions (requires >= 5.15): %v", err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.cpus.exclusive"} {
		// Linux 6.7+ takes a partition's CPUs from cpuset.cpus.exclusive
		// when set; earlier kernels have no such file.
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			if err := Write(filepath.Join(dir, f), strconv.Itoa(cpu)); err != nil {
				t.Fatal(err)
			}
		}
	}
	SetPartition(t, dir, "isolated")
	if b, _ := os.ReadFile(part); strings.TrimSpace(string(b)) != "isolated" {
		t.Fatalf("%s reads %q after writing isolated: the kernel holds the partition of CPU %d invalid", part, b, cpu)
	}
	return "/" + filepath.Base(dir)
}
