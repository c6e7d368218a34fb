package topo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Cpuset is what the cgroup v2 cpuset controller says about CPU
// partitions: where it was read and the partitions found.
type Cpuset struct {
	// Mount is the cgroup v2 mount point read (under Host.Root), empty
	// when there is none.
	Mount string `json:"mount,omitempty"`
	// MountRoot is the cgroup that mount shows ("/": the whole
	// hierarchy, which is the one read where mountinfo lists it; a
	// container may see only its own cgroup). Partition paths are below
	// it; /proc/PID/cgroup gives a process's from the hierarchy's root.
	// A tree captured without mountinfo is taken to show the whole
	// hierarchy.
	MountRoot string `json:"mount_root,omitempty"`
	// Available is true when the cpuset controller is on that mount, so
	// that partitions could be read.
	Available bool `json:"available"`
	// Private is true where no cgroup v2 mount was visible and Mount is
	// one this process made to read the partitions, in a mount namespace
	// of one thread's own, gone once they were read (as under `ip netns
	// exec`, which leaves the host's cgroup mounts behind; Source says
	// so). The hierarchy is the host's, but its files are not reached
	// through Mount any more.
	Private bool `json:"private,omitempty"`
	// Source says where Host.IsolatedPartition came from (the root
	// cgroup's cpuset.cpus.isolated, or the partitions' CPUs where the
	// kernel has no such file), or why no partition could be read: no
	// cgroup v2 hierarchy, or the cpuset controller not on it (bound to a
	// cgroup v1 hierarchy, or not built). None of these is an error.
	Source string `json:"source"`
	// Partitions lists the cgroups whose cpuset.cpus.partition is not
	// "member", parents before children.
	Partitions []CpusetPartition `json:"partitions,omitempty"`
}

// CpusetPartition is one cgroup v2 cpuset partition root
// (Documentation/admin-guide/cgroup-v2.rst, cpuset.cpus.partition).
type CpusetPartition struct {
	// Cgroup is the cgroup's path below the mount ("/rt").
	Cgroup string `json:"cgroup"`
	// Type is "root" (a scheduling domain of its own, load-balanced
	// within) or "isolated" (no load balancing).
	Type string `json:"type"`
	// Invalid is empty for a valid partition; for one the kernel holds
	// invalid it is the reason the file gives ("invalid" alone on kernels
	// that give none). An invalid partition isolates nothing: its tasks
	// run on the CPUs of the nearest valid ancestor partition.
	Invalid string `json:"invalid,omitempty"`
	// CPUs is cpuset.cpus.effective of a valid partition: the CPUs it
	// holds, less those of its child partitions. Only the tasks of the
	// cgroup and its descendants may run on them.
	CPUs CPUSet `json:"cpus,omitempty"`
	// Wants is, for an invalid partition, the CPUs it asks for and would
	// hold once valid: cpuset.cpus.exclusive where the kernel has that
	// file (Linux 6.7+) and it is set, else cpuset.cpus; empty where
	// neither was read (a tree captured without them).
	Wants CPUSet `json:"wants,omitempty"`
}

// ParseCpusetPartition parses a cpuset.cpus.partition file: "member",
// "root" or "isolated", each but member possibly followed by "invalid"
// and, since Linux 6.1, the reason in parentheses ("isolated invalid
// (Parent is an invalid partition root)"). invalid is "" for a valid
// partition, else the reason, or "invalid" when the file gives none.
func ParseCpusetPartition(s string) (typ, invalid string, err error) {
	s = strings.TrimSpace(s)
	typ, rest, _ := strings.Cut(s, " ")
	switch typ {
	case "member", "root", "isolated":
	default:
		return "", "", fmt.Errorf("cpuset.cpus.partition %q: not member, root or isolated", s)
	}
	if rest == "" {
		return typ, "", nil
	}
	reason, ok := strings.CutPrefix(rest, "invalid")
	if !ok || typ == "member" {
		return "", "", fmt.Errorf("cpuset.cpus.partition %q: unknown state", s)
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return typ, "invalid", nil
	}
	if !strings.HasPrefix(reason, "(") || !strings.HasSuffix(reason, ")") || len(reason) < 3 {
		return "", "", fmt.Errorf("cpuset.cpus.partition %q: unknown state", s)
	}
	return typ, reason[1 : len(reason)-1], nil
}

// Cgroup2Mount is one cgroup v2 mount in a mountinfo file.
type Cgroup2Mount struct {
	// Point is where it is mounted ("/sys/fs/cgroup").
	Point string
	// Root is the cgroup it shows, as a path in the hierarchy (mountinfo's
	// root field, relative to the reader's cgroup namespace): "/" for the
	// whole hierarchy, "/system.slice" for a bind mount of that cgroup.
	Root string
}

// ParseCgroup2Mounts returns the cgroup v2 (fstype "cgroup2") mounts in a
// /proc/PID/mountinfo file, in its order, with the kernel's octal escapes
// (\040 for a space) undone.
func ParseCgroup2Mounts(b []byte) []Cgroup2Mount {
	var mounts []Cgroup2Mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		mounts = append(mounts, Cgroup2Mount{Point: unescapeMount(f[4]), Root: unescapeMount(f[3])})
	}
	return mounts
}

