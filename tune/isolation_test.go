package tune

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/topo"
)

// partitionHost writes into a copy of the smt-isol fixture a host booted
// without isolcpus= and nohz_full=, whose CPUs 2-7,10-15 are an isolated
// cgroup v2 cpuset partition /rt, and reads it.
func partitionHost(t *testing.T, partition string) (string, *topo.Host) {
	t.Helper()
	return cgroupHost(t, map[string]string{
		"sys/fs/cgroup/rt/cpuset.cpus.partition": partition + "\n",
		"sys/fs/cgroup/rt/cpuset.cpus.effective": "2-7,10-15\n",
	})
}

// cgroupHost writes into a copy of the smt-isol fixture a host booted
// without isolcpus= and nohz_full=, with the cpuset controller on cgroup
// v2 at /sys/fs/cgroup, and files (paths under the root), and reads it.
func cgroupHost(t *testing.T, files map[string]string) (string, *topo.Host) {
	t.Helper()
	root := copyTree(t, fxSMT)
	all := map[string]string{
		"proc/cmdline":                     "ro\n",
		"sys/devices/system/cpu/isolated":  "\n",
		"sys/devices/system/cpu/nohz_full": "\n",
		"proc/self/mountinfo":              "35 24 0:30 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
	}
	maps.Copy(all, files)
	for f, v := range all {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, loadHost(t, root)
}

// TestPartitionIsolatedCPUsAsLoops: CPUs isolated by a cgroup v2 cpuset
// partition are taken for loops and judged as loop CPUs the way isolcpus
// domain-isolated ones are: the inline plan puts its loops there, the
// dedicated plan keeps its IRQ CPUs off them, and diagnose reports queue
// IRQs landing on them. The plan says what such a partition gives and
// what it does not (only its cgroup's tasks run there; the tick still
// runs without nohz_full). An invalid partition isolates nothing. Before,
// topo read isolation from the boot command line only, and all three
// ignored the partition.
func TestPartitionIsolatedCPUsAsLoops(t *testing.T) {
	for _, tc := range []struct {
		partition string
		loops     string // default inline loop CPUs
		isolated  bool
	}{
		{"isolated", "2-7", true},
		{"isolated invalid (Cpu list in cpuset.cpus not exclusive)", "0-7", false},
	} {
		t.Run(tc.partition, func(t *testing.T) {
			root, h := partitionHost(t, tc.partition)
			if h.IsolatedDomain.Len() != 0 {
				t.Fatalf("fixture: isolcpus domain %s", h.IsolatedDomain)
			}
			p, err := MakePlan(h, PlanConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if p.LoopCPUs.String() != tc.loops {
				t.Errorf("inline loop CPUs %s, want %s", p.LoopCPUs, tc.loops)
			}
			note := hasNote(p, "isolated cpuset partition /rt (under /sys/fs/cgroup)")
			if note != tc.isolated {
				t.Errorf("partition note %v, want %v: %q", note, tc.isolated, p.Notes)
			}
			if tc.isolated && (!hasNote(p, "only tasks of that cgroup may run there") || !hasNote(p, "timer tick still runs on 2-7")) {
				t.Errorf("partition note does not say what the partition leaves out: %q", p.Notes)
			}
			d, err := MakePlan(h, PlanConfig{Policy: Dedicated})
			if err != nil {
				t.Fatal(err)
			}
			if bad := d.IRQCPUs.Intersect(h.IsolatedPartition); bad.Len() > 0 {
				t.Errorf("dedicated IRQ CPUs %s on partition-isolated CPUs %s", d.IRQCPUs, bad)
			}
			a, b := snapshots(t, root, h)
			if got := slices.Contains(ids(Diagnose(h, a, b, Options{})), "irq-on-loop-cpu"); got != tc.isolated {
				t.Errorf("irq-on-loop-cpu found: %v, want %v", got, tc.isolated)
			}
			if got, want := IsolationKind(h, topo.NewCPUSet(2)), map[bool]string{true: "cpuset partition /rt", false: ""}[tc.isolated]; got != want {
				t.Errorf("IsolationKind(2) = %q, want %q", got, want)
			}
			var out strings.Builder
			if err := WriteHost(&out, h); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "partition /rt: isolated") {
				t.Errorf("WriteHost does not list the partition:\n%s", out.String())
			}
		})
	}
}

// TestPartitionsNamedAlike: diagnose's source of its loop CPUs
// (IsolationKind) and the plan's note name the isolated partitions
// holding them alike. With two partitions, IsolationKind said "cpuset
// partition /a,/b" and the note "isolated cpuset partition /a, /b", each
// joining PartitionOf in its own way, one noun for two partitions.
func TestPartitionsNamedAlike(t *testing.T) {
	_, h := cgroupHost(t, map[string]string{
		"sys/fs/cgroup/a/cpuset.cpus.partition": "isolated\n",
		"sys/fs/cgroup/a/cpuset.cpus.effective": "2-4\n",
		"sys/fs/cgroup/b/cpuset.cpus.partition": "isolated\n",
		"sys/fs/cgroup/b/cpuset.cpus.effective": "5-7\n",
	})
	for _, tc := range []struct {
		cpus       topo.CPUSet
		kind, note string
	}{
		{topo.NewCPUSet(2, 3), "cpuset partition /a", "isolated cpuset partition /a (under /sys/fs/cgroup)"},
		{topo.NewCPUSet(2, 7), "cpuset partitions /a, /b", "isolated cpuset partitions /a, /b (under /sys/fs/cgroup)"},
		{topo.NewCPUSet(0, 1), "", ""},
	} {
		if got := IsolationKind(h, tc.cpus); got != tc.kind {
			t.Errorf("IsolationKind(%s) = %q, want %q", tc.cpus, got, tc.kind)
		}
		if got := partitionNote(h, tc.cpus); !strings.Contains(got, tc.note) || (tc.note == "") != (got == "") {
			t.Errorf("partitionNote(%s) = %q, want it to name %q", tc.cpus, got, tc.note)
		}
	}
	// Partition-isolated CPUs that no partition read holds (the root's
	// cpuset.cpus.isolated lists them) are named by kind alone.
	h.Cpuset.Partitions = nil
	if got, want := IsolationKind(h, topo.NewCPUSet(2)), "cpuset partition"; got != want {
		t.Errorf("IsolationKind with no partition read = %q, want %q", got, want)
	}
	if got, want := partitionNote(h, topo.NewCPUSet(2)), "loop CPUs 2 are in an isolated cpuset partition:"; !strings.HasPrefix(got, want) {
		t.Errorf("partitionNote with no partition read = %q, want it to start %q", got, want)
	}
}

// TestDiagnoseInvalidPartition: a cpuset partition the kernel holds
// invalid isolates nothing, which tune inspect showed and diagnose did
// not. An invalid isolated partition, meant to isolate, is a finding
// with the kernel's reason and the CPUs it asks for, and the loop CPUs
// among them; an invalid root partition (load-balanced within) only where
// it asks for loop CPUs; a valid one is none.
func TestDiagnoseInvalidPartition(t *testing.T) {
	for _, tc := range []struct {
		name      string
		partition string
		loops     topo.CPUSet
		evidence  string // "" for no finding
	}{
		{"isolated, invalid", "isolated invalid (Cpu list in cpuset.cpus not exclusive)", nil,
			`/sys/fs/cgroup/rt/cpuset.cpus.partition reads "isolated invalid (Cpu list in cpuset.cpus not exclusive)"; it asks for CPUs 2-7`},
		{"isolated, invalid, loop CPUs in it", "isolated invalid (Parent is not a partition root)", topo.NewCPUSet(0, 3),
			`"isolated invalid (Parent is not a partition root)"; it asks for CPUs 2-7, loop CPUs 3 among them`},
		{"isolated, invalid without a reason", "isolated invalid", nil, `reads "isolated invalid"; it asks for CPUs 2-7`},
		{"root, invalid, loop CPUs in it", "root invalid (Parent is not a partition root)", topo.NewCPUSet(7), `"root invalid (Parent is not a partition root)"; it asks for CPUs 2-7, loop CPUs 7 among them`},
		{"root, invalid, loop CPUs apart", "root invalid (Parent is not a partition root)", topo.NewCPUSet(0, 1), ""},
		{"isolated, valid", "isolated", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, h := cgroupHost(t, map[string]string{
				"sys/fs/cgroup/rt/cpuset.cpus.partition": tc.partition + "\n",
				"sys/fs/cgroup/rt/cpuset.cpus.effective": "2-7\n",
				"sys/fs/cgroup/rt/cpuset.cpus":           "2-7\n",
			})
			a, b := snapshots(t, root, h)
			var found []Finding
			for _, f := range Diagnose(h, a, b, Options{LoopCPUs: tc.loops}) {
				if f.ID == "cpuset-partition-invalid" {
					found = append(found, f)
				}
			}
			if tc.evidence == "" {
				if len(found) > 0 {
					t.Fatalf("finding for partition %q: %+v", tc.partition, found)
				}
				return
			}
			if len(found) != 1 {
				t.Fatalf("%d cpuset-partition-invalid findings, want 1", len(found))
			}
			f := found[0]
			if f.Severity != Warning || !strings.Contains(f.Title, "cpuset partition /rt is invalid") || len(f.Evidence) != 1 || !strings.Contains(f.Evidence[0], tc.evidence) {
				t.Errorf("finding %+v, want a warning on /rt with evidence %q", f, tc.evidence)
			}
			if !strings.Contains(f.Fix, "valid again once no rule is broken") {
				t.Errorf("fix %q does not say what to do", f.Fix)
			}
		})
	}
}

