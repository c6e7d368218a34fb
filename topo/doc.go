// Package topo discovers the host topology that matters for low-latency
// networking: CPUs with their cores, SMT siblings, dies, packages and NUMA
// nodes; isolated and nohz_full CPUs, from the boot command line and from
// cgroup v2 cpuset partitions; network interfaces with their queues,
// each queue's IRQ and affinity, RPS/XPS masks and flow counts; NAPI
// instances and their settings (from the kernel's netdev generic netlink
// family); coalescing, ring sizes and channels (from ethtool netlink); the
// busy-poll and backlog sysctls; irqbalance; the memlock limit; huge pages.
//
// Every /proc and /sys path is read relative to a root directory, so tests
// run against captured fixture trees under testdata/ as well as the live
// host (root "/"). Netlink is optional: when a family is absent or cannot be
// reached, discovery still succeeds and Host.Netlink says which part is
// missing and why.
//
// The package also holds the parsers for the kernel's counter files
// (/proc/interrupts, /proc/softirqs, /proc/stat, /proc/net/softnet_stat)
// that package tune samples. It never writes anything.
package topo
