package tune

import (
	"fmt"
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
// "isolcpus", "cpuset partition /rt" (the cgroups, comma-separated), both
// joined by " and ", or "" for none. Any goroutine.
func IsolationKind(h *topo.Host, cpus topo.CPUSet) string {
	var kinds []string
	if h.IsolatedDomain.Intersect(cpus).Len() > 0 {
		kinds = append(kinds, "isolcpus")
	}
	if cgs := h.PartitionOf(cpus); len(cgs) > 0 {
		kinds = append(kinds, "cpuset partition "+strings.Join(cgs, ","))
	} else if h.IsolatedPartition.Intersect(cpus).Len() > 0 {
		kinds = append(kinds, "cpuset partition")
	}
	return strings.Join(kinds, " and ")
}

// partitionNote says what loop CPUs in isolated cpuset partitions get and
// need, where that differs from isolcpus=: "" when loops has none.
// Such a partition, like isolcpus=domain, takes its CPUs out of load
// balancing and (Linux 6.8+) off unbound workqueues; unlike it, only the
// tasks of the partition's cgroup may run there, so a service outside it
// cannot pin its loops there (sched_setaffinity fails with EINVAL). Neither
// stops the timer tick, which only nohz_full= does, nor moves interrupts.
func partitionNote(h *topo.Host, loops topo.CPUSet) string {
	in := loops.Intersect(h.IsolatedPartition)
	if in.Len() == 0 {
		return ""
	}
	where := "an isolated cpuset partition"
	if cgs := h.PartitionOf(in); len(cgs) > 0 {
		where = "isolated cpuset partition " + strings.Join(cgs, ", ")
		if h.Cpuset.Mount != "" {
			where += " (under " + h.Cpuset.Mount + ")"
		}
	}
	s := fmt.Sprintf("loop CPUs %s are in %s: the scheduler does not balance load onto them and unbound workqueues stay off them (Linux 6.8+), as with isolcpus=domain, but only tasks of that cgroup may run there: start the service in it, or pinning its loops there fails (EINVAL)", in, where)
	if tick := in.Minus(h.NohzFull); tick.Len() > 0 {
		s += fmt.Sprintf("; the timer tick still runs on %s (a partition does not stop it; only nohz_full= at boot does)", tick)
	}
	return s
}
