//go:build linux

package tune

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/cgrouptest"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
)

// isolatePartition makes cgroup spindle-test-PID of the cgroup v2 root a
// valid isolated cpuset partition of CPU 1 for the rest of t, and returns
// its path below the mount ("/spindle-test-PID"). It skips, saying why,
// where no such partition can be made: not root, the cpuset controller
// not on cgroup v2 (scripts/cpuset-v2.sh moves it there), fewer than 2
// CPUs, CPU 1 isolated already. Everything is undone in t's cleanup, on
// failure too.
func isolatePartition(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup v2 cpuset partition needs root")
	}
	cgrouptest.Hold(t) // before reading: another package's test may hold CPU 1
	h, err := ReadHost("/")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Cpuset.Available {
		t.Skipf("no cgroup v2 cpuset partition can be made here: %s", h.Cpuset.Source)
	}
	if h.Cpuset.MountRoot != "/" {
		t.Skipf("the cgroup v2 mount %s shows cgroup %s, not the hierarchy's root, whose CPUs a partition of the root's is carved from", h.Cpuset.Mount, h.Cpuset.MountRoot)
	}
	const cpu = 1
	if !h.Online.Contains(0) || !h.Online.Contains(cpu) {
		t.Skipf("the test partitions CPU 1 and leaves the rest CPU 0: online CPUs %s", h.Online)
	}
	if IsolatedCPUs(h).Contains(cpu) {
		t.Skipf("CPU %d is isolated already (%s): not taken", cpu, IsolationKind(h, topo.NewCPUSet(cpu)))
	}
	mount := h.Cpuset.Mount
	cgrouptest.EnableCpuset(t, mount)
	dir := filepath.Join(mount, fmt.Sprintf("spindle-test-%d", os.Getpid()))
	cgrouptest.Mkdir(t, mount, dir)
	part := filepath.Join(dir, "cpuset.cpus.partition")
	if _, err := os.Stat(part); err != nil {
		// cpuset.cpus.partition, "isolated" included, is in every
		// kernel since 5.15.
		if k := kver.Release(); kver.AtLeast(k, "5.15") {
			t.Fatalf("no cpuset.cpus.partition on %s: %v", k, err)
		}
		t.Skipf("the kernel has no cgroup v2 cpuset partitions (no cpuset.cpus.partition; requires >= 5.15): %v", err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.cpus.exclusive"} {
		// Linux 6.7+ takes a partition's CPUs from cpuset.cpus.exclusive
		// when set; earlier kernels have no such file.
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			if err := cgrouptest.Write(filepath.Join(dir, f), strconv.Itoa(cpu)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cgrouptest.SetPartition(t, dir, "isolated")
	if b, _ := os.ReadFile(part); strings.TrimSpace(string(b)) != "isolated" {
		t.Fatalf("%s reads %q after writing isolated: the kernel holds the partition of CPU %d invalid", part, b, cpu)
	}
	return "/" + filepath.Base(dir)
}

// vethNetNS makes network namespace spd-NAME-PID holding a veth pair, both
// ends up (one receive queue each, no interrupt), and deletes it in t's
// cleanup. It returns the namespace's path and the two ends' names.
func vethNetNS(t *testing.T, name string) (nsPath, va, vb string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	pid := os.Getpid()
	ns := fmt.Sprintf("spd-%s-%d", name, pid)
	va, vb = fmt.Sprintf("spn%da", pid), fmt.Sprintf("spn%db", pid)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "add", va, "type", "veth", "peer", "name", vb)
	run(t, "ip", "-n", ns, "link", "set", va, "up")
	run(t, "ip", "-n", ns, "link", "set", vb, "up")
	return veth.Path(ns), va, vb
}

// TestNetNSViewSeesCpusetPartitions: a host read through MountNetNSView
// (the tuner's view of a network namespace) must see the cgroup v2 cpuset
// partitions the host's is, and take a valid isolated partition's CPU for
// isolated, so that a plan for the namespace's interfaces defaults its
// loops (and with them IRQs and RPS) to it. The view's fresh sysfs has an
// empty fs/cgroup: read through it, the host had no cpuset controller,
// no partition and no isolated CPU, and the plan spread its loops and
// RPS over every CPU.
func TestNetNSViewSeesCpusetPartitions(t *testing.T) {
	cg := isolatePartition(t)
	nsPath, va, _ := vethNetNS(t, "tunepart")
	one := topo.NewCPUSet(1)
	err := inNetNSHost(nsPath, t.TempDir(), func(_ Target, h *topo.Host) error {
		if h.NIC(va) == nil {
			return fmt.Errorf("the view lacks %s: %v", va, nicNames(h))
		}
		var errs []error
		if !h.Cpuset.Available || !h.IsolatedPartition.Equal(one) {
			errs = append(errs, fmt.Errorf("the view's cpuset: available %v, isolated %s (%s), want CPU 1 isolated by partition %s", h.Cpuset.Available, h.IsolatedPartition, h.Cpuset.Source, cg))
		}
		if got := h.PartitionOf(one); len(got) != 1 || got[0] != cg {
			errs = append(errs, fmt.Errorf("the view's partitions of CPU 1: %q, want [%s]; all: %+v", got, cg, h.Cpuset.Partitions))
		}
		p, err := MakePlan(h, PlanConfig{Interfaces: []string{va}})
		if err != nil {
			return err
		}
		if !p.LoopCPUs.Equal(one) {
			errs = append(errs, fmt.Errorf("plan for %s: loop CPUs %s, want the isolated partition's CPU 1", va, p.LoopCPUs))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}
