package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spindlenet/spindle/internal/tunestate"
	"github.com/spindlenet/spindle/topo"
)

// copyTree copies a fixture tree, keeping symbolic links as links.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// treeBytes returns every regular file of a tree with its contents.
func treeBytes(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diffTrees(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q -> %q", k, v, b[k]))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+": new file")
		}
	}
	return out
}

// fixtureNetlink answers the netlink calls of a Target for a fixture tree,
// which has no kernel device behind it. Its setters encode each request
// with the same topo encoders the real client sends (EncodeCoalesceSet,
// EncodeNAPISet) and apply what those bytes decode to, so a wrong encoding
// shows here too. The calls themselves are exercised on the kernel by
// TestNetnsApplyRevert (napi-set) and TestApplyCoalesceRefusedLive
// (coalesce-set). failSet makes every set fail.
// newFixtureNetlink serves the coalescing values and NAPI instances h
// recorded.
func newFixtureNetlink(h *topo.Host) *fixtureNetlink {
	co := &fixtureNetlink{values: map[int]topo.Coalesce{}, napis: map[uint32]topo.NAPI{}}
	for _, n := range h.NICs {
		if n.Coalesce != nil {
			co.values[n.Ifindex] = maps.Clone(n.Coalesce)
		}
		for _, napi := range n.NAPIs {
			co.napis[napi.ID] = napi
		}
	}
	return co
}

type fixtureNetlink struct {
	values  map[int]topo.Coalesce
	napis   map[uint32]topo.NAPI
	failSet error
}

func (f *fixtureNetlink) NAPI(id uint32) (topo.NAPI, error) {
	n, ok := f.napis[id]
	if !ok {
		return n, fmt.Errorf("napi %d: %w", id, os.ErrNotExist)
	}
	return n, nil
}

func (f *fixtureNetlink) SetNAPI(id uint32, param string, value uint64) error {
	if f.failSet != nil {
		return f.failSet
	}
	n, ok := f.napis[id]
	if !ok {
		return fmt.Errorf("napi %d: %w", id, os.ErrNotExist)
	}
	b, err := topo.EncodeNAPISet(id, param, value)
	if err != nil {
		return err
	}
	req, err := topo.DecodeNAPI(b)
	if err != nil {
		return err
	}
	v, err := req.NAPIValue(param)
	if err != nil || req.ID != id || v != value {
		return fmt.Errorf("napi-set %d %s=%d encodes as %+v (%v)", id, param, value, req, err)
	}
	switch param {
	case "defer-hard-irqs":
		n.DeferHardIRQs = req.DeferHardIRQs
	case "gro-flush-timeout":
		n.GROFlushTimeout = req.GROFlushTimeout
	case "irq-suspend-timeout":
		n.IRQSuspendTimeout = req.IRQSuspendTimeout
	}
	f.napis[id] = n
	return nil
}

func (f *fixtureNetlink) Coalesce(ifindex int) (topo.Coalesce, error) {
	return maps.Clone(f.values[ifindex]), nil
}

func (f *fixtureNetlink) SetCoalesce(ifindex int, values map[string]uint32) error {
	if f.failSet != nil {
		return f.failSet
	}
	b, err := topo.EncodeCoalesceSet(ifindex, values)
	if err != nil {
		return err
	}
	req, err := topo.DecodeCoalesce(b)
	if err != nil {
		return err
	}
	if !maps.Equal(req, topo.Coalesce(values)) {
		return fmt.Errorf("coalesce-set %v encodes as %v", values, req)
	}
	maps.Copy(f.values[ifindex], req)
	return nil
}

func TestApplyRevertFixture(t *testing.T) {
	for _, fx := range []string{fxVM, fx2Socket, fxSMT} {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			root := copyTree(t, fx)
			h := loadHost(t, root)
			p, err := MakePlan(h, PlanConfig{BusyPollUsecs: 20, IRQSuspendTimeoutNs: 20_000_000})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Writes) == 0 {
				t.Fatal("empty plan")
			}
			co := newFixtureNetlink(h)
			origNAPI := maps.Clone(co.napis)
			origCo := map[int]topo.Coalesce{}
			for k, v := range co.values {
				origCo[k] = maps.Clone(v)
			}
			before := treeBytes(t, root)
			state := filepath.Join(t.TempDir(), "state.json")
			tgt := Target{Root: root, Netlink: co}
			st, err := Apply(p, tgt, state)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Before) != len(p.Writes) {
				t.Fatalf("state has %d values for %d writes", len(st.Before), len(p.Writes))
			}
			for _, w := range p.Writes {
				got, err := tgt.read(w)
				if err != nil {
					t.Fatal(err)
				}
				if !equalValues(w.Format, got, w.New) {
					t.Errorf("%s = %q after apply, want %q", w.Target(), got, w.New)
				}
			}
			// A second apply must not overwrite the saved state.
			if _, err := Apply(p, tgt, state); !errors.Is(err, ErrRefused) && !errors.Is(err, ErrStale) {
				t.Errorf("second apply: %v", err)
			}
			drifted, _, err := Revert(state, tgt)
			if err != nil {
				t.Fatal(err)
			}
			if len(drifted) != 0 {
				t.Errorf("drifted: %v", drifted)
			}
			// Byte for byte: every file of the tree, except the state file
			// which lives elsewhere.
			if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
				t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
			}
			for k, v := range origCo {
				if !maps.Equal(v, co.values[k]) {
					t.Errorf("coalesce of %d: %v, want %v", k, co.values[k], v)
				}
			}
			if !maps.Equal(origNAPI, co.napis) {
				t.Errorf("NAPI settings not restored: %v, want %v", co.napis, origNAPI)
			}
			if _, err := os.Stat(state + ".reverted"); err != nil {
				t.Errorf("state not moved aside: %v", err)
			}
			if _, _, err := Revert(state, tgt); err == nil {
				t.Error("second revert succeeded")
			}
		})
	}
}

func TestApplyRollsBackOnFailure(t *testing.T) {
	root := copyTree(t, fx2Socket)
	h := loadHost(t, root)
	p, err := MakePlan(h, PlanConfig{BusyPollUsecs: 50})
	if err != nil {
		t.Fatal(err)
	}
	// The coalesce write comes after the IRQ, XPS and NAPI writes; make
	// the device refuse it as a driver would.
	last := -1
	for i, w := range p.Writes {
		if w.Kind == KindCoalesce {
			last = i
		}
	}
	if last < 5 {
		t.Fatalf("coalesce write at %d; the test needs file writes before it", last)
	}
	co := &fixtureNetlink{values: map[int]topo.Coalesce{3: maps.Clone(h.NIC("ens1f0").Coalesce)}, failSet: fmt.Errorf("ethtool coalesce-set: %w", topo.ErrNotSupported)}
	before := treeBytes(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	_, err = Apply(p, Target{Root: root, Netlink: co}, state)
	if err == nil || !strings.Contains(err.Error(), "rolled back") || !errors.Is(err, topo.ErrNotSupported) {
		t.Fatalf("err = %v", err)
	}
	// The write refused, with the value it tried.
	if want := fmt.Sprintf("(%s, value %q)", p.Writes[last].Target(), p.Writes[last].New); !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to name %s", err, want)
	}
	if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("tree differs after rollback:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left after a complete rollback: %v", err)
	}
}

