package topo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spindlenet/spindle/internal/cpulist"
)

// Isolation is what a kernel command line's isolcpus= and nohz_full= set
// aside, one CPU set per kind of isolation (the kernel's housekeeping
// types), each meaning one thing.
type Isolation struct {
	// Domain is isolcpus= without flags or with the domain flag: CPUs
	// taken out of the scheduler's load-balancing domains (sysfs
	// /sys/devices/system/cpu/isolated).
	Domain CPUSet
	// ManagedIRQ is isolcpus= with the managed_irq flag: CPUs the kernel
	// keeps managed interrupts off where their masks have another CPU.
	ManagedIRQ CPUSet
	// NohzFull is nohz_full=, or isolcpus= with the nohz flag ("isolcpus=nohz
	// is equivalent to nohz_full").
	NohzFull CPUSet
	// Ignored says which parameters the kernel ignores, and why.
	Ignored []string
}

// ParseCmdline extracts the isolcpus= and nohz_full= CPU lists from a kernel
// command line. isolcpus may carry flags before the list
// ("isolcpus=managed_irq,domain,2-7"), which say which of the sets the list
// is for; flags this package does not know are skipped, as the kernel does.
// The lists take every form of the kernel's cpu lists
// (Documentation/admin-guide/kernel-parameters.rst, "cpu lists"): "N" for
// the last CPU (nrCPUs-1; nrCPUs is the kernel's nr_cpu_ids, one more than
// the last possible CPU; 0 when unknown makes "N" an error), "all", and the
// group form "a-b:used/group" (the first used CPUs of every group of
// group CPUs from a to b: "0-7:1/4" is 0,4).
//
// A parameter given more than once is taken as the kernel takes it
// (housekeeping_setup, kernel/sched/isolation.c, Linux 6.x): each kind of
// isolation keeps the first list it gets; a later parameter naming a kind
// already set must give the same list, else the kernel ignores it whole
// ("nohz_full= must match isolcpus="), its other kinds too; one that names
// only kinds not yet set sets them. An empty list sets nothing, and one the
// kernel's parser refuses (a CPU at or above nrCPUs, a bad group) makes the
// kernel ignore that parameter ("incorrect CPU range"): both are in
// Ignored. The error is for "N" or "all" when nrCPUs is 0, which cannot be
// resolved.
func ParseCmdline(s string, nrCPUs int) (Isolation, error) {
	return parseCmdline(s, nrCPUs, true)
}

// parseCmdline is ParseCmdline for a kernel built with CONFIG_NO_HZ_FULL
// (nohzFull) or without, which refuses nohz_full= and an isolcpus= with
// the nohz flag whole (housekeeping_setup).
func parseCmdline(s string, nrCPUs int, nohzFull bool) (Isolation, error) {
	const noNohzFull = ": the kernel has no CONFIG_NO_HZ_FULL (no /sys/devices/system/cpu/nohz_full)"
	iso := Isolation{Domain: CPUSet{}, ManagedIRQ: CPUSet{}, NohzFull: CPUSet{}}
	sets := map[string]*CPUSet{"domain": &iso.Domain, "managed_irq": &iso.ManagedIRQ, "nohz": &iso.NohzFull}
	taken := map[string]bool{} // kinds set by an earlier parameter (housekeeping.flags)
	// setup is housekeeping_setup: list for the kinds of isolation a
	// parameter names.
	setup := func(param string, kinds []string, v string) error {
		list, err := parseKernelCPUList(v, nrCPUs)
		if errors.Is(err, cpulist.ErrNoCPUCount) {
			return fmt.Errorf("%s: %w", param, err)
		}
		if err != nil {
			iso.Ignored = append(iso.Ignored, fmt.Sprintf("%s: its cpu list does not parse (%v)", param, err))
			return nil
		}
		if list.Len() == 0 {
			iso.Ignored = append(iso.Ignored, param+": no CPUs")
			return nil
		}
		for _, k := range kinds {
			if taken[k] && !sets[k].Equal(list) {
				iso.Ignored = append(iso.Ignored, fmt.Sprintf("%s: %s isolation is already %s (the kernel takes the first list and ignores a different one whole)", param, k, *sets[k]))
				return nil
			}
		}
		for _, k := range kinds {
			if !taken[k] {
				*sets[k], taken[k] = list, true
			}
		}
		return nil
	}
	for _, w := range strings.Fields(s) {
		if w == "--" {
			break // the rest belongs to init
		}
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			continue
		}
		// The kernel compares parameter names with '-' and '_' alike
		// (parameqn): nohz-full= is nohz_full=.
		switch strings.ReplaceAll(k, "-", "_") {
		case "isolcpus":
			// housekeeping_isolcpus_setup: words that start with a letter
			// are flags (unknown ones skipped) until the list begins; an
			// unknown one with a character other than a letter or '_'
			// makes the kernel refuse the whole parameter. Without
			// flags, isolcpus= is domain isolation.
			var flags []string
			invalid := false
			for v != "" && isLetter(v[0]) {
				f, rest, _ := strings.Cut(v, ",")
				switch f {
				case "nohz", "domain", "managed_irq":
					flags = append(flags, f)
				default:
					invalid = invalid || strings.IndexFunc(f, func(r rune) bool { return r != '_' && (r > 0x7f || !isLetter(byte(r))) }) >= 0
				}
				v = rest
			}
			if invalid {
				iso.Ignored = append(iso.Ignored, w+": invalid flag")
				continue
			}
			if !nohzFull && slices.Contains(flags, "nohz") {
				iso.Ignored = append(iso.Ignored, w+noNohzFull)
				continue
			}
			if len(flags) == 0 {
				flags = []string{"domain"}
			}
			if err := setup(w, flags, v); err != nil {
				return Isolation{}, err
			}
		case "nohz_full":
			if !nohzFull {
				iso.Ignored = append(iso.Ignored, w+noNohzFull)
				continue
			}
			if err := setup(w, []string{"nohz"}, v); err != nil {
				return Isolation{}, err
			}
		}
	}
	return iso, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// parseKernelCPUList parses a cpu list of the kernel command line
