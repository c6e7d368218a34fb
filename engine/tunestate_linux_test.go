package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestTuneStateCPUs checks where the loops go by default: the CPUs an
// applied `spindle tune` plan set aside, as far as the process may run on
// them, and every allowed CPU otherwise; explicit CPUs win, and "-" does
// not look.
func TestTuneStateCPUs(t *testing.T) {
	allowed := allowedCPUList(t)
	dir := t.TempDir()
	state := func(name, loopCPUs string) string {
		p := filepath.Join(dir, name)
		body := fmt.Sprintf(`{"version":1,"root":"/","plan":{"policy":"inline","loop_cpus":%q,"writes":[]},"before":[]}`, loopCPUs)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	last := allowed[len(allowed)-1]
	tuned := state("tuned.json", strconv.Itoa(last))
	corrupt := filepath.Join(dir, "corrupt.json")
	if err := os.WriteFile(corrupt, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []int
		logs string // a log line containing this, or "" for none about the state
	}{
		{"tuned", Config{TuneState: tuned}, []int{last}, "set aside by spindle tune"},
		{"explicit CPUs win", Config{TuneState: tuned, CPUs: []int{allowed[0]}}, []int{allowed[0]}, ""},
		{"no state file", Config{TuneState: filepath.Join(dir, "none.json")}, allowed, ""},
		{"not looking", Config{TuneState: "-"}, allowed, ""},
		{"corrupt state", Config{TuneState: corrupt}, allowed, "ignoring the spindle tune state"},
		{"tuned CPUs not allowed", Config{TuneState: state("elsewhere.json", "8000")}, allowed, "affinity mask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logLines
			cfg := tc.cfg
			cfg.Logf = logs.logf
			e := newEngine(t, &cfg, &echoHandler{})
			defer e.Shutdown(t.Context())
			var got []int
			for _, l := range e.Loops() {
				got = append(got, l.CPU())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("loops on CPUs %v, want %v (logs %q)", got, tc.want, logs.all())
			}
			if tc.logs != "" && logs.count(tc.logs) == 0 {
				t.Errorf("no log line about %q: %q", tc.logs, logs.all())
			}
			if tc.logs == "" && logs.count("spindle tune") != 0 {
				t.Errorf("unexpected log about the tune state: %q", logs.all())
			}
		})
	}
}
