package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/topo"
)

// Policy names a tuning policy.
type Policy string

// The policies.
const (
	// Inline: queue i → its IRQ on CPU i → loop i. Softirq work runs on
	// the loop's own CPU (where busy polling can take it over); RPS/RFS
	// spread it when there are fewer queues than loops.
	Inline Policy = "inline"
	// Dedicated: queue IRQs and RPS on a set of softirq CPUs, loops on the
	// rest. Loops never get interrupted by packet processing.
	Dedicated Policy = "dedicated"
)

// Check returns nil for Inline and Dedicated, an error naming them for
// any other policy, wrapping ErrRefused as MakePlan's refusals do. Any
// goroutine.
func (p Policy) Check() error {
	if p != Inline && p != Dedicated {
		return refuse("unknown policy %q (%s or %s)", p, Inline, Dedicated)
	}
	return nil
}

// Write kinds.
const (
	// KindFile writes a /proc or /sys file.
	KindFile = "file"
	// KindCoalesce sets one ethtool coalescing parameter over netlink.
	KindCoalesce = "ethtool-coalesce"
	// KindNAPI sets one per-NAPI parameter with netdev napi-set.
	KindNAPI = "netdev-napi"
)

// Value formats, which say how two values compare.
const (
	FormatCPUList = "cpulist"
	FormatMask    = "mask"
	FormatInt     = "int"
)

// Write is one change of a plan. Its method is pure and may be called from
// any goroutine.
type Write struct {
	// Kind is KindFile, KindCoalesce or KindNAPI.
	Kind string `json:"kind"`
	// Path is the absolute /proc or /sys path (KindFile).
	Path string `json:"path,omitempty"`
	// Iface, Ifindex and Param name a netlink parameter (KindCoalesce,
	// KindNAPI); NAPIID names the NAPI instance (KindNAPI). On a file of
	// an interface (/sys/class/net/<Iface>/...), Iface and Ifindex are the
	// interface's when planned, so that Apply and Revert can tell when the
	// name is another interface's now (re-created since) or the interface
	// has another name (renamed); 0 when not known. On the affinity of an
	// IRQ whose handler is named after its interface (IRQName
	// "ice-ens1f0-TxRx-3"), they are that interface's, so that Revert
	// knows the handler under the interface's new name.
	Iface   string `json:"iface,omitempty"`
	Ifindex int    `json:"ifindex,omitempty"`
	NAPIID  uint32 `json:"napi_id,omitempty"`
	Param   string `json:"param,omitempty"`
	// IRQName is, for the affinity of an IRQ (/proc/irq/N/...), the name
	// of its handler when planned ("ice-ens1f0-TxRx-3"), so that Apply
	// and Revert can tell when the number names another device's
	// interrupt now; "" when not known.
	IRQName string `json:"irq_name,omitempty"`
	// Format says how values compare (FormatCPUList, FormatMask,
	// FormatInt).
	Format string `json:"format"`
	// Old is the value found when planning: for files the exact bytes,
	// trailing newline included, so that revert is byte for byte.
	Old string `json:"old"`
	// New is the value to write.
	New string `json:"new"`
	// Reason says why, for the reviewer.
	Reason string `json:"reason"`
}

// Target names what a write changes, for display.
func (w Write) Target() string {
	switch w.Kind {
	case KindCoalesce:
		return fmt.Sprintf("ethtool -C %s %s", w.Iface, w.Param)
	case KindNAPI:
		return fmt.Sprintf("netdev napi-set %s NAPI %d %s", w.Iface, w.NAPIID, w.Param)
	}
	return w.Path
}

// Plan is a reviewable list of writes plus the CPU sets it was built for.
type Plan struct {
	Policy     Policy   `json:"policy"`
	Interfaces []string `json:"interfaces"`
	// LoopCPUs is where spindle's loops should run: pass it to
	// `spindle bench --server-cpus` (and --loops, its size).
	LoopCPUs topo.CPUSet `json:"loop_cpus"`
	// IRQCPUs is where queue interrupts and softirq processing go.
	IRQCPUs topo.CPUSet `json:"irq_cpus"`
	Writes  []Write     `json:"writes"`
	// Notes are things the reviewer should know that the plan does not
	// change.
	Notes   []string  `json:"notes"`
	Created time.Time `json:"created"`
}

// PlanConfig configures MakePlan. Zero fields take the defaults.
type PlanConfig struct {
	// Policy is Inline (default) or Dedicated.
	Policy Policy
	// Interfaces to tune. Default: every physical interface with receive
	// queues.
	Interfaces []string
	// LoopCPUs are the CPUs for loops. Default (inline): the isolated
	// CPUs (IsolatedCPUs: isolcpus domain and cpuset partition) among one SMT thread per
	// core local to the NICs if any, else one SMT thread per local core;
	// (dedicated): those minus IRQCPUs and their SMT siblings.
	LoopCPUs topo.CPUSet
	// IRQCPUs are the softirq CPUs of the dedicated policy. Default: one
	// housekeeping (not isolated) CPU per 8 local cores, at least one, on
	// each NIC's NUMA node; isolated ones, said in a note, where the loops
	// leave no housekeeping core.
	IRQCPUs topo.CPUSet
	// BusyPollUsecs, when > 0 (inline only), sets net.core.busy_poll and
	// busy_read (init network namespace only), napi_defer_hard_irqs and
	// gro_flush_timeout on the NICs, and turns adaptive-rx off.
	BusyPollUsecs int
	// IRQSuspendTimeoutNs, when > 0 (inline with busy polling, Linux
	// 6.13+), sets irq-suspend-timeout on every NAPI instance of the NICs
	// with netdev napi-set: while the application busy-polls with
	// prefer_busy_poll, the device IRQ stays suspended up to this long.
	IRQSuspendTimeoutNs uint64
	// DeferHardIRQs is napi_defer_hard_irqs with busy polling. Default 2.
	DeferHardIRQs int
	// GROFlushTimeoutNs is gro_flush_timeout with busy polling. Default
	// 200000 (200 µs).
	GROFlushTimeoutNs int
	// RFSEntries is net.core.rps_sock_flow_entries when the inline policy
	// uses RPS/RFS, rounded up to a power of two as the kernel does.
	// Default 32768.
	RFSEntries int
	// Somaxconn is the listen backlog the plan raises net.core.somaxconn
	// (and the SYN backlog, net.ipv4.tcp_max_syn_backlog)
	// to when it is lower. Default 4096; negative leaves it alone.
	Somaxconn int
	// ExcludeIRQs are never touched. Each is an interrupt of one of the
	// planned interfaces: MakePlan refuses one that is not.
	ExcludeIRQs []int
}

