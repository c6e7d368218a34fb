//go:build linux

package topo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/cgrouptest"
)

// TestCpusetPartitionLive makes an isolated cgroup v2 cpuset partition of
// the last online CPU and reads it back as isolated, then restores the
// hierarchy. It needs root and the cpuset controller on cgroup v2; a host
// whose controller is bound to cgroup v1 skips saying so.
func TestCpusetPartitionLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup v2 cpuset partition needs root")
	}
	cgrouptest.Hold(t) // before reading: another package's test may hold CPU 1
	h, err := Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Cpuset.Mount == "" || strings.Contains(h.Cpuset.Source, "cpuset controller") {
		t.Skipf("no cgroup v2 cpuset partition can be made here: %s", h.Cpuset.Source)
	}
	if h.Online.Len() < 2 {
		t.Skipf("an isolated partition must leave its parent a CPU: %d online", h.Online.Len())
	}
	cpu := h.Online[h.Online.Len()-1]
	if h.IsolatedDomain.Contains(cpu) || h.IsolatedPartition.Contains(cpu) {
		t.Skipf("CPU %d is isolated already (isolcpus or a partition): not taken", cpu)
	}
	mount := h.Cpuset.Mount
	cgrouptest.EnableCpuset(t, mount)
	dir := filepath.Join(mount, fmt.Sprintf("spindle-topo-test-%d", os.Getpid()))
	cgrouptest.Mkdir(t, mount, dir)
	if err := cgrouptest.Write(filepath.Join(dir, "cpuset.cpus"), fmt.Sprint(cpu)); err != nil {
		t.Fatal(err)
	}
	// Isolated partitions are in every kernel with cgroup v2
	// cpuset.cpus.partition since 6.1.
	cgrouptest.SetPartition(t, dir, "isolated")
	part := filepath.Join(dir, "cpuset.cpus.partition")
	if s, _ := os.ReadFile(part); strings.TrimSpace(string(s)) != "isolated" {
		t.Fatalf("%s reads %q after writing isolated", part, s)
	}
	h, err = Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsolatedPartition.Contains(cpu) {
		t.Errorf("IsolatedPartition %s (from %s) lacks CPU %d of the partition just made", h.IsolatedPartition, h.Cpuset.Source, cpu)
	}
	cg := "/" + filepath.Base(dir)
	if !slices.Equal(h.PartitionOf(NewCPUSet(cpu)), []string{cg}) {
		t.Errorf("PartitionOf(%d) = %q, want [%s]; partitions %+v", cpu, h.PartitionOf(NewCPUSet(cpu)), cg, h.Cpuset.Partitions)
	}
}

// unmountedEnv, set, makes the test that runs runUnmounted's process the
// child: it reads the host and prints what it found (unmountedResult).
const unmountedEnv = "SPINDLE_TOPO_UNMOUNTED_CGROUP2"

// unmountedResult is what the child of runUnmounted prints.
type unmountedResult struct {
	Cpuset            Cpuset
	IsolatedPartition CPUSet
	// Mountinfo is the process's /proc/self/mountinfo before the read,
	// and Changed what differs after it ("" where nothing does).
	Mountinfo, Changed string
}

