package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/cgrouptest"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/tune"
)

// TestTuneInNetNSSeesCpusetPartitions: the tuner run as TUNING.md says
// for a network namespace, `ip netns exec NS spindle tune ...`, must see
// the host's cgroup v2 cpuset partitions. ip netns exec mounts the
// namespace's sysfs over /sys in a mount namespace of its own, and the
// cgroup hierarchies mounted below /sys go with the old one: with CPU 1
// an isolated partition, inspect said "no cgroup v2 hierarchy is mounted"
// and isolated nothing, and plan put the loop of the namespace's veth on
// CPUs 0-1 rather than the partition's CPU 1. Run as root, the tuner
// reads them from a cgroup2 mount of its own, and says so.
func TestTuneInNetNSSeesCpusetPartitions(t *testing.T) {
	if err := veth.Requirements(); err != nil {
		t.Skipf("a network namespace with a veth pair: %v", err)
	}
	cgrouptest.Hold(t) // before reading: another package's test may hold CPU 1
	h, err := tune.ReadHost("/")
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
	one := topo.NewCPUSet(1)
	if !h.Online.Contains(0) || !h.Online.Contains(1) {
		t.Skipf("the test partitions CPU 1 and leaves the rest CPU 0: online CPUs %s", h.Online)
	}
	if tune.IsolatedCPUs(h).Contains(1) {
		t.Skipf("CPU 1 is isolated already (%s): not taken", tune.IsolationKind(h, one))
	}
	cg := cgrouptest.Isolate(t, h.Cpuset.Mount, 1)
	p, err := veth.New(veth.Config{Tag: "tpart", AddrA: "10.213.11.1/30", AddrB: "10.213.11.2/30"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	inNS := func(args ...string) []byte {
		t.Helper()
		c := spindleCmd(append([]string{"tune"}, args...)...)
		cmd := exec.Command("ip", append([]string{"netns", "exec", p.NSA}, c.Args...)...)
		cmd.Env = c.Env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ip netns exec %s spindle tune %v: %v\n%s", p.NSA, args, err, out)
		}
		return out
	}

	var nh topo.Host
	strictJSON(t, string(inNS("inspect", "--json")), &nh)
	if !nh.IsolatedPartition.Equal(one) || len(nh.PartitionOf(one)) != 1 || nh.PartitionOf(one)[0] != cg {
		t.Errorf("inspect in %s: isolated by partitions %s (%s), partitions %+v; want CPU 1, of %s", p.NSA, nh.IsolatedPartition, nh.Cpuset.Source, nh.Cpuset.Partitions, cg)
	}
	if !strings.Contains(nh.Cpuset.Source, "cgroup2 mounted privately: none visible in this mount namespace") {
		t.Errorf("inspect in %s: cpuset read from %s (private %v), not said to be from a cgroup2 mount of its own", p.NSA, nh.Cpuset.Source, nh.Cpuset.Private)
	}
	t.Logf("inspect: %s", nh.Cpuset.Source)
	var plan tune.Plan
	strictJSON(t, string(inNS("plan", "--json", "--iface", p.DevA)), &plan)
	if !plan.LoopCPUs.Equal(one) {
		t.Errorf("plan for %s in %s: loop CPUs %s, want the isolated partition's CPU 1", p.DevA, p.NSA, plan.LoopCPUs)
	}
}
