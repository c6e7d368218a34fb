package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/tune"
)

const tuneFixture = "../../topo/testdata/2socket-16q"

func tuneRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := tuneMain(context.Background(), args, &out)
	return out.String(), err
}

func strictJSON(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not the expected JSON: %v\n%s", err, s)
	}
}

func TestTuneFixtureCommands(t *testing.T) {
	out, err := tuneRun(t, "inspect", "--root", tuneFixture)
	if err != nil || !strings.Contains(out, "ice-ens1f0-TxRx-15") || !strings.Contains(out, "NUMA node 1") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	out, err = tuneRun(t, "inspect", "--root", tuneFixture, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var h topo.Host
	strictJSON(t, out, &h)
	if h.NIC("ens1f0") == nil || len(h.NIC("ens1f0").RxQueues) != 16 {
		t.Errorf("inspect --json: %+v", h.NICs)
	}
	out, err = tuneRun(t, "diagnose", "--root", tuneFixture, "--period", "10ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		PeriodSeconds float64        `json:"period_seconds"`
		Findings      []tune.Finding `json:"findings"`
	}
	strictJSON(t, out, &d)
	found := false
	for _, f := range d.Findings {
		found = found || f.ID == "queue-irqs-one-cpu"
	}
	if !found || d.PeriodSeconds <= 0 {
		t.Errorf("diagnose --json: %s", out)
	}
	out, err = tuneRun(t, "plan", "--root", tuneFixture, "--policy", "dedicated", "--irq-cpus", "12-13", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var p tune.Plan
	strictJSON(t, out, &p)
	if p.IRQCPUs.String() != "12-13" || len(p.Writes) == 0 {
		t.Errorf("plan --json: %s", out)
	}
	out, err = tuneRun(t, "plan", "--root", tuneFixture)
	if err != nil || !strings.Contains(out, "loop CPUs: 12-23") || !strings.Contains(out, "--apply") {
		t.Errorf("plan: %v\n%s", err, out)
	}
}

func TestTuneRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "--root", tuneFixture, "--iface", "eth9"},
		{"plan", "--root", tuneFixture, "--loop-cpus", "30-31"},
		{"plan", "--root", tuneFixture, "--policy", "fastest"},
		{"diagnose", "--root", tuneFixture, "--period", "0s"},
		{"apply", "--root", tuneFixture},
		{"frobnicate"},
	} {
		if _, err := tuneRun(t, args...); err == nil {
			t.Errorf("spindle tune %s succeeded", strings.Join(args, " "))
		} else if args[0] == "plan" && !errors.Is(err, tune.ErrRefused) {
			t.Errorf("spindle tune %s: %v does not wrap ErrRefused", strings.Join(args, " "), err)
		}
	}
}

// TestTuneApplyRevertCLI applies a saved plan to a copy of a fixture tree
// through the CLI and reverts it; every file must be back byte for byte.
func TestTuneApplyRevertCLI(t *testing.T) {
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", tuneFixture, root).CombinedOutput(); err != nil {
		t.Skipf("cp -a: %v %s", err, out)
	}
	before := readTree(t, root)
	planJSON, err := tuneRun(t, "plan", "--root", root, "--json")
	if err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state.json")
	if out, err := tuneRun(t, "apply", "--root", root, "--plan", planFile, "--state", state); err != nil || !strings.Contains(out, "applied") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if after := readTree(t, root); after["/proc/irq/121/smp_affinity_list"] == before["/proc/irq/121/smp_affinity_list"] {
		t.Error("apply changed nothing")
	}
	out, err := tuneRun(t, "revert", "--state", state, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Reverted int      `json:"reverted"`
		State    string   `json:"state"`
		Drifted  []string `json:"drifted"`
	}
	strictJSON(t, out, &r)
	if r.Reverted == 0 || len(r.Drifted) != 0 {
		t.Errorf("revert --json: %s", out)
	}
	after := readTree(t, root)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %q after revert, was %q", k, after[k], v)
		}
	}
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		m[strings.TrimPrefix(p, root)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTuneLive runs the read-only subcommands on this machine.
func TestTuneLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	out, err := tuneRun(t, "inspect")
	if err != nil || !strings.Contains(out, "CPUs online") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	out, err = tuneRun(t, "diagnose", "--period", "200ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		PeriodSeconds float64        `json:"period_seconds"`
		Findings      []tune.Finding `json:"findings"`
	}
	strictJSON(t, out, &d)
	h, err := topo.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.TuningCandidates()) == 0 {
		t.Skip("no physical interface with queues to plan for")
	}
	out, err = tuneRun(t, "plan", "--policy", "inline", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var p tune.Plan
	strictJSON(t, out, &p)
	if p.LoopCPUs.Len() == 0 {
		t.Errorf("plan without loop CPUs: %s", out)
	}
}
