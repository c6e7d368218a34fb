package memlocktest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// TestCommandHeldAcrossCallsAndReleased: a test that makes several
// children (doctor's cases) holds the lock once, not once per call (a
// second bind of the name in the same process waits for the first
// forever); another process waits while it is held; and the lock is free
// again once the tests have cleaned up.
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
			// Another process's bind of the name, as this one's: refused
			// while this test holds it.
			if ln, err := tryLock(); ln != nil || err != nil {
				t.Errorf("the lock while held: %v %v, want it taken", ln, err)
				if ln != nil {
					ln.Close()
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the second Command of one test waited for the first's lock")
		}
	})
	ln, err := tryLock()
	if ln == nil || err != nil {
		t.Fatalf("the lock after the subtest's cleanup: %v, want it free", err)
	}
	ln.Close()
}

// TestCommandChild: the child runs under the limit without CAP_IPC_LOCK,
// as root (setpriv) and as a user without it (prlimit alone), where it
// ran only as root before, skipping elsewhere ("needs root to drop
// CAP_IPC_LOCK from a child's bounding set") though such a process has no
// CAP_IPC_LOCK to drop; and the lock is the user's own, not a file in
// /tmp another user made (root's, mode 0600, which this user could not
// open) and left behind.
func TestCommandChild(t *testing.T) {
	out, err := Command(t, 64<<10, "sh", "-c", "ulimit -Sl; ulimit -Hl; grep CapEff: /proc/self/status").Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 || f[0] != "64" || f[1] != "64" {
		t.Fatalf("child's RLIMIT_MEMLOCK (soft, hard KiB) and CapEff: %q, want 64 and 64", out)
	}
	if has, err := topo.ParseCapIPCLock([]byte("CapEff: " + f[3])); err != nil || has {
		t.Errorf("child's CapEff %s (%v): want CAP_IPC_LOCK clear", f[3], err)
	}
	if want := fmt.Sprintf("@spindle-memlock-%d", os.Getuid()); lockName() != want {
		t.Errorf("lock %s, want the user's %s", lockName(), want)
	}
}