func TestApplyStalePlan(t *testing.T) {
	root, p := planVM(t)
	// Someone changes a value between plan and apply.
	changed := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_flow_cnt")
	if err := os.WriteFile(changed, []byte("128\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStale(t, p, Target{Root: root})
}

// planVM returns a copy of the vm fixture and the default plan for it.
func planVM(t *testing.T) (root string, p *Plan) {
	t.Helper()
	root = copyTree(t, fxVM)
	p, err := MakePlan(loadHost(t, root), PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return root, p
}

// wantStale applies p to tgt and checks that it is refused as stale, with
// nothing written under tgt.Root and no state saved.
func wantStale(t *testing.T, p *Plan, tgt Target) {
	t.Helper()
	before := treeBytes(t, tgt.Root)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, tgt, state); !errors.Is(err, ErrStale) {
		t.Errorf("err = %v, want ErrStale", err)
	}
	if d := diffTrees(before, treeBytes(t, tgt.Root)); len(d) > 0 {
		t.Errorf("stale apply wrote: %v", d)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state written for a stale plan")
	}
}

func TestApplyRefusesBadPlans(t *testing.T) {
	root := copyTree(t, fxVM)
	tests := []Write{
		{Kind: KindFile, Path: "/etc/hostname", Format: FormatInt, Old: "", New: "x"},
		{Kind: KindFile, Path: "/proc/../etc/hostname", Format: FormatInt, New: "x"},
		{Kind: KindCoalesce, Iface: "eth0", Ifindex: 4, Param: "rx-usecs", Format: FormatInt, Old: "0", New: "8"},
	}
	for i, w := range tests {
		p := &Plan{Writes: []Write{w}}
		_, err := Apply(p, Target{Root: root}, filepath.Join(t.TempDir(), "s.json"))
		if err == nil {
			t.Errorf("case %d (%s) applied", i, w.Target())
		}
	}
	if _, err := Apply(nil, Target{Root: root}, filepath.Join(t.TempDir(), "s.json")); !errors.Is(err, ErrRefused) {
		t.Errorf("nil plan: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.json")
	if _, err := Apply(&Plan{}, Target{Root: root}, empty); err != nil {
		t.Errorf("empty plan: %v", err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty plan saved a state file")
	}
}

func TestLoadStateStrict(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown-field.json": `{"version":1,"plan":{"writes":[]},"before":[],"extra":1}`,
		"wrong-count.json":   `{"version":1,"plan":{"writes":[{"kind":"file","path":"/proc/x","format":"int","old":"1","new":"2","reason":"r"}]},"before":[]}`,
		"bad-path.json":      `{"version":1,"plan":{"writes":[{"kind":"file","path":"/etc/x","format":"int","old":"1","new":"2","reason":"r"}]},"before":["1"]}`,
		// Values not in their format: "b" to sysrq-trigger reboots, as
		// the new value or as the one Revert would restore.
		"new-not-int.json":     `{"version":1,"plan":{"writes":[{"kind":"file","path":"/proc/sysrq-trigger","format":"int","old":"1","new":"b","reason":"r"}]},"before":["1"]}`,
		"before-not-int.json":  `{"version":1,"plan":{"writes":[{"kind":"file","path":"/proc/sysrq-trigger","format":"int","old":"b","new":"1","reason":"r"}]},"before":["b"]}`,
		"before-not-mask.json": `{"version":1,"plan":{"writes":[{"kind":"file","path":"/sys/class/net/eth0/queues/rx-0/rps_cpus","format":"mask","old":"0\n","new":"3","reason":"r"}]},"before":["fff,zz"]}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadState(p); err == nil {
			t.Errorf("%s loaded", name)
		}
	}
}

// TestRevertReportsDrift changes an applied value behind the tool's back:
// revert still restores the value from before the apply, byte for byte,
// and names the changed one.
func TestRevertReportsDrift(t *testing.T) {
	root, p := planVM(t)
	before := treeBytes(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatal(err)
	}
	changed := "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"
	if writeTo(p, changed) == nil {
		t.Fatalf("plan does not write %s: %v", changed, targets(p))
	}
	if err := os.WriteFile(filepath.Join(root, changed), []byte("64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	drifted, _, err := Revert(state, Target{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(drifted) != 1 || !strings.Contains(drifted[0], changed) || !strings.Contains(drifted[0], `"64"`) {
		t.Errorf("drifted = %q, want one entry for %s", drifted, changed)
	}
	if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
	}
}

// FuzzLoadState: whatever a state file holds, LoadState either refuses it
// or returns a state that Revert can act on safely: every write valid and
// one saved value per write.
func FuzzLoadState(f *testing.F) {
	f.Add([]byte(`{"version":1,"root":"/","plan":{"writes":[{"kind":"file","path":"/proc/sys/net/core/somaxconn","format":"int","old":"4096\n","new":"8192","reason":"r"}]},"before":["4096\n"]}`))
	f.Add([]byte(`{"version":1,"plan":{"writes":[{"kind":"netdev-napi","iface":"eth0","napi_id":257,"param":"irq-suspend-timeout","format":"int","old":"0","new":"20000000","reason":"r"}]},"before":["0"]}`))
	f.Add([]byte(`{"version":1,"plan":{"writes":[{"kind":"file","path":"/etc/x","format":"int","old":"1","new":"2","reason":"r"}]},"before":["1"]}`))
	f.Add([]byte(`{"version":1,"root":"/","boot_id":"6f1f4a8e-0b7e-4c51-9d0a-2f0c6f3c1a11","plan":{"writes":[{"kind":"file","path":"/proc/irq/38/smp_affinity_list","irq_name":"virtio2-input.0","format":"cpulist","old":"0-1\n","new":"0","reason":"r"}]},"before":["0-1\n"]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "state.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := LoadState(p)
		if err != nil {
			return
		}
		if st.Plan == nil || len(st.Before) != len(st.Plan.Writes) {
			t.Fatalf("loaded an inconsistent state: %+v", st)
		}
		for _, w := range st.Plan.Writes {
			if err := ValidateWrite(w); err != nil {
				t.Fatalf("loaded an invalid write: %v", err)
			}
		}
	})
}

// TestStateLoopCPUsForEngine checks that the state file Apply saves tells
// the engine (internal/tunestate, which reads it without this package) the
// plan's loop CPUs, and that a reverted state tells it nothing.
func TestStateLoopCPUsForEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st := &State{Version: 1, Root: "/", Plan: &Plan{Policy: "inline", LoopCPUs: topo.NewCPUSet(3, 1, 2, 7)}}
	if err := saveState(path, st); err != nil {
		t.Fatal(err)
	}
	got, err := tunestate.LoopCPUs(path)
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 7}) {
		t.Fatalf("tunestate.LoopCPUs = %v, %v; want [1 2 3 7]", got, err)
	}
	if err := os.Rename(path, path+".reverted"); err != nil { // what Revert does
		t.Fatal(err)
	}
	if got, err := tunestate.LoopCPUs(path); err != nil || got != nil {
		t.Fatalf("after revert: %v, %v; want nothing", got, err)
	}
}

