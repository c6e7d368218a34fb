package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/topo"
)

func writeTo(p *Plan, target string) *Write {
	for i := range p.Writes {
		if p.Writes[i].Target() == target {
			return &p.Writes[i]
		}
	}
	return nil
}

func targets(p *Plan) []string {
	var out []string
	for _, w := range p.Writes {
		out = append(out, w.Target())
	}
	return out
}

func hasNote(p *Plan, sub string) bool {
	return slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, sub) })
}

func TestMakePlan(t *testing.T) {
	tests := []struct {
		name      string
		root      string
		cfg       PlanConfig
		loops     string
		irqs      string
		nWrites   int
		writes    map[string]string // target -> new value
		unchanged []string          // targets that must not be written
		notes     []string
	}{
		{
			name: "vm inline", root: fxVM, cfg: PlanConfig{},
			loops: "0-1", irqs: "0-1", nWrites: 6,
			writes: map[string]string{
				"/proc/sys/net/ipv4/tcp_max_syn_backlog":       "4096",
				"/proc/irq/38/smp_affinity_list":               "0",
				"/proc/irq/39/smp_affinity_list":               "0",
				"/sys/class/net/eth0/queues/rx-0/rps_cpus":     "3",
				"/sys/class/net/eth0/queues/rx-0/rps_flow_cnt": "32768",
				"/proc/sys/net/core/rps_sock_flow_entries":     "32768",
			},
			unchanged: []string{"/proc/irq/37/smp_affinity_list", "/proc/irq/41/smp_affinity_list"},
			notes:     []string{"no xps_cpus"},
		},
		{
			name: "vm dedicated", root: fxVM, cfg: PlanConfig{Policy: Dedicated},
			loops: "1", irqs: "0", nWrites: 3,
			writes: map[string]string{"/proc/irq/38/smp_affinity_list": "0", "/proc/irq/39/smp_affinity_list": "0"},
		},
		{
			name: "vm inline, IRQ excluded", root: fxVM, cfg: PlanConfig{ExcludeIRQs: []int{39}},
			loops: "0-1", irqs: "0-1", nWrites: 5,
			unchanged: []string{"/proc/irq/39/smp_affinity_list"},
			notes:     []string{"IRQ 39 is excluded"},
		},
		{
			name: "2-socket inline, NIC on node 1, busy polling", root: fx2Socket, cfg: PlanConfig{BusyPollUsecs: 50},
			loops: "12-23", irqs: "12-23", nWrites: 16 + 12 + 2 + 1 + 2,
			writes: map[string]string{
				"/proc/irq/121/smp_affinity_list":             "12",
				"/proc/irq/132/smp_affinity_list":             "23",
				"/proc/irq/133/smp_affinity_list":             "12",
				"/sys/class/net/ens1f0/queues/tx-0/xps_cpus":  "1000",
				"/sys/class/net/ens1f0/queues/tx-11/xps_cpus": "800000",
				"/sys/class/net/ens1f0/napi_defer_hard_irqs":  "2",
				"/sys/class/net/ens1f0/gro_flush_timeout":     "200000",
				"ethtool -C ens1f0 adaptive-rx":               "0",
				"/proc/sys/net/core/busy_poll":                "50",
				"/proc/sys/net/core/busy_read":                "50",
			},
			unchanged: []string{"/proc/irq/120/smp_affinity_list", "/sys/class/net/ens1f0/queues/rx-0/rps_cpus", "/proc/sys/net/core/somaxconn", "/proc/sys/net/ipv4/tcp_max_syn_backlog"},
			notes:     []string{"16 receive queues for 12 loop CPUs", "ethtool -L ens1f0 combined 12"},
		},
		{
			name: "vm inline with busy polling and IRQ suspension", root: fxVM, cfg: PlanConfig{BusyPollUsecs: 50, IRQSuspendTimeoutNs: 20_000_000},
			loops: "0-1", irqs: "0-1",
			writes: map[string]string{
				"netdev napi-set eth0 NAPI 257 irq-suspend-timeout": "20000000",
				"/sys/class/net/eth0/napi_defer_hard_irqs":          "2",
				"/proc/sys/net/core/busy_read":                      "50",
				"ethtool -C eth0 adaptive-rx":                       "",
			},
		},
		{
			name: "2-socket dedicated with chosen sets", root: fx2Socket,
			cfg:   PlanConfig{Policy: Dedicated, IRQCPUs: topo.NewCPUSet(12, 13), LoopCPUs: topo.NewCPUSet(14, 15, 16, 17)},
			loops: "14-17", irqs: "12-13", nWrites: 16 + 4,
			writes: map[string]string{
				"/proc/irq/121/smp_affinity_list":            "12",
				"/proc/irq/122/smp_affinity_list":            "13",
				"/proc/irq/136/smp_affinity_list":            "13",
				"/sys/class/net/ens1f0/queues/tx-0/xps_cpus": "4000",
				"/sys/class/net/ens1f0/queues/tx-3/xps_cpus": "20000",
			},
			unchanged: []string{"/sys/class/net/ens1f0/queues/tx-4/xps_cpus"},
		},
		{
			name: "SMT and isolcpus inline: loops on isolated primary threads", root: fxSMT, cfg: PlanConfig{},
			// 8 IRQs, RPS and RFS off on 8 queues (left on by an earlier
			// setup), 8 XPS maps.
			loops: "2-7", irqs: "2-7", nWrites: 8 + 8 + 8 + 8,
			writes: map[string]string{
				"/proc/irq/61/smp_affinity_list":                      "2",
				"/proc/irq/66/smp_affinity_list":                      "7",
				"/proc/irq/67/smp_affinity_list":                      "2",
				"/proc/sys/net/core/rps_sock_flow_entries":            "",
				"/sys/class/net/enp1s0f0np0/queues/rx-0/rps_cpus":     "0",
				"/sys/class/net/enp1s0f0np0/queues/rx-7/rps_flow_cnt": "0",
				"/sys/class/net/enp1s0f0np0/queues/tx-0/xps_cpus":     "4",
				"/sys/class/net/enp1s0f0np0/queues/tx-5/xps_cpus":     "80",
				"/sys/class/net/enp1s0f0np0/queues/tx-6/xps_cpus":     "0",
				"/sys/class/net/enp1s0f0np0/queues/tx-7/xps_cpus":     "0",
			},
			notes: []string{"irqbalance is running", "SMT", "8 receive queues for 6 loop CPUs", "managed_irq"},
		},
		{
			name: "SMT and isolcpus dedicated: IRQs on a housekeeping core", root: fxSMT, cfg: PlanConfig{Policy: Dedicated},
			// 7 IRQs (61 is on CPU 0 already), RPS and RFS off on 8
			// queues, 8 XPS maps.
			loops: "1-7", irqs: "0", nWrites: 7 + 8 + 8 + 8,
			writes: map[string]string{
				"/proc/irq/61/smp_affinity_list":                      "",
				"/proc/irq/62/smp_affinity_list":                      "0",
				"/proc/irq/68/smp_affinity_list":                      "0",
				"/sys/class/net/enp1s0f0np0/queues/rx-3/rps_cpus":     "0",
				"/sys/class/net/enp1s0f0np0/queues/rx-3/rps_flow_cnt": "0",
				"/sys/class/net/enp1s0f0np0/queues/tx-0/xps_cpus":     "2",
				"/sys/class/net/enp1s0f0np0/queues/tx-7/xps_cpus":     "0",
			},
			notes: []string{"8 receive queues for 1 IRQ CPUs", "--irq-cpus"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := loadHost(t, tt.root)
			p, err := MakePlan(h, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p); err != nil {
				t.Fatalf("plan does not validate: %v", err)
			}
			if p.LoopCPUs.String() != tt.loops || p.IRQCPUs.String() != tt.irqs {
				t.Errorf("loops %s irqs %s, want %s %s", p.LoopCPUs, p.IRQCPUs, tt.loops, tt.irqs)
			}
			if tt.nWrites != 0 && len(p.Writes) != tt.nWrites {
				var got []string
				for _, w := range p.Writes {
					got = append(got, w.Target()+"="+w.New)
				}
				t.Errorf("%d writes, want %d: %v", len(p.Writes), tt.nWrites, got)
			}
			for target, v := range tt.writes {
				w := writeTo(p, target)
				switch {
				case v == "" && w != nil:
					t.Errorf("%s written (%q), want untouched", target, w.New)
				case v != "" && w == nil:
					t.Errorf("%s not written, want %q", target, v)
				case v != "" && w.New != v:
					t.Errorf("%s = %q, want %q", target, w.New, v)
				}
			}
			for _, target := range tt.unchanged {
				if w := writeTo(p, target); w != nil {
					t.Errorf("%s written (%q), want untouched", target, w.New)
				}
			}
			for _, n := range tt.notes {
				if !hasNote(p, n) {
					t.Errorf("missing note %q in %q", n, p.Notes)
				}
			}
			for _, w := range p.Writes {
				if w.Reason == "" {
					t.Errorf("%s has no reason", w.Target())
				}
				if equalValues(w.Format, w.Old, w.New) {
					t.Errorf("%s: no-op write %q -> %q", w.Target(), w.Old, w.New)
				}
			}
		})
	}
}

