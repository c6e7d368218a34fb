// Package memlocktest runs a test's child process as a process without
// CAP_IPC_LOCK under a given RLIMIT_MEMLOCK, where the kernel charges
// io_uring's rings, buffer rings and registered buffers to that limit.
package memlocktest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
	"golang.org/x/sys/unix"
)

// Command returns a command that runs name with args without CAP_IPC_LOCK
// under an RLIMIT_MEMLOCK of limit bytes (prlimit). Run as root, setpriv
// drops CAP_IPC_LOCK from the child's inherited and bounding sets; a
// process that is not root and lacks CAP_IPC_LOCK runs the child under
// prlimit alone, as the kernel already treats it so. It skips t where
// either tool is missing, where this process is not root but has
// CAP_IPC_LOCK (dropping it from the bounding set needs CAP_SETPCAP), and
// where limit is above this process's hard limit (raising it needs
// CAP_SYS_RESOURCE).
//
// Without CAP_IPC_LOCK the kernel charges io_uring memory to a count kept
// per user and compares that count, not the process's own, with the
// limit: every such process of the user shares it. go test runs packages
// in parallel, so the test processes that run such children (engine,
// bench, cmd/spindle) take turns: Command holds a lock of the user's
// from its call until t's cleanup, and a child that finds exactly one
// loop's room under its limit is not short of it because another
// package's child holds a ring. Other processes of the user without
// CAP_IPC_LOCK still count: where this process is not root, those are
// this test binary itself and the other packages' tests running beside
// it (Shared). Calls from one process share its hold (the lock is one
// bound socket). Call it from t's
// goroutine.
func Command(t testing.TB, limit uint64, name string, args ...string) *exec.Cmd {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skipf("needs prlimit(1): %v", err)
	}
	full := []string{"--memlock=" + strconv.FormatUint(limit, 10), name}
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skipf("needs setpriv(1): %v", err)
		}
		full = append([]string{"--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", prlimit}, full...)
		prlimit = setpriv
	} else {
		if hasCapIPCLock() {
			t.Skip("not root but with CAP_IPC_LOCK: dropping it from a child's bounding set needs CAP_SETPCAP (root)")
		}
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
			t.Fatal(os.NewSyscallError("getrlimit", err))
		}
		if lim.Max != unix.RLIM_INFINITY && limit > lim.Max {
			t.Skipf("RLIMIT_MEMLOCK's hard limit is %d KiB: raising it to %d KiB for a child needs CAP_SYS_RESOURCE (root)", lim.Max>>10, limit>>10)
		}
	}
	hold(t)
	return exec.Command(prlimit, append(full, args...)...)
}

// Shared reports why a child of Command may find less room under its
// limit than the limit: "" where this process is root (its children's
// count starts from the user's processes without CAP_IPC_LOCK, none in a
// test run), else the reason, for a test that needs exact room to skip
// with.
func Shared() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return fmt.Sprintf("not root: the kernel counts io_uring memory of processes without CAP_IPC_LOCK per user, and uid %d's count holds this test binary's rings and those of other packages' tests running beside it, so a child's room under its limit cannot be set exactly", os.Getuid())
}

// hasCapIPCLock reports whether CAP_IPC_LOCK is in this process's
// effective set (topo.ParseCapIPCLock on /proc/self/status; false where
// that is unreadable).
func hasCapIPCLock() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	has, err := topo.ParseCapIPCLock(status)
	return err == nil && has
}

// lockName is the user's lock, an abstract Unix socket's name, bound
// while held: the count it guards is the user's, and the kernel frees the
// name when its socket closes, also when the process dies, so nothing is
// left behind (a lock file in /tmp was, made 0600 by root's runs, which
// another user could not open).
func lockName() string {
	return fmt.Sprintf("@spindle-memlock-%d", os.Getuid())
}

// tryLock binds lockName: the listener while held, nil while another
// process holds it.
func tryLock() (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: lockName(), Net: "unix"})
	if errors.Is(err, unix.EADDRINUSE) {
		return nil, nil
	}
	return ln, err
}

// lock is this process's hold on the user's lock: its socket while held,
// and how many tests have yet to clean up.
var lock struct {
	mu    sync.Mutex
	ln    *net.UnixListener
	users int
}

// hold takes the user's lock for t, until t's cleanup, waiting while
// another process holds it.
func hold(t testing.TB) {
	lock.mu.Lock()
	defer lock.mu.Unlock()
	for lock.users == 0 && lock.ln == nil {
		ln, err := tryLock()
		if err != nil {
			t.Fatal(err)
		}
		if ln == nil {
			time.Sleep(10 * time.Millisecond)
		}
		lock.ln = ln
	}
	lock.users++
	t.Cleanup(func() {
		lock.mu.Lock()
		defer lock.mu.Unlock()
		if lock.users--; lock.users == 0 {
			lock.ln.Close()
			lock.ln = nil
		}
	})
}
