//go:build linux

package tune

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// TestStateReadableByService: the engine reads the loop CPUs of an applied
// plan from the state file (internal/tunestate, the default path
// /run/spindle/tune-state.json), and a proxy or server usually runs as a
// user of its own, not root. Apply made the directory 0700 and the file
// 0600, so such an engine got EACCES and put its loops on every CPU, the
// plan's loop CPUs ignored. The state holds nothing the host does not show
// every user in /proc and /sys; it stays writable by its owner only.
func TestStateReadableByService(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to read the state as another user")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("cat not installed")
	}
	// A directory every user may traverse, standing for /.
	root, err := os.MkdirTemp("", "spindle-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// Root's umask may be 077 on a hardened host: the directory saveState
	// creates is for every user all the same.
	for _, umask := range []int{0o022, 0o077} {
		state := filepath.Join(root, fmt.Sprintf("run%o/spindle/tune-state.json", umask))
		old := syscall.Umask(umask)
		err := saveState(state, &State{Version: 1, Root: "/", Plan: &Plan{Policy: Inline, LoopCPUs: topo.NewCPUSet(1, 3)}})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(filepath.Dir(state)), 0o755); err != nil { // /run
			t.Fatal(err)
		}
		want, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(cat, state)
		cmd.Dir = root
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("umask %o: the state read as uid 65534: %v %s", umask, err, stderr.Bytes())
		}
		for _, p := range []string{state, filepath.Dir(state)} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("umask %o: %s is %v: writable by others", umask, p, fi.Mode().Perm())
			}
		}
	}
}

// TestStateLockNotTakenByOtherUsers: Apply and Revert locked the state's
// directory, which every user may open (0755, so that services read the
// state), and flock needs no more than an open descriptor: any user could
// hold the lock (flock /run/spindle sleep 1d) and every spindle tune apply
// and revert was refused, saying another one was running. The lock is
// taken on a file beside the state that only its owner opens (0600), and
// a user holding the directory's flock stops nothing.
func TestStateLockNotTakenByOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to lock the state directory as another user")
	}
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock (util-linux) not installed")
	}
	dir, err := os.MkdirTemp("", "spindle-lock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // as makeStateDir makes it
		t.Fatal(err)
	}
	// uid 65534 takes the directory's lock and holds it until killed.
	cmd := exec.Command(flock, "--exclusive", dir, "sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; ; i++ {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
			break // uid 65534 holds it
		} else if err == nil {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		if i == 500 {
			t.Fatal("uid 65534 did not take the directory's lock in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	root := copyTree(t, fxVM)
	p, err := MakePlan(loadHost(t, root), PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "tune-state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatalf("Apply with another user holding the directory's lock: %v", err)
	}
	if _, _, err := Revert(state, Target{Root: root}); err != nil {
		t.Fatalf("Revert with another user holding the directory's lock: %v", err)
	}
}
