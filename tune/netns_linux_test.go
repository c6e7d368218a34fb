package tune

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/topo"
)

// TestMountNetNSViewPrivate checks that the sysfs mount MountNetNSView
// makes is seen by the calling thread only: a process started from
// another goroutine (so forked from another thread) while the view is
// mounted does not see it. Found in review: it was mounted in the shared
// mount namespace, visible host-wide while it existed and left behind if
// the process died before the cleanup. The view's /proc must open within
// the view, as Target opens a root's files: it was a link to /proc, out
// of the view.
func TestMountNetNSViewPrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount sysfs and unshare a mount namespace")
	}
	view := t.TempDir()
	sys := filepath.Join(view, "sys")
	mounted, seen := make(chan struct{}), make(chan string, 1)
	go func() {
		<-mounted
		out, err := exec.Command("cat", "/proc/self/mountinfo").Output()
		if err != nil {
			seen <- "error: " + err.Error()
			return
		}
		seen <- string(out)
	}()
	err := InNetNS("/proc/self/ns/net", func() error {
		cleanup, err := MountNetNSView(view)
		if err != nil {
			close(mounted)
			return err
		}
		mine, err := os.ReadFile("/proc/thread-self/mountinfo")
		close(mounted)
		other := <-seen
		if err != nil {
			return err
		}
		if !strings.Contains(string(mine), " "+sys+" ") {
			t.Errorf("the calling thread does not see its mount on %s", sys)
		}
		if strings.HasPrefix(other, "error: ") || strings.Contains(other, " "+sys+" ") {
			t.Errorf("the mount on %s is visible outside the calling thread (%.60s)", sys, other)
		}
		if _, err := os.Stat(filepath.Join(sys, "class", "net", "lo")); err != nil {
			t.Errorf("the view shows no loopback device: %v", err)
		}
		// Its /proc is read as Target reads a root other than "/", which
		// follows no link out of it.
		if f, err := openUnder(view, filepath.Join(view, "proc/sys/net/core/somaxconn"), os.O_RDONLY); err != nil {
			t.Errorf("the view's /proc/sys cannot be opened within it: %v", err)
		} else {
			f.Close()
		}
		return cleanup()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// elsewhereEnv, set to a directory, makes the test that
// TestMountNetNSViewSeesCgroup2Elsewhere runs in a process of its own the
// child: it mounts cgroup2 below the directory and reads the host both
// directly and through the view.
const elsewhereEnv = "SPINDLE_TUNE_CGROUP2_ELSEWHERE"

// TestMountNetNSViewSeesCgroup2Elsewhere: a cgroup v2 hierarchy mounted
// outside /sys/fs/cgroup (here the only one, at a temporary directory
// whose name has a space, which mountinfo escapes) must be in the view as
// it is on the host, so that the view's cpuset state (the partitions,
// which decide the CPUs a plan takes for isolated) is the host's. The
// view bound only /sys/fs/cgroup, while the read through it found the
// mount in /proc/self/mountinfo and looked for it below the view: it said
// "cgroup.controllers: no such file or directory" and read no cpuset
// state. The test runs in a process with a mount namespace of its own
// (unshare --mount, propagating nothing back) whose cgroup2 mounts are
// unmounted, and unmounts the one it makes.
func TestMountNetNSViewSeesCgroup2Elsewhere(t *testing.T) {
	if dir := os.Getenv(elsewhereEnv); dir != "" {
		cgroup2ElsewhereChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to unshare a mount namespace and mount cgroup2")
	}
	for _, c := range []string{"unshare", "sh", "umount", "awk"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("running the test in a mount namespace of its own needs %s (util-linux): %v", c, err)
		}
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\tcgroup2\n") {
		t.Skipf("the kernel has no cgroup2 filesystem (not in /proc/filesystems): %v", err)
	}
	name := "TestMountNetNSViewSeesCgroup2Elsewhere"
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`for m in $(awk '$(NF-2) == "cgroup2" {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || exit; done; exec "$@"`, "sh",
		os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	// A race-enabled binary sleeps a second at exit unless told not to.
	cmd.Env = append(os.Environ(), elsewhereEnv+"="+t.TempDir(),
		strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a mount namespace with cgroup2 mounted elsewhere: %v\n%s", name, err, out)
	}
	if _, why, ok := strings.Cut(string(out), "--- SKIP: "+name); ok {
		t.Skipf("in a mount namespace of its own:%s", why)
	}
	t.Logf("%s", out)
}

// cgroup2ElsewhereChild, in the child of
// TestMountNetNSViewSeesCgroup2Elsewhere, mounts cgroup2 below dir, reads
// the host directly and through MountNetNSView, and wants the same cpuset
// state from both.
func cgroup2ElsewhereChild(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if m := topo.ParseCgroup2Mounts(b); len(m) > 0 {
		t.Fatalf("cgroup2 mounts left in the test's mount namespace: %+v", m)
	}
	point := filepath.Join(dir, "cgroup 2")
	if err := os.Mkdir(point, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("cgroup2", point, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Skipf("cannot mount cgroup2 in a mount namespace of its own: %v", os.NewSyscallError("mount", err))
	}
	defer func() {
		if err := unix.Unmount(point, 0); err != nil {
			t.Errorf("unmount %s: %v", point, os.NewSyscallError("umount2", err))
		}
	}()
	host, err := topo.Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if host.Cpuset.Mount != point || host.Cpuset.MountRoot != "/" {
		t.Fatalf("the host read directly: cgroup v2 mount %q showing %q (%s), want %q showing the whole hierarchy", host.Cpuset.Mount, host.Cpuset.MountRoot, host.Cpuset.Source, point)
	}
	var view *topo.Host
	root := t.TempDir()
	err = inNetNSView("/proc/self/ns/net", root, func() error {
		h, err := topo.Read(root, nil)
		view = h
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the host's cpuset: %+v", host.Cpuset)
	if !reflect.DeepEqual(view.Cpuset, host.Cpuset) || !view.IsolatedPartition.Equal(host.IsolatedPartition) {
		t.Errorf("through the view: cpuset %+v, isolated by partitions %s; want the host's, %+v and %s", view.Cpuset, view.IsolatedPartition, host.Cpuset, host.IsolatedPartition)
	}
}