// ErrRefused is wrapped by every error that refuses a plan or a write
// (unknown interface, CPU not on the machine, path outside /proc and /sys).
var ErrRefused = errors.New("refused")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Check refuses, wrapping ErrRefused as MakePlan's other refusals do, a
// config that no host could be planned for: an unknown policy
// (Policy.Check), settings that do not go together, an interface named
// twice. MakePlan calls it; a command calls it to tell such a config from
// one this host refuses. Policy "" is Inline. Any goroutine.
func (c PlanConfig) Check() error {
	if c.Policy == "" {
		c.Policy = Inline
	}
	if err := c.Policy.Check(); err != nil {
		return err
	}
	switch {
	case c.BusyPollUsecs < 0:
		return refuse("busy-poll %d µs is negative", c.BusyPollUsecs)
	case c.IRQSuspendTimeoutNs > 0 && c.BusyPollUsecs == 0:
		return refuse("irq-suspend-timeout only helps while the application busy-polls: give --busy-poll too")
	case c.BusyPollUsecs > 0 && c.Policy == Dedicated:
		return refuse("busy polling belongs to the inline policy (dedicated keeps softirq off the loop CPUs)")
	case c.Policy == Inline && c.IRQCPUs.Len() > 0:
		return refuse("IRQ CPUs are the dedicated policy's; inline puts IRQs on the loop CPUs (--loop-cpus)")
	}
	for i, name := range c.Interfaces {
		if slices.Contains(c.Interfaces[:i], name) {
			return refuse("interface %q listed twice", name)
		}
	}
	return nil
}

type planner struct {
	h       *topo.Host
	cfg     PlanConfig
	plan    *Plan
	wantRFS bool
}