// TestRevertTargetsGone: targets that disappear between Apply and Revert
// (an IRQ freed when its driver unbinds, NAPI ids re-allocated after link
// down/up) used to make Revert fail on its first read and restore nothing,
// keeping the state file so that every later revert and apply failed too.
// Revert now restores every target that still exists, names the gone ones
// in its notes and moves the state aside; a target that exists but cannot
// be restored (no netlink) is named in the error and keeps the state for
// another try, without stopping the rest.
func TestRevertTargetsGone(t *testing.T) {
	setup := func(t *testing.T) (root string, p *Plan, co *fixtureNetlink, orig map[uint32]topo.NAPI, before map[string]string, state string) {
		root = copyTree(t, fx2Socket)
		h := loadHost(t, root)
		p, err := MakePlan(h, PlanConfig{BusyPollUsecs: 20, IRQSuspendTimeoutNs: 20_000_000})
		if err != nil {
			t.Fatal(err)
		}
		co = newFixtureNetlink(h)
		orig = maps.Clone(co.napis)
		before = treeBytes(t, root)
		state = filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root, Netlink: co}, state); err != nil {
			t.Fatal(err)
		}
		return
	}
	firstIRQ := func(t *testing.T, p *Plan) string {
		for _, w := range p.Writes {
			if strings.HasPrefix(w.Path, "/proc/irq/") {
				return path.Dir(w.Path)
			}
		}
		t.Fatal("plan writes no IRQ affinity")
		return ""
	}
	renumber := func(co *fixtureNetlink) {
		old := maps.Clone(co.napis)
		clear(co.napis)
		for id, n := range old {
			n.ID = id + 1000
			co.napis[n.ID] = n
		}
	}
	moved := func(t *testing.T, state string) {
		t.Helper()
		if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state file still in place (%v): the host stays blocked", err)
		}
		if _, err := os.Stat(state + ".reverted"); err != nil {
			t.Errorf("state not moved aside: %v", err)
		}
	}
	countGone := func(notes []string) int {
		n := 0
		for _, s := range notes {
			if strings.Contains(s, ": gone (") {
				n++
			}
		}
		return n
	}

	t.Run("irq removed", func(t *testing.T) {
		root, p, co, orig, before, state := setup(t)
		irq := firstIRQ(t, p)
		if err := os.RemoveAll(filepath.Join(root, irq)); err != nil {
			t.Fatal(err)
		}
		notes, gone, err := Revert(state, Target{Root: root, Netlink: co})
		if err != nil {
			t.Fatalf("Revert: %v", err)
		}
		if gone != 1 || countGone(notes) != 1 || !slices.ContainsFunc(notes, func(s string) bool { return strings.HasPrefix(s, irq+"/") && strings.Contains(s, "gone") }) {
			t.Errorf("notes = %q, want one gone entry for %s", notes, irq)
		}
		for k := range before {
			if strings.HasPrefix(k, filepath.Join(root, irq)+"/") {
				delete(before, k)
			}
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("not restored:\n%s", strings.Join(d, "\n"))
		}
		if !maps.Equal(orig, co.napis) {
			t.Error("NAPI settings not restored")
		}
		moved(t, state)
	})

	t.Run("NAPI ids renumbered", func(t *testing.T) {
		root, _, co, _, before, state := setup(t)
		renumber(co)
		notes, gone, err := Revert(state, Target{Root: root, Netlink: co})
		if err != nil {
			t.Fatalf("Revert: %v", err)
		}
		if n := countGone(notes); n != 16 || gone != 16 {
			t.Errorf("%d gone notes, %d gone counted, want 16 (one per NAPI write): %q", n, gone, notes)
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("not restored:\n%s", strings.Join(d, "\n"))
		}
		moved(t, state)
	})

	// An old id the kernel has given to another interface's instance is
	// gone too: restoring into it would change a device the plan never
	// touched.
	t.Run("NAPI id reused by another interface", func(t *testing.T) {
		root, p, co, _, _, state := setup(t)
		var w Write
		for _, x := range p.Writes {
			if x.Kind == KindNAPI {
				w = x
				break
			}
		}
		renumber(co)
		co.napis[w.NAPIID] = topo.NAPI{ID: w.NAPIID, Ifindex: 99, IRQSuspendTimeout: 12345}
		if _, _, err := Revert(state, Target{Root: root, Netlink: co}); err != nil {
			t.Fatalf("Revert: %v", err)
		}
		if got := co.napis[w.NAPIID].IRQSuspendTimeout; got != 12345 {
			t.Errorf("NAPI %d of ifindex 99 set to %d by the revert of %s", w.NAPIID, got, w.Target())
		}
	})

	t.Run("netlink unreachable", func(t *testing.T) {
		root, _, co, orig, before, state := setup(t)
		notes, _, err := Revert(state, Target{Root: root})
		if err == nil {
			t.Fatal("Revert without netlink succeeded")
		}
		msg := err.Error()
		if !strings.Contains(msg, "17 of 49 value(s) not restored") || !strings.Contains(msg, "ethtool -C ens1f0 adaptive-rx") || !strings.Contains(msg, "NAPI 8208 irq-suspend-timeout") || !errors.Is(err, topo.ErrNotSupported) {
			t.Errorf("error does not say what was not restored and why: %v", err)
		}
		if countGone(notes) != 0 {
			t.Errorf("notes = %q: nothing is gone", notes)
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("files not restored while netlink was missing:\n%s", strings.Join(d, "\n"))
		}
		if _, err := os.Stat(state); err != nil {
			t.Fatalf("state not kept for the values still to restore: %v", err)
		}
		if _, _, err := Revert(state, Target{Root: root, Netlink: co}); err != nil {
			t.Fatalf("second revert, with netlink: %v", err)
		}
		if !maps.Equal(orig, co.napis) {
			t.Error("NAPI settings not restored by the second revert")
		}
		moved(t, state)
	})
}

// TestStateOfCapturedTreeNotForEngine: a plan applied to a captured tree
// (--root DIR) with the default state path must not hand the live engine
// the captured host's loop CPUs.
func TestStateOfCapturedTreeNotForEngine(t *testing.T) {
	root := copyTree(t, fx2Socket)
	p, err := MakePlan(loadHost(t, root), PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "tune-state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatal(err)
	}
	if got, err := tunestate.LoopCPUs(state); got != nil || !errors.Is(err, tunestate.ErrNotLive) {
		t.Errorf("tunestate.LoopCPUs = %v, %v; want nothing and ErrNotLive", got, err)
	}
}

