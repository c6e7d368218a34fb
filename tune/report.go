package tune

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spindlenet/spindle/topo"
)

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// WriteHost prints h for a person: CPUs, isolation, limits, and each
// physical interface's queues, IRQs, NAPI instances and netlink settings.
func WriteHost(w io.Writer, h *topo.Host) error {
	ew := &errWriter{w: w}
	smt := "no"
	if h.HasSMT() {
		smt = "yes"
	}
	ew.f("host: kernel %s, %d CPUs online (%s), %d NUMA node(s), SMT %s\n", h.Kernel, h.Online.Len(), h.Online, len(h.Nodes), smt)
	for _, n := range h.Nodes {
		ew.f("  node %d: CPUs %s\n", n.ID, n.CPUs)
	}
	ew.f("  isolated (domain): %s   managed_irq: %s   nohz_full: %s\n", orNone(h.IsolatedDomain.String()), orNone(h.IsolatedManagedIRQ.String()), orNone(h.NohzFull.String()))
	if h.Cpuset.Available {
		ew.f("  isolated (cpuset partition): %s, from %s\n", orNone(h.IsolatedPartition.String()), h.Cpuset.Source)
	} else {
		ew.f("  isolated (cpuset partition): none: %s\n", h.Cpuset.Source)
	}
	for _, p := range h.Cpuset.Partitions {
		if p.Invalid != "" {
			wants := ""
			if p.Wants.Len() > 0 {
				wants = " (asks for CPUs " + p.Wants.String() + ")"
			}
			ew.f("    partition %s: %s, invalid (%s): isolates nothing%s\n", p.Cgroup, p.Type, p.Invalid, wants)
		} else {
			ew.f("    partition %s: %s, CPUs %s\n", p.Cgroup, p.Type, orNone(p.CPUs.String()))
		}
	}
	for _, note := range h.Notes {
		ew.f("  note: %s\n", note)
	}
	var sc []string
	for _, k := range slices.Sorted(maps.Keys(h.Sysctls)) {
		sc = append(sc, k+"="+h.Sysctls[k])
	}
	ew.f("  sysctls: %s\n", strings.Join(sc, " "))
	if h.IrqbalancePID != 0 {
		ew.f("  irqbalance: running (pid %d)\n", h.IrqbalancePID)
	} else {
		ew.f("  irqbalance: not running\n")
	}
	ew.f("  memlock (%s): soft %s, hard %s, CAP_IPC_LOCK %v\n", memlockOf(h.Memlock), limitString(h.Memlock.Soft), limitString(h.Memlock.Hard), h.Memlock.CapIPCLock)
	if h.ServiceCgroup != "" {
		ew.f("  cgroup (%s): %s\n", memlockOf(h.Memlock), h.ServiceCgroup)
	}
	ew.f("  huge pages: %d of %d KiB (%d free), THP %s\n", h.HugePages.Total, h.HugePages.PageSize>>10, h.HugePages.Free, orNone(h.HugePages.THP))
	ew.f("  netlink: netdev %s; ethtool %s\n", h.Netlink.Netdev, h.Netlink.Ethtool)
	var virtual []string
	for i := range h.NICs {
		n := &h.NICs[i]
		if n.Virtual {
			virtual = append(virtual, n.Name)
			continue
		}
		writeNIC(ew, n)
	}
	if len(virtual) > 0 {
		ew.f("\nvirtual interfaces (not tuned by default): %s\n", strings.Join(virtual, " "))
	}
	return ew.err
}

// napiCol formats a queue's NAPI id for the queue table, "-" when unknown.
func napiCol(id uint32) string {
	if id == 0 {
		return "-"
	}
	return fmt.Sprint(id)
}