// MakePlan builds a plan for h. It reads the current value of each file
// it would write (under h.Root) and writes nothing.
func MakePlan(h *topo.Host, cfg PlanConfig) (*Plan, error) {
	if cfg.Policy == "" {
		cfg.Policy = Inline
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.DeferHardIRQs == 0 {
		cfg.DeferHardIRQs = 2
	}
	if cfg.GROFlushTimeoutNs == 0 {
		cfg.GROFlushTimeoutNs = 200000
	}
	if cfg.RFSEntries == 0 {
		cfg.RFSEntries = 32768
	}
	// The kernel rounds rps_sock_flow_entries up to a power of two.
	cfg.RFSEntries = flowCount(cfg.RFSEntries, 1)
	if cfg.Somaxconn == 0 {
		cfg.Somaxconn = 4096
	}
	ifaces := cfg.Interfaces
	if len(ifaces) == 0 {
		ifaces = h.TuningCandidates()
		if len(ifaces) == 0 {
			return nil, refuse("no physical interface with receive queues; name one with --iface")
		}
	}
	var nics []*topo.NIC
	for _, name := range ifaces {
		n := h.NIC(name)
		if n == nil {
			var have []string
			for _, x := range h.NICs {
				have = append(have, x.Name)
			}
			return nil, refuse("unknown interface %q (this host has: %s)", name, strings.Join(have, ", "))
		}
		if len(n.RxQueues) == 0 {
			return nil, refuse("interface %q has no receive queues in sysfs", name)
		}
		nics = append(nics, n)
	}
	for _, set := range []struct {
		name string
		s    topo.CPUSet
	}{{"loop", cfg.LoopCPUs}, {"irq", cfg.IRQCPUs}} {
		if bad := set.s.Minus(h.Online); bad.Len() > 0 {
			return nil, refuse("%s CPUs %s are not online on this machine (online: %s)", set.name, bad, h.Online)
		}
	}
	if err := checkExcluded(cfg.ExcludeIRQs, nics); err != nil {
		return nil, err
	}
	p := &planner{h: h, cfg: cfg, plan: &Plan{Policy: cfg.Policy, Interfaces: ifaces, Created: time.Now().UTC()}}
	if err := p.cpuSets(nics); err != nil {
		return nil, err
	}
	if p.plan.IRQCPUs.Intersect(h.IsolatedManagedIRQ).Len() > 0 {
		p.note("isolcpus has managed_irq on CPUs %s: it keeps only managed interrupts (the ones the kernel spreads itself, as NVMe's) off them, and the kernel refuses an affinity write to a managed interrupt on any CPU (EPERM, EIO before Linux 6.12; its affinity files are read-only, and the plan leaves such an interrupt out); other interrupts are written as planned", h.IsolatedManagedIRQ)
	}
	if h.IrqbalancePID != 0 {
		p.note("irqbalance is running (pid %d): it will rewrite the IRQ affinities below within seconds; stop it or ban these IRQs before applying", h.IrqbalancePID)
	}
	for _, n := range nics {
		if err := p.nic(n); err != nil {
			return nil, err
		}
	}
	if err := p.sysctls(); err != nil {
		return nil, err
	}
	if len(p.plan.Writes) == 0 {
		p.note("nothing to change: the host already matches the %s policy", cfg.Policy)
	}
	return p.plan, nil
}

// checkExcluded refuses an excluded IRQ that none of nics has: it would
// exclude nothing, and the IRQ it was meant to name (a mistyped number,
// or one of another interface) would be planned without a word.
func checkExcluded(excluded []int, nics []*topo.NIC) error {
	var names []string
	for _, n := range nics {
		names = append(names, n.Name)
	}
	for _, irq := range excluded {
		has := func(n *topo.NIC) bool {
			return slices.ContainsFunc(n.IRQs, func(q topo.NICIRQ) bool { return q.IRQ == irq }) ||
				slices.ContainsFunc(n.RxQueues, func(q topo.RxQueue) bool { return q.IRQ == irq }) ||
				slices.ContainsFunc(n.TxQueues, func(q topo.TxQueue) bool { return q.IRQ == irq })
		}
		if !slices.ContainsFunc(nics, has) {
			return refuse("excluded IRQ %d is not an interrupt of %s (see /proc/interrupts)", irq, strings.Join(names, ", "))
		}
	}
	return nil
}

func (p *planner) note(format string, args ...any) {
	p.plan.Notes = append(p.plan.Notes, fmt.Sprintf(format, args...))
}

func (p *planner) cpuSets(nics []*topo.NIC) error {
	h, cfg := p.h, p.cfg
	local := topo.CPUSet{}
	for _, n := range nics {
		l := n.LocalCPUs.Intersect(h.Online)
		if l.Len() == 0 {
			l = h.Online
		}
		local = local.Union(l)
	}
	primaries := h.PrimaryThreads(local)
	if h.HasSMT() {
		p.note("SMT: default CPU sets use one thread per core (%s); the sibling threads stay free", primaries)
	}
	switch cfg.Policy {
	case Inline:
		loops := cfg.LoopCPUs
		if loops.Len() == 0 {
			loops = primaries
			if iso := IsolatedCPUs(h).Intersect(primaries); iso.Len() > 0 {
				loops = iso
			}
		}
		p.plan.LoopCPUs, p.plan.IRQCPUs = loops, loops
	case Dedicated:
		irq := cfg.IRQCPUs
		if irq.Len() == 0 {
			if primaries.Len() < 2 {
				return refuse("the dedicated policy needs at least 2 CPUs (have %s)", primaries)
			}
			// One housekeeping CPU per 8 cores, at least one, of each
			// NIC's own local CPUs (its NUMA node), so that no NIC's
			// interrupts default to another node; of all of them for a
			// NIC local to every CPU (or to fewer than 2). Loop CPUs
			// given, and their SMT siblings, are not taken.
			taken := withSiblings(h, cfg.LoopCPUs)
			pick := func(from topo.CPUSet) topo.CPUSet {
				free := from.Minus(taken)
				house := free.Minus(IsolatedCPUs(h))
				if house.Len() == 0 {
					house = free
				}
				return house[:min(max(1, from.Len()/8), house.Len())]
			}
			for _, n := range nics {
				l := primaries.Intersect(n.LocalCPUs)
				if l.Len() < 2 {
					l = primaries
				}
				irq = irq.Union(pick(l))
			}
			if irq.Len() == 0 {
				return refuse("no CPUs left for IRQs beside loop CPUs %s; give --irq-cpus", cfg.LoopCPUs)
			}
		}
		loops := cfg.LoopCPUs
		if loops.Len() == 0 {
			loops = primaries.Minus(withSiblings(h, irq))
		}
		if both := loops.Intersect(irq); both.Len() > 0 {
			return refuse("CPUs %s are both loop and IRQ CPUs; the dedicated policy keeps them apart", both)
		}
		if loops.Len() == 0 {
			return refuse("no CPUs left for loops after IRQ CPUs %s", irq)
		}
		p.plan.LoopCPUs, p.plan.IRQCPUs = loops, irq
		if iso := irq.Intersect(IsolatedCPUs(h)); iso.Len() > 0 {
			why := "given (--irq-cpus)"
			if cfg.IRQCPUs.Len() == 0 {
				why = fmt.Sprintf("no housekeeping core is left beside loop CPUs %s and their SMT siblings", cfg.LoopCPUs)
			}
			p.note("IRQ CPUs %s are isolated (%s), %s: the queue interrupts and their softirq processing run there, taking time from what is isolated there (neither a partition nor isolcpus=domain keeps interrupts off its CPUs); give housekeeping CPUs with --irq-cpus, or leave one free of loops", iso, IsolationKind(h, iso), why)
		}
	}
	if s := partitionNote(h, p.plan.LoopCPUs); s != "" {
		p.note("%s", s)
	}
	return nil
}

// readRaw reads a file under the host root; a missing file is ("", false).
func (p *planner) readRaw(path string) (string, bool, error) {
	b, err := os.ReadFile(filepath.Join(p.h.Root, path))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// file adds a file write unless the file already holds the value.
func (p *planner) file(path, format, value, reason string) error {
	old, ok, err := p.readRaw(path)
	if err != nil {
		return err
	}
	if !ok {
		p.note("%s does not exist here; not planned (%s)", path, reason)
		return nil
	}
	if equalValues(format, old, value) {
		return nil
	}
	for _, w := range p.plan.Writes {
		if w.Kind == KindFile && w.Path == path {
			if w.New != value {
				p.note("%s: already planned as %q; %q not planned (%s)", path, w.New, value, reason)
			}
			return nil
		}
	}
	p.plan.Writes = append(p.plan.Writes, Write{Kind: KindFile, Path: path, Format: format, Old: old, New: value, Reason: reason})
	return nil
}

// equalValues reports whether two values are equal in a format; raw file
// contents may carry white space and padding. A CPU-set value that does
// not parse equals nothing.
func equalValues(format, a, b string) bool {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	x, ok, err := parseCPUs(format, a)
	if !ok {
		return a == b
	}
	y, _, err2 := parseCPUs(format, b)
	return err == nil && err2 == nil && x.Equal(y)
}

// parseCPUs parses s as a value of a CPU-set format (FormatCPUList,
// FormatMask); ok is false for the other formats.
func parseCPUs(format, s string) (set topo.CPUSet, ok bool, err error) {
	switch format {
	case FormatCPUList:
		set, err = topo.ParseCPUList(s)
	case FormatMask:
		set, err = topo.ParseCPUMask(s)
	default:
		return nil, false, nil
	}
	return set, true, err
}

// flowCount is rps_flow_cnt for one of nq queues sharing entries RFS flow
// entries: entries/nq rounded up to a power of two, as the kernel rounds
// what is written (store_rps_dev_flow_table_cnt), so that the value reads
// back as planned.
func flowCount(entries, nq int) int {
	n := 1
	for n < entries/nq {
		n <<= 1
	}
	return n
}

func (p *planner) excluded(irq int) bool { return slices.Contains(p.cfg.ExcludeIRQs, irq) }

// groups splits cpus, in the order given, over n queues: queue i gets
// cpus[j] for j%n == i, as a set.
func groups(cpus []int, n int) []topo.CPUSet {
	out := make([]topo.CPUSet, n)
	for i := range out {
		var g []int
		for j := i; j < len(cpus); j += n {
			g = append(g, cpus[j])
		}
		out[i] = topo.NewCPUSet(g...)
	}
	return out
}

// irq plans n's interrupt irq onto cpu.
func (p *planner) irq(n *topo.NIC, irq int, cpu int, reason string) error {
	if irq < 0 {
		return nil
	}
	if p.excluded(irq) {
		p.note("IRQ %d is excluded; not planned (%s)", irq, reason)
		return nil
	}
	path := fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq)
	// The kernel makes the affinity files of an interrupt user space may
	// not move read-only (register_irq_proc, Linux 6.12+), and refuses a
	// write to them even from root (write_irq_affinity: EPERM; EIO
	// before 6.12), so apply would fail on it and roll back.
	if fi, err := os.Stat(filepath.Join(p.h.Root, path)); err == nil && fi.Mode().Perm()&0o222 == 0 {
		p.note("IRQ %d: %s is read-only: the kernel lets no one set this interrupt's affinity (a managed interrupt, which it spreads over the CPUs itself, or one its chip cannot move; a write fails with EPERM); not planned (%s)", irq, path, reason)
		return nil
	}
	if err := p.file(path, FormatCPUList, strconv.Itoa(cpu), reason); err != nil {
		return err
	}
	q := slices.IndexFunc(n.IRQs, func(q topo.NICIRQ) bool { return q.IRQ == irq })
	w := slices.IndexFunc(p.plan.Writes, func(w Write) bool { return w.Path == path })
	if q >= 0 && w >= 0 && validIRQName(n.IRQs[q].Name) {
		p.plan.Writes[w].IRQName = n.IRQs[q].Name
		// A handler named after the interface is named after its new
		// name once the interface is renamed (sameIRQ).
		if n.Ifindex > 0 && strings.Contains(n.IRQs[q].Name, n.Name) {
			p.plan.Writes[w].Iface, p.plan.Writes[w].Ifindex = n.Name, n.Ifindex
		}
	}
	return nil
}

// validIRQName reports whether name is one handler's name that the kernel
// shows as the directory /proc/irq/N/<name> (register_handler_proc): not
// several handlers of a shared IRQ (joined by ", " in /proc/interrupts),
// no '/', and shorter than MAX_NAMELEN (128), beyond which it is cut.
func validIRQName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, ", ") && !strings.Contains(name, "/") && len(name) < 128
}

