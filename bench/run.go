package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// Config configures a benchmark run (`spindle bench`). The zero value of a
// field selects its default.
type Config struct {
	// Arms names the arms to run, in order; nil runs every registered arm.
	Arms []string
	// Topology is "loopback" (default) or "wire".
	Topology string
	// Duration is the run's total measuring budget, shared among its
	// measurements (each gets a fifth as warm-up, the rest as its window);
	// server start-up and drains come on top. A share under the least a measurement takes, a 50 ms warm-up and a
	// 100 ms window, still gets that least, over the budget: a smoke run,
	// said on Progress before measuring and in the report (Smoke).
	// Default 100 s, about two minutes in all.
	Duration time.Duration
	// Warmup and Window, when set, fix each measurement's warm-up and
	// measured window instead of deriving them from Duration: Warmup
	// alone leaves the window the rest of each measurement's share of
	// Duration, Window alone the warm-up a fifth of the share. Warm-up and
	// window must fit in the share, or the run goes over its budget: Run
	// and Sweep refuse them (ErrOverBudget) before they measure.
	Warmup, Window time.Duration
	// Reps is the number of repetitions of each measurement. Default 3.
	Reps int
	// Conns is the number of client connections. Default 50.
	Conns int
	// InFlight is the closed-loop requests in flight per connection.
	// Default 1.
	InFlight int
	// Payload is the RPC payload size. Default DefaultPayload.
	Payload int
	// ComputeUS is the µs the server spins per request (Spin: wall
	// clock, not thread CPU time). Default 0.
	ComputeUS int
	// Loops is the number of server event loops. Default 1.
	Loops int
	// ServerCPUs pins the server process. Default: the first Loops CPUs
	// this process may run on (its affinity mask: CPU 0 unless under
	// taskset or a cpuset), one per loop, as many as it may. Every CPU
	// given must be online.
	ServerCPUs []int
	// ClientCPUs pins the client threads. Default: the next CPU this
	// process may run on after the default server CPUs (the second when
	// ServerCPUs is given), or where that is a server CPU the first that
	// is not; the last, shared with the server, when there is none.
	ClientCPUs []int
	// ClientThreads is the number of client threads. Default
	// len(ClientCPUs); at most Conns.
	ClientThreads int
	// ClientBlock makes the client threads sleep in epoll_wait (and on a
	// timerfd in open loop) instead of polling: the server then pays for
	// waking the client, as it would with most real clients, and the
	// client's own wake-up latency is in the measured latency.
	ClientBlock bool
	// OpenFractions are the open-loop rates as fractions of the slowest
	// arm's median closed-loop peak. Default 0.5 and 0.8.
	OpenFractions []float64
	// SpareCPUs are CPUs for arms that need one outside the server and
	// client CPUs (uring-sqpoll's SQPOLL thread). Default: every CPU that
	// is neither a server nor a client CPU; arms that need one are skipped
	// when there is none. Setting it to a client CPU measures such an arm
	// anyway, competing with the client.
	SpareCPUs []int
	// ServerCommand starts a server child for arms built into this binary;
	// the harness appends the server flags. Default: this executable with
	// "bench server".
	ServerCommand []string
	// ServerEnv is added to the server children's environment.
	ServerEnv []string
	// PeersDir is the source directory of the bench/peers module; "" looks
	// for bench/peers in the working directory and its parents. Peer arms
	// are skipped, with the reason, when it cannot be built.
	PeersDir string
	// Progress receives one line per measurement; nil discards them.
	Progress io.Writer
	// Tag makes topology names unique. Default: the process id.
	Tag string
	// ServerRPS, on the wire topology, lists receive packet steering
	// settings for the server's veth end: each entry is a CPU list (as
	// ParseCPUList reads it) written as the rps_cpus mask of every receive
	// queue of that veth, or "none" for mask 0 (RPS off); rps_flow_cnt is
	// set to 0 so RFS cannot steer flows elsewhere. Every arm is measured
	// once under each entry, the entries alternating within each
	// repetition (reversed in even ones, with the arms: armOrder), and its
	// results are named "ARM rps=ENTRY". The settings live in the
	// namespace the harness creates and go with it. Empty: the veth's
	// defaults, untouched.
	ServerRPS []string
	// RatioTo names the reference arms of the report's paired ratios
	// (Report.PairedRatios): at each load point every other arm's server
	// CPU per request and p99 are divided by each reference's of the same
	// repetition. Each must be one of the arms asked for; one that is
	// skipped has no ratios (a note says so). Nil: those of
	// DefaultRatioTo that run; empty: none.
	RatioTo []string
}

func (c Config) withDefaults() (Config, error) {
	// Zero means the default; below zero is a mistake, not a default (a
	// --duration of -5s ran for the default 100 s).
	if c.Duration < 0 || c.Reps < 0 || c.Conns < 0 || c.InFlight < 0 || c.Loops < 0 {
		return c, fmt.Errorf("bench: negative setting (duration %v, reps %d, conns %d, inflight %d, loops %d)", c.Duration, c.Reps, c.Conns, c.InFlight, c.Loops)
	}
	if c.Duration <= 0 {
		c.Duration = 100 * time.Second
	}
	if c.Reps <= 0 {
		c.Reps = 3
	}
	if c.Conns <= 0 {
		c.Conns = 50
	}
	if c.InFlight <= 0 {
		c.InFlight = 1
	}
	var err error
	if c.Payload, err = payloadDefault("bench", c.Payload, DefaultPayload); err != nil {
		return c, err
	}
	if c.Loops <= 0 {
		c.Loops = 1
	}
	var online, allowed []int
	c.ServerCPUs, c.ClientCPUs, online, allowed = defaultCPUs(c.ServerCPUs, c.ClientCPUs, c.Loops)
	if err := checkOnline(online, "CPU", slices.Concat(c.ServerCPUs, c.ClientCPUs, c.SpareCPUs)); err != nil {
		return c, err
	}
	for i, f := range c.OpenFractions {
		if !(f > 0) || math.IsInf(f, 1) { // NaN too
			return c, fmt.Errorf("bench: open-loop fraction %v is not a positive number", f)
		}
		if slices.Contains(c.OpenFractions[:i], f) {
			return c, fmt.Errorf("bench: open-loop fraction %v given twice", f)
		}
	}
	if len(c.SpareCPUs) == 0 {
		for _, cpu := range allowed {
			if !slices.Contains(c.ServerCPUs, cpu) && !slices.Contains(c.ClientCPUs, cpu) {
				c.SpareCPUs = append(c.SpareCPUs, cpu)
			}
		}
	}
	if c.ClientThreads <= 0 {
		c.ClientThreads = len(c.ClientCPUs)
	}
	// Each client thread drives at least one connection: the load
	// generator runs no more threads than connections, and the report
	// (its client CPUs, the client ceiling) names the threads that ran.
	c.ClientThreads = min(c.ClientThreads, c.Conns)
	if c.OpenFractions == nil {
		c.OpenFractions = []float64{0.5, 0.8}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	for _, e := range c.ServerRPS {
		cpus, err := rpsCPUs(e)
		if err != nil {
			return c, err
		}
		if err := checkOnline(online, "RPS CPU", cpus); err != nil {
			return c, err
		}
	}
	if err := CheckRatioTo(c.RatioTo, c.Arms); err != nil {
		return c, err
	}
	for _, ref := range c.RatioTo {
		if _, err := LookupArm(ref); err != nil {
			return c, fmt.Errorf("bench: ratio reference: %w", err)
		}
	}
	if c.Tag == "" {
		c.Tag = strconv.Itoa(os.Getpid())
	}
	if len(c.ServerCommand) == 0 {
		var err error
		if c.ServerCommand, err = selfCommand("bench", "server"); err != nil {
			return c, err
		}
	}
	return c, nil
}

// defaultCPUs returns the CPU lists first and second, each defaulting when
// empty: first to the first n CPUs this process may run on (as many as it
// may), second to one CPU, the next it may run on that is not one of
// first's (the last when there is none, shared with first); and the
// online and the allowed CPUs.
// runtime.NumCPU counts the CPUs of the affinity mask, not CPU numbers:
// under taskset or a cpuset (a container's 2-3, say) CPU 0 may not be ours
// and CPU 3 exists though NumCPU is 2.
func defaultCPUs(first, second []int, n int) (f, s, online, allowed []int) {
	online, allowed = onlineCPUs(), allowedOrAll()
	f, s = pickCPUs(allowed, first, second, n)
	return f, s, online, allowed
}

// pickCPUs is defaultCPUs' choice from allowed, the CPUs this process may
// run on. The default second is looked for from the one after the default
// first's (the second allowed CPU when first is given), then from the
// start: given first CPUs may include that one (--server-cpus 1 on two
// CPUs), and a client beside the server while a CPU stays idle measures
// their contention.
func pickCPUs(allowed, first, second []int, n int) (f, s []int) {
	next := 1
	if len(first) == 0 {
		first = slices.Clone(allowed[:min(max(n, 1), len(allowed))])
		next = len(first)
	}
	if len(second) == 0 {
		next = min(next, len(allowed)-1)
		order := slices.Concat(allowed[next:], allowed[:next])
		second = []int{allowed[len(allowed)-1]}
		if i := slices.IndexFunc(order, func(c int) bool { return !slices.Contains(first, c) }); i >= 0 {
			second = []int{order[i]}
		}
	}
	return first, second
}

// checkOnline returns an error naming the first of cpus that is not online
// (what names the setting: "CPU", "RPS CPU").
func checkOnline(online []int, what string, cpus []int) error {
	for _, cpu := range cpus {
		if !slices.Contains(online, cpu) {
			return fmt.Errorf("bench: %s %d does not exist or is offline (online CPUs: %s)", what, cpu, FormatCPUList(online))
		}
	}
	return nil
}

// selfCommand returns the command line running this executable with args,
// the default of the commands that start the harness's children.
func selfCommand(args ...string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: find own executable: %w", err)
	}
	return append([]string{exe}, args...), nil
}