// TestDiagnoseServiceOutsidePartition: only the tasks of a valid cpuset
// partition's cgroup (and below) may run on its CPUs, and they only
// there, so a service (--pid) in another cgroup is refused its loop CPUs
// (sched_setaffinity: EINVAL). Nothing checked it; service-outside-
// partition now names the loop CPUs it may not run on, whose they are,
// and the cgroup it is in, read from /proc/PID/cgroup under the root.
// The fixture: /rt isolated with 2-5 and, below it, /rt/inner with 6-7.
func TestDiagnoseServiceOutsidePartition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cgroup   string // /proc/4242/cgroup
		loops    topo.CPUSet
		off      string   // loop CPUs it may not run on
		evidence []string // nil for no finding
	}{
		{"outside", "0::/system.slice/svc.service\n", topo.NewCPUSet(2, 3), "2-3", []string{
			"pid 4242 (svc) is in cgroup /system.slice/svc.service: it may run on the CPUs of the root cgroup (no partition) only",
			"loop CPUs 2-3 are those of isolated partition /rt"}},
		{"in it", "0::/rt/svc\n", topo.NewCPUSet(2, 3), "", nil},
		{"in it, loops outside it too", "0::/rt\n", topo.NewCPUSet(0, 1, 2), "0-1", []string{
			"pid 4242 (svc) is in cgroup /rt: it may run on the CPUs of isolated partition /rt, 2-5 only",
			"loop CPUs 0-1 are those of the root cgroup (no partition)"}},
		{"in a partition below", "0::/rt/inner\n", topo.NewCPUSet(5, 6), "5", []string{
			"it may run on the CPUs of isolated partition /rt/inner, 6-7 only",
			"loop CPUs 5 are those of isolated partition /rt"}},
		{"hybrid host, v1 lines first", "3:cpuset:/\n0::/rt/inner/x\n", topo.NewCPUSet(6, 7), "", nil},
		{"no cgroup v2", "3:cpuset:/\n", topo.NewCPUSet(2, 3), "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, h := cgroupHost(t, map[string]string{
				"sys/fs/cgroup/rt/cpuset.cpus.partition":       "isolated\n",
				"sys/fs/cgroup/rt/cpuset.cpus.effective":       "2-5\n",
				"sys/fs/cgroup/rt/inner/cpuset.cpus.partition": "isolated\n",
				"sys/fs/cgroup/rt/inner/cpuset.cpus.effective": "6-7\n",
				"proc/4242/cgroup":                             tc.cgroup,
			})
			cg, err := topo.ReadCgroup(root, 4242)
			if err != nil {
				t.Fatal(err)
			}
			h.ServiceCgroup, h.Memlock.PID, h.Memlock.Comm = cg, 4242, "svc"
			a, b := snapshots(t, root, h)
			var f *Finding
			for _, x := range Diagnose(h, a, b, Options{LoopCPUs: tc.loops}) {
				if x.ID == "service-outside-partition" {
					f = &x
				}
			}
			if tc.evidence == nil {
				if f != nil {
					t.Fatalf("cgroup %q, loop CPUs %s: %+v", cg, tc.loops, f)
				}
				return
			}
			if f == nil {
				t.Fatalf("cgroup %q, loop CPUs %s: no service-outside-partition finding", cg, tc.loops)
			}
			if f.Severity != Critical || !strings.Contains(f.Title, "may not run on loop CPUs "+tc.off) || len(f.Evidence) != len(tc.evidence) {
				t.Fatalf("finding %+v, want critical with %d evidence lines", f, len(tc.evidence))
			}
			for i, want := range tc.evidence {
				if !strings.Contains(f.Evidence[i], want) {
					t.Errorf("evidence %q, want it to say %q", f.Evidence[i], want)
				}
			}
			if !strings.Contains(f.Fix, "cgroup.procs") && !strings.Contains(f.Fix, "outside /rt") {
				t.Errorf("fix %q says not where to run it", f.Fix)
			}
		})
	}
}

