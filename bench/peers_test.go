package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestBuildPeersIgnoresWorkspace: the peers binary builds from its nested
// module's go.mod also when the user works in a Go workspace that lists
// only the spindle module (GOWORK, or a go.work above the source tree):
// go build refused it ("main module does not contain package").
func TestBuildPeersIgnoresWorkspace(t *testing.T) {
	src, err := FindPeers("")
	if err != nil {
		t.Skipf("no peers module source here: %v", err)
	}
	if _, err := BuildPeers(context.Background(), src, t.TempDir()); err != nil {
		t.Skipf("the peers binary cannot be built here (its dependencies, or go, missing): %v", err)
	}
	work := filepath.Join(t.TempDir(), "go.work")
	if err := os.WriteFile(work, []byte("go 1.26.0\n\nuse "+filepath.Dir(filepath.Dir(src))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", work)
	if _, err := BuildPeers(context.Background(), src, t.TempDir()); err != nil {
		t.Fatalf("in a workspace of the spindle module: %v", err)
	}
}
