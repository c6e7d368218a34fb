package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestBuildPeersCancelled cancels BuildPeers while go build compiles (a
// cold GOCACHE) and checks that once it returns nothing the build started
// runs on and go's work directory is gone. Found in review: cancelling
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
		t.Errorf("left running after BuildPeers returned: %s", p)
	}
	for _, dir := range []string{out, tmp} {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("left in %s: %v", dir, ents)
		}
	}
}