// TestPlanFlowCountPowerOfTwo: the kernel rounds rps_flow_cnt up to a
// power of two, so a plan that split the flow table evenly over 3 queues
// (10922 each) would read back 16384 and fail to apply. The plan writes
// the rounded value.
func TestPlanFlowCountPowerOfTwo(t *testing.T) {
	h := loadHost(t, fx2Socket)
	n := h.NIC("ens1f0")
	n.RxQueues = n.RxQueues[:3] // as after `ethtool -L ens1f0 combined 3`
	p, err := MakePlan(h, PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < 3; q++ {
		target := fmt.Sprintf("/sys/class/net/ens1f0/queues/rx-%d/rps_flow_cnt", q)
		if w := writeTo(p, target); w == nil || w.New != "16384" {
			t.Errorf("%s: %+v, want 16384 (32768/3 rounded up to a power of two)", target, w)
		}
	}
	if p, err := MakePlan(loadHost(t, fxVM), PlanConfig{RFSEntries: 30000}); err != nil {
		t.Fatal(err)
	} else if w := writeTo(p, "/proc/sys/net/core/rps_sock_flow_entries"); w == nil || w.New != "32768" {
		t.Errorf("rps_sock_flow_entries for 30000 entries: %+v, want 32768", w)
	}
	for _, tt := range []struct{ entries, nq, want int }{{32768, 1, 32768}, {32768, 2, 16384}, {32768, 3, 16384}, {32768, 12, 4096}, {1, 4, 1}} {
		if got := flowCount(tt.entries, tt.nq); got != tt.want {
			t.Errorf("flowCount(%d, %d) = %d, want %d", tt.entries, tt.nq, got, tt.want)
		}
	}
}

func TestMakePlanRefuses(t *testing.T) {
	tests := []struct {
		name string
		root string
		cfg  PlanConfig
		msg  string
	}{
		{"unknown interface", fxVM, PlanConfig{Interfaces: []string{"eth9"}}, `unknown interface "eth9"`},
		{"loop CPU not on the machine", fxVM, PlanConfig{LoopCPUs: topo.NewCPUSet(1, 2)}, "loop CPUs 2 are not online"},
		{"IRQ CPU not on the machine", fx2Socket, PlanConfig{Policy: Dedicated, IRQCPUs: topo.NewCPUSet(64)}, "irq CPUs 64 are not online"},
		{"overlapping dedicated sets", fx2Socket, PlanConfig{Policy: Dedicated, IRQCPUs: topo.NewCPUSet(12), LoopCPUs: topo.NewCPUSet(12, 13)}, "both loop and IRQ"},
		{"dedicated loops on every CPU", fxVM, PlanConfig{Policy: Dedicated, LoopCPUs: topo.NewCPUSet(0, 1)}, "no CPUs left for IRQs"},
		{"busy polling with dedicated", fxVM, PlanConfig{Policy: Dedicated, BusyPollUsecs: 50}, "busy polling belongs"},
		{"unknown policy", fxVM, PlanConfig{Policy: "fast"}, "unknown policy"},
		{"irq suspend without busy polling", fxVM, PlanConfig{IRQSuspendTimeoutNs: 1000}, "busy-polls"},
		{"interface twice", fxVM, PlanConfig{Interfaces: []string{"eth0", "eth0"}}, "listed twice"},
		{"IRQ CPUs with inline", fxVM, PlanConfig{IRQCPUs: topo.NewCPUSet(0)}, "dedicated policy's"},
		// An excluded IRQ no planned interface has excludes nothing: a
		// mistyped number would leave the IRQ meant to be kept planned.
		{"excluded IRQ on no interface", fxVM, PlanConfig{ExcludeIRQs: []int{39, 9999}}, "excluded IRQ 9999 is not an interrupt of eth0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MakePlan(loadHost(t, tt.root), tt.cfg)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want ErrRefused containing %q", err, tt.msg)
			}
		})
	}
}

