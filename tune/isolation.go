package tune

import (
	"fmt"
	"path"
	"strings"

	"github.com/spindlenet/spindle/topo"
)

// IsolatedCPUs returns the CPUs loops default to: those isolcpus= takes
// out of the scheduler's load balancing (Host.IsolatedDomain) and those
// of valid isolated cgroup v2 cpuset partitions (Host.IsolatedPartition).
// Any goroutine.
func IsolatedCPUs(h *topo.Host) topo.CPUSet {
	return h.IsolatedDomain.Union(h.IsolatedPartition)
}

// IsolationKind says which kinds of isolation hold any of cpus:
// "isolcpus", "cpuset partition /rt" (or "cpuset partitions /rt, /rt2";
// "cpuset partition" alone where no partition read holds them, as
// partitionsNamed says), both joined by " and ", or "" for none. Any
// goroutine.
func IsolationKind(h *topo.Host, cpus topo.CPUSet) string {
	var kinds []string
	if h.IsolatedDomain.Intersect(cpus).Len() > 0 {
		kinds = append(kinds, "isolcpus")
	}
	if s := partitionsNamed(h, cpus); s != "" {
		kinds = append(kinds, s)
	} else if h.IsolatedPartition.Intersect(cpus).Len() > 0 {
		kinds = append(kinds, "cpuset partition")
	}
	return strings.Join(kinds, " and ")
}

// partitionsNamed names the valid isolated cpuset partitions holding any
// of cpus by their cgroups: "cpuset partition /rt", "cpuset partitions
// /rt, /rt2", or "" where none read does. Some of cpus may be
// partition-isolated (h.IsolatedPartition, from the root's
// cpuset.cpus.isolated) without any partition read holding them: the
// mount read shows a cgroup below the hierarchy's root, or a partition's
// CPUs could not be read; each caller says that in its own words.
func partitionsNamed(h *topo.Host, cpus topo.CPUSet) string {
	cgs := h.PartitionOf(cpus)
	switch len(cgs) {
	case 0:
		return ""
	case 1:
		return "cpuset partition " + cgs[0]
	}
	return "cpuset partitions " + strings.Join(cgs, ", ")
}

// partitionNote says what loop CPUs in isolated cpuset partitions get and
// need, where that differs from isolcpus=: "" when loops has none.
// Such a partition, like isolcpus=domain, takes its CPUs out of load
// balancing and (Linux 6.8+) off unbound workqueues; unlike it, only the
// tasks of the partition's cgroup may run there, so a service outside it
// cannot pin its loops there (sched_setaffinity fails with EINVAL), and
// loop CPUs of several partitions (or partly of none) cannot all be one
// service's. Neither stops the timer tick, which only nohz_full= does,
// nor moves interrupts.
func partitionNote(h *topo.Host, loops topo.CPUSet) string {
	in := loops.Intersect(h.IsolatedPartition)
	if in.Len() == 0 {
		return ""
	}
	where := "an isolated cpuset partition"
	if s := partitionsNamed(h, in); s != "" {
		where = "isolated " + s + " (under " + cgroupFile(h, "", "") + ")"
	}
	s := fmt.Sprintf("loop CPUs %s are in %s: the scheduler does not balance load onto them and unbound workqueues stay off them (Linux 6.8+), as with isolcpus=domain, but only tasks of that cgroup may run there: start the service in it, or pinning its loops there fails (EINVAL)", in, where)
	if tick := in.Minus(h.NohzFull); tick.Len() > 0 {
		s += fmt.Sprintf("; the timer tick still runs on %s (a partition does not stop it; only nohz_full= at boot does)", tick)
	}
	if shares := partitionShares(h, loops); len(shares) > 1 {
		var parts []string
		for _, o := range shares {
			parts = append(parts, fmt.Sprintf("%s are those of %s", o.cpus, partitionName(h, o.p)))
		}
		s += fmt.Sprintf("; a service runs in one cgroup, so on the CPUs of one partition only, and these loop CPUs are several's (%s): give each service the loop CPUs of one (--loop-cpus)", strings.Join(parts, ", "))
	}
	return s
}

// partitionShare is the part of a set of CPUs that a valid cpuset
// partition holds: p's (p nil: the root cgroup's, in no valid partition).
type partitionShare struct {
	p    *topo.CpusetPartition
	cpus topo.CPUSet
}

// partitionShares splits cpus among the valid cpuset partitions holding
// them, in h's order, those of none (the root cgroup's) last. The CPUs
// of valid partitions are apart (a partition's effective CPUs leave out
// its child partitions'), and a task may run on those of one only: the
// deepest valid partition holding its cgroup, else the root cgroup.
func partitionShares(h *topo.Host, cpus topo.CPUSet) []partitionShare {
	var shares []partitionShare
	rest := cpus
	for i := range h.Cpuset.Partitions {
		p := &h.Cpuset.Partitions[i]
		if in := p.CPUs.Intersect(cpus); p.Invalid == "" && in.Len() > 0 {
			shares = append(shares, partitionShare{p, in})
			rest = rest.Minus(in)
		}
	}
	if rest.Len() > 0 {
		shares = append(shares, partitionShare{nil, rest})
	}
	return shares
}

// cgroupFile names, for messages, the file of cgroup cg (a path below
// the mount read, "" for the mount itself): under h.Cpuset.Mount, or,
// where that was a private mount of the read's own and is gone
// (Cpuset.Private), under "<cgroup2 mount>", wherever the reader has
// the hierarchy mounted.
func cgroupFile(h *topo.Host, cg, file string) string {
	if h.Cpuset.Private {
		return path.Join("<cgroup2 mount>", cg, file)
	}
	return path.Join(h.Cpuset.Mount, cg, file)
}

// partitionName names p for messages: "isolated partition /rt" (its
// cgroup from the hierarchy's root), or for nil "the root cgroup (no
// partition)".
func partitionName(h *topo.Host, p *topo.CpusetPartition) string {
	if p == nil {
		return "the root cgroup (no partition)"
	}
	return fmt.Sprintf("%s partition %s", p.Type, path.Join(h.Cpuset.MountRoot, p.Cgroup))
}