// TestPlanNotesLoopsOfSeveralPartitions: a task may run on the CPUs of
// one cpuset partition only (the deepest valid one holding its cgroup,
// else the root cgroup's, the CPUs of none), so a plan whose loop CPUs
// are several partitions' cannot be one service's: the plan says so and
// whose each are. It said "start the service in it" as if one cgroup
// could hold them all.
func TestPlanNotesLoopsOfSeveralPartitions(t *testing.T) {
	_, h := cgroupHost(t, map[string]string{
		"sys/fs/cgroup/a/cpuset.cpus.partition": "isolated\n",
		"sys/fs/cgroup/a/cpuset.cpus.effective": "2-4\n",
		"sys/fs/cgroup/b/cpuset.cpus.partition": "isolated\n",
		"sys/fs/cgroup/b/cpuset.cpus.effective": "5-6\n",
	})
	for _, tc := range []struct {
		loops topo.CPUSet
		want  string // "" for no such note
	}{
		{topo.NewCPUSet(2, 3, 5, 6), "these loop CPUs are several's (2-3 are those of isolated partition /a, 5-6 are those of isolated partition /b)"},
		{topo.NewCPUSet(0, 1, 2, 3), "these loop CPUs are several's (2-3 are those of isolated partition /a, 0-1 are those of the root cgroup (no partition))"},
		{topo.NewCPUSet(2, 3, 4), ""},
	} {
		p, err := MakePlan(h, PlanConfig{LoopCPUs: tc.loops})
		if err != nil {
			t.Fatal(err)
		}
		if got := hasNote(p, "a service runs in one cgroup"); got != (tc.want != "") || (got && !hasNote(p, tc.want)) {
			t.Errorf("loop CPUs %s: notes %q, want one saying %q", tc.loops, p.Notes, tc.want)
		}
	}
}

