package tunestate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoopCPUs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := LoopCPUs(filepath.Join(dir, "none.json")); err != nil || got != nil {
		t.Errorf("missing file: %v, %v; want nothing", got, err)
	}
	if got, err := LoopCPUs(write("ok.json", `{"version":1,"plan":{"loop_cpus":"2-3,1"},"extra":true}`)); err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("state with loop CPUs: %v, %v", got, err)
	}
	if got, err := LoopCPUs(write("none-set.json", `{"version":1,"plan":{"loop_cpus":""}}`)); err != nil || got != nil {
		t.Errorf("plan without loop CPUs: %v, %v", got, err)
	}
	for name, body := range map[string]string{
		"corrupt.json":  `{`,
		"version.json":  `{"version":2,"plan":{"loop_cpus":"1"}}`,
		"no-plan.json":  `{"version":1}`,
		"bad-list.json": `{"version":1,"plan":{"loop_cpus":"1-x"}}`,
	} {
		p := write(name, body)
		if got, err := LoopCPUs(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, %v; want an error naming the file", name, got, err)
		}
	}
}