// onlineCPUs returns the online CPUs (/sys/devices/system/cpu/online), or
// 0..NumCPU-1 where that cannot be read.
func onlineCPUs() []int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if cpus, err := ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return cpus
		}
	}
	return allCPUs()
}

// allowedOrAll returns the CPUs the calling thread may run on, or
// 0..NumCPU-1 where that cannot be read.
func allowedOrAll() []int {
	if cpus, err := allowedCPUs(); err == nil && len(cpus) > 0 {
		return cpus
	}
	return allCPUs()
}

func allCPUs() []int {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// runner holds the state of one run.
type runner struct {
	cfg      Config
	topo     Topology
	peerArgv []string
	programs map[string][]string // Arm.Program command lines, by arm name
	report   *Report
	total    int
	done     int
	warmup   time.Duration
	window   time.Duration
}

// defaultArms are the arms a run measures when Config.Arms is nil: all but
// the test-only ones (Order 99 and above) and the opt-in variants.
func defaultArms() []Arm {
	return slices.DeleteFunc(Arms(), func(a Arm) bool { return a.Order >= 99 || a.OptIn })
}

// armSet resolves the configured arm names, building the peers binary if a
// peer arm is asked for. Arms that cannot run are listed with the reason.
func (r *runner) armSet(ctx context.Context, tmp string) ([]Arm, error) {
	var list []Arm
	if r.cfg.Arms == nil {
		list = defaultArms()
	} else {
		for _, n := range r.cfg.Arms {
			a, err := LookupArm(n)
			if err != nil {
				return nil, err
			}
			list = append(list, a)
		}
	}
	var run []Arm
	for _, a := range list {
		info := ArmInfo{Name: a.Name, Summary: a.Summary}
		if a.Peer && a.Start == nil {
			if r.peerArgv == nil {
				bin, err := BuildPeers(ctx, r.cfg.PeersDir, tmp)
				if err != nil {
					info.Skipped = err.Error()
				} else {
					r.peerArgv = []string{bin}
				}
			}
			if r.peerArgv == nil && info.Skipped == "" {
				info.Skipped = "peers binary unavailable"
			}
		}
		if a.NeedsSpareCPU && len(r.cfg.SpareCPUs) == 0 {
			info.Skipped = fmt.Sprintf("needs a spare CPU for its polling thread outside the server CPUs %v and client CPUs %v (this machine has %d; --spare-cpus overrides)",
				r.cfg.ServerCPUs, r.cfg.ClientCPUs, runtime.NumCPU())
		}
		if a.Unavailable != nil && info.Skipped == "" {
			if err := a.Unavailable(); err != nil {
				info.Skipped = err.Error()
			}
		}
		if !a.servesLoops(r.cfg.Loops) && info.Skipped == "" {
			info.Skipped = fmt.Sprintf("serves at most %d loop(s); this run asks for %d", a.MaxLoops, r.cfg.Loops)
		}
		if a.Program != nil && info.Skipped == "" {
			argv, err := a.Program(ctx, tmp)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				info.Skipped = err.Error()
			} else {
				if r.programs == nil {
					r.programs = map[string][]string{}
				}
				r.programs[a.Name] = argv
			}
		}
		if info.Skipped == "" {
			// Start the arm once: an arm that cannot serve here (a kernel
			// feature missing, a backend that would fall back at New or
			// whose loops degrade as they start) is skipped
			// with its reason instead of failing the run. Unlike bench
			// proxy, which finds an installed proxy that cannot start at
			// its first measurement, this runner keeps the start: the
			// budget is split after armSet (Run, Sweep), and the arms
			// that fail it are the common case, not a broken install
			// (uring-napi before 6.9, the io_uring arms where io_uring is
			// disabled), whose share would otherwise go unused; the hello
			// it reads also gives the report the arm's notes. It costs
			// one start and stop per arm, without load.
			p, err := startServerProc(ctx, r.serverArgv(a, r.cfg.Loops, 0), r.cfg.ServerEnv)
			if err == nil {
				if p.hello.Note != "" {
					r.report.Notes = append(r.report.Notes, fmt.Sprintf("arm %s: %s", a.Name, p.hello.Note))
				}
				err = p.stop()
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				info.Skipped = err.Error()
			}
		}
		r.report.Arms = append(r.report.Arms, info)
		if info.Skipped != "" {
			r.report.Notes = append(r.report.Notes, skippedNote(a.Name, info.Skipped, r.cfg.Progress))
			continue
		}
		run = append(run, a)
	}
	if len(run) == 0 {
		return nil, errors.New("bench: no arm can run")
	}
	return run, nil
}

// Run runs the default benchmark: every arm closed-loop (peak), then open
// loop at each of cfg.OpenFractions of the slowest arm's median peak; arms
// alternate within each repetition, in the given order in odd repetitions
// and reversed in even ones (armOrder). It returns the report; a
// verification failure or a crashed server fails the run. Progress lines go
// to cfg.Progress.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	r, cleanup, arms, err := newRunner(ctx, cfg, "bench")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	c := r.cfg
	r.total = len(arms) * r.variants() * c.Reps * (1 + len(c.OpenFractions))
	if err := r.splitBudget(); err != nil {
		return nil, err
	}
	for rep := 1; rep <= c.Reps; rep++ {
		for _, i := range armOrder(len(arms), rep) {
			if err := r.measureArm(ctx, arms[i], rep, "closed", 0, 0, c.Loops, c.ComputeUS); err != nil {
				return nil, err
			}
		}
	}
	r.report.Summary = summarize(r.report.Results)
	slowest := slowestPeak(r.report.Summary)
	for _, f := range c.OpenFractions {
		rate := f * slowest
		if rate <= 0 {
			r.report.Notes = append(r.report.Notes, fmt.Sprintf("open loop at %.0f%% skipped: the slowest arm's closed-loop peak is 0", f*100))
			r.total -= len(arms) * r.variants() * c.Reps
			continue
		}
		for rep := 1; rep <= c.Reps; rep++ {
			for _, i := range armOrder(len(arms), rep) {
				if err := r.measureArm(ctx, arms[i], rep, "open", f, rate, c.Loops, c.ComputeUS); err != nil {
					return nil, err
				}
			}
		}
	}
	r.finish()
	return r.report, nil
}

// slowestPeak is the smallest median achieved rate of rows (the
// closed-loop peaks): 0 when an arm's is (it stalled; Run then skips the
// open-loop points), or when there are no rows.
func slowestPeak(rows []SummaryRow) float64 {
	if len(rows) == 0 {
		return 0
	}
	slowest := rows[0].AchievedRPS.Median
	for _, s := range rows[1:] {
		slowest = min(slowest, s.AchievedRPS.Median)
	}
	return slowest
}

// SweepConfig configures `spindle bench sweep`: a closed-loop grid of
// loops × compute-µs × arm.
type SweepConfig struct {
	Config
	// Loops lists the server loop counts. Default 1 and, on machines with
	// two or more CPUs, 2.
	Loops []int
	// ComputeUS lists the per-request compute values. Default 0, 10, 50.
	ComputeUS []int
}