func TestValidateWrite(t *testing.T) {
	tests := []struct {
		w  Write
		ok bool
	}{
		{Write{Kind: KindFile, Path: "/proc/irq/38/smp_affinity_list", Format: FormatCPUList, New: "0"}, true},
		{Write{Kind: KindFile, Path: "/sys/class/net/eth0/queues/rx-0/rps_cpus", Format: FormatMask, New: "3"}, true},
		{Write{Kind: KindFile, Path: "/etc/passwd", Format: FormatInt, New: "0"}, false},
		{Write{Kind: KindFile, Path: "/sys/../etc/passwd", Format: FormatInt, New: "0"}, false},
		{Write{Kind: KindFile, Path: "sys/class/net/eth0/mtu", Format: FormatInt, New: "0"}, false},
		{Write{Kind: KindFile, Path: "/proc", Format: FormatInt, New: "0"}, false},
		{Write{Kind: KindFile, Path: "/proc/irq/38/smp_affinity_list", Format: FormatCPUList, New: "zero"}, false},
		{Write{Kind: KindFile, Path: "/proc/irq/38/smp_affinity_list", Format: "hex", New: "1"}, false},
		{Write{Kind: KindCoalesce, Iface: "eth0", Ifindex: 4, Param: "adaptive-rx", Format: FormatInt, New: "0"}, true},
		{Write{Kind: KindCoalesce, Iface: "eth0", Ifindex: 4, Param: "turbo", Format: FormatInt, New: "0"}, false},
		{Write{Kind: KindCoalesce, Iface: "eth0", Ifindex: 0, Param: "rx-usecs", Format: FormatInt, New: "0"}, false},
		{Write{Kind: "exec", Path: "/proc/sysrq-trigger", Format: FormatInt, New: "b"}, false},
		// An int value must be a number: "b" to sysrq-trigger reboots.
		{Write{Kind: KindFile, Path: "/proc/sysrq-trigger", Format: FormatInt, New: "b"}, false},
		{Write{Kind: KindFile, Path: "/proc/sys/kernel/core_pattern", Format: FormatInt, New: "|/tmp/x %p"}, false},
		{Write{Kind: KindFile, Path: "/proc/sys/net/core/somaxconn", Format: FormatInt, New: "4096"}, true},
		{Write{Kind: KindFile, Path: "/proc/sys/net/core/somaxconn", Format: FormatInt, New: "4096\n"}, true},
		{Write{Kind: KindFile, Path: "/proc/sys/net/ipv4/tcp_fastopen_blackhole_timeout_sec", Format: FormatInt, New: "-1"}, true},
		{Write{Kind: KindNAPI, Iface: "eth0", NAPIID: 257, Param: "irq-suspend-timeout", Format: FormatInt, New: "20000000"}, true},
		{Write{Kind: KindNAPI, Iface: "eth0", NAPIID: 257, Param: "threaded", Format: FormatInt, New: "1"}, false},
		{Write{Kind: KindNAPI, Iface: "eth0", NAPIID: 0, Param: "gro-flush-timeout", Format: FormatInt, New: "1"}, false},
		// An IRQ handler's name belongs to an IRQ's file and is one
		// /proc/irq/N/<name> directory.
		{Write{Kind: KindFile, Path: "/proc/irq/38/smp_affinity_list", IRQName: "virtio2-input.0", Format: FormatCPUList, New: "0"}, true},
		{Write{Kind: KindFile, Path: "/proc/sys/net/core/somaxconn", IRQName: "virtio2-input.0", Format: FormatInt, New: "4096"}, false},
		{Write{Kind: KindFile, Path: "/proc/irq/38/smp_affinity_list", IRQName: "../../sys", Format: FormatCPUList, New: "0"}, false},
		{Write{Kind: KindFile, Path: "/proc/irq/9/smp_affinity_list", IRQName: "acpi, i801_smbus", Format: FormatCPUList, New: "0"}, false},
	}
	for _, tt := range tests {
		err := ValidateWrite(tt.w)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateWrite(%s %q) = %v, want ok=%v", tt.w.Kind, tt.w.Target(), err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("error %v does not wrap ErrRefused", err)
		}
	}
}

func TestApplyRefusesOfflineCPUs(t *testing.T) {
	root := copyTree(t, fxVM)
	p := &Plan{Writes: []Write{{Kind: KindFile, Path: "/proc/irq/38/smp_affinity_list", Format: FormatCPUList, Old: "0-1\n", New: "7", Reason: "r"}}}
	_, err := Apply(p, Target{Root: root}, t.TempDir()+"/s.json")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "CPUs 7 are not online") {
		t.Fatalf("err = %v", err)
	}
}