// TestSaveStateWhole checks that a reader of the state file (the engine's
// tunestate.LoopCPUs, at any moment) finds it absent or complete, never
// empty or cut short, while Apply saves it over and over, and that the
// temporary files are gone. Found in review: the file was created, then
// written, so a reader could see it empty.
func TestSaveStateWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	st := &State{Version: 1, Root: "/", Plan: &Plan{Policy: "inline", LoopCPUs: topo.NewCPUSet(1, 2)}}
	stop := make(chan struct{})
	bad := make(chan error, 1)
	go func() {
		defer close(bad)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got, err := tunestate.LoopCPUs(path); err != nil || got != nil && !slices.Equal(got, []int{1, 2}) {
				bad <- fmt.Errorf("a reader got %v, %v", got, err)
				return
			}
		}
	}()
	for i := 0; i < 300; i++ {
		if err := saveState(path, st); err != nil {
			t.Fatal(err)
		}
		if err := saveState(path, st); !errors.Is(err, ErrRefused) {
			t.Fatalf("a second save over an unreverted state: %v, want ErrRefused", err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-bad; err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestRevertRefusesTwoStates: a state file holding a second state after the
// first (two applies' states joined, `cat a b > state`, or a second state
// appended) was reverted as its first: Revert restored the first plan's
// values only, reported success and moved the file aside, leaving the
// second plan's writes on the host with nothing left to revert them. The
// engine's tunestate.LoopCPUs refuses such a file; LoadState now does too,
// and Revert writes nothing and keeps the file.
func TestRevertRefusesTwoStates(t *testing.T) {
	root, p := planVM(t)
	if len(p.Writes) < 2 {
		t.Fatalf("the test needs 2 writes, plan has %d", len(p.Writes))
	}
	before := treeBytes(t, root)
	dir := t.TempDir()
	var joinedStates []byte
	for i := range 2 {
		one := *p
		one.Writes = p.Writes[i : i+1]
		s := filepath.Join(dir, fmt.Sprintf("s%d.json", i))
		if _, err := Apply(&one, Target{Root: root}, s); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		joinedStates = append(joinedStates, b...)
	}
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, joinedStates, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tunestate.LoopCPUs(state); err == nil {
		t.Fatal("tunestate.LoopCPUs read two joined states")
	}
	applied := treeBytes(t, root)
	if _, err := LoadState(state); err == nil {
		t.Error("LoadState read two joined states as one")
	}
	_, _, err := Revert(state, Target{Root: root})
	if err == nil {
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("Revert succeeded, but the tree differs from before the applies:\n%s", strings.Join(d, "\n"))
		}
		return
	}
	if d := diffTrees(applied, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("a refused revert wrote:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(state); err != nil {
		t.Errorf("a refused revert moved the state: %v", err)
	}
}

// TestApplyStaleTargetGone: a target that disappeared between plan and
// apply (an interface deleted, an IRQ freed by a driver unbind, a NAPI id
// re-allocated) is the host changing since the plan was made, as ErrStale
// documents: Apply returned the bare "no such file" error, which
// errors.Is(err, ErrStale) did not match and which did not say to make a
// new plan. Nothing is written either way.
func TestApplyStaleTargetGone(t *testing.T) {
	for _, gone := range []string{"irq", "napi"} {
		t.Run(gone, func(t *testing.T) {
			root := copyTree(t, fxVM)
			h := loadHost(t, root)
			p, err := MakePlan(h, PlanConfig{BusyPollUsecs: 20, IRQSuspendTimeoutNs: 20_000_000})
			if err != nil {
				t.Fatal(err)
			}
			co := newFixtureNetlink(h)
			found := false
			for _, w := range p.Writes {
				switch {
				case gone == "irq" && strings.HasPrefix(w.Path, "/proc/irq/"):
					found = true
					if err := os.RemoveAll(filepath.Join(root, path.Dir(w.Path))); err != nil {
						t.Fatal(err)
					}
				case gone == "napi" && w.Kind == KindNAPI:
					found = true
					delete(co.napis, w.NAPIID)
				}
			}
			if !found {
				t.Fatalf("plan has no %s write: %v", gone, targets(p))
			}
			wantStale(t, p, Target{Root: root, Netlink: co})
		})
	}
}

// TestRevertAfterCrash: Apply saves the state, then writes; a crash between
// two writes leaves the later targets at their old values. Revert restores
// the tree byte for byte, and its notes, which name the values someone else
// changed since Apply (and which Revert overwrites), named every target the
// crashed Apply never reached: there was nothing to overwrite there.
func TestRevertAfterCrash(t *testing.T) {
	root, p := planVM(t)
	if len(p.Writes) < 3 {
		t.Fatalf("the test needs 3 writes, plan has %d", len(p.Writes))
	}
	before := treeBytes(t, root)
	tgt := Target{Root: root}
	st := &State{Version: 1, Root: root, Plan: p}
	for _, w := range p.Writes {
		cur, err := tgt.read(w)
		if err != nil {
			t.Fatal(err)
		}
		st.Before = append(st.Before, cur)
	}
	state := filepath.Join(t.TempDir(), "state.json")
	if err := saveState(state, st); err != nil {
		t.Fatal(err)
	}
	// The crash: the first write done, the others never.
	if err := tgt.setAndCheck(p.Writes[0], p.Writes[0].New); err != nil {
		t.Fatal(err)
	}
	notes, gone, err := Revert(state, tgt)
	if err != nil || gone != 0 {
		t.Fatalf("Revert: %d gone, %v", gone, err)
	}
	if len(notes) != 0 {
		t.Errorf("notes for targets the crashed apply never wrote:\n%s", strings.Join(notes, "\n"))
	}
	if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
	}
}

// TestApplyRefusesCurrentValueNotInFormat: LoadState refuses a saved value
// not in its write's format (8164486), so Apply must not save one: a plan
// writing tcp_rmem's three numbers as one int applied on a tree that takes
// it, and its state then could not be loaded, so the host could not be
// reverted. Apply refuses such a write before writing anything.
func TestApplyRefusesCurrentValueNotInFormat(t *testing.T) {
	root := copyTree(t, fxVM)
	const path = "/proc/sys/net/ipv4/tcp_rmem"
	if err := os.WriteFile(filepath.Join(root, path), []byte("4096\t131072\t6291456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Plan{Writes: []Write{{Kind: KindFile, Path: path, Format: FormatInt, Old: "4096\t131072\t6291456\n", New: "8192", Reason: "r"}}}
	before := treeBytes(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	_, err := Apply(p, Target{Root: root}, state)
	if err == nil {
		if _, lerr := LoadState(state); lerr != nil {
			t.Fatalf("applied, and the state cannot be loaded to revert: %v", lerr)
		}
		return
	}
	if !errors.Is(err, ErrRefused) {
		t.Errorf("err = %v, want ErrRefused", err)
	}
	if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("a refused apply wrote: %v", d)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state written for a refused plan")
	}
}

// TestSaveStateWithoutHardLinks: on a file system without hard links (a
// --state on vfat) saveState still saves, whole, and still refuses an
// existing state. Since ea8642c it linked the file into place and failed
// there, where the exclusive create before it worked.
func TestSaveStateWithoutHardLinks(t *testing.T) {
	saved := linkFile
	defer func() { linkFile = saved }()
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	path := filepath.Join(t.TempDir(), "state.json")
	st := &State{Version: 1, Root: "/", Plan: &Plan{Policy: "inline", LoopCPUs: topo.NewCPUSet(1, 2)}}
	if err := saveState(path, st); err != nil {
		t.Fatal(err)
	}
	if got, err := tunestate.LoopCPUs(path); err != nil || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("tunestate.LoopCPUs = %v, %v; want [1 2]", got, err)
	}
	if err := saveState(path, st); !errors.Is(err, ErrRefused) {
		t.Fatalf("a second save over an unreverted state: %v, want ErrRefused", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("files left: %v", ents)
	}
}

// TestRevertCPUOfflineSinceApply: a CPU that goes offline between Apply
// and Revert cannot come back into an RPS or XPS map: the kernel keeps
// only the online CPUs of the mask written (store_rps_map builds the map
// with for_each_cpu_and(cpu, mask, cpu_online_mask); __netif_set_xps_queue
// maps only online CPUs), and the file reads back what the map holds. Revert
// compared the read-back with the saved value byte for byte, so it failed
// on every such map and kept the state file, and every later revert failed
// the same way: it never completed. Revert now takes a read-back equal to
// the saved value minus the CPUs that are offline as done, says so in its
// notes, and moves the state aside; any other difference still fails.
func TestRevertCPUOfflineSinceApply(t *testing.T) {
	// The kernel's store of rps_cpus and xps_cpus: the online CPUs of
	// the mask, printed as a mask. drop, if set, stands for a kernel that
	// loses a CPU for another reason.
	kernel := func(root string, drop int) func(dir, name, value string) error {
		return func(_, name, value string) error {
			base := filepath.Base(name)
			if base != "rps_cpus" && base != "xps_cpus" {
				return os.WriteFile(name, []byte(value), 0)
			}
			set, err := topo.ParseCPUMask(value)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu/online"))
			if err != nil {
				return err
			}
			online, err := topo.ParseCPUList(string(b))
			if err != nil {
				return err
			}
			set = set.Intersect(online).Minus(topo.NewCPUSet(drop))
			return os.WriteFile(name, []byte(kernelMask(set, 16)+"\n"), 0)
		}
	}
	saved := writeFile
	defer func() { writeFile = saved }()
	setup := func(t *testing.T) (root string, p *Plan, state string) {
		writeFile = saved
		root = copyTree(t, fxSMT)
		p, err := MakePlan(loadHost(t, root), PlanConfig{})
		if err != nil {
			t.Fatal(err)
		}
		// The fixture's RPS maps hold 8-15 and tx-5's XPS map CPU 5;
		// the plan must change both for their revert to write them back.
		for _, tgt := range []string{"/sys/class/net/enp1s0f0np0/queues/rx-0/rps_cpus", "/sys/class/net/enp1s0f0np0/queues/tx-5/xps_cpus"} {
			if writeTo(p, tgt) == nil {
				t.Fatalf("plan does not write %s: %v", tgt, targets(p))
			}
		}
		state = filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		// CPUs 5 and 13 (SMT siblings) go offline.
		if err := os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/online"), []byte("0-4,6-12,14-15\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return root, p, state
	}

	t.Run("offline CPUs dropped", func(t *testing.T) {
		root, _, state := setup(t)
		writeFile = kernel(root, -1)
		notes, gone, err := Revert(state, Target{Root: root})
		if err != nil || gone != 0 {
			t.Fatalf("Revert: %d gone, %v", gone, err)
		}
		if _, err := os.Stat(state + ".reverted"); err != nil {
			t.Errorf("state not moved aside: %v", err)
		}
		q := "/sys/class/net/enp1s0f0np0/queues/"
		for _, want := range []string{q + "rx-0/rps_cpus: restored 8-15, reads back 8-12,14-15", q + "tx-5/xps_cpus: restored 5, reads back none"} {
			if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, want) && strings.Contains(n, "offline") }) {
				t.Errorf("no note %q... in:\n%s", want, strings.Join(notes, "\n"))
			}
		}
		for _, f := range []struct{ path, want string }{{q + "rx-3/rps_cpus", "df00\n"}, {q + "tx-5/xps_cpus", "0000\n"}, {q + "tx-4/xps_cpus", "0010\n"}} {
			if b, err := os.ReadFile(filepath.Join(root, f.path)); err != nil || string(b) != f.want {
				t.Errorf("%s = %q (%v), want %q", f.path, b, err, f.want)
			}
		}
	})

	// A CPU missing from the read-back that is online is not the
	// kernel's hotplug rule: the revert is incomplete, as before.
	t.Run("online CPU dropped", func(t *testing.T) {
		root, _, state := setup(t)
		writeFile = kernel(root, 9)
		_, _, err := Revert(state, Target{Root: root})
		if err == nil || !strings.Contains(err.Error(), "rx-0/rps_cpus: restored") {
			t.Fatalf("Revert: %v, want rx-0/rps_cpus not restored", err)
		}
		if _, err := os.Stat(state); err != nil {
			t.Errorf("state not kept: %v", err)
		}
	})
}

// kernelMask prints set as the kernel prints a cpumask of nrCPUs CPUs
// ("%*pb"): every bit up to nr_cpu_ids, in hexadecimal, in groups of 32
// bits separated by commas.
func kernelMask(set topo.CPUSet, nrCPUs int) string {
	groups := make([]uint32, (nrCPUs+31)/32)
	for _, c := range set {
		groups[c/32] |= 1 << (c % 32)
	}
	var b strings.Builder
	for i := len(groups) - 1; i >= 0; i-- {
		if i == len(groups)-1 {
			fmt.Fprintf(&b, "%0*x", (nrCPUs-32*i+3)/4, groups[i])
		} else {
			fmt.Fprintf(&b, ",%08x", groups[i])
		}
	}
	return b.String()
}

// TestRevertAfterReboot: a state file kept across a reboot (a --state on
// persistent storage) describes a host that is gone: the reboot reset
// every value the plan wrote, and IRQ numbers and NAPI ids may name other
// devices now. Revert wrote the saved values over whatever the new boot
// set (the kernel's defaults, a sysctl.conf, another device's IRQ) and
// moved the state aside as if it had restored the host. It must refuse,
// as stale, writing nothing and keeping the state file; a state from the
// same boot, or one saved without a boot id, reverts as before.
func TestRevertAfterReboot(t *testing.T) {
	const bootID = "/proc/sys/kernel/random/boot_id"
	// setBoot writes the fixture's boot id anew, read-only as the
	// kernel's: the file it replaces is read-only too, which only root
	// may open for writing.
	setBoot := func(t *testing.T, root, id string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, path.Dir(bootID)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(root, bootID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, bootID), []byte(id+"\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(t *testing.T) (root, state string, before map[string]string) {
		t.Helper()
		root = copyTree(t, fxVM)
		setBoot(t, root, "6f1f4a8e-0b7e-4c51-9d0a-2f0c6f3c1a11")
		p, err := MakePlan(loadHost(t, root), PlanConfig{})
		if err != nil {
			t.Fatal(err)
		}
		before = treeBytes(t, root)
		state = filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		return root, state, before
	}
	t.Run("rebooted", func(t *testing.T) {
		root, state, _ := apply(t)
		setBoot(t, root, "0c5e2d7b-3a94-4f0e-8e61-7d2b9a4c5f22")
		after := treeBytes(t, root)
		notes, _, err := Revert(state, Target{Root: root})
		if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "boot") {
			t.Errorf("Revert after a reboot: %v (notes %q), want ErrStale naming the boot", err, notes)
		}
		if d := diffTrees(after, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("Revert after a reboot wrote:\n%s", strings.Join(d, "\n"))
		}
		if _, err := os.Stat(state); err != nil {
			t.Errorf("state file not kept: %v", err)
		}
	})
	t.Run("same boot", func(t *testing.T) {
		root, state, before := apply(t)
		if _, _, err := Revert(state, Target{Root: root}); err != nil {
			t.Fatal(err)
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
		}
	})
	t.Run("state without boot id", func(t *testing.T) {
		root, state, before := apply(t)
		st, err := LoadState(state)
		if err != nil {
			t.Fatal(err)
		}
		st.BootID = "" // as saved before the boot id was recorded
		if err := os.Remove(state); err != nil {
			t.Fatal(err)
		}
		if err := saveState(state, st); err != nil {
			t.Fatal(err)
		}
		setBoot(t, root, "0c5e2d7b-3a94-4f0e-8e61-7d2b9a4c5f22")
		delete(before, filepath.Join(root, bootID))
		if _, _, err := Revert(state, Target{Root: root}); err != nil {
			t.Fatal(err)
		}
		after := treeBytes(t, root)
		delete(after, filepath.Join(root, bootID))
		if d := diffTrees(before, after); len(d) > 0 {
			t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
		}
	})
}

// TestIRQNumberReused: an IRQ number freed (a driver unbound, channels
// changed) can be given to another device's interrupt before the plan is
// applied or reverted. The kernel shows each handler of IRQ N as a
// directory /proc/irq/N/<name>. Apply checked only the affinity value, and
// Revert wrote the saved affinity over the new device's, noting it as
// "changed since". A plan records the handler's name; Apply refuses the
// plan as stale and Revert leaves the IRQ alone as gone when N serves
// another handler, and both go on as before when N has no handler now (an
// interface that is down: drivers free their IRQs then, and the affinity
// written still holds when they request them again).
func TestIRQNumberReused(t *testing.T) {
	// setup plans for a copy of the vm fixture, with the handler
	// directories the kernel shows, and returns the first IRQ write.
	setup := func(t *testing.T) (root string, p *Plan, w Write) {
		t.Helper()
		root = copyTree(t, fxVM)
		h := loadHost(t, root)
		for _, n := range h.NICs {
			for _, q := range n.IRQs {
				if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("proc/irq/%d", q.IRQ), q.Name), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		p, err := MakePlan(h, PlanConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range p.Writes {
			if strings.HasPrefix(w.Path, "/proc/irq/") {
				if w.IRQName == "" {
					t.Fatalf("%s planned without its handler's name", w.Path)
				}
				return root, p, w
			}
		}
		t.Fatalf("plan writes no IRQ affinity: %v", targets(p))
		return
	}
	// reuse gives w's IRQ number to another device's handler, with that
	// device's affinity.
	reuse := func(t *testing.T, root string, w Write) {
		t.Helper()
		dir := filepath.Join(root, path.Dir(w.Path))
		if err := os.Remove(filepath.Join(dir, w.IRQName)); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "nvme0q1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, w.Path), []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("before apply", func(t *testing.T) {
		root, p, w := setup(t)
		reuse(t, root, w)
		// The new device's affinity happens to be what the plan found.
		if err := os.WriteFile(filepath.Join(root, w.Path), []byte(w.Old), 0o644); err != nil {
			t.Fatal(err)
		}
		wantStale(t, p, Target{Root: root})
	})
	// applied applies the plan of setup, returning the tree as it was
	// before and the state.
	applied := func(t *testing.T) (root string, w Write, before map[string]string, state string) {
		t.Helper()
		root, p, w := setup(t)
		before = treeBytes(t, root)
		state = filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		return root, w, before, state
	}
	t.Run("before revert", func(t *testing.T) {
		root, w, before, state := applied(t)
		reuse(t, root, w)
		notes, gone, err := Revert(state, Target{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(root, w.Path)); string(got) != "1\n" {
			t.Errorf("%s, now another device's IRQ, is %q after revert, was %q", w.Path, got, "1\n")
		}
		if gone != 1 || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, w.Path+": gone") && strings.Contains(n, "nvme0q1") }) {
			t.Errorf("%d gone, notes %q: want %s gone, naming nvme0q1", gone, notes, w.Path)
		}
		after := treeBytes(t, root)
		delete(before, filepath.Join(root, w.Path))
		delete(after, filepath.Join(root, w.Path))
		if d := diffTrees(before, after); len(d) > 0 {
			t.Errorf("the other targets differ after revert:\n%s", strings.Join(d, "\n"))
		}
	})
	t.Run("no handler", func(t *testing.T) {
		root, w, before, state := applied(t)
		if err := os.Remove(filepath.Join(root, path.Dir(w.Path), w.IRQName)); err != nil {
			t.Fatal(err)
		}
		if _, gone, err := Revert(state, Target{Root: root}); err != nil || gone != 0 {
			t.Fatalf("Revert: %d gone, %v", gone, err)
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
		}
	})
}

