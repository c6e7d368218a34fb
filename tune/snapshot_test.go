package tune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTakeSnapshotErrorNamesFile: a counter file TakeSnapshot cannot parse
// fails naming the file it read, under the root, so that `spindle tune
// diagnose --root DIR` on a damaged capture says which file to look at.
// It said "/proc/softirqs: ...", the live host's file, and for
// softnet_stat "softnet_stat line 0: ...".
func TestTakeSnapshotErrorNamesFile(t *testing.T) {
	for _, file := range []string{"proc/interrupts", "proc/softirqs", "proc/stat", "proc/net/softnet_stat"} {
		t.Run(file, func(t *testing.T) {
			root := copyTree(t, fxVM)
			h := loadHost(t, root)
			path := filepath.Join(root, file)
			if err := os.WriteFile(path, []byte("nothing here\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := TakeSnapshot(root, h, nil)
			if err == nil || !strings.HasPrefix(err.Error(), path+": ") || strings.Count(err.Error(), file) != 1 {
				t.Errorf("TakeSnapshot = %v, want an error that names %s once", err, path)
			}
		})
	}
}