// ParseCgroupV2Path returns the cgroup v2 path in a /proc/PID/cgroup file:
// that of its "0::" line ("0::/system.slice/svc.service"), and false
// where it has none (no cgroup v2 hierarchy is mounted).
func ParseCgroupV2Path(b []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok && strings.HasPrefix(p, "/") {
			return p, true
		}
	}
	return "", false
}

// ReadCgroup reads the cgroup v2 path of process pid under root
// (/proc/PID/cgroup): "" where it is in no cgroup v2 hierarchy.
func ReadCgroup(root string, pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("pid %d: not a process id", pid)
	}
	r := reader{root: root}
	file := "/proc/" + strconv.Itoa(pid) + "/cgroup"
	b, err := os.ReadFile(r.path(file))
	if err != nil {
		return "", err
	}
	p, _ := ParseCgroupV2Path(b)
	return p, nil
}

// InPartition says whether cgroup, a path from the hierarchy's root as
// /proc/PID/cgroup gives it, is partition p's cgroup or below it: only
// the tasks of those may run on a valid partition's CPUs. p's path is
// below the mount read, which shows the cgroup MountRoot.
func (c *Cpuset) InPartition(cgroup string, p CpusetPartition) bool {
	full := path.Join(c.MountRoot, p.Cgroup)
	return cgroup == full || strings.HasPrefix(cgroup, full+"/")
}

// unescapeMount undoes mountinfo's escapes of space, tab, newline and
// backslash (\040, \011, \012, \134: seq_file's mangle_path).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ParseCgroupsHierarchy returns the hierarchy ID /proc/cgroups gives the
// controller name: 0 when it is on cgroup v2 or on no hierarchy, -1 when
// the file does not list it (the kernel was built without it).
func ParseCgroupsHierarchy(b []byte, name string) int {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != name {
			continue
		}
		if n, err := strconv.Atoi(f[1]); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// cgroup2Mount finds the cgroup v2 mount under the root: from
// /proc/self/mountinfo when it can be read, else (a captured tree without
// it) /sys/fs/cgroup or, on a hybrid host, /sys/fs/cgroup/unified where
// either has cgroup.controllers. Of several mounts in mountinfo (bind
// mounts of a cgroup, a container's view) it takes the first that shows
// the whole hierarchy, whose cgroup.controllers and cpuset.cpus.isolated
// are the root cgroup's and under which every partition is, else the
// first. It returns the mount ("" and why when there is none), and true
// where mountinfo was read and lists none.
func (r reader) cgroup2Mount() (Cgroup2Mount, string, bool) {
	if b, err := os.ReadFile(r.path("/proc/self/mountinfo")); err == nil {
		mounts := ParseCgroup2Mounts(b)
		if len(mounts) == 0 {
			return Cgroup2Mount{}, "no cgroup v2 hierarchy is mounted (/proc/self/mountinfo)", true
		}
		if i := slices.IndexFunc(mounts, func(m Cgroup2Mount) bool { return m.Root == "/" }); i >= 0 {
			return mounts[i], "", false
		}
		return mounts[0], "", false
	}
	for _, p := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(r.path(p + "/cgroup.controllers")); err == nil {
			return Cgroup2Mount{Point: p, Root: "/"}, "", false
		}
	}
	return Cgroup2Mount{}, "no cgroup v2 hierarchy found (no /proc/self/mountinfo, no cgroup.controllers in /sys/fs/cgroup or /sys/fs/cgroup/unified)", false
}

// cpusetPartitions reads the cgroup v2 cpuset partitions: the isolated
// CPUs from the root cgroup's cpuset.cpus.isolated where the kernel has
// that file (Linux 6.8+; "isolated CPUs used in existing isolated
// partitions"), else from cpuset.cpus.effective of each valid isolated
// partition, and the partitions from a walk of the hierarchy. A cgroup
// without cpuset files has no cpuset-enabled descendants either (its
// parent did not enable the controller for it), so the walk does not go
// below it. Where the live host's mountinfo lists no cgroup v2 mount and
// the process may mount, it reads them from a mount of its own
// (readCpusetPrivately). Nothing here is an error: what could not be read
// is said in Cpuset.Source or a note.
func (r reader) cpusetPartitions(h *Host) {
	h.IsolatedPartition = CPUSet{}
	m, why, none := r.cgroup2Mount()
	if m.Point != "" {
		r.readCpuset(h, m)
		return
	}
	h.Cpuset.Source = why
	// `ip netns exec` mounts a sysfs of the namespace over /sys in a
	// mount namespace of its own, and the cgroup hierarchies mounted
	// below /sys/fs/cgroup go with the old one. Partitions are the
	// kernel's, the same whichever mount shows them, so a process that
	// may mount makes one of its own to read them. Only on the live host:
	// a captured tree is read as it is.
	if r.root != "/" || !none {
		return
	}
	if b, err := os.ReadFile("/proc/self/status"); err != nil || !HasCapSysAdmin(b) {
		return
	}
	if err := readCpusetPrivately(h); err != nil {
		h.Cpuset.Source = fmt.Sprintf("%s; mounting cgroup2 privately to read it failed: %v", why, err)
	}
}