func (p *planner) nic(n *topo.NIC) error {
	if err := p.nicWrites(n); err != nil {
		return err
	}
	// The files of the interface are its by ifindex (ifaceName).
	for i, w := range p.plan.Writes {
		if w.Kind == KindFile && n.Ifindex > 0 && strings.HasPrefix(w.Path, "/sys/class/net/"+n.Name+"/") {
			p.plan.Writes[i].Iface, p.plan.Writes[i].Ifindex = n.Name, n.Ifindex
		}
	}
	return nil
}

// nicWrites plans n's IRQs, RPS, RFS, XPS and busy-polling settings.
func (p *planner) nicWrites(n *topo.NIC) error {
	cfg, plan := p.cfg, p.plan
	nq := len(n.RxQueues)
	qbase := "/sys/class/net/" + n.Name + "/queues/"
	// A NIC's queue interrupts go to the plan's CPUs on its own NUMA node:
	// with two NICs on two nodes the plan's CPUs span both, and queue i
	// of every NIC went to the i-th of them, the other node's for one NIC.
	irqCPUs := plan.IRQCPUs
	if local := irqCPUs.Intersect(n.LocalCPUs); local.Len() > 0 && local.Len() < irqCPUs.Len() {
		p.note("%s (NUMA node %d): queue interrupts on its local CPUs %s only, of %s", n.Name, n.NUMANode, local, irqCPUs)
		irqCPUs = local
	} else if local.Len() == 0 && n.LocalCPUs.Len() > 0 && n.LocalCPUs.Len() < p.h.Online.Len() {
		p.note("%s is local to CPUs %s, none of %s: its queue interrupts go to another NUMA node; choose CPUs on its node (--loop-cpus, --irq-cpus)", n.Name, n.LocalCPUs, irqCPUs)
	}
	if nq > irqCPUs.Len() {
		if cfg.Policy == Inline {
			p.note("%s has %d receive queues for %d loop CPUs: queues share CPUs round-robin; consider `ethtool -L %s combined %d` so that each loop owns one queue", n.Name, nq, irqCPUs.Len(), n.Name, irqCPUs.Len())
		} else {
			p.note("%s has %d receive queues for %d IRQ CPUs: each IRQ CPU serves several queues; give more with --irq-cpus if they saturate (watch `spindle tune diagnose`)", n.Name, nq, irqCPUs.Len())
		}
	}
	// Queue interrupts, index by index: rx-i's on the i-th CPU, then
	// tx-i's when it has one of its own (not a receive queue's) on the
	// same CPU, the CPU of rx-i or, with no rx-i (separate rx and tx
	// channels, more of them tx), the one its index maps to, so that the
	// dedicated policy keeps it off the loops too.
	last := -1
	for _, q := range n.RxQueues {
		last = max(last, q.Index)
	}
	for _, t := range n.TxQueues {
		last = max(last, t.Index)
	}
	known := 0
	for i := 0; i <= last; i++ {
		cpu := queueCPU(irqCPUs, i)
		rx := slices.IndexFunc(n.RxQueues, func(q topo.RxQueue) bool { return q.Index == i })
		if rx >= 0 {
			q := n.RxQueues[rx]
			if q.IRQ >= 0 {
				known++
			}
			why := fmt.Sprintf("%s rx-%d interrupt and its softirq on CPU %d", n.Name, q.Index, cpu)
			if cfg.Policy == Inline {
				why += ", the loop that serves the queue"
			} else {
				why += ", a dedicated softirq CPU"
			}
			if err := p.irq(n, q.IRQ, cpu, why); err != nil {
				return err
			}
		}
		tx := slices.IndexFunc(n.TxQueues, func(t topo.TxQueue) bool { return t.Index == i })
		if tx < 0 {
			continue
		}
		t := n.TxQueues[tx]
		if t.IRQ < 0 || slices.ContainsFunc(n.RxQueues, func(q topo.RxQueue) bool { return q.IRQ == t.IRQ }) {
			continue
		}
		why := fmt.Sprintf("%s tx-%d completions on the CPU of rx-%d", n.Name, t.Index, t.Index)
		if rx < 0 {
			why = fmt.Sprintf("%s tx-%d completions on CPU %d (no rx-%d to pair with)", n.Name, t.Index, cpu, t.Index)
			if cfg.Policy == Dedicated {
				why += ", a dedicated softirq CPU"
			}
		}
		if err := p.irq(n, t.IRQ, cpu, why); err != nil {
			return err
		}
	}
	if known == 0 {
		p.note("%s: no queue IRQs found (virtual device or unknown IRQ names); only RPS/XPS are planned", n.Name)
	}
	p.threadedNote(n, irqCPUs)

	// RPS / RFS. The kernel (store_rps_map, Linux 5.10+) takes isolated
	// (isolcpus domain) and nohz_full CPUs out of an RPS map and refuses
	// a map left empty: a plan that spread RPS over them would read back
	// different or fail, and apply would roll back. RPS goes only to
	// housekeeping CPUs among irqCPUs. The kernel strips what its
	// housekeeping domain mask leaves out, which sysfs "isolated"
	// (IsolatedDomain) shows: on kernels whose mask does not follow cpuset
	// partitions, partition CPUs take RPS and are not taken out here.
	rpsCPUs := irqCPUs.Minus(p.h.IsolatedDomain).Minus(p.h.NohzFull)
	useRPS := nq < irqCPUs.Len()
	if useRPS && nq >= rpsCPUs.Len() {
		p.note("%s: no RPS (fewer queues than CPUs, but only %s of %s may take RPS: the kernel keeps RPS off isolated and nohz_full CPUs); each queue's protocol processing stays on its interrupt's CPU", n.Name, orNone(rpsCPUs.String()), irqCPUs)
		useRPS = false
	} else if useRPS && rpsCPUs.Len() < irqCPUs.Len() {
		p.note("%s: RPS over %s only: the kernel keeps RPS off isolated and nohz_full CPUs %s", n.Name, rpsCPUs, irqCPUs.Minus(rpsCPUs))
	}
	rpsGroups := groups(rpsCPUs, max(nq, 1))
	for i, q := range n.RxQueues {
		dir := fmt.Sprintf("%srx-%d/", qbase, q.Index)
		switch {
		case useRPS && cfg.Policy == Inline:
			p.wantRFS = true
			if err := p.file(dir+"rps_cpus", FormatMask, rpsGroups[i].Mask(),
				fmt.Sprintf("RPS: spread %s rx-%d protocol processing over loop CPUs %s (fewer queues than loops)", n.Name, q.Index, rpsGroups[i])); err != nil {
				return err
			}
			if err := p.file(dir+"rps_flow_cnt", FormatInt, strconv.Itoa(flowCount(cfg.RFSEntries, nq)),
				fmt.Sprintf("RFS: steer each flow of rx-%d to the CPU of the loop reading it", q.Index)); err != nil {
				return err
			}
		case useRPS && cfg.Policy == Dedicated:
			if err := p.file(dir+"rps_cpus", FormatMask, rpsGroups[i].Mask(),
				fmt.Sprintf("RPS: keep %s rx-%d protocol processing on softirq CPUs %s", n.Name, q.Index, rpsGroups[i])); err != nil {
				return err
			}
			if err := p.file(dir+"rps_flow_cnt", FormatInt, "0", "RFS off: it would pull processing onto the loop CPUs"); err != nil {
				return err
			}
		default:
			why := fmt.Sprintf("RPS off on %s rx-%d: its interrupt already runs on a loop CPU, RPS would only add IPIs", n.Name, q.Index)
			if cfg.Policy == Dedicated {
				why = fmt.Sprintf("RPS off on %s rx-%d: its softirq stays on its IRQ CPU, off the loops", n.Name, q.Index)
			}
			if err := p.file(dir+"rps_cpus", FormatMask, "0", why); err != nil {
				return err
			}
			// Without an RPS map the kernel still applies RFS when the
			// queue has a flow table (get_rps_cpu), moving each flow's
			// processing to the CPU that last read it.
			if err := p.file(dir+"rps_flow_cnt", FormatInt, "0",
				fmt.Sprintf("RFS off on %s rx-%d: even without RPS it would move protocol processing to the CPU that reads the flow", n.Name, q.Index)); err != nil {
				return err
			}
		}
	}
	// XPS: transmit from a loop on the queue paired with its CPU.
	var xpsTx []topo.TxQueue
	for _, t := range n.TxQueues {
		if t.HasXPS {
			xpsTx = append(xpsTx, t)
		}
	}
	if len(xpsTx) == 0 && len(n.TxQueues) > 0 {
		p.note("%s has no xps_cpus it can read (one transmit queue, whose map the kernel refuses; or no CONFIG_XPS): no XPS is planned", n.Name)
	}
	if len(xpsTx) > 0 {
		// The loops that take this NIC's queue interrupts first, in
		// their order, so that the loop on the CPU of queue i's
		// interrupt transmits on tx-i and its completions come back to
		// it (irqCPUs is the NIC's own node's share of the loops when
		// they span nodes; the dedicated policy's loops take none).
		order := append(plan.LoopCPUs.Intersect(irqCPUs), plan.LoopCPUs.Minus(irqCPUs)...)
		xg := groups(order, min(len(xpsTx), plan.LoopCPUs.Len()))
		for i, t := range xpsTx {
			if i >= len(xg) {
				// More transmit queues than loops: the rest keep their
				// maps, minus the loop CPUs, so that each loop transmits
				// on one queue only. A map may hold CPUs gone offline
				// since it was written (the kernel maps online CPUs
				// only, and unmaps none going offline): no write can
				// keep them, nor could revert put them back.
				loops := t.XPS.Intersect(plan.LoopCPUs)
				if off := t.XPS.Minus(p.h.Online); loops.Len() > 0 && off.Len() > 0 {
					p.note("%s tx-%d: its XPS map %s holds offline CPUs %s, which a write cannot keep nor revert put back: loop CPUs %s stay on it", n.Name, t.Index, t.XPS, off, loops)
					continue
				}
				if rest := t.XPS.Minus(plan.LoopCPUs); !rest.Equal(t.XPS) {
					if err := p.file(fmt.Sprintf("%stx-%d/xps_cpus", qbase, t.Index), FormatMask, rest.Mask(),
						fmt.Sprintf("XPS: take loop CPUs %s off %s tx-%d; each loop transmits on its own queue", t.XPS.Intersect(plan.LoopCPUs), n.Name, t.Index)); err != nil {
						return err
					}
				}
				continue
			}
			if err := p.file(fmt.Sprintf("%stx-%d/xps_cpus", qbase, t.Index), FormatMask, xg[i].Mask(),
				fmt.Sprintf("XPS: loops on CPUs %s transmit on %s tx-%d", xg[i], n.Name, t.Index)); err != nil {
				return err
			}
		}
	}
	// Busy polling (inline).
	if cfg.BusyPollUsecs > 0 {
		base := "/sys/class/net/" + n.Name + "/"
		// Writing a device's napi_defer_hard_irqs or gro_flush_timeout
		// sets every NAPI instance of the device too (Linux 6.13+), and
		// so does writing the old value back on revert: an instance with
		// a value of its own (napi-set) would lose it. Such instances get
		// a write of their own, before the device's, which revert (in
		// reverse order) then restores after the device's. Before 6.13
		// an instance has no settings of its own (netlink reports none,
		// read as 0) and no napi-set to write them: nothing to save. A
		// kernel release not known saves them, as on 6.13.
		perNAPI := p.h.Kernel == "" || kver.AtLeast(p.h.Kernel, "6.13")
		for _, d := range []struct {
			param     string
			dev, want int64
		}{
			{"defer-hard-irqs", n.DeviceDeferHardIRQs, int64(cfg.DeferHardIRQs)},
			{"gro-flush-timeout", n.DeviceGROFlushTimeout, int64(cfg.GROFlushTimeoutNs)},
		} {
			if !perNAPI || d.dev < 0 || d.dev == d.want {
				continue // no device write planned, or none that sets a NAPI
			}
			for _, napi := range n.NAPIs {
				v, err := napi.NAPIValue(d.param)
				if err != nil || v == uint64(d.dev) {
					continue
				}
				plan.Writes = append(plan.Writes, Write{Kind: KindNAPI, Iface: n.Name, Ifindex: n.Ifindex, NAPIID: napi.ID, Param: d.param,
					Format: FormatInt, Old: strconv.FormatUint(v, 10), New: strconv.FormatInt(d.want, 10),
					Reason: fmt.Sprintf("this NAPI has a %s of its own (%d, the device's is %d): the device-wide write below sets every NAPI, and so would its revert; saved here so that revert restores it", d.param, v, d.dev)})
			}
		}
		if err := p.file(base+"napi_defer_hard_irqs", FormatInt, strconv.Itoa(cfg.DeferHardIRQs),
			"keep the device IRQ masked for this many empty polls so busy polling, not interrupts, drives receive"); err != nil {
			return err
		}
		if err := p.file(base+"gro_flush_timeout", FormatInt, strconv.Itoa(cfg.GROFlushTimeoutNs),
			"the safety timer that re-enables the IRQ when the application stops polling (ns)"); err != nil {
			return err
		}
		if cfg.IRQSuspendTimeoutNs > 0 {
			if len(n.NAPIs) == 0 {
				why := n.NAPIErr
				if why == "" {
					why = "no NAPI instances reported (device without NAPI, or GRO off on a veth)"
				}
				p.note("%s irq-suspend-timeout not changed: %s", n.Name, why)
			}
			for _, napi := range n.NAPIs {
				if napi.IRQSuspendTimeout == cfg.IRQSuspendTimeoutNs {
					continue
				}
				plan.Writes = append(plan.Writes, Write{Kind: KindNAPI, Iface: n.Name, Ifindex: n.Ifindex, NAPIID: napi.ID, Param: "irq-suspend-timeout",
					Format: FormatInt, Old: strconv.FormatUint(napi.IRQSuspendTimeout, 10), New: strconv.FormatUint(cfg.IRQSuspendTimeoutNs, 10),
					Reason: "keep the device IRQ suspended while the loop busy-polls this NAPI (prefer_busy_poll), up to this many ns"})
			}
		}
		switch {
		case n.Coalesce == nil:
			why := n.CoalesceErr
			if why == "" {
				why = "netlink not available"
			}
			p.note("%s coalescing not changed: %s", n.Name, why)
		case n.Coalesce["adaptive-rx"] == 1:
			plan.Writes = append(plan.Writes, Write{Kind: KindCoalesce, Iface: n.Name, Ifindex: n.Ifindex, Param: "adaptive-rx",
				Format: FormatInt, Old: "1", New: "0", Reason: "adaptive moderation delays interrupts exactly when busy polling keeps the queue short"})
		}
	}
	return nil
}

