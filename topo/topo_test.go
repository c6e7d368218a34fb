package topo

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/spindlenet/spindle/internal/kver"
)

func TestCPUSet(t *testing.T) {
	tests := []struct {
		list, mask string
		want       CPUSet
	}{
		{"", "0", CPUSet{}},
		{"0", "1", CPUSet{0}},
		{"0-1", "3", CPUSet{0, 1}},
		{"0-3,8", "10f", CPUSet{0, 1, 2, 3, 8}},
		{"32", "1,00000000", CPUSet{32}},
		{"1,33,63", "80000002,00000002", CPUSet{1, 33, 63}},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			got, err := ParseCPUList(tt.list)
			if err != nil || !got.Equal(tt.want) {
				t.Fatalf("ParseCPUList(%q) = %v, %v; want %v", tt.list, got, err, tt.want)
			}
			if s := got.String(); s != tt.list {
				t.Errorf("String() = %q, want %q", s, tt.list)
			}
			if m := got.Mask(); m != tt.mask {
				t.Errorf("Mask() = %q, want %q", m, tt.mask)
			}
			back, err := ParseCPUMask(tt.mask)
			if err != nil || !back.Equal(tt.want) {
				t.Errorf("ParseCPUMask(%q) = %v, %v", tt.mask, back, err)
			}
		})
	}
	// Kernel-style padded masks.
	if s, err := ParseCPUMask("00000000,00000003\n"); err != nil || s.String() != "0-1" {
		t.Errorf("padded mask: %v %v", s, err)
	}
	for _, bad := range []string{"3-1", "a", "1-", "-1", "99999"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) succeeded", bad)
		}
	}
	for _, bad := range []string{"g", "1,,2", "123456789"} {
		if _, err := ParseCPUMask(bad); err == nil {
			t.Errorf("ParseCPUMask(%q) succeeded", bad)
		}
	}
	a, b := NewCPUSet(0, 1, 2, 3), NewCPUSet(2, 3, 4)
	if a.Intersect(b).String() != "2-3" || a.Minus(b).String() != "0-1" || a.Union(b).String() != "0-4" {
		t.Errorf("set algebra: %v %v %v", a.Intersect(b), a.Minus(b), a.Union(b))
	}
	js, _ := json.Marshal(a)
	var c CPUSet
	if err := json.Unmarshal(js, &c); err != nil || !c.Equal(a) || string(js) != `"0-3"` {
		t.Errorf("json round trip: %s %v %v", js, c, err)
	}
}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		in                    string
		domain, managed, nohz string
		wantErr               bool
	}{
		{"ro quiet", "", "", "", false},
		{"isolcpus=2-7 nohz_full=2-7", "2-7", "", "2-7", false},
		{"isolcpus=managed_irq,domain,2-7,10-15 nohz_full=2-7,10-15", "2-7,10-15", "2-7,10-15", "2-7,10-15", false},
		{"quiet -- isolcpus=1", "", "", "", false},
		// A list the kernel's parser refuses makes the kernel ignore
		// that parameter ("incorrect CPU range"), the others kept.
		{"nohz_full=x-y", "", "", "", false},
		{"isolcpus=2-x", "", "", "", false},
		{"isolcpus=managed_irq,domain,2-3 nohz_full=2-3,16", "2-3", "2-3", "", false},
		// The kernel's other cpu list forms (16 CPUs here): N is the last
		// CPU, a-b:used/group takes the first used of every group.
		{"isolcpus=2-N nohz_full=1-N", "2-15", "", "1-15", false},
		{"isolcpus=managed_irq,domain,1-15:1/2", "1,3,5,7,9,11,13,15", "1,3,5,7,9,11,13,15", "", false},
		{"isolcpus=managed_irq,domain,2-7,10-N nohz_full=2-7,10-N", "2-7,10-15", "2-7,10-15", "2-7,10-15", false},
		{"nohz_full=0-7:2/4,N", "", "", "0-1,4-5,15", false},
		{"nohz_full=all", "", "", "0-15", false},
		{"nohz_full=N-N", "", "", "15", false},
		{"nohz_full=8-N:1/3", "", "", "8,11,14", false},
		// Unknown isolcpus flags are skipped, as the kernel does; the
		// flags say which sets the list is for ("isolcpus=nohz is
		// equivalent to nohz_full", housekeeping_isolcpus_setup), and
		// without any it is domain isolation.
		{"isolcpus=foo,nohz,3", "", "", "3", false},
		{"isolcpus=managed_irq,2-3", "", "2-3", "", false},
		{"isolcpus=domain,managed_irq,2-3", "2-3", "2-3", "", false},
		{"isolcpus=nohz,domain,2-3 nohz_full=2-3", "2-3", "", "2-3", false},
		// A flag with a character other than a letter or '_' makes the
		// kernel refuse the whole isolcpus= ("Invalid flag").
		{"isolcpus=dom4in,2-3 nohz_full=5", "", "", "5", false},
		{"isolcpus=2-16", "", "", "", false},
		{"nohz_full=N-2", "", "", "", false},
		{"nohz_full=0-7:3/2", "", "", "", false},
		{"nohz_full=0-7:1 isolcpus=managed_irq,3", "", "3", "", false},
		// Without the CPU count N and all cannot be resolved.
		{"nohz_full=1-N", "", "", "", true},
		// Lists the kernel's parser takes (bitmap_parselist): an empty
		// region is skipped, and a group with none used is an empty set,
		// which the kernel ignores (no CPUs) as Ignored says.
		{"nohz_full=1,,2", "", "", "1-2", false},
		{"nohz_full=0-7:0/4 isolcpus=managed_irq,3", "", "3", "", false},
		// The kernel matches parameter names with '-' and '_' alike
		// (parameqn).
		{"nohz-full=2-7", "", "", "2-7", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n := 16
			if tt.wantErr {
				n = 0
			}
			iso, err := ParseCmdline(tt.in, n)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			if iso.Domain.String() != tt.domain || iso.ManagedIRQ.String() != tt.managed || iso.NohzFull.String() != tt.nohz {
				t.Errorf("got domain=%v managed_irq=%v nohz_full=%v, want %q %q %q", iso.Domain, iso.ManagedIRQ, iso.NohzFull, tt.domain, tt.managed, tt.nohz)
			}
		})
	}
}

