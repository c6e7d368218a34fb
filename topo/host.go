package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spindlenet/spindle/internal/sys"
)

// Host is everything topo discovers about one machine. Its methods only
// read it and may be called from any goroutine.
type Host struct {
	// Root is the directory /proc and /sys were read under ("/" live).
	Root string `json:"root"`
	// Kernel is /proc/sys/kernel/osrelease.
	Kernel string `json:"kernel"`
	// CPUs lists the online CPUs in ascending order.
	CPUs []CPU `json:"cpus"`
	// Online is the set of online CPUs.
	Online CPUSet `json:"online"`
	// Nodes lists the NUMA nodes with their CPUs.
	Nodes []Node `json:"nodes"`
	// IsolatedDomain is the set isolcpus= (no flags, or the domain flag)
	// takes out of the scheduler's load-balancing domains: sysfs
	// "isolated", else the command line. Loops default to it and to
	// IsolatedPartition, and the kernel keeps RPS off it.
	IsolatedDomain CPUSet `json:"isolated_domain"`
	// IsolatedManagedIRQ is the set isolcpus=managed_irq keeps managed
	// interrupts off (where their masks have another CPU); from the
	// command line, as the kernel shows it nowhere else.
	IsolatedManagedIRQ CPUSet `json:"isolated_managed_irq"`
	// NohzFull is the nohz_full= set (or isolcpus=nohz): sysfs
	// "nohz_full", else the command line.
	NohzFull CPUSet `json:"nohz_full"`
	// IsolatedPartition is the set of CPUs in valid cgroup v2 cpuset
	// partitions of type "isolated", made at run time: the scheduler does
	// not balance load onto them, only the partition's tasks run there,
	// and since Linux 6.8 unbound workqueues stay off them. The tick
	// still runs unless they are nohz_full too, and interrupts are not
	// moved. Cpuset says where it was read. Kernels whose housekeeping
	// follows cpuset partitions list these CPUs in sysfs "isolated" too,
	// so in IsolatedDomain.
	IsolatedPartition CPUSet `json:"isolated_partition"`
	// Cpuset is where IsolatedPartition was read, and the partitions.
	Cpuset Cpuset `json:"cpuset"`
	// NICs lists the network interfaces, physical ones first.
	NICs []NIC `json:"nics"`
	// Sysctls holds the networking and memory sysctls spindle cares about,
	// by dotted name; a sysctl absent in this network namespace is absent.
	Sysctls map[string]string `json:"sysctls"`
	// IrqbalancePID is the pid of a running irqbalance, or 0.
	IrqbalancePID int `json:"irqbalance_pid"`
	// Memlock is the RLIMIT_MEMLOCK of the reading process (ReadMemlock
	// reads another's).
	Memlock Memlock `json:"memlock"`
	// ServiceCgroup is the cgroup v2 of the process whose limit Memlock
	// is, when the caller read another's (ReadCgroup), as
	// /proc/PID/cgroup gives it: a path from the hierarchy's root
	// ("/system.slice/svc.service"). Empty otherwise, or where that
	// process is in no cgroup v2 hierarchy (none is mounted).
	ServiceCgroup string `json:"service_cgroup,omitempty"`
	// HugePages describes huge page availability.
	HugePages HugePages `json:"huge_pages"`
	// Netlink says whether the netlink families could be consulted.
	Netlink NetlinkStatus `json:"netlink"`
	// Notes say what could not be read and what was used instead (a
	// kernel command line that does not parse, say).
	Notes []string `json:"notes,omitempty"`
}

// CPU is one online logical CPU.
type CPU struct {
	ID      int `json:"id"`
	Core    int `json:"core"`
	Die     int `json:"die"`
	Package int `json:"package"`
	// Node is the NUMA node whose cpulist has the CPU, -1 when none
	// has (nodes changed while they were read).
	Node int `json:"node"`
	// Siblings are the SMT threads of the same core, itself included.
	Siblings CPUSet `json:"siblings"`
}

// Node is one NUMA node.
type Node struct {
	ID   int    `json:"id"`
	CPUs CPUSet `json:"cpus"`
}

// Memlock is a process's locked-memory limit.
type Memlock struct {
	// Soft and Hard are in bytes; Unlimited means no limit.
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
	// CapIPCLock is true when the process may exceed the limit.
	CapIPCLock bool `json:"cap_ipc_lock"`
	// PID is the process the limit is of; 0 for the process that read
	// it (Read's, which for `spindle tune` is not the service's).
	PID int `json:"pid,omitempty"`
	// Comm is that process's name (/proc/PID/comm), when PID is set.
	Comm string `json:"comm,omitempty"`
}