// threadedNote says when n's NAPI instances are polled by kernel threads
// (threaded NAPI: sysfs threaded, or netlink per instance): the interrupt
// only wakes the thread, which polls wherever the scheduler runs it, so
// the receive processing a policy places on the interrupt's CPU does not
// go there. It says where to pin each thread: on its queue's CPU of
// irqCPUs, as the queue's interrupt (nicWrites), with taskset for those
// whose pid netlink gives.
//
// A NAPI thread is an unbound kthread (kthread_run in
// napi_kthread_create, not PF_NO_SETAFFINITY), so sched_setaffinity
// takes it; but it runs in the root cgroup, and for a task there the
// kernel's cpuset_cpus_allowed (Linux 6.18) is every CPU less those of
// valid cpuset partitions (subpartitions_cpus, root and isolated alike):
// __sched_setaffinity masks the request with it, and a pin onto
// partition CPUs only comes to nothing, EINVAL. A partition made later
// moves a thread pinned there off (cpuset_update_tasks_cpumask of the
// top cpuset skips PF_NO_SETAFFINITY tasks only). The thread may be
// moved into the partition's cgroup (cgroup_procs_write_start refuses
// PF_NO_SETAFFINITY tasks only), and pinned there then.
func (p *planner) threadedNote(n *topo.NIC, irqCPUs topo.CPUSet) {
	threaded := n.DeviceThreaded > 0
	var pins []string
	targets := topo.CPUSet{}
	for _, napi := range n.NAPIs {
		if napi.Threaded == 0 && napi.PID <= 0 {
			continue
		}
		threaded = true
		cpu, queue := napiQueueCPU(n, napi, irqCPUs)
		if napi.PID <= 0 || cpu < 0 {
			continue
		}
		pins = append(pins, fmt.Sprintf("taskset -pc %d %d (NAPI %d, %s)", cpu, napi.PID, napi.ID, queue))
		targets = targets.Union(topo.NewCPUSet(cpu))
	}
	if !threaded {
		return
	}
	pin := fmt.Sprintf("pin each thread (`pgrep -a napi/%s-`, named by NAPI id) to its queue's CPU (rx-i's is that of its interrupt below)", n.Name)
	if len(pins) > 0 {
		pin = "pin each thread to its queue's CPU: " + strings.Join(pins, "; ")
	} else if irqCPUs.Len() > 0 {
		for _, q := range n.RxQueues {
			targets = targets.Union(topo.NewCPUSet(queueCPU(irqCPUs, q.Index)))
		}
	}
	s := fmt.Sprintf("%s has threaded NAPI: its napi/%s-* kernel threads poll its queues wherever the scheduler runs them, not on each queue interrupt's CPU, so the receive processing placed below does not go there; %s", n.Name, n.Name, pin)
	if cage := p.kthreadCage(targets); cage != "" {
		s += "; " + cage
	}
	s += fmt.Sprintf(". Or turn threaded mode off first (echo 0 > /sys/class/net/%s/threaded). A thread made anew (threaded mode turned off and on, or the NAPI added again, as a veth's at down and up) starts unpinned, in the root cgroup", n.Name)
	p.note("%s", s)
}

