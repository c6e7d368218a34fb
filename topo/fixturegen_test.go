package topo

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var genFixtures = flag.Bool("gen", false, "regenerate the synthetic fixture trees under testdata/")

// fixtureHost describes a synthetic host for genFixture. The trees it
// writes have the shape and contents real kernels produce for such
// machines (file names, link layout, formats); the vm tree, by contrast,
// is captured from this machine by testdata/capture.sh.
type fixtureHost struct {
	dir      string
	cpus     int
	node     func(cpu int) int
	nodes    int
	siblings func(cpu int) string
	core     func(cpu int) int
	pkg      func(cpu int) int
	cmdline  string
	isolated string
	nohzFull string
	sysctl   map[string]string
	memlock  string
	capEff   string
	hugeTot  int
	thp      string
	irqbal   bool

	nic      string
	driver   string
	bus      string // "pci0000:ae/0000:ae:00.0/0000:af:00.0"
	nicNode  int
	ifindex  int
	queues   int
	miscIRQ  int
	miscName string
	irqName  func(q int) string
	irqAff   func(q int) string
	irqEff   func(q int) string
	rps      func(q int) CPUSet // nil: RPS off
	rpsFlow  int
	xps      func(q int) CPUSet // nil: no XPS map
	napiBase uint32
	coalesce Coalesce
	rings    Rings
	channels Channels
}