// TestPlanRPSOffIsolatedCPUs: the kernel (store_rps_map, 5.10+) strips
// isolated and nohz_full CPUs from an RPS map and refuses one left empty.
// The inline plan spread RPS over the loop CPUs, isolated by default on
// such a host, so apply always failed and rolled back.
func TestPlanRPSOffIsolatedCPUs(t *testing.T) {
	root := copyTree(t, fxSMT)
	q := filepath.Join(root, "sys/class/net/enp1s0f0np0/queues")
	for i := 2; i < 8; i++ {
		if err := os.RemoveAll(filepath.Join(q, fmt.Sprintf("rx-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	h := loadHost(t, root)
	if h.IsolatedDomain.Len() == 0 || len(h.NIC("enp1s0f0np0").RxQueues) != 2 {
		t.Fatalf("fixture: isolated %s, %d queues", h.IsolatedDomain, len(h.NIC("enp1s0f0np0").RxQueues))
	}
	housekeeping := h.Online.Minus(h.IsolatedDomain).Minus(h.NohzFull)
	for _, tc := range []struct {
		name  string
		loops topo.CPUSet
		rps   bool // some queue gets an RPS map
	}{
		{"isolated loops (default)", nil, false},
		{"some housekeeping loops", housekeeping.Union(topo.NewCPUSet(2, 3)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := MakePlan(h, PlanConfig{LoopCPUs: tc.loops})
			if err != nil {
				t.Fatal(err)
			}
			rps := false
			for _, w := range p.Writes {
				if !strings.HasSuffix(w.Path, "/rps_cpus") {
					continue
				}
				set, err := topo.ParseCPUMask(w.New)
				if err != nil {
					t.Fatal(err)
				}
				if bad := set.Intersect(h.IsolatedDomain.Union(h.NohzFull)); bad.Len() > 0 {
					t.Errorf("%s := %s: RPS on isolated/nohz_full CPUs %s (loops %s)", w.Path, w.New, bad, p.LoopCPUs)
				}
				rps = rps || set.Len() > 0
			}
			if rps != tc.rps {
				t.Errorf("RPS planned: %v, want %v: %v", rps, tc.rps, targets(p))
			}
			if !hasNote(p, "keeps RPS off isolated and nohz_full") {
				t.Errorf("no note says why: %q", p.Notes)
			}
		})
	}
}

// TestPlanTwoNICsTwoNodes: each NIC's queue interrupts go to the plan's
// CPUs on its own NUMA node. The plan pinned queue i of every NIC to the
// i-th CPU of the union of the NICs' local CPUs, so the node-1 NIC's
// interrupts went to node 0 (and CPUs 2-3 got none).
func TestPlanTwoNICsTwoNodes(t *testing.T) {
	root := t.TempDir()
	for _, irq := range []int{100, 101, 110, 111} {
		d := filepath.Join(root, "proc/irq", fmt.Sprint(irq))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "smp_affinity_list"), []byte("0-3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpu := func(id, node int) topo.CPU {
		return topo.CPU{ID: id, Core: id, Node: node, Siblings: topo.NewCPUSet(id)}
	}
	h := &topo.Host{Root: root, Online: topo.NewCPUSet(0, 1, 2, 3),
		CPUs:  []topo.CPU{cpu(0, 0), cpu(1, 0), cpu(2, 1), cpu(3, 1)},
		Nodes: []topo.Node{{ID: 0, CPUs: topo.NewCPUSet(0, 1)}, {ID: 1, CPUs: topo.NewCPUSet(2, 3)}},
		NICs: []topo.NIC{
			{Name: "nicA", Ifindex: 2, NUMANode: 0, LocalCPUs: topo.NewCPUSet(0, 1), RxQueues: []topo.RxQueue{{Index: 0, IRQ: 100}, {Index: 1, IRQ: 101}}},
			{Name: "nicB", Ifindex: 3, NUMANode: 1, LocalCPUs: topo.NewCPUSet(2, 3), RxQueues: []topo.RxQueue{{Index: 0, IRQ: 110}, {Index: 1, IRQ: 111}}},
		},
		Sysctls: map[string]string{}}
	for _, pol := range []Policy{Inline, Dedicated} {
		cfg := PlanConfig{Policy: pol, Interfaces: []string{"nicA", "nicB"}}
		if pol == Dedicated {
			cfg.IRQCPUs, cfg.LoopCPUs = topo.NewCPUSet(0, 2), topo.NewCPUSet(1, 3)
		}
		p, err := MakePlan(h, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for irq, node := range map[int]topo.CPUSet{100: h.Nodes[0].CPUs, 101: h.Nodes[0].CPUs, 110: h.Nodes[1].CPUs, 111: h.Nodes[1].CPUs} {
			w := writeTo(p, fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq))
			if w == nil {
				t.Errorf("%s: IRQ %d not planned: %v", pol, irq, targets(p))
				continue
			}
			if c, err := topo.ParseCPUList(w.New); err != nil || c.Minus(node).Len() > 0 {
				t.Errorf("%s: IRQ %d -> CPU %s, off its NIC's node (CPUs %s)", pol, irq, w.New, node)
			}
		}
		if pol == Inline {
			a, b := writeTo(p, "/proc/irq/110/smp_affinity_list"), writeTo(p, "/proc/irq/111/smp_affinity_list")
			if a != nil && b != nil && a.New == b.New {
				t.Errorf("nicB's two queues share CPU %s while CPUs 2-3 are both loops", a.New)
			}
		}
	}
}

// TestPlanDedicatedDefaultIRQCPUsPerNode: the dedicated policy's default
// IRQ CPUs were the first housekeeping CPUs of all the NICs' local CPUs
// together, all on node 0 of a two-node host, so the node-1 NIC's queue
// interrupts went to node 0 (with a note telling the user to choose CPUs
// on its node). Each NIC's node now gets its own.
func TestPlanDedicatedDefaultIRQCPUsPerNode(t *testing.T) {
	root := t.TempDir()
	for _, irq := range []int{100, 101, 110, 111} {
		d := filepath.Join(root, "proc/irq", fmt.Sprint(irq))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "smp_affinity_list"), []byte("0-7\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cpus []topo.CPU
	for id := range 8 {
		cpus = append(cpus, topo.CPU{ID: id, Core: id, Node: id / 4, Siblings: topo.NewCPUSet(id)})
	}
	nodes := []topo.Node{{ID: 0, CPUs: topo.NewCPUSet(0, 1, 2, 3)}, {ID: 1, CPUs: topo.NewCPUSet(4, 5, 6, 7)}}
	h := &topo.Host{Root: root, Online: topo.NewCPUSet(0, 1, 2, 3, 4, 5, 6, 7), CPUs: cpus, Nodes: nodes,
		NICs: []topo.NIC{
			{Name: "nicA", Ifindex: 2, NUMANode: 0, LocalCPUs: nodes[0].CPUs, RxQueues: []topo.RxQueue{{Index: 0, IRQ: 100}, {Index: 1, IRQ: 101}}},
			{Name: "nicB", Ifindex: 3, NUMANode: 1, LocalCPUs: nodes[1].CPUs, RxQueues: []topo.RxQueue{{Index: 0, IRQ: 110}, {Index: 1, IRQ: 111}}},
		},
		Sysctls: map[string]string{}}
	for _, cfg := range []PlanConfig{
		{Policy: Dedicated, Interfaces: []string{"nicA", "nicB"}},
		{Policy: Dedicated, Interfaces: []string{"nicA", "nicB"}, LoopCPUs: topo.NewCPUSet(2, 3, 6, 7)},
	} {
		p, err := MakePlan(h, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if both := p.LoopCPUs.Intersect(p.IRQCPUs); both.Len() > 0 {
			t.Errorf("loops %s: CPUs %s are loop and IRQ CPUs", cfg.LoopCPUs, both)
		}
		for irq, node := range map[int]topo.Node{100: nodes[0], 101: nodes[0], 110: nodes[1], 111: nodes[1]} {
			w := writeTo(p, fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq))
			if w == nil {
				t.Errorf("loops %s: IRQ %d not planned: %v", cfg.LoopCPUs, irq, targets(p))
				continue
			}
			c, err := topo.ParseCPUList(w.New)
			if err != nil || c.Minus(node.CPUs).Len() > 0 {
				t.Errorf("loops %s: IRQ %d -> CPU %s, off its NIC's node %d (IRQ CPUs %s)", cfg.LoopCPUs, irq, w.New, node.ID, p.IRQCPUs)
			}
			if c.Intersect(p.LoopCPUs).Len() > 0 {
				t.Errorf("loops %s: IRQ %d -> CPU %s, a loop CPU (loops %s)", cfg.LoopCPUs, irq, w.New, p.LoopCPUs)
			}
		}
	}
}

// TestPlanDedicatedLoopCPUsGiven: with --loop-cpus and no --irq-cpus, the
// dedicated policy picked its default IRQ CPUs without looking at the loops
// given, and refused its own choice: loops 12-15 on a host whose NIC is
// local to 12-23 gave "CPUs 12 are both loop and IRQ CPUs". The default
// IRQ CPUs are now chosen among the CPUs that are not loops (nor their SMT
// siblings).
func TestPlanDedicatedLoopCPUsGiven(t *testing.T) {
	for _, tt := range []struct {
		root  string
		loops topo.CPUSet
	}{
		{fx2Socket, topo.NewCPUSet(12, 13, 14, 15)},
		{fxVM, topo.NewCPUSet(0)},
		{fxSMT, topo.NewCPUSet(0, 1, 2, 3)},
	} {
		h := loadHost(t, tt.root)
		p, err := MakePlan(h, PlanConfig{Policy: Dedicated, LoopCPUs: tt.loops})
		if err != nil {
			t.Errorf("%s, loops %s: %v", filepath.Base(tt.root), tt.loops, err)
			continue
		}
		if !p.LoopCPUs.Equal(tt.loops) || p.IRQCPUs.Len() == 0 || p.IRQCPUs.Intersect(tt.loops).Len() > 0 {
			t.Errorf("%s: loops %s, IRQ CPUs %s; want loops %s and IRQ CPUs apart", filepath.Base(tt.root), p.LoopCPUs, p.IRQCPUs, tt.loops)
		}
		for _, c := range p.IRQCPUs {
			if sib := h.CPU(c).Siblings.Intersect(tt.loops); sib.Len() > 0 {
				t.Errorf("%s: IRQ CPU %d is an SMT sibling of loops %s", filepath.Base(tt.root), c, sib)
			}
		}
	}
}

// TestPlanSavesPerNAPIValues: a busy-poll plan's device-wide
// napi_defer_hard_irqs and gro_flush_timeout writes set every NAPI of the
// device, and so do their reverts; an instance with a value of its own gets
// a netdev-napi write before the device's, so that revert (reverse order)
// restores it after the device's (TestNetnsRevertKeepsPerNAPISettings on
// the kernel).
func TestPlanSavesPerNAPIValues(t *testing.T) {
	h := loadHost(t, fxVM)
	n := h.NIC("eth0")
	if n == nil || len(n.NAPIs) == 0 || n.DeviceDeferHardIRQs != int64(n.NAPIs[0].DeferHardIRQs) {
		t.Fatalf("the vm fixture's eth0 needs a NAPI instance with the device's values: %+v", n)
	}
	n.NAPIs[0].DeferHardIRQs = uint32(n.DeviceDeferHardIRQs) + 7
	p, err := MakePlan(h, PlanConfig{Interfaces: []string{"eth0"}, BusyPollUsecs: 50})
	if err != nil {
		t.Fatal(err)
	}
	napiAt, devAt := -1, -1
	for i, w := range p.Writes {
		switch {
		case w.Kind == KindNAPI && w.NAPIID == n.NAPIs[0].ID && w.Param == "defer-hard-irqs":
			napiAt = i
			if w.Old != strconv.FormatUint(uint64(n.NAPIs[0].DeferHardIRQs), 10) || w.New != "2" {
				t.Errorf("NAPI write %q -> %q", w.Old, w.New)
			}
		case w.Path == "/sys/class/net/eth0/napi_defer_hard_irqs":
			devAt = i
		case w.Kind == KindNAPI && w.Param == "gro-flush-timeout":
			t.Errorf("gro-flush-timeout written for a NAPI with the device's value: %+v", w)
		}
	}
	if napiAt < 0 || devAt < 0 || napiAt > devAt {
		t.Errorf("NAPI write at %d, device write at %d; want both, the NAPI's first: %v", napiAt, devAt, targets(p))
	}
}

// TestPlanDedicatedDefaultIRQCPUsMixedNICs: a NIC local to every CPU (no
// NUMA information) planned with a node-1 NIC got only the node-1 NIC's
// default IRQ CPU (efb1a23 took its own only from NICs local to part of the
// host), one CPU for both NICs' interrupts where it alone gets two.
func TestPlanDedicatedDefaultIRQCPUsMixedNICs(t *testing.T) {
	root := t.TempDir()
	var cpus []topo.CPU
	var all []int
	for id := range 16 {
		cpus = append(cpus, topo.CPU{ID: id, Core: id, Node: id / 8, Siblings: topo.NewCPUSet(id)})
		all = append(all, id)
	}
	nodes := []topo.Node{{ID: 0, CPUs: topo.NewCPUSet(all[:8]...)}, {ID: 1, CPUs: topo.NewCPUSet(all[8:]...)}}
	h := &topo.Host{Root: root, Online: topo.NewCPUSet(all...), CPUs: cpus, Nodes: nodes,
		NICs: []topo.NIC{
			{Name: "nicA", Ifindex: 2, NUMANode: -1, LocalCPUs: topo.NewCPUSet(all...), RxQueues: []topo.RxQueue{{Index: 0, IRQ: -1}}},
			{Name: "nicB", Ifindex: 3, NUMANode: 1, LocalCPUs: nodes[1].CPUs, RxQueues: []topo.RxQueue{{Index: 0, IRQ: -1}}},
		},
		Sysctls: map[string]string{}}
	alone, err := MakePlan(h, PlanConfig{Policy: Dedicated, Interfaces: []string{"nicA"}})
	if err != nil {
		t.Fatal(err)
	}
	both, err := MakePlan(h, PlanConfig{Policy: Dedicated, Interfaces: []string{"nicA", "nicB"}})
	if err != nil {
		t.Fatal(err)
	}
	if miss := alone.IRQCPUs.Minus(both.IRQCPUs); miss.Len() > 0 {
		t.Errorf("IRQ CPUs %s with nicB, %s for nicA alone: %s missing", both.IRQCPUs, alone.IRQCPUs, miss)
	}
	if both.IRQCPUs.Intersect(nodes[1].CPUs).Len() == 0 {
		t.Errorf("IRQ CPUs %s: none on nicB's node", both.IRQCPUs)
	}
}

// TestPlanTxOnlyQueueIRQs: a NIC with separate transmit interrupts and more
// transmit than receive queues (bnxt_en after `ethtool -L rx 2 tx 4`) had
// only the transmit IRQs paired with a receive queue planned; tx-2's and
// tx-3's stayed on every CPU, loops included, under the dedicated policy
// that keeps interrupts off the loops.
func TestPlanTxOnlyQueueIRQs(t *testing.T) {
	root := t.TempDir()
	irqs := []int{100, 101, 200, 201, 202, 203}
	for _, irq := range irqs {
		d := filepath.Join(root, "proc/irq", fmt.Sprint(irq))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "smp_affinity_list"), []byte("0-3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cpus []topo.CPU
	for id := range 4 {
		cpus = append(cpus, topo.CPU{ID: id, Core: id, Siblings: topo.NewCPUSet(id)})
	}
	h := &topo.Host{Root: root, Online: topo.NewCPUSet(0, 1, 2, 3), CPUs: cpus,
		NICs: []topo.NIC{{Name: "nicA", Ifindex: 2, NUMANode: -1, LocalCPUs: topo.NewCPUSet(0, 1, 2, 3),
			RxQueues: []topo.RxQueue{{Index: 0, IRQ: 100}, {Index: 1, IRQ: 101}},
			TxQueues: []topo.TxQueue{{Index: 0, IRQ: 200}, {Index: 1, IRQ: 201}, {Index: 2, IRQ: 202}, {Index: 3, IRQ: 203}}}},
		Sysctls: map[string]string{}}
	p, err := MakePlan(h, PlanConfig{Policy: Dedicated, IRQCPUs: topo.NewCPUSet(0), LoopCPUs: topo.NewCPUSet(1, 2, 3)})
	if err != nil {
		t.Fatal(err)
	}
	for _, irq := range irqs {
		w := writeTo(p, fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq))
		if w == nil {
			t.Errorf("IRQ %d not planned (it may fire on loop CPUs 1-3): %v", irq, targets(p))
			continue
		}
		if c, err := topo.ParseCPUList(w.New); err != nil || !c.Equal(topo.NewCPUSet(0)) {
			t.Errorf("IRQ %d -> %s, want the IRQ CPU 0", irq, w.New)
		}
	}
	// Index by index, each transmit IRQ after its receive queue's, as
	// before one loop planned both.
	var order []string
	for _, target := range targets(p) {
		if strings.HasPrefix(target, "/proc/irq/") {
			order = append(order, strings.Split(target, "/")[3])
		}
	}
	if got := strings.Join(order, " "); got != "100 200 101 201 202 203" {
		t.Errorf("IRQ writes in the order %s, want 100 200 101 201 202 203", got)
	}
}

// TestPlanPerNAPIValuesNeed613: before Linux 6.13 a NAPI instance has no
// settings of its own: netlink lists it without defer-hard-irqs or
// gro-flush-timeout (read as 0), the device-wide files set no instance,
// and napi-set does not exist. A busy-poll plan there saved every
// instance's "own" 0 with a napi-set write whenever the device's value was
// not 0, a write Apply cannot make, so the whole plan failed and rolled
// back. Found in review.
func TestPlanPerNAPIValuesNeed613(t *testing.T) {
	h := loadHost(t, fxVM)
	h.Kernel = "6.12.10"
	n := h.NIC("eth0")
	if n == nil || len(n.NAPIs) == 0 {
		t.Fatalf("the vm fixture's eth0 needs NAPI instances: %+v", n)
	}
	for i := range n.NAPIs {
		n.NAPIs[i].DeferHardIRQs, n.NAPIs[i].GROFlushTimeout = 0, 0
	}
	n.DeviceDeferHardIRQs, n.DeviceGROFlushTimeout = 5, 200000
	p, err := MakePlan(h, PlanConfig{Interfaces: []string{"eth0"}, BusyPollUsecs: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range p.Writes {
		if w.Kind == KindNAPI {
			t.Errorf("napi-set write planned on a 6.12 kernel: %+v", w)
		}
	}
	// A release not known is planned as 6.13: the instances' values saved.
	h.Kernel = ""
	if p, err = MakePlan(h, PlanConfig{Interfaces: []string{"eth0"}, BusyPollUsecs: 50}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p.Writes, func(w Write) bool { return w.Kind == KindNAPI }) {
		t.Errorf("no napi-set write planned for a kernel release not known: %v", targets(p))
	}
}

// TestPlanXPSOfflineCPU: the kernel puts only online CPUs into an XPS map
// (__netif_set_xps_queue) and takes none out when one goes offline, so
// xps_cpus may hold an offline CPU. With more transmit queues than loops
// the plan took the loop CPUs off the extra queues' maps and kept the rest,
// offline CPU included: tx-6's map 6,14 with CPU 14 offline became "4000",
// which Apply refuses (CPU 14 not online) and the kernel could not hold.
// Nor could revert put 14 back. That write is now left out, with a note.
func TestPlanXPSOfflineCPU(t *testing.T) {
	root := copyTree(t, fxSMT)
	cpu := filepath.Join(root, "sys/devices/system/cpu")
	if err := os.WriteFile(filepath.Join(cpu, "online"), []byte("0-13,15\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	xps := filepath.Join(root, "sys/class/net/enp1s0f0np0/queues/tx-6/xps_cpus")
	if err := os.WriteFile(xps, []byte("4040\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := loadHost(t, root)
	p, err := MakePlan(h, PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.LoopCPUs.Equal(topo.NewCPUSet(2, 3, 4, 5, 6, 7)) {
		t.Fatalf("loops %s, want the isolated primaries 2-7", p.LoopCPUs)
	}
	if err := checkCPUs(p, Target{Root: root}); err != nil {
		t.Errorf("the plan names an offline CPU: %v", err)
	}
	if w := writeTo(p, "/sys/class/net/enp1s0f0np0/queues/tx-6/xps_cpus"); w != nil {
		t.Errorf("tx-6 XPS planned as %q", w.New)
	}
	if !hasNote(p, "tx-6") || !hasNote(p, "offline CPUs 14") {
		t.Errorf("no note on tx-6's offline CPU: %q", p.Notes)
	}
	// tx-7 (map 7, no offline CPU) still loses its loop CPU.
	if w := writeTo(p, "/sys/class/net/enp1s0f0np0/queues/tx-7/xps_cpus"); w == nil || w.New != "0" {
		t.Errorf("tx-7 XPS: %+v, want 0", w)
	}
}

// TestIsolationKindsApart: isolcpus= isolates in several ways, each with
// its own CPU set (housekeeping_isolcpus_setup): "domain" (the default)
// takes CPUs out of the scheduler's balancing, which loops default to and
// which the kernel keeps RPS off; "managed_irq" only keeps managed
// interrupts off them. topo.Host had one set for both, taken from the
// command line when sysfs "isolated" (the domain set) was empty, so a host
// booted with isolcpus=managed_irq,2-7,10-15 alone had its loops planned,
// and loop CPUs diagnosed, on CPUs the scheduler still balances onto.
// Now loops default to the domain set and the managed_irq note uses the
// managed_irq set.
func TestIsolationKindsApart(t *testing.T) {
	for _, tc := range []struct {
		name, cmdline, isolated string
		loops                   string // default inline loop CPUs
		managedNote             bool
		loopIRQs                bool // diagnose finds IRQs on (default) loop CPUs
	}{
		{"managed_irq only", "ro isolcpus=managed_irq,2-7,10-15\n", "\n", "0-7", true, false},
		{"domain only", "ro isolcpus=2-7,10-15\n", "2-7,10-15\n", "2-7", false, true},
		{"both", "ro isolcpus=managed_irq,domain,2-7,10-15\n", "2-7,10-15\n", "2-7", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, fxSMT)
			for f, v := range map[string]string{"proc/cmdline": tc.cmdline, "sys/devices/system/cpu/isolated": tc.isolated, "sys/devices/system/cpu/nohz_full": "\n"} {
				if err := os.WriteFile(filepath.Join(root, f), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h := loadHost(t, root)
			p, err := MakePlan(h, PlanConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if p.LoopCPUs.String() != tc.loops {
				t.Errorf("loop CPUs %s, want %s", p.LoopCPUs, tc.loops)
			}
			if got := hasNote(p, "isolcpus has managed_irq"); got != tc.managedNote {
				t.Errorf("managed_irq note: %v, want %v: %q", got, tc.managedNote, p.Notes)
			}
			// The kernel refuses a user's affinity write to a managed
			// interrupt on any CPU (irq_can_set_affinity_usr), and
			// managed_irq isolation moves nothing else: the note said
			// writes to those CPUs may be rejected and advised the
			// dedicated policy, which writes the same interrupts.
			if tc.managedNote && (hasNote(p, "consider --policy dedicated") || !hasNote(p, "on any CPU")) {
				t.Errorf("managed_irq note misstates what the kernel refuses: %q", p.Notes)
			}
			a, b := snapshots(t, root, h)
			if got := slices.Contains(ids(Diagnose(h, a, b, Options{})), "irq-on-loop-cpu"); got != tc.loopIRQs {
				t.Errorf("irq-on-loop-cpu found: %v, want %v", got, tc.loopIRQs)
			}
		})
	}
}

// TestPlanXPSPairsLoopWithItsQueue: under the inline policy a loop
// transmits on the queue whose interrupt its CPU takes, so that transmit
// completions come back to it. With NICs on two NUMA nodes a NIC's queue
// interrupts go to its own node's loop CPUs only, but XPS spread all the
// loop CPUs over its queues in CPU order: nicB (node 1, CPUs 4-7, three
// combined queues) had rx-0's interrupt on CPU 4 and CPU 4 transmitting
// on tx-1, whose completions land on CPU 5.
func TestPlanXPSPairsLoopWithItsQueue(t *testing.T) {
	root := t.TempDir()
	put := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cpus []topo.CPU
	for id := range 8 {
		cpus = append(cpus, topo.CPU{ID: id, Core: id, Node: id / 4, Siblings: topo.NewCPUSet(id)})
	}
	nic := func(name string, ifindex, node, irq0 int) topo.NIC {
		n := topo.NIC{Name: name, Ifindex: ifindex, NUMANode: node, LocalCPUs: topo.NewCPUSet(4*node, 4*node+1, 4*node+2, 4*node+3)}
		for i := range 3 {
			irq := irq0 + i
			n.RxQueues = append(n.RxQueues, topo.RxQueue{Index: i, IRQ: irq})
			n.TxQueues = append(n.TxQueues, topo.TxQueue{Index: i, IRQ: irq, HasXPS: true})
			put(fmt.Sprintf("proc/irq/%d/smp_affinity_list", irq), "0-7\n")
			for _, f := range []string{fmt.Sprintf("rx-%d/rps_cpus", i), fmt.Sprintf("rx-%d/rps_flow_cnt", i), fmt.Sprintf("tx-%d/xps_cpus", i)} {
				put(fmt.Sprintf("sys/class/net/%s/queues/%s", name, f), "0\n")
			}
		}
		return n
	}
	h := &topo.Host{Root: root, Online: topo.NewCPUSet(0, 1, 2, 3, 4, 5, 6, 7), CPUs: cpus,
		Nodes:   []topo.Node{{ID: 0, CPUs: topo.NewCPUSet(0, 1, 2, 3)}, {ID: 1, CPUs: topo.NewCPUSet(4, 5, 6, 7)}},
		NICs:    []topo.NIC{nic("nicA", 2, 0, 100), nic("nicB", 3, 1, 110)},
		Sysctls: map[string]string{}}
	p, err := MakePlan(h, PlanConfig{Policy: Inline, Interfaces: []string{"nicA", "nicB"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range h.NICs {
		for _, q := range n.TxQueues {
			irq := writeTo(p, fmt.Sprintf("/proc/irq/%d/smp_affinity_list", q.IRQ))
			xps := writeTo(p, fmt.Sprintf("/sys/class/net/%s/queues/tx-%d/xps_cpus", n.Name, q.Index))
			if irq == nil || xps == nil {
				t.Fatalf("%s queue %d: IRQ or XPS not planned: %v", n.Name, q.Index, targets(p))
			}
			cpu, _ := topo.ParseCPUList(irq.New)
			set, _ := topo.ParseCPUMask(xps.New)
			if set.Intersect(cpu).Len() != cpu.Len() {
				t.Errorf("%s queue %d: interrupt on loop CPU %s, but tx-%d's XPS map is CPUs %s: that loop transmits on another queue", n.Name, q.Index, cpu, q.Index, set)
			}
		}
	}
}

// TestPlanNotesThreadedNAPI: a NIC whose NAPI instances are polled by
// kernel threads (threaded NAPI) does its receive processing where the
// scheduler runs each thread, not on its interrupt's CPU, so neither
// policy's placement holds for it; the plan said nothing of it. Threaded
// mode shows per instance over netlink (with the thread's pid) and per
// device in sysfs.
func TestPlanNotesThreadedNAPI(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(n *topo.NIC)
		want   []string
		noNote bool
	}{
		{"netlink", func(n *topo.NIC) {
			n.NAPIs = []topo.NAPI{{ID: 257, Ifindex: n.Ifindex, IRQ: 38, PID: 4321, Threaded: 1}}
		}, []string{"eth0", "threaded", "taskset -pc 0 4321 (NAPI 257, rx-0)", "echo 0 > /sys/class/net/eth0/threaded"}, false},
		{"sysfs", func(n *topo.NIC) { n.NAPIs, n.DeviceThreaded = nil, 1 }, []string{"eth0", "threaded"}, false},
		{"off", func(n *topo.NIC) { n.DeviceThreaded = 0 }, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := loadHost(t, copyTree(t, fxVM))
			tc.set(h.NIC("eth0"))
			p, err := MakePlan(h, PlanConfig{})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(p.Notes, func(n string) bool { return strings.Contains(n, "threaded") })
			if tc.noNote {
				if i >= 0 {
					t.Errorf("note on threaded NAPI for a NIC without it: %q", p.Notes[i])
				}
				return
			}
			if i < 0 {
				t.Fatalf("no note on threaded NAPI: %q", p.Notes)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.Notes[i], w) {
					t.Errorf("note %q does not say %q", p.Notes[i], w)
				}
			}
		})
	}
}

// TestThreadedNAPIPinInPartition: the plan told to pin each threaded-NAPI
// kernel thread to its queue's CPU with taskset, also where that CPU is a
// cpuset partition's. A kernel thread runs in the root cgroup, whose
// tasks the kernel (6.18: cpuset_cpus_allowed, subpartitions_cpus) keeps
// off every partition's CPUs, so that taskset fails with EINVAL. The
// note now names each pin (CPU and pid), and for partition CPUs says so
// and what works: the thread moved into the partition's cgroup first.
// A pin onto CPUs of no partition (the dedicated policy's housekeeping
// CPU here) gets no such advice.
func TestThreadedNAPIPinInPartition(t *testing.T) {
	for _, tc := range []struct {
		name      string
		partition string
		policy    Policy
		netlink   bool
		want      []string
		not       []string
	}{
		{"inline, isolated partition", "isolated", Inline, true, []string{
			"taskset -pc 2 5000 (NAPI 8193, rx-0)", "taskset -pc 3 5007 (NAPI 8200, rx-7)",
			"CPUs 2-7 are those of isolated partition /rt", "fails (EINVAL)",
			"echo PID > /sys/fs/cgroup/rt/cgroup.procs"}, nil},
		{"inline, root partition", "root", Inline, true, []string{
			"CPUs 2-7 are those of root partition /rt", "echo PID > /sys/fs/cgroup/rt/cgroup.procs"}, nil},
		{"inline, sysfs only", "isolated", Inline, false, []string{
			"pgrep -a napi/enp1s0f0np0-", "CPUs 2-7 are those of isolated partition /rt", "fails (EINVAL)"}, []string{"taskset -pc"}},
		{"dedicated, housekeeping CPU", "isolated", Dedicated, true, []string{"taskset -pc 0 5000 (NAPI 8193, rx-0)"}, []string{"EINVAL", "cgroup.procs"}},
		{"no partition", "isolated invalid (Cpu list in cpuset.cpus not exclusive)", Inline, true, []string{"taskset -pc 0 5000"}, []string{"EINVAL", "cgroup.procs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, h := partitionHost(t, tc.partition)
			n := h.NIC("enp1s0f0np0")
			if tc.netlink {
				for i := range n.NAPIs {
					n.NAPIs[i].Threaded, n.NAPIs[i].PID = 1, 5000+i
				}
			} else {
				n.NAPIs, n.DeviceThreaded = nil, 1
			}
			p, err := MakePlan(h, PlanConfig{Policy: tc.policy, Interfaces: []string{n.Name}})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(p.Notes, func(s string) bool { return strings.Contains(s, "threaded NAPI") })
			if i < 0 {
				t.Fatalf("no note on threaded NAPI: %q", p.Notes)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.Notes[i], w) {
					t.Errorf("note does not say %q:\n%s", w, p.Notes[i])
				}
			}
			for _, w := range tc.not {
				if strings.Contains(p.Notes[i], w) {
					t.Errorf("note says %q:\n%s", w, p.Notes[i])
				}
			}
		})
	}
}

// TestPlanLeavesOutReadOnlyIRQ: the kernel makes the affinity files of an
// interrupt user space may not move (a managed one, as IRQ 36,
// virtio1-req.0, here: mode 0444) read-only and refuses a write to them
// even from root (EPERM on Linux 6.12+, EIO before), and the plan wrote
// such an interrupt like any other, so apply failed on it and rolled
// back. The plan now leaves it out and says why; the managed_irq note
// names EPERM, where it said EIO.
func TestPlanLeavesOutReadOnlyIRQ(t *testing.T) {
	root := copyTree(t, fxVM)
	p, err := MakePlan(loadHost(t, root), PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(p.Writes, func(w Write) bool { return strings.HasPrefix(w.Path, "/proc/irq/") })
	if i < 0 {
		t.Fatalf("fixture: no IRQ write planned: %v", targets(p))
	}
	irq := p.Writes[i].Path
	if err := os.Chmod(filepath.Join(root, irq), 0o444); err != nil {
		t.Fatal(err)
	}
	p, err = MakePlan(loadHost(t, root), PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if w := writeTo(p, irq); w != nil {
		t.Errorf("write to read-only %s planned: %+v", irq, *w)
	}
	if !hasNote(p, irq+" is read-only: the kernel lets no one set this interrupt's affinity") {
		t.Errorf("no note on read-only %s: %q", irq, p.Notes)
	}

	h := loadHost(t, copyTree(t, fxSMT))
	p, err = MakePlan(h, PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(p, "(EPERM, EIO before Linux 6.12;") {
		t.Errorf("managed_irq note does not name EPERM: %q", p.Notes)
	}
}