// queueCPU is the CPU of irqCPUs that nicWrites gives the interrupts of
// queue index i (rx-i's, and tx-i's where it has one of its own): round
// robin over irqCPUs, which is not empty.
func queueCPU(irqCPUs topo.CPUSet, i int) int { return irqCPUs[i%irqCPUs.Len()] }

// napiQueueCPU returns the CPU of irqCPUs that nicWrites gives the
// interrupt of napi's queue, and the queue ("rx-2"): the receive queue
// netlink names it for, else the one with its interrupt, else such a
// transmit queue; -1 where none is known.
func napiQueueCPU(n *topo.NIC, napi topo.NAPI, irqCPUs topo.CPUSet) (int, string) {
	if irqCPUs.Len() == 0 {
		return -1, ""
	}
	for _, match := range []func(id uint32, irq int) bool{
		func(id uint32, _ int) bool { return napi.ID != 0 && id == napi.ID },
		func(_ uint32, irq int) bool { return napi.IRQ >= 0 && irq == napi.IRQ },
	} {
		for _, q := range n.RxQueues {
			if match(q.NAPIID, q.IRQ) {
				return queueCPU(irqCPUs, q.Index), fmt.Sprintf("rx-%d", q.Index)
			}
		}
		for _, q := range n.TxQueues {
			if match(q.NAPIID, q.IRQ) {
				return queueCPU(irqCPUs, q.Index), fmt.Sprintf("tx-%d", q.Index)
			}
		}
	}
	return -1, ""
}

