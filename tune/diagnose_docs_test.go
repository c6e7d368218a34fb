package tune

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestFindingsCiteShippedDocs: a finding that points the reader to a
// document names one the repository has. busy-poll-unset cited
// "KERNEL.md", a note of the project's own machines that is not in the
// repository, for figures docs/TUNING.md has, and said they were
// "measured here" on whatever host ran the diagnosis.
func TestFindingsCiteShippedDocs(t *testing.T) {
	h := loadHost(t, fxVM)
	a, b := snapshots(t, fxVM, h)
	doc := regexp.MustCompile(`[A-Za-z0-9_./-]*\.md\b`)
	here := regexp.MustCompile(`(?i)measured here`)
	fs := Diagnose(h, a, b, Options{})
	if !slices.Contains(ids(fs), "busy-poll-unset") {
		t.Fatalf("busy-poll-unset not found (got %v): the fixture no longer tests it", ids(fs))
	}
	for _, f := range fs {
		for _, text := range append([]string{f.Title, f.Fix}, f.Evidence...) {
			for _, name := range doc.FindAllString(text, -1) {
				if _, err := os.Stat(filepath.Join("..", name)); err != nil {
					t.Errorf("%s cites %s, which the repository does not have: %q", f.ID, name, text)
				}
			}
			if here.MatchString(text) {
				t.Errorf("%s says figures of the project's machines were measured on this host: %q", f.ID, text)
			}
		}
	}
}
