package tune

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
