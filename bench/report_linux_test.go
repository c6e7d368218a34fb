package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteReportFailureKeepsOldReport: a report write that fails part way
// (a full disk; here the file size limit, RLIMIT_FSIZE, at 100 bytes)
// leaves the previous report whole and no temporary files: each file was
// truncated and rewritten in place, so a failed or interrupted write left a
// half report.json that ReadReport could not parse.
func TestWriteReportFailureKeepsOldReport(t *testing.T) {
	dir := t.TempDir()
	rep := func(arm string) *Report {
		return &Report{Schema: SchemaVersion, Kind: "bench", Topology: "loopback", Started: time.Unix(0, 0).UTC(),
			Results: []Result{{Arm: arm, Mode: "closed", Rep: 1, AchievedRPS: 1000, Requests: 1000, Spectrum: NewHistogram().Spectrum()}}}
	}
	if err := WriteReport(dir, rep("old")); err != nil {
		t.Fatal(err)
	}
	names := []string{ReportJSON, ReportMarkdown, ReportHTML}
	old := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		old[n] = b
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	small := lim
	small.Cur = 100
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &small); err != nil {
		t.Fatal(err)
	}
	err := WriteReport(dir, rep("new"))
	if rerr := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("WriteReport succeeded past a 100-byte file size limit")
	}
	t.Logf("WriteReport: %v", err)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, old[n]) {
			t.Errorf("%s: %d bytes after the failed write, want the old %d", n, len(b), len(old[n]))
		}
	}
	if _, err := ReadReport(filepath.Join(dir, ReportJSON)); err != nil {
		t.Errorf("the old report no longer reads: %v", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !slices.Contains(names, e.Name()) {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
