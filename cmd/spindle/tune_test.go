package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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
	var d diagnoseReport
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
		// Given, 0 was taken for the default (then 64 MiB), and 2^44
		// MiB wrapped to it in bytes: both diagnosed memlock against the
		// default (found in review). Only an absent flag means it.
		{"diagnose", "--root", tuneFixture, "--period", "1ms", "--locked-mib", "0"},
		{"diagnose", "--root", tuneFixture, "--period", "1ms", "--locked-mib", "17592186044416"},
		// A loop CPU not online was diagnosed as if it were (found in
		// review; plan refuses it).
		{"diagnose", "--root", tuneFixture, "--period", "1ms", "--loop-cpus", "30-31"},
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

// TestTuneApplyRefuses feeds apply and revert bad input, and checks that a
// user without root is refused on the live host before anything is read or
// written. The plans and states given for the live host are harmless even
// if a check failed: their old values are not the host's (apply would stop
// as stale) or equal to the current values (revert would rewrite them).
func TestTuneApplyRefuses(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	somaxconn, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Skipf("no somaxconn to build a harmless live state from: %v", err)
	}
	cur, _ := json.Marshal(string(somaxconn))
	stalePlan := file("stale.json", `{"policy":"inline","writes":[{"kind":"file","path":"/proc/sys/net/core/somaxconn","format":"int","old":"not the current value","new":"4096","reason":"test"}]}`)
	liveState := file("live-state.json", `{"version":1,"root":"/","plan":{"policy":"inline","writes":[{"kind":"file","path":"/proc/sys/net/core/somaxconn","format":"int","old":`+string(cur)+`,"new":"4096","reason":"test"}]},"before":[`+string(cur)+`]}`)
	fixture := hostCopy(t, tuneFixture)
	// A plan for the fixture, saved twice into one file (plan --json >>
	// plan.json run twice): apply took the first and ignored the rest.
	planJSON, err := tuneRun(t, "plan", "--root", fixture, "--json")
	if err != nil {
		t.Fatal(err)
	}
	twoPlans := file("two.json", planJSON+planJSON)
	tests := []struct {
		name    string
		args    []string
		nonRoot bool
		refused bool   // the error must wrap tune.ErrRefused
		msg     string // and contain this
	}{
		{name: "no plan", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-11.json")}, msg: "--plan is required"},
		{name: "missing plan file", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-12.json"), "--plan", filepath.Join(dir, "nope.json")}, msg: "no such file"},
		{name: "not JSON", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-13.json"), "--plan", file("garbage.json", "policy: inline\n")}, msg: "plan " + filepath.Join(dir, "garbage.json") + ": invalid character"},
		{name: "two plans in one file", args: []string{"apply", "--root", fixture, "--plan", twoPlans, "--state", filepath.Join(dir, "state-0.json")}, msg: "after the plan"},
		{name: "unknown field", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-14.json"), "--plan", file("extra.json", `{"policy":"inline","writes":[],"turbo":true}`)}, msg: "plan " + filepath.Join(dir, "extra.json") + `: json: unknown field "turbo"`},
		{name: "bad CPU list", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-15.json"), "--plan", file("cpus.json", `{"policy":"inline","loop_cpus":"3-1","writes":[]}`)}, msg: "plan " + filepath.Join(dir, "cpus.json") + ": "},
		{name: "path outside /proc and /sys", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-16.json"), "--plan",
			file("etc.json", `{"writes":[{"kind":"file","path":"/etc/hostname","format":"int","old":"","new":"1","reason":"r"}]}`)}, refused: true, msg: "outside /proc and /sys"},
		{name: "dot-dot path", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-17.json"), "--plan",
			file("dotdot.json", `{"writes":[{"kind":"file","path":"/sys/../etc/hostname","format":"int","old":"","new":"1","reason":"r"}]}`)}, refused: true, msg: "not a clean absolute path"},
		{name: "CPU not on the machine", args: []string{"apply", "--root", fixture, "--state", filepath.Join(dir, "state-18.json"), "--plan",
			file("cpu.json", `{"writes":[{"kind":"file","path":"/proc/irq/121/smp_affinity_list","format":"cpulist","old":"0-23\n","new":"99","reason":"r"}]}`)}, refused: true, msg: "not online"},
		{name: "stale plan", args: []string{"apply", "--root", fixture, "--plan", stalePlan, "--state", filepath.Join(dir, "state-1.json")}, msg: "stale"},
		{name: "missing state", args: []string{"revert", "--state", filepath.Join(dir, "none.json")}, msg: "no state file " + filepath.Join(dir, "none.json") + ": nothing was applied"},
		{name: "not a state file", args: []string{"revert", "--state", stalePlan}, msg: "unknown field"},
		{name: "apply live without root", args: []string{"apply", "--plan", stalePlan, "--state", filepath.Join(dir, "state-2.json")}, nonRoot: true, msg: "needs root"},
		{name: "apply live (root //) without root", args: []string{"apply", "--root", "//", "--plan", stalePlan, "--state", filepath.Join(dir, "state-3.json")}, nonRoot: true, msg: "needs root"},
		{name: "revert live without root", args: []string{"revert", "--state", liveState}, nonRoot: true, msg: "needs root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.nonRoot {
				geteuid = func() int { return 1000 }
				defer func() { geteuid = os.Geteuid }()
			}
			before := readTree(t, fixture)
			out, err := tuneRun(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("spindle tune %s = %v (output %q), want an error containing %q", strings.Join(tt.args, " "), err, out, tt.msg)
			}
			if tt.refused && !errors.Is(err, tune.ErrRefused) {
				t.Errorf("%v does not wrap tune.ErrRefused", err)
			}
			after := readTree(t, fixture)
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s changed by a refused command", k)
				}
			}
		})
	}
	if _, err := os.Stat(liveState); err != nil {
		t.Errorf("a refused revert moved the state file: %v", err)
	}
	ents, _ := filepath.Glob(filepath.Join(dir, "state-*.json"))
	if len(ents) > 0 {
		t.Errorf("refused applies left state files: %v", ents)
	}
}

