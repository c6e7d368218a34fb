#!/usr/bin/env bash
# Runs its arguments as a command with the cpuset controller on cgroup v2,
# for the tests that make real cpuset partitions (tune's
# TestCpusetPartitionsOnKernel, TestNetNSViewSeesCpusetPartitions and
# TestNetNSApplyRevertWithCpusetPartition, topo's TestCpusetPartitionLive
# and TestCpusetPartitionReadWhereNoCgroup2Mounted, cmd/spindle's
# TestTuneInNetNSSeesCpusetPartitions), which skip where it is not. Where the controller sits on a cgroup v1 hierarchy of
# its own that holds no cgroup but its root (this project's VMs), the
# hierarchy is unmounted, which destroys it and lets the kernel offer the
# controller to cgroup v2, and mounted again afterwards, on failure too;
# the tests undo their own cgroups first. Anywhere else, or where the
# unmount fails, the command runs as things are. Needs root; scripts/test.sh runs it under CI=true only.
set -euo pipefail

v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ {print $2}' /proc/mounts)
cgroups=$(awk '$1 == "cpuset" {print $3}' /proc/cgroups)
v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
if [ -z "$v1" ] || [ "$(wc -l <<<"$v1")" -ne 1 ] || [ "$cgroups" != 1 ] || [ -z "$v2" ]; then
	echo "cpuset controller left where it is (cgroup v1 mounts: ${v1:-none}; its cgroups: ${cgroups:-?}; cgroup v2 at ${v2:-none})"
	exec "$@"
fi

restore() {
	# The controller cannot go back to v1 while any v2 cgroup enables it.
	if grep -qw cpuset "$v2/cgroup.subtree_control"; then
		echo -cpuset >"$v2/cgroup.subtree_control" || true
	fi
	# Removed cgroups die in the background: a few tries.
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		mount -t cgroup -o cpuset cgroup "$v1" 2>/dev/null && break
		sleep 0.5
	done
	if ! mountpoint -q "$v1"; then
		echo "could not mount the cpuset controller back on $v1 (cgroup v1): the host is left with it on cgroup v2 at $v2" >&2
		exit 1
	fi
	echo "cpuset controller back on cgroup v1 at $v1"
}
# A hierarchy something still holds (a process outside this one's view with
# a file open in it: EBUSY) cannot be unmounted; the command runs as things
# are, and the tests skip with their reasons.
if ! out=$(umount "$v1" 2>&1); then
	echo "cpuset controller left on cgroup v1 at $v1: umount failed (${out:-no message}): something outside holds the hierarchy"
	exec "$@"
fi
trap restore EXIT
# The hierarchy is destroyed in the background.
for _ in 1 2 3 4 5 6 7 8 9 10; do
	grep -qw cpuset "$v2/cgroup.controllers" && break
	sleep 0.5
done
grep -qw cpuset "$v2/cgroup.controllers" || echo "cpuset did not come to cgroup v2 at $v2 (its controllers: $(cat "$v2/cgroup.controllers")): the tests will skip"
echo "cpuset controller moved from cgroup v1 at $v1 to cgroup v2 at $v2 for: $*"
"$@"
