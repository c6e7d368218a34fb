package topo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cgroup2Mountinfo is a mountinfo with the unified hierarchy at
// /sys/fs/cgroup, as systemd mounts it.
const cgroup2Mountinfo = "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"

// TestCpusetPartitionIsolation: the CPUs of valid isolated cgroup v2
// cpuset partitions are read as their own kind of isolation beside
// isolcpus=, from the root cgroup's cpuset.cpus.isolated where the kernel
// has it and from the partitions' cpuset.cpus.effective where it has not;
// an invalid partition isolates nothing, a "root" partition (load-balanced
// within) is listed but isolates nothing, and a host without the cpuset
// controller on cgroup v2 says why, which is no error.
func TestCpusetPartitionIsolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		want   string // IsolatedPartition
		source string // in Cpuset.Source
		parts  []string
		mount  string // Cpuset.Mount and MountRoot, where given
	}{{
		name: "isolated partition, cpuset.cpus.isolated",
		files: map[string]string{
			"proc/self/mountinfo":                              cgroup2Mountinfo,
			"sys/fs/cgroup/cgroup.controllers":                 "cpuset cpu io memory pids\n",
			"sys/fs/cgroup/cpuset.cpus.isolated":               "4-7\n",
			"sys/fs/cgroup/rt/cpuset.cpus.partition":           "isolated\n",
			"sys/fs/cgroup/rt/cpuset.cpus.effective":           "4-7\n",
			"sys/fs/cgroup/system.slice/cpuset.cpus.partition": "member\n",
		},
		want: "4-7", source: "/sys/fs/cgroup/cpuset.cpus.isolated", parts: []string{"/rt isolated 4-7"},
	}, {
		name: "empty cpuset.cpus.isolated",
		files: map[string]string{
			"proc/self/mountinfo":                cgroup2Mountinfo,
			"sys/fs/cgroup/cgroup.controllers":   "cpuset cpu\n",
			"sys/fs/cgroup/cpuset.cpus.isolated": "\n",
		},
		want: "", source: "/sys/fs/cgroup/cpuset.cpus.isolated",
	}, {
		// Before cpuset.cpus.isolated the partitions say it: a child
		// partition's CPUs leave its parent's effective set, so the
		// isolated ones are the union of the isolated partitions', and
		// a load-balanced "root" child of an isolated one is not.
		name: "nested partitions, no cpuset.cpus.isolated",
		files: map[string]string{
			"proc/self/mountinfo":                           cgroup2Mountinfo,
			"sys/fs/cgroup/cgroup.controllers":              "cpuset\n",
			"sys/fs/cgroup/rt/cpuset.cpus.partition":        "isolated\n",
			"sys/fs/cgroup/rt/cpuset.cpus.effective":        "4-5\n",
			"sys/fs/cgroup/rt/inner/cpuset.cpus.partition":  "isolated\n",
			"sys/fs/cgroup/rt/inner/cpuset.cpus.effective":  "6\n",
			"sys/fs/cgroup/rt/lb/cpuset.cpus.partition":     "root\n",
			"sys/fs/cgroup/rt/lb/cpuset.cpus.effective":     "7\n",
			"sys/fs/cgroup/rt/member/cpuset.cpus.partition": "member\n",
			"sys/fs/cgroup/rt/member/cpuset.cpus.effective": "4-5\n",
		},
		want: "4-6", source: "valid isolated partitions under /sys/fs/cgroup",
		parts: []string{"/rt isolated 4-5", "/rt/inner isolated 6", "/rt/lb root 7"},
	}, {
		// An invalid partition's CPUs are those it asks for: its
		// cpuset.cpus.exclusive where set, else cpuset.cpus (its
		// effective set is its parent's).
		name: "invalid partition",
		files: map[string]string{
			"proc/self/mountinfo":                     cgroup2Mountinfo,
			"sys/fs/cgroup/cgroup.controllers":        "cpuset\n",
			"sys/fs/cgroup/rt/cpuset.cpus.partition":  "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
			"sys/fs/cgroup/rt/cpuset.cpus.effective":  "0-23\n",
			"sys/fs/cgroup/rt/cpuset.cpus":            "4-7\n",
			"sys/fs/cgroup/rt/cpuset.cpus.exclusive":  "\n",
			"sys/fs/cgroup/ex/cpuset.cpus.partition":  "root invalid (Parent is not a partition root)\n",
			"sys/fs/cgroup/ex/cpuset.cpus":            "2-7\n",
			"sys/fs/cgroup/ex/cpuset.cpus.exclusive":  "2-3\n",
			"sys/fs/cgroup/old/cpuset.cpus.partition": "isolated invalid\n",
		},
		want: "", source: "valid isolated partitions", parts: []string{
			"/ex root invalid: Parent is not a partition root, wants 2-3",
			"/old isolated invalid: invalid, wants ",
			"/rt isolated invalid: Cpu list in cpuset.cpus not exclusive, wants 4-7",
		},
	}, {
		// A bind mount of a cgroup listed before the hierarchy's own
		// mount: its cgroup.controllers and cpuset.cpus.isolated are not
		// the root's, and the partitions are not below it. Only the first
		// mount was read, and nothing found.
		name: "bind mount of a cgroup first",
		files: map[string]string{
			"proc/self/mountinfo": "30 24 0:30 /system.slice /run/sys rw,relatime - cgroup2 cgroup2 rw\n" + cgroup2Mountinfo +
				"36 24 0:30 /rt /srv/rt\040cg rw,relatime - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/cgroup.controllers":       "cpuset cpu\n",
			"sys/fs/cgroup/cpuset.cpus.isolated":     "4-7\n",
			"sys/fs/cgroup/rt/cpuset.cpus.partition": "isolated\n",
			"sys/fs/cgroup/rt/cpuset.cpus.effective": "4-7\n",
			"run/sys/cgroup.controllers":             "cpu\n",
		},
		want: "4-7", source: "/sys/fs/cgroup/cpuset.cpus.isolated", parts: []string{"/rt isolated 4-7"},
		mount: "/sys/fs/cgroup /",
	}, {
		// A container sees its own cgroup only: that mount is read,
		// and which cgroup it shows is kept.
		name: "only a cgroup below the root",
		files: map[string]string{
			"proc/self/mountinfo":                       "35 24 0:30 /rt /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/cgroup.controllers":          "cpuset\n",
			"sys/fs/cgroup/svc/cpuset.cpus.partition":   "isolated\n",
			"sys/fs/cgroup/svc/cpuset.cpus.effective":   "6-7\n",
			"sys/fs/cgroup/other/cpuset.cpus.partition": "member\n",
		},
		want: "6-7", source: "valid isolated partitions under /sys/fs/cgroup", parts: []string{"/svc isolated 6-7"},
		mount: "/sys/fs/cgroup /rt",
	}, {
		// A cgroup without cpuset files has no cpuset-enabled
		// children: the walk does not read below it.
		name: "cpuset not enabled below",
		files: map[string]string{
			"proc/self/mountinfo":                              cgroup2Mountinfo,
			"sys/fs/cgroup/cgroup.controllers":                 "cpuset\n",
			"sys/fs/cgroup/cpuset.cpus.isolated":               "\n",
			"sys/fs/cgroup/user.slice/cgroup.procs":            "1\n",
			"sys/fs/cgroup/user.slice/x/cpuset.cpus.partition": "isolated\n",
		},
		want: "", source: "/sys/fs/cgroup/cpuset.cpus.isolated",
	}, {
		name: "cgroup v1 only",
		files: map[string]string{
			"proc/self/mountinfo": "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n",
			"proc/cgroups":        "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\n",
		},
		want: "", source: "no cgroup v2 hierarchy is mounted",
	}, {
		// Only the live host is read from a cgroup2 mount made for
		// it: a captured tree is read as it is, whatever the
		// capabilities it records.
		name: "captured, no cgroup v2 mount, CAP_SYS_ADMIN",
		files: map[string]string{
			"proc/self/mountinfo": "40 24 0:50 / /sys rw,relatime - sysfs spd rw\n",
			"proc/self/status":    "Name:\tspindle\nCapEff:\t000001ffffffffff\n",
		},
		want: "", source: "no cgroup v2 hierarchy is mounted (/proc/self/mountinfo)",
	}, {
		name: "hybrid, cpuset on v1",
		files: map[string]string{
			"proc/self/mountinfo":                      "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			"proc/cgroups":                             "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t1\t1\n",
			"sys/fs/cgroup/unified/cgroup.controllers": "\n",
		},
		want: "", source: "on cgroup v1 (hierarchy 3 in /proc/cgroups)",
	}, {
		name: "kernel without cpuset",
		files: map[string]string{
			"proc/self/mountinfo":              cgroup2Mountinfo,
			"proc/cgroups":                     "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t1\t1\n",
			"sys/fs/cgroup/cgroup.controllers": "cpu io memory\n",
		},
		want: "", source: "no cpuset controller",
	}, {
		// A tree captured before capture.sh took cgroup files.
		name:  "capture without cgroup files",
		files: map[string]string{},
		want:  "", source: "no cgroup v2 hierarchy found",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyFixture(t, "testdata/2socket-16q")
			for f, v := range tc.files {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h, err := Read(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsolatedPartition.String() != tc.want {
				t.Errorf("IsolatedPartition %q, want %q", h.IsolatedPartition, tc.want)
			}
			if got := h.Cpuset.Mount + " " + h.Cpuset.MountRoot; tc.mount != "" && got != tc.mount {
				t.Errorf("Cpuset mount and root %q, want %q", got, tc.mount)
			}
			if !strings.Contains(h.Cpuset.Source, tc.source) {
				t.Errorf("Cpuset.Source %q, want it to say %q", h.Cpuset.Source, tc.source)
			}
			var parts []string
			for _, p := range h.Cpuset.Partitions {
				s := p.Cgroup + " " + p.Type + " " + p.CPUs.String()
				if p.Invalid != "" {
					s = p.Cgroup + " " + p.Type + " invalid: " + p.Invalid + ", wants " + p.Wants.String()
				}
				parts = append(parts, s)
			}
			if !slices.Equal(parts, tc.parts) {
				t.Errorf("partitions %q, want %q", parts, tc.parts)
			}
			if want := tc.parts != nil || strings.Contains(tc.source, "cpuset.cpus.isolated"); h.Cpuset.Available != want {
				t.Errorf("Cpuset.Available %v, want %v", h.Cpuset.Available, want)
			}
			if h.IsolatedDomain.Len() != 0 {
				t.Errorf("IsolatedDomain %s: partition CPUs counted as isolcpus", h.IsolatedDomain)
			}
			for _, n := range h.Notes {
				if strings.Contains(n, "cgroup") || strings.Contains(n, "cpuset") {
					t.Errorf("note %q", n)
				}
			}
		})
	}
}

