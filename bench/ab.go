package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// ABSchemaVersion names the layout of ABReport (docs/BENCH-SCHEMA.md).
const ABSchemaVersion = "spindle-bench-ab/1"

// Defaults of ABConfig: those of the scratch script ab.py, which measured
// the "paired against the build before" figures of docs/BENCHMARKS.md
// (`spindle bench client -cpus 1 -payload 64 -warmup 1s -duration 5s`).
const (
	DefaultABReps    = 8
	DefaultABPayload = 64
	DefaultABConns   = 50
	DefaultABWarmup  = time.Second
	DefaultABWindow  = 5 * time.Second
)

// ABArm is one arm of `spindle bench ab`: a name and the command line of
// a server that speaks `spindle bench server`'s flags and its -control
// protocol (another build of spindle's `bench server -arm ARM`, the C
// peer's `-arm c-liburing`, …). The harness appends -listen, -cpus and
// -control.
type ABArm struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
}

// ParseABArm parses an arm given as "NAME=COMMAND ARGS...": the command
// line is split at white space (no quoting). Any goroutine.
func ParseABArm(s string) (ABArm, error) {
	name, cmd, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	switch {
	case !ok:
		return ABArm{}, fmt.Errorf("bench: arm %q: want NAME=COMMAND ARGS...", s)
	case name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == ' ' || r == '\t' }):
		return ABArm{}, fmt.Errorf("bench: arm %q: want a name of one word before the =", s)
	}
	argv := strings.Fields(cmd)
	if len(argv) == 0 {
		return ABArm{}, fmt.Errorf("bench: arm %q: no command after the =", s)
	}
	return ABArm{Name: name, Command: argv}, nil
}

// CheckABArms refuses fewer than two arms (nothing to pair), and a name
// given twice (its measurements would pair as one arm's).
func CheckABArms(arms []ABArm) error {
	if len(arms) < 2 {
		return fmt.Errorf("bench: ab needs two arms or more, the first the base; got %d", len(arms))
	}
	for i, a := range arms {
		if slices.ContainsFunc(arms[:i], func(b ABArm) bool { return b.Name == a.Name }) {
			return fmt.Errorf("bench: arm %s given twice", a.Name)
		}
		if len(a.Command) == 0 {
			return fmt.Errorf("bench: arm %s has no command", a.Name)
		}
	}
	return nil
}

// ABConfig configures RunAB. The zero value of a field selects its
// default.
type ABConfig struct {
	// Arms are the servers, the first the base the others are paired
	// against; two at least, each name once.
	Arms []ABArm
	// Reps is the number of repetitions. Default DefaultABReps.
	Reps int
	// Rate is the offered rate in requests per second; 0 is closed loop.
	Rate float64
	// Payload is the RPC payload size. Default DefaultABPayload.
	Payload int
	// Conns is the number of client connections. Default DefaultABConns.
	Conns int
	// Warmup and Window are each measurement's dropped warm-up and measured
	// window. Defaults DefaultABWarmup and DefaultABWindow.
	Warmup, Window time.Duration
	// ServerCPUs are given to every server's -cpus, ClientCPUs pin the
	// client threads and the harness's own. Defaults as Config's, for one
	// loop: the first CPU this process may run on, and the next.
	ServerCPUs, ClientCPUs []int
	// ServerEnv is added to the servers' environment.
	ServerEnv []string
	// Progress receives one line per measurement; nil discards them.
	Progress io.Writer
}

