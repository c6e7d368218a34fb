//go:build linux

package topo

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// initCgroupNS is the inode number of the initial cgroup namespace
// (PROC_CGROUP_INIT_INO, include/linux/proc_ns.h), as
// /proc/PID/ns/cgroup links to it.
const initCgroupNS = "cgroup:[4026531835]"

// readCpusetPrivately reads the cpuset state, as readCpuset does, from a
// cgroup v2 mount of its own: on a goroutine locked to an OS thread that
// unshares its mount namespace and makes every mount in it private, so
// that nothing mounted there propagates to the host's, it mounts cgroup2
// on a temporary directory and reads there. The thread is never unlocked
// (STYLE.md rule 5): it exits with the goroutine, and the namespace and
// the mount go with it (the directory, empty in the host's namespace, is
// removed here even before: the kernel then detaches what is mounted on
// it elsewhere). The mount is read-only. It shows the hierarchy from the root of the
// thread's cgroup namespace: in a namespace other than the initial one,
// only that subtree, which Source then says. It needs CAP_SYS_ADMIN;
// Source says where the state came from, and an error why there is none.
func readCpusetPrivately(h *Host) error {
	dir, err := os.MkdirTemp("", "spindle-cgroup2-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	errc := make(chan error, 1)
	go sys.LockedThread(func() {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- os.NewSyscallError("unshare CLONE_NEWNS", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- os.NewSyscallError("mount --make-rprivate /", err)
			return
		}
		if err := unix.Mount("cgroup2", dir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
			errc <- os.NewSyscallError("mount cgroup2", err)
			return
		}
		// A mount made in the thread's cgroup namespace shows its root,
		// which mountinfo and /proc/PID/cgroup, as this process reads
		// them, give as "/".
		reader{root: "/"}.readCpuset(h, Cgroup2Mount{Point: dir, Root: "/"})
		h.Cpuset.Private = true
		h.Cpuset.Source += " (cgroup2 mounted privately: none visible in this mount namespace)"
		if ns, err := os.Readlink("/proc/thread-self/ns/cgroup"); err == nil && ns != initCgroupNS {
			h.Cpuset.Source += "; in a cgroup namespace other than the initial one (" + ns + "), which shows only its own subtree of the hierarchy: partitions outside it are not seen"
		}
		errc <- nil
	})
	return <-errc
}
