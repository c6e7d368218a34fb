package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func seed(f *testing.F, paths ...string) {
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

func FuzzParseInterrupts(f *testing.F) {
	seed(f, "testdata/vm/proc/interrupts", "testdata/smt-isol/proc/interrupts")
	// arm64 (GICv3, ITS MSIs, named IPI rows, Err), and x86 with CPU 1
	// offline (no column) and a shared IRQ of two handlers.
	f.Add([]byte("           CPU0       CPU1       CPU2       CPU3       \n" +
		" 11:     123456     234567     345678     456789     GICv3  27 Level     arch_timer\n" +
		" 45:       1234          0          0          0   ITS-MSI 524288 Edge      eth0-TxRx-0\n" +
		"IPI0:      1000       2000       3000       4000       Rescheduling interrupts\n" +
		"IPI3:         0          0          0          0       CPU stop (for crash dump) interrupts\n" +
		"Err:          0\n"))
	f.Add([]byte("           CPU0       CPU2       CPU3       \n" +
		"  9:          0          4          0   IO-APIC   9-fasteoi   acpi, i801_smbus\n" +
		" 61:    1000000          0          0  IR-PCI-MSIX-0000:01:00.0   1-edge      mlx5_comp0@pci:0000:01:00.0\n" +
		"NMI:          0          0          0   Non-maskable interrupts\n" +
		"ERR:          0\nMIS:          0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInterrupts(b)
		if err != nil {
			return
		}
		for irq, c := range in.IRQs {
			if len(c.Counts) != len(in.CPUs) {
				t.Fatalf("irq %d: %d counts for %d cpus", irq, len(c.Counts), len(in.CPUs))
			}
			if name := strings.Join(strings.Fields(c.Name), " "); !strings.HasSuffix(c.Desc, name) || (c.Desc != "") != (name != "") {
				t.Fatalf("irq %d: name %q is not the end of desc %q", irq, c.Name, c.Desc)
			}
		}
	})
}

func FuzzParseSoftirqs(f *testing.F) {
	seed(f, "testdata/vm/proc/softirqs", "testdata/2socket-16q/proc/softirqs")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSoftirqs(b)
		if err != nil {
			return
		}
		for name, c := range s.Counts {
			if len(c) != len(s.CPUs) {
				t.Fatalf("%s: %d counts for %d cpus", name, len(c), len(s.CPUs))
			}
		}
	})
}

func FuzzParseStat(f *testing.F) {
	seed(f, "testdata/vm/proc/stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(b)
		if err != nil {
			return
		}
		if st == nil || len(st.CPU) == 0 {
			t.Fatalf("parsed without error: %+v", st)
		}
		for cpu := range st.CPU {
			if cpu < 0 || cpu >= MaxCPU {
				t.Fatalf("cpu %d out of range", cpu)
			}
		}
	})
}

func FuzzParseSoftnet(f *testing.F) {
	seed(f, "testdata/vm/proc/net/softnet_stat", "testdata/smt-isol/proc/net/softnet_stat")
	f.Add([]byte("00000100 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n" +
		"00000200 00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n"))
	// Linux 5.10 to 6.6: 13 columns, CPU 1 offline.
	f.Add([]byte("043bcfe9 00000000 0000000f 00000000 00000000 00000000 00000000 00000000 00000000 0000310a 00000000 00000000 00000000\n" +
		"02e0475c 00000002 00000005 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000003 00000002\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sn, err := ParseSoftnet(b)
		if err != nil {
			return
		}
		for _, s := range sn {
			if s.CPU < 0 || s.CPU >= MaxCPU {
				t.Fatalf("cpu %d out of range", s.CPU)
			}
		}
		online := NewCPUSet(0, 2, 3)
		sn, err = ParseSoftnetOnline(b, online)
		if err != nil {
			return
		}
		for i, s := range sn {
			if s.CPU < 0 || s.CPU >= MaxCPU || len(strings.Fields(lineOf(b, i))) < 13 && !online.Contains(s.CPU) {
				t.Fatalf("line %d: cpu %d not online", i, s.CPU)
			}
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8", "", "0", "1-1,2-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCPUList(s)
		if err != nil {
			return
		}
		again, err := ParseCPUList(set.String())
		if err != nil || !again.Equal(set) {
			t.Fatalf("round trip %q -> %q -> %v (%v)", s, set.String(), again, err)
		}
		m, err := ParseCPUMask(set.Mask())
		if err != nil || !m.Equal(set) {
			t.Fatalf("mask round trip %q -> %q -> %v (%v)", s, set.Mask(), m, err)
		}
	})
}

func FuzzParseCPUMask(f *testing.F) {
	for _, s := range []string{"3", "00000000,00000003", "ff,ffffffff", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCPUMask(s)
		if err != nil {
			return
		}
		again, err := ParseCPUMask(set.Mask())
		if err != nil || !again.Equal(set) {
			t.Fatalf("round trip %q -> %q -> %v (%v)", s, set.Mask(), again, err)
		}
	})
}