// TestTuneApplyRevertCLI applies a saved plan to a copy of a fixture tree
// through the CLI and reverts it; every file must be back byte for byte.
func TestTuneApplyRevertCLI(t *testing.T) {
	root := hostCopy(t, tuneFixture)
	before := readTree(t, root)
	planFile, _ := savePlan(t, root)
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
		Gone     int      `json:"gone"`
		State    string   `json:"state"`
		Drifted  []string `json:"drifted"`
		Already  bool     `json:"already_reverted"`
	}
	strictJSON(t, out, &r)
	if r.Reverted == 0 || r.Gone != 0 || len(r.Drifted) != 0 || r.Already {
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

// TestTuneLive runs the read-only subcommands on this machine, in text and
// JSON: each must name the host's interfaces, and every finding and every
// planned write must say what to do and why.
func TestTuneLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	h, err := topo.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	candidates := h.TuningCandidates()
	out, err := tuneRun(t, "inspect")
	if err != nil || !strings.Contains(out, "CPUs online") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, name := range candidates {
		if !strings.Contains(out, "\n"+name+" (driver ") {
			t.Errorf("inspect does not describe %s:\n%s", name, out)
		}
	}
	out, err = tuneRun(t, "inspect", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var hj topo.Host
	strictJSON(t, out, &hj)
	if !hj.Online.Equal(h.Online) || len(hj.NICs) != len(h.NICs) {
		t.Errorf("inspect --json: online %v, %d NICs; want %v, %d", hj.Online, len(hj.NICs), h.Online, len(h.NICs))
	}
	out, err = tuneRun(t, "diagnose", "--period", "200ms")
	if err != nil || (!strings.Contains(out, "    fix: ") && !strings.Contains(out, "no findings")) {
		t.Fatalf("diagnose: %v\n%s", err, out)
	}
	out, err = tuneRun(t, "diagnose", "--period", "200ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d diagnoseReport
	strictJSON(t, out, &d)
	for _, f := range d.Findings {
		if f.Fix == "" || len(f.Evidence) == 0 {
			t.Errorf("finding %s without evidence or fix", f.ID)
		}
	}
	if len(candidates) == 0 {
		t.Skip("no physical interface with queues to plan for")
	}
	out, err = tuneRun(t, "plan", "--policy", "inline")
	if err != nil || !strings.Contains(out, "loop CPUs: ") || !strings.Contains(out, "--server-cpus") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	out, err = tuneRun(t, "plan", "--policy", "inline", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var p tune.Plan
	strictJSON(t, out, &p)
	if p.LoopCPUs.Len() == 0 || p.LoopCPUs.Minus(h.Online).Len() > 0 {
		t.Errorf("plan loop CPUs %v (online %v)", p.LoopCPUs, h.Online)
	}
	if err := tune.Validate(&p); err != nil {
		t.Errorf("the live plan does not validate: %v", err)
	}
	for _, w := range p.Writes {
		if w.Reason == "" {
			t.Errorf("%s without a reason", w.Target())
		}
	}
}

// TestTuneApplyEmptyPlanJSON applies a plan without writes with --json: the
// output must still be one JSON object (it was empty; found in review).
func TestTuneApplyEmptyPlanJSON(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sys/devices/system/cpu"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/online"), []byte("0-1\n"), 0o644)
	plan := filepath.Join(t.TempDir(), "empty.json")
	os.WriteFile(plan, []byte("{}"), 0o644)
	out, err := tuneRun(t, "apply", "--plan", plan, "--root", root, "--state", filepath.Join(t.TempDir(), "st.json"), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["writes"] != float64(0) {
		t.Errorf("tune apply --json of an empty plan printed %q (%v)", out, err)
	}
}

// TestTuneRevertRelativeRoot applies a plan to a captured tree named by a
// relative --root, then reverts from another working directory, as a
// later shell would: the state saved the root as given, so revert looked
// for the tree under the new directory, found every target gone, restored
// nothing and moved the state aside as done. The saved root is absolute.
func TestTuneRevertRelativeRoot(t *testing.T) {
	fixture, err := filepath.Abs(tuneFixture)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if out, err := exec.Command("cp", "-a", fixture, filepath.Join(work, "host")).CombinedOutput(); err != nil {
		t.Skipf("cp -a: %v %s", err, out)
	}
	before := readTree(t, filepath.Join(work, "host"))
	state := filepath.Join(t.TempDir(), "state.json")
	t.Chdir(work)
	if out, err := tuneRun(t, "plan", "--root", "host", "--apply", "--state", state); err != nil || !strings.Contains(out, "applied") {
		t.Fatalf("plan --apply: %v\n%s", err, out)
	}
	t.Chdir(t.TempDir())
	out, err := tuneRun(t, "revert", "--state", state)
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if strings.Contains(out, "gone") {
		t.Errorf("revert from another directory:\n%s", out)
	}
	after := readTree(t, filepath.Join(work, "host"))
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %q after revert, was %q", k, after[k], v)
		}
	}
}