// TestPartitionMessagesWherePrivateMount: read where no cgroup v2 mount
// was visible (as under `ip netns exec`), the partitions come from a
// mount of the read's own that is gone after (Cpuset.Private), so the
// cgroup files diagnose and plan name for a person to read or write are
// under "<cgroup2 mount>", not that mount's vanished directory, as they
// were.
func TestPartitionMessagesWherePrivateMount(t *testing.T) {
	const gone = "/tmp/spindle-cgroup2-4242"
	root, h := cgroupHost(t, map[string]string{
		"sys/fs/cgroup/rt/cpuset.cpus.partition":  "isolated\n",
		"sys/fs/cgroup/rt/cpuset.cpus.effective":  "2-5\n",
		"sys/fs/cgroup/bad/cpuset.cpus.partition": "isolated invalid (Parent is not a partition root)\n",
		"sys/fs/cgroup/bad/cpuset.cpus":           "6-7\n",
		"sys/fs/cgroup/bad/cpuset.cpus.effective": "\n",
		"proc/4242/cgroup":                        "0::/system.slice/svc.service\n",
	})
	cg, err := topo.ReadCgroup(root, 4242)
	if err != nil {
		t.Fatal(err)
	}
	h.ServiceCgroup, h.Memlock.PID, h.Memlock.Comm = cg, 4242, "svc"
	h.Cpuset.Mount, h.Cpuset.Private = gone, true
	a, b := snapshots(t, root, h)
	var texts []string
	for _, f := range Diagnose(h, a, b, Options{LoopCPUs: topo.NewCPUSet(2, 3)}) {
		if f.ID == "cpuset-partition-invalid" || f.ID == "service-outside-partition" {
			texts = append(append(texts, f.Fix), f.Evidence...)
		}
	}
	texts = append(texts, partitionNote(h, topo.NewCPUSet(2, 3)))
	all := strings.Join(texts, "\n")
	for _, want := range []string{"<cgroup2 mount>/bad/cpuset.cpus.partition", "<cgroup2 mount>/rt/cgroup.procs", "(under <cgroup2 mount>)"} {
		if !strings.Contains(all, want) {
			t.Errorf("the partition messages do not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, gone) {
		t.Errorf("the partition messages name the private mount %s, gone after the read:\n%s", gone, all)
	}
}

// TestPlanIRQsOnPartitionCPUs: where the CPUs a plan would give queue
// interrupts to are in an isolated cgroup v2 cpuset partition (/rt, CPUs
// 2-7,10-15 of the smt-isol fixture), the inline plan puts each queue's
// interrupt on the partition's loop CPU that serves it (the kernel takes
// an affinity to such a CPU: a partition does not move interrupts), and
// apply writes, and revert restores, the fixture's smp_affinity_list
// files; the dedicated plan keeps them on housekeeping CPUs. Where it
// cannot (loops given on every housekeeping core) or is told to
// (--irq-cpus), its interrupts and their softirq processing go into the
// partition, and the plan says so. It said nothing: the default the
// documentation calls "one housekeeping (not isolated) CPU" fell back to
// the partition's CPU 2 in silence.
func TestPlanIRQsOnPartitionCPUs(t *testing.T) {
	const note = "are isolated (cpuset partition /rt)"
	for _, tc := range []struct {
		name    string
		cfg     PlanConfig
		irqCPUs string // where the queue interrupts go
		noted   bool
	}{
		{"inline default", PlanConfig{}, "2-7", false},
		{"dedicated default", PlanConfig{Policy: Dedicated}, "0", false},
		{"dedicated, loops on every housekeeping core", PlanConfig{Policy: Dedicated, LoopCPUs: topo.NewCPUSet(0, 1)}, "2", true},
		{"dedicated, IRQ CPUs given in the partition", PlanConfig{Policy: Dedicated, IRQCPUs: topo.NewCPUSet(2, 3)}, "2-3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, h := partitionHost(t, "isolated")
			if !h.IsolatedPartition.Equal(topo.NewCPUSet(2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15)) || h.IsolatedDomain.Len() != 0 {
				t.Fatalf("fixture: partition-isolated %s, isolcpus domain %s", h.IsolatedPartition, h.IsolatedDomain)
			}
			p, err := MakePlan(h, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if p.IRQCPUs.String() != tc.irqCPUs {
				t.Errorf("IRQ CPUs %s, want %s", p.IRQCPUs, tc.irqCPUs)
			}
			n := h.NIC("enp1s0f0np0")
			var irqWrites []Write
			for _, q := range n.RxQueues {
				path := fmt.Sprintf("/proc/irq/%d/smp_affinity_list", q.IRQ)
				w := writeTo(p, path)
				if w == nil {
					if b, _ := os.ReadFile(filepath.Join(root, path)); strings.TrimSpace(string(b)) != strconv.Itoa(p.IRQCPUs[q.Index%p.IRQCPUs.Len()]) {
						t.Errorf("rx-%d: no write to %s (holding %q); writes %v", q.Index, path, b, targets(p))
					}
					continue
				}
				cpu, err := topo.ParseCPUList(w.New)
				if err != nil || cpu.Len() != 1 || !p.IRQCPUs.Contains(cpu[0]) {
					t.Errorf("rx-%d: %s := %q, want one of IRQ CPUs %s", q.Index, path, w.New, p.IRQCPUs)
				}
				irqWrites = append(irqWrites, *w)
			}
			if len(irqWrites) == 0 {
				t.Fatalf("no IRQ affinity planned: %v", targets(p))
			}
			if got := hasNote(p, note); got != tc.noted {
				t.Errorf("note that the IRQ CPUs %s, %v, want %v: %q", note, got, tc.noted, p.Notes)
			}
			before := treeBytes(t, root)
			state := filepath.Join(t.TempDir(), "state.json")
			tgt := Target{Root: root, Netlink: newFixtureNetlink(h)}
			if _, err := Apply(p, tgt, state); err != nil {
				t.Fatal(err)
			}
			for _, w := range irqWrites {
				if b, err := os.ReadFile(filepath.Join(root, w.Path)); err != nil || strings.TrimSpace(string(b)) != w.New {
					t.Errorf("after apply %s reads %q (%v), want %q", w.Path, b, err, w.New)
				}
			}
			if drifted, _, err := Revert(state, tgt); err != nil || len(drifted) > 0 {
				t.Fatalf("revert: %v (drifted %q)", err, drifted)
			}
			if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
				t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}
