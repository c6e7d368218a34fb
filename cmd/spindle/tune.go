package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindlenet/spindle/internal/tunestate"
	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/tune"
)

func init() {
	register("tune", "inspect, diagnose and tune host networking (plan, apply, revert)", runTune)
}

const tuneUsage = `usage: spindle tune <inspect|diagnose|plan|apply|revert> [flags]

  inspect   print CPUs, NUMA, isolation, NICs, queues, IRQs, NAPI, limits
  diagnose  sample counters for --period and report findings with fixes
  plan      print a tuning plan for review (--apply to apply it)
  apply     apply a plan saved with 'plan --json' (root)
  revert    restore what 'apply' saved, byte for byte (root)

Every subcommand takes --json and --root (a captured /proc+/sys tree; default /,
for revert the root saved in its state file).`

func runTune(ctx context.Context, args []string) error { return tuneMain(ctx, args, os.Stdout) }

// tuneMain runs a tune subcommand, printing its result to w.
func tuneMain(ctx context.Context, args []string, w io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, tuneUsage)
		if len(args) == 0 {
			return usageError{err: errors.New("missing subcommand"), shown: true}
		}
		return nil
	}
	var err error
	switch args[0] {
	case "inspect":
		err = tuneInspect(args[1:], w)
	case "diagnose":
		err = tuneDiagnose(ctx, args[1:], w)
	case "plan":
		err = tunePlan(args[1:], w)
	case "apply":
		err = tuneApply(args[1:], w)
	case "revert":
		err = tuneRevert(args[1:], w)
	default:
		fmt.Fprintln(os.Stderr, tuneUsage)
		return usageError{err: fmt.Errorf("unknown tune subcommand %q", args[0]), shown: true}
	}
	return inSubcommand(args[0], err)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type cpuFlag struct{ set topo.CPUSet }

func (c *cpuFlag) String() string { return c.set.String() }
func (c *cpuFlag) Set(s string) error {
	v, err := topo.ParseCPUList(s)
	c.set = v
	return err
}

func tuneInspect(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("tune inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	root := fs.String("root", "/", "read /proc and /sys under this directory")
	pid := pidFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := readHostFor(*root, *pid)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(w, h)
	}
	return tune.WriteHost(w, h)
}

// pidFlag adds --pid, the service whose locked-memory limit and cgroup
// to read.
func pidFlag(fs *flag.FlagSet) *int {
	return fs.Int("pid", 0, "process id of the service whose locked-memory limit (RLIMIT_MEMLOCK, CAP_IPC_LOCK) to check (default: this process's own), and whose cgroup must be in the cpuset partition of its loop CPUs")
}

// readHostFor reads the host under root, with the memlock limit and
// cgroup of process pid when it is not 0.
func readHostFor(root string, pid int) (*topo.Host, error) {
	if pid < 0 {
		return nil, usageError{err: fmt.Errorf("--pid %d: not a process id", pid)}
	}
	h, err := tune.ReadHost(root)
	if err != nil || pid == 0 {
		return h, err
	}
	if h.Memlock, err = topo.ReadMemlock(root, pid); err != nil {
		return nil, fmt.Errorf("--pid %d: %w", pid, err)
	}
	if h.ServiceCgroup, err = topo.ReadCgroup(root, pid); err != nil {
		return nil, fmt.Errorf("--pid %d: %w", pid, err)
	}
	return h, nil
}

// diagnoseReport is what `tune diagnose --json` prints.
type diagnoseReport struct {
	PeriodSeconds float64 `json:"period_seconds"`
	// LoopCPUs are the CPUs queue IRQs were judged against
	// (irq-on-loop-cpu), and LoopCPUsFrom says where they came from:
	// "--loop-cpus", "state FILE (POLICY plan)", the kinds of isolation
	// holding them (tune.IsolationKind: "isolcpus", "cpuset partition
	// /rt", both joined by " and "), or "" when there were none (the
	// check then skipped, which the info finding
	// irq-on-loop-cpu-unchecked says unless --inline).
	LoopCPUs     topo.CPUSet    `json:"loop_cpus"`
	LoopCPUsFrom string         `json:"loop_cpus_from"`
	Findings     []tune.Finding `json:"findings"`
}