// kthreadCage says, for CPUs a kernel thread of the root cgroup is to be
// pinned to, those of cpuset partitions, which the kernel refuses it
// (threadedNote), and what works: moving it into the partition's cgroup
// first. "" where none of cpus is a partition's.
func (p *planner) kthreadCage(cpus topo.CPUSet) string {
	h := p.h
	var parts, moves []string
	named := topo.CPUSet{}
	for _, o := range partitionShares(h, cpus) {
		if o.p == nil {
			continue
		}
		named = named.Union(o.cpus)
		parts = append(parts, fmt.Sprintf("%s are those of %s", o.cpus, partitionName(h, o.p)))
		moves = append(moves, fmt.Sprintf("echo PID > %s", cgroupFile(h, o.p.Cgroup, "cgroup.procs")))
	}
	if rest := cpus.Intersect(h.IsolatedPartition).Minus(named); rest.Len() > 0 {
		parts = append(parts, fmt.Sprintf("%s are in an isolated cpuset partition", rest))
		moves = append(moves, "echo PID > its cgroup's cgroup.procs")
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("but CPUs %s: a kernel thread runs in the root cgroup, whose tasks the kernel keeps off every cpuset partition's CPUs, so taskset there fails (EINVAL), and a partition made later moves a thread pinned there off; move each such thread into the partition's cgroup first (%s), then pin it",
		strings.Join(parts, ", "), strings.Join(moves, "; "))
}

func (p *planner) sysctls() error {
	cfg := p.cfg
	raise := func(name string, want int, reason string) error {
		path := topo.SysctlPath(name)
		old, ok, err := p.readRaw(path)
		if err != nil {
			return err
		}
		if !ok {
			p.note("sysctl %s does not exist in this network namespace; not planned (%s)", name, reason)
			return nil
		}
		cur, err := strconv.Atoi(strings.TrimSpace(old))
		if err != nil || cur >= want {
			return nil
		}
		return p.file(path, FormatInt, strconv.Itoa(want), reason)
	}
	if cfg.Somaxconn > 0 {
		if err := raise("net.core.somaxconn", cfg.Somaxconn, "listen backlog for accept bursts on the proxy and bench servers"); err != nil {
			return err
		}
		if err := raise("net.ipv4.tcp_max_syn_backlog", cfg.Somaxconn, "half-open connections a listener keeps before it drops SYNs or falls back to syncookies"); err != nil {
			return err
		}
	}
	if p.wantRFS {
		if err := raise("net.core.rps_sock_flow_entries", cfg.RFSEntries, "RFS global flow table, needed for rps_flow_cnt to take effect"); err != nil {
			return err
		}
	}
	if cfg.BusyPollUsecs > 0 {
		for _, name := range []string{"net.core.busy_poll", "net.core.busy_read"} {
			path := topo.SysctlPath(name)
			if _, ok, err := p.readRaw(path); err != nil {
				return err
			} else if !ok {
				p.note("sysctl %s does not exist in this network namespace (it is init-namespace only); not planned", name)
				continue
			}
			if err := p.file(path, FormatInt, strconv.Itoa(cfg.BusyPollUsecs),
				fmt.Sprintf("busy-poll %d µs for sockets that do not ask for it themselves (epoll, blocking reads)", cfg.BusyPollUsecs)); err != nil {
				return err
			}
		}
	}
	return nil
}

// withSiblings returns s with the SMT siblings of its CPUs (those h knows).
func withSiblings(h *topo.Host, s topo.CPUSet) topo.CPUSet {
	out := s
	for _, c := range s {
		if cpu := h.CPU(c); cpu != nil {
			out = out.Union(cpu.Siblings)
		}
	}
	return out
}
