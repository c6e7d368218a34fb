package memlocktest

import (
	"os"
	"os/exec"
	"path/filepath"
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
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop CAP_IPC_LOCK from a child's bounding set")
	}
	for _, tool := range []string{"setpriv", "prlimit"} {
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
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "spindle-memlock.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the lock after the subtest's cleanup: %v, want it free", err)
	}
}