// ReadMemlock reads the locked-memory limit and CAP_IPC_LOCK of process
// pid under root (0: the calling process), from /proc/PID/limits and
// /proc/PID/status. The limit that counts for a service's io_uring
// registered buffers is the service's own: the kernel charges them to
// the registering process's user against its RLIMIT_MEMLOCK unless it
// has CAP_IPC_LOCK.
func ReadMemlock(root string, pid int) (Memlock, error) {
	r := reader{root: root}
	dir := "/proc/self"
	if pid != 0 {
		if pid < 0 {
			return Memlock{}, fmt.Errorf("pid %d: not a process id", pid)
		}
		dir = "/proc/" + strconv.Itoa(pid)
	}
	m := Memlock{PID: pid}
	b, err := os.ReadFile(r.path(dir + "/limits"))
	if err != nil {
		return Memlock{}, err
	}
	if m.Soft, m.Hard, err = ParseMemlock(b); err != nil {
		return Memlock{}, fmt.Errorf("%s: %w", r.path(dir+"/limits"), err)
	}
	if b, err = os.ReadFile(r.path(dir + "/status")); err != nil {
		return Memlock{}, err
	}
	if m.CapIPCLock, err = ParseCapIPCLock(b); err != nil {
		return Memlock{}, fmt.Errorf("%s: %w", r.path(dir+"/status"), err)
	}
	if pid != 0 {
		m.Comm, _ = r.read(dir + "/comm")
	}
	return m, nil
}

// HugePages describes explicit and transparent huge pages.
type HugePages struct {
	// Total and Free count the hugetlb pages of PageSize reserved
	// (/sys/kernel/mm/hugepages/hugepages-<PageSize in kB>kB).
	Total uint64 `json:"total"`
	Free  uint64 `json:"free"`
	// PageSize is the huge page size spindle maps its buffers with
	// (MAP_HUGETLB of that size, else transparent huge pages): the
	// PMD-level size (sys.HugePageSize, 2 MiB on amd64).
	PageSize uint64 `json:"page_size"`
	// DefaultPageSize is the default hugetlb size (Hugepagesize in
	// /proc/meminfo), the pool vm.nr_hugepages sets; 0 if unknown. It
	// differs from PageSize on a host booted with default_hugepagesz=1G.
	DefaultPageSize uint64 `json:"default_page_size"`
	// THP is the selected mode of transparent_hugepage/enabled
	// ("always", "madvise", "never"), or "" if unknown.
	THP string `json:"thp"`
}

// NetlinkStatus says, per family, "ok" or why it could not be used.
type NetlinkStatus struct {
	Netdev  string `json:"netdev"`
	Ethtool string `json:"ethtool"`
}

// NIC is one network interface.
type NIC struct {
	Name    string `json:"name"`
	Ifindex int    `json:"ifindex"`
	// Driver is the bound driver's name ("" for virtual devices).
	Driver string `json:"driver"`
	// Virtual is true for software devices (lo, veth, bridges, ifb).
	Virtual   bool   `json:"virtual"`
	Operstate string `json:"operstate"`
	// SpeedMbps is the link speed, -1 when unknown.
	SpeedMbps int `json:"speed_mbps"`
	MTU       int `json:"mtu"`
	// NUMANode is the device's node, -1 when unknown or not NUMA.
	NUMANode int `json:"numa_node"`
	// LocalCPUs are the CPUs local to the device (all CPUs if unknown).
	LocalCPUs CPUSet `json:"local_cpus"`
	// DeviceGROFlushTimeout and DeviceDeferHardIRQs are the device-wide
	// sysfs values (gro_flush_timeout in ns, napi_defer_hard_irqs); -1 if
	// absent.
	DeviceGROFlushTimeout int64 `json:"gro_flush_timeout_ns"`
	DeviceDeferHardIRQs   int64 `json:"napi_defer_hard_irqs"`
	// DeviceThreaded is the device's sysfs threaded (Linux 5.12+): not 0
	// when its NAPI instances are polled by kernel threads; -1 if absent.
	DeviceThreaded int64     `json:"threaded"`
	RxQueues       []RxQueue `json:"rx_queues"`
	TxQueues       []TxQueue `json:"tx_queues"`
	// IRQs are all interrupts of the device, queue ones and others.
	IRQs []NICIRQ `json:"irqs"`
	// NAPIs are the NAPI instances from netlink; NAPIErr says why they are
	// missing when they are.
	NAPIs   []NAPI `json:"napis"`
	NAPIErr string `json:"napi_err,omitempty"`
	// EthtoolInfo holds coalescing, rings and channels.
	EthtoolInfo
}

// EthtoolInfo is what ethtool netlink reports about one interface:
// Coalesce, Rings and Channels, and in the *Err fields why one is missing
// (e.g. not supported by the driver).
type EthtoolInfo struct {
	Coalesce    Coalesce  `json:"coalesce,omitempty"`
	CoalesceErr string    `json:"coalesce_err,omitempty"`
	Rings       *Rings    `json:"rings,omitempty"`
	RingsErr    string    `json:"rings_err,omitempty"`
	Channels    *Channels `json:"channels,omitempty"`
	ChannelsErr string    `json:"channels_err,omitempty"`
}