// TestRevertDuringApply: a revert run while an apply is writing (another
// shell, a boot unit applying as an operator reverts) found the state the
// apply had just saved, restored what was written so far and moved the
// state aside; the apply then wrote the rest, leaving the host tuned
// halfway with no state to revert it. Apply and Revert take the state
// directory's lock, and the one that finds it taken is refused at once,
// writing nothing; the apply completes, and a revert after it restores
// the host.
func TestRevertDuringApply(t *testing.T) {
	root, p := planVM(t)
	before := treeBytes(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	tgt := Target{Root: root}
	saved := writeFile
	defer func() { writeFile = saved }()
	var during error
	ran := false
	writeFile = func(dir, name, value string) error {
		if !ran {
			ran = true
			_, _, during = Revert(state, tgt)
		}
		return saved(dir, name, value)
	}
	if _, err := Apply(p, tgt, state); err != nil {
		t.Fatal(err)
	}
	writeFile = saved
	if !ran {
		t.Fatal("apply wrote nothing")
	}
	if !errors.Is(during, ErrRefused) {
		t.Errorf("revert during the apply: %v, want refused", during)
	}
	if _, _, err := Revert(state, tgt); err != nil {
		t.Fatalf("revert after the apply: %v", err)
	}
	if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
	}
}

// TestApplyTwice: the same plan applied again, its state not reverted,
// was refused as stale ("make a new plan"), naming a value the first
// apply had written: a new plan made then starts from the tuned values,
// and its revert would keep them. The second apply is refused because the
// first one's state is there, to be reverted first, and writes nothing.
func TestApplyTwice(t *testing.T) {
	root, p := planVM(t)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatal(err)
	}
	applied := treeBytes(t, root)
	_, err := Apply(p, Target{Root: root}, state)
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "has not been reverted") {
		t.Errorf("second apply: %v, want refused: the state exists", err)
	}
	if d := diffTrees(applied, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("second apply wrote:\n%s", strings.Join(d, "\n"))
	}
}

