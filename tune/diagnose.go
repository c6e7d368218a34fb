package tune

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/topo"
)

// Severity ranks a finding.
type Severity string

// Severities, most serious first.
const (
	Critical Severity = "critical"
	Warning  Severity = "warning"
	Info     Severity = "info"
)

// Finding is one diagnosis: what is wrong, the evidence, and the fix.
type Finding struct {
	// ID is a stable identifier ("softirq-saturated", "drops", ...).
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Evidence []string `json:"evidence"`
	Fix      string   `json:"fix"`
}

// Options tune the diagnosis. The zero value uses the defaults.
type Options struct {
	// LoopCPUs are the CPUs that run (or will run) event loops. Default:
	// the host's isolated CPUs (IsolatedCPUs: isolcpus domain-isolated
	// and cpuset-partition isolated); when both are empty, the
	// IRQs-on-loop-CPUs check is skipped, which an info finding
	// (irq-on-loop-cpu-unchecked) says unless Inline.
	LoopCPUs topo.CPUSet
	// Inline says IRQs are meant to share the loop CPUs (the inline
	// policy), so queue IRQs on loop CPUs are not reported.
	Inline bool
	// BusyPoll says the application busy-polls (io_uring NAPI or
	// SO_BUSY_POLL) even if the busy-poll sysctls are 0.
	BusyPoll bool
	// LockedBytes is the memory the application takes from
	// RLIMIT_MEMLOCK without CAP_IPC_LOCK (io_uring rings and buffer
	// rings, registered buffers). Default: what an engine with the default
	// Config takes (engine.LockedMemory), one loop per CPU of LoopCPUs, or
	// per online CPU without them (the engine's loops then run on every
	// CPU the process may run on).
	LockedBytes uint64
	// SoftirqSaturation is the share of a CPU's time in softirq above
	// which it counts as saturated. Default 0.5.
	SoftirqSaturation float64
	// IdleShare is the idle share above which the other CPUs count as
	// idle. Default 0.5.
	IdleShare float64

	// lockedLoops is the number of loops the default LockedBytes is for,
	// 0 when the caller set LockedBytes.
	lockedLoops int
}

func (o Options) withDefaults(h *topo.Host) Options {
	if o.LoopCPUs.Len() == 0 {
		o.LoopCPUs = IsolatedCPUs(h)
	}
	if o.LockedBytes == 0 {
		loops := o.LoopCPUs.Len()
		if loops == 0 {
			loops = h.Online.Len()
		}
		// A nil Config is valid, and a CPU count of loops far below the
		// most LockedMemory counts: no error.
		o.LockedBytes, _ = engine.LockedMemory(nil, max(loops, 1))
		o.lockedLoops = max(loops, 1)
	}
	if o.SoftirqSaturation == 0 {
		o.SoftirqSaturation = 0.5
	}
	if o.IdleShare == 0 {
		o.IdleShare = 0.5
	}
	return o
}