// Sweep runs the closed-loop grid of SweepConfig, arms alternating within
// each cell and repetition in armOrder's balanced order. Server CPUs grow
// with the loop count: loop i runs on the i-th of cfg.ServerCPUs (default:
// the first CPUs this process may run on, one per loop), and the client
// keeps cfg.ClientCPUs. A loop count above the distinct server CPUs is
// refused before anything is measured.
func Sweep(ctx context.Context, cfg SweepConfig) (*Report, error) {
	if len(cfg.Loops) == 0 {
		cfg.Loops = []int{1}
		if runtime.NumCPU() >= 2 {
			cfg.Loops = append(cfg.Loops, 2)
		}
	}
	if cfg.ComputeUS == nil {
		cfg.ComputeUS = []int{0, 10, 50}
	}
	most := slices.Max(cfg.Loops)
	if len(cfg.ServerCPUs) == 0 {
		// The server CPUs of the most loops, and the client on the next,
		// as Run's default: set here, ServerCPUs would be taken as given
		// by withDefaults, which then put the client on the second
		// allowed CPU, the second loop's.
		cfg.ServerCPUs, cfg.ClientCPUs, _, _ = defaultCPUs(nil, cfg.ClientCPUs, most)
	}
	// Refused before anything is measured: the engine arms fail to start
	// at the first cell with more loops than CPUs, which ended the sweep
	// and lost its results, and the others would run loops sharing a CPU.
	if n := len(slices.Compact(slices.Sorted(slices.Values(cfg.ServerCPUs)))); most > n {
		return nil, fmt.Errorf("bench: sweep: %d loops need %d distinct server CPUs, have %d (%s)", most, most, n, FormatCPUList(cfg.ServerCPUs))
	}
	cfg.OpenFractions = []float64{}
	r, cleanup, arms, err := newRunner(ctx, cfg.Config, "sweep")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// An arm with a loop limit (c-liburing: one thread) sits out the
	// cells above it.
	for _, loops := range cfg.Loops {
		for _, a := range arms {
			if a.servesLoops(loops) {
				r.total += r.variants() * r.cfg.Reps * len(cfg.ComputeUS)
			} else {
				r.report.Notes = append(r.report.Notes, fmt.Sprintf("arm %s not measured at %d loops: it serves at most %d", a.Name, loops, a.MaxLoops))
			}
		}
	}
	var shared []string
	for _, loops := range cfg.Loops {
		if sharesClientCPU(r.cfg.ServerCPUs[:min(loops, len(r.cfg.ServerCPUs))], r.cfg.ClientCPUs) {
			shared = append(shared, strconv.Itoa(loops))
		}
	}
	if shared != nil {
		unit := "loops"
		if slices.Equal(shared, []string{"1"}) {
			unit = "loop"
		}
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("server and client share a CPU at %s %s: those cells' figures include their contention", strings.Join(shared, ", "), unit))
	}
	if err := r.splitBudget(); err != nil {
		return nil, err
	}
	allCPUs := r.cfg.ServerCPUs
	for _, loops := range cfg.Loops {
		r.cfg.ServerCPUs = allCPUs[:min(loops, len(allCPUs))]
		for _, cu := range cfg.ComputeUS {
			for rep := 1; rep <= r.cfg.Reps; rep++ {
				for _, i := range armOrder(len(arms), rep) {
					a := arms[i]
					if !a.servesLoops(loops) {
						continue
					}
					if err := r.measureArm(ctx, a, rep, "closed", 0, 0, loops, cu); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	r.cfg.ServerCPUs = allCPUs
	r.report.Config.ServerCPUs = allCPUs
	r.report.Config.SweepLoops, r.report.Config.SweepComputeUS = cfg.Loops, cfg.ComputeUS
	r.finish()
	return r.report, nil
}

func newRunner(ctx context.Context, cfg Config, kind string) (*runner, func(), []Arm, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "spindle-bench-")
	if err != nil {
		return nil, nil, nil, err
	}
	r := &runner{cfg: cfg, report: &Report{
		Schema: SchemaVersion, Started: time.Now().UTC(), Kind: kind, Host: hostInfo(),
		Config: RunSettings{
			Conns: cfg.Conns, InFlight: cfg.InFlight, Payload: cfg.Payload, ComputeUS: cfg.ComputeUS,
			Loops: cfg.Loops, ServerCPUs: cfg.ServerCPUs, ClientCPUs: cfg.ClientCPUs,
			ClientThreads: cfg.ClientThreads, ClientBlock: cfg.ClientBlock, Reps: cfg.Reps, OpenFractions: cfg.OpenFractions,
			ServerRPS: cfg.ServerRPS,
		},
	}}
	cleanupTmp := func() { os.RemoveAll(tmp) }
	topo, err := NewTopology(cfg.Topology, cfg.Tag)
	if err != nil {
		cleanupTmp()
		return nil, nil, nil, err
	}
	if _, ok := topo.(rpsSetter); len(cfg.ServerRPS) > 0 && !ok {
		topo.Close()
		cleanupTmp()
		return nil, nil, nil, fmt.Errorf("bench: server RPS settings need the wire topology (%s has no veth to steer)", topo.Name())
	}
	r.topo = topo
	r.report.Topology = topo.Name()
	cleanup := func() {
		if err := topo.Close(); err != nil {
			fmt.Fprintf(cfg.Progress, "warning: removing the %s topology: %v\n", topo.Name(), err)
		}
		cleanupTmp()
	}
	arms, err := r.armSet(ctx, tmp)
	if err == nil {
		err = r.ratioRefs()
	}
	var unpin func() error
	if err == nil {
		// After the arms are built (cc, go build): on every CPU.
		unpin, err = pinHarness(r.cfg.ClientCPUs)
	}
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	unpinned := cleanup
	cleanup = func() {
		if err := unpin(); err != nil {
			fmt.Fprintf(cfg.Progress, "warning: %v\n", err)
		}
		unpinned()
	}
	// A sweep's server CPUs grow with its loop counts: it says at which
	// they share one with the client (Sweep).
	if kind != "sweep" && sharesClientCPU(cfg.ServerCPUs, cfg.ClientCPUs) {
		r.report.Notes = append(r.report.Notes, "server and client share a CPU: figures include their contention")
	}
	return r, cleanup, arms, nil
}

// sharesClientCPU reports whether one of server is one of client.
func sharesClientCPU(server, client []int) bool {
	return slices.ContainsFunc(server, func(c int) bool { return slices.Contains(client, c) })
}

// ratioRefs sets the report's RatioTo from the configured reference arms
// (ratioRefs: by default those that run; withDefaults checked the ones
// given), refusing one that is not among the run's arms (a test-only arm,
// left out of a run of every arm) and noting one that was skipped.
func (r *runner) ratioRefs() error {
	refs, err := runRatioRefs(r.cfg.RatioTo, DefaultRatioTo, r.report.Arms, &r.report.Notes)
	r.report.Config.RatioTo = refs
	return err
}

// rpsSetter is a topology whose server-side receive steering can be set
// (Wire).
type rpsSetter interface {
	SetServerRPS(cpus []int) error
}

// rpsCPUs parses one Config.ServerRPS entry: a CPU list, or "none".
func rpsCPUs(entry string) ([]int, error) {
	if entry == "none" {
		return nil, nil
	}
	cpus, err := ParseCPUList(entry)
	if err == nil && len(cpus) == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		return nil, fmt.Errorf("bench: bad RPS setting %q (a CPU list or \"none\"): %w", entry, err)
	}
	return cpus, nil
}

// variants is how many times each arm is measured per load point and
// repetition: once per ServerRPS entry, else once.
func (r *runner) variants() int { return max(len(r.cfg.ServerRPS), 1) }

// measureArm measures arm a once per ServerRPS entry (setting the server
// veth's steering before each), or once when there is none, and appends
// the results to the report. The entries come in armOrder's order for rep,
// so that an even repetition's whole sequence is the odd one's reversed.
func (r *runner) measureArm(ctx context.Context, a Arm, rep int, mode string, frac, rate float64, loops, compute int) error {
	if len(r.cfg.ServerRPS) == 0 {
		res, err := r.measure(ctx, a, "", rep, mode, frac, rate, loops, compute)
		if err == nil {
			r.report.Results = append(r.report.Results, res)
		}
		return err
	}
	for _, j := range armOrder(len(r.cfg.ServerRPS), rep) {
		e := r.cfg.ServerRPS[j]
		cpus, err := rpsCPUs(e)
		if err != nil {
			return err
		}
		if err := r.topo.(rpsSetter).SetServerRPS(cpus); err != nil {
			return err
		}
		res, err := r.measure(ctx, a, e, rep, mode, frac, rate, loops, compute)
		if err != nil {
			return err
		}
		r.report.Results = append(r.report.Results, res)
	}
	return nil
}

// The least warm-up and window splitDuration gives a measurement, and the
// most warm-up.
const (
	minSplitWarmup = 50 * time.Millisecond
	maxSplitWarmup = time.Second
	minSplitWindow = 100 * time.Millisecond
)

// splitDuration splits a run's duration over n measurements: each a
// warm-up of a fifth (50 ms to 1 s) and the rest, at least 100 ms,
// measured. A share shorter than that least warm-up and window still gets
// them, over the budget: smokeBudget says so.
func splitDuration(d time.Duration, n int) (warmup, window time.Duration) {
	per := d / time.Duration(max(n, 1))
	warmup = min(max(per/5, minSplitWarmup), maxSplitWarmup)
	return warmup, max(per-warmup, minSplitWindow)
}

// Smoke says that a run's duration was too short for its measurements:
// each still took the least a measurement takes, a 50 ms warm-up and a
// 100 ms window, so the run measured for longer than its budget, and its
// figures, from windows that short, show that the arms work (every reply
// verified), not how they perform. A smoke run over every arm in a short
// budget is what CI's runs of the harness are for; it is said, before the
// run measures and in the report, rather than refused.
//
// It counts the measurements the run plans when it splits the budget,
// before it measures. Those it drops later are found only as it goes, and
// are not taken off: an arm of bench proxy or bench http2 that fails to
// start at its first measurement (its programs are not started
// beforehand), and bench's open-loop points when an arm's closed-loop
// peak was 0. Each of those has a note of its own; the run then makes
// fewer measurements than Measurements, in less than MeasuringSeconds.
type Smoke struct {
	// Measurements is the number of measurements the budget was split
	// over.
	Measurements int `json:"measurements"`
	// DurationSeconds is the budget (--duration).
	DurationSeconds float64 `json:"duration_seconds"`
	// LeastSeconds is what each measurement took: its warm-up and window.
	LeastSeconds float64 `json:"least_seconds"`
	// MeasuringSeconds is Measurements times LeastSeconds, the time those
	// measurements take (start-up and drains come on top, as always).
	MeasuringSeconds float64 `json:"measuring_seconds"`
}

// smokeBudget is the Smoke of n measurements of warmup and window each in
// duration d, nil when they fit in it.
func smokeBudget(d time.Duration, n int, warmup, window time.Duration) *Smoke {
	least := warmup + window
	measuring := time.Duration(n) * least
	if measuring <= d {
		return nil
	}
	return &Smoke{Measurements: n, DurationSeconds: d.Seconds(), LeastSeconds: least.Seconds(), MeasuringSeconds: measuring.Seconds()}
}

// String says it in one line, for the progress output and the report's
// notes.
func (s *Smoke) String() string {
	dur := func(sec float64) time.Duration {
		return time.Duration(sec * float64(time.Second)).Round(time.Millisecond)
	}
	return fmt.Sprintf("smoke run: a duration of %v is too short for %d measurements, each of which takes at least %v (warm-up and window), so they take about %v, not %v (start-up and drains on top); figures from windows this short show that the arms work, they are not measurements",
		dur(s.DurationSeconds), s.Measurements, dur(s.LeastSeconds), dur(s.MeasuringSeconds), dur(s.DurationSeconds))
}

// ErrOverBudget is the error of a run whose Config.Warmup and
// Config.Window do not fit in each measurement's share of Config.Duration.
var ErrOverBudget = errors.New("bench: warm-up and window over the budget")

// CheckSplit refuses, as Run and Sweep do (ErrOverBudget, saying the
// arithmetic), a warm-up and window (0: not given) that do not fit in each
// of n measurements' share of duration d. The number of measurements a
// run makes is known only once the arms that can run here are: a command
// checks the fewest its settings can make, to refuse before the run a
// warm-up and window that fit on no host.
func CheckSplit(d time.Duration, n int, warmup, window time.Duration) error {
	_, _, err := givenSplit(d, n, warmup, window)
	return err
}

// givenSplit is splitDuration's split of d over n measurements, with the
// warm-up and window given (0: not given) in place of its own: with the
// warm-up alone, the window is the rest of the share. A warm-up and window
// that do not fit in the share are an ErrOverBudget saying the arithmetic.
func givenSplit(d time.Duration, n int, warmup, window time.Duration) (time.Duration, time.Duration, error) {
	defWarmup, defWindow := splitDuration(d, n)
	per := d / time.Duration(max(n, 1))
	measurements := "measurements"
	if n == 1 {
		measurements = "measurement"
	}
	share := fmt.Sprintf("each measurement's share of the duration, %v / %d %s = %v", d, n, measurements, per.Round(time.Millisecond))
	switch {
	case warmup == 0 && window == 0:
		return defWarmup, defWindow, nil
	case window == 0:
		if warmup >= per {
			return 0, 0, fmt.Errorf("%w: a warm-up of %v leaves no window in %s", ErrOverBudget, warmup, share)
		}
		return warmup, per - warmup, nil
	case warmup == 0:
		if defWarmup+window > per {
			return 0, 0, fmt.Errorf("%w: the default warm-up of %v (a fifth of the share, at least %v and at most %v) + a window of %v = %v, more than %s", ErrOverBudget, defWarmup, minSplitWarmup, maxSplitWarmup, window, defWarmup+window, share)
		}
		return defWarmup, window, nil
	}
	if warmup+window > per {
		return 0, 0, fmt.Errorf("%w: a warm-up of %v + a window of %v = %v, more than %s", ErrOverBudget, warmup, window, warmup+window, share)
	}
	return warmup, window, nil
}

// splitBudget divides the measuring budget among r.total measurements,
// or refuses the warm-up and window given (givenSplit).
func (r *runner) splitBudget() error {
	var err error
	if r.warmup, r.window, err = givenSplit(r.cfg.Duration, r.total, r.cfg.Warmup, r.cfg.Window); err != nil {
		return err
	}
	r.report.Config.WarmupSeconds = r.warmup.Seconds()
	r.report.Config.WindowSeconds = r.window.Seconds()
	r.report.Config.Smoke = smokeBudget(r.cfg.Duration, r.total, r.warmup, r.window)
	if s := r.report.Config.Smoke; s != nil {
		r.report.Notes = append(r.report.Notes, s.String())
		fmt.Fprintf(r.cfg.Progress, "%s: %v\n", r.command(), s)
	}
	fmt.Fprintf(r.cfg.Progress, "%s: %d measurements on %s, each %v warm-up + %v measured; server CPUs %v, client CPUs %v\n",
		r.command(), r.total, r.topo.Name(), r.warmup, r.window, r.cfg.ServerCPUs, r.cfg.ClientCPUs)
	return nil
}

// command is the spindle command that makes the run, which its progress
// lines name as bench proxy's and bench http2's name theirs: "spindle
// bench sweep" for Sweep's, "spindle bench" for Run's.
func (r *runner) command() string {
	if r.report.Kind == "sweep" {
		return "spindle bench sweep"
	}
	return "spindle bench"
}

func (r *runner) finish() {
	r.report.Summary = summarize(r.report.Results)
	r.report.PairedRatios = pairedRatios(r.report.Results, r.report.Config.RatioTo)
	r.report.Seconds = time.Since(r.report.Started).Seconds()
	// ClientCPUPercent is a share of the client CPUs: the client's busy
	// CPUs are that share times their number.
	clientCPUs := float64(clientCPUCount(r.cfg.ClientThreads, r.cfg.ClientCPUs))
	for _, res := range r.report.Results {
		if res.Mode == "closed" && res.ClientCPUPercent > 0 {
			r.report.ClientCeilingRPS = max(r.report.ClientCeilingRPS, res.AchievedRPS/(res.ClientCPUPercent/100*clientCPUs))
		}
	}
	for _, res := range r.report.Results {
		r.report.Notes = append(r.report.Notes, measurementNotes(r.resultName(res), res, r.window, r.drain())...)
	}
	saturated := map[string]bool{}
	for _, s := range r.report.Summary {
		var g []Result
		for _, res := range r.report.Results {
			if groupOf(res) == s.group() {
				g = append(g, res)
			}
		}
		r.report.Notes = append(r.report.Notes, pointNotes(s.Arm+" "+pointOf(r.report, s), s, g)...)
		if s.ClientCPUPercent >= clientSaturatedPercent && !saturated[s.Arm] {
			saturated[s.Arm] = true
			r.report.Notes = append(r.report.Notes, saturatedNote(s.Arm+" "+s.Mode, "server", s.ClientCPUPercent))
		}
	}
	var drift []driftRow
	for _, s := range r.report.Summary {
		paired := slices.ContainsFunc(r.report.PairedRatios, func(p PairedRatio) bool {
			return p.Pairs > 0 && (p.Arm == s.Arm || p.Ref == s.Arm) && p.Mode == s.Mode && p.Fraction == s.Fraction && p.Loops == s.Loops && p.ComputeUS == s.ComputeUS
		})
		drift = append(drift, driftRow{s.Arm, pointOf(r.report, s), s.Reps, s.AchievedRPS, paired})
	}
	r.report.Notes = append(r.report.Notes, driftNotes(drift)...)
	if n := stealNote(r.report.Summary); n != "" {
		r.report.Notes = append(r.report.Notes, n)
	}
	if len(r.cfg.ServerRPS) > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("server veth RPS settings %v (arms named \"ARM rps=SETTING\"): on a veth the server's receive NAPI poll runs on the sending (client) CPU; RPS moves the protocol processing of the server's incoming packets to the mask's CPUs, \"none\" leaves it on the sender's", r.cfg.ServerRPS))
	}
	if r.report.Topology == "loopback" {
		r.report.Notes = append(r.report.Notes, "loopback has no NAPI instances: busy-poll arms cannot show their effect here; use --topology wire")
	}
}