func writeNIC(ew *errWriter, n *topo.NIC) {
	speed := "unknown"
	if n.SpeedMbps > 0 {
		speed = fmt.Sprintf("%d Mb/s", n.SpeedMbps)
	}
	node := "-"
	if n.NUMANode >= 0 {
		node = fmt.Sprint(n.NUMANode)
	}
	ew.f("\n%s (driver %s, %s, speed %s, mtu %d, NUMA node %s, local CPUs %s)\n", n.Name, orNone(n.Driver), n.Operstate, speed, n.MTU, node, n.LocalCPUs)
	line := fmt.Sprintf("  queues: %d rx, %d tx", len(n.RxQueues), len(n.TxQueues))
	if c := n.Channels; c != nil {
		line += fmt.Sprintf("; channels combined %d/%d rx %d/%d tx %d/%d", c.CombinedCount, c.CombinedMax, c.RxCount, c.RxMax, c.TxCount, c.TxMax)
	} else if n.ChannelsErr != "" {
		line += "; channels: " + n.ChannelsErr
	}
	if r := n.Rings; r != nil {
		line += fmt.Sprintf("; rings rx %d/%d tx %d/%d", r.Rx, r.RxMax, r.Tx, r.TxMax)
	} else if n.RingsErr != "" {
		line += "; rings: " + n.RingsErr
	}
	ew.f("%s\n", line)
	if n.Coalesce != nil {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(n.Coalesce)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, n.Coalesce[k]))
		}
		ew.f("  coalescing: %s\n", strings.Join(parts, ", "))
	} else if n.CoalesceErr != "" {
		ew.f("  coalescing: %s\n", n.CoalesceErr)
	}
	ew.f("  device napi_defer_hard_irqs %d, gro_flush_timeout %d ns\n", n.DeviceDeferHardIRQs, n.DeviceGROFlushTimeout)
	irqs := map[int]topo.NICIRQ{}
	for _, q := range n.IRQs {
		irqs[q.IRQ] = q
	}
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  queue\tIRQ\tname\taffinity\teffective\tNAPI\tRPS/XPS\tflow_cnt\n")
	used := map[int]bool{}
	// cols returns a queue's IRQ columns and marks the IRQ as shown.
	cols := func(n int) (irq, name, aff, eff string) {
		x, ok := irqs[n]
		if !ok {
			return "-", "-", "-", "-"
		}
		used[n] = true
		return fmt.Sprint(n), x.Name, x.Affinity.String(), x.Effective.String()
	}
	for _, q := range n.RxQueues {
		irq, name, aff, eff := cols(q.IRQ)
		fmt.Fprintf(tw, "  rx-%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", q.Index, irq, name, aff, orNone(eff), napiCol(q.NAPIID), orNone(q.RPS.String()), q.RPSFlowCnt)
	}
	for _, q := range n.TxQueues {
		irq, name, aff, eff := cols(q.IRQ)
		xps := "n/a"
		if q.HasXPS {
			xps = orNone(q.XPS.String())
		}
		fmt.Fprintf(tw, "  tx-%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", q.Index, irq, name, aff, orNone(eff), napiCol(q.NAPIID), xps)
	}
	tw.Flush()
	var other []string
	for _, q := range n.IRQs {
		if !used[q.IRQ] {
			other = append(other, fmt.Sprintf("%d %s (affinity %s)", q.IRQ, q.Name, q.Affinity))
		}
	}
	if len(other) > 0 {
		ew.f("  other IRQs: %s\n", strings.Join(other, "; "))
	}
	if len(n.NAPIs) == 0 && n.NAPIErr != "" {
		ew.f("  NAPI: %s\n", n.NAPIErr)
	}
	for _, p := range n.NAPIs {
		irq := "-"
		if p.IRQ >= 0 {
			irq = fmt.Sprint(p.IRQ)
		}
		ew.f("  NAPI %d: irq %s, defer_hard_irqs %d, gro_flush_timeout %d ns, irq_suspend_timeout %d ns, threaded %d\n",
			p.ID, irq, p.DeferHardIRQs, p.GROFlushTimeout, p.IRQSuspendTimeout, p.Threaded)
	}
}

// WriteFindings prints findings for a person, most serious first.
func WriteFindings(w io.Writer, fs []Finding) error {
	ew := &errWriter{w: w}
	if len(fs) == 0 {
		ew.f("no findings: nothing in the sample or the settings needs attention\n")
	}
	for i, f := range fs {
		if i > 0 {
			ew.f("\n")
		}
		ew.f("[%s] %s (%s)\n", strings.ToUpper(string(f.Severity)), f.Title, f.ID)
		for _, e := range f.Evidence {
			ew.f("    evidence: %s\n", e)
		}
		ew.f("    fix: %s\n", f.Fix)
	}
	return ew.err
}

// WritePlan prints p for review.
func WritePlan(w io.Writer, p *Plan) error {
	ew := &errWriter{w: w}
	ew.f("policy %s for %s\n", p.Policy, strings.Join(p.Interfaces, ", "))
	ew.f("loop CPUs: %s   (spindle bench: --server-cpus %s --loops %d)\n", p.LoopCPUs, p.LoopCPUs, p.LoopCPUs.Len())
	ew.f("IRQ/softirq CPUs: %s\n", p.IRQCPUs)
	if len(p.Writes) > 0 {
		ew.f("\n%d write(s):\n", len(p.Writes))
	}
	for i, wr := range p.Writes {
		ew.f("%3d. %s\n      %q -> %q\n      why: %s\n", i+1, wr.Target(), strings.TrimSpace(wr.Old), wr.New, wr.Reason)
	}
	if len(p.Notes) > 0 {
		ew.f("\nnotes:\n")
		for _, n := range p.Notes {
			ew.f("  - %s\n", n)
		}
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) f(format string, args ...any) { fmt.Fprintf(e, format, args...) }