func tuneDiagnose(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("tune diagnose", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	root := fs.String("root", "/", "read /proc and /sys under this directory")
	period := fs.Duration("period", 5*time.Second, "sampling period")
	var loops cpuFlag
	fs.Var(&loops, "loop-cpus", "CPUs that run event loops (default: those of the plan applied with --state, else the isolated CPUs: isolcpus domain-isolated and in isolated cgroup v2 cpuset partitions)")
	inline := fs.Bool("inline", false, "loops share CPUs with their queues' IRQs (inline policy): do not report IRQs on loop CPUs (default: true when the plan applied with --state is inline, and --loop-cpus is not given)")
	state := fs.String("state", defaultState, "state file of the applied plan: its loop CPUs are --loop-cpus' default, and its policy --inline's when --loop-cpus is not given")
	busy := fs.Bool("busy-poll", false, "the application busy-polls (io_uring NAPI or SO_BUSY_POLL)")
	locked := fs.Uint64("locked-mib", 0, "MiB the application takes from RLIMIT_MEMLOCK without CAP_IPC_LOCK (default: what the engine's io_uring rings and buffer rings take for a loop on each loop CPU, or on each online CPU without them)")
	pid := pidFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *period <= 0 {
		return usageError{err: errors.New("--period must be positive")}
	}
	// Given, in bytes it must fit 64 bits, and be above 0, which the
	// package takes for its default (what the engine's loops take).
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "locked-mib" })
	if given && (*locked < 1 || *locked > math.MaxUint64>>20) {
		return usageError{err: fmt.Errorf("--locked-mib must be between 1 and %d", uint64(math.MaxUint64>>20))}
	}
	h, err := readHostFor(*root, *pid)
	if err != nil {
		return err
	}
	// As plan does: a loop CPU that is not online is a mistake, which
	// would find nothing on it.
	if off := loops.set.Minus(h.Online); off.Len() > 0 {
		return fmt.Errorf("--loop-cpus: CPUs %v are not online (online: %v)", off, h.Online)
	}
	opt := tune.Options{LoopCPUs: loops.set, Inline: *inline, BusyPoll: *busy, LockedBytes: *locked << 20}
	from := "--loop-cpus"
	if loops.set.Len() == 0 {
		// The engine runs its loops on the applied plan's loop CPUs:
		// queue IRQs on them (irqbalance or a driver moved one back)
		// undo a dedicated plan, whatever isolcpus says.
		p, err := appliedPlan(*state, *root)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "note: %v: loop CPUs not taken from it\n", err)
		case p != nil:
			opt.LoopCPUs = p.LoopCPUs.Intersect(h.Online)
			opt.Inline = opt.Inline || p.Policy == tune.Inline
			from = fmt.Sprintf("state %s (%s plan)", *state, p.Policy)
		}
		if opt.LoopCPUs.Len() == 0 {
			opt.LoopCPUs = tune.IsolatedCPUs(h)
			from = tune.IsolationKind(h, opt.LoopCPUs)
		}
	}
	if opt.LoopCPUs.Len() == 0 {
		from = ""
	}
	if !*asJSON {
		fmt.Fprintf(os.Stderr, "sampling counters for %v ...\n", *period)
		switch {
		case from != "" && opt.Inline:
			fmt.Fprintf(os.Stderr, "loop CPUs %s, from %s: inline, IRQs on them are not reported\n", opt.LoopCPUs, from)
		case from != "":
			fmt.Fprintf(os.Stderr, "loop CPUs %s, from %s\n", opt.LoopCPUs, from)
		case !opt.Inline:
			fmt.Fprintf(os.Stderr, "no loop CPUs (none given with --loop-cpus, no plan applied with --state, none isolated): queue IRQs on loop CPUs are not checked (irq-on-loop-cpu-unchecked)\n")
		}
	}
	var qs tune.QStatsSource
	if tune.IsLive(*root) {
		if nc, err := topo.DialNetlink(); err == nil {
			defer nc.Close()
			qs = nc
		}
	}
	a, b, err := tune.Sample(ctx, *root, h, *period, qs)
	if err != nil {
		return err
	}
	findings := tune.Diagnose(h, a, b, opt)
	if *asJSON {
		if findings == nil {
			findings = []tune.Finding{}
		}
		return printJSON(w, diagnoseReport{PeriodSeconds: b.Time.Sub(a.Time).Seconds(), LoopCPUs: opt.LoopCPUs, LoopCPUsFrom: from, Findings: findings})
	}
	return tune.WriteFindings(w, findings)
}