func (c ABConfig) withDefaults() (ABConfig, error) {
	if err := CheckABArms(c.Arms); err != nil {
		return c, err
	}
	if c.Reps < 0 || c.Conns < 0 || c.Warmup < 0 || c.Window < 0 || !(c.Rate >= 0) || math.IsInf(c.Rate, 1) {
		return c, fmt.Errorf("bench: negative setting (reps %d, conns %d, warmup %v, window %v, rate %v)", c.Reps, c.Conns, c.Warmup, c.Window, c.Rate)
	}
	c.Reps = cmp.Or(c.Reps, DefaultABReps)
	c.Conns = cmp.Or(c.Conns, DefaultABConns)
	c.Warmup = cmp.Or(c.Warmup, DefaultABWarmup)
	c.Window = cmp.Or(c.Window, DefaultABWindow)
	var err error
	if c.Payload, err = payloadDefault("bench ab", c.Payload, DefaultABPayload); err != nil {
		return c, err
	}
	var online []int
	c.ServerCPUs, c.ClientCPUs, online, _ = defaultCPUs(c.ServerCPUs, c.ClientCPUs, 1)
	if err := checkOnline(online, "CPU", slices.Concat(c.ServerCPUs, c.ClientCPUs)); err != nil {
		return c, err
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c, nil
}

// argv is the command line of arm a's server child.
func (c ABConfig) argv(a ABArm) []string {
	return append(slices.Clone(a.Command), "-listen", Loopback{}.ListenAddr(), "-cpus", FormatCPUList(c.ServerCPUs), "-control")
}

// ABReport is the report of `spindle bench ab`.
type ABReport struct {
	// Schema is ABSchemaVersion.
	Schema  string     `json:"schema"`
	Started time.Time  `json:"started"`
	Seconds float64    `json:"seconds"`
	Host    Host       `json:"host"`
	Config  ABSettings `json:"config"`
	// Arms are the arms as given, the first the base.
	Arms []ABArm `json:"arms"`
	// Results are the measurements in the order made, failed ones
	// included.
	Results []ABResult `json:"results"`
	// Summary is one row per arm, in Arms' order.
	Summary []ABSummaryRow `json:"summary"`
	// Ratios are each arm but the base against the base, in Arms' order.
	Ratios []ABRatio `json:"ratios"`
	Notes  []string  `json:"notes,omitempty"`
}

// ABSettings are an A/B run's settings, defaults filled in.
type ABSettings struct {
	Reps          int     `json:"reps"`
	OfferedRPS    float64 `json:"offered_rps"`
	Payload       int     `json:"payload"`
	Conns         int     `json:"conns"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	ServerCPUs    []int   `json:"server_cpus"`
	ClientCPUs    []int   `json:"client_cpus"`
}

// ABResult is one measurement of one arm.
type ABResult struct {
	Arm string `json:"arm"`
	Rep int    `json:"rep"`
	// Order is the measurement's place in its repetition, from 1.
	Order int `json:"order"`
	// Error is why the measurement failed; its figures are then 0, and
	// the repetition pairs no arm with it.
	Error       string  `json:"error,omitempty"`
	Requests    uint64  `json:"requests"`
	Unanswered  uint64  `json:"unanswered"`
	AchievedRPS float64 `json:"achieved_rps"`
	P50US       float64 `json:"p50_us"`
	P99US       float64 `json:"p99_us"`
	// ServerUSPerReq is the server's CPU per request: the process's CPU
	// time (getrusage, user + system) between the usage reads at the
	// window's edges, which keeps the time of threads that exited
	// between them. The kernel scales user and system time to the
	// threads' run time (schedstat), so their sum is at its resolution.
	ServerUSPerReq float64 `json:"server_us_per_req"`
	// UserUSPerReq and SysUSPerReq are the process's user and system CPU
	// per request (getrusage), over the same reads.
	UserUSPerReq float64 `json:"user_us_per_req"`
	SysUSPerReq  float64 `json:"sys_us_per_req"`
	// WaitsPerReq are the server's kernel waits per request (io_uring_enter
	// or epoll_wait calls, and io_uring_enter calls that only flushed), as
	// it counts them; 0 from a server that reports no counters.
	WaitsPerReq float64 `json:"waits_per_req"`
	// Threads split the server's CPU by thread: each thread's run time
	// (schedstat) over the same reads, of the threads alive at the
	// second. A thread that exited before it is not among them: its CPU
	// is in ServerUSPerReq only.
	Threads []ThreadCPU `json:"threads,omitempty"`
}

// measured reports whether r is a measurement with a CPU per request:
// not failed, with replies.
func (r ABResult) measured() bool { return r.Error == "" && r.Requests > 0 && r.ServerUSPerReq > 0 }

// ABSummaryRow is an arm's spreads over its measured repetitions.
type ABSummaryRow struct {
	Arm string `json:"arm"`
	// Measured counts the measurements with a CPU per request, Failed
	// those that failed.
	Measured       int    `json:"measured"`
	Failed         int    `json:"failed"`
	ServerUSPerReq Spread `json:"server_us_per_req"`
	UserUSPerReq   Spread `json:"user_us_per_req"`
	SysUSPerReq    Spread `json:"sys_us_per_req"`
	WaitsPerReq    Spread `json:"waits_per_req"`
	AchievedRPS    Spread `json:"achieved_rps"`
	P99US          Spread `json:"p99_us"`
	// Unanswered is the sum over the measurements.
	Unanswered uint64 `json:"unanswered"`
}

// ABRatio is an arm's server CPU per request over the base's, paired
// within each repetition in which both were measured.
type ABRatio struct {
	Arm  string `json:"arm"`
	Base string `json:"base"`
	// Pairs is the number of repetitions paired; AtMost1 how many of
	// their ratios are 1 or below.
	Pairs          int          `json:"pairs"`
	AtMost1        int          `json:"at_most_1"`
	ServerUSPerReq Spread       `json:"server_us_per_req"`
	ByRep          []ABRepRatio `json:"by_rep"`
}

// ABRepRatio is one repetition's ratio.
type ABRepRatio struct {
	Rep   int     `json:"rep"`
	Ratio float64 `json:"ratio"`
}

// RunAB runs `spindle bench ab`: cfg.Reps repetitions, each measuring
// every arm once, in armOrder's order (reversed in even repetitions), with
// a fresh server child per measurement and the bench client in process
// (the measurements of `spindle bench`), and pairs each arm's server CPU
// per request with the base's of the same repetition. Each arm is started
// once first: one that cannot start fails the run. A measurement that
// fails later is kept in the report with its error, and only its
// repetition's pairs with it are lost; a run with no measurement at all
// fails.
func RunAB(ctx context.Context, cfg ABConfig) (*ABReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &ABReport{
		Schema: ABSchemaVersion, Started: time.Now().UTC(), Host: hostInfo(), Arms: cfg.Arms,
		Config: ABSettings{
			Reps: cfg.Reps, OfferedRPS: cfg.Rate, Payload: cfg.Payload, Conns: cfg.Conns,
			WarmupSeconds: cfg.Warmup.Seconds(), WindowSeconds: cfg.Window.Seconds(),
			ServerCPUs: cfg.ServerCPUs, ClientCPUs: cfg.ClientCPUs,
		},
	}
	for _, a := range cfg.Arms {
		p, err := startServerProc(ctx, cfg.argv(a), cfg.ServerEnv)
		if err == nil {
			if p.hello.Note != "" {
				rep.Notes = append(rep.Notes, fmt.Sprintf("arm %s: %s", a.Name, p.hello.Note))
			}
			err = p.stop()
		}
		if err != nil {
			return nil, fmt.Errorf("bench: arm %s cannot start: %w", a.Name, err)
		}
	}
	if sharesClientCPU(cfg.ServerCPUs, cfg.ClientCPUs) {
		rep.Notes = append(rep.Notes, "server and client share a CPU: figures include their contention")
	}
	r := &runner{
		cfg: Config{
			Conns: cfg.Conns, InFlight: 1, Payload: cfg.Payload, Loops: 1, ServerCPUs: cfg.ServerCPUs, ClientCPUs: cfg.ClientCPUs,
			ClientThreads: min(len(cfg.ClientCPUs), cfg.Conns), ServerEnv: cfg.ServerEnv, Progress: cfg.Progress,
		},
		topo: Loopback{}, report: &Report{Kind: "ab"}, total: cfg.Reps * len(cfg.Arms),
		warmup: cfg.Warmup, window: cfg.Window,
	}
	mode := "closed"
	if cfg.Rate > 0 {
		mode = "open"
	}
	err = pinnedRun(cfg.ClientCPUs, cfg.Progress, func() error {
		for n := 1; n <= cfg.Reps; n++ {
			for pos, i := range armOrder(len(cfg.Arms), n) {
				a := cfg.Arms[i]
				res := Result{Arm: a.Name, Rep: n, Mode: mode, OfferedRPS: cfg.Rate, Loops: 1}
				err := r.measureServer(ctx, a.Name, cfg.argv(a), &res)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				ar := abResult(res, pos+1)
				if err != nil {
					ar = ABResult{Arm: a.Name, Rep: n, Order: pos + 1, Error: err.Error()}
					fmt.Fprintf(cfg.Progress, "rep %d %s failed: %v\n", n, a.Name, err)
				}
				rep.Results = append(rep.Results, ar)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	if !slices.ContainsFunc(rep.Results, ABResult.measured) {
		errs := []error{errors.New("bench: ab: no measurement got a server CPU per request")}
		for _, res := range rep.Results {
			if res.Error != "" {
				errs = append(errs, errors.New(res.Error))
				break
			}
		}
		return nil, errors.Join(errs...)
	}
	rep.Notes = append(rep.Notes, r.report.Notes...)
	for _, res := range rep.Results {
		rep.Notes = append(rep.Notes, abResultNotes(res, cfg.Window)...)
	}
	rep.Summary = abSummary(cfg.Arms, rep.Results)
	rep.Ratios = abRatios(cfg.Arms, rep.Results)
	return rep, nil
}

// abResultNotes are the notes on measurement res of a window of window:
// failed, without replies, without a server CPU per request, requests
// unanswered. A measurement left out of the summary and the pairs says
// why.
func abResultNotes(res ABResult, window time.Duration) []string {
	what := fmt.Sprintf("%s rep %d", res.Arm, res.Rep)
	var notes []string
	switch {
	case res.Error != "":
		return []string{fmt.Sprintf("%s failed, its pairs dropped: %s", what, res.Error)}
	case res.Requests == 0:
		notes = append(notes, fmt.Sprintf("%s got no replies in its %.2fs window: the server or the client was starved or stalled (a busy machine?); it has no CPU per request, and the summary and the pairs leave it out", what, window.Seconds()))
	case !res.measured():
		notes = append(notes, fmt.Sprintf("%s got %d replies in its window but none between the server's usage reads (answered late, on a busy machine?): it has no CPU per request, and the summary and the pairs leave it out", what, res.Requests))
	}
	if res.Unanswered > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d requests of the window unanswered", what, res.Unanswered))
	}
	return notes
}

// abResult is an A/B measurement's figures from the bench measurement
// res, made order-th in its repetition.
func abResult(res Result, order int) ABResult {
	ar := ABResult{
		Arm: res.Arm, Rep: res.Rep, Order: order, Requests: res.Requests, Unanswered: res.Unanswered,
		AchievedRPS: res.AchievedRPS, P50US: res.Latency.P50, P99US: res.Latency.P99,
		UserUSPerReq: res.Server.UserUSPerReq, SysUSPerReq: res.Server.SysUSPerReq,
		WaitsPerReq: res.Server.KernelWaitsPerReq, Threads: res.Server.Threads,
		ServerUSPerReq: res.Server.TotalUSPerReq,
	}
	return ar
}

// abSummary is one row per arm of arms, its spreads over its measured
// results.
func abSummary(arms []ABArm, results []ABResult) []ABSummaryRow {
	var rows []ABSummaryRow
	for _, a := range arms {
		row := ABSummaryRow{Arm: a.Name}
		var ok []ABResult
		for _, res := range results {
			if res.Arm != a.Name {
				continue
			}
			row.Unanswered += res.Unanswered
			switch {
			case res.Error != "":
				row.Failed++
			case res.measured():
				ok = append(ok, res)
			}
		}
		row.Measured = len(ok)
		row.ServerUSPerReq = spreadBy(ok, func(r ABResult) float64 { return r.ServerUSPerReq })
		row.UserUSPerReq = spreadBy(ok, func(r ABResult) float64 { return r.UserUSPerReq })
		row.SysUSPerReq = spreadBy(ok, func(r ABResult) float64 { return r.SysUSPerReq })
		row.WaitsPerReq = spreadBy(ok, func(r ABResult) float64 { return r.WaitsPerReq })
		row.AchievedRPS = spreadBy(ok, func(r ABResult) float64 { return r.AchievedRPS })
		row.P99US = spreadBy(ok, func(r ABResult) float64 { return r.P99US })
		rows = append(rows, row)
	}
	return rows
}

// abRatios pairs each arm of arms but the first with the first, the base,
// by repetition (eachPairing): a repetition in which either was not
// measured (failed, or without replies) pairs nothing, and moves no other
// repetition's pair.
func abRatios(arms []ABArm, results []ABResult) []ABRatio {
	base := arms[0].Name
	var measured []ABResult
	for _, res := range results {
		if res.measured() {
			measured = append(measured, res)
		}
	}
	byArm := map[string]ABRatio{}
	at := func(r ABResult) (struct{}, string, int) { return struct{}{}, r.Arm, r.Rep }
	eachPairing(measured, []string{base}, at, func(_, arm string, _ struct{}, pairs []repPair[ABResult]) {
		ar := ABRatio{Arm: arm, Base: base}
		var v []float64
		for _, p := range pairs {
			x := p.a.ServerUSPerReq / p.d.ServerUSPerReq
			v = append(v, x)
			ar.ByRep = append(ar.ByRep, ABRepRatio{Rep: p.rep, Ratio: x})
		}
		ar.Pairs, ar.AtMost1, ar.ServerUSPerReq = len(v), atMost1(v), spreadOf(v)
		byArm[arm] = ar
	})
	var out []ABRatio
	for _, a := range arms[1:] {
		ar, ok := byArm[a.Name]
		if !ok {
			ar = ABRatio{Arm: a.Name, Base: base}
		}
		out = append(out, ar)
	}
	return out
}

// WriteABReport writes rep as report.json and report.md into dir.
func WriteABReport(dir string, rep *ABReport) error {
	return writeJSONAndMarkdown(dir, rep, ABMarkdown(rep))
}

// ABMarkdown renders rep as a Markdown document: the settings, then a
// table of the arms, their medians (min–max) and ratios to the base.
func ABMarkdown(rep *ABReport) string {
	var b strings.Builder
	c := rep.Config
	load := "closed loop"
	if c.OfferedRPS > 0 {
		load = fmt.Sprintf("open loop at %.0f req/s", c.OfferedRPS)
	}
	fmt.Fprintf(&b, "# spindle bench ab report: %s, %d repetitions\n\n", load, c.Reps)
	writeHostLine(&b, rep.Host)
	fmt.Fprintf(&b, "- loopback; server CPUs %v, client CPUs %v; %d connections, %d-byte payload; %.1fs warm-up, %.1fs window; the arms alternated, in reverse order in even repetitions\n",
		c.ServerCPUs, c.ClientCPUs, c.Conns, c.Payload, c.WarmupSeconds, c.WindowSeconds)
	for _, a := range rep.Arms {
		fmt.Fprintf(&b, "- %s: `%s`\n", a.Name, strings.Join(a.Command, " "))
	}
	b.WriteString("\nServer CPU per request: the server process's CPU time (getrusage, threads that exited included) between its usage reads at the window's edges ÷ the requests answered between them; ratios paired within each repetition.\n\n")
	WriteABTable(&b, rep)
	if len(rep.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// WriteABTable writes rep's table, Markdown, to w: a row per arm.
func WriteABTable(w io.Writer, rep *ABReport) {
	base := rep.Arms[0].Name
	fmt.Fprintf(w, "| arm | measured | server µs/req | user µs/req | sys µs/req | waits/req | req/s | p99 µs | unanswered | ÷ %s, paired | at or below 1 |\n", base)
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for i, s := range rep.Summary {
		ratio, n := "—", "—"
		if ar := rep.Ratios[max(i-1, 0)]; i > 0 && ar.Pairs > 0 {
			ratio, n = fmtSpread(ar.ServerUSPerReq, 3), fmt.Sprintf("%d of %d", ar.AtMost1, ar.Pairs)
		}
		measured := fmt.Sprintf("%d of %d", s.Measured, rep.Config.Reps)
		figures := []string{fmtSpread(s.ServerUSPerReq, 2), fmtSpread(s.UserUSPerReq, 2), fmtSpread(s.SysUSPerReq, 2), fmtSpread(s.WaitsPerReq, 2),
			fmtSpread(s.AchievedRPS, 0), fmtSpread(s.P99US, 1)}
		if s.Measured == 0 {
			// Nothing to take a median of: not a figure of 0.
			for i := range figures {
				figures[i] = "—"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s |\n", s.Arm, measured, strings.Join(figures, " | "), s.Unanswered, ratio, n)
	}
}