// stealShare is the share of a load point's CPU time (busy plus steal)
// that steal must reach for the report to note it.
const stealShare = 0.05

// stealNote returns a note naming the load points whose median steal
// reached stealShare of their CPU time, or "" if none did.
func stealNote(rows []SummaryRow) string {
	var pts []string
	for _, s := range rows {
		if all := s.MachineUSPerReq.Median + s.StealUSPerReq; s.StealUSPerReq > 0 && s.StealUSPerReq >= stealShare*all {
			pts = append(pts, fmt.Sprintf("%s %s %.0f%%", s.Arm, loadPoint(s), 100*s.StealUSPerReq/all))
		}
	}
	if len(pts) == 0 {
		return ""
	}
	return fmt.Sprintf("the hypervisor ran something else while this machine's CPUs had work (steal, in percent of busy plus steal time: %s): a VM with busy neighbours; the machine figures leave steal out, but the latencies and rates include its pauses", strings.Join(pts, ", "))
}

// drain is how long each measurement waits after its window for the
// replies to the window's requests.
func (r *runner) drain() time.Duration { return drainFor(r.window) }

// drainFor is how long a measurement with a window of window waits after
// it for the replies to the window's requests (both runners).
func drainFor(window time.Duration) time.Duration { return min(time.Second, window) }

// skippedNote returns the note on an arm skipped for why, and says it on
// progress (both runners).
func skippedNote(arm, why string, progress io.Writer) string {
	n := fmt.Sprintf("arm %s skipped: %s", arm, why)
	fmt.Fprintln(progress, n)
	return n
}

// measurementNotes are the notes on measurement res, named what, of a
// window of window and a drain of drain: no replies, latencies past the
// histogram's minute, requests unanswered.
func measurementNotes(what string, res Result, window, drain time.Duration) []string {
	var notes []string
	if res.Requests == 0 {
		notes = append(notes, noRepliesNote(what, "server", window))
	}
	if res.LatencyClamped > 0 {
		notes = append(notes, clampedNote(what, res.LatencyClamped))
	}
	if res.Unanswered > 0 {
		notes = append(notes, unansweredNote(what, res.Unanswered, drain))
	}
	return notes
}