func FuzzParseHostFiles(f *testing.F) {
	seed(f, "testdata/vm/proc/meminfo", "testdata/vm/proc/self/limits", "testdata/vm/proc/cmdline", "testdata/smt-isol/proc/cmdline")
	for _, s := range []string{
		"ro isolcpus=2-N nohz_full=1-N",
		"isolcpus=managed_irq,domain,1-15:1/2",
		"isolcpus=foo,nohz,2-7,10-N nohz_full=all",
		"nohz_full=0-N:3/8,N-N",
		"nohz_full=0-7:0/4 isolcpus=N",
		"isolcpus=nohz,domain,2-3 nohz_full=2-3",
		"isolcpus=dom4in,2-3",
		"isolcpus=2-3 isolcpus=managed_irq,domain,4-5 nohz_full= nohz_full=2-3",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseMeminfo(b)
		ParseMemlock(b)
		ParseCapIPCLock(b)
		iso, err := ParseCmdline(string(b), 16)
		for _, set := range []CPUSet{iso.Domain, iso.ManagedIRQ, iso.NohzFull} {
			if err == nil && set.Len() > 0 && set[set.Len()-1] >= 16 {
				t.Errorf("%q: CPUs beyond the 16 there are: %+v", b, iso)
			}
		}
	})
}

// FuzzNetlinkDecoders feeds arbitrary attribute bytes to every netdev and
// ethtool decoder: they must return errors, never panic.
func FuzzNetlinkDecoders(f *testing.F) {
	f.Add([]byte{8, 0, 2, 0, 1, 1, 0, 0})
	f.Add([]byte{8, 0, 3, 0, 1, 0, 0, 0, 8, 0, 4, 0, 2, 1, 0, 0})
	f.Add([]byte{5, 0, 11, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		DecodeNAPI(b)
		DecodeQueue(b)
		DecodeCoalesce(b)
		DecodeRings(b)
		DecodeChannels(b)
		DecodeQStats(b)
	})
}

// lineOf returns the i-th non-blank line of b.
func lineOf(b []byte, i int) string {
	for l := range strings.Lines(string(b)) {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if i == 0 {
			return l
		}
		i--
	}
	return ""
}