// sub returns the growth of a 64-bit counter from a to b; a decrease (a
// counter reset) is 0.
func sub(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

// sub32 returns the growth from a to b of a counter the kernel keeps in 32
// bits: the per-CPU counts of /proc/interrupts and /proc/softirqs and the
// columns of softnet_stat (unsigned int, printed %u or %08x). Such a
// counter wraps within hours at a high interrupt or packet rate, so a
// decrease is a wrap and the growth is taken modulo 2^32. Values wider
// than 32 bits are no such counter and go to sub.
func sub32(a, b uint64) uint64 {
	if a > math.MaxUint32 || b > math.MaxUint32 {
		return sub(a, b)
	}
	return uint64(uint32(b) - uint32(a))
}

// maxIRQRate bounds the interrupts one CPU can take a second (each costs
// it at least a microsecond on entry and exit), with a margin of ten.
const maxIRQRate = 10_000_000

// irqDelta returns, per CPU, how many times irq fired between a and b.
// Only CPUs with a column in both count: a CPU that came online during
// the sample shows its count since boot. An IRQ whose description changed
// (freed and requested again, by another device or chip) restarted from
// 0, so a decrease of its count is a reset and its count in b the growth;
// otherwise a decrease is a wrap, unless the wrap would mean more than
// maxIRQRate interrupts a second on that CPU over the sample: then it is a
// reset too (a driver that freed and requested its IRQs again, as on a
// link down and up or a channel change, keeps their descriptions, and the
// kernel counts a reallocated IRQ from 0). (A description can change
// without a reset, as an action added to a shared IRQ: an increase is
// growth.)
func irqDelta(a, b *Snapshot, irq int) map[int]uint64 {
	pa, pb := a.Interrupts.PerCPU(irq), b.Interrupts.PerCPU(irq)
	reset := a.Interrupts.IRQs[irq].Desc != b.Interrupts.IRQs[irq].Desc
	maxWrap := maxIRQRate * seconds(a, b)
	out := map[int]uint64{}
	for cpu, v := range pb {
		before, ok := pa[cpu]
		if !ok && pa != nil {
			continue
		}
		d := sub32(before, v)
		if v < before && (reset || float64(d) > maxWrap) {
			d = v
		}
		if d > 0 {
			out[cpu] = d
		}
	}
	return out
}

// softirqDelta returns, per CPU with a column in both a and b, how many
// times the named softirq was raised between them.
func softirqDelta(a, b *Snapshot, name string) map[int]uint64 {
	pa, pb := a.Softirqs.PerCPU(name), b.Softirqs.PerCPU(name)
	out := map[int]uint64{}
	for cpu, v := range pb {
		if before, ok := pa[cpu]; ok {
			out[cpu] = sub32(before, v)
		}
	}
	return out
}

func sysctlInt(h *topo.Host, name string) (int64, bool) {
	v, ok := h.Sysctls[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func seconds(a, b *Snapshot) float64 {
	s := b.Time.Sub(a.Time).Seconds()
	if s <= 0 {
		return 1
	}
	return s
}

// Diagnose compares two snapshots of h and returns the findings, most
// serious first. It reads nothing itself.
func Diagnose(h *topo.Host, a, b *Snapshot, opt Options) []Finding {
	opt = opt.withDefaults(h)
	var fs []Finding
	add := func(f Finding) { fs = append(fs, f) }
	secs := seconds(a, b)
	nics := tunedNICs(h)

	// 1. One CPU drowning in softirq while others idle.
	type share struct {
		cpu           int
		softirq, idle float64
	}
	var shares []share
	for cpu, tb := range b.Stat {
		ta, ok := a.Stat[cpu]
		if !ok {
			continue
		}
		d := tb.Sub(ta)
		if d.Total() == 0 {
			continue
		}
		shares = append(shares, share{cpu, float64(d.SoftIRQ) / float64(d.Total()), float64(d.Idle+d.IOWait) / float64(d.Total())})
	}
	sort.Slice(shares, func(i, j int) bool { return shares[i].cpu < shares[j].cpu })
	netrx := softirqDelta(a, b, "NET_RX")
	for _, s := range shares {
		if s.softirq < opt.SoftirqSaturation || len(shares) < 2 {
			continue
		}
		var idleSum float64
		var others []int
		for _, o := range shares {
			if o.cpu != s.cpu {
				idleSum += o.idle
				others = append(others, o.cpu)
			}
		}
		if idleSum/float64(len(others)) < opt.IdleShare {
			continue
		}
		add(Finding{
			ID: "softirq-saturated", Severity: Critical,
			Title: fmt.Sprintf("CPU %d is saturated by softirq while the other CPUs are idle", s.cpu),
			Evidence: []string{
				fmt.Sprintf("CPU %d: %s of its time in softirq, NET_RX raised %.0f/s", s.cpu, pct(s.softirq), float64(netrx[s.cpu])/secs),
				fmt.Sprintf("CPUs %s: %s idle on average", topo.NewCPUSet(others...), pct(idleSum/float64(len(others)))),
			},
			Fix: "spread receive processing over more CPUs: `spindle tune plan --policy inline` (one queue IRQ per loop CPU, RPS when there are fewer queues than CPUs) or `--policy dedicated` (softirq on a chosen CPU set, RPS to it).",
		})
	}

	// NICs whose queue IRQs the irq-on-loop-cpu check (3) had no loop
	// CPUs to judge against.
	var unchecked []string
	for _, n := range nics {
		queueIRQs := queueIRQs(n)
		// 2a. Single-queue NIC on a multi-CPU host.
		if len(n.RxQueues) == 1 && h.Online.Len() > 1 {
			ev := []string{fmt.Sprintf("%s has 1 receive queue for %d online CPUs", n.Name, h.Online.Len())}
			sev, fix := Warning, "enable RPS so protocol processing spreads over the loop CPUs (`spindle tune plan` does this when queues < CPUs)"
			if rps := n.RxQueues[0].RPS; rps.Len() > 0 {
				ev = append(ev, fmt.Sprintf("rx-0 already has RPS to CPUs %s", rps))
			}
			if n.RxQueues[0].RPS.Len() > 1 {
				// RPS already spreads protocol processing; only the IRQ
				// and the driver's poll stay on one CPU.
				sev = Info
				fix = "RPS already spreads protocol processing; the interrupt and the driver's receive poll still run on one CPU: watch it with `spindle tune diagnose` under load"
			}
			if c := n.Channels; c != nil {
				most := max(c.CombinedMax, c.RxMax)
				ev = append(ev, fmt.Sprintf("channels: combined %d (max %d), rx %d (max %d)", c.CombinedCount, c.CombinedMax, c.RxCount, c.RxMax))
				if most > 1 {
					fix = fmt.Sprintf("raise the queue count: `ethtool -L %s combined %d`, then re-plan; ", n.Name, min(int(most), h.Online.Len())) + fix
				}
			}
			add(Finding{ID: "single-queue", Severity: sev,
				Title: fmt.Sprintf("%s has a single receive queue", n.Name), Evidence: ev, Fix: fix})
		}
		// 2b. All queue IRQs land on one CPU. Most interrupts handled on
		// one CPU is that only when most queue IRQs (at least 2) land
		// there: their affinities allow it, or they fired there. One busy
		// queue whose IRQ is pinned to its own CPU is RSS sending the
		// traffic (few flows) to one queue: imbalance, reported with 2c.
		var irqImbalance []string
		if len(queueIRQs) > 1 {
			perCPU := map[int]uint64{}
			perIRQ := map[int]map[int]uint64{}
			var total uint64
			for _, irq := range queueIRQs {
				perIRQ[irq.IRQ] = irqDelta(a, b, irq.IRQ)
				for cpu, d := range perIRQ[irq.IRQ] {
					perCPU[cpu] += d
					total += d
				}
			}
			var ev []string
			if total >= 100 {
				for _, cpu := range slices.Sorted(maps.Keys(perCPU)) {
					d := perCPU[cpu]
					if float64(d) < 0.9*float64(total) {
						continue
					}
					handled := fmt.Sprintf("%d of %d queue interrupts of %s (%s) were handled on CPU %d", d, total, n.Name, pct(float64(d)/float64(total)), cpu)
					var landing, fired []string
					for _, irq := range queueIRQs {
						if perIRQ[irq.IRQ][cpu] > 0 {
							fired = append(fired, strconv.Itoa(irq.IRQ))
						}
						if perIRQ[irq.IRQ][cpu] > 0 || deliveredTo(irq).Contains(cpu) {
							landing = append(landing, strconv.Itoa(irq.IRQ))
						}
					}
					lands := fmt.Sprintf("%d of %d queue IRQs (%s) may be delivered to CPU %d (by affinity, or they fired there)", len(landing), len(queueIRQs), strings.Join(landing, ","), cpu)
					if len(landing) >= 2 && 2*len(landing) > len(queueIRQs) {
						ev = append(ev, handled, lands)
						continue
					}
					irqImbalance = append(irqImbalance, handled, fmt.Sprintf("IRQ %s fired there; %s: the traffic went to few queues", strings.Join(fired, ","), lands))
				}
			} else {
				// Where each may be delivered: the effective affinity,
				// else (kernels without it) the affinity.
				eff := deliveredTo(queueIRQs[0])
				same := eff.Len() == 1
				for _, q := range queueIRQs[1:] {
					same = same && deliveredTo(q).Equal(eff)
				}
				if same {
					ev = append(ev, fmt.Sprintf("all %d queue IRQs of %s are delivered to CPU %s (effective_affinity_list, else smp_affinity_list)", len(queueIRQs), n.Name, eff))
				}
			}
			if len(ev) > 0 {
				add(Finding{ID: "queue-irqs-one-cpu", Severity: Critical,
					Title:    fmt.Sprintf("all queue interrupts of %s land on one CPU", n.Name),
					Evidence: ev,
					Fix:      fmt.Sprintf("pin queue IRQs one per CPU: `spindle tune plan --policy inline --iface %s` (or --policy dedicated with --irq-cpus).", n.Name)})
			}
		}
		// 3. Queue IRQs on loop CPUs.
		if !opt.Inline && opt.LoopCPUs.Len() == 0 && len(queueIRQs) > 0 {
			unchecked = append(unchecked, fmt.Sprintf("%s (%d queue IRQs)", n.Name, len(queueIRQs)))
		}
		if !opt.Inline && opt.LoopCPUs.Len() > 0 {
			var ev []string
			for _, irq := range queueIRQs {
				d := irqDelta(a, b, irq.IRQ)
				for _, cpu := range slices.Sorted(maps.Keys(d)) {
					if opt.LoopCPUs.Contains(cpu) {
						ev = append(ev, fmt.Sprintf("IRQ %d (%s): %d interrupts on loop CPU %d", irq.IRQ, irq.Name, d[cpu], cpu))
					}
				}
				if to := deliveredTo(irq); len(d) == 0 && to.Intersect(opt.LoopCPUs).Len() > 0 {
					ev = append(ev, fmt.Sprintf("IRQ %d (%s) may be delivered to CPUs %s, loop CPUs %s among them (no interrupts during the sample)", irq.IRQ, irq.Name, to, to.Intersect(opt.LoopCPUs)))
				}
			}
			if len(ev) > 0 {
				add(Finding{ID: "irq-on-loop-cpu", Severity: Warning,
					Title:    fmt.Sprintf("%s interrupts land on loop CPUs %s", n.Name, opt.LoopCPUs),
					Evidence: ev,
					Fix:      fmt.Sprintf("move them off: `spindle tune plan --policy dedicated --loop-cpus %s --iface %s`, or pass --inline if loops are meant to share CPUs with their queues.", opt.LoopCPUs, n.Name)})
			}
		}
		// 4b. NIC-level drops, from sysfs statistics and per-queue
		// netlink counters.
		// Only counters that mean the ring or the FIFO overflowed (or
		// could not be refilled) make nic-drops; rx_dropped also counts
		// frames of protocols nothing handles (an LLDP frame every 30 s,
		// STP), so alone it is a note, above rxDroppedNoteRate.
		var ev []string
		for _, name := range []string{"rx_missed_errors", "rx_fifo_errors"} {
			if d := sub(a.NICStats[n.Name][name], b.NICStats[n.Name][name]); d > 0 {
				ev = append(ev, fmt.Sprintf("%s %s +%d (%.0f/s)", n.Name, name, d, float64(d)/secs))
			}
		}
		rxDropped := sub(a.NICStats[n.Name]["rx_dropped"], b.NICStats[n.Name]["rx_dropped"])
		qd := qstatDeltas(a, b, n.Name)
		for _, q := range qd {
			for _, name := range []string{"rx-hw-drops", "rx-hw-drop-overruns", "rx-alloc-fail"} {
				if d := q.Values[name]; d > 0 {
					ev = append(ev, fmt.Sprintf("%s rx-%d %s +%d (%.0f/s)", n.Name, q.Queue, name, d, float64(d)/secs))
				}
			}
		}
		// 2c. One receive queue gets most of the packets.
		if len(n.RxQueues) > 1 {
			var total, top uint64
			topQ := -1
			for _, q := range qd {
				p := q.Values["rx-packets"]
				total += p
				if p > top {
					top, topQ = p, q.Queue
				}
			}
			var ev []string
			if total >= 1000 && float64(top) >= 0.8*float64(total) {
				ev = append(ev, fmt.Sprintf("rx-%d received %d of %d packets (%s) across %d queues", topQ, top, total, pct(float64(top)/float64(total)), len(n.RxQueues)))
			}
			if ev = append(ev, irqImbalance...); len(ev) > 0 {
				add(Finding{ID: "queue-imbalance", Severity: Warning,
					Title:    fmt.Sprintf("one receive queue of %s gets most packets", n.Name),
					Evidence: ev,
					Fix:      "RSS hashes flows to queues: with few flows one queue takes them all. Use more connections, or RPS/RFS to spread processing (`spindle tune plan --policy inline` enables it when queues < loops); check the RSS indirection table (`ethtool -x`)."})
			}
		}
		dropped := fmt.Sprintf("%s rx_dropped +%d (%.1f/s)", n.Name, rxDropped, float64(rxDropped)/secs)
		switch {
		case len(ev) > 0:
			if rxDropped > 0 {
				ev = append(ev, dropped)
			}
			fix := "more or larger receive rings and faster draining: "
			if r := n.Rings; r != nil && r.Rx < r.RxMax {
				fix += fmt.Sprintf("`ethtool -G %s rx %d`; ", n.Name, r.RxMax)
			}
			fix += "spread the queues over more CPUs (`spindle tune plan`)."
			add(Finding{ID: "nic-drops", Severity: Critical, Title: fmt.Sprintf("%s dropped received packets", n.Name), Evidence: ev, Fix: fix})
		case float64(rxDropped)/secs >= rxDroppedNoteRate:
			add(Finding{ID: "rx-dropped", Severity: Info,
				Title:    fmt.Sprintf("%s discarded received frames, with no ring or FIFO overflow counted", n.Name),
				Evidence: []string{dropped, "rx_missed_errors, rx_fifo_errors and the per-queue hardware drop counters did not grow"},
				Fix: fmt.Sprintf("rx_dropped also counts frames no protocol handler takes (LLDP, STP, a protocol that is off) and, for some drivers (virtio_net), ring drops; "+
					"`ip -s -s link show %s` and `ethtool -S %s` tell which. Larger rings help only the latter.", n.Name, n.Name)})
		}
		// 5. Adaptive coalescing while busy polling.
		bp, _ := sysctlInt(h, "net.core.busy_poll")
		br, _ := sysctlInt(h, "net.core.busy_read")
		if (opt.BusyPoll || bp > 0 || br > 0) && n.Coalesce != nil && n.Coalesce["adaptive-rx"] == 1 {
			add(Finding{ID: "adaptive-coalescing-busy-poll", Severity: Warning,
				Title: fmt.Sprintf("%s uses adaptive interrupt coalescing while the host busy-polls", n.Name),
				Evidence: []string{fmt.Sprintf("%s adaptive-rx on, rx-usecs %d", n.Name, n.Coalesce["rx-usecs"]),
					fmt.Sprintf("net.core.busy_poll=%d busy_read=%d, application busy polling: %v", bp, br, opt.BusyPoll)},
				Fix: fmt.Sprintf("adaptive moderation fights busy polling (it raises the delay exactly when polling keeps the queue short): `ethtool -C %s adaptive-rx off rx-usecs 8`, or `spindle tune plan --policy inline --busy-poll 50`.", n.Name)})
		}
	}

	// 4a. Backlog drops, flow-limit drops and squeeze.
	{
		sa := map[int]topo.Softnet{}
		for _, s := range a.Softnet {
			sa[s.CPU] = s
		}
		var drops, squeeze []string
		for _, s := range b.Softnet {
			p, ok := sa[s.CPU]
			if !ok {
				continue
			}
			if d := sub32(p.Dropped, s.Dropped) + sub32(p.FlowLimit, s.FlowLimit); d > 0 {
				drops = append(drops, fmt.Sprintf("CPU %d: %d packets dropped from the backlog (%.0f/s)", s.CPU, d, float64(d)/secs))
			}
			if d := sub32(p.TimeSqueeze, s.TimeSqueeze); d > 0 {
				squeeze = append(squeeze, fmt.Sprintf("CPU %d: net_rx_action ran out of budget %d times (%.0f/s)", s.CPU, d, float64(d)/secs))
			}
		}
		if len(drops) > 0 {
			mb, _ := sysctlInt(h, "net.core.netdev_max_backlog")
			add(Finding{ID: "backlog-drops", Severity: Critical, Title: "packets dropped from the per-CPU backlog",
				Evidence: append(drops, fmt.Sprintf("net.core.netdev_max_backlog=%d", mb)),
				Fix:      fmt.Sprintf("raise the backlog (`sysctl -w net.core.netdev_max_backlog=%d`) and spread RPS over more CPUs.", max(2*mb, 4096))})
		}
		if len(squeeze) > 0 {
			bu, _ := sysctlInt(h, "net.core.netdev_budget")
			bus, _ := sysctlInt(h, "net.core.netdev_budget_usecs")
			add(Finding{ID: "time-squeeze", Severity: Warning, Title: "softirq packet processing ran out of budget (time_squeeze)",
				Evidence: append(squeeze, fmt.Sprintf("net.core.netdev_budget=%d netdev_budget_usecs=%d", bu, bus)),
				Fix:      fmt.Sprintf("give net_rx_action more room (`sysctl -w net.core.netdev_budget=%d`) or spread the load over more CPUs.", max(2*bu, 600))})
		}
	}

	// 6. Busy-poll sysctls unset.
	if bp, ok := sysctlInt(h, "net.core.busy_poll"); ok {
		br, _ := sysctlInt(h, "net.core.busy_read")
		if bp == 0 && br == 0 {
			add(Finding{ID: "busy-poll-unset", Severity: Info, Title: "busy-poll sysctls are 0",
				Evidence: []string{"net.core.busy_poll=0 net.core.busy_read=0"},
				Fix: "epoll/blocking-socket servers get no busy polling. On the project's 2-vCPU test VM, over a NAPI veth (docs/TUNING.md, \"The policies\"): epoll p50 35.9 → 22.7 µs with busy_poll=50, at 18.0 → 25.7 µs CPU per message. " +
					"Opt in with `sysctl -w net.core.busy_read=50 net.core.busy_poll=50` (or `spindle tune plan --policy inline --busy-poll 50`); io_uring NAPI registration does not need them."})
		}
	}
	// 7. irqbalance fighting pinned IRQs.
	if h.IrqbalancePID != 0 {
		var ev []string
		for _, n := range nics {
			for _, q := range queueIRQs(n) {
				if q.Affinity.Len() == 1 {
					ev = append(ev, fmt.Sprintf("IRQ %d (%s) is pinned to CPU %s", q.IRQ, q.Name, q.Affinity))
				}
				if x, y := a.IRQAffinity[q.IRQ], b.IRQAffinity[q.IRQ]; x != "" && y != "" && x != y {
					ev = append(ev, fmt.Sprintf("IRQ %d (%s) affinity changed from %s to %s during the sample", q.IRQ, q.Name, x, y))
				}
			}
		}
		if len(ev) > 0 {
			add(Finding{ID: "irqbalance-pinned", Severity: Warning,
				Title:    fmt.Sprintf("irqbalance (pid %d) is running while NIC IRQs are pinned", h.IrqbalancePID),
				Evidence: ev,
				Fix:      "irqbalance rewrites affinities every 10 s: stop it (`systemctl disable --now irqbalance`) or ban the NIC IRQs/CPUs (IRQBALANCE_BANNED_CPULIST, --banirq) before applying a plan."})
		}
	}
	// 8. memlock. The limit that counts is the service's; h.Memlock is
	// the reading process's unless the caller read the service's
	// (topo.ReadMemlock, `--pid`).
	if m := h.Memlock; !m.CapIPCLock && m.Soft != topo.Unlimited && m.Soft < opt.LockedBytes {
		need := fmt.Sprintf("need about %d KiB", opt.LockedBytes>>10)
		if opt.lockedLoops > 0 {
			need += fmt.Sprintf(" for the io_uring rings and buffer rings of %d engine loop(s)", opt.lockedLoops)
		}
		add(Finding{ID: "memlock-low", Severity: Warning, Title: "locked-memory limit too low for io_uring",
			Evidence: []string{fmt.Sprintf("RLIMIT_MEMLOCK of %s: soft %d KiB, hard %s, no CAP_IPC_LOCK; %s", memlockOf(m), m.Soft>>10, limitString(m.Hard), need)},
			Fix:      "raise it for the service: `LimitMEMLOCK=infinity` in the systemd unit, `ulimit -l unlimited`, or grant CAP_IPC_LOCK; otherwise the kernel refuses the rings or registered buffers that do not fit (ENOMEM): the engine's loops whose rings do not fit run epoll, and its send slabs go unregistered (no SEND_ZC). The count is the user's, shared with the user's other processes running io_uring."})
	} else if m.PID == 0 {
		// Run as root, the tuner has CAP_IPC_LOCK or no limit: its own
		// limit says nothing of the service's, which is what fails.
		add(Finding{ID: "memlock-unchecked", Severity: Info, Title: "the service's locked-memory limit was not checked",
			Evidence: []string{fmt.Sprintf("the limit read is this process's own (soft %s, CAP_IPC_LOCK %v), which lets it lock %d KiB; a service run as another user or under systemd has its own", limitString(m.Soft), m.CapIPCLock, opt.LockedBytes>>10)},
			Fix:      "pass the service's process id (`--pid`) to check its RLIMIT_MEMLOCK and CAP_IPC_LOCK."})
	}
	// 9. Huge pages.
	// The pool is the one of the size spindle maps (topo.HugePages):
	// vm.nr_hugepages reserves pages of the default size, which a host
	// booted with default_hugepagesz=1G does not map buffers with.
	if hp := h.HugePages; hp.Total == 0 {
		pool := fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages", hp.PageSize>>10)
		ev := []string{fmt.Sprintf("%s is 0 (%d KiB pages, the size spindle maps buffers with), transparent_hugepage %q", pool, hp.PageSize>>10, hp.THP)}
		fix := fmt.Sprintf("reserve some: `echo N > %s` (N × %d KiB)", pool, hp.PageSize>>10)
		if hp.DefaultPageSize == hp.PageSize {
			fix += ", or `sysctl -w vm.nr_hugepages=N`"
		} else if hp.DefaultPageSize > 0 {
			ev = append(ev, fmt.Sprintf("the default hugetlb size is %d KiB: vm.nr_hugepages and HugePages_Total in /proc/meminfo are that size's pool, which spindle does not use", hp.DefaultPageSize>>10))
		}
		fix += "; spindle falls back to MADV_HUGEPAGE, then 4 KiB pages."
		sev := Info
		if hp.THP == "never" {
			sev = Warning
			fix = "transparent huge pages are off too, so buffers use 4 KiB pages: " + fix
		}
		add(Finding{ID: "no-hugepages", Severity: sev, Title: "no huge pages reserved", Evidence: ev, Fix: fix})
	}
	// 10. Invalid cpuset partitions. The kernel holds a partition whose
	// rules are broken "invalid" and isolates none of its CPUs: they are
	// load-balanced, any task runs there, and IsolatedCPUs (loops'
	// default) leaves them out. An invalid isolated partition was meant
	// to isolate; any other counts where it asks for loop CPUs.
	var invalid, cgs []string
	for _, p := range h.Cpuset.Partitions {
		loops := p.Wants.Intersect(opt.LoopCPUs)
		if p.Invalid == "" || (p.Type != "isolated" && loops.Len() == 0) {
			continue
		}
		state := p.Type + " invalid"
		if p.Invalid != "invalid" {
			state += " (" + p.Invalid + ")"
		}
		ev := fmt.Sprintf("%s reads %q", cgroupFile(h, p.Cgroup, "cpuset.cpus.partition"), state)
		if p.Wants.Len() > 0 {
			ev += fmt.Sprintf("; it asks for CPUs %s", p.Wants)
		}
		if loops.Len() > 0 {
			ev += fmt.Sprintf(", loop CPUs %s among them", loops)
		}
		invalid, cgs = append(invalid, ev), append(cgs, p.Cgroup)
	}
	if len(invalid) > 0 {
		title := fmt.Sprintf("cpuset partition %s is invalid: the kernel isolates none of its CPUs", cgs[0])
		if len(cgs) > 1 {
			title = fmt.Sprintf("cpuset partitions %s are invalid: the kernel isolates none of their CPUs", strings.Join(cgs, ", "))
		}
		add(Finding{ID: "cpuset-partition-invalid", Severity: Warning, Title: title, Evidence: invalid,
			Fix: "fix what the kernel's reason names: a partition's parent must be a valid partition (the root cgroup is one; Linux 6.7+ also takes a remote partition, whose CPUs each ancestor below the root lists in cpuset.cpus.exclusive), and its CPUs (cpuset.cpus, or cpuset.cpus.exclusive on Linux 6.7+) online and exclusive: no sibling partition, nor a sibling's cpuset.cpus.exclusive, holds them. " +
				"The kernel makes it valid again once no rule is broken (Documentation/admin-guide/cgroup-v2.rst, cpuset.cpus.partition); until then its CPUs are load-balanced, run any task, and loops do not default to them. `spindle tune inspect` lists the partitions."})
	}
	// 11. The service and the partitions of its loop CPUs. Only the
	// tasks of a valid partition's cgroup and its descendants may run on
	// its CPUs, and those tasks only there (less the CPUs of partitions
	// below): the kernel refuses any other pin (sched_setaffinity,
	// EINVAL), so an engine given such loop CPUs fails to start, and one
	// left to its default puts its loops on the CPUs it may use instead.
	// Checked where the service's cgroup was read (`--pid`).
	if off, ev, fix := partitionReach(h, opt.LoopCPUs); off.Len() > 0 {
		add(Finding{ID: "service-outside-partition", Severity: Critical,
			Title:    fmt.Sprintf("%s may not run on loop CPUs %s: they are another cpuset partition's than its cgroup's", memlockOf(h.Memlock), off),
			Evidence: ev,
			Fix:      fix + "; or choose loop CPUs it may run on. Given these (Config.CPUs), the engine refuses them as outside the process's affinity; left to its default, it runs its loops on the CPUs it may use instead."})
	}
	// 3'. The queue IRQs check 3 could not judge, for want of loop CPUs.
	if len(unchecked) > 0 {
		add(Finding{ID: "irq-on-loop-cpu-unchecked", Severity: Info, Title: "queue interrupts on loop CPUs were not checked: no loop CPUs known",
			Evidence: []string{
				"no loop CPUs given (`--loop-cpus`), none from a plan applied (`--state`), and no CPU isolated (isolcpus domain, valid isolated cpuset partitions)",
				"not judged: " + strings.Join(unchecked, ", "),
			},
			Fix: "pass the CPUs the event loops run on (`--loop-cpus LIST`) to have queue IRQs on them reported; a plan applied with `spindle tune plan --apply` makes its loop CPUs the default."})
	}
	// Netlink absence is reported, not fatal.
	if h.Netlink.Netdev != "ok" || h.Netlink.Ethtool != "ok" {
		add(Finding{ID: "netlink-unavailable", Severity: Info, Title: "netlink discovery incomplete",
			Evidence: []string{"netdev: " + h.Netlink.Netdev, "ethtool: " + h.Netlink.Ethtool},
			Fix:      "NAPI ids, per-NAPI settings and coalescing come from netlink (netdev family: Linux 6.5+, ethtool netlink: 5.6+); IRQs are matched by name instead."})
	}
	rank := map[Severity]int{Critical: 0, Warning: 1, Info: 2}
	slices.SortStableFunc(fs, func(x, y Finding) int { return rank[x.Severity] - rank[y.Severity] })
	return fs
}

// partitionReach returns, for the service whose cgroup h holds
// (ServiceCgroup), the loops it may not run on, why, and how to let it:
// nothing where it may run on all, or its cgroup was not read. A task may
// run on the CPUs of its home only: the deepest valid partition holding
// its cgroup, else the root cgroup.
func partitionReach(h *topo.Host, loops topo.CPUSet) (off topo.CPUSet, ev []string, fix string) {
	cg := h.ServiceCgroup
	if cg == "" {
		return nil, nil, ""
	}
	var home *topo.CpusetPartition
	for i, p := range h.Cpuset.Partitions {
		if p.Invalid == "" && h.Cpuset.InPartition(cg, p) && (home == nil || len(p.Cgroup) > len(home.Cgroup)) {
			home = &h.Cpuset.Partitions[i]
		}
	}
	var fixes []string
	for _, o := range partitionShares(h, loops) {
		if o.p == home {
			continue
		}
		off = off.Union(o.cpus)
		ev = append(ev, fmt.Sprintf("loop CPUs %s are those of %s", o.cpus, partitionName(h, o.p)))
		if o.p != nil {
			fixes = append(fixes, fmt.Sprintf("for those, move it into %s (`echo PID > %s`, or start it there)", path.Join(h.Cpuset.MountRoot, o.p.Cgroup), cgroupFile(h, o.p.Cgroup, "cgroup.procs")))
		} else {
			fixes = append(fixes, "for those, run it in a cgroup outside "+path.Join(h.Cpuset.MountRoot, home.Cgroup))
		}
	}
	if off.Len() == 0 {
		return nil, nil, ""
	}
	where := "the CPUs of " + partitionName(h, home)
	if home != nil {
		where += fmt.Sprintf(", %s", home.CPUs)
	}
	ev = append([]string{fmt.Sprintf("%s is in cgroup %s: it may run on %s only", memlockOf(h.Memlock), cg, where)}, ev...)
	return off, ev, strings.Join(fixes, "; ")
}

// memlockOf names the process m is of.
func memlockOf(m topo.Memlock) string {
	switch {
	case m.PID == 0:
		return "this process"
	case m.Comm != "":
		return fmt.Sprintf("pid %d (%s)", m.PID, m.Comm)
	}
	return fmt.Sprintf("pid %d", m.PID)
}

func limitString(v uint64) string {
	if v == topo.Unlimited {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", v>>10)
}

// qstatDeltas returns, per receive queue of iface, the growth of each
// netlink queue counter between a and b.
func qstatDeltas(a, b *Snapshot, iface string) []topo.QueueStats {
	prev := map[int]topo.QueueStats{}
	for _, q := range a.QStats[iface] {
		if q.Type == "rx" {
			prev[q.Queue] = q
		}
	}
	var out []topo.QueueStats
	for _, q := range b.QStats[iface] {
		p, ok := prev[q.Queue]
		if q.Type != "rx" || !ok {
			continue
		}
		d := topo.QueueStats{Ifindex: q.Ifindex, Type: q.Type, Queue: q.Queue, Values: map[string]uint64{}}
		for k, v := range q.Values {
			d.Values[k] = sub(p.Values[k], v)
		}
		out = append(out, d)
	}
	return out
}

// tunedNICs returns the physical NICs with receive queues.
func tunedNICs(h *topo.Host) []*topo.NIC {
	var out []*topo.NIC
	for _, name := range h.TuningCandidates() {
		out = append(out, h.NIC(name))
	}
	return out
}

// rxDroppedNoteRate is the rx_dropped growth (per second) below which a
// bare rx_dropped is not reported: unhandled protocols (LLDP every 30 s,
// STP every 2 s) stay well under it.
const rxDroppedNoteRate = 10

// deliveredTo is where irq's interrupts may be delivered: its effective
// affinity, else (not reported) its affinity.
func deliveredTo(irq topo.NICIRQ) topo.CPUSet {
	if irq.Effective.Len() > 0 {
		return irq.Effective
	}
	return irq.Affinity
}

// queueIRQs returns the interrupts of n that serve receive queues.
func queueIRQs(n *topo.NIC) []topo.NICIRQ {
	rx := map[int]bool{}
	for _, q := range n.RxQueues {
		if q.IRQ >= 0 {
			rx[q.IRQ] = true
		}
	}
	var out []topo.NICIRQ
	for _, q := range n.IRQs {
		if rx[q.IRQ] {
			out = append(out, q)
		}
	}
	return out
}