// pointNotes are the notes on an arm at a load point, named what: its
// summary row s and its repetitions g. Tail percentiles resting on few
// latencies; in open loop, a rate short of the offered one or above it, and
// a client that fell behind its schedule (at its send lag p99, or for the
// slowest requests).
func pointNotes(what string, s SummaryRow, g []Result) []string {
	var notes []string
	// The table's percentiles are medians over the repetitions: the one
	// with the fewest latencies says how far they can be trusted.
	if n := fewLatenciesNote(what, g, func(r Result) int64 { return r.LatencyCount }, 99.99); n != "" {
		notes = append(notes, n)
	}
	if s.Mode != "open" {
		return notes
	}
	short, late, over := 0, 0, 0
	for _, res := range g {
		if behind(res) {
			short++
			if res.ClientSendLagP99US > clientLateUS {
				late++
			}
		}
		if ahead(res) {
			over++
		}
	}
	if over > 0 {
		notes = append(notes, fmt.Sprintf("%s answered more than it was offered: %.0f req/s of the %.0f offered (median; %d of %d reps more than %.0f%% over): requests due before the window, a backlog from the warm-up, were answered in it, so the arm (or the client, sending them late) had fallen behind and was catching up: its rate, latencies and CPU per request there are not those of a server keeping up with this rate", what, s.AchievedRPS.Median, s.OfferedRPS, over, s.Reps, keepUpTolerance*100))
	}
	answered := fmt.Sprintf("%.0f req/s of the %.0f offered (median; %d of %d reps more than %.0f%% short)", s.AchievedRPS.Median, s.OfferedRPS, short, s.Reps, keepUpTolerance*100)
	switch {
	case short > 0 && late == short:
		// Requests that went out late were answered late: the shortfall
		// may be the client's.
		notes = append(notes, fmt.Sprintf("%s answered %s, and in each of the short reps the client fell behind its schedule (send lag p99 above %.0f ms): either the arm stopped reading its requests (its socket buffers full) or the client's CPU was busy or preempted, and then the shortfall is the client's, not the arm's", what, answered, clientLateUS/1000))
	case short > 0:
		lagged := ""
		if late > 0 {
			lagged = fmt.Sprintf(" (in %d of the short reps the client fell behind its schedule too)", late)
		}
		notes = append(notes, fmt.Sprintf("%s could not keep up: it answered %s%s: past its capacity, its latencies grow with the backlog and are not those of a server at this rate", what, answered, lagged))
	}
	if s.ClientSendLagP99US > clientLateUS {
		notes = append(notes, fmt.Sprintf("the client fell behind its schedule measuring %s (send lag p99 %.0f µs): the client's CPU was busy or preempted, or the server did not read its requests (socket buffers full)", what, s.ClientSendLagP99US))
	}
	if n := tailLagNote(what, s, g); n != "" {
		notes = append(notes, n)
	}
	return notes
}

// Notes are what a bench report would note of r as a measurement of its
// own, one repetition of one load point (spindle bench client prints
// them): no replies, latencies past the histogram's minute, requests
// unanswered, tail percentiles resting on few latencies, a saturated
// client and, in open loop, a rate short of the offered one or above it
// and a client that fell behind its schedule. Any goroutine.
func (r *LoadResult) Notes() []string {
	res := Result{Arm: "the server", Mode: "closed"}
	what := "the server in closed loop"
	if r.Rate > 0 {
		res.Mode, res.OfferedRPS = "open", r.Rate
		what = fmt.Sprintf("the server at %.0f req/s", r.Rate)
	}
	loadFigures(&res, r)
	g := []Result{res}
	s := summarize(g)[0]
	notes := append(measurementNotes(what, res, r.Window, r.Drain), pointNotes(what, s, g)...)
	if s.ClientCPUPercent >= clientSaturatedPercent {
		notes = append(notes, saturatedNote(what, "server", s.ClientCPUPercent))
	}
	return notes
}

// The notes both runners write about one measurement (what names it: "uring
// closed rep 2", "haproxy rep 1") or arm, whose server is who.

// noRepliesNote says a measurement got no replies in its window, and so
// is left out of the summaries' CPU figures (withReplies), and of their
// latencies where it has none (withLatencies).
func noRepliesNote(what, who string, window time.Duration) string {
	return fmt.Sprintf("%s got no replies in its %.2fs window: the %s was starved or stalled (a busy machine?); it has no CPU per request, and the CPU medians and spreads leave it out (the latency ones too where it recorded no latency)", what, window.Seconds(), who)
}

// unansweredNote says n requests of a measurement's window were not
// answered within the drain.
func unansweredNote(what string, n uint64, drain time.Duration) string {
	return fmt.Sprintf("%s: %d requests of the window were still unanswered when the %.2fs drain ended; they count in its latencies at the time they had waited, so its tail percentiles are lower bounds", what, n, drain.Seconds())
}

// clampedNote says n latencies of measurement what were longer than the
// histogram's minute and count as a minute.
func clampedNote(what string, n int64) string {
	return fmt.Sprintf("%s: %d latencies were longer than a minute, the histogram's limit, and count as a minute: its max and the percentiles they reach are lower bounds", what, n)
}

// fewSlowest is how far into a measurement's slowest latencies a tail
// percentile may fall before the report says it rests on too few: one
// among the ten slowest is those requests' own latency, which one slow
// request more or less moves, not the shape of a tail.
const fewSlowest = 10

// fewLatenciesNote says which of the tail percentiles p99, p99.9 and
// p99.99, those up to highest (the highest a report's table shows), fall
// among the fewSlowest slowest latencies of the repetition of g, an arm at a
// load point named what, with the fewest (count says how many each has, 0
// for not known), or "" when none does or no count is known.
func fewLatenciesNote[R any](what string, g []R, count func(R) int64, highest float64) string {
	n := int64(0)
	for _, r := range g {
		if c := count(r); c > 0 && (n == 0 || c < n) {
			n = c
		}
	}
	if n == 0 {
		return ""
	}
	var few []string
	for _, p := range []struct {
		name string
		p    float64
	}{{"p99", 99}, {"p99.9", 99.9}, {"p99.99", 99.99}} {
		if p.p > highest {
			break
		}
		// k latencies are at the percentile's rank or above it.
		switch k := n - nearestRank(p.p, n) + 1; {
		case k == 1:
			few = append(few, fmt.Sprintf("its %s is its slowest", p.name))
		case k <= fewSlowest:
			few = append(few, fmt.Sprintf("its %s is among its %d slowest", p.name, k))
		}
	}
	if few == nil {
		return ""
	}
	return fmt.Sprintf("%s measured as few as %d latencies in a repetition: %s; a percentile among a measurement's %d slowest latencies is those few requests' latency, which one slow request more or less moves, not a measured tail (a longer window, or a higher rate, gives it more)", what, n, strings.Join(few, ", "), fewSlowest)
}

// clientSaturatedPercent is the client CPU, in percent of the client's
// CPUs, at which the notes say the client was saturated.
const clientSaturatedPercent = 90

// saturatedNote says the client used (nearly) all its CPU measuring what.
func saturatedNote(what, who string, clientPercent float64) string {
	return fmt.Sprintf("the client was saturated (%.0f%% CPU) measuring %s: that figure is the client's limit, not the %s's", clientPercent, what, who)
}

// resultName names measurement res in the notes: its arm, its load point
// as the report's tables name it (pointOf: the open-loop fraction, or in
// a sweep the loops and compute µs) and its repetition.
func (r *runner) resultName(res Result) string {
	s := SummaryRow{Mode: res.Mode, Fraction: res.Fraction, OfferedRPS: res.OfferedRPS, Loops: res.Loops, ComputeUS: res.ComputeUS}
	return fmt.Sprintf("%s %s rep %d", res.Arm, pointOf(r.report, s), res.Rep)
}

// keepUpTolerance is how far below the offered rate an open-loop
// measurement's achieved rate may fall before the report says the arm could
// not keep up: a server that keeps up answers, in the window, the window's
// requests give or take those in flight at its edges.
const keepUpTolerance = 0.02

// clientLateUS is the open-loop send lag p99, in µs, above which the
// report says the client fell behind its schedule.
const clientLateUS = 1000.0

// tailLagNote says where, at an open-loop load point s of repetitions g
// named what, the client's send lag at a tail percentile the table shows
// (p99.9, p99.99) was above clientLateUS and at least half the latency there
// (medians over the repetitions): a request's latency, counted from its
// intended send time, includes its send lag, so that tail is the client
// falling behind as much as the arm's. The send lag p99 note misses a client
// that fell behind for a few ms, too few requests to reach its p99. "" when
// none.
func tailLagNote(what string, s SummaryRow, g []Result) string {
	var tail []string
	for _, p := range []struct {
		name    string
		lag     func(Result) float64
		latency float64
	}{
		{"p99.9", func(r Result) float64 { return r.ClientSendLagP999US }, s.P999.Median},
		{"p99.99", func(r Result) float64 { return r.ClientSendLagP9999US }, s.P9999.Median},
	} {
		if lag := spreadBy(g, p.lag).Median; lag > clientLateUS && 2*lag >= p.latency {
			tail = append(tail, fmt.Sprintf("send lag %s %.0f µs of a %s latency of %.0f µs", p.name, lag, p.name, p.latency))
		}
	}
	if tail == nil {
		return ""
	}
	return fmt.Sprintf("the client fell behind its schedule for the slowest requests measuring %s (%s; medians over the repetitions): at those percentiles the latency is the client's lateness as much as the arm's (the client's CPU was busy or preempted, or the arm did not read its requests)", what, strings.Join(tail, ", "))
}

// behind reports whether an open-loop measurement answered less than it
// was offered, by more than keepUpTolerance.
func behind(res Result) bool {
	return res.Mode == "open" && res.AchievedRPS < res.OfferedRPS*(1-keepUpTolerance)
}