// TestTuneApplyWarnsIrqbalance: `tune apply --plan` of a plan with IRQ
// affinity writes, on a host where irqbalance runs (the smt-isol fixture,
// pid 812), says that irqbalance will rewrite them: the plan's note was
// made when it was planned, and apply printed only 'applied N write(s)',
// while irqbalance undoes the affinities within seconds. A plan without
// IRQ writes says nothing of it.
func TestTuneApplyWarnsIrqbalance(t *testing.T) {
	root := hostCopy(t, "../../topo/testdata/smt-isol")
	planFile, planJSON := savePlan(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	out, err := tuneRun(t, "apply", "--root", root, "--plan", planFile, "--state", state)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "irqbalance is running (pid 812)") || !strings.Contains(out, "IRQ affinities") {
		t.Errorf("apply with irqbalance running does not warn:\n%s", out)
	}
	if _, err := tuneRun(t, "revert", "--state", state); err != nil {
		t.Fatal(err)
	}
	var p tune.Plan
	strictJSON(t, planJSON, &p)
	p.Writes = slices.DeleteFunc(p.Writes, func(w tune.Write) bool { return strings.HasPrefix(w.Path, "/proc/irq/") })
	b, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err = tuneRun(t, "apply", "--root", root, "--plan", planFile, "--state", filepath.Join(t.TempDir(), "state.json")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "irqbalance") {
		t.Errorf("apply without IRQ writes warns of irqbalance:\n%s", out)
	}
}