// appliedPlan returns the plan applied with state file path to root (the
// live host, or the captured tree diagnosed), nil when there is none: no
// file (nothing applied, or reverted), or a state of another root (the
// default path holds the live host's, not a tree's). A state saved in
// another boot is an error: the reboot undid the plan.
func appliedPlan(path, root string) (*tune.Plan, error) {
	st, err := tune.LoadState(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if tune.IsLive(st.Root) != tune.IsLive(root) {
		return nil, nil
	}
	if !tune.IsLive(root) {
		abs, err := filepath.Abs(root)
		if err != nil || abs != filepath.Clean(st.Root) {
			return nil, nil
		}
	}
	if now := tunestate.BootID(root); st.BootID != "" && now != "" && now != st.BootID {
		return nil, fmt.Errorf("%s: %w (boot id %s, now %s)", path, tunestate.ErrOtherBoot, st.BootID, now)
	}
	return st.Plan, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func tunePlan(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("tune plan", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the plan as JSON (input for 'tune apply --plan')")
	root := fs.String("root", "/", "read /proc and /sys under this directory")
	policy := fs.String("policy", "inline", "inline (queue i -> IRQ on CPU i -> loop i) or dedicated (softirq CPUs apart from loop CPUs)")
	ifaces := fs.String("iface", "", "comma-separated interfaces (default: physical interfaces with queues)")
	var loops, irqs cpuFlag
	fs.Var(&loops, "loop-cpus", "CPU list for loops (default: one SMT thread per core of the CPUs local to the interfaces, or of every online CPU for an interface with none online; with the inline policy only the isolated ones of those, isolcpus domain-isolated or in isolated cgroup v2 cpuset partitions, where any is; with the dedicated policy those that are neither --irq-cpus nor their SMT siblings)")
	fs.Var(&irqs, "irq-cpus", "dedicated policy: CPU list for IRQs and softirq; the inline policy refuses it, its IRQs going to the loop CPUs (default: for each interface, one CPU per 8 cores local to it, at least one: the first of those cores' first SMT threads that are not isolated, isolated ones only where none is left, and never --loop-cpus or their SMT siblings; an interface local to fewer than 2 cores takes from the cores local to any of the interfaces)")
	busy := fs.Int("busy-poll", 0, "inline: busy-poll microseconds (sysctls, napi_defer_hard_irqs, gro_flush_timeout, adaptive-rx off); 0 = off")
	suspend := fs.Uint64("irq-suspend-ns", 0, "inline with --busy-poll: per-NAPI irq-suspend-timeout in ns via netdev napi-set (Linux 6.13+); 0 = leave")
	exclude := fs.String("exclude-irqs", "", "comma-separated IRQ numbers never to touch")
	apply := fs.Bool("apply", false, "apply the plan now (root); saves the previous state to --state")
	state := fs.String("state", defaultState, "state file written by --apply, read by 'tune revert' (required with --apply and a --root other than /)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *apply {
		if err := stateGivenForTree(fs, *root); err != nil {
			return err
		}
	}
	if err := tune.Policy(*policy).Check(); err != nil {
		return usageError{err: fmt.Errorf("--policy: %w", err)}
	}
	cfg := tune.PlanConfig{Policy: tune.Policy(*policy), Interfaces: splitList(*ifaces), LoopCPUs: loops.set, IRQCPUs: irqs.set, BusyPollUsecs: *busy, IRQSuspendTimeoutNs: *suspend}
	for _, s := range splitList(*exclude) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return usageError{err: fmt.Errorf("--exclude-irqs: %q is not an IRQ number", s)}
		}
		cfg.ExcludeIRQs = append(cfg.ExcludeIRQs, n)
	}
	// Flags that do not go together are refused before the host is read;
	// what this host refuses (an interface or CPU it does not have) is
	// MakePlan's, a failure of the run.
	if err := cfg.Check(); err != nil {
		return usageError{err: err}
	}
	h, err := tune.ReadHost(*root)
	if err != nil {
		return err
	}
	p, err := tune.MakePlan(h, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(w, p); err != nil {
			return err
		}
	} else if err := tune.WritePlan(w, p); err != nil {
		return err
	}
	if !*apply {
		if !*asJSON && len(p.Writes) > 0 {
			fmt.Fprintln(w, "\nreview, then apply with --apply (saves the current values to --state; 'spindle tune revert' restores them)")
		}
		return nil
	}
	return applyPlan(p, *root, *state, *asJSON, w)
}

// defaultState is --state's default, the live host's state file; tests
// replace it so that a run that would save there saves in a temporary
// directory instead.
var defaultState = tunestate.DefaultPath

// stateGivenForTree refuses to apply to a captured tree (a --root other
// than /) with --state left at its default: the default is the live
// host's state file, where a tree's state would refuse the host's next
// apply as "not reverted", and give a revert without --state the tree's
// plan instead of the host's. A default under the tree is not taken
// either: the state of a tree is kept where its user says, and a path
// made up under a hand-made tree could lead out of it through a link.
func stateGivenForTree(fs *flag.FlagSet, root string) error {
	if tune.IsLive(root) {
		return nil
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "state" })
	if !given {
		return usageError{err: fmt.Errorf("--root %s needs --state: the default, %s, is the live host's state file", root, tunestate.DefaultPath)}
	}
	return nil
}