// TestParseCmdlineRepeated: the kernel calls its setup function for every
// isolcpus= and nohz_full= on the command line, and housekeeping_setup
// (kernel/sched/isolation.c, Linux 6.x) keeps the first list each kind of
// isolation (housekeeping type: nohz, domain, managed_irq) gets: a later
// parameter naming a kind already set must give the same list ("nohz_full=
// must match isolcpus="), else the kernel ignores that parameter whole,
// its other kinds too; one naming only kinds not yet set sets them; an
// empty list, or an isolcpus= with an invalid flag, sets nothing. The
// parser took the last value of each parameter.
func TestParseCmdlineRepeated(t *testing.T) {
	for _, tt := range []struct {
		in                    string
		domain, managed, nohz string
		ignored               int // parameters the kernel ignores
	}{
		{"isolcpus=2-3 isolcpus=4-5", "2-3", "", "", 1},
		{"nohz_full=2-3 nohz-full=4-5", "", "", "2-3", 1},
		{"nohz_full=2-3 nohz_full=2-3", "", "", "2-3", 0},
		{"isolcpus=nohz,domain,2-3 nohz_full=4-5", "2-3", "", "2-3", 1},
		// The mismatch on nohz drops the domain list with it.
		{"nohz_full=4-5 isolcpus=nohz,domain,2-3", "", "", "4-5", 1},
		{"isolcpus=domain,2-3 isolcpus=managed_irq,domain,4-5", "2-3", "", "", 1},
		// Other kinds are independent, and the same list adds a kind.
		{"isolcpus=managed_irq,2-3 isolcpus=domain,4-5 nohz_full=6-7", "4-5", "2-3", "6-7", 0},
		{"isolcpus=domain,2-3 isolcpus=managed_irq,domain,2-3", "2-3", "2-3", "", 0},
		// Parameters that set nothing do not count as the first.
		{"nohz_full= nohz_full=2-3", "", "", "2-3", 1},
		{"isolcpus=dom4in,2-3 isolcpus=4-5", "4-5", "", "", 1},
	} {
		t.Run(tt.in, func(t *testing.T) {
			iso, err := ParseCmdline(tt.in, 16)
			if err != nil {
				t.Fatal(err)
			}
			if iso.Domain.String() != tt.domain || iso.ManagedIRQ.String() != tt.managed || iso.NohzFull.String() != tt.nohz {
				t.Errorf("got domain=%v managed_irq=%v nohz_full=%v, want %q %q %q", iso.Domain, iso.ManagedIRQ, iso.NohzFull, tt.domain, tt.managed, tt.nohz)
			}
			if len(iso.Ignored) != tt.ignored {
				t.Errorf("ignored %q, want %d", iso.Ignored, tt.ignored)
			}
		})
	}
}

// TestParseCmdlineNWithoutCount: without the CPU count "N" cannot be
// resolved and is an error, not a guess.
func TestParseCmdlineNWithoutCount(t *testing.T) {
	if _, err := ParseCmdline("nohz_full=1-N", 0); err == nil {
		t.Error("N accepted without a CPU count")
	}
}

