//go:build linux

package tune

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/cgrouptest"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
)

// isolatePartition makes a cgroup of the cgroup v2 root a valid isolated
// cpuset partition of CPU 1 for the rest of t (cgrouptest.Isolate), and
// returns its path below the mount. It skips, saying why, where no such
// partition can be made: not root, the cpuset controller not on cgroup v2
// (scripts/cpuset-v2.sh moves it there), fewer than 2 CPUs, CPU 1
// isolated already.
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
	if k := kver.Release(); !kver.AtLeast(k, "5.15") {
		t.Skipf("the kernel may have no cgroup v2 cpuset partitions (requires >= 5.15): %s", k)
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
	return cgrouptest.Isolate(t, h.Cpuset.Mount, cpu)
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

// TestNetNSApplyRevertWithCpusetPartition applies, through the netns
// view, plans for a veth while CPU 1 is a valid isolated cpuset
// partition, and reverts them. The default plan takes CPU 1, the
// partition's, for the loop and steers transmits to it (XPS); a plan
// given loop CPUs 0-1 spreads RPS over both. The kernel keeps RPS off the
// CPUs its housekeeping domain mask leaves out (store_rps_map), which
// sysfs "isolated" (Host.IsolatedDomain) shows and the plan leaves out in
// turn: the maps written must read back as planned (a kernel that strips
// a partition's CPUs without showing them there would have Apply refuse
// its own write), and every file must read as before after the revert.
func TestNetNSApplyRevertWithCpusetPartition(t *testing.T) {
	isolatePartition(t)
	nsPath, va, vb := vethNetNS(t, "tuneprtap")
	one := topo.NewCPUSet(1)
	stateDir := t.TempDir()
	err := inNetNSHost(nsPath, t.TempDir(), func(tgt Target, h *topo.Host) error {
		if !IsolatedCPUs(h).Equal(one) {
			return fmt.Errorf("the view's isolated CPUs: %s (%s), want the partition's CPU 1", IsolatedCPUs(h), h.Cpuset.Source)
		}
		rps := topo.NewCPUSet(0, 1).Minus(h.IsolatedDomain).Minus(h.NohzFull)
		for _, tc := range []struct {
			name  string
			loops topo.CPUSet // given; nil: the plan's default
			want  map[string]string
		}{
			{"default loops", nil, map[string]string{
				"/sys/class/net/" + va + "/queues/tx-0/xps_cpus": one.Mask(),
			}},
			{"loops 0-1", topo.NewCPUSet(0, 1), map[string]string{
				"/sys/class/net/" + va + "/queues/rx-0/rps_cpus": rps.Mask(),
			}},
		} {
			p, err := MakePlan(h, PlanConfig{Interfaces: []string{va, vb}, LoopCPUs: tc.loops, Somaxconn: -1})
			if err != nil {
				return fmt.Errorf("%s: %w", tc.name, err)
			}
			if tc.loops == nil && !p.LoopCPUs.Equal(one) {
				return fmt.Errorf("%s: loop CPUs %s, want the partition's CPU 1", tc.name, p.LoopCPUs)
			}
			for target, v := range tc.want {
				if w := writeTo(p, target); w == nil || !equalValues(w.Format, w.New, v) {
					return fmt.Errorf("%s: plan writes %+v to %s, want %s; writes %v; notes %q", tc.name, w, target, v, targets(p), p.Notes)
				}
			}
			before := map[string]string{}
			for _, w := range p.Writes {
				if before[w.Target()], err = tgt.read(w); err != nil {
					return err
				}
			}
			state := filepath.Join(stateDir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if _, err := Apply(p, tgt, state); err != nil {
				return fmt.Errorf("%s: apply: %w", tc.name, err)
			}
			for _, w := range p.Writes {
				if got, err := tgt.read(w); err != nil || !equalValues(w.Format, got, w.New) {
					return fmt.Errorf("%s: after apply %s reads %q (%v), want %q", tc.name, w.Target(), got, err, w.New)
				}
			}
			if drifted, _, err := Revert(state, tgt); err != nil || len(drifted) > 0 {
				return fmt.Errorf("%s: revert: %v (drifted %v)", tc.name, err, drifted)
			}
			if err := sameBytes(tgt, p.Writes, before); err != nil {
				return fmt.Errorf("%s: after revert: %w", tc.name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
