package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/tune"
)

// TestTuneRevertIncompleteShowsNotes: a revert that cannot restore one
// value fails, and its error says "(and 1 target(s) gone, see the
// notes)". The notes (the targets gone, the values changed since the
// apply) must then be printed: the operator has nothing else to go on.
func TestTuneRevertIncompleteShowsNotes(t *testing.T) {
	root := hostCopy(t, tuneFixture)
	planJSON, err := tuneRun(t, "plan", "--root", root, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var p tune.Plan
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, w := range p.Writes {
		if w.Kind == tune.KindFile {
			files = append(files, w.Path)
		}
	}
	if len(files) < 3 {
		t.Fatalf("plan has %d file writes, the test needs 3", len(files))
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state.json")
	if out, err := tuneRun(t, "apply", "--root", root, "--plan", planFile, "--state", state); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	gone, drifted, broken := files[0], files[1], ""
	for _, f := range files {
		if strings.HasPrefix(f, "/sys/") {
			broken = f
			break
		}
	}
	if broken == "" {
		t.Fatalf("plan writes nothing under /sys: %q", files)
	}
	if err := os.Remove(filepath.Join(root, gone)); err != nil {
		t.Fatal(err)
	}
	// A target that exists but takes no write.
	if err := os.Remove(filepath.Join(root, broken)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, broken), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, drifted), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := tuneRun(t, "revert", "--state", state)
	if err == nil || !strings.Contains(err.Error(), "see the notes") {
		t.Fatalf("revert: %v, want an incomplete revert that points to the notes", err)
	}
	for _, want := range []string{gone, drifted} {
		if !strings.Contains(out, want) {
			t.Errorf("revert output does not name %s; error %q, output:\n%s", want, err, out)
		}
	}
}