// geteuid is os.Geteuid; tests replace it to check the refusals a
// non-root user gets.
var geteuid = os.Geteuid

func applyPlan(p *tune.Plan, root, state string, asJSON bool, w io.Writer) error {
	if tune.IsLive(root) && geteuid() != 0 {
		return fmt.Errorf("applying to the live host needs root (run as root, or give --root to apply to a captured tree)")
	}
	t, done, err := tune.OpenTarget(root)
	if err != nil {
		return err
	}
	defer done()
	st, err := tune.Apply(p, t, state)
	if err != nil {
		return err
	}
	if asJSON {
		warnIrqbalance(os.Stderr, st.Plan, t.Root) // stdout holds the JSON result
		return nil
	}
	if len(st.Plan.Writes) == 0 {
		fmt.Fprintln(w, "nothing to apply: the plan has no writes")
		return nil
	}
	fmt.Fprintf(w, "applied %d write(s); previous values saved in %s\nrevert with: spindle tune revert --state %s\n", len(st.Plan.Writes), state, state)
	warnIrqbalance(w, st.Plan, t.Root)
	return nil
}

// warnIrqbalance says, when irqbalance runs under root and p wrote IRQ
// affinities, that it will undo them: it rewrites affinities every 10 s,
// and the plan's note on it, if any, was made when it was planned.
func warnIrqbalance(w io.Writer, p *tune.Plan, root string) {
	irqs := 0
	for _, wr := range p.Writes {
		if wr.Kind == tune.KindFile && strings.HasPrefix(wr.Path, "/proc/irq/") {
			irqs++
		}
	}
	if pid := topo.IrqbalancePID(root); pid != 0 && irqs > 0 {
		fmt.Fprintf(w, "warning: irqbalance is running (pid %d): it rewrites IRQ affinities every 10 s and will undo the %d just applied; stop it (systemctl disable --now irqbalance) or ban these IRQs\n", pid, irqs)
	}
}

