package bench

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStartPinnedDiesWithHarness: a program started with startPinned
// (haproxy, nginx, h2load: each the leader of a process group of its own,
// which the harness's stdin does not end) is killed when the harness dies
// without stopping it (SIGKILL, a Go fatal error), not left running,
// pinned, to skew the next run; and not before: locked threads that exit
// in the harness meanwhile do not end it.
func TestStartPinnedDiesWithHarness(t *testing.T) {
	skipUnlessLinux(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := exec.Command(exe, "-test.run=^$")
	h.Env = append(os.Environ(), orphanChildEnv+"=1")
	out, err := h.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	defer h.Wait()
	defer h.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("the harness said %q (%v)", line, err)
	}
	defer unix.Kill(pid, unix.SIGKILL) // (if the test fails: it is ours)
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("the program died while its harness ran, after locked threads exited: %v", err)
	}
	h.Process.Kill()
	h.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("program %d still runs 10 s after its harness was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
