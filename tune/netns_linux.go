//go:build linux

package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
)

// InNetNS runs fn on a goroutine locked to an OS thread that has joined
// the network namespace at nsPath (e.g. /run/netns/NAME). Everything fn
// does on its own goroutine (opening /proc/sys/net files, netlink sockets,
// mounting sysfs) happens in that namespace; fn must not hand such work to
// other goroutines. Afterwards the thread is not unlocked: it exits with
// fn's goroutine (STYLE.md rule 5), so nothing fn changed on it reaches
// another goroutine. It is veth.InNetNS.
func InNetNS(nsPath string, fn func() error) error { return veth.InNetNS(nsPath, fn) }

// MountNetNSView makes dir a root for topo.Read and Target that shows the
// calling thread's network namespace: dir/sys is a fresh sysfs mount
// (sysfs shows the network devices of the namespace that mounted it) and
// dir/proc a bind mount of /proc (whose /proc/sys/net follows the
// namespace of the thread that opens it). A link dir/proc -> /proc would
// lead out of dir, which Target refuses to follow under a root other
// than "/". The fresh sysfs has an empty fs/cgroup, so the host's
// /sys/fs/cgroup, with the cgroup hierarchies mounted below it, is bound
// over it, and each cgroup v2 mount elsewhere that /proc/self/mountinfo
// lists (where topo reads them) is bound at its own path below dir
// (dir/mnt/cg for /mnt/cg; the directories are made, and left for the
// caller to remove with dir): the cgroup v2 cpuset partitions, which
// decide the CPUs a plan takes for isolated, are the host's whichever
// namespace is read. A cgroup v2 mount below /proc or elsewhere below
// /sys, whose place in the view is the view's own proc or sysfs, is not
// in it (nor is /sys/fs/cgroup on a kernel without cgroups).
// Call it, and the returned cleanup, from inside InNetNS. The mounts are
// made in a mount namespace of the calling thread's own (unshared here,
// receiving the host's mounts but sending none), so the rest of the host
// never sees them, and they go when the thread exits even if cleanup is
// never called. The thread stays locked to the goroutine so that it exits
// with it (InNetNS's threads do).
func MountNetNSView(dir string) (cleanup func() error, err error) {
	sys, proc := filepath.Join(dir, "sys"), filepath.Join(dir, "proc")
	for _, d := range []string{sys, proc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	runtime.LockOSThread() // never unlocked: the thread's mount namespace is its own
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return nil, os.NewSyscallError("unshare CLONE_NEWNS", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return nil, os.NewSyscallError("mount --make-rslave /", err)
	}
	if err := unix.Mount("sysfs", sys, "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, os.NewSyscallError("mount sysfs", err)
	}
	// ENOENT: a kernel without cgroups, whose sysfs has no fs/cgroup.
	if err := unix.Mount("/sys/fs/cgroup", filepath.Join(sys, "fs/cgroup"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil && !errors.Is(err, unix.ENOENT) {
		unix.Unmount(sys, unix.MNT_DETACH)
		return nil, os.NewSyscallError("mount --rbind /sys/fs/cgroup", err)
	}
	binds, err := bindCgroup2Elsewhere(dir)
	if err != nil {
		unmountAll(append(binds, sys))
		return nil, err
	}
	if err := unix.Mount("/proc", proc, "", unix.MS_BIND, ""); err != nil {
		unmountAll(append(binds, sys))
		return nil, os.NewSyscallError("mount --bind /proc", err)
	}
	return func() error {
		var errs []error
		for _, d := range append(binds, proc, sys) {
			if err := unix.Unmount(d, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", d, os.NewSyscallError("umount2", err)))
			}
		}
		return errors.Join(errs...)
	}, nil
}

// bindCgroup2Elsewhere binds each cgroup v2 mount that /proc/self/mountinfo
// lists outside /sys and /proc at its own path below dir, with the mounts
// below it, making the directory, and returns the mount points made in
// the view, the last first (an error's with them, for the caller to
// unmount). A mount below one bound already is in the view with it, and
// one that holds dir or lies in it is left out; so is one not in the
// calling thread's mount namespace (ENOENT), as /sys/fs/cgroup is on a
// kernel without cgroups.
func bindCgroup2Elsewhere(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	skip := []string{"/sys", "/proc", dir}
	var made []string
	for _, m := range topo.ParseCgroup2Mounts(b) {
		p := filepath.Clean(m.Point)
		if !filepath.IsAbs(p) || underAny(p, skip...) || underAny(dir, p) {
			continue
		}
		target := filepath.Join(dir, p)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return made, err
		}
		if err := unix.Mount(p, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return made, os.NewSyscallError("mount --rbind "+p, err)
		}
		made = append([]string{target}, made...)
		skip = append(skip, p)
	}
	return made, nil
}

// underAny says whether the clean absolute path p is one of dirs or below
// one.
func underAny(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// unmountAll detaches the mounts at paths, in their order.
func unmountAll(paths []string) {
	for _, p := range paths {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}

// netnsCookie returns the cookie of the calling thread's network
// namespace (SO_NETNS_COOKIE, Linux 5.14+), 0 where it cannot be read. A
// cookie is never given to another namespace, where the namespace's inode
// number is, once the namespace is gone.
func netnsCookie() uint64 {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0
	}
	return c
}