func tuneApply(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("tune apply", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the saved state as JSON")
	root := fs.String("root", "/", "apply under this directory instead of the live /proc and /sys")
	planPath := fs.String("plan", "", "plan file from 'tune plan --json' (- for stdin)")
	state := fs.String("state", defaultState, "where to save the previous values (required with a --root other than /)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := stateGivenForTree(fs, *root); err != nil {
		return err
	}
	if *planPath == "" {
		return usageError{err: errors.New("--plan is required (make one with 'spindle tune plan --json > plan.json')")}
	}
	var r io.Reader = os.Stdin
	name := "from standard input" // for the errors, which name the file
	if *planPath != "-" {
		name = *planPath
		f, err := os.Open(*planPath)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p tune.Plan
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("plan %s: %w", name, err)
	}
	// One plan, nothing after it: a file holding two (plan --json >>
	// plan.json twice) is not applied as its first.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("plan %s: more data after the plan (one plan per file)", name)
	}
	if err := applyPlan(&p, *root, *state, *asJSON, w); err != nil {
		return err
	}
	if *asJSON && len(p.Writes) == 0 {
		// Nothing applied, no state saved: still one JSON object.
		return printJSON(w, map[string]any{"writes": 0, "state": nil})
	}
	if *asJSON {
		st, err := tune.LoadState(*state)
		if err != nil {
			return err
		}
		return printJSON(w, st)
	}
	return nil
}

func tuneRevert(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("tune revert", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	root := fs.String("root", "", "root the plan was applied under (default: the one saved in the state file)")
	state := fs.String("state", defaultState, "state file written by apply")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	st, err := tune.LoadState(*state)
	if errors.Is(err, tune.ErrReverted) {
		return revertedAlready(w, *state, *asJSON)
	}
	if err != nil {
		return err
	}
	r := *root
	if r == "" {
		r = st.Root
	}
	if tune.IsLive(r) && geteuid() != 0 {
		return fmt.Errorf("reverting the live host needs root")
	}
	t, done, err := tune.OpenTarget(r)
	if err != nil {
		return err
	}
	defer done()
	drifted, gone, err := tune.Revert(*state, t)
	if errors.Is(err, tune.ErrReverted) {
		// Another revert of the state ran since it was loaded.
		return revertedAlready(w, *state, *asJSON)
	}
	if err != nil {
		// An incomplete revert still restored what it could, and its
		// error points to the notes: the targets gone and the values
		// changed since the apply. (With --json they go to stderr, as no
		// result object is printed.)
		nw := w
		if *asJSON {
			nw = os.Stderr
		}
		for _, d := range drifted {
			fmt.Fprintln(nw, "note:", d)
		}
		return err
	}
	restored := len(st.Plan.Writes) - gone
	if *asJSON {
		if drifted == nil {
			drifted = []string{}
		}
		return printJSON(w, map[string]any{"reverted": restored, "gone": gone, "state": *state + ".reverted", "drifted": drifted, "already_reverted": false})
	}
	for _, d := range drifted {
		fmt.Fprintln(w, "note:", d)
	}
	if gone > 0 {
		fmt.Fprintf(w, "restored %d value(s), %d target(s) gone; state moved to %s.reverted\n", restored, gone, *state)
	} else {
		fmt.Fprintf(w, "restored %d value(s); state moved to %s.reverted\n", restored, *state)
	}
	return nil
}

// revertedAlready reports a revert of a state reverted before: the
// host is as the first revert left it, and nothing is left to do, which
// is no failure (a revert run twice, by hand or by a unit's stop and a
// script, ends as one run would).
func revertedAlready(w io.Writer, state string, asJSON bool) error {
	if asJSON {
		return printJSON(w, map[string]any{"reverted": 0, "gone": 0, "state": state + ".reverted", "drifted": []string{}, "already_reverted": true})
	}
	fmt.Fprintf(w, "nothing to revert: %s was reverted already (%s.reverted holds it)\n", state, state)
	return nil
}