// HasCapSysAdmin says whether a /proc/PID/status file gives the process
// CAP_SYS_ADMIN (bit 21 of CapEff), which mounting a filesystem and
// unsharing a mount namespace need.
func HasCapSysAdmin(status []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<21) != 0
		}
	}
	return false
}

// readCpuset reads the cpuset state under the cgroup v2 mount m into
// h.Cpuset and h.IsolatedPartition.
func (r reader) readCpuset(h *Host, m Cgroup2Mount) {
	mount := m.Point
	h.Cpuset.Mount, h.Cpuset.MountRoot = mount, m.Root
	ctrl, err := r.read(mount + "/cgroup.controllers")
	if err != nil {
		h.Cpuset.Source = fmt.Sprintf("%s: %v", path.Join(mount, "cgroup.controllers"), errors.Unwrap(err))
		return
	}
	if !slices.Contains(strings.Fields(ctrl), "cpuset") {
		h.Cpuset.Source = "the cpuset controller is not on cgroup v2 (not in " + path.Join(mount, "cgroup.controllers") + ")"
		if b, err := os.ReadFile(r.path("/proc/cgroups")); err == nil {
			switch n := ParseCgroupsHierarchy(b, "cpuset"); {
			case n > 0:
				h.Cpuset.Source = fmt.Sprintf("the cpuset controller is on cgroup v1 (hierarchy %d in /proc/cgroups), so no cgroup v2 cpuset partition can exist", n)
			case n < 0:
				h.Cpuset.Source = "the kernel has no cpuset controller (not in /proc/cgroups)"
			}
		}
		return
	}
	h.Cpuset.Available = true
	base := r.path(mount)
	walkErr := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p == base {
			return nil
		}
		s, err := os.ReadFile(filepath.Join(p, "cpuset.cpus.partition"))
		if err != nil {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(base, p)
		cg := "/" + filepath.ToSlash(rel)
		typ, invalid, err := ParseCpusetPartition(string(s))
		if err != nil {
			h.Notes = append(h.Notes, fmt.Sprintf("%s: %v", path.Join(mount, cg), err))
			return nil
		}
		if typ == "member" {
			return nil
		}
		part := CpusetPartition{Cgroup: cg, Type: typ, Invalid: invalid}
		if invalid == "" {
			cpus, err := r.readCPUList(path.Join(mount, cg, "cpuset.cpus.effective"))
			if err != nil {
				h.Notes = append(h.Notes, fmt.Sprintf("cpuset partition %s: %v", cg, err))
			}
			part.CPUs = cpus
		} else {
			part.Wants = r.partitionWants(mount, cg, h)
		}
		h.Cpuset.Partitions = append(h.Cpuset.Partitions, part)
		return nil
	})
	if walkErr != nil {
		h.Notes = append(h.Notes, fmt.Sprintf("cgroup v2 hierarchy %s: %v", mount, walkErr))
	}
	file := path.Join(mount, "cpuset.cpus.isolated")
	iso, err := r.readCPUList(file)
	switch {
	case err == nil:
		h.IsolatedPartition, h.Cpuset.Source = iso, file
		return
	case !errors.Is(err, fs.ErrNotExist):
		h.Notes = append(h.Notes, fmt.Sprintf("%v: isolated CPUs taken from the partitions instead", err))
	}
	for _, p := range h.Cpuset.Partitions {
		if p.Type == "isolated" && p.Invalid == "" {
			h.IsolatedPartition = h.IsolatedPartition.Union(p.CPUs)
		}
	}
	h.Cpuset.Source = "cpuset.cpus.effective of the valid isolated partitions under " + mount + " (no " + file + ": a kernel before 6.8, or a mount of a cgroup below the hierarchy's root)"
}

// partitionWants returns the CPUs the invalid partition cg (below mount)
// asks for: cpuset.cpus.exclusive where it is set, which the
// kernel takes for a partition's CPUs, else cpuset.cpus. A file that is
// not there (a kernel before 6.7 has no cpuset.cpus.exclusive; an older
// capture neither) is passed over; one that does not read is a note.
func (r reader) partitionWants(mount, cg string, h *Host) CPUSet {
	for _, f := range []string{"cpuset.cpus.exclusive", "cpuset.cpus"} {
		cpus, err := r.readCPUList(path.Join(mount, cg, f))
		switch {
		case err == nil && cpus.Len() > 0:
			return cpus
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			h.Notes = append(h.Notes, fmt.Sprintf("cpuset partition %s: %v", cg, err))
		}
	}
	return CPUSet{}
}

// PartitionOf returns the valid isolated cpuset partitions holding any of
// cpus, by cgroup path ("/rt"). Any goroutine.
func (h *Host) PartitionOf(cpus CPUSet) []string {
	var cgs []string
	for _, p := range h.Cpuset.Partitions {
		if p.Type == "isolated" && p.Invalid == "" && p.CPUs.Intersect(cpus).Len() > 0 {
			cgs = append(cgs, p.Cgroup)
		}
	}
	return cgs
}
