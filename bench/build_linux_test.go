package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildProcs returns the command lines of live processes whose
// environment holds mark.
func buildProcs(mark string) []string {
	want := []byte(mark + "\x00")
	var out []string
	ds, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range ds {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		out = append(out, d+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return out
}

// killPending reports whether the process at /proc/PID dir is gone or has
// SIGKILL pending (the kernel marks every thread of a group it kills).
func killPending(dir string) bool {
	st, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return true // gone
	}
	for line := range strings.Lines(string(st)) {
		name, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name != "SigPnd" && name != "ShdPnd" {
			continue
		}
		if m, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64); err == nil && m&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// goneAfter reports whether the process at /proc/PID dir is gone after d
// (a zombie, whose environ reads as empty, is gone).
func goneAfter(dir string, d time.Duration) bool {
	time.Sleep(d)
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	return err != nil || len(env) == 0
}

// TestBuildPeersCancelled cancels BuildPeers while go build compiles (a
// cold GOCACHE) and checks that once it returns nothing the build started
// runs on (a process still there must have SIGKILL pending) and go's work
// directory is gone. Found in review: cancelling
// killed only the go command; its compile and link children ran on as
// orphans and its work directory stayed in /tmp, on every interrupted
// `spindle bench`.
func TestBuildPeersCancelled(t *testing.T) {
	if _, err := FindPeers(""); err != nil {
		t.Skipf("no peers module source: %v", err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command in PATH to build the peers with")
	}
	out, tmp := t.TempDir(), t.TempDir()
	mark := "SPINDLE_TEST_BUILD=" + out
	t.Setenv("SPINDLE_TEST_BUILD", out) // inherited by go and what it starts
	t.Setenv("TMPDIR", tmp)             // where go's work directory goes by default
	t.Setenv("GOCACHE", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := BuildPeers(ctx, "", out); done <- err }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(strings.Join(buildProcs(mark), "\n"), "compile") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("go build started no compile in a minute")
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled build succeeded")
	}
	for _, p := range buildProcs(mark) {
		// SIGKILL acts when a process next runs: on a loaded machine a
		// compile can still be there, the signal pending, for a moment.
		// One dequeued it already is past its signal and gone in a moment.
		dir := strings.SplitN(p, ":", 2)[0]
		if !killPending(dir) && !goneAfter(dir, 100*time.Millisecond) {
			t.Errorf("left running after BuildPeers returned, not killed: %s", p)
		}
	}
	for _, dir := range []string{out, tmp} {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("left in %s: %v", dir, ents)
		}
	}
}