func FuzzClassifyIRQName(f *testing.F) {
	for _, s := range []string{"virtio2-input.0", "ice-ens1f0-TxRx-15", "mlx5_comp7@pci:0000:01:00.0", "eth0-Tx-Rx-5", "mana_q3@pci:7870:00:00.0", "eth0-q2", "iwlwifi: queue 1",
		"gve-ntfy-blk3@pci:0000:00:04.0", "eth%d-ntfy-block.3", "eth0-txrx-1", "eth0-tx-0", "eth0-3", "mlx4-2@0000:03:00.0"} {
		f.Add(s)
	}
	valid := func(role string, q int) bool {
		return role == "other" && q == -1 || (role == "rx" || role == "tx" || role == "rxtx") && q >= 0 && q <= 1<<16
	}
	f.Fuzz(func(t *testing.T, name string) {
		role, q := ClassifyIRQName(name)
		if !valid(role, q) {
			t.Fatalf("ClassifyIRQName(%q) = %s %d", name, role, q)
		}
		// The driver-aware pass, on a device with this IRQ and a gve block.
		for _, driver := range []string{"gve", "tg3", "sfc", "mlx4_core"} {
			irqs := []NICIRQ{{Name: name, Role: role, Queue: q}, {Name: "gve-ntfy-blk1@pci:x"}}
			driverQueueIRQs(driver, "eth0", []int{3, 0, 1, 2}, 1, irqs)
			if !valid(irqs[0].Role, irqs[0].Queue) {
				t.Fatalf("driverQueueIRQs(%s, %q) = %s %d", driver, name, irqs[0].Role, irqs[0].Queue)
			}
		}
	})
}

// FuzzReadFixtureNetlink: a captured tree's netlink.json (the answers
// `tune inspect|plan --root` replays, from wherever the tree came) either
// is refused with an error naming it or gives a host whose queues name
// an IRQ or none (-1), never panicking.
func FuzzReadFixtureNetlink(f *testing.F) {
	seed(f, "testdata/vm/netlink.json", "testdata/2socket-16q/netlink.json")
	f.Add([]byte(`{"status":{"netdev":"ok","ethtool":"ok"},"ifaces":{"2":{"queues":[{"id":0,"ifindex":2,"type":"rx","napi_id":9},{"id":7,"ifindex":2,"type":"tx","napi_id":9}],"napis":[{"id":9,"ifindex":2,"irq":-7}]}}}`))
	root := f.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/vm")); err != nil {
		f.Fatal(err)
	}
	p := filepath.Join(root, "netlink.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := ReadFixture(root)
		if err != nil {
			if !strings.Contains(err.Error(), "netlink.json") {
				t.Fatalf("error %q does not name netlink.json", err)
			}
			return
		}
		for _, n := range h.NICs {
			for _, q := range n.RxQueues {
				if q.IRQ < -1 {
					t.Fatalf("%s rx-%d: IRQ %d", n.Name, q.Index, q.IRQ)
				}
			}
			for _, q := range n.TxQueues {
				if q.IRQ < -1 {
					t.Fatalf("%s tx-%d: IRQ %d", n.Name, q.Index, q.IRQ)
				}
			}
		}
	})
}

// FuzzParseCgroupFiles feeds arbitrary bytes to the parsers of the cgroup
// files topo reads for cpuset partitions: a valid partition state parses
// back to itself, and a process's cgroup v2 path is one from the root.
func FuzzParseCgroupFiles(f *testing.F) {
	for _, s := range []string{
		"isolated", "root invalid", "isolated invalid (Parent is an invalid partition root)", "member\n",
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
		"41 31 0:38 / /mnt/a\\040b rw - cgroup2 none rw\n",
		"#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\n",
		"3:cpuset:/\n0::/system.slice/svc.service\n",
		"Name:\tsh\nCapEff:\t000001ffffffffff\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseCgroup2Mounts(b)
		HasCapSysAdmin(b)
		if p, ok := ParseCgroupV2Path(b); ok != strings.HasPrefix(p, "/") {
			t.Errorf("%q: cgroup v2 path %q, %v", b, p, ok)
		}
		if n := ParseCgroupsHierarchy(b, "cpuset"); n < -1 {
			t.Errorf("%q: hierarchy %d", b, n)
		}
		typ, invalid, err := ParseCpusetPartition(string(b))
		if err != nil {
			return
		}
		s := typ
		switch invalid {
		case "":
		case "invalid":
			s += " invalid"
		default:
			s += " invalid (" + invalid + ")"
		}
		if t2, i2, err := ParseCpusetPartition(s); err != nil || t2 != typ || i2 != invalid {
			t.Errorf("%q -> %q %q -> %q: %q %q %v", b, typ, invalid, s, t2, i2, err)
		}
	})
}