// runUnmounted runs test (this one) in a process whose mount namespace
// shows no cgroup v2 mount, as `ip netns exec` leaves the host's: its own
// (unshare --mount, propagating nothing back), with every cgroup2 mount
// in it unmounted before the test binary starts; unshare takes the flags
// in more too, and the binary runs under the command wrap where given.
// Its temporary directory is tmp. It returns what the child found. It
// needs root.
func runUnmounted(t *testing.T, test, tmp string, more, wrap []string) unmountedResult {
	t.Helper()
	for _, c := range []string{"unshare", "sh", "umount", "awk", "setpriv"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("running the read where no cgroup v2 mount is visible needs %s (util-linux): %v", c, err)
		}
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\tcgroup2\n") {
		t.Skipf("the kernel has no cgroup2 filesystem (not in /proc/filesystems): %v", err)
	}
	argv := append([]string{"--mount", "--propagation", "private"}, more...)
	argv = append(argv, "sh", "-c",
		`for m in $(awk '$(NF-2) == "cgroup2" {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || exit; done; exec "$@"`, "sh")
	argv = append(append(argv, wrap...), os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd := exec.Command("unshare", argv...)
	// A race-enabled binary sleeps a second at exit unless told not to.
	cmd.Env = append(os.Environ(), unmountedEnv+"=1", "TMPDIR="+tmp,
		strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s without cgroup v2 mounts: %v\n%s\n%s", test, err, out, ee.Stderr)
		}
		t.Fatal(err)
	}
	_, js, ok := strings.Cut(string(out), unmountedEnv+": ")
	js, _, _ = strings.Cut(js, "\n")
	var res unmountedResult
	if err := json.Unmarshal([]byte(js), &res); !ok || err != nil {
		t.Fatalf("%s without cgroup v2 mounts printed no result (%v):\n%s", test, err, out)
	}
	return res
}

// unmountedChild, in runUnmounted's child, reads the host and prints
// what it found, with whether the process's mounts changed across the
// read, and reports true; in any other process it reports false.
func unmountedChild(t *testing.T) bool {
	if os.Getenv(unmountedEnv) == "" {
		return false
	}
	before, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	// From another thread than the one that mounted (gone by now): the
	// mount namespace of the process, which every other thread shares.
	after := make(chan []byte, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b, _ := os.ReadFile("/proc/thread-self/mountinfo")
		after <- b
	}()
	res := unmountedResult{Cpuset: h.Cpuset, IsolatedPartition: h.IsolatedPartition, Mountinfo: string(before)}
	if a := <-after; !bytes.Equal(a, before) {
		res.Changed = string(a)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s: %s\n", unmountedEnv, b)
	return true
}

// TestCpusetPartitionReadWhereNoCgroup2Mounted: a process whose mount
// namespace shows no cgroup v2 mount, as under `ip netns exec` (a sysfs
// of the network namespace over /sys, the host's cgroup mounts left
// behind), reads the partitions from a cgroup2 mount of its own, and
// says so. It read none, "no cgroup v2 hierarchy is mounted", and so
// isolated nothing, with CPU 1 an isolated partition.
func TestCpusetPartitionReadWhereNoCgroup2Mounted(t *testing.T) {
	if unmountedChild(t) {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup v2 cpuset partition and a mount namespace needs root")
	}
	cgrouptest.Hold(t) // before reading: another package's test may hold CPU 1
	h, err := Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Cpuset.Available {
		t.Skipf("no cgroup v2 cpuset partition can be made here: %s", h.Cpuset.Source)
	}
	if h.Cpuset.MountRoot != "/" {
		t.Skipf("the cgroup v2 mount %s shows cgroup %s, not the hierarchy's root, whose CPUs a partition of the root's is carved from", h.Cpuset.Mount, h.Cpuset.MountRoot)
	}
	one := NewCPUSet(1)
	if !h.Online.Contains(0) || !h.Online.Contains(1) {
		t.Skipf("the test partitions CPU 1 and leaves the rest CPU 0: online CPUs %s", h.Online)
	}
	if h.IsolatedDomain.Contains(1) || h.IsolatedPartition.Contains(1) {
		t.Skip("CPU 1 is isolated already (isolcpus or a partition): not taken")
	}
	cg := cgrouptest.Isolate(t, h.Cpuset.Mount, 1)
	res := runUnmounted(t, "TestCpusetPartitionReadWhereNoCgroup2Mounted", t.TempDir(), nil, nil)
	t.Logf("read: %s", res.Cpuset.Source)
	c := res.Cpuset
	if !res.IsolatedPartition.Equal(one) || len(c.Partitions) != 1 || c.Partitions[0].Cgroup != cg || !c.Partitions[0].CPUs.Equal(one) {
		t.Errorf("isolated by partitions %s (%s), partitions %+v; want CPU 1, of %s", res.IsolatedPartition, c.Source, c.Partitions, cg)
	}
	if !c.Available || !c.Private || c.MountRoot != "/" || !strings.Contains(c.Source, "cgroup2 mounted privately: none visible in this mount namespace") {
		t.Errorf("cpuset available %v, private %v, mount %s showing %s, from %q; want it read from a cgroup2 mount of its own of the whole hierarchy, and said so", c.Available, c.Private, c.Mount, c.MountRoot, c.Source)
	}
}

// TestCgroup2PrivateMountLeavesNoTrace: the cgroup2 mount a read makes
// where none is visible is the reading thread's alone, gone with it: the
// process's mounts (read from another thread) and the host's are the
// same after as before, and its temporary directory is removed.
func TestCgroup2PrivateMountLeavesNoTrace(t *testing.T) {
	if unmountedChild(t) {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting cgroup2 and a mount namespace needs root")
	}
	hostCgroup2 := func() int {
		out, err := exec.Command("mount").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(out), " type cgroup2 ")
	}
	before := hostCgroup2()
	tmp := t.TempDir()
	res := runUnmounted(t, "TestCgroup2PrivateMountLeavesNoTrace", tmp, nil, nil)
	if !res.Cpuset.Private {
		t.Fatalf("no cgroup2 mount was made: %s", res.Cpuset.Source)
	}
	if strings.Contains(res.Mountinfo, "cgroup2") {
		t.Errorf("the process saw a cgroup2 mount before the read:\n%s", res.Mountinfo)
	}
	if res.Changed != "" {
		t.Errorf("the process's mounts changed across the read (mount %s):\nbefore:\n%s\nafter:\n%s", res.Cpuset.Mount, res.Mountinfo, res.Changed)
	}
	if after := hostCgroup2(); after != before {
		t.Errorf("the host has %d cgroup2 mounts after the read, %d before", after, before)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "spindle-cgroup2-*")); len(left) > 0 {
		t.Errorf("the read left %q behind", left)
	}
}

