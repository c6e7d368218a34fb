package uring

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/cpulist"
	"github.com/spindlenet/spindle/internal/sys"
)

// SQThreadCPUError says why io_uring_setup would refuse cpu as the SQPOLL
// thread's CPU (Config.SQAffinity) for a ring a thread of this process sets
// up: the CPU does not exist, is offline, or lies outside the thread's
// cpuset. The kernel (6.18) checks the cpuset, not the thread's affinity:
// a process confined to some CPUs with sched_setaffinity (taskset) may
// still put its SQPOLL thread on another CPU of its cpuset, and
// SQThreadCPUError does not refuse that. Nil when none of these holds; a
// CPU list sysfs does not have is not checked (the kernel then decides).
// Any goroutine.
func SQThreadCPUError(cpu int) error {
	return sqThreadCPUError("/", cpu, cpusetHolds)
}

// sqThreadCPUError is SQThreadCPUError with the CPU lists read under root
// and the cpuset asked of holds.
func sqThreadCPUError(root string, cpu int, holds func(int) (bool, error)) error {
	if cpu < 0 {
		return fmt.Errorf("negative SQ thread CPU %d", cpu)
	}
	for _, f := range []struct{ file, what string }{
		{"possible", "does not exist"},
		{"online", "is offline"},
	} {
		b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu", f.file))
		if err != nil {
			continue // no sysfs here: the kernel judges
		}
		list := strings.TrimSpace(string(b))
		cpus, err := cpulist.Parse(list)
		if err != nil {
			continue
		}
		if !slices.Contains(cpus, cpu) {
			return fmt.Errorf("SQ thread CPU %d %s (%s CPUs %s)", cpu, f.what, f.file, list)
		}
	}
	in, err := holds(cpu)
	if err != nil {
		return err
	}
	if !in {
		return fmt.Errorf("SQ thread CPU %d is outside the process's cpuset", cpu)
	}
	return nil
}

// cpusetHolds reports whether a thread of the process may run on cpu:
// sched_setaffinity refuses (EINVAL) a mask with no CPU of the thread's
// cpuset online in it, the set io_uring_setup checks an SQ thread's CPU
// against. It asks on a locked thread of its own, which ends with the
// goroutine (sys.LockedThread), so the affinity it sets goes with it.
func cpusetHolds(cpu int) (bool, error) {
	set := unix.NewCPUSet(cpu + 1)
	set.Set(cpu)
	res := make(chan error, 1)
	go sys.LockedThread(func() { res <- unix.SchedSetaffinityDynamic(0, set) })
	switch err := <-res; err {
	case nil:
		return true, nil
	case unix.EINVAL:
		return false, nil
	default:
		return false, os.NewSyscallError("sched_setaffinity", err)
	}
}
