package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadErrorNamesFile: a CPU list Read cannot parse fails naming the
// file it read and the value, so that `spindle tune inspect --root DIR`
// on a damaged capture says which file to look at. It said "topo: online
// cpus: cpu list ..." and "topo: node 0: cpu list ...", without the file.
func TestReadErrorNamesFile(t *testing.T) {
	for _, file := range []string{"sys/devices/system/cpu/online", "sys/devices/system/node/node0/cpulist"} {
		t.Run(file, func(t *testing.T) {
			root := copyFixture(t, "testdata/vm")
			path := filepath.Join(root, file)
			if err := os.WriteFile(path, []byte("0-x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(root, nil)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"0-x"`) {
				t.Errorf("Read = %v, want an error naming %s and the value", err, path)
			}
		})
	}
}

// TestReadMemlockErrorNamesFile: a limits or status file ReadMemlock
// cannot parse fails naming it (`spindle tune diagnose --pid N` printed
// "--pid N: limits: no memlock line", not which file).
func TestReadMemlockErrorNamesFile(t *testing.T) {
	for _, file := range []string{"proc/self/limits", "proc/self/status"} {
		t.Run(file, func(t *testing.T) {
			root := copyFixture(t, "testdata/vm")
			path := filepath.Join(root, file)
			if err := os.WriteFile(path, []byte("nothing here\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadMemlock(root, 0)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("ReadMemlock = %v, want an error naming %s", err, path)
			}
		})
	}
}

// TestReadInterruptsNoteNamesFile: a /proc/interrupts that Read cannot
// parse is a note naming the file under the root ("/proc/interrupts: ..."
// named the live host's).
func TestReadInterruptsNoteNamesFile(t *testing.T) {
	root := copyFixture(t, "testdata/vm")
	path := filepath.Join(root, "proc/interrupts")
	if err := os.WriteFile(path, []byte("nothing here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range h.Notes {
		found = found || strings.HasPrefix(n, path+": ")
	}
	if !found {
		t.Errorf("notes %q: none names %s", h.Notes, path)
	}
}