// TestStateLockUnsupported: where the state's lock cannot be taken
// (NFS without its lock manager: ENOLCK), Apply and Revert work without
// the lock, as before it: a --state there must not stop tuning.
func TestStateLockUnsupported(t *testing.T) {
	saved := flockFile
	defer func() { flockFile = saved }()
	flockFile = func(int, int) error { return syscall.ENOLCK }
	root, p := planVM(t)
	before := treeBytes(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if _, _, err := Revert(state, Target{Root: root}); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
	}
}

// TestRevertTwice: a second revert of the same state says it was reverted
// already (the file moved to .reverted), not only that the file is not
// there, and wraps ErrReverted; a state path never applied says that
// instead. Both are fs.ErrNotExist to callers.
func TestRevertTwice(t *testing.T) {
	root, p := planVM(t)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Revert(state, Target{Root: root}); err != nil {
		t.Fatal(err)
	}
	_, _, err := Revert(state, Target{Root: root})
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrReverted) || !strings.Contains(err.Error(), "reverted already") || !strings.Contains(err.Error(), state+".reverted") {
		t.Errorf("second revert: %v, want an fs.ErrNotExist and ErrReverted that says it was reverted already (%s.reverted)", err, state)
	}
	_, err = LoadState(filepath.Join(t.TempDir(), "never.json"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrReverted) || !strings.Contains(err.Error(), "no state file") {
		t.Errorf("a state never saved: %v, want an fs.ErrNotExist that says there is no state file", err)
	}
}

// TestInterfaceRecreated: a file of an interface (/sys/class/net/<if>/...)
// is the interface's by ifindex, as an IRQ's affinity is its handler's:
// an interface deleted and another made under its name since the plan
// (a veth pair re-created, a driver rebound) is not written, by Apply
// (the plan is stale) nor by Revert (its files are gone, noted), where
// Revert wrote the old interface's saved values into the new one's.
func TestInterfaceRecreated(t *testing.T) {
	// setup plans for a copy of the vm fixture and returns the
	// interface of the plan's first interface file, and its files.
	setup := func(t *testing.T) (root string, p *Plan, iface string, files []string) {
		t.Helper()
		root, p = planVM(t)
		for _, w := range p.Writes {
			if rest, ok := strings.CutPrefix(w.Path, "/sys/class/net/"); ok {
				name, _, _ := strings.Cut(rest, "/")
				if w.Iface != name || w.Ifindex <= 0 {
					t.Fatalf("%s planned with interface %q ifindex %d", w.Path, w.Iface, w.Ifindex)
				}
				if iface == "" {
					iface = name
				}
				if name == iface {
					files = append(files, w.Path)
				}
			}
		}
		if iface == "" {
			t.Fatalf("plan writes no interface file: %v", targets(p))
		}
		return root, p, iface, files
	}
	// recreate gives iface's name to another interface, with ifindex 99.
	recreate := func(t *testing.T, root, iface string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "sys/class/net", iface, "ifindex"), []byte("99\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("before apply", func(t *testing.T) {
		root, p, iface, _ := setup(t)
		recreate(t, root, iface)
		wantStale(t, p, Target{Root: root})
	})
	t.Run("before revert", func(t *testing.T) {
		root, p, iface, files := setup(t)
		state := filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		recreate(t, root, iface)
		applied := treeBytes(t, root)
		notes, gone, err := Revert(state, Target{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		after := treeBytes(t, root)
		for _, f := range files {
			if k := filepath.Join(root, f); after[k] != applied[k] {
				t.Errorf("%s, now another interface's, is %q after revert, was %q", f, after[k], applied[k])
			}
		}
		if gone != len(files) || !slices.ContainsFunc(notes, func(n string) bool {
			return strings.Contains(n, files[0]+": gone") && strings.Contains(n, "ifindex 99")
		}) {
			t.Errorf("%d gone, notes %q: want %d gone (%v), naming ifindex 99", gone, notes, len(files), files)
		}
	})
}

// TestRevertLiveAndTree: a state saved for the live host is not reverted
// under a captured tree, nor one of a tree on the live host (spindle tune
// revert --root /): the values one saved are not the other's. Revert is
// refused, writing nothing and keeping the file. (The test takes the
// direction that cannot write to the host: a state claiming the live
// host, reverted under a fixture copy.)
func TestRevertLiveAndTree(t *testing.T) {
	root, p := planVM(t)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatal(err)
	}
	editState(t, state, func(m map[string]any) { m["root"] = "/" })
	applied := treeBytes(t, root)
	if _, _, err := Revert(state, Target{Root: root}); !errors.Is(err, ErrRefused) {
		t.Errorf("Revert of a live host's state under %s: %v, want ErrRefused", root, err)
	}
	if d := diffTrees(applied, treeBytes(t, root)); len(d) > 0 {
		t.Errorf("the refused revert wrote:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(state); err != nil {
		t.Errorf("state file: %v, want it kept", err)
	}
}

// editState rewrites the state file with edit applied to its JSON object.
func editState(t *testing.T, state string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestApplyRefusesTargetTwice: a plan (edited by hand) that writes one
// target twice is refused, with nothing written and no state saved. Only
// its last write would hold, and revert, finding that value where it
// saved the first write's, named the target as changed since the apply.
// Netlink targets count by interface or NAPI id and parameter.
func TestApplyRefusesTargetTwice(t *testing.T) {
	_, p := planVM(t)
	file := writeTo(p, "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt")
	if file == nil {
		t.Fatalf("plan does not write rps_flow_cnt: %v", targets(p))
	}
	again := *file
	again.New = "64"
	napi := Write{Kind: KindNAPI, Iface: "eth0", Ifindex: 2, NAPIID: 257, Param: "irq-suspend-timeout", Format: FormatInt, Old: "0", New: "1000"}
	napiAgain := napi
	napiAgain.New = "2000"
	for name, writes := range map[string][]Write{
		"file":  append(slices.Clone(p.Writes), again),
		"napi":  {napi, napiAgain},
		"apart": {*file, napi, again},
	} {
		t.Run(name, func(t *testing.T) {
			root := copyTree(t, fxVM)
			before := treeBytes(t, root)
			state := filepath.Join(t.TempDir(), "state.json")
			_, err := Apply(&Plan{Writes: writes}, Target{Root: root}, state)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "twice") {
				t.Errorf("Apply = %v, want a refusal of the target written twice", err)
			}
			if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
				t.Errorf("refused apply wrote: %v", d)
			}
			if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
				t.Error("refused apply saved a state")
			}
		})
	}
}