// TestNoCgroup2MountedWithoutCapSysAdmin: a process that may not mount
// says no cgroup v2 hierarchy is mounted, as before, and makes none.
func TestNoCgroup2MountedWithoutCapSysAdmin(t *testing.T) {
	if unmountedChild(t) {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace without cgroup mounts needs root")
	}
	drop := []string{"setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"}
	res := runUnmounted(t, "TestNoCgroup2MountedWithoutCapSysAdmin", t.TempDir(), nil, drop)
	if c := res.Cpuset; c.Private || c.Available || c.Source != "no cgroup v2 hierarchy is mounted (/proc/self/mountinfo)" {
		t.Errorf("without CAP_SYS_ADMIN: private %v, available %v, source %q; want no hierarchy read and today's reason", c.Private, c.Available, c.Source)
	}
}

// TestPrivateCgroup2MountInCgroupNamespaceSaysSo: a cgroup2 mount made in
// a cgroup namespace other than the initial one shows only that
// namespace's subtree of the hierarchy, and the read says so.
func TestPrivateCgroup2MountInCgroupNamespaceSaysSo(t *testing.T) {
	if unmountedChild(t) {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("a cgroup and a mount namespace need root")
	}
	if _, err := os.Readlink("/proc/self/ns/cgroup"); err != nil {
		t.Skipf("no cgroup namespaces (requires >= 4.6): %v", err)
	}
	res := runUnmounted(t, "TestPrivateCgroup2MountInCgroupNamespaceSaysSo", t.TempDir(), []string{"--cgroup"}, nil)
	t.Logf("read: %s", res.Cpuset.Source)
	if c := res.Cpuset; !c.Private || !strings.Contains(c.Source, "in a cgroup namespace other than the initial one") {
		t.Errorf("in a cgroup namespace of its own: private %v, source %q; want a private mount, said to show the namespace's subtree only", c.Private, c.Source)
	}
}
