package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestMarkdownNotesEscaped: a note or skip reason carrying a tool's output
// (go build's "# package" lines, a compiler's "#include <liburing.h>")
// stays one list item of plain text: its later lines became headings and
// paragraphs outside the list, and "<liburing.h>" an HTML tag a Markdown
// renderer hides.
func TestMarkdownNotesEscaped(t *testing.T) {
	reason := "cannot build the peers binary in /src: exit status 1: # github.com/x/peers\n./main.go:3:2: undefined: *gnet*\n\ncc cannot preprocess #include <liburing.h>: exit status 1"
	rep := &Report{Kind: "bench", Topology: "loopback",
		Arms:  []ArmInfo{{Name: "gnet", Summary: "gnet", Skipped: reason}},
		Notes: []string{"arm gnet skipped: " + reason}}
	md := Markdown(rep)
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "# github.com") || strings.HasPrefix(line, "./main.go") || strings.HasPrefix(line, "cc cannot") {
			t.Errorf("a note's later line stands outside its list item: %q", line)
		}
	}
	if strings.Contains(md, "<liburing.h>") || strings.Contains(md, " *gnet*") {
		t.Errorf("Markdown markup in a note left unescaped:\n%s", md)
	}
	if !strings.Contains(md, "liburing.h") || !strings.Contains(md, "undefined") {
		t.Errorf("note text lost:\n%s", md)
	}
}
