#!/usr/bin/env bash
# capture.sh DEST: copies, from this machine's /proc and /sys, exactly the
# files topo.Read reads into DEST (a fixture tree). Symbolic links under
# /sys/class/net are recreated as the same relative links, and their
# targets captured, so the fixture resolves like sysfs does. Only the
# CapEff line of /proc/self/status is kept, and only the cgroup lines of
# /proc/self/mountinfo. Then record the netlink
# answers beside it: go test ./topo -run CaptureNetlink -capture-netlink "$(realpath DEST)"
# (an absolute path: go test runs the test in topo/)
#
# Go module zips refuse ':' in file names, and sysfs PCI paths are full of
# them (pci0000:00/0000:00:03.0), so every ':' in a captured path and link
# target becomes '_'. topo never parses those names, only follows links.
set -euo pipefail
dest=${1:?usage: capture.sh DEST}
mkdir -p "$dest"

safe() { printf '%s' "$1" | tr ':' '_'; }
file() { # copy one file if readable
	local src=$1 out
	[ -r "$src" ] && [ -f "$src" ] || return 0
	out=$dest$(safe "$src")
	mkdir -p "$(dirname "$out")"
	cat "$src" >"$out" 2>/dev/null || rm -f "$out"
}
link() { # recreate one symbolic link
	local src=$1 out
	[ -L "$src" ] || return 0
	out=$dest$(safe "$src")
	mkdir -p "$(dirname "$out")"
	ln -sfn "$(safe "$(readlink "$src")")" "$out"
}
placeholder() { # make a directory exist (git keeps no empty directories)
	mkdir -p "$dest$(safe "$1")"
	touch "$dest$(safe "$1")/.keep"
}

for f in cmdline interrupts softirqs stat net/softnet_stat meminfo sys/kernel/osrelease \
	sys/vm/nr_hugepages sys/kernel/numa_balancing self/limits; do
	file /proc/$f
done
mkdir -p "$dest/proc/self"
grep '^CapEff:' /proc/self/status >"$dest/proc/self/status"
# cgroup v2 cpuset partitions: the mounts, which hierarchy each controller
# is on, the root's controllers and isolated CPUs, and each cgroup's
# partition state with its CPUs and those it asks for (topo walks only
# cgroups with cpuset files)
grep -E ' - cgroup2? ' /proc/self/mountinfo >"$dest/proc/self/mountinfo" || true
file /proc/cgroups
# The mount of the whole hierarchy (root field "/"), as topo takes it,
# else the first cgroup2 mount.
cg=$(awk '/ - cgroup2 / { if ($4 == "/") { print $5; found = 1; exit } if (first == "") first = $5 }
	END { if (!found && first != "") print first }' /proc/self/mountinfo)
if [ -n "$cg" ]; then
	file "$cg/cgroup.controllers"
	file "$cg/cpuset.cpus.isolated"
	find "$cg" -name cpuset.cpus.partition 2>/dev/null | while read -r p; do
		file "$p"
		file "$(dirname "$p")/cpuset.cpus.effective"
		file "$(dirname "$p")/cpuset.cpus"
		file "$(dirname "$p")/cpuset.cpus.exclusive"
	done
fi
for n in busy_poll busy_read netdev_budget netdev_budget_usecs netdev_max_backlog \
	rps_sock_flow_entries dev_weight somaxconn rmem_max wmem_max optmem_max; do
	file /proc/sys/net/core/$n
done
file /proc/sys/net/ipv4/tcp_max_syn_backlog
for d in /proc/irq/[0-9]*; do
	file "$d/smp_affinity_list"
	file "$d/effective_affinity_list"
	# One directory per handler, named as it: tune checks that a planned
	# IRQ still has its handler. A name with ':' (mlx5_comp0@pci:...) would
	# be captured as '_' and then name another handler: left out.
	for a in "$d"/*/; do
		case $a in *:*) continue ;; esac
		[ -d "$a" ] && placeholder "${a%/}"
	done
done
for p in /proc/[0-9]*; do
	[ "$(cat "$p/comm" 2>/dev/null)" = irqbalance ] && file "$p/comm"
done

s=/sys/devices/system
for f in online possible isolated nohz_full; do file $s/cpu/$f; done
for c in $s/cpu/cpu[0-9]*; do
	for f in core_id die_id physical_package_id thread_siblings_list; do
		file "$c/topology/$f"
	done
done
file $s/node/online
for n in $s/node/node[0-9]*; do file "$n/cpulist"; done
file /sys/kernel/mm/transparent_hugepage/enabled
file /sys/kernel/mm/transparent_hugepage/hpage_pmd_size
for h in /sys/kernel/mm/hugepages/hugepages-*; do
	file "$h/nr_hugepages"
	file "$h/free_hugepages"
done

for l in /sys/class/net/*; do
	# only links are interfaces: the bonding driver adds a file,
	# bonding_masters, which topo does not read as one
	[ -L "$l" ] || continue
	link "$l"
	d=$(readlink -f "$l")
	for f in ifindex operstate speed mtu gro_flush_timeout napi_defer_hard_irqs threaded \
		statistics/rx_dropped statistics/rx_missed_errors statistics/rx_fifo_errors \
		statistics/rx_packets; do
		file "$d/$f"
	done
	for q in "$d"/queues/*; do
		for f in rps_cpus rps_flow_cnt xps_cpus; do file "$q/$f"; done
		# a tx queue without xps_cpus (virtio_net) would be an empty
		# directory, which git drops: keep it so the queue is seen
		[ -n "$(ls -A "$dest$(safe "$q")" 2>/dev/null)" ] || placeholder "$q"
	done
	if [ -L "$d/device" ]; then
		link "$d/device"
		dev=$(readlink -f "$d/device")
		link "$dev/driver"
		placeholder "$(readlink -f "$dev/driver")"
		for x in "$dev" "$(dirname "$dev")"; do
			file "$x/numa_node"
			file "$x/local_cpulist"
			if [ -d "$x/msi_irqs" ]; then
				for i in "$x"/msi_irqs/*; do
					mkdir -p "$dest$(safe "$x")/msi_irqs"
					cat "$i" >"$dest$(safe "$i")" 2>/dev/null || touch "$dest$(safe "$i")"
				done
			fi
		done
	else
		placeholder "$d"
	fi
done