// ahead reports whether an open-loop measurement answered more than it was
// offered, by more than keepUpTolerance: in its window it answered
// requests due before it too, a backlog it had fallen behind by.
func ahead(res Result) bool {
	return res.Mode == "open" && res.AchievedRPS > res.OfferedRPS*(1+keepUpTolerance)
}

// group is an arm and load point: what summarize groups measurements by.
type group struct {
	arm, mode string
	frac      float64
	cu, loops int
}

func groupOf(res Result) group {
	return group{res.Arm, res.Mode, res.Fraction, res.ComputeUS, res.Loops}
}

func (s SummaryRow) group() group { return group{s.Arm, s.Mode, s.Fraction, s.ComputeUS, s.Loops} }

// serverArgv is the command line of arm's server child.
func (r *runner) serverArgv(a Arm, loops, compute int) []string {
	argv := slices.Clone(r.topo.ServerPrefix())
	switch {
	case r.programs[a.Name] != nil:
		argv = append(argv, r.programs[a.Name]...)
	case a.Peer && a.Start == nil:
		argv = append(argv, r.peerArgv...)
	default:
		argv = append(argv, r.cfg.ServerCommand...)
	}
	return append(argv, "-arm", a.Name, "-listen", r.topo.ListenAddr(), "-loops", strconv.Itoa(loops),
		"-cpus", FormatCPUList(r.cfg.ServerCPUs), "-spare-cpus", FormatCPUList(r.cfg.SpareCPUs),
		"-compute-us", strconv.Itoa(compute), "-control")
}

// snapshot is the resource counters at one edge of a window, each with the
// time it was read: a busy child answers its usage request late, so the
// counters of one edge are read at different times, and none exactly at
// the window's edge.
type snapshot struct {
	usage ServerUsage
	// usageAt is when the harness got the usage answer (the child's own
	// usage.MonoNS is preferred when both edges have it).
	usageAt time.Time
	// usageRead is when the child read its usage, on the harness's
	// clock: usage.MonoNS placed by the harness's CLOCK_MONOTONIC at
	// usageAt, or usageAt where either is missing.
	usageRead time.Time
	procEdge
	err error
}

// procEdge is the host's /proc files read at one edge of a window, each
// with the time of its read's middle (midStamp): /proc/stat, softirqs
// and interrupts.
type procEdge struct {
	stat   *topo.Stat
	statAt time.Time
	soft   Softirqs
	softAt time.Time
	intr   *Interrupts
	intrAt time.Time
}

// edgeReader reads a window's snapshots: the clock, the server child's
// usage, and the host's /proc files. Tests give it fakes.
type edgeReader struct {
	now func() time.Time
	// mono is CLOCK_MONOTONIC in ns (monoNow), read after now to place
	// the child's usage.MonoNS; nil or 0 places it at the answer's arrival.
	mono  func() int64
	usage func() (ServerUsage, error)
	stat  func() (*topo.Stat, error)
	soft  func() (Softirqs, error)
	intr  func() (*Interrupts, error)
}

// liveEdges reads the live host's /proc and child p's usage.
func liveEdges(p *serverProc) edgeReader {
	e := liveProc()
	e.mono, e.usage = monoNow, p.usage
	return e
}

// liveProc reads the live host's /proc files (readProc), no usage.
func liveProc() edgeReader {
	var proc Proc
	return edgeReader{now: time.Now, stat: proc.Stat, soft: proc.Softirqs, intr: proc.Interrupts}
}

// readProc reads the /proc files of one edge into s, each read stamped
// at its middle (it takes microseconds), and returns the errors.
func (e edgeReader) readProc(s *procEdge) error {
	var errs [3]error
	s.statAt = midStamp(e.now, func() { s.stat, errs[0] = e.stat() })
	s.softAt = midStamp(e.now, func() { s.soft, errs[1] = e.soft() })
	s.intrAt = midStamp(e.now, func() { s.intr, errs[2] = e.intr() })
	return errors.Join(errs[:]...)
}

// midStamp runs read, a read of a /proc file, and returns the time of its
// middle by the clock now: the read takes microseconds, and the counters
// it returns are of some moment within them.
func midStamp(now func() time.Time, read func()) time.Time {
	t0 := now()
	read()
	return t0.Add(now().Sub(t0) / 2)
}

// window takes the snapshots at start and end, sleeping with sleepUntil,
// which returns false when the measurement is over early; ok is false
// then. The host's /proc files and the child's usage are read by a
// goroutine each: a busy child answers its usage request late, at times
// after the window has ended, and the /proc reads, which take
// microseconds, must not wait for it. When they came after the child's
// answer at each edge, a start answered after the window's end put both
// /proc/stat reads microseconds apart: no tick between them, and a machine
// CPU of 0.
func (e edgeReader) window(start, end time.Time, sleepUntil func(time.Time) bool) (s [2]snapshot, ok bool) {
	var procErr, usageErr [2]error
	var procOK, usageOK bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, t := range []time.Time{start, end} {
			if !sleepUntil(t) {
				return
			}
			procErr[i] = e.readProc(&s[i].procEdge)
		}
		procOK = true
	})
	wg.Go(func() {
		for i, t := range []time.Time{start, end} {
			if !sleepUntil(t) {
				return
			}
			s[i].usage, usageErr[i] = e.usage()
			s[i].usageAt = e.now()
			s[i].usageRead = s[i].usageAt
			if e.mono != nil {
				if m, u := e.mono(), s[i].usage.MonoNS; m > 0 && u > 0 && u <= m {
					s[i].usageRead = s[i].usageAt.Add(-time.Duration(m - u))
				}
			}
		}
		usageOK = true
	})
	wg.Wait()
	for i := range s {
		s[i].err = errors.Join(usageErr[i], procErr[i])
	}
	return s, procOK && usageOK
}

// minProcCover is the share of a window that its two reads of a source
// (/proc/stat by the harness, the child's usage) must span for that
// source's figures to pass as the window's.
const minProcCover = 0.5

// lateReadsNote returns a note on measurement what (resultName) when the
// /proc/stat reads of edges, or the
// server child's usage answers, span less than minProcCover of the window
// from start to end, or "" when both span enough. A starved harness reads
// /proc/stat late: with both reads after the window's end no tick falls
// between them and the machine CPU reads 0. A starved child answers late:
// with both answers after the load stopped its counters moved by nothing
// (no waits) and its CPU per request is an idle process's, not the
// window's. An answer's time is when the harness got it, the latest the
// child can have read its usage.
func lateReadsNote(what string, edges [2]snapshot, start, end time.Time) string {
	window := end.Sub(start)
	if window <= 0 {
		return ""
	}
	var late []string
	for _, src := range []struct {
		what, figures string
		a, b          time.Time
	}{
		{"the harness read /proc/stat", "its machine figures", edges[0].statAt, edges[1].statAt},
		{"the server child's usage answers came", "its server figures", edges[0].usageAt, edges[1].usageAt},
	} {
		if src.a.IsZero() || src.b.IsZero() {
			continue
		}
		from, to := src.a, src.b
		if from.Before(start) {
			from = start
		}
		if to.After(end) {
			to = end
		}
		span := max(to.Sub(from), 0)
		if span >= time.Duration(minProcCover*float64(window)) {
			continue
		}
		late = append(late, fmt.Sprintf("%s %.0f ms after the window's start and %.0f ms after its end, covering %.0f%% of it: %s are not that window's",
			src.what, ms(src.a.Sub(start)), ms(src.b.Sub(end)), 100*float64(span)/float64(window), src.figures))
	}
	if late == nil {
		return ""
	}
	return fmt.Sprintf("%s (%.2fs window, a starved machine): %s", what, window.Seconds(), strings.Join(late, "; "))
}