// TestReadIsolationForms: a host booted with isolcpus=...,10-N used to fail
// Read outright (ParseCmdline refused N); now N resolves against the
// possible CPUs, and a command line that still does not parse falls back
// to sysfs with a note instead of failing Read.
func TestReadIsolationForms(t *testing.T) {
	for _, tc := range []struct {
		cmdline, iso, nohz, note string
		sysfs                    bool // keep sysfs isolated and nohz_full
	}{
		{"ro isolcpus=managed_irq,domain,2-7,10-N nohz_full=2-7,10-N\n", "2-7,10-15", "2-7,10-15", "", true},
		{"ro isolcpus=managed_irq,domain,2-7,10-N nohz_full=2-7,10-N\n", "2-7,10-15", "2-7,10-15", "", false},
		{"ro isolcpus=managed_irq,domain,2-7:1/1,10-N:2/4 nohz_full=2-N:1/1\n", "2-7,10-11,14-15", "2-15", "", false},
		{"ro nohz_full=2-7,10-99\n", "2-7,10-15", "2-7,10-15", "the kernel ignores nohz_full=2-7,10-99", true},
	} {
		root := copyFixture(t, "testdata/smt-isol")
		if !tc.sysfs {
			for _, f := range []string{"isolated", "nohz_full"} {
				if err := os.Remove(filepath.Join(root, "sys/devices/system/cpu", f)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte(tc.cmdline), 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := Read(root, nil)
		if err != nil {
			t.Errorf("%q: Read: %v", tc.cmdline, err)
			continue
		}
		if h.IsolatedDomain.String() != tc.iso || h.NohzFull.String() != tc.nohz {
			t.Errorf("%q: isolated %s, nohz_full %s", tc.cmdline, h.IsolatedDomain, h.NohzFull)
		}
		if note := strings.Join(h.Notes, "; "); tc.note == "" && note != "" || !strings.Contains(note, tc.note) {
			t.Errorf("%q: notes %q, want %q", tc.cmdline, note, tc.note)
		}
	}
}

func TestClassifyIRQName(t *testing.T) {
	tests := []struct {
		name, role string
		queue      int
	}{
		{"virtio2-input.0", "rx", 0},
		{"virtio2-output.3", "tx", 3},
		{"virtio2-config", "other", -1},
		{"ice-ens1f0-TxRx-15", "rxtx", 15},
		{"mlx5_comp7@pci:0000:01:00.0", "rxtx", 7},
		{"mlx5_async0@pci:0000:01:00.0", "other", -1},
		{"eth0-rx-2", "rx", 2},
		{"eth0-tx-1", "tx", 1},
		{"eth0-Tx-Rx-5", "rxtx", 5},
		{"ena-mgmnt@pci:0000:00:05.0", "other", -1},
		{"i40e-0000:3b:00.0:misc", "other", -1},
		{"i40e-ens1f0-TxRx-3", "rxtx", 3},
		// i40e's sideband flow director vector: "%s-%s:fdir" (driver and
		// PCI name) plus "-TxRx-0"; it serves no receive queue.
		{"i40e-0000:3b:00.0:fdir-TxRx-0", "other", -1},
		// ice's flow director control VSI: "%s-%s:ctrl" plus "-TxRx-0".
		{"ice-0000:af:00.0:ctrl-TxRx-0", "other", -1},
		// mana (Azure): "mana_q%d@pci:%s", queue i's event queue is
		// MSI-X vector i+1; vector 0 is the hardware channel.
		{"mana_q3@pci:7870:00:00.0", "rxtx", 3},
		{"mana_hwc@pci:7870:00:00.0", "other", -1},
		// be2net: one event queue per queue pair, "%s-q%d".
		{"eth0-q2", "rxtx", 2},
		// mlx4: "mlx4-%d@%s" with the EQ number; ring i's is EQ i+1.
		{"mlx4-3@0000:03:00.0", "rxtx", 2},
		{"mlx4-0@0000:03:00.0", "other", -1},
		{"mlx4-async@pci:0000:03:00.0", "other", -1},
		{"nvme0q1", "other", -1},
		{"", "other", -1},
	}
	for _, tt := range tests {
		role, q := ClassifyIRQName(tt.name)
		if role != tt.role || q != tt.queue {
			t.Errorf("ClassifyIRQName(%q) = %s %d, want %s %d", tt.name, role, q, tt.role, tt.queue)
		}
	}
}

func TestReadFixtures(t *testing.T) {
	tests := []struct {
		dir   string
		check func(t *testing.T, h *Host)
	}{
		{"vm", func(t *testing.T, h *Host) {
			if h.Online.String() != "0-1" || len(h.Nodes) != 1 || h.HasSMT() {
				t.Errorf("cpus: online=%v nodes=%d smt=%v", h.Online, len(h.Nodes), h.HasSMT())
			}
			n := h.NIC("eth0")
			if n == nil {
				t.Fatal("no eth0")
			}
			if n.Driver != "virtio_net" || n.Virtual || len(n.RxQueues) != 1 || n.RxQueues[0].IRQ != 38 || n.TxQueues[0].IRQ != 39 {
				t.Errorf("eth0: driver=%q virtual=%v rx=%+v tx=%+v", n.Driver, n.Virtual, n.RxQueues, n.TxQueues)
			}
			if n.RxQueues[0].NAPIID != 257 || n.Coalesce == nil || n.Channels.CombinedCount != 1 {
				t.Errorf("eth0 netlink: napi=%d coalesce=%v channels=%+v", n.RxQueues[0].NAPIID, n.Coalesce, n.Channels)
			}
			if lo := h.NIC("lo"); lo == nil || !lo.Virtual || lo.CoalesceErr == "" {
				t.Errorf("lo: %+v", lo)
			}
			if got := h.TuningCandidates(); len(got) != 1 || got[0] != "eth0" {
				t.Errorf("candidates = %v", got)
			}
			if h.Memlock.Soft != 8<<20 || !h.Memlock.CapIPCLock {
				t.Errorf("memlock = %+v", h.Memlock)
			}
			if h.Sysctls["net.core.busy_poll"] != "0" || h.Sysctls["net.ipv4.tcp_max_syn_backlog"] != "2048" {
				t.Errorf("sysctls = %v", h.Sysctls)
			}
			rx, tx := n.RxQueues[0], n.TxQueues[0]
			if n.SpeedMbps != -1 || n.MTU != 1400 || n.Operstate != "up" {
				t.Errorf("eth0 link: speed %d mtu %d %s", n.SpeedMbps, n.MTU, n.Operstate)
			}
			if rx.RPSRaw != "0" || rx.RPS.Len() != 0 || rx.RPSFlowCnt != 0 || tx.HasXPS {
				t.Errorf("eth0 RPS/XPS (eth0 has one transmit queue: no xps_cpus to read): rx=%+v tx=%+v", rx, tx)
			}
			if r := n.Rings; r == nil || r.Rx != 256 || r.RxMax != 256 {
				t.Errorf("eth0 rings = %+v (%s)", r, n.RingsErr)
			}
			if len(n.NAPIs) != 1 || n.NAPIs[0].ID != 257 || n.NAPIs[0].IRQ != -1 || n.NAPIs[0].DeferHardIRQs != 0 {
				t.Errorf("eth0 NAPIs = %+v", n.NAPIs)
			}
			if len(n.IRQs) != 3 || n.IRQs[0].IRQ != 37 || n.IRQs[0].Role != "other" {
				t.Errorf("eth0 IRQs = %+v (IRQs 41-43 are virtio3's, not eth0's)", n.IRQs)
			}
		}},
		{"2socket-16q", func(t *testing.T, h *Host) {
			if h.Online.Len() != 24 || len(h.Nodes) != 2 || h.Nodes[1].CPUs.String() != "12-23" || h.HasSMT() {
				t.Errorf("cpus: %v nodes=%+v", h.Online, h.Nodes)
			}
			if c := h.CPU(13); c.Package != 1 || c.Die != 1 || c.Node != 1 || c.Core != 1 || c.Siblings.String() != "13" {
				t.Errorf("cpu13 = %+v", c)
			}
			n := h.NIC("ens1f0")
			if n == nil || n.Driver != "ice" || n.NUMANode != 1 || n.LocalCPUs.String() != "12-23" {
				t.Fatalf("ens1f0 = %+v", n)
			}
			if len(n.RxQueues) != 16 || len(n.TxQueues) != 16 || len(n.IRQs) != 17 {
				t.Fatalf("queues rx=%d tx=%d irqs=%d", len(n.RxQueues), len(n.TxQueues), len(n.IRQs))
			}
			for i, q := range n.RxQueues {
				if q.Index != i || q.IRQ != 121+i || q.NAPIID != uint32(8193+i) {
					t.Errorf("rx-%d = %+v", i, q)
				}
			}
			if n.IRQs[0].Role != "other" || n.IRQs[5].Effective.String() != "12" || n.Coalesce["adaptive-rx"] != 1 {
				t.Errorf("irqs[0]=%+v irqs[5]=%+v", n.IRQs[0], n.IRQs[5])
			}
			if h.Memlock.CapIPCLock || h.IrqbalancePID != 0 || h.HugePages.THP != "madvise" {
				t.Errorf("memlock=%+v irqbalance=%d thp=%q", h.Memlock, h.IrqbalancePID, h.HugePages.THP)
			}
			if h.NICs[0].Name != "ens1f0" {
				t.Errorf("physical NIC not first: %s", h.NICs[0].Name)
			}
			if n.SpeedMbps != 100000 || n.MTU != 9000 {
				t.Errorf("link: speed %d mtu %d", n.SpeedMbps, n.MTU)
			}
			if r, c := n.Rings, n.Channels; r == nil || r.Rx != 2048 || r.RxMax != 8160 || c == nil || c.CombinedCount != 16 || c.CombinedMax != 24 || c.OtherCount != 1 {
				t.Errorf("rings %+v channels %+v", r, c)
			}
			if q := n.RxQueues[3]; q.RPSRaw != "000000" || q.RPS.Len() != 0 || q.RPSFlowCnt != 0 || !n.TxQueues[3].HasXPS || n.TxQueues[3].XPS.Len() != 0 {
				t.Errorf("rx-3 %+v tx-3 %+v", q, n.TxQueues[3])
			}
			if len(n.NAPIs) != 16 || n.NAPIs[4].ID != 8197 || n.NAPIs[4].IRQ != 125 {
				t.Errorf("NAPIs = %+v", n.NAPIs)
			}
			if h.Sysctls["net.core.netdev_budget_usecs"] != "2000" || h.Sysctls["kernel.numa_balancing"] != "1" {
				t.Errorf("sysctls = %v", h.Sysctls)
			}
		}},
		{"smt-isol", func(t *testing.T, h *Host) {
			if !h.HasSMT() || h.CPU(3).Siblings.String() != "3,11" {
				t.Errorf("smt: %v %v", h.HasSMT(), h.CPU(3).Siblings)
			}
			if h.IsolatedDomain.String() != "2-7,10-15" || h.IsolatedManagedIRQ.String() != "2-7,10-15" || h.NohzFull.String() != "2-7,10-15" {
				t.Errorf("isolation: %v %v %v", h.IsolatedDomain, h.IsolatedManagedIRQ, h.NohzFull)
			}
			if h.PrimaryThreads(h.Online).String() != "0-7" {
				t.Errorf("primary threads = %v", h.PrimaryThreads(h.Online))
			}
			if h.IrqbalancePID != 812 || h.Memlock.Soft != Unlimited || h.HugePages.Total != 512 || h.HugePages.PageSize != 2<<20 {
				t.Errorf("irqbalance=%d memlock=%+v huge=%+v", h.IrqbalancePID, h.Memlock, h.HugePages)
			}
			n := h.NIC("enp1s0f0np0")
			if n == nil || n.Driver != "mlx5_core" || len(n.RxQueues) != 8 || n.RxQueues[3].IRQ != 64 {
				t.Fatalf("nic = %+v", n)
			}
			if n.IRQs[4].Affinity.String() != "3" || n.IRQs[4].Role != "rxtx" || n.IRQs[4].Queue != 3 {
				t.Errorf("irq 64 = %+v", n.IRQs[4])
			}
			// RPS/RFS left on by an earlier setup; the driver's default XPS.
			if q := n.RxQueues[3]; q.RPS.String() != "8-15" || q.RPSFlowCnt != 4096 || n.TxQueues[5].XPS.String() != "5" {
				t.Errorf("rx-3 %+v tx-5 %+v", q, n.TxQueues[5])
			}
			if n.Coalesce["adaptive-rx"] != 1 || n.Coalesce["rx-usecs"] != 8 || h.Sysctls["net.core.busy_poll"] != "50" {
				t.Errorf("coalesce %v busy_poll %q", n.Coalesce, h.Sysctls["net.core.busy_poll"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			h, err := ReadFixture("testdata/" + tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if h.Netlink.Netdev != "ok" {
				t.Errorf("netlink status = %+v", h.Netlink)
			}
			tt.check(t, h)
		})
	}
}

func TestReadWithoutNetlink(t *testing.T) {
	h, err := Read("testdata/2socket-16q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Netlink.Netdev != "not queried" {
		t.Errorf("status = %+v", h.Netlink)
	}
	// The IRQ names alone still map queues to IRQs.
	n := h.NIC("ens1f0")
	if n.RxQueues[7].IRQ != 128 || n.RxQueues[7].NAPIID != 0 {
		t.Errorf("rx-7 = %+v", n.RxQueues[7])
	}
}

func TestReadMissingRoot(t *testing.T) {
	if _, err := Read(t.TempDir(), nil); err == nil {
		t.Fatal("Read of an empty tree succeeded")
	}
}

// TestReadLive reads this machine. It checks invariants that hold on any
// Linux host rather than figures of this one.
func TestReadLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("live discovery is Linux only")
	}
	h, err := ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	if h.Online.Len() != runtime.NumCPU() && h.Online.Len() < runtime.NumCPU() {
		t.Errorf("online %v, NumCPU %d", h.Online, runtime.NumCPU())
	}
	if h.NIC("lo") == nil || !h.NIC("lo").Virtual {
		t.Errorf("lo missing or not virtual")
	}
	// netdev netlink exists since 6.5; this kernel must have it.
	if h.Netlink.Netdev != "ok" && kver.AtLeast(h.Kernel, "6.5") {
		t.Errorf("netdev netlink on %s: %s", h.Kernel, h.Netlink.Netdev)
	}
	if nc, err := DialNetlink(); err == nil {
		defer nc.Close()
		if n := h.NIC("lo"); n != nil {
			// lo has no queue statistics; the call must fail cleanly or
			// return only lo's queues.
			qs, err := nc.QStats(n.Ifindex)
			for _, q := range qs {
				if q.Ifindex != n.Ifindex {
					t.Errorf("qstats of lo returned ifindex %d", q.Ifindex)
				}
			}
			t.Logf("lo qstats: %d queues, %v", len(qs), err)
		}
	}
	for _, n := range h.NICs {
		for _, q := range n.RxQueues {
			if q.NAPIID != 0 && q.NAPIID < 257 {
				t.Errorf("%s rx-%d: NAPI id %d below MIN_NAPI_ID", n.Name, q.Index, q.NAPIID)
			}
		}
	}
}

func TestParseCounters(t *testing.T) {
	b, err := os.ReadFile("testdata/vm/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	in, err := ParseInterrupts(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.CPUs) != 2 || in.IRQs[38].Name != "virtio2-input.0" || len(in.Other["LOC"]) != 2 || len(in.Other["ERR"]) != 1 {
		t.Errorf("interrupts: cpus=%v irq38=%+v", in.CPUs, in.IRQs[38])
	}
	b, _ = os.ReadFile("testdata/vm/proc/softirqs")
	sq, err := ParseSoftirqs(b)
	if err != nil || len(sq.Counts["NET_RX"]) != 2 {
		t.Errorf("softirqs: %+v %v", sq, err)
	}
	b, _ = os.ReadFile("testdata/vm/proc/stat")
	st, err := ParseStat(b)
	if err != nil || len(st.CPU) != 2 || st.CPU[0].Idle == 0 || st.Total.User != 109681 || st.Ctxt != 28016829 || st.Intr != 9757575 {
		t.Errorf("stat: %+v %v", st, err)
	}
	b, _ = os.ReadFile("testdata/vm/proc/net/softnet_stat")
	sn, err := ParseSoftnet(b)
	if err != nil || len(sn) != 2 || sn[1].CPU != 1 {
		t.Errorf("softnet: %+v %v", sn, err)
	}
	// Offline CPU: its softnet line is missing; the CPU column says who is who.
	sn, err = ParseSoftnet([]byte("00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000003 00000000 00000000 00000002 00000000 00000000\n"))
	if err != nil || sn[0].CPU != 2 || sn[0].Dropped != 1 || sn[0].TimeSqueeze != 2 || sn[0].ReceivedRPS != 3 {
		t.Errorf("softnet: %+v %v", sn, err)
	}
	// Before 5.10: 11 columns, no CPU column, one line per online CPU.
	// With CPU 1 offline the lines are CPUs 0, 2 and 3; they used to be
	// numbered 0, 1, 2, so CPU 2's drops were CPU 1's.
	old := "00000100 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n" +
		"00000200 00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n" +
		"00000300 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n"
	sn, err = ParseSoftnetOnline([]byte(old), NewCPUSet(0, 2, 3))
	if err != nil || len(sn) != 3 || sn[0].CPU != 0 || sn[1].CPU != 2 || sn[1].Dropped != 0x10 || sn[2].CPU != 3 {
		t.Errorf("softnet before 5.10 with CPU 1 offline: %+v %v", sn, err)
	}
	if sn, err = ParseSoftnetOnline([]byte(old), NewCPUSet(0, 2)); err == nil {
		t.Errorf("3 lines for 2 online CPUs accepted: %+v", sn)
	}
	// A CPU column wins over the online set.
	sn, err = ParseSoftnetOnline(b, NewCPUSet(5, 6))
	if err != nil || len(sn) != 2 || sn[0].CPU != 0 || sn[1].CPU != 1 {
		t.Errorf("softnet with the CPU column: %+v %v", sn, err)
	}
	for _, bad := range []string{"", "CPU0\n 1: x y\n", "CPU0 CPU1\n 5: 1 edge\n"} {
		if _, err := ParseInterrupts([]byte(bad)); err == nil {
			t.Errorf("ParseInterrupts(%q) succeeded", bad)
		}
	}
}

func TestParseStat(t *testing.T) {
	const cpu0 = "cpu0 1 2 3 4 5 6 7 8 9 10\n"
	tests := []struct {
		name, in string
		want     *Stat // nil: an error
	}{
		{"whole", "cpu  2 4 6 8 10 12 14 16 0 0\n" + cpu0 + "cpu3 1 2 3 4 5 6 7 8 0 0\nintr 99 1 2 3\nctxt 42\nbtime 5\n",
			&Stat{Total: CPUTime{2, 4, 6, 8, 10, 12, 14, 16}, CPU: map[int]CPUTime{0: {1, 2, 3, 4, 5, 6, 7, 8}, 3: {1, 2, 3, 4, 5, 6, 7, 8}}, Ctxt: 42, Intr: 99}},
		{"no steal column", "cpu 1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n",
			&Stat{Total: CPUTime{1, 2, 3, 4, 5, 6, 7, 0}, CPU: map[int]CPUTime{0: {1, 2, 3, 4, 5, 6, 7, 0}}}},
		{"no cpu line", cpu0 + "ctxt 5\n", nil},
		{"no cpuN line", "cpu 1 2 3 4 5 6 7 8\nctxt 5\n", nil},
		{"bad number", "cpu 1 2 3 x 5 6 7 8\n" + cpu0, nil},
		{"short line", "cpu 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6\n", nil},
		{"bad cpu name", "cpu 1 2 3 4 5 6 7 8\ncpux 1 2 3 4 5 6 7 8\n", nil},
		{"cpu out of range", "cpu 1 2 3 4 5 6 7 8\ncpu8192 1 2 3 4 5 6 7 8\n", nil},
		{"bad ctxt", "cpu 1 2 3 4 5 6 7 8\n" + cpu0 + "ctxt\n", nil},
		{"bad intr", "cpu 1 2 3 4 5 6 7 8\n" + cpu0 + "intr -1 0\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStat([]byte(tc.in))
			switch {
			case tc.want == nil && err == nil:
				t.Fatalf("parsed without error: %+v", st)
			case tc.want != nil && err != nil:
				t.Fatal(err)
			case tc.want != nil && !reflect.DeepEqual(st, tc.want):
				t.Fatalf("got %+v, want %+v", st, tc.want)
			}
		})
	}
}

func TestCPUTimeSub(t *testing.T) {
	a := CPUTime{User: 10, Nice: 1, System: 5, Idle: 100, IOWait: 2, IRQ: 1, SoftIRQ: 3, Steal: 1}
	b := CPUTime{User: 4, Nice: 1, System: 7, Idle: 50, IOWait: 2, IRQ: 0, SoftIRQ: 1, Steal: 0}
	// System went backwards (a CPU that went offline and came back): 0.
	if d, want := a.Sub(b), (CPUTime{User: 6, Idle: 50, IRQ: 1, SoftIRQ: 2, Steal: 1}); d != want {
		t.Errorf("Sub = %+v, want %+v", d, want)
	}
	if a.Total() != 123 || a.Busy() != 21 {
		t.Errorf("Total %d Busy %d, want 123 21", a.Total(), a.Busy())
	}
}

func TestNetlinkDecoders(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevANAPIIfindex, 4)
	ae.Uint32(netdevANAPIID, 257)
	ae.Uint32(netdevANAPIIRQ, 38)
	ae.Uint32(netdevANAPIDeferHardIRQs, 2)
	ae.Uint64(netdevANAPIGROFlushTimeout, 200000)
	ae.Uint32(netdevANAPIIRQSuspendTimeout, 5)
	b, _ := ae.Encode()
	n, err := DecodeNAPI(b)
	if err != nil || n != (NAPI{ID: 257, Ifindex: 4, IRQ: 38, DeferHardIRQs: 2, GROFlushTimeout: 200000, IRQSuspendTimeout: 5}) {
		t.Errorf("DecodeNAPI = %+v, %v", n, err)
	}
	if _, err := DecodeNAPI(nil); err == nil {
		t.Error("DecodeNAPI without id succeeded")
	}
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(netdevAQueueID, 3)
	ae.Uint32(netdevAQueueIfindex, 4)
	ae.Uint32(netdevAQueueType, 1)
	ae.Uint32(netdevAQueueNAPIID, 260)
	b, _ = ae.Encode()
	q, err := DecodeQueue(b)
	if err != nil || q != (QueueNAPI{ID: 3, Ifindex: 4, Type: "tx", NAPIID: 260}) {
		t.Errorf("DecodeQueue = %+v, %v", q, err)
	}
	for _, param := range NAPIParams {
		b, err := EncodeNAPISet(300, param, 20000)
		if err != nil {
			t.Fatal(err)
		}
		n, err := DecodeNAPI(b)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := n.NAPIValue(param); n.ID != 300 || v != 20000 {
			t.Errorf("napi-set %s round trip: %+v", param, n)
		}
	}
	if _, err := EncodeNAPISet(300, "threaded", 1); err == nil {
		t.Error("unknown NAPI parameter accepted")
	}
	enc, err := EncodeCoalesceSet(4, map[string]uint32{"rx-usecs": 8, "adaptive-rx": 0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeCoalesce(enc)
	if err != nil || len(c) != 2 || c["rx-usecs"] != 8 || c["adaptive-rx"] != 0 {
		t.Errorf("coalesce round trip = %v, %v", c, err)
	}
	if _, err := EncodeCoalesceSet(4, map[string]uint32{"bogus": 1}); err == nil {
		t.Error("unknown coalesce parameter accepted")
	}
	if _, err := EncodeCoalesceSet(4, map[string]uint32{"adaptive-rx": 2}); err == nil {
		t.Error("adaptive-rx 2 accepted")
	}
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(ethtoolARingsRxMax, 4096)
	ae.Uint32(ethtoolARingsRx, 1024)
	b, _ = ae.Encode()
	if r, err := DecodeRings(b); err != nil || r.RxMax != 4096 || r.Rx != 1024 {
		t.Errorf("rings = %+v %v", r, err)
	}
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(ethtoolAChannelsCombinedMax, 2)
	ae.Uint32(ethtoolAChannelsCombinedCount, 1)
	b, _ = ae.Encode()
	if ch, err := DecodeChannels(b); err != nil || ch.CombinedMax != 2 || ch.CombinedCount != 1 {
		t.Errorf("channels = %+v %v", ch, err)
	}
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(netdevAQStatsIfindex, 4)
	ae.Uint32(netdevAQStatsQueueType, 0)
	ae.Uint32(netdevAQStatsQueueID, 2)
	ae.Uint32(8, 1000)
	ae.Uint64(9, 1<<40)
	ae.Uint32(13, 7)
	b, _ = ae.Encode()
	if qs, err := DecodeQStats(b); err != nil || qs.Type != "rx" || qs.Queue != 2 || qs.Values["rx-packets"] != 1000 || qs.Values["rx-bytes"] != 1<<40 || qs.Values["rx-hw-drops"] != 7 {
		t.Errorf("qstats = %+v %v", qs, err)
	}
	// A u32 attribute with 2 bytes is an error, not a panic.
	if _, err := DecodeRings([]byte{6, 0, 2, 0, 1, 2, 0, 0}); err == nil {
		t.Error("short rings attribute accepted")
	}
}

// TestFixturePathsModuleSafe keeps fixture file names inside what Go module
// zips accept (golang.org/x/mod/module.CheckFilePath), so that the module
// can be fetched through a proxy.
func TestFixturePathsModuleSafe(t *testing.T) {
	const allowed = "!#$%&()+,-.=@[]^_{}~ "
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, r := range d.Name() {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(allowed, r)
			if !ok {
				t.Errorf("%s: %q is not allowed in a module file name", p, r)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyFixture copies a fixture tree, symbolic links as links, into a
// temporary directory the test may change.
func copyFixture(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestParseInterruptsNames: the name is the action as the kernel prints it
// after the chip, hardware IRQ and trigger fields ("  %s", shared actions
// joined by ", "), spaces included.
func TestParseInterruptsNames(t *testing.T) {
	tests := []struct{ line, name string }{
		{" 38:        162          0 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0", "virtio2-input.0"},
		{" 61:    1000000          0  IR-PCI-MSIX-0000:01:00.0   1-edge      mlx5_comp0@pci:0000:01:00.0", "mlx5_comp0@pci:0000:01:00.0"},
		{"152:          0          7  IR-PCI-MSIX-0000:00:14.3    1-edge      iwlwifi: queue 1", "iwlwifi: queue 1"},
		{"122:          0          0  IR-PCI-MSI 458752-edge      PCIe PME, aerdrv", "PCIe PME, aerdrv"},
		{" 11:      12345      67890     GICv3  27 Level     arch_timer", "arch_timer"},
		{" 45:          3          0  IR-PCI-MSIX-0000:00:1f.6    3-edge", "3-edge"},
	}
	for _, tt := range tests {
		in, err := ParseInterrupts([]byte("           CPU0       CPU1\n" + tt.line + "\n"))
		if err != nil {
			t.Errorf("%q: %v", tt.line, err)
			continue
		}
		for _, c := range in.IRQs {
			if c.Name != tt.name {
				t.Errorf("%q: name %q, want %q", tt.line, c.Name, tt.name)
			}
		}
	}
}

// TestReadBondingMasters: with the bonding module loaded, /sys/class/net
// holds the file bonding_masters beside the interfaces' links; it is not
// an interface.
func TestReadBondingMasters(t *testing.T) {
	root := copyFixture(t, "testdata/vm")
	if err := os.WriteFile(filepath.Join(root, "sys/class/net/bonding_masters"), []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.NIC("bonding_masters"); n != nil {
		t.Errorf("bonding_masters read as an interface: %+v", *n)
	}
	if len(h.NICs) != 4 || h.NICs[0].Name != "eth0" {
		t.Errorf("interfaces: %v", h.NICs)
	}
}

// TestReadNICWithoutMSI: a PCI NIC without MSI (legacy INTx, pci=nomsi)
// has no msi_irqs directory; the PCIe root port above it has its own (PME,
// AER, hotplug). Those are not the NIC's interrupts.
func TestReadNICWithoutMSI(t *testing.T) {
	root := copyFixture(t, "testdata/smt-isol")
	port := filepath.Join(root, "sys/devices/pci0000_00/0000_00_01.0")
	if err := os.RemoveAll(filepath.Join(port, "0000_01_00.0/msi_irqs")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(port, "msi_irqs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(port, "msi_irqs/24"), []byte("msi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := h.NIC("enp1s0f0np0")
	if n == nil {
		t.Fatal("no enp1s0f0np0")
	}
	if len(n.IRQs) != 0 {
		t.Errorf("the root port's interrupts are the NIC's: %+v", n.IRQs)
	}
	// virtio_net's device is the virtio device; the interrupts are its
	// PCI parent's.
	h, err = Read("testdata/vm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.NIC("eth0"); n == nil || len(n.IRQs) != 3 {
		t.Errorf("virtio eth0 interrupts: %+v", n)
	}
}

// noNetdev answers netlink like a kernel without the netdev family
// (before 6.0): queue-get and napi-get fail, ethtool answers.
type noNetdev struct{}

func (noNetdev) Queues(int) ([]QueueNAPI, error) {
	return nil, fmt.Errorf("%w: netdev: not found", ErrNetlinkAbsent)
}
func (noNetdev) NAPIs(int) ([]NAPI, error) {
	return nil, fmt.Errorf("%w: netdev: not found", ErrNetlinkAbsent)
}
func (noNetdev) Coalesce(int) (Coalesce, error)  { return Coalesce{"rx-usecs": 8}, nil }
func (noNetdev) Rings(int) (*Rings, error)       { return &Rings{Rx: 256}, nil }
func (noNetdev) Channels(int) (*Channels, error) { return &Channels{CombinedCount: 1}, nil }

// TestReplayKeepsNetdevErrors: a captured host whose netdev queries
// failed replays with the same failures, written to and read back from
// netlink.json, not as a host whose interfaces have no NAPIs.
func TestReplayKeepsNetdevErrors(t *testing.T) {
	status := NetlinkStatus{Netdev: "netdev: not found", Ethtool: "ok"}
	live, err := Read("testdata/vm", &Config{Netlink: noNetdev{}, NetlinkStatus: status})
	if err != nil {
		t.Fatal(err)
	}
	root := copyFixture(t, "testdata/vm")
	b, err := json.Marshal(RecordNetlink(noNetdev{}, status, live))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "netlink.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	replayed, err := ReadFixture(root)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range live.NICs {
		r := replayed.NICs[i]
		if n.NAPIErr == "" || r.NAPIErr != n.NAPIErr {
			t.Errorf("%s: NAPIErr live %q, replayed %q", n.Name, n.NAPIErr, r.NAPIErr)
		}
	}
}

// TestReadFlowDirectorIRQ: an i40e port's sideband flow director vector
// (named "...:fdir-TxRx-0") is one of its PCI function's interrupts; it is
// not receive queue 0's interrupt.
func TestReadFlowDirectorIRQ(t *testing.T) {
	root := copyFixture(t, "testdata/2socket-16q")
	line := "137:" + strings.Repeat("          0", 24) + "  IR-PCI-MSIX-0000:af:00.0   17-edge      i40e-0000:af:00.0:fdir-TxRx-0\n"
	f, err := os.OpenFile(filepath.Join(root, "proc/interrupts"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys/devices/pci0000_ae/0000_ae_00.0/0000_af_00.0/msi_irqs/137"), []byte("msix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := h.NIC("ens1f0")
	if n == nil || len(n.IRQs) != 18 {
		t.Fatalf("ens1f0 = %+v", n)
	}
	if q := n.RxQueues[0]; q.IRQ != 121 {
		t.Errorf("rx-0 IRQ %d, want 121 (137 is the flow director's)", q.IRQ)
	}
}

// TestReadDriverQueueIRQNames: the 2-socket fixture's NIC (16 queues, IRQs
// 120-136) as gve, tg3, sfc and mlx4 name their interrupts. Their queue
// IRQs were not found (gve "gve-ntfy-blk%d@pci:%s", sfc "%s-%d", mlx4
// "mlx4-%d@%s": "other") or found on the wrong queue (tg3's vector i+1
// serves queue i: "ens1f0-txrx-1" was queue 1; mlx4's EQ e is the one of
// CPU e-1, not of ring e-1, so "mlx4-1" was ring 0 on a NIC whose ring 0
// is on CPU 12).
func TestReadDriverQueueIRQNames(t *testing.T) {
	const pci = "0000:af:00.0"
	seq := func(first, n int) []int {
		var out []int
		for i := range n {
			out = append(out, first+i)
		}
		return out
	}
	none := func(n int) []int { return slices.Repeat([]int{-1}, n) }
	// apart names IRQ special so and every other IRQ irq by format, of
	// irq-base: the one vector a driver names apart from its queues'.
	apart := func(special int, name, format string, base int) func(int) string {
		return func(irq int) string {
			if irq == special {
				return name
			}
			return fmt.Sprintf(format, irq-base)
		}
	}
	tests := []struct {
		driver string
		name   func(irq int) string
		rx, tx []int // IRQ of each queue
	}{
		{
			// 16 notify blocks (IRQs 120-135), then the management one:
			// blocks 0-7 serve tx-0..7, blocks 8-15 rx-0..7.
			driver: "gve",
			name:   apart(136, "gve-mgmnt@pci:"+pci, "gve-ntfy-blk%d@pci:"+pci, 120),
			rx:     append(seq(128, 8), none(8)...), tx: append(seq(120, 8), none(8)...),
		},
		{
			// Before Linux 6.1.
			driver: "gve",
			name:   apart(136, "eth%d-mgmnt", "eth%%d-ntfy-block.%d", 120),
			rx:     append(seq(128, 8), none(8)...), tx: append(seq(120, 8), none(8)...),
		},
		{
			// RSS and TSS: vector 0 for link events, vector i+1 queue i.
			driver: "tg3",
			name:   apart(120, "ens1f0-0", "ens1f0-txrx-%d", 120),
			rx:     seq(121, 16), tx: seq(121, 16),
		},
		{
			// RSS without TSS: vector 0 transmits on queue 0.
			driver: "tg3",
			name:   apart(120, "ens1f0-tx-0", "ens1f0-rx-%d", 120),
			rx:     seq(121, 16), tx: append([]int{120}, none(15)...),
		},
		{
			driver: "sfc",
			name:   apart(120, "ens1f0-ptp", "ens1f0-%d", 121),
			rx:     seq(121, 16), tx: seq(121, 16),
		},
		{
			// Separate receive and transmit channels, and XDP ones.
			driver: "sfc",
			name: func(irq int) string {
				switch {
				case irq < 128:
					return fmt.Sprintf("ens1f0-rx-%d", irq-120)
				case irq < 136:
					return fmt.Sprintf("ens1f0-tx-%d", irq-128)
				}
				return "ens1f0-xdp-0"
			},
			rx: append(seq(120, 8), none(8)...), tx: append(seq(128, 8), none(8)...),
		},
		{
			driver: "mlx4_core",
			name:   apart(120, "mlx4-async@pci:"+pci, "mlx4-%d@"+pci, 120),
			// EQ e (IRQ 120+e) is CPU e-1's. The NIC is on node 1
			// (CPUs 12-23): rings 0-3 on CPUs 12-15 use EQs 13-16,
			// rings 12-15 on CPUs 0-3 EQs 1-4; rings 4-11 (CPUs
			// 16-23) ask for EQs 17-24, which do not exist, and get
			// the least used one: not known.
			rx: slices.Concat(seq(133, 4), none(8), seq(121, 4)), tx: slices.Concat(seq(133, 4), none(8), seq(121, 4)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.driver+" "+tt.name(121), func(t *testing.T) {
			root := copyFixture(t, "testdata/2socket-16q")
			dev := filepath.Join(root, "sys/devices/pci0000_ae/0000_ae_00.0/0000_af_00.0")
			if err := os.Remove(filepath.Join(dev, "driver")); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers", tt.driver), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../../../../bus/pci/drivers/"+tt.driver, filepath.Join(dev, "driver")); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, "proc/interrupts")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for line := range strings.Lines(string(b)) {
				label, _, _ := strings.Cut(line, ":")
				if irq, err := strconv.Atoi(strings.TrimSpace(label)); err == nil && irq >= 120 && irq <= 136 {
					f := strings.Fields(line)
					line = strings.TrimSuffix(line, f[len(f)-1]+"\n") + tt.name(irq) + "\n"
				}
				out.WriteString(line)
			}
			if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := Read(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := h.NIC("ens1f0")
			if n.Driver != tt.driver {
				t.Fatalf("driver %q", n.Driver)
			}
			var rx, tx []int
			for _, q := range n.RxQueues {
				rx = append(rx, q.IRQ)
			}
			for _, q := range n.TxQueues {
				tx = append(tx, q.IRQ)
			}
			if !slices.Equal(rx, tt.rx) || !slices.Equal(tx, tt.tx) {
				t.Errorf("queue IRQs rx %v tx %v, want rx %v tx %v\n%+v", rx, tx, tt.rx, tt.tx, n.IRQs)
			}
		})
	}
}

// TestReadNohzFullFromSysfs: /sys/devices/system/cpu/nohz_full is the
// kernel's tick_nohz_full_mask, what it took of nohz_full= (or
// isolcpus=nohz,...). Linux 4.0+ has it beside "isolated" when built with
// CONFIG_NO_HZ_FULL; without that option housekeeping_setup refuses
// nohz_full= and an isolcpus= with the nohz flag whole. Read took the
// command line's sets where the file was missing or empty, so a kernel
// that ignored nohz_full=2-7,10-15 had nohz_full CPUs 2-7,10-15 (and a plan
// kept RPS off them).
func TestReadNohzFullFromSysfs(t *testing.T) {
	for _, tc := range []struct {
		name, cmdline   string
		nohzFile        *string // nil: no file
		iso, nohz, note string
	}{
		{"no CONFIG_NO_HZ_FULL", "ro isolcpus=managed_irq,domain,2-7,10-15 nohz_full=2-7,10-15\n", nil, "2-7,10-15", "", "CONFIG_NO_HZ_FULL"},
		{"no CONFIG_NO_HZ_FULL, isolcpus=nohz", "ro isolcpus=nohz,domain,2-7,10-15\n", nil, "", "", "CONFIG_NO_HZ_FULL"},
		{"nohz_full= refused", "ro nohz_full=2-7,10-15\n", new(string), "2-7,10-15", "", ""},
		{"nohz_full= taken", "ro nohz_full=2-7,10-15\n", ptr("2-7,10-15\n"), "2-7,10-15", "2-7,10-15", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyFixture(t, "testdata/smt-isol")
			cpu := filepath.Join(root, "sys/devices/system/cpu")
			if tc.nohzFile == nil {
				if err := os.Remove(filepath.Join(cpu, "nohz_full")); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(cpu, "nohz_full"), []byte(*tc.nohzFile), 0o644); err != nil {
				t.Fatal(err)
			}
			// The kernel refused isolcpus=nohz,... too: nothing is
			// domain-isolated.
			if tc.iso == "" {
				if err := os.WriteFile(filepath.Join(cpu, "isolated"), []byte("\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte(tc.cmdline), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := Read(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsolatedDomain.String() != tc.iso || h.NohzFull.String() != tc.nohz {
				t.Errorf("isolated %q, nohz_full %q; want %q, %q", h.IsolatedDomain, h.NohzFull, tc.iso, tc.nohz)
			}
			if note := strings.Join(h.Notes, "; "); tc.note == "" && note != "" || !strings.Contains(note, tc.note) {
				t.Errorf("notes %q, want %q", note, tc.note)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestReadIsolationKinds: Host keeps each kind of isolcpus= isolation in
// its own set. It had one, Isolated, the command line's list whatever its
// flags when sysfs "isolated" (the domain set) was empty, so
// isolcpus=managed_irq,2-7 alone read as domain isolation of 2-7. A kernel
// without CONFIG_NO_HZ_FULL refuses an isolcpus= with the nohz flag whole,
// its managed_irq set too. The JSON names each set.
func TestReadIsolationKinds(t *testing.T) {
	for _, tc := range []struct {
		name, cmdline, isolated string
		noNohzFile              bool
		domain, managed, nohz   string
	}{
		{"managed_irq alone", "ro isolcpus=managed_irq,2-7\n", "\n", false, "", "2-7", ""},
		{"domain and managed_irq", "ro isolcpus=managed_irq,domain,2-7\n", "2-7\n", false, "2-7", "2-7", ""},
		{"nohz alone", "ro isolcpus=nohz,2-7\n", "\n", false, "", "", "2-7"},
		{"no CONFIG_NO_HZ_FULL", "ro isolcpus=nohz,managed_irq,2-7\n", "\n", true, "", "", ""},
		// The kernel keeps the first list (TestParseCmdlineRepeated).
		{"managed_irq twice", "ro isolcpus=managed_irq,2-3 isolcpus=managed_irq,4-5\n", "\n", false, "", "2-3", ""},
		// The kernel ignores only the parameter whose list it refuses.
		{"managed_irq beside a refused list", "ro isolcpus=managed_irq,2-7 nohz_full=2-7,99\n", "\n", false, "", "2-7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyFixture(t, "testdata/smt-isol")
			cpu := filepath.Join(root, "sys/devices/system/cpu")
			files := map[string]string{filepath.Join(root, "proc/cmdline"): tc.cmdline, filepath.Join(cpu, "isolated"): tc.isolated, filepath.Join(cpu, "nohz_full"): tc.nohz + "\n"}
			for f, v := range files {
				if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.noNohzFile {
				if err := os.Remove(filepath.Join(cpu, "nohz_full")); err != nil {
					t.Fatal(err)
				}
			}
			h, err := Read(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsolatedDomain.String() != tc.domain || h.IsolatedManagedIRQ.String() != tc.managed || h.NohzFull.String() != tc.nohz {
				t.Errorf("domain %q, managed_irq %q, nohz_full %q; want %q, %q, %q", h.IsolatedDomain, h.IsolatedManagedIRQ, h.NohzFull, tc.domain, tc.managed, tc.nohz)
			}
			js, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`"isolated_domain":%q,"isolated_managed_irq":%q,"nohz_full":%q`, tc.domain, tc.managed, tc.nohz)
			if !strings.Contains(string(js), want) {
				t.Errorf("JSON has no %s", want)
			}
			ignored := slices.ContainsFunc(h.Notes, func(n string) bool {
				return strings.Contains(n, "ignores isolcpus=managed_irq,4-5: managed_irq isolation is already 2-3")
			})
			if want := strings.Contains(tc.name, "twice"); ignored != want {
				t.Errorf("note on the ignored parameter: %v, want %v: %q", ignored, want, h.Notes)
			}
		})
	}
}

// TestDriverQueueIRQsMlx4: an mlx4 ring uses the EQ of its CPU (EQ cpu+1),
// its CPU the ring's place in the spread order (the device's node's CPUs
// first). Found in review: "mlx4-e" was taken for ring e-1 whatever the
// CPUs, and on a device with two ports, whose EQs are split between them,
// for a ring of each. Now a two-port device's EQs are "other", as is an
// EQ of a CPU not in the order, or one that is not a number.
func TestDriverQueueIRQsMlx4(t *testing.T) {
	irqs := func() []NICIRQ {
		var out []NICIRQ
		for _, name := range []string{"mlx4-async@pci:x", "mlx4-1@x", "mlx4-3@x", "mlx4-5@x", "mlx4-9@x", "mlx4-0@x"} {
			role, q := ClassifyIRQName(name)
			out = append(out, NICIRQ{Name: name, Role: role, Queue: q})
		}
		return out
	}
	spread := []int{2, 3, 0, 1, 4} // node of CPUs 2-3, then the rest
	got := irqs()
	driverQueueIRQs("mlx4_core", "eth0", spread, 1, got)
	want := []struct {
		role  string
		queue int
	}{{"other", -1}, {"rxtx", 2}, {"rxtx", 0}, {"rxtx", 4}, {"other", -1}, {"other", -1}}
	for i, w := range want {
		if got[i].Role != w.role || got[i].Queue != w.queue {
			t.Errorf("one port: %s is %s %d, want %s %d", got[i].Name, got[i].Role, got[i].Queue, w.role, w.queue)
		}
	}
	got = irqs()
	driverQueueIRQs("mlx4_core", "eth0", spread, 2, got)
	for _, q := range got {
		if q.Role != "other" || q.Queue != -1 {
			t.Errorf("two ports: %s is %s %d, want other", q.Name, q.Role, q.Queue)
		}
	}
}

// TestReadMemlockPID reads a captured process's limit by pid, and names
// the file when the process is not there.
func TestReadMemlockPID(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "proc/4242")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
			"Max locked memory         65536                unlimited            bytes     \n",
		"status": "Name:\tgateway\nCapEff:\t0000000000000000\n",
		"comm":   "gateway\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := ReadMemlock(root, 4242)
	if want := (Memlock{Soft: 64 << 10, Hard: Unlimited, PID: 4242, Comm: "gateway"}); err != nil || m != want {
		t.Errorf("ReadMemlock(4242) = %+v, %v; want %+v", m, err, want)
	}
	if _, err := ReadMemlock(root, 4343); err == nil || !strings.Contains(err.Error(), "proc/4343/limits") {
		t.Errorf("ReadMemlock of a missing process: %v", err)
	}
	if _, err := ReadMemlock(root, -1); err == nil {
		t.Error("ReadMemlock(-1) succeeded")
	}
}

// TestReadHugePagesOfMappedSize: the huge pages Read reports are the
// hugetlb pool of the size spindle maps (the PMD size, sys.HugePageSize),
// not the default size's of /proc/meminfo: on a host booted with
// default_hugepagesz=1G, meminfo counts 1 GiB pages, which MAP_HUGETLB
// with MAP_HUGE_2MB never takes, and says nothing of the 2 MiB pool.
func TestReadHugePagesOfMappedSize(t *testing.T) {
	const meminfo1G = "HugePages_Total:       %d\nHugePages_Free:        %d\nHugepagesize:    1048576 kB\n"
	for _, tt := range []struct {
		name           string
		pool1G, pool2M int
		want           HugePages
	}{
		// 1 GiB pages reserved, none of 2 MiB: buffers get no hugetlb.
		{"1g-only", 4, 0, HugePages{Total: 0, Free: 0, PageSize: 2 << 20, DefaultPageSize: 1 << 30}},
		// 2 MiB pages reserved beside a 1 GiB default with none.
		{"2m-beside-1g-default", 0, 512, HugePages{Total: 512, Free: 500, PageSize: 2 << 20, DefaultPageSize: 1 << 30}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := copyFixture(t, "testdata/vm")
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
			put("proc/meminfo", fmt.Sprintf(meminfo1G, tt.pool1G, tt.pool1G))
			put("sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "2097152\n")
			put("sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", fmt.Sprintf("%d\n", tt.pool1G))
			put("sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", fmt.Sprintf("%d\n", tt.pool1G))
			put("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", fmt.Sprintf("%d\n", tt.pool2M))
			put("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", fmt.Sprintf("%d\n", min(tt.pool2M, 500)))
			h, err := Read(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.THP = h.HugePages.THP
			if h.HugePages != tt.want {
				t.Errorf("huge pages %+v, want %+v", h.HugePages, tt.want)
			}
		})
	}
}