// readEthtool asks src for the ethtool answers of ifindex.
func readEthtool(src NetlinkSource, ifindex int) EthtoolInfo {
	var e EthtoolInfo
	var err error
	e.Coalesce, err = src.Coalesce(ifindex)
	e.CoalesceErr = errString(err)
	e.Rings, err = src.Rings(ifindex)
	e.RingsErr = errString(err)
	e.Channels, err = src.Channels(ifindex)
	e.ChannelsErr = errString(err)
	return e
}

// errString returns err's text, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// RxQueue is one receive queue.
type RxQueue struct {
	Index int `json:"index"`
	// RPS is the rps_cpus mask; RPSRaw is the file's text.
	RPS    CPUSet `json:"rps"`
	RPSRaw string `json:"rps_raw"`
	// RPSFlowCnt is rps_flow_cnt.
	RPSFlowCnt int `json:"rps_flow_cnt"`
	// IRQ is the queue's interrupt, -1 when unknown.
	IRQ int `json:"irq"`
	// NAPIID is the NAPI instance serving it, 0 when unknown.
	NAPIID uint32 `json:"napi_id"`
}

// TxQueue is one transmit queue.
type TxQueue struct {
	Index int `json:"index"`
	// XPS is the xps_cpus mask; HasXPS is false when it cannot be read:
	// the kernel refuses (ENOENT) the xps_cpus of a device with one
	// transmit queue (eth0 here, virtio_net with one queue pair), and a
	// kernel without CONFIG_XPS has no such file.
	XPS    CPUSet `json:"xps"`
	HasXPS bool   `json:"has_xps"`
	IRQ    int    `json:"irq"`
	NAPIID uint32 `json:"napi_id"`
}

// NICIRQ is one interrupt of a device.
type NICIRQ struct {
	IRQ  int    `json:"irq"`
	Name string `json:"name"`
	// Affinity is smp_affinity_list; Effective is effective_affinity_list
	// (where the interrupt is actually delivered) when the kernel has it.
	Affinity  CPUSet `json:"affinity"`
	Effective CPUSet `json:"effective"`
	// Role is "rx", "tx", "rxtx" (a combined queue) or "other".
	Role string `json:"role"`
	// Queue is the queue index the interrupt serves, -1 for "other".
	Queue int `json:"queue"`
}

// Config configures Read. A nil *Config reads without netlink.
type Config struct {
	// Netlink answers the netlink queries. When nil, NAPI ids, per-NAPI
	// settings, coalescing, rings and channels are not read and
	// Host.Netlink says so.
	Netlink NetlinkSource
	// NetlinkStatus is copied into Host.Netlink when Netlink is set.
	NetlinkStatus NetlinkStatus
}

// SysctlNames lists the sysctls Read collects.
var SysctlNames = []string{
	"net.core.busy_poll", "net.core.busy_read", "net.core.netdev_budget",
	"net.core.netdev_budget_usecs", "net.core.netdev_max_backlog",
	"net.core.rps_sock_flow_entries", "net.core.dev_weight", "net.core.somaxconn",
	"net.ipv4.tcp_max_syn_backlog",
	"net.core.rmem_max", "net.core.wmem_max", "net.core.optmem_max",
	"vm.nr_hugepages", "kernel.numa_balancing",
}

// SysctlPath returns the /proc/sys path of a dotted sysctl name.
func SysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

type reader struct{ root string }

func (r reader) path(p string) string { return filepath.Join(r.root, filepath.FromSlash(p)) }

func (r reader) read(p string) (string, error) {
	b, err := os.ReadFile(r.path(p))
	return strings.TrimSpace(string(b)), err
}

func (r reader) readInt(p string, def int64) int64 {
	s, err := r.read(p)
	if err != nil {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return def
	}
	return n
}

// readCPUList reads and parses the CPU list file p; an error names the
// file.
func (r reader) readCPUList(p string) (CPUSet, error) {
	s, err := r.read(p)
	if err != nil {
		return nil, err
	}
	set, err := ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.path(p), err)
	}
	return set, nil
}