// noWaitsNote returns a note on measurement what (resultName), res filled
// from edges, when its server counts its kernel waits and made none
// between its two usage reads though replies came between them (its
// server CPU per request is not 0), or "". A server that waits to learn
// of each request answers none without a wait: those replies were
// answered before the first read and taken late by a client starved of
// its CPU, and the server's figures per request are not the window's.
// (An SQPOLL ring kept busy throughout need not enter the kernel at all:
// the note says that too.)
func noWaitsNote(what string, res Result, edges [2]snapshot) string {
	u0, u1 := edges[0].usage, edges[1].usage
	if u0.Counters == nil || u1.Counters == nil || res.Server.TotalUSPerReq <= 0 ||
		u1.Counters["waits"]+u1.Counters["submits"] != u0.Counters["waits"]+u0.Counters["submits"] {
		return ""
	}
	return fmt.Sprintf("%s: the server made no kernel wait between its usage reads, yet the client took replies between them: unless it never had to wait (an SQPOLL ring kept busy), it answered them before the first read and the client, starved of its CPU, took them late, so the server's figures per request are not the window's", what)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// intervals are the measured lengths between a window's two snapshots of
// the child's usage and of /proc/stat; each falls back to the window when
// its stamps are missing (the softirq and interrupt counts' are countsOn's).
type intervals struct {
	usage, stat time.Duration
}

func measuredIntervals(e [2]snapshot, window time.Duration) intervals {
	iv := intervals{
		usage: apart(e[0].usageAt, e[1].usageAt, window),
		stat:  apart(e[0].statAt, e[1].statAt, window),
	}
	if a, b := e[0].usage.MonoNS, e[1].usage.MonoNS; a > 0 && b > a {
		iv.usage = time.Duration(b - a)
	}
	return iv
}

// apart is the time from read a to read b, or window where a's time is
// missing or b is not after it.
func apart(a, b time.Time, window time.Duration) time.Duration {
	if a.IsZero() || !b.After(a) {
		return window
	}
	return b.Sub(a)
}

// measure runs one measurement with a fresh server child; rps is the
// ServerRPS entry it runs under, "" for none.
func (r *runner) measure(ctx context.Context, a Arm, rps string, rep int, mode string, frac, rate float64, loops, compute int) (Result, error) {
	res := Result{Arm: a.Name, Rep: rep, Mode: mode, Fraction: frac, OfferedRPS: rate, ComputeUS: compute, Loops: loops}
	if rps != "" {
		res.Arm += " rps=" + rps
		res.ServerRPS = rps
	}
	err := r.measureServer(ctx, a.Name, r.serverArgv(a, loops, compute), &res)
	return res, err
}

// measureServer runs one measurement of res's load point (its Mode,
// OfferedRPS, Rep, …) against a fresh server child started with argv, of
// the arm named name, and fills res's figures: measure's, and bench ab's
// for a command line of its own.
func (r *runner) measureServer(ctx context.Context, name string, argv []string, res *Result) error {
	mode, rep, rate := res.Mode, res.Rep, res.OfferedRPS
	p, err := startServerProc(ctx, argv, r.cfg.ServerEnv)
	if err != nil {
		return err
	}
	snaps := make(chan [2]snapshot, 1)
	var winStart, winEnd time.Time
	// done ends the window goroutine when the load run fails before the
	// window is over (a crashed server), so it does not outlive measure.
	done := make(chan struct{})
	defer close(done)
	sleepUntil := func(t time.Time) bool { return waitUntil(done, t) }
	lc := LoadConfig{
		Addr: p.hello.Addr, Conns: r.cfg.Conns, InFlight: r.cfg.InFlight, Rate: rate, Payload: r.cfg.Payload,
		Warmup: r.warmup, Duration: r.window, Threads: r.cfg.ClientThreads, CPUs: r.cfg.ClientCPUs, Block: r.cfg.ClientBlock,
		NetNS: r.topo.ClientNetNS(), Drain: r.drain(),
		Window: func(start, end time.Time) {
			// Called from this goroutine, inside RunLoad.
			winStart, winEnd = start, end
			go func() {
				if s, ok := liveEdges(p).window(start, end, sleepUntil); ok {
					snaps <- s
				}
			}()
		},
	}
	load, err := RunLoad(ctx, lc)
	var edges [2]snapshot
	if err == nil {
		edges = <-snaps
		err = errors.Join(edges[0].err, edges[1].err)
	}
	if serr := p.stop(); serr != nil {
		// A crashed server explains a failed load run: keep both.
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("bench: %s %s rep %d: %w", name, mode, rep, err)
	}
	r.fill(res, load, edges)
	for _, n := range []string{lateReadsNote(r.resultName(*res), edges, winStart, winEnd), noWaitsNote(r.resultName(*res), *res, edges)} {
		if n != "" {
			r.report.Notes = append(r.report.Notes, n)
		}
	}
	r.done++
	label := loadPoint(SummaryRow{Mode: mode, Fraction: res.Fraction, OfferedRPS: rate})
	fmt.Fprintf(r.cfg.Progress, "[%3d/%d] rep %d %-9s %-15s loops %d compute %2dµs: %8.0f req/s  p50 %7.1fµs  p99 %8.1fµs  p99.9 %8.1fµs  server %5.1fµs/req  machine work %5.1fµs/req  client %3.0f%%\n",
		r.done, r.total, rep, label, name, res.Loops, res.ComputeUS, res.AchievedRPS, res.Latency.P50, res.Latency.P99, res.Latency.P999,
		res.Server.TotalUSPerReq, res.Machine.WorkUSPerReq, res.ClientCPUPercent)
	return nil
}

// fill computes a Result's figures from the load result and the window's
// snapshots. The achieved rate is the window's (replies received in it per
// second of it); a per-request figure is a counter's change between its two
// reads (getrusage for the server, /proc/stat for the machine, …) over the
// replies received between those same reads (windowRate.over), not over
// the window's: the reads are not at the window's edges.
func (r *runner) fill(res *Result, load *LoadResult, edges [2]snapshot) {
	loadFigures(res, load)
	n := float64(load.Replies)
	if n == 0 || load.Window <= 0 {
		return
	}
	rps := n / load.Window.Seconds()
	iv := measuredIntervals(edges, load.Window)
	// Each source's counters are divided by the replies received between
	// its own two reads (windowRate.over), so that a read answered late,
	// after the load stopped, does not spread the window's requests over a
	// longer interval than they came in.
	rate := load.rate()
	usageRPS := rate.over(edges[0].usageRead, edges[1].usageRead, iv.usage)
	statRPS := rate.over(edges[0].statAt, edges[1].statAt, iv.stat)
	// The client's CPU and idle polling are read by its own threads at the
	// window's edges.
	res.ClientUSPerReq = cpuUSPerReq(float64(load.ClientBusy()), load.Window, rps)
	u0, u1 := edges[0].usage, edges[1].usage
	perReq := func(delta float64) float64 { return countPerReq(delta, iv.usage, usageRPS) }
	perReqUS := func(ns float64) float64 { return cpuUSPerReq(ns, iv.usage, usageRPS) }
	res.Server = ServerCPU{
		UserUSPerReq:      perReqUS(float64(u1.UserNS - u0.UserNS)),
		SysUSPerReq:       perReqUS(float64(u1.SysNS - u0.SysNS)),
		TotalUSPerReq:     perReqUS(float64(u1.UserNS - u0.UserNS + u1.SysNS - u0.SysNS)),
		CtxSwitchesPerReq: perReq(float64(u1.Nvcsw - u0.Nvcsw + u1.Nivcsw - u0.Nivcsw)),
	}
	if u1.Counters != nil {
		w := (u1.Counters["waits"] + u1.Counters["submits"]) - (u0.Counters["waits"] + u0.Counters["submits"])
		res.Server.KernelWaitsPerReq = perReq(float64(w))
		res.Server.WaitCPUUSPerReq = perReqUS(float64(u1.Counters["wait_cpu_ns"] - u0.Counters["wait_cpu_ns"]))
	}
	for _, t := range threadRuns(u0.Threads, u1.Threads) {
		res.Server.Threads = append(res.Server.Threads, ThreadCPU{TID: t.TID, Comm: t.Comm, USPerReq: perReqUS(float64(t.RunNS)), CPU: t.Processor})
	}
	res.Machine = machineCPU(edges[0].stat, edges[1].stat, iv.stat, statRPS, cpuUSPerReq(float64(load.ClientIdle), load.Window, rps))
	e := [2]procEdge{edges[0].procEdge, edges[1].procEdge}
	res.Machine.PerCPU = cpuSplit(e, rate, func(cpu int) string {
		switch srv, cli := slices.Contains(r.cfg.ServerCPUs, cpu), slices.Contains(r.cfg.ClientCPUs, cpu); {
		case srv && cli:
			return "both"
		case srv:
			return "server"
		case cli:
			return "client"
		}
		return ""
	})
	k := countsOn(e, r.cfg.ServerCPUs, rate)
	res.Machine.ServerCPUInterruptsPerReq, res.Machine.ServerCPUDeviceIRQsPerReq, res.Machine.ServerCPUNetRxPerReq = k.interrupts, k.deviceIRQs, k.netRx
}

// loadFigures puts into res what the client measured of it (load): its
// rate, replies, latencies and the client's CPU and send lag.
func loadFigures(res *Result, load *LoadResult) {
	res.AchievedRPS = load.Throughput()
	res.Requests = load.Replies
	res.Unanswered = load.Unanswered
	res.Latency, res.LatencyClamped, res.LatencyCount = load.Hist.latencyFigures()
	res.Spectrum = load.Hist.Spectrum()
	res.ClientCPUPercent = load.ClientCPUPercent()
	if load.SendLag != nil {
		res.ClientSendLagP99US = us(load.SendLag.Quantile(99))
		res.ClientSendLagP999US = us(load.SendLag.Quantile(99.9))
		res.ClientSendLagP9999US = us(load.SendLag.Quantile(99.99))
	}
}

// cpuSplit is the busy time of each CPU per request between the
// /proc/stat reads e[0] and e[1], split as MachineCPU's, at the request
// rate between the two reads (w.over), each CPU's role named by role:
// the bench report's MachineCPU.PerCPU and the side-by-side reports'
// MachineWork.PerCPU. A CPU offline at the first read is left out.
func cpuSplit(e [2]procEdge, w windowRate, role func(cpu int) string) []CPUSplit {
	d := apart(e[0].statAt, e[1].statAt, w.window)
	tick := ticksPerReqUS(d, w.over(e[0].statAt, e[1].statAt, d))
	statTicks := d.Seconds() * 1e9 / ClockTick
	s0, s1 := e[0].stat, e[1].stat
	var out []CPUSplit
	for _, cpu := range slices.Sorted(maps.Keys(s1.CPU)) {
		c0, ok := s0.CPU[cpu]
		if !ok {
			continue // offline at the start of the window
		}
		t := s1.CPU[cpu].Sub(c0)
		out = append(out, CPUSplit{
			CPU: cpu, Role: role(cpu), BusyPercent: 100 * float64(workTicks(t)) / statTicks,
			UserUSPerReq: tick(t.User + t.Nice), SysUSPerReq: tick(t.System), IRQUSPerReq: tick(t.IRQ), SoftirqUSPerReq: tick(t.SoftIRQ),
			StealUSPerReq: tick(t.Steal),
		})
	}
	return out
}

// kernelCounts are the interrupts and NET_RX softirqs on a set of CPUs
// per request.
type kernelCounts struct {
	// interrupts counts every interrupt (device and local: timer, IPIs),
	// deviceIRQs the device ones alone.
	interrupts, deviceIRQs float64
	netRx                  float64
}

// countsOn is the interrupts (/proc/interrupts) and NET_RX softirqs
// (/proc/softirqs) on cpus between the reads e[0] and e[1], per request:
// each file's counts over the replies received between its own two reads
// (w.over), as every per-request figure is.
func countsOn(e [2]procEdge, cpus []int, w windowRate) kernelCounts {
	var irq, dev, netrx uint64
	rx0, rx1 := e[0].soft["NET_RX"], e[1].soft["NET_RX"]
	for _, cpu := range cpus {
		if i0, i1 := e[0].intr, e[1].intr; i0 != nil && i1 != nil && cpu < len(i0.Total) && cpu < len(i1.Total) {
			irq += i1.Total[cpu] - i0.Total[cpu]
			dev += i1.Device[cpu] - i0.Device[cpu]
		}
		if cpu < len(rx0) && cpu < len(rx1) {
			netrx += rx1[cpu] - rx0[cpu]
		}
	}
	intrD := apart(e[0].intrAt, e[1].intrAt, w.window)
	softD := apart(e[0].softAt, e[1].softAt, w.window)
	intrRPS, softRPS := w.over(e[0].intrAt, e[1].intrAt, intrD), w.over(e[0].softAt, e[1].softAt, softD)
	return kernelCounts{
		interrupts: countPerReq(float64(irq), intrD, intrRPS),
		deviceIRQs: countPerReq(float64(dev), intrD, intrRPS),
		netRx:      countPerReq(float64(netrx), softD, softRPS),
	}
}

// machineCPU is the machine-wide part of MachineCPU from /proc/stat read
// at a window's two edges, s0 and s1, d apart, at rps requests per second
// (the window's), the client having spent clientPollUS CPU-µs per request
// in polls that found nothing: busy time (workTicks) over all CPUs and its
// split, steal, work (busy less the client's empty polls) and context
// switches. The per-CPU split (cpuSplit) and the counts on a process's
// CPUs (countsOn) are added by bench's fill and by windowMachine, which
// keeps the work, softirq and steal of it (MachineCPU.work).
func machineCPU(s0, s1 *topo.Stat, d time.Duration, rps, clientPollUS float64) MachineCPU {
	tick := ticksPerReqUS(d, rps)
	tot := s1.Total.Sub(s0.Total)
	m := MachineCPU{
		TotalUSPerReq: tick(workTicks(tot)), UserUSPerReq: tick(tot.User + tot.Nice), SysUSPerReq: tick(tot.System),
		IRQUSPerReq: tick(tot.IRQ), SoftirqUSPerReq: tick(tot.SoftIRQ), StealUSPerReq: tick(tot.Steal),
		CtxSwitchesPerReq:  countPerReq(float64(s1.Ctxt-s0.Ctxt), d, rps),
		ClientPollUSPerReq: clientPollUS,
	}
	m.WorkUSPerReq = max(m.TotalUSPerReq-clientPollUS, 0)
	return m
}

// work is m's figures that the side-by-side reports keep.
func (m MachineCPU) work() MachineWork {
	return MachineWork{
		TotalUSPerReq: m.TotalUSPerReq, ClientPollUSPerReq: m.ClientPollUSPerReq, WorkUSPerReq: m.WorkUSPerReq,
		SoftirqUSPerReq: m.SoftirqUSPerReq, StealUSPerReq: m.StealUSPerReq,
	}
}

// ticksPerReqUS returns what a count of /proc/stat ticks over d, at rps
// requests per second, is in CPU-µs per request.
func ticksPerReqUS(d time.Duration, rps float64) func(ticks uint64) float64 {
	return func(ticks uint64) float64 { return cpuUSPerReq(float64(ticks)*ClockTick, d, rps) }
}

// countPerReq turns a counter's change over interval d, at rps requests
// per second, into a count per request.
func countPerReq(delta float64, d time.Duration, rps float64) float64 {
	if rps <= 0 || d <= 0 {
		// No request in the interval: nothing to divide by.
		return 0
	}
	return delta / d.Seconds() / rps
}

// cpuUSPerReq is countPerReq for ns of CPU, in µs per request.
func cpuUSPerReq(ns float64, d time.Duration, rps float64) float64 {
	return countPerReq(ns, d, rps) / 1e3
}

// workTicks is the time a /proc/stat CPU line spent running this machine's
// work: user (guest included: the kernel adds guest time to user and
// guest_nice to nice, and topo.ParseStat does not read the guest columns),
// nice, system, irq and softirq. Unlike topo.CPUTime.Busy it leaves out
// steal, the time the hypervisor ran another guest on the CPU: a figure
// that counted it would grow with the neighbours' load.
func workTicks(t topo.CPUTime) uint64 {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ
}

// summarize groups results by arm and load point, in first-seen order, and
// takes medians and spreads.
func summarize(results []Result) []SummaryRow {
	order, groups := groupBy(results, groupOf)
	var rows []SummaryRow
	for _, k := range order {
		g := groups[k]
		spread := func(f func(Result) float64) Spread { return spreadBy(g, f) }
		// A CPU per request is over the repetitions with replies.
		answered := withReplies(g, func(r Result) uint64 { return r.Requests })
		perReq := func(f func(Result) float64) Spread { return spreadBy(answered, f) }
		timed := withLatencies(g, func(r Result) Percentiles { return r.Latency })
		latency := func(f func(Percentiles) float64) Spread {
			return spreadBy(timed, func(r Result) float64 { return f(r.Latency) })
		}
		row := SummaryRow{
			Arm: k.arm, Mode: k.mode, Fraction: k.frac, ComputeUS: k.cu, Loops: k.loops, Reps: len(g),
			OfferedRPS:          g[0].OfferedRPS,
			AchievedRPS:         spread(func(r Result) float64 { return r.AchievedRPS }),
			P50:                 latency(func(p Percentiles) float64 { return p.P50 }),
			P90:                 latency(func(p Percentiles) float64 { return p.P90 }),
			P99:                 latency(func(p Percentiles) float64 { return p.P99 }),
			P999:                latency(func(p Percentiles) float64 { return p.P999 }),
			P9999:               latency(func(p Percentiles) float64 { return p.P9999 }),
			Max:                 latency(func(p Percentiles) float64 { return p.Max }),
			ServerUSPerReq:      perReq(func(r Result) float64 { return r.Server.TotalUSPerReq }),
			MachineUSPerReq:     perReq(func(r Result) float64 { return r.Machine.TotalUSPerReq }),
			MachineWorkUSPerReq: perReq(func(r Result) float64 { return r.Machine.WorkUSPerReq }),
			SoftirqUSPerReq:     perReq(func(r Result) float64 { return r.Machine.SoftirqUSPerReq }).Median,
			StealUSPerReq:       perReq(func(r Result) float64 { return r.Machine.StealUSPerReq }).Median,
			ClientCPUPercent:    spread(func(r Result) float64 { return r.ClientCPUPercent }).Median,
			ClientSendLagP99US:  spread(func(r Result) float64 { return r.ClientSendLagP99US }).Median,
		}
		for _, res := range g {
			row.Unanswered += res.Unanswered
		}
		rows = append(rows, row)
	}
	return rows
}

// groupBy groups items by key, keys in first-seen order: what the
// summaries take their medians over.
func groupBy[T any, K comparable](items []T, key func(T) K) (order []K, groups map[K][]T) {
	groups = map[K][]T{}
	for _, it := range items {
		k := key(it)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	return order, groups
}

// withReplies returns the items of g whose measurement got replies in its
// window (replies says how many): those a CPU per request was measured
// for. Without replies there is nothing to divide by and the figure is
// left 0, which is no measurement: the summaries' CPU per request figures
// are taken over these alone, while a rate keeps every repetition (and the
// latencies every one that has some: withLatencies).
func withReplies[T any](g []T, replies func(T) uint64) []T {
	var out []T
	for _, it := range g {
		if replies(it) > 0 {
			out = append(out, it)
		}
	}
	return out
}

// withLatencies returns the items of g that have latencies (lat gives
// their percentiles). A closed-loop measurement that got no replies sent no
// request in its window (each connection's one in flight went out before
// it), so it recorded none, and its percentiles are 0: no measurement, left
// out of the latency spreads as of the CPU ones, where a 0 made the
// minimum 0 and pulled the median down. An open-loop one keeps the latencies
// of the requests it could not send or get answered (recorded at the time
// they had waited), its stall among them.
func withLatencies[T any](g []T, lat func(T) Percentiles) []T {
	var out []T
	for _, it := range g {
		if lat(it) != (Percentiles{}) {
			out = append(out, it)
		}
	}
	return out
}

// spreadBy is the spread of f over g.
func spreadBy[T any](g []T, f func(T) float64) Spread {
	v := make([]float64, len(g))
	for i, it := range g {
		v[i] = f(it)
	}
	return spreadOf(v)
}

// spreadOf returns the median (the mean of the middle two for an even
// count), minimum and maximum of v.
func spreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// waitUntil sleeps until t and reports true, or returns false as soon as
// done is closed (a measurement that ended early).
func waitUntil(done <-chan struct{}, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}
