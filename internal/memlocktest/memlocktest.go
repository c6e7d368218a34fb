// Package memlocktest runs a test's child process as a process without
// CAP_IPC_LOCK under a given RLIMIT_MEMLOCK, where the kernel charges
// io_uring's rings, buffer rings and registered buffers to that limit.
package memlocktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Command returns a command that runs name with args without CAP_IPC_LOCK
// (setpriv drops it from the inherited and bounding sets) under an
// RLIMIT_MEMLOCK of limit bytes (prlimit). It skips t when the process is
// not root or either tool is missing.
//
// Without CAP_IPC_LOCK the kernel charges io_uring memory to a count kept
// per user and compares that count, not the process's own, with the
// limit: every such process of the user shares it. go test runs packages
// in parallel, so the test processes that run such children (engine,
// bench, cmd/spindle) take turns: Command holds a lock file from its call
// until t's cleanup, and a child that finds exactly one loop's room under
// its limit is not short of it because another package's child holds a
// ring. Other processes of the user without CAP_IPC_LOCK still count.
// Calls from one process share its hold (the lock is one open file,
// flock(2) locks being per open file). Call it from t's goroutine.
func Command(t testing.TB, limit uint64, name string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop CAP_IPC_LOCK from a child's bounding set")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("needs setpriv(1): %v", err)
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skipf("needs prlimit(1): %v", err)
	}
	hold(t)
	full := append([]string{"--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", prlimit, "--memlock=" + strconv.FormatUint(limit, 10), name}, args...)
	return exec.Command(setpriv, full...)
}

// lock is this process's hold on the lock file: the file while held, and
// how many tests have yet to clean up.
var lock struct {
	mu    sync.Mutex
	file  *os.File
	users int
}

// hold takes the lock file for t, until t's cleanup.
func hold(t testing.TB) {
	lock.mu.Lock()
	defer lock.mu.Unlock()
	if lock.users == 0 {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "spindle-memlock.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			t.Fatal(err)
		}
		lock.file = f
	}
	lock.users++
	t.Cleanup(func() {
		lock.mu.Lock()
		defer lock.mu.Unlock()
		if lock.users--; lock.users == 0 {
			lock.file.Close()
			lock.file = nil
		}
	})
}