// Read discovers the host under root ("/" for the live host). On the live
// host, where this mount namespace shows no cgroup v2 hierarchy (as under
// `ip netns exec`) and the process has CAP_SYS_ADMIN, it mounts one on a
// temporary directory in a mount namespace of a thread of its own to read
// the cpuset partitions (Cpuset.Private); nothing else sees that mount.
func Read(root string, cfg *Config) (*Host, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	r := reader{root: root}
	h := &Host{Root: root, Sysctls: map[string]string{}}
	h.Kernel, _ = r.read("/proc/sys/kernel/osrelease")
	if err := r.cpus(h); err != nil {
		return nil, err
	}
	r.isolation(h)
	r.cpusetPartitions(h)
	for _, name := range SysctlNames {
		if v, err := r.read(SysctlPath(name)); err == nil {
			h.Sysctls[name] = v
		}
	}
	h.IrqbalancePID = IrqbalancePID(root)
	h.Memlock, _ = ReadMemlock(root, 0)
	h.HugePages = r.hugePages()
	if s, err := r.read("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		if i := strings.Index(s, "["); i >= 0 {
			if j := strings.Index(s[i:], "]"); j > 0 {
				h.HugePages.THP = s[i+1 : i+j]
			}
		}
	}
	if cfg.Netlink == nil {
		h.Netlink = NetlinkStatus{Netdev: "not queried", Ethtool: "not queried"}
	} else {
		h.Netlink = cfg.NetlinkStatus
	}
	// Without /proc/interrupts the device IRQs have no names, and only
	// netlink ties them to queues: a note, not a failure.
	irqs, err := ReadInterrupts(r.path("/proc/interrupts"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.Notes = append(h.Notes, fmt.Sprintf("%v: device IRQs are not named, so only netlink ties them to queues", err))
	}
	if err := r.nics(h, irqs, cfg.Netlink); err != nil {
		return nil, err
	}
	return h, nil
}

// hugePages reads the hugetlb pool of the size spindle maps buffers with
// (sys.HugePageSizeAt: the PMD size, else the default hugetlb size): its
// directory under /sys/kernel/mm/hugepages, else, without one (a captured
// tree that has none), /proc/meminfo's counts when they are of that size.
// meminfo counts only the default size's pages, which on a host booted
// with default_hugepagesz=1G are not the 2 MiB ones MapAnon asks for.
func (r reader) hugePages() HugePages {
	var m Meminfo
	if b, err := os.ReadFile(r.path("/proc/meminfo")); err == nil {
		m, _ = ParseMeminfo(b)
	}
	size := uint64(sys.HugePageSizeAt(r.root))
	hp := HugePages{PageSize: size, DefaultPageSize: m.HugePageSize}
	dir := fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB/", size>>10)
	if n := r.readInt(dir+"nr_hugepages", -1); n >= 0 {
		hp.Total = uint64(n)
		hp.Free = uint64(max(r.readInt(dir+"free_hugepages", 0), 0))
	} else if m.HugePageSize == size {
		hp.Total, hp.Free = m.HugePagesTotal, m.HugePagesFree
	}
	return hp
}

func (r reader) cpus(h *Host) error {
	online, err := r.readCPUList("/sys/devices/system/cpu/online")
	if err != nil {
		return fmt.Errorf("topo: online cpus: %w", err)
	}
	if online.Len() == 0 {
		return fmt.Errorf("topo: no online cpus")
	}
	h.Online = online
	if nodes, err := r.readCPUList("/sys/devices/system/node/online"); err == nil {
		for _, n := range nodes {
			cpus, err := r.readCPUList(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", n))
			if errors.Is(err, fs.ErrNotExist) {
				continue // offlined since node/online was read
			}
			if err != nil {
				return fmt.Errorf("topo: node %d: %w", n, err)
			}
			h.Nodes = append(h.Nodes, Node{ID: n, CPUs: cpus})
		}
	}
	if len(h.Nodes) == 0 {
		h.Nodes = []Node{{ID: 0, CPUs: online}}
	}
	nodeOf := map[int]int{}
	for _, n := range h.Nodes {
		for _, c := range n.CPUs {
			nodeOf[c] = n.ID
		}
	}
	for _, c := range online {
		base := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/", c)
		node, ok := nodeOf[c]
		if !ok {
			node = -1
		}
		cpu := CPU{ID: c, Node: node,
			Core:    int(r.readInt(base+"core_id", int64(c))),
			Die:     int(r.readInt(base+"die_id", 0)),
			Package: int(r.readInt(base+"physical_package_id", 0)),
		}
		sib, err := r.readCPUList(base + "thread_siblings_list")
		if err != nil || !sib.Contains(c) {
			sib = NewCPUSet(c)
		}
		cpu.Siblings = sib
		h.CPUs = append(h.CPUs, cpu)
	}
	return nil
}

// isolation reads isolcpus= and nohz_full=: the sets from sysfs when it
// has them, else from the command line. A command line this package
// cannot resolve (N or all without cpu/possible) is a note, not an error:
// sysfs has the domain and nohz_full sets on every kernel that has
// isolated CPUs.
//
// The domain set is sysfs "isolated" whenever the file exists, empty
// included, and nohz_full is sysfs's whenever its file exists: they are
// what the kernel took. The managed_irq set is the command line's only.
// Linux 4.0+ has "nohz_full" beside "isolated" only with CONFIG_NO_HZ_FULL;
// without it the kernel refuses nohz_full= and an isolcpus= with the nohz
// flag whole (housekeeping_setup), managed_irq included. A note names
// each isolation parameter the kernel ignores (ParseCmdline).
func (r reader) isolation(h *Host) {
	cmdline, _ := r.read("/proc/cmdline")
	sysIso, isoErr := r.readCPUList("/sys/devices/system/cpu/isolated")
	sysNohz, nohzErr := r.readCPUList("/sys/devices/system/cpu/nohz_full")
	nohzFull := !errors.Is(nohzErr, fs.ErrNotExist) || isoErr != nil
	iso, err := parseCmdline(cmdline, r.nrCPUs(), nohzFull)
	if err != nil {
		iso = Isolation{Domain: CPUSet{}, ManagedIRQ: CPUSet{}, NohzFull: CPUSet{}}
		h.Notes = append(h.Notes, fmt.Sprintf("kernel command line: %v; isolated and nohz_full CPUs are read from sysfs only, managed_irq isolation unknown", err))
	}
	if nohzErr == nil {
		iso.NohzFull = sysNohz
	}
	if isoErr == nil {
		iso.Domain = sysIso
	}
	for _, ig := range iso.Ignored {
		h.Notes = append(h.Notes, "kernel command line: the kernel ignores "+ig)
	}
	h.IsolatedDomain, h.IsolatedManagedIRQ, h.NohzFull = iso.Domain, iso.ManagedIRQ, iso.NohzFull
}

// nrCPUs is the kernel's nr_cpu_ids, one more than the last possible CPU
// (the N of a command line cpu list), or 0 when unknown.
func (r reader) nrCPUs() int {
	s, err := r.readCPUList("/sys/devices/system/cpu/possible")
	if err != nil || s.Len() == 0 {
		return 0
	}
	return s[s.Len()-1] + 1
}

// IrqbalancePID returns the pid of a running irqbalance under root's /proc
// ("/" for the live host), or 0: irqbalance rewrites IRQ affinities every
// 10 s, so it undoes a plan's. Any goroutine.
func IrqbalancePID(root string) int { return reader{root: root}.findProcess("irqbalance") }

// findProcess returns the pid of a process whose comm is name, or 0.
func (r reader) findProcess(name string) int {
	ents, err := os.ReadDir(r.path("/proc"))
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, err := r.read("/proc/" + e.Name() + "/comm"); err == nil && comm == name {
			return pid
		}
	}
	return 0
}

// resolve follows the symbolic links of a sysfs path inside the root, so
// that relative sysfs links work in fixture trees too. It returns the
// resolved path relative to the root, in slash form.
func (r reader) resolve(p string) (string, error) {
	full, err := filepath.EvalSymlinks(r.path(p))
	if err != nil {
		return "", err
	}
	rootAbs, err := filepath.EvalSymlinks(r.root)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(rootAbs, full)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%s resolves outside the root", p)
	}
	return "/" + filepath.ToSlash(rel), nil
}

