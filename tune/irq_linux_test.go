//go:build linux

package tune

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/topo"
)

// TestIRQNamesLive checks, reading only, that the handler names a plan
// records for this host's queue IRQs are the kernel's /proc/irq/N/<name>
// directories: otherwise Apply would take every planned IRQ for another
// device's and refuse the plan as stale.
func TestIRQNamesLive(t *testing.T) {
	h, err := topo.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.TuningCandidates()) == 0 {
		t.Skip("no physical interface with queues to plan for")
	}
	p, err := MakePlan(h, PlanConfig{Policy: Inline})
	if err != nil {
		t.Fatal(err)
	}
	tgt := Target{Root: "/"}
	n := 0
	for _, w := range p.Writes {
		if !strings.HasPrefix(w.Path, "/proc/irq/") {
			continue
		}
		if w.IRQName == "" {
			t.Errorf("%s planned without its handler's name", w.Path)
			continue
		}
		n++
		if fi, err := os.Stat(filepath.Join(path.Dir(w.Path), w.IRQName)); err != nil || !fi.IsDir() {
			t.Errorf("%s: no handler directory %s (%v)", w.Path, w.IRQName, err)
		}
		if err := tgt.sameIRQ(w); err != nil {
			t.Errorf("%s (%s): %v", w.Path, w.IRQName, err)
		}
	}
	if n == 0 {
		t.Skip("the plan moves no IRQ here (already pinned, or no queue IRQs)")
	}
}