// TestTuneDiagnoseAppliedLoopCPUs: after `tune apply` of a dedicated plan,
// diagnose judges queue IRQs against the loop CPUs that plan set aside
// (the state file's, which the engine runs its loops on), as an IRQ that
// irqbalance or a driver moved back onto them undoes the plan. It judged
// them against the isolcpus CPUs only, and on a host without isolcpus
// (this fixture) did not check at all. An inline plan's loop CPUs take
// their IRQs by design; --loop-cpus still overrides the state, its
// policy included, which diagnose's -h did not say.
func TestTuneDiagnoseAppliedLoopCPUs(t *testing.T) {
	if help, _ := spindleCmd("tune", "diagnose", "-h").CombinedOutput(); !strings.Contains(string(help), "inline, and --loop-cpus is not given)") {
		t.Errorf("tune diagnose -h does not say --inline's default needs --loop-cpus not given:\n%s", help)
	}
	for _, policy := range []string{"dedicated", "inline"} {
		t.Run(policy, func(t *testing.T) {
			root := hostCopy(t, tuneFixture)
			state := filepath.Join(t.TempDir(), "state.json")
			if out, err := tuneRun(t, "plan", "--root", root, "--policy", policy, "--apply", "--state", state); err != nil {
				t.Fatalf("plan --apply: %v\n%s", err, out)
			}
			// IRQ 121 (rx-0) moved onto CPU 15, a loop CPU of both plans.
			for _, f := range []string{"smp_affinity_list", "effective_affinity_list"} {
				if err := os.WriteFile(filepath.Join(root, "proc/irq/121", f), []byte("15\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			onLoop := func(args ...string) bool {
				t.Helper()
				out, err := tuneRun(t, append([]string{"diagnose", "--root", root, "--period", "1ms", "--json"}, args...)...)
				if err != nil {
					t.Fatalf("diagnose %v: %v\n%s", args, err, out)
				}
				var d diagnoseReport
				strictJSON(t, out, &d)
				return slices.ContainsFunc(d.Findings, func(f tune.Finding) bool { return f.ID == "irq-on-loop-cpu" })
			}
			if got, want := onLoop("--state", state), policy == "dedicated"; got != want {
				t.Errorf("diagnose after apply of a %s plan: irq-on-loop-cpu %v, want %v", policy, got, want)
			}
			if onLoop("--state", state, "--loop-cpus", "20-23") {
				t.Error("diagnose --loop-cpus 20-23 reported IRQ 121 on CPU 15 as on a loop CPU")
			}
			// Given, --loop-cpus leaves the plan's policy too, as -h says:
			// CPU 15 is judged as a loop CPU of no inline plan.
			if !onLoop("--state", state, "--loop-cpus", "15") {
				t.Error("diagnose --loop-cpus 15 did not report IRQ 121 on CPU 15")
			}
			// A state of another tree, or none, is no plan of this one.
			other := filepath.Join(t.TempDir(), "none.json")
			if onLoop("--state", other) {
				t.Error("diagnose without an applied plan reported irq-on-loop-cpu")
			}
			if _, err := tuneRun(t, "revert", "--state", state); err != nil {
				t.Fatal(err)
			}
			if onLoop("--state", state) {
				t.Error("diagnose after revert reported irq-on-loop-cpu")
			}
		})
	}
}

// TestTuneDiagnoseNoLoopCPUs: with no loop CPUs (none given, no plan
// applied, none isolated, as on this fixture) diagnose skipped the
// irq-on-loop-cpu check without a word, where it names the set it judged
// against when there is one. It now says so on stderr, in one line, and
// as the info finding irq-on-loop-cpu-unchecked, in the text and the JSON
// (whose loop_cpus_from is ""); loop CPUs given make neither.
func TestTuneDiagnoseNoLoopCPUs(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.json")
	diagnose := func(args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := spindleCmd(append([]string{"tune", "diagnose", "--root", tuneFixture, "--period", "1ms", "--state", none}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("diagnose %v: %v\n%s%s", args, err, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	const line = "no loop CPUs (none given with --loop-cpus, no plan applied with --state, none isolated): queue IRQs on loop CPUs are not checked (irq-on-loop-cpu-unchecked)\n"
	out, errs := diagnose()
	if !strings.Contains(errs, line) {
		t.Errorf("diagnose without loop CPUs: stderr does not say the check is skipped:\n%s", errs)
	}
	if !strings.Contains(out, "[INFO] queue interrupts on loop CPUs were not checked: no loop CPUs known (irq-on-loop-cpu-unchecked)") {
		t.Errorf("diagnose without loop CPUs: no irq-on-loop-cpu-unchecked finding:\n%s", out)
	}
	out, _ = diagnose("--json")
	var d diagnoseReport
	strictJSON(t, out, &d)
	if d.LoopCPUsFrom != "" || d.LoopCPUs.Len() != 0 || !slices.ContainsFunc(d.Findings, func(f tune.Finding) bool { return f.ID == "irq-on-loop-cpu-unchecked" }) {
		t.Errorf("diagnose --json without loop CPUs: loop_cpus %v from %q, findings %+v; want none, \"\", irq-on-loop-cpu-unchecked among them", d.LoopCPUs, d.LoopCPUsFrom, d.Findings)
	}
	out, errs = diagnose("--loop-cpus", "15")
	if strings.Contains(errs, "no loop CPUs") || strings.Contains(out, "irq-on-loop-cpu-unchecked") || !strings.Contains(errs, "loop CPUs 15, from --loop-cpus\n") {
		t.Errorf("diagnose --loop-cpus 15: says the check is skipped, or not which CPUs it judged against:\n%s%s", errs, out)
	}
}

// hostCopy copies the fixture tree into a temporary directory and returns
// the copy's root; t skips where cp -a cannot copy it.
func hostCopy(t *testing.T, fixture string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", fixture, root).CombinedOutput(); err != nil {
		t.Skipf("cp -a: %v %s", err, out)
	}
	return root
}

// savePlan writes the plan for the tree at root (plan --json) to a file
// and returns its path and the plan.
func savePlan(t *testing.T, root string) (planFile, planJSON string) {
	t.Helper()
	planJSON, err := tuneRun(t, "plan", "--root", root, "--json")
	if err != nil {
		t.Fatal(err)
	}
	planFile = filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	return planFile, planJSON
}

// TestTuneUsageSaysRevertsRootDefault: tune's usage said every
// subcommand's --root defaults to /, where revert's is the root saved in
// its state file (reverting a captured tree's plan without --root reverts
// that tree, not the live host); it says so, as revert's -h does.
func TestTuneUsageSaysRevertsRootDefault(t *testing.T) {
	root := regexp.MustCompile(`-root string\n\s+[^\n]*\n`)
	for _, tc := range []struct {
		sub, want string
	}{
		{"inspect", `(default "/")`},
		{"plan", `(default "/")`},
		{"revert", "(default: the one saved in the state file)"},
	} {
		out, err := spindleCmd("tune", tc.sub, "-h").CombinedOutput()
		if got := root.Find(out); err != nil || !strings.Contains(string(got), tc.want) {
			t.Fatalf("tune %s -h: %v, --root's help %q, want it to say %q", tc.sub, err, got, tc.want)
		}
	}
	out, err := spindleCmd("tune", "-h").CombinedOutput()
	if err != nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "default /, for revert the root saved in its state file") {
		t.Errorf("tune -h: %v, want it to give revert's --root default:\n%s", err, out)
	}
}

// TestTunePlanHelpSaysTheCPUDefaults: tune plan's --loop-cpus and
// --irq-cpus said nothing of what the plan takes when they are not given.
// Their help now says it, and the plans of the smt-isol fixture (16 CPUs,
// SMT siblings 0/8 … 7/15 local to the NIC, 2-7 and 10-15 isolcpus) are
// what it says: inline, the isolated first SMT threads; dedicated, one
// IRQ CPU for its 8 cores, the first not isolated, and the loops every
// other core's first thread, isolated or not.
func TestTunePlanHelpSaysTheCPUDefaults(t *testing.T) {
	out, err := spindleCmd("tune", "plan", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("spindle tune plan -h: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for name, says := range map[string][]string{
		"loop-cpus": {"(default: ", "one SMT thread per core", "local to the interfaces", "inline policy only the isolated ones", "dedicated policy those that are neither --irq-cpus nor their SMT siblings"},
		"irq-cpus":  {"(default: ", "one CPU per 8 cores local to it, at least one", "not isolated", "never --loop-cpus or their SMT siblings", "inline policy refuses it"},
	} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "  -"+name+" ") })
		if i < 0 || i+1 >= len(lines) {
			t.Errorf("tune plan -h has no --%s:\n%s", name, out)
			continue
		}
		for _, s := range says {
			if !strings.Contains(lines[i+1], s) {
				t.Errorf("tune plan -h: --%s %q does not say %q", name, strings.TrimSpace(lines[i+1]), s)
			}
		}
	}
	for _, tc := range []struct{ policy, loops, irqs string }{
		{"inline", "2-7", "2-7"},
		{"dedicated", "1-7", "0"},
	} {
		out, err := tuneRun(t, "plan", "--root", "../../topo/testdata/smt-isol", "--policy", tc.policy, "--json")
		if err != nil {
			t.Fatalf("plan --policy %s: %v", tc.policy, err)
		}
		var p tune.Plan
		strictJSON(t, out, &p)
		if p.LoopCPUs.String() != tc.loops || p.IRQCPUs.String() != tc.irqs {
			t.Errorf("plan --policy %s: loop CPUs %s, IRQ CPUs %s; want %s and %s", tc.policy, p.LoopCPUs, p.IRQCPUs, tc.loops, tc.irqs)
		}
	}
}

// TestTuneApplyToTreeNeedsState: `tune apply --root DIR` and `tune plan
// --root DIR --apply` without --state saved the tree's state in the live
// host's state file (/run/spindle/tune-state.json), where it refused the
// host's next apply as not reverted and gave a plain `tune revert` the
// tree's plan. Applying to a tree needs --state; nothing is written, to
// the tree or to the default state path (a temporary one here).
func TestTuneApplyToTreeNeedsState(t *testing.T) {
	saved := defaultState
	defaultState = filepath.Join(t.TempDir(), "run", "spindle", "tune-state.json")
	defer func() { defaultState = saved }()
	root := hostCopy(t, tuneFixture)
	before := readTree(t, root)
	planFile, _ := savePlan(t, root)
	for _, args := range [][]string{
		{"apply", "--root", root, "--plan", planFile},
		{"plan", "--root", root, "--apply"},
	} {
		_, err := tuneRun(t, args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "needs --state") {
			t.Errorf("spindle tune %s: %v, want a usage error asking for --state", strings.Join(args, " "), err)
		}
		if _, err := os.Stat(defaultState); err == nil {
			t.Errorf("spindle tune %s saved the tree's state in the default state file", strings.Join(args, " "))
			os.Remove(defaultState)
		}
	}
	if d := readTree(t, root); !maps.Equal(d, before) {
		t.Error("the refused applies wrote the tree")
	}
	// The live host keeps its default.
	if _, err := tuneRun(t, "apply", "--root", "/", "--plan", planFile); err == nil || strings.Contains(err.Error(), "needs --state") {
		t.Errorf("apply --root / without --state: %v, want it refused for another reason than --state", err)
	}
}

// TestTuneRevertTwiceNothingToDo: a second `tune revert` of a state
// reverted before failed (exit 1, "no state file"), though the host was
// as the first left it. It says there is nothing to revert and succeeds,
// with --json too, writing nothing; a state path never applied is still
// an error.
func TestTuneRevertTwiceNothingToDo(t *testing.T) {
	root := hostCopy(t, tuneFixture)
	planFile, _ := savePlan(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	if out, err := tuneRun(t, "apply", "--root", root, "--plan", planFile, "--state", state); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := tuneRun(t, "revert", "--state", state); err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	reverted := readTree(t, root)
	out, err := tuneRun(t, "revert", "--state", state)
	if err != nil || !strings.Contains(out, "nothing to revert: "+state+" was reverted already") {
		t.Errorf("second revert: %v, output %q, want success saying there is nothing to revert", err, out)
	}
	out, err = tuneRun(t, "revert", "--state", state, "--json")
	if err != nil {
		t.Fatalf("second revert --json: %v", err)
	}
	var r struct {
		Reverted int      `json:"reverted"`
		Gone     int      `json:"gone"`
		State    string   `json:"state"`
		Drifted  []string `json:"drifted"`
		Already  bool     `json:"already_reverted"`
	}
	strictJSON(t, out, &r)
	if !r.Already || r.Reverted != 0 || r.Gone != 0 || r.State != state+".reverted" {
		t.Errorf("second revert --json: %s", out)
	}
	if !maps.Equal(readTree(t, root), reverted) {
		t.Error("the second revert wrote the tree")
	}
	if _, err := tuneRun(t, "revert", "--state", filepath.Join(t.TempDir(), "never.json")); err == nil {
		t.Error("revert of a state never applied succeeded")
	}
}