func (f fixtureHost) write(t *testing.T) {
	root := filepath.Join("testdata", f.dir)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	put := func(p, content string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(p, target string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	all := fmt.Sprintf("0-%d", f.cpus-1)
	put("proc/cmdline", f.cmdline+"\n")
	put("proc/sys/kernel/osrelease", "6.8.0-49-generic\n")
	for k, v := range f.sysctl {
		put(strings.TrimPrefix(SysctlPath(k), "/"), v+"\n")
	}
	put("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \n"+
		"Max open files            1024                 1048576              files     \n"+
		fmt.Sprintf("Max locked memory         %-20s %-20s bytes     \n", f.memlock, f.memlock))
	put("proc/self/status", "CapEff:\t"+f.capEff+"\n")
	put("proc/meminfo", fmt.Sprintf("MemTotal:       263842144 kB\nHugePages_Total:    %4d\nHugePages_Free:     %4d\nHugePages_Rsvd:        0\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n", f.hugeTot, f.hugeTot))
	if f.irqbal {
		put("proc/812/comm", "irqbalance\n")
	}
	put("proc/1/comm", "systemd\n")
	put("sys/kernel/mm/transparent_hugepage/enabled", strings.Replace("always madvise never", f.thp, "["+f.thp+"]", 1)+"\n")
	put("sys/devices/system/cpu/online", all+"\n")
	put("sys/devices/system/cpu/possible", all+"\n")
	put("sys/devices/system/cpu/isolated", f.isolated+"\n")
	if f.nohzFull != "" {
		put("sys/devices/system/cpu/nohz_full", f.nohzFull+"\n")
	}
	nodeCPUs := make([][]int, f.nodes)
	for c := 0; c < f.cpus; c++ {
		b := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", c)
		put(b+"core_id", fmt.Sprintf("%d\n", f.core(c)))
		put(b+"die_id", fmt.Sprintf("%d\n", f.pkg(c)))
		put(b+"physical_package_id", fmt.Sprintf("%d\n", f.pkg(c)))
		put(b+"thread_siblings_list", f.siblings(c)+"\n")
		nodeCPUs[f.node(c)] = append(nodeCPUs[f.node(c)], c)
	}
	put("sys/devices/system/node/online", fmt.Sprintf("0-%d\n", f.nodes-1))
	if f.nodes == 1 {
		put("sys/devices/system/node/online", "0\n")
	}
	for n, cpus := range nodeCPUs {
		put(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", n), NewCPUSet(cpus...).String()+"\n")
	}

	// /proc/interrupts, /proc/softirqs, /proc/stat, softnet_stat.
	var b strings.Builder
	b.WriteString("      ")
	for c := 0; c < f.cpus; c++ {
		fmt.Fprintf(&b, " %10s", fmt.Sprintf("CPU%d", c))
	}
	b.WriteString("\n")
	irqLine := func(irq int, desc string, count func(c int) int) {
		fmt.Fprintf(&b, "%4d:", irq)
		for c := 0; c < f.cpus; c++ {
			fmt.Fprintf(&b, " %10d", count(c))
		}
		b.WriteString("  " + desc + "\n")
	}
	irqLine(0, "IR-IO-APIC    2-edge      timer", func(c int) int { return map[bool]int{true: 39, false: 0}[c == 0] })
	pci := filepath.Base(f.bus)
	irqLine(f.miscIRQ, "IR-PCI-MSIX-"+pci+"    0-edge      "+f.miscName, func(c int) int { return map[bool]int{true: 5, false: 0}[c == 0] })
	for q := 0; q < f.queues; q++ {
		eff, _ := ParseCPUList(f.irqEff(q))
		irqLine(f.miscIRQ+1+q, fmt.Sprintf("IR-PCI-MSIX-%s  %2d-edge      %s", pci, q+1, f.irqName(q)), func(c int) int {
			if eff.Contains(c) {
				return 1000000 + 1000*q
			}
			return 0
		})
	}
	b.WriteString(" NMI:")
	for c := 0; c < f.cpus; c++ {
		fmt.Fprintf(&b, " %10d", 100+c)
	}
	b.WriteString("   Non-maskable interrupts\n ERR:          0\n")
	put("proc/interrupts", b.String())

	b.Reset()
	b.WriteString("                ")
	for c := 0; c < f.cpus; c++ {
		fmt.Fprintf(&b, " %10s", fmt.Sprintf("CPU%d", c))
	}
	b.WriteString("\n")
	for _, s := range []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"} {
		fmt.Fprintf(&b, "%12s:", s)
		for c := 0; c < f.cpus; c++ {
			fmt.Fprintf(&b, " %10d", 1000*(c+1))
		}
		b.WriteString("\n")
	}
	put("proc/softirqs", b.String())
	b.Reset()
	fmt.Fprintf(&b, "cpu  %d 0 %d %d 0 0 %d 0 0 0\n", 1000*f.cpus, 500*f.cpus, 90000*f.cpus, 100*f.cpus)
	for c := 0; c < f.cpus; c++ {
		fmt.Fprintf(&b, "cpu%d 1000 0 500 90000 0 0 100 0 0 0\n", c)
	}
	b.WriteString("intr 0\nctxt 123456\nbtime 1764494000\nprocesses 4242\n")
	put("proc/stat", b.String())
	b.Reset()
	for c := 0; c < f.cpus; c++ {
		fmt.Fprintf(&b, "%08x %08x %08x 00000000 00000000 00000000 00000000 00000000 00000000 %08x 00000000 00000000 %08x 00000000 00000000\n", 100000+c, 0, 0, 0, c)
	}
	put("proc/net/softnet_stat", b.String())

	// IRQ affinity files.
	put("proc/irq/0/smp_affinity_list", all+"\n")
	put("proc/irq/0/effective_affinity_list", "0\n")
	put(fmt.Sprintf("proc/irq/%d/smp_affinity_list", f.miscIRQ), all+"\n")
	put(fmt.Sprintf("proc/irq/%d/effective_affinity_list", f.miscIRQ), "0\n")
	for q := 0; q < f.queues; q++ {
		put(fmt.Sprintf("proc/irq/%d/smp_affinity_list", f.miscIRQ+1+q), f.irqAff(q)+"\n")
		put(fmt.Sprintf("proc/irq/%d/effective_affinity_list", f.miscIRQ+1+q), f.irqEff(q)+"\n")
	}

	// The NIC: /sys/class/net/<nic> -> ../../devices/pci.../net/<nic>,
	// with ':' in path names as '_' (Go module zips refuse ':'; see
	// capture.sh).
	bus := strings.ReplaceAll(f.bus, ":", "_")
	dev := "sys/devices/" + bus
	ndir := dev + "/net/" + f.nic
	symlink("sys/class/net/"+f.nic, "../../devices/"+bus+"/net/"+f.nic)
	symlink(ndir+"/device", "../../../"+filepath.Base(bus))
	symlink(dev+"/driver", "../../../../bus/pci/drivers/"+f.driver)
	put("sys/bus/pci/drivers/"+f.driver+"/.keep", "")
	put(dev+"/numa_node", fmt.Sprintf("%d\n", f.nicNode))
	put(dev+"/local_cpulist", NewCPUSet(nodeCPUs[f.nicNode]...).String()+"\n")
	put(fmt.Sprintf("%s/msi_irqs/%d", dev, f.miscIRQ), "msix\n")
	for q := 0; q < f.queues; q++ {
		put(fmt.Sprintf("%s/msi_irqs/%d", dev, f.miscIRQ+1+q), "msix\n")
	}
	put(ndir+"/ifindex", fmt.Sprintf("%d\n", f.ifindex))
	put(ndir+"/operstate", "up\n")
	put(ndir+"/speed", "100000\n")
	put(ndir+"/mtu", "9000\n")
	put(ndir+"/gro_flush_timeout", "0\n")
	put(ndir+"/napi_defer_hard_irqs", "0\n")
	for _, s := range []string{"rx_dropped", "rx_missed_errors", "rx_fifo_errors"} {
		put(ndir+"/statistics/"+s, "0\n")
	}
	put(ndir+"/statistics/rx_packets", "987654321\n")
	zeroMask := kernelMask(CPUSet{}, f.cpus)
	for q := 0; q < f.queues; q++ {
		rps, xps := zeroMask, zeroMask
		if f.rps != nil {
			rps = kernelMask(f.rps(q), f.cpus)
		}
		if f.xps != nil {
			xps = kernelMask(f.xps(q), f.cpus)
		}
		put(fmt.Sprintf("%s/queues/rx-%d/rps_cpus", ndir, q), rps+"\n")
		put(fmt.Sprintf("%s/queues/rx-%d/rps_flow_cnt", ndir, q), fmt.Sprintf("%d\n", f.rpsFlow))
		put(fmt.Sprintf("%s/queues/tx-%d/xps_cpus", ndir, q), xps+"\n")
	}
	// Loopback.
	symlink("sys/class/net/lo", "../../devices/virtual/net/lo")
	put("sys/devices/virtual/net/lo/ifindex", "1\n")
	put("sys/devices/virtual/net/lo/operstate", "unknown\n")
	put("sys/devices/virtual/net/lo/mtu", "65536\n")
	put("sys/devices/virtual/net/lo/queues/rx-0/rps_cpus", zeroMask+"\n")
	put("sys/devices/virtual/net/lo/queues/rx-0/rps_flow_cnt", "0\n")
	put("sys/devices/virtual/net/lo/queues/tx-0/xps_cpus", zeroMask+"\n")

	// netlink.json
	nl := ReplayNetlink{Status: NetlinkStatus{Netdev: "ok", Ethtool: "ok"}, Ifaces: map[string]ReplayIface{}}
	ri := ReplayIface{EthtoolInfo: EthtoolInfo{Coalesce: f.coalesce, Rings: &f.rings, Channels: &f.channels}}
	for q := 0; q < f.queues; q++ {
		id := f.napiBase + uint32(q)
		ri.NAPIs = append(ri.NAPIs, NAPI{ID: id, Ifindex: f.ifindex, IRQ: f.miscIRQ + 1 + q})
		ri.Queues = append(ri.Queues, QueueNAPI{ID: q, Ifindex: f.ifindex, Type: "rx", NAPIID: id}, QueueNAPI{ID: q, Ifindex: f.ifindex, Type: "tx", NAPIID: id})
	}
	nl.Ifaces[fmt.Sprint(f.ifindex)] = ri
	nl.Ifaces["1"] = ReplayIface{EthtoolInfo: EthtoolInfo{CoalesceErr: "ethtool coalesce-get: not supported (EOPNOTSUPP)",
		RingsErr: "ethtool rings-get: not supported (EOPNOTSUPP)", ChannelsErr: "ethtool channels-get: not supported (EOPNOTSUPP)"}}
	js, err := json.MarshalIndent(nl, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	put("netlink.json", string(js)+"\n")
}

// kernelMask formats s as the kernel prints a cpumask in sysfs ("%*pb"
// with nr_cpu_ids bits): just enough hex digits for ncpus bits, in 32-bit
// groups separated by commas ("0" with 2 CPUs, "ff00" with 16, "000000"
// with 24, "00000000,00000000" with 64).
func kernelMask(s CPUSet, ncpus int) string {
	digits := (ncpus + 3) / 4
	var words []uint32
	for w := 0; w*32 < ncpus; w++ {
		words = append(words, 0)
	}
	for _, c := range s {
		words[c/32] |= 1 << (c % 32)
	}
	var parts []string
	for w := len(words) - 1; w >= 0; w-- {
		n := 8
		if w == len(words)-1 && digits%8 != 0 {
			n = digits % 8
		}
		parts = append(parts, fmt.Sprintf("%0*x", n, words[w]))
	}
	return strings.Join(parts, ",")
}

// TestGenerateFixtures rewrites the synthetic fixtures when run with -gen.
func TestGenerateFixtures(t *testing.T) {
	if !*genFixtures {
		t.Skip("run with -gen to regenerate testdata/2socket-16q and testdata/smt-isol")
	}
	// A 2-socket server, 12 cores per socket without SMT, a 100 GbE ice
	// NIC with 16 combined queues attached to socket 1, irqbalance not
	// running and every queue IRQ delivered to CPU 12.
	fixtureHost{
		dir: "2socket-16q", cpus: 24, nodes: 2,
		node:     func(c int) int { return c / 12 },
		core:     func(c int) int { return c % 12 },
		pkg:      func(c int) int { return c / 12 },
		siblings: func(c int) string { return fmt.Sprint(c) },
		cmdline:  "BOOT_IMAGE=/vmlinuz-6.8.0-49-generic root=/dev/mapper/vg0-root ro quiet",
		sysctl: map[string]string{"net.core.busy_poll": "0", "net.core.busy_read": "0", "net.core.netdev_budget": "300",
			"net.core.netdev_budget_usecs": "2000", "net.core.netdev_max_backlog": "1000", "net.core.rps_sock_flow_entries": "0",
			"net.core.dev_weight": "64", "net.core.somaxconn": "4096", "net.core.rmem_max": "212992", "net.core.wmem_max": "212992",
			"net.core.optmem_max": "20480", "vm.nr_hugepages": "0", "kernel.numa_balancing": "1",
			"net.ipv4.tcp_max_syn_backlog": "4096"},
		memlock: "8388608", capEff: "0000000000000000", hugeTot: 0, thp: "madvise",
		nic: "ens1f0", driver: "ice", bus: "pci0000:ae/0000:ae:00.0/0000:af:00.0", nicNode: 1, ifindex: 3,
		queues: 16, miscIRQ: 120, miscName: "ice-0000:af:00.0:misc",
		irqName:  func(q int) string { return fmt.Sprintf("ice-ens1f0-TxRx-%d", q) },
		irqAff:   func(q int) string { return "0-23" },
		irqEff:   func(q int) string { return "12" },
		napiBase: 8193,
		coalesce: Coalesce{"rx-usecs": 50, "tx-usecs": 50, "adaptive-rx": 1, "adaptive-tx": 1, "rx-usecs-high": 0},
		rings:    Rings{RxMax: 8160, TxMax: 8160, Rx: 2048, Tx: 2048},
		channels: Channels{RxMax: 24, TxMax: 24, OtherMax: 1, CombinedMax: 24, OtherCount: 1, CombinedCount: 16},
	}.write(t)
	// One socket, 8 cores with 2 SMT threads each (siblings c and c+8),
	// CPUs 2-7,10-15 isolated with nohz_full, an mlx5 NIC with 8 channels
	// whose IRQs are pinned one per CPU 0-7 and whose transmit queues have
	// the driver's default XPS (tx-q on CPU q), irqbalance running, busy
	// polling enabled with adaptive coalescing still on, and RPS/RFS left
	// on from an earlier setup (every queue to the SMT siblings 8-15,
	// rps_flow_cnt 32768/8).
	fixtureHost{
		dir: "smt-isol", cpus: 16, nodes: 1,
		node:     func(c int) int { return 0 },
		core:     func(c int) int { return c % 8 },
		pkg:      func(c int) int { return 0 },
		siblings: func(c int) string { return fmt.Sprintf("%d,%d", c%8, c%8+8) },
		cmdline:  "BOOT_IMAGE=/boot/vmlinuz-6.12.9 root=UUID=3f1c ro isolcpus=managed_irq,domain,2-7,10-15 nohz_full=2-7,10-15 rcu_nocbs=2-7,10-15",
		isolated: "2-7,10-15", nohzFull: "2-7,10-15",
		sysctl: map[string]string{"net.core.busy_poll": "50", "net.core.busy_read": "50", "net.core.netdev_budget": "600",
			"net.core.netdev_budget_usecs": "8000", "net.core.netdev_max_backlog": "5000", "net.core.rps_sock_flow_entries": "32768",
			"net.core.dev_weight": "64", "net.core.somaxconn": "65535", "net.core.rmem_max": "16777216", "net.core.wmem_max": "16777216",
			"net.core.optmem_max": "81920", "vm.nr_hugepages": "512", "kernel.numa_balancing": "0",
			"net.ipv4.tcp_max_syn_backlog": "65535"},
		memlock: "unlimited", capEff: "000001ffffffffff", hugeTot: 512, thp: "never", irqbal: true,
		nic: "enp1s0f0np0", driver: "mlx5_core", bus: "pci0000:00/0000:00:01.0/0000:01:00.0", nicNode: 0, ifindex: 2,
		queues: 8, miscIRQ: 60, miscName: "mlx5_async0@pci:0000:01:00.0",
		irqName:  func(q int) string { return fmt.Sprintf("mlx5_comp%d@pci:0000:01:00.0", q) },
		irqAff:   func(q int) string { return fmt.Sprint(q) },
		irqEff:   func(q int) string { return fmt.Sprint(q) },
		rps:      func(q int) CPUSet { return NewCPUSet(8, 9, 10, 11, 12, 13, 14, 15) },
		rpsFlow:  4096,
		xps:      func(q int) CPUSet { return NewCPUSet(q) },
		napiBase: 8193,
		coalesce: Coalesce{"rx-usecs": 8, "rx-frames": 128, "tx-usecs": 16, "tx-frames": 32, "adaptive-rx": 1, "adaptive-tx": 1},
		rings:    Rings{RxMax: 8192, TxMax: 8192, Rx: 1024, Tx: 1024},
		channels: Channels{CombinedMax: 16, CombinedCount: 8},
	}.write(t)
}
