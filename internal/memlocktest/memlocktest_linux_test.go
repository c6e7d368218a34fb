package memlocktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCommandHeldAcrossCallsAndReleased: a test that makes several
// children (doctor's cases) holds the lock once, not once per call (a
// second flock on another open file of the same process waits for the
// first forever), and the lock is free again once the tests have cleaned up.
func TestCommandHeldAcrossCallsAndReleased(t *testing.T) {
	// Command's own skips, here on the test's goroutine.
	tools := []string{"prlimit"}
	if os.Geteuid() == 0 {
		tools = append(tools, "setpriv")
	} else if hasCapIPCLock() {
		t.Skip("not root but with CAP_IPC_LOCK: dropping it from a child's bounding set needs CAP_SETPCAP (root)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s(1): %v", tool, err)
		}
	}
	done := make(chan struct{})
	t.Run("twice", func(t *testing.T) {
		go func() {
			defer close(done)
			for range 2 {
				Command(t, 64<<10, "true")
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the second Command of one test waited for the first's lock")
		}
	})
	f, err := os.OpenFile(lockPath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the lock after the subtest's cleanup: %v, want it free", err)
	}
}

// TestCommandChild: the child runs under the limit without CAP_IPC_LOCK,
// as root (setpriv) and as a user without it (prlimit alone), where it
// ran only as root before, skipping elsewhere ("needs root to drop
// CAP_IPC_LOCK from a child's bounding set") though such a process has no
// CAP_IPC_LOCK to drop; and the lock is the user's own file, not one
// another user made (root's, mode 0600, which this user cannot open).
func TestCommandChild(t *testing.T) {
	out, err := Command(t, 64<<10, "sh", "-c", "ulimit -Sl; ulimit -Hl; grep CapEff: /proc/self/status").Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 || f[0] != "64" || f[1] != "64" {
		t.Fatalf("child's RLIMIT_MEMLOCK (soft, hard KiB) and CapEff: %q, want 64 and 64", out)
	}
	eff, err := strconv.ParseUint(f[3], 16, 64)
	if err != nil || eff&(1<<capIPCLock) != 0 {
		t.Errorf("child's CapEff %s (%v): want CAP_IPC_LOCK (bit %d) clear", f[3], err, capIPCLock)
	}
	if want := fmt.Sprintf("spindle-memlock-%d.lock", os.Getuid()); filepath.Base(lockPath()) != want {
		t.Errorf("lock file %s, want the user's %s", lockPath(), want)
	}
}