// TestRevertInterfaceRenamed: an interface renamed after Apply (ip link
// set dev NAME name NEW, a udev rule) keeps its ifindex, and its files
// moved to the new name with the values the plan wrote. Revert took it for
// gone, restored none of them, said so and moved the state aside, leaving
// the interface tuned for good. It finds the interface by ifindex,
// restores its files under the new name and notes the rename. Before
// Apply a rename makes the plan stale: the plan names the old name. The
// IRQs of drivers that name their handlers after the interface (ice,
// i40e, ixgbe: "ice-ens1f0-TxRx-0", requested again under the new name
// when the interface comes up after the rename) were taken for another
// device's, and left tuned, the same way.
func TestRevertInterfaceRenamed(t *testing.T) {
	// rename moves the vm fixture's eth0 to eth1, as sysfs shows a
	// renamed interface: the class link under its new name, the
	// device's files where they were.
	rename := func(t *testing.T, root string) {
		t.Helper()
		dir := filepath.Join(root, "sys/class/net")
		if err := os.Rename(filepath.Join(dir, "eth0"), filepath.Join(dir, "eth1")); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("before apply", func(t *testing.T) {
		root, p := planVM(t)
		rename(t, root)
		wantStale(t, p, Target{Root: root})
	})
	t.Run("before revert", func(t *testing.T) {
		root, p := planVM(t)
		files := 0
		for _, w := range p.Writes {
			if w.Iface == "eth0" && w.Kind == KindFile {
				files++
			}
		}
		if files == 0 {
			t.Fatalf("plan writes no file of eth0: %v", targets(p))
		}
		before := treeBytes(t, root)
		state := filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		rename(t, root)
		notes, gone, err := Revert(state, Target{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
		}
		if gone != 0 || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "eth0") && strings.Contains(n, "named eth1 now") }) {
			t.Errorf("%d gone, notes %q: want none gone and a note of the rename", gone, notes)
		}
		if _, err := os.Stat(state + ".reverted"); err != nil {
			t.Errorf("state not moved aside: %v", err)
		}
	})
	t.Run("IRQs named after it", func(t *testing.T) {
		root := copyTree(t, fx2Socket)
		h := loadHost(t, root)
		n := h.NIC("ens1f0")
		for _, q := range n.IRQs {
			if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("proc/irq/%d", q.IRQ), q.Name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		p, err := MakePlan(h, PlanConfig{})
		if err != nil {
			t.Fatal(err)
		}
		irqs := 0
		for _, w := range p.Writes {
			if strings.HasPrefix(w.Path, "/proc/irq/") && strings.Contains(w.IRQName, "ens1f0") {
				irqs++
			}
		}
		if irqs == 0 {
			t.Fatalf("plan writes no IRQ of a handler named after ens1f0: %v", targets(p))
		}
		before := treeBytes(t, root)
		state := filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		// The rename, and ice requesting its IRQs under the new name.
		dir := filepath.Join(root, "sys/class/net")
		if err := os.Rename(filepath.Join(dir, "ens1f0"), filepath.Join(dir, "ens1f1")); err != nil {
			t.Fatal(err)
		}
		for _, q := range n.IRQs {
			if !strings.Contains(q.Name, "ens1f0") {
				continue // the misc IRQ: named after the PCI device
			}
			irq := filepath.Join(root, fmt.Sprintf("proc/irq/%d", q.IRQ))
			if err := os.Rename(filepath.Join(irq, q.Name), filepath.Join(irq, strings.ReplaceAll(q.Name, "ens1f0", "ens1f1"))); err != nil {
				t.Fatal(err)
			}
		}
		notes, gone, err := Revert(state, Target{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTrees(before, treeBytes(t, root)); len(d) > 0 {
			t.Errorf("tree differs after revert:\n%s", strings.Join(d, "\n"))
		}
		if gone != 0 {
			t.Errorf("%d gone, notes %q: want none", gone, notes)
		}
	})
}

// TestApplyRollbackSaysWhatIsLeft: a write that fails after a target
// written earlier has gone (its interface deleted meanwhile) rolls back
// the rest, and the error said "all earlier writes rolled back"; it names
// the target gone, not restored.
func TestApplyRollbackSaysWhatIsLeft(t *testing.T) {
	root, p := planVM(t)
	if len(p.Writes) < 3 {
		t.Fatalf("plan of %d writes; the test needs 3", len(p.Writes))
	}
	first := p.Writes[0]
	saved := writeFile
	defer func() { writeFile = saved }()
	n := 0
	writeFile = func(dir, name, value string) error {
		if n++; n != 3 {
			return saved(dir, name, value)
		}
		// The first target goes, then the third write fails.
		if err := os.Remove(filepath.Join(root, first.Path)); err != nil {
			return err
		}
		return syscall.EINVAL
	}
	_, err := Apply(p, Target{Root: root}, filepath.Join(t.TempDir(), "state.json"))
	writeFile = saved
	if err == nil {
		t.Fatal("Apply succeeded")
	}
	if strings.Contains(err.Error(), "all earlier writes rolled back") || !strings.Contains(err.Error(), "but for 1 target(s): "+first.Target()+": gone") {
		t.Errorf("Apply: %v, want it to name %s as gone, not restored", err, first.Target())
	}
}

// TestRevertIRQOnOfflineCPUs: an IRQ whose saved affinity holds only CPUs
// gone offline since the apply cannot be restored (the kernel refuses an
// affinity without an online CPU, EINVAL), so every revert failed on it,
// saying only "invalid argument", and kept the state for good. The error
// names the IRQ, its saved value and that its CPUs are offline; the rest
// is restored and the state moved aside, so that a revert run again has
// nothing left to do.
func TestRevertIRQOnOfflineCPUs(t *testing.T) {
	root := copyTree(t, fxSMT)
	p, err := MakePlan(loadHost(t, root), PlanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// An IRQ the plan moves off the one CPU it was on.
	var irq *Write
	var cpu int
	for i, w := range p.Writes {
		if !strings.HasPrefix(w.Path, "/proc/irq/") {
			continue
		}
		set, ok, err := parseCPUs(w.Format, w.Old)
		if ok && err == nil && set.Len() == 1 && set[0] != 0 {
			irq, cpu = &p.Writes[i], set[0]
			break
		}
	}
	if irq == nil {
		t.Fatal("the plan moves no IRQ off a single CPU other than 0")
	}
	before := treeBytes(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := Apply(p, Target{Root: root}, state); err != nil {
		t.Fatal(err)
	}
	applied := treeBytes(t, root)
	online := loadHost(t, root).Online.Minus(topo.NewCPUSet(cpu))
	if err := os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/online"), []byte(online.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The kernel's write_irq_affinity: no online CPU in the value, EINVAL.
	saved := writeFile
	defer func() { writeFile = saved }()
	writeFile = func(dir, name, value string) error {
		if base := filepath.Base(name); strings.HasPrefix(name, filepath.Join(root, "proc/irq")) && (base == "smp_affinity" || base == "smp_affinity_list") {
			format := FormatCPUList
			if base == "smp_affinity" {
				format = FormatMask
			}
			if set, _, err := parseCPUs(format, value); err != nil || set.Intersect(online).Len() == 0 {
				return &os.PathError{Op: "write", Path: name, Err: syscall.EINVAL}
			}
		}
		return saved(dir, name, value)
	}
	_, _, err = Revert(state, Target{Root: root})
	irqNum := filepath.Base(filepath.Dir(irq.Path))
	if err == nil || !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), fmt.Sprintf("IRQ %s (%s): saved affinity %s not restored: its CPUs (%d) are all offline", irqNum, irq.Path, strings.TrimSpace(irq.Old), cpu)) {
		t.Errorf("Revert: %v, want it to name IRQ %s, its saved affinity %q and CPU %d offline", err, irqNum, strings.TrimSpace(irq.Old), cpu)
	}
	if _, err := os.Stat(state + ".reverted"); err != nil {
		t.Errorf("state not moved aside: %v", err)
	}
	after := treeBytes(t, root)
	for name, b := range before {
		switch name {
		case filepath.Join(root, irq.Path):
			if after[name] != applied[name] {
				t.Errorf("%s: %q, want it left at the applied %q", name, after[name], applied[name])
			}
		case filepath.Join(root, "sys/devices/system/cpu/online"):
		default:
			if after[name] != b {
				t.Errorf("%s: %q after revert, was %q", name, after[name], b)
			}
		}
	}
	if _, _, err := Revert(state, Target{Root: root}); !errors.Is(err, ErrReverted) {
		t.Errorf("revert run again: %v, want ErrReverted", err)
	}
}

// TestApplyUnderRootStaysInIt: files under a captured tree were opened
// following links, so an absolute link in a hand-made tree (its proc/sys
// to /proc/sys) made Apply read and write the live host's files. A link
// leading out of the tree, absolute or through "..", is refused, with
// nothing written outside or inside and no state saved; a link within the
// tree (sysfs's relative ones) is followed as before. The file outside
// stands for the live host's.
func TestApplyUnderRootStaysInIt(t *testing.T) {
	plan := &Plan{Policy: Inline, Writes: []Write{{Kind: KindFile, Path: "/proc/sys/net/core/somaxconn", Format: FormatInt, Old: "4096\n", New: "8192", Reason: "test"}}}
	// tree returns a root whose proc/sys is the link made by link, to a
	// directory holding net/core/somaxconn.
	tree := func(t *testing.T, link func(root, target string) string) (root, file string) {
		root = t.TempDir()
		target := filepath.Join(t.TempDir(), "sys")
		if link == nil {
			target = filepath.Join(root, "realsys")
		}
		file = filepath.Join(target, "net/core/somaxconn")
		for name, body := range map[string]string{file: "4096\n", filepath.Join(root, "sys/devices/system/cpu/online"): "0-1\n"} {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		os.MkdirAll(filepath.Join(root, "proc"), 0o755)
		to := "../realsys"
		if link != nil {
			to = link(root, target)
		}
		if err := os.Symlink(to, filepath.Join(root, "proc/sys")); err != nil {
			t.Fatal(err)
		}
		return root, file
	}
	for _, tt := range []struct {
		name string
		link func(root, target string) string
	}{
		{"absolute link out", func(_, target string) string { return target }},
		{"relative link out", func(root, target string) string {
			rel, err := filepath.Rel(filepath.Join(root, "proc"), target)
			if err != nil {
				t.Fatal(err)
			}
			return rel
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, outside := tree(t, tt.link)
			state := filepath.Join(t.TempDir(), "state.json")
			_, err := Apply(plan, Target{Root: root}, state)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "proc/sys/net/core/somaxconn")) {
				t.Errorf("Apply: %v, want it refused, naming the file under the root", err)
			}
			if b, _ := os.ReadFile(outside); string(b) != "4096\n" {
				t.Errorf("the file outside the root is %q, want it untouched", b)
			}
			if _, err := os.Stat(state); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("state saved: %v", err)
			}
		})
	}
	t.Run("link within the tree", func(t *testing.T) {
		root, file := tree(t, nil)
		state := filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(plan, Target{Root: root}, state); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(file); string(b) != "8192" {
			t.Errorf("applied through a link within the tree: %q, want 8192", b)
		}
		if _, _, err := Revert(state, Target{Root: root}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(file); string(b) != "4096\n" {
			t.Errorf("reverted: %q, want 4096", b)
		}
	})
}

// TestApplyNamesKernelRefusal: a write the kernel refuses for a reason
// of its own failed with the bare errno: an IRQ affinity user space may
// not set (a managed interrupt: EPERM on Linux 6.12+, as IRQ 36,
// virtio1-req.0, gives here; EIO before) and an RPS map left with no CPU
// once the kernel took out isolcpus= and nohz_full CPUs (EINVAL). The
// error now says what the kernel refused and what to do, and still
// wraps the errno.
func TestApplyNamesKernelRefusal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		which func(w Write) bool
		errno syscall.Errno
		want  []string
	}{
		{"managed IRQ", func(w Write) bool { return strings.HasPrefix(w.Path, "/proc/irq/") }, syscall.EPERM,
			[]string{"the kernel lets no one set IRQ", "a managed interrupt", "--exclude-irqs"}},
		{"IRQ, before 6.12", func(w Write) bool { return strings.HasPrefix(w.Path, "/proc/irq/") }, syscall.EIO,
			[]string{"the kernel lets no one set IRQ", "a managed interrupt"}},
		{"RPS map", func(w Write) bool { return path.Base(w.Path) == "rps_cpus" }, syscall.EINVAL,
			[]string{"isolcpus= (domain) and nohz_full CPUs out of an RPS map", "refuses one left empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := planVM(t)
			i := slices.IndexFunc(p.Writes, tc.which)
			if i < 0 {
				t.Fatalf("no such write in the plan: %v", targets(p))
			}
			w := p.Writes[i]
			saved := writeFile
			defer func() { writeFile = saved }()
			writeFile = func(dir, name, value string) error {
				if name == filepath.Join(root, w.Path) {
					return &fs.PathError{Op: "write", Path: name, Err: tc.errno}
				}
				return saved(dir, name, value)
			}
			_, err := Apply(p, Target{Root: root}, filepath.Join(t.TempDir(), "state.json"))
			writeFile = saved
			if !errors.Is(err, tc.errno) {
				t.Fatalf("Apply: %v, want %v", err, tc.errno)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Apply: %v\ndoes not say %q", err, s)
				}
			}
		})
	}
}
