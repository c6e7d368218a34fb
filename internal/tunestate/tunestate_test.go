package tunestate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/cpulist"
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

// TestLoopCPUsIgnoresCapturedRoot: `spindle tune apply --root DIR` with the
// default --state saves its plan where live engines look; LoopCPUs used to
// hand them the captured host's loop CPUs. Only a plan applied to "/" (or
// a state without a root) counts.
func TestLoopCPUsIgnoresCapturedRoot(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		root string
		want []int
	}{
		{`"/"`, []int{1, 2}},
		{`"//"`, []int{1, 2}},
		{`""`, []int{1, 2}},
		{`"/tmp/capture"`, nil},
		{`"testdata/host"`, nil},
	} {
		p := filepath.Join(dir, "state.json")
		body := `{"version":1,"root":` + tc.root + `,"plan":{"loop_cpus":"1-2"}}`
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoopCPUs(p)
		if !slices.Equal(got, tc.want) {
			t.Errorf("root %s: %v, %v; want %v", tc.root, got, err, tc.want)
		}
		if tc.want == nil && (!errors.Is(err, ErrNotLive) || !strings.Contains(err.Error(), p)) {
			t.Errorf("root %s: error %v, want ErrNotLive naming the file", tc.root, err)
		}
		if tc.want != nil && err != nil {
			t.Errorf("root %s: %v", tc.root, err)
		}
	}
}

// TestLoopCPUsIgnoresOtherBoot: a state saved in another boot (--state on
// persistent storage, read after a reboot) names loop CPUs of a plan the
// reboot undid; Revert refuses it as stale, and the engine is not to take
// its CPUs either. A state without a boot id, or one of this boot, counts.
func TestLoopCPUsIgnoresOtherBoot(t *testing.T) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		t.Skipf("no boot id here: %v", err)
	}
	now := strings.TrimSpace(string(b))
	dir := t.TempDir()
	for _, tc := range []struct {
		boot string
		want []int
	}{
		{``, []int{1, 2}},
		{`,"boot_id":""`, []int{1, 2}},
		{`,"boot_id":"` + now + `"`, []int{1, 2}},
		{`,"boot_id":"00000000-0000-4000-8000-000000000000"`, nil},
	} {
		p := filepath.Join(dir, "state.json")
		body := `{"version":1,"plan":{"loop_cpus":"1-2"}` + tc.boot + `}`
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoopCPUs(p)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", body, got, err, tc.want)
		}
		if tc.want == nil && (!errors.Is(err, ErrOtherBoot) || !strings.Contains(err.Error(), p)) {
			t.Errorf("%s: error %v, want ErrOtherBoot naming the file", body, err)
		}
		if tc.want != nil && err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// FuzzLoopCPUs: whatever the state file holds, LoopCPUs returns an error
// naming the file or CPUs the engine can pin loops to: ascending, distinct
// and below cpulist.Max.
func FuzzLoopCPUs(f *testing.F) {
	f.Add([]byte(`{"version":1,"root":"/","plan":{"policy":"inline","loop_cpus":"1-2,5"},"before":[]}`))
	f.Add([]byte(`{"version":1,"root":"/tmp/capture","plan":{"loop_cpus":"0"}}`))
	f.Add([]byte(`{"version":1,"boot_id":"00000000-0000-4000-8000-000000000000","plan":{"loop_cpus":"0-8191"}}`))
	f.Add([]byte(`{"version":1,"plan":{"loop_cpus":"3-1"}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "state.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cpus, err := LoopCPUs(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for i, c := range cpus {
			if c < 0 || c >= cpulist.Max || i > 0 && c <= cpus[i-1] {
				t.Fatalf("LoopCPUs = %v: not ascending distinct CPUs below %d", cpus, cpulist.Max)
			}
		}
	})
}