func (r reader) nics(h *Host, irqs *Interrupts, nl NetlinkSource) error {
	ents, err := os.ReadDir(r.path("/sys/class/net"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("topo: %w", err)
	}
	for _, e := range ents {
		// Interfaces are (links to) directories; the bonding driver adds
		// the file bonding_masters beside them.
		if fi, err := os.Stat(r.path("/sys/class/net/" + e.Name())); err != nil || !fi.IsDir() {
			continue
		}
		nic, err := r.nic(e.Name(), h, irqs, nl)
		if err != nil {
			return err
		}
		h.NICs = append(h.NICs, nic)
	}
	sort.SliceStable(h.NICs, func(i, j int) bool {
		if h.NICs[i].Virtual != h.NICs[j].Virtual {
			return !h.NICs[i].Virtual
		}
		return h.NICs[i].Name < h.NICs[j].Name
	})
	return nil
}

func (r reader) nic(name string, h *Host, irqs *Interrupts, nl NetlinkSource) (NIC, error) {
	base := "/sys/class/net/" + name + "/"
	n := NIC{Name: name, NUMANode: -1, LocalCPUs: h.Online}
	n.Ifindex = int(r.readInt(base+"ifindex", 0))
	n.Operstate, _ = r.read(base + "operstate")
	n.SpeedMbps = int(r.readInt(base+"speed", -1))
	n.MTU = int(r.readInt(base+"mtu", 0))
	n.DeviceGROFlushTimeout = r.readInt(base+"gro_flush_timeout", -1)
	n.DeviceDeferHardIRQs = r.readInt(base+"napi_defer_hard_irqs", -1)
	n.DeviceThreaded = r.readInt(base+"threaded", -1)
	if real, err := r.resolve(base); err == nil {
		n.Virtual = strings.HasPrefix(real, "/sys/devices/virtual/")
	}
	var devDirs []string
	if dev, err := r.resolve(base + "device"); err == nil {
		devDirs = []string{dev, path.Dir(dev)}
		if drv, err := r.resolve(base + "device/driver"); err == nil {
			n.Driver = path.Base(drv)
		}
		for _, d := range devDirs {
			if v := r.readInt(d+"/numa_node", -2); v != -2 {
				n.NUMANode = int(v)
				break
			}
		}
		for _, d := range devDirs {
			if s, err := r.readCPUList(d + "/local_cpulist"); err == nil && s.Len() > 0 {
				n.LocalCPUs = s.Intersect(h.Online)
				break
			}
		}
	}
	qents, _ := os.ReadDir(r.path(base + "queues"))
	for _, q := range qents {
		qn := q.Name()
		if idx, ok := strings.CutPrefix(qn, "rx-"); ok {
			i, err := strconv.Atoi(idx)
			if err != nil {
				continue
			}
			rq := RxQueue{Index: i, IRQ: -1, RPSFlowCnt: int(r.readInt(base+"queues/"+qn+"/rps_flow_cnt", 0))}
			rq.RPSRaw, _ = r.read(base + "queues/" + qn + "/rps_cpus")
			rq.RPS, _ = ParseCPUMask(rq.RPSRaw)
			n.RxQueues = append(n.RxQueues, rq)
		} else if idx, ok := strings.CutPrefix(qn, "tx-"); ok {
			i, err := strconv.Atoi(idx)
			if err != nil {
				continue
			}
			tq := TxQueue{Index: i, IRQ: -1}
			if s, err := r.read(base + "queues/" + qn + "/xps_cpus"); err == nil {
				tq.HasXPS = true
				tq.XPS, _ = ParseCPUMask(s)
			}
			n.TxQueues = append(n.TxQueues, tq)
		}
	}
	slices.SortFunc(n.RxQueues, func(a, b RxQueue) int { return a.Index - b.Index })
	slices.SortFunc(n.TxQueues, func(a, b TxQueue) int { return a.Index - b.Index })

	irqDirs := devDirs
	if len(devDirs) > 0 && pciAddress.MatchString(path.Base(devDirs[0])) {
		// A PCI function's interrupts are its own msi_irqs; its parent
		// is a bridge or root port with interrupts of its own.
		irqDirs = devDirs[:1]
	}
	n.IRQs = r.deviceIRQs(irqDirs, irqs)
	// The order in which drivers spread queues over CPUs
	// (cpumask_local_spread): the device's node's CPUs, then the others.
	spread := append(slices.Clone(n.LocalCPUs), h.Online.Minus(n.LocalCPUs)...)
	ports := 0
	if len(devDirs) > 0 {
		ents, _ := os.ReadDir(r.path(devDirs[0] + "/net"))
		ports = len(ents)
	}
	driverQueueIRQs(n.Driver, n.Name, spread, ports, n.IRQs)
	for _, q := range n.IRQs {
		if rq := n.rxQueue(q.Queue); rq != nil && (q.Role == "rx" || q.Role == "rxtx") {
			rq.IRQ = q.IRQ
		}
		if tq := n.txQueue(q.Queue); tq != nil && (q.Role == "tx" || q.Role == "rxtx") {
			tq.IRQ = q.IRQ
		}
	}
	if nl != nil && n.Ifindex > 0 {
		r.netlinkNIC(&n, nl)
	}
	return n, nil
}

// netlinkNIC fills the netlink-derived fields. Netlink, when it answers,
// is authoritative for the queue → NAPI → IRQ mapping.
func (r reader) netlinkNIC(n *NIC, nl NetlinkSource) {
	napis, err := nl.NAPIs(n.Ifindex)
	if err != nil {
		n.NAPIErr = err.Error()
	}
	slices.SortFunc(napis, func(a, b NAPI) int { return int(a.ID) - int(b.ID) })
	n.NAPIs = napis
	irqOf := map[uint32]int{}
	for _, p := range napis {
		irqOf[p.ID] = p.IRQ
	}
	if qs, err := nl.Queues(n.Ifindex); err == nil {
		for _, q := range qs {
			irq, ok := irqOf[q.NAPIID]
			ok = ok && irq >= 0
			if q.Type == "rx" {
				if rq := n.rxQueue(q.ID); rq != nil {
					rq.NAPIID = q.NAPIID
					if ok {
						rq.IRQ = irq
					}
				}
			} else if tq := n.txQueue(q.ID); tq != nil {
				tq.NAPIID = q.NAPIID
				if ok {
					tq.IRQ = irq
				}
			}
		}
	} else if n.NAPIErr == "" {
		n.NAPIErr = err.Error()
	}
	n.EthtoolInfo = readEthtool(nl, n.Ifindex)
}

// rxQueue returns the receive queue with the given index, or nil.
func (n *NIC) rxQueue(index int) *RxQueue {
	for i := range n.RxQueues {
		if n.RxQueues[i].Index == index {
			return &n.RxQueues[i]
		}
	}
	return nil
}

// txQueue returns the transmit queue with the given index, or nil.
func (n *NIC) txQueue(index int) *TxQueue {
	for i := range n.TxQueues {
		if n.TxQueues[i].Index == index {
			return &n.TxQueues[i]
		}
	}
	return nil
}

// pciAddress matches a PCI function's sysfs directory name
// ("0000:3b:00.0"; fixtures spell ':' as '_').
var pciAddress = regexp.MustCompile(`^[0-9a-f]{4,8}[:_][0-9a-f]{2}[:_][0-9a-f]{2}\.[0-7]$`)

// queueName matches the queue part of common driver IRQ names:
// "virtio2-input.0", "ice-ens1f0-TxRx-3", "mlx5_comp3", "eth0-rx-2",
// "eth0-Tx-Rx-1" (ena), "mana_q3@pci:..." (mana), "eth0-q2" (be2net).
var queueName = regexp.MustCompile(`(?i)(txrx|rxtx|tx-rx|combined|comp|fp|input|output|rx|tx|queue|[-_]q)[-._]?(\d+)$`)

// mlx4Comp matches the completion event queue IRQs of mlx4 ("mlx4-%d@%s"
// with the EQ number; EQ 0 is the async one, "mlx4-async@pci:%s").
var mlx4Comp = regexp.MustCompile(`^mlx4-(\d+)$`)

// ClassifyIRQName returns the role ("rx", "tx", "rxtx" or "other") and the
// queue index of a device IRQ from its action name alone. Some drivers'
// names need the driver and the device's other IRQs too (gve, tg3, sfc):
// topo.Read classifies those.
func ClassifyIRQName(name string) (role string, queue int) {
	name, _, _ = strings.Cut(name, "@") // mlx5: "mlx5_comp3@pci:0000:3b:00.0"
	if strings.Contains(name, ":fdir-") || strings.Contains(name, ":ctrl-") {
		// The flow director vectors of i40e ("i40e-0000:3b:00.0:fdir-TxRx-0")
		// and ice ("ice-0000:af:00.0:ctrl-TxRx-0") serve no queue.
		return "other", -1
	}
	if m := mlx4Comp.FindStringSubmatch(name); m != nil {
		// mlx4 (mlx4_en_activate_cq, mlx4_assign_eq): ring i's
		// completion queues use the EQ of the first CPU of its affinity
		// hint, EQ cpu+1 (EQ 0 is the async one). By name alone, ring i
		// on CPU i; topo.Read maps it from the CPU order instead.
		q, err := strconv.Atoi(m[1])
		if err != nil || q < 1 || q > 1<<16 {
			return "other", -1
		}
		return "rxtx", q - 1
	}
	m := queueName.FindStringSubmatch(name)
	if m == nil {
		return "other", -1
	}
	q, err := strconv.Atoi(m[2])
	if err != nil || q > 1<<16 {
		return "other", -1
	}
	switch strings.ToLower(m[1]) {
	case "rx", "input":
		return "rx", q
	case "tx", "output":
		return "tx", q
	default:
		return "rxtx", q
	}
}

// gveBlock matches gve's notify block IRQs: "gve-ntfy-blk%d@pci:%s", and
// before Linux 6.1 "eth%d-ntfy-block.%d" (the format's %d left in).
var gveBlock = regexp.MustCompile(`^gve-ntfy-blk(\d+)@|-ntfy-block\.(\d+)$`)

// tg3Vector matches tg3's MSI-X vector IRQs ("%s-txrx-%d", "%s-rx-%d",
// "%s-tx-%d" with the interface and the vector).
var tg3Vector = regexp.MustCompile(`-(txrx|rx|tx)-(\d+)$`)

// driverQueueIRQs gives the role and queue of the IRQs whose names do not
// carry their queue index as is, from the driver and the device's other
// IRQs; it leaves the others as ClassifyIRQName has them.
//
//   - gve: notify block b serves transmit queue b in the first half of
//     the blocks and receive queue b-n/2 in the second (n blocks;
//     gve_tx_idx_to_ntfy, gve_rx_idx_to_ntfy).
//   - tg3: "eth0-txrx-1" is vector 1; with RSS, vector 0 takes link
//     events (named "eth0-0") or transmit queue 0 ("eth0-tx-0"), and
//     queue i is vector i+1.
//   - sfc: a channel that carries both directions is "<iface>-<n>"
//     (efx_get_channel_name; separate ones are "-rx-<n>" and "-tx-<n>",
//     XDP ones "-xdp-<n>" serve no netdev queue).
//   - mlx4: ring i asks for the EQ of CPU spread[i] (the i-th CPU of
//     cpumask_local_spread, the first of its affinity hint), EQ cpu+1
//     (mlx4_en_activate_cq): EQ e serves the ring whose CPU is e-1. A
//     ring whose EQ does not exist gets the least used one
//     (mlx4_assign_eq), which cannot be told; on a device with more than
//     one port (ports: the device's interfaces) the EQs are split
//     between the ports, and a ring's is shifted past the other ports'
//     or the least used: there every EQ is "other".
func driverQueueIRQs(driver, iface string, spread []int, ports int, irqs []NICIRQ) {
	blocks := 0
	for _, q := range irqs {
		if gveBlock.MatchString(q.Name) {
			blocks++
		}
	}
	for i := range irqs {
		q := &irqs[i]
		switch {
		case blocks > 0 && gveBlock.MatchString(q.Name):
			m := gveBlock.FindStringSubmatch(q.Name)
			b, err := strconv.Atoi(m[1] + m[2])
			switch {
			case err != nil || b >= blocks:
				q.Role, q.Queue = "other", -1
			case b < blocks/2:
				q.Role, q.Queue = "tx", b
			default:
				q.Role, q.Queue = "rx", b-blocks/2
			}
		case driver == "tg3":
			q.Role, q.Queue = "other", -1
			if m := tg3Vector.FindStringSubmatch(q.Name); m != nil {
				v, err := strconv.Atoi(m[2])
				if err == nil && v <= 1<<16 {
					q.Role, q.Queue = m[1], max(v-1, 0)
					if m[1] == "txrx" {
						q.Role = "rxtx"
					}
				}
			}
		case (driver == "mlx4_core" || driver == "mlx4_en") && strings.HasPrefix(q.Name, "mlx4-"):
			name, _, _ := strings.Cut(q.Name, "@")
			m := mlx4Comp.FindStringSubmatch(name)
			if m == nil {
				break
			}
			q.Role, q.Queue = "other", -1
			if e, err := strconv.Atoi(m[1]); err == nil && e >= 1 && ports == 1 {
				if i := slices.Index(spread, e-1); i >= 0 && i <= 1<<16 {
					q.Role, q.Queue = "rxtx", i
				}
			}
		case driver == "sfc" || driver == "sfc_siena" || driver == "sfc_falcon" || driver == "sfc-falcon":
			if n, ok := strings.CutPrefix(q.Name, iface+"-"); ok {
				if c, err := strconv.Atoi(n); err == nil && c >= 0 && c <= 1<<16 && n == strconv.Itoa(c) {
					q.Role, q.Queue = "rxtx", c
				}
			}
		}
	}
}

// deviceIRQs lists the interrupts of a device from the msi_irqs directory
// of the first of devDirs that has one, named and classified from
// /proc/interrupts.
func (r reader) deviceIRQs(devDirs []string, irqs *Interrupts) []NICIRQ {
	var nums []int
	for _, d := range devDirs {
		ents, err := os.ReadDir(r.path(d + "/msi_irqs"))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if v, err := strconv.Atoi(e.Name()); err == nil {
				nums = append(nums, v)
			}
		}
		break
	}
	slices.Sort(nums)
	var out []NICIRQ
	for _, num := range nums {
		q := NICIRQ{IRQ: num, Role: "other", Queue: -1}
		if irqs != nil {
			q.Name = irqs.IRQs[num].Name
		}
		q.Role, q.Queue = ClassifyIRQName(q.Name)
		q.Affinity, _ = r.readCPUList(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", num))
		q.Effective, _ = r.readCPUList(fmt.Sprintf("/proc/irq/%d/effective_affinity_list", num))
		out = append(out, q)
	}
	return out
}

// NIC returns the interface called name, or nil.
func (h *Host) NIC(name string) *NIC {
	for i := range h.NICs {
		if h.NICs[i].Name == name {
			return &h.NICs[i]
		}
	}
	return nil
}

// CPU returns the online CPU with the given id, or nil.
func (h *Host) CPU(id int) *CPU {
	for i := range h.CPUs {
		if h.CPUs[i].ID == id {
			return &h.CPUs[i]
		}
	}
	return nil
}

// PrimaryThreads returns, of the given CPUs, the first SMT thread of each
// core (the lowest-numbered sibling present in cpus).
func (h *Host) PrimaryThreads(cpus CPUSet) CPUSet {
	var out []int
	for _, c := range cpus {
		cpu := h.CPU(c)
		if cpu == nil {
			continue
		}
		first := c
		for _, s := range cpu.Siblings {
			if cpus.Contains(s) && s < first {
				first = s
			}
		}
		if first == c {
			out = append(out, c)
		}
	}
	return NewCPUSet(out...)
}

// HasSMT reports whether any core has more than one online thread.
func (h *Host) HasSMT() bool {
	for _, c := range h.CPUs {
		if c.Siblings.Intersect(h.Online).Len() > 1 {
			return true
		}
	}
	return false
}

// TuningCandidates returns the physical interfaces with receive queues,
// the ones a tuning plan considers by default.
func (h *Host) TuningCandidates() []string {
	var out []string
	for _, n := range h.NICs {
		if !n.Virtual && len(n.RxQueues) > 0 {
			out = append(out, n.Name)
		}
	}
	return out
}
