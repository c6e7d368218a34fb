//go:build linux

package tune

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/cgrouptest"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/topo"
)

// TestCpusetPartitionsOnKernel makes real cgroup v2 cpuset partitions of
// CPU 1 and runs the tuner's read, report and diagnosis on what the
// kernel makes of them. First an isolated partition below a member cgroup,
// which the kernel holds invalid ("isolated invalid (reason)"): the
// tuner must carry the kernel's reason into inspect's report and the
// cpuset-partition-invalid finding. Then a valid isolated partition of
// the root cgroup: the tuner must take CPU 1 as isolated (the loops'
// default), and, for this test's own process, which is outside it, say it
// may not run there, which the kernel must bear out by refusing to pin a
// thread of it to CPU 1. Every cgroup made is removed and the root's
// cgroup.subtree_control restored, on failure too.
func TestCpusetPartitionsOnKernel(t *testing.T) {
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
	if _, err := os.Stat(filepath.Join(dir, "cpuset.cpus.partition")); err != nil {
		// cpuset.cpus.partition, "isolated" included, is in every
		// kernel since 5.15.
		if k := kver.Release(); kver.AtLeast(k, "5.15") {
			t.Fatalf("no cpuset.cpus.partition on %s: %v", k, err)
		}
		t.Skipf("the kernel has no cgroup v2 cpuset partitions (no cpuset.cpus.partition; requires >= 5.15): %v", err)
	}
	if err := cgrouptest.Write(filepath.Join(dir, "cpuset.cpus"), strconv.Itoa(cpu)); err != nil {
		t.Fatal(err)
	}

	t.Run("invalid partition's reason", func(t *testing.T) {
		cgrouptest.EnableCpuset(t, dir)
		child := filepath.Join(dir, "child")
		cgrouptest.Mkdir(t, mount, child)
		if err := cgrouptest.Write(filepath.Join(child, "cpuset.cpus"), strconv.Itoa(cpu)); err != nil {
			t.Fatal(err)
		}
		cgrouptest.SetPartition(t, child, "isolated")
		part := filepath.Join(child, "cpuset.cpus.partition")
		b, err := os.ReadFile(part)
		if err != nil {
			t.Fatal(err)
		}
		state := strings.TrimSpace(string(b))
		// Below a member cgroup the kernel holds the partition invalid:
		// its parent is no partition root (before 6.7), or, taken for a
		// remote partition (6.7+), no cpuset.cpus.exclusive gives it CPUs.
		// Before 6.1 the file reads "root invalid", with no reason, for
		// an invalid partition of either type.
		typ, rest, _ := strings.Cut(state, " ")
		reason, ok := strings.CutPrefix(rest, "invalid")
		if k := kver.Release(); !ok || (typ != "isolated" && kver.AtLeast(k, "6.1")) {
			t.Fatalf("%s reads %q below a member cgroup on %s: want isolated invalid", part, state, k)
		}
		reason = strings.Trim(strings.TrimSpace(reason), "()")
		if reason == "" {
			reason = "invalid"
		}
		h, err := ReadHost("/")
		if err != nil {
			t.Fatal(err)
		}
		cg := "/" + filepath.Base(dir) + "/child"
		i := slices.IndexFunc(h.Cpuset.Partitions, func(p topo.CpusetPartition) bool { return p.Cgroup == cg })
		if i < 0 {
			t.Fatalf("partition %s (%s reads %q) not read: %+v", cg, part, state, h.Cpuset.Partitions)
		}
		p := h.Cpuset.Partitions[i]
		if p.Type != typ || p.Invalid != reason || !p.Wants.Equal(topo.NewCPUSet(cpu)) || p.CPUs.Len() != 0 {
			t.Errorf("partition read as %+v; the kernel's file reads %q: want %s, invalid %q, asking for CPU %d, holding none", p, state, typ, reason, cpu)
		}
		if IsolatedCPUs(h).Contains(cpu) {
			t.Errorf("IsolatedCPUs = %s: CPU %d of an invalid partition counted as isolated", IsolatedCPUs(h), cpu)
		}
		var report bytes.Buffer
		if err := WriteHost(&report, h); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("partition %s: %s, invalid (%s)", cg, typ, reason); !strings.Contains(report.String(), want) {
			t.Errorf("inspect's report lacks %q:\n%s", want, report.String())
		}
		f, ok := finding(diagnoseLive(t, h, Options{LoopCPUs: topo.NewCPUSet(cpu)}), "cpuset-partition-invalid")
		if !ok || !strings.Contains(strings.Join(f.Evidence, "\n"), state) {
			t.Errorf("cpuset-partition-invalid finding %+v (found %v): want its evidence to quote the kernel's %q", f, ok, state)
		}
	})

	t.Run("valid isolated partition", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(dir, "cpuset.cpus.exclusive")); err == nil {
			// Linux 6.7+ takes a partition's CPUs from here when set.
			if err := cgrouptest.Write(filepath.Join(dir, "cpuset.cpus.exclusive"), strconv.Itoa(cpu)); err != nil {
				t.Fatal(err)
			}
		}
		cgrouptest.SetPartition(t, dir, "isolated")
		part := filepath.Join(dir, "cpuset.cpus.partition")
		if b, _ := os.ReadFile(part); strings.TrimSpace(string(b)) != "isolated" {
			t.Fatalf("%s reads %q after writing isolated: the kernel holds the partition of CPU %d invalid", part, b, cpu)
		}
		h, err := ReadHost("/")
		if err != nil {
			t.Fatal(err)
		}
		if h.ServiceCgroup, err = topo.ReadCgroup("/", os.Getpid()); err != nil {
			t.Fatal(err)
		}
		cg := "/" + filepath.Base(dir)
		one := topo.NewCPUSet(cpu)
		if got := IsolatedCPUs(h); !got.Equal(one) {
			t.Errorf("IsolatedCPUs = %s (from %s), want %d; partitions %+v", got, h.Cpuset.Source, cpu, h.Cpuset.Partitions)
		}
		if got, want := IsolationKind(h, one), "cpuset partition "+cg; got != want {
			t.Errorf("IsolationKind(%d) = %q, want %q", cpu, got, want)
		}
		var report bytes.Buffer
		if err := WriteHost(&report, h); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("partition %s: isolated, CPUs %d", cg, cpu); !strings.Contains(report.String(), want) {
			t.Errorf("inspect's report lacks %q:\n%s", want, report.String())
		}
		fs := diagnoseLive(t, h, Options{})
		if f, ok := finding(fs, "cpuset-partition-invalid"); ok {
			t.Errorf("a valid partition reported invalid: %+v", f)
		}
		f, ok := finding(fs, "service-outside-partition")
		if !ok || !strings.Contains(f.Title, fmt.Sprintf("loop CPUs %d", cpu)) {
			t.Errorf("service-outside-partition finding %+v (found %v): this process, in cgroup %s, is outside partition %s of loop CPU %d", f, ok, h.ServiceCgroup, cg, cpu)
		}
		// What the finding says: the kernel refuses to pin this
		// process's threads to the partition's CPU.
		if err := pinThread(cpu); !errors.Is(err, unix.EINVAL) {
			t.Errorf("pinning a thread of cgroup %s to CPU %d of partition %s: %v, want EINVAL", h.ServiceCgroup, cpu, cg, err)
		}
	})
}

// diagnoseLive diagnoses h over two snapshots of the live host.
func diagnoseLive(t *testing.T, h *topo.Host, opt Options) []Finding {
	t.Helper()
	a, err := TakeSnapshot("/", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := TakeSnapshot("/", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Diagnose(h, a, b, opt)
}

// finding returns the finding of fs with id.
func finding(fs []Finding, id string) (Finding, bool) {
	i := slices.IndexFunc(fs, func(f Finding) bool { return f.ID == id })
	if i < 0 {
		return Finding{}, false
	}
	return fs[i], true
}

// pinThread asks the kernel to pin a locked thread of this process to cpu
// alone. A thread it pinned exits with its goroutine rather than run
// other goroutines there.
func pinThread(cpu int) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		err := unix.SchedSetaffinity(0, &set)
		if err != nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