// TestParseCpusetPartition: the states cpuset.cpus.partition reads as,
// with and without the reason kernels since 6.1 give for an invalid one.
func TestParseCpusetPartition(t *testing.T) {
	for _, tc := range []struct {
		in, typ, invalid string
		err              bool
	}{
		{"member\n", "member", "", false},
		{"root", "root", "", false},
		{"isolated", "isolated", "", false},
		{"root invalid", "root", "invalid", false},
		{"isolated invalid (Parent is an invalid partition root)", "isolated", "Parent is an invalid partition root", false},
		{"member invalid", "", "", true},
		{"isolated broken", "", "", true},
		{"isolated invalid (", "", "", true},
		{"isolated invalid ()", "", "", true},
		{"", "", "", true},
		{"Root", "", "", true},
	} {
		typ, invalid, err := ParseCpusetPartition(tc.in)
		if typ != tc.typ || invalid != tc.invalid || (err != nil) != tc.err {
			t.Errorf("ParseCpusetPartition(%q) = %q, %q, %v; want %q, %q, error %v", tc.in, typ, invalid, err, tc.typ, tc.invalid, tc.err)
		}
	}
}

// TestParseCgroup2Mounts: only cgroup2 mounts count, and mountinfo's
// octal escapes in the mount point are undone.
func TestParseCgroup2Mounts(t *testing.T) {
	in := "34 31 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n" +
		"41 31 0:38 / /mnt/my\\040cg rw,relatime shared:1 master:2 - cgroup2 none rw\n" +
		"short - cgroup2\n" +
		"42 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	got := ParseCgroup2Mounts([]byte(in))
	if want := []Cgroup2Mount{{"/mnt/my cg", "/"}, {"/sys/fs/cgroup", "/"}}; !slices.Equal(got, want) {
		t.Errorf("ParseCgroup2Mounts = %q, want %q", got, want)
	}
	cg := "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t0\t1\t1\ncpu\t3\t1\t1\n"
	for name, want := range map[string]int{"cpuset": 0, "cpu": 3, "memory": -1} {
		if got := ParseCgroupsHierarchy([]byte(cg), name); got != want {
			t.Errorf("ParseCgroupsHierarchy(%s) = %d, want %d", name, got, want)
		}
	}
}

// TestHasCapSysAdmin: CAP_SYS_ADMIN is bit 21 of a status file's CapEff
// (the effective set, not the permitted or bounding one).
func TestHasCapSysAdmin(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   bool
	}{
		{"Name:\tsh\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n", true},
		{"CapEff:\t0000000000200000\n", true},
		{"CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffdfffff\nCapBnd:\t000001ffffffffff\n", false},
		{"CapEff:\t0000000000000000\n", false},
		{"CapEff:\tzz\n", false},
		{"Name:\tsh\n", false},
	} {
		if got := HasCapSysAdmin([]byte(tc.status)); got != tc.want {
			t.Errorf("HasCapSysAdmin(%q) = %v, want %v", tc.status, got, tc.want)
		}
	}
}