// (cpulist.ParseBoot), with nrCPUs the kernel's nr_cpu_ids (0: unknown).
func parseKernelCPUList(s string, nrCPUs int) (CPUSet, error) {
	cpus, err := cpulist.ParseBoot(s, nrCPUs)
	if err != nil {
		return nil, err
	}
	return NewCPUSet(cpus...), nil
}

// Meminfo holds the huge-page lines of /proc/meminfo.
type Meminfo struct {
	// HugePagesTotal and HugePagesFree count pages of the default huge
	// page size.
	HugePagesTotal, HugePagesFree uint64
	// HugePageSize is the default huge page size in bytes.
	HugePageSize uint64
}

// ParseMeminfo parses the huge-page fields of /proc/meminfo.
func ParseMeminfo(b []byte) (Meminfo, error) {
	var m Meminfo
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "HugePages_Total":
			m.HugePagesTotal = n
		case "HugePages_Free":
			m.HugePagesFree = n
		case "Hugepagesize":
			m.HugePageSize = n * 1024
		}
	}
	return m, sc.Err()
}

// Unlimited is the value of a resource limit without bound.
const Unlimited = ^uint64(0)

// ParseMemlock returns the soft and hard "Max locked memory" limits from a
// /proc/<pid>/limits file, in bytes (Unlimited for "unlimited").
func ParseMemlock(b []byte) (soft, hard uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("limits: short memlock line")
		}
		parse := func(s string) (uint64, error) {
			if s == "unlimited" {
				return Unlimited, nil
			}
			return strconv.ParseUint(s, 10, 64)
		}
		if soft, err = parse(f[0]); err != nil {
			return 0, 0, fmt.Errorf("limits: memlock: %w", err)
		}
		if hard, err = parse(f[1]); err != nil {
			return 0, 0, fmt.Errorf("limits: memlock: %w", err)
		}
		return soft, hard, nil
	}
	return 0, 0, fmt.Errorf("limits: no memlock line")
}

// capIPCLock is CAP_IPC_LOCK's bit in the capability sets.
const capIPCLock = 14

// ParseCapIPCLock reports whether the CapEff line of a /proc/<pid>/status
// file has CAP_IPC_LOCK, which lifts RLIMIT_MEMLOCK for io_uring buffers.
func ParseCapIPCLock(b []byte) (bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return false, fmt.Errorf("status: CapEff: %w", err)
		}
		return n&(1<<capIPCLock) != 0, nil
	}
	return false, fmt.Errorf("status: no CapEff line")
}
