package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The code `spindle bench http2` and `spindle bench proxy` share: both
// run arms side by side (servers, or proxies in front of one server),
// alternated within each repetition, at one or more streams values, and
// report them in the same envelope.

// ArmsReport is the layout of the side-by-side reports: HTTP2Report and
// ProxyReport, whose settings, measurements and summary rows are of types
// C, R and S.
type ArmsReport[C, R, S any] struct {
	// Schema names the layout: HTTP2Schema, ProxySchema.
	Schema string `json:"schema"`
	// Started is when the run started (UTC); Seconds how long it took.
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	// Host is the machine the run was made on.
	Host Host `json:"host"`
	// Config is the run's settings, defaults filled in.
	Config C `json:"config"`
	// Arms lists every arm asked for; the skipped ones say why.
	Arms []ArmInfo `json:"arms"`
	// Results are the measurements, in the order they were made.
	Results []R `json:"results"`
	// Summary has one row per arm that ran (and streams value), in order.
	Summary []S `json:"summary"`
	// PairedRatios holds, for each reference arm (the settings' RatioTo),
	// each streams value and each other arm measured there, that arm's
	// figures divided by the reference's of the same repetition; nil
	// when no reference arm ran.
	PairedRatios []ArmsPairedRatio `json:"paired_ratios,omitempty"`
	// Notes are things a reader of the figures should know.
	Notes []string `json:"notes,omitempty"`
}

// ArmsPairedRatio is one arm's figures divided by a reference arm's at
// one load point of a side-by-side report, repetition by repetition (see
// PairedRatio). A figure is there when at least one repetition paired on
// it: a proxy report's proxy, upstream and proxy-plus-upstream CPU per
// request and p99, an HTTP/2 report's server CPU per request and p99.
type ArmsPairedRatio struct {
	// Ref is the reference arm (the denominator), Arm the other (the
	// numerator).
	Ref string `json:"ref"`
	Arm string `json:"arm"`
	// Streams is the load point's streams per connection (0, absent,
	// with the proxy's tcp and http protocols).
	Streams int `json:"streams,omitempty"`
	// Pairs is the number of repetitions in which both arms were measured
	// with replies.
	Pairs int `json:"pairs"`
	// ProxyUSPerReq is the ratio of the proxies' CPU per request (the
	// direct arm has none: it pairs on the other figures only);
	// UpstreamUSPerReq of the upstream's; ProxyUpstreamUSPerReq of their
	// sums (for direct, the upstream's alone: what serving a request cost
	// with no proxy).
	ProxyUSPerReq         *RatioSpread `json:"proxy_us_per_req,omitempty"`
	UpstreamUSPerReq      *RatioSpread `json:"upstream_us_per_req,omitempty"`
	ProxyUpstreamUSPerReq *RatioSpread `json:"proxy_upstream_us_per_req,omitempty"`
	// ServerUSPerReq is the ratio of the HTTP/2 servers' CPU per request.
	ServerUSPerReq *RatioSpread `json:"server_us_per_req,omitempty"`
	// P99 is the ratio of the latencies' p99.
	P99 *RatioSpread `json:"p99_us,omitempty"`
	// ByRep lists each pair's ratios.
	ByRep []ArmsRepRatio `json:"by_rep"`
}

// RatioSpread is a figure's ratios over the repetitions that paired on
// it: those in which both arms had replies and both figures were above 0
// (a figure of 0 was not measured).
type RatioSpread struct {
	// Spread is their median, minimum and maximum.
	Spread
	// Pairs is how many there were, AtMost1 how many of them were 1 or
	// below (the arm no dearer, or no slower, than the reference).
	Pairs   int `json:"pairs"`
	AtMost1 int `json:"at_most_1"`
}

// ArmsRepRatio is one repetition's ratios of an ArmsPairedRatio, each
// absent (0) where the repetition did not pair on that figure.
type ArmsRepRatio struct {
	Rep                   int     `json:"rep"`
	ProxyUSPerReq         float64 `json:"proxy_us_per_req,omitempty"`
	UpstreamUSPerReq      float64 `json:"upstream_us_per_req,omitempty"`
	ProxyUpstreamUSPerReq float64 `json:"proxy_upstream_us_per_req,omitempty"`
	ServerUSPerReq        float64 `json:"server_us_per_req,omitempty"`
	P99                   float64 `json:"p99_us,omitempty"`
}

// budgetDefaults refuses a negative duration, reps or conns, and replaces
// each that is zero with its default.
func budgetDefaults(duration *time.Duration, reps, conns *int, defDuration time.Duration, defReps, defConns int) error {
	if *duration < 0 || *reps < 0 || *conns < 0 {
		return fmt.Errorf("bench: negative setting (duration %v, reps %d, conns %d)", *duration, *reps, *conns)
	}
	*duration, *reps, *conns = cmp.Or(*duration, defDuration), cmp.Or(*reps, defReps), cmp.Or(*conns, defConns)
	return nil
}

// MaxHTTP2Streams is the most streams in flight per connection that the
// HTTP/2 runs take: the least SETTINGS_MAX_CONCURRENT_STREAMS of their
// servers and proxies left at their defaults (internal/h2's and spindle
// proxy's 100, HAProxy's tune.h2.max-concurrent-streams 100; nginx's
// http2_max_concurrent_streams is 128, Go's net/http 250). h2load keeps
// more than a server's limit in flight only where the server allows it:
// past the first round trip it holds the rest back without an error, so
// above the least limit the arms would carry different loads under one
// streams value.
const MaxHTTP2Streams = 100

// streamsDefault returns streams (h2load's -m values), or for nil a copy
// of DefaultHTTP2Streams; a value below 1 or above MaxHTTP2Streams, or
// one given twice, is refused.
func streamsDefault(streams []int) ([]int, error) {
	if streams == nil {
		streams = slices.Clone(DefaultHTTP2Streams)
	}
	for i, s := range streams {
		if s < 1 || s > MaxHTTP2Streams || slices.Contains(streams[:i], s) {
			return streams, fmt.Errorf("bench: streams %v: each 1 to %d (the least of the servers' concurrent streams limits), none twice", streams, MaxHTTP2Streams)
		}
	}
	return streams, nil
}

// armsDefault returns arms, or for nil a copy of all; an arm not in known,
// or one given twice, is refused (what names the harness: "http2",
// "proxy").
func armsDefault(what string, arms, all, known []string) ([]string, error) {
	if arms == nil {
		arms = slices.Clone(all)
	}
	for i, a := range arms {
		if !slices.Contains(known, a) {
			return arms, fmt.Errorf("bench: unknown %s arm %q (arms: %s)", what, a, strings.Join(known, ", "))
		}
		if slices.Contains(arms[:i], a) {
			return arms, fmt.Errorf("bench: %s arm %s given twice", what, a)
		}
	}
	return arms, nil
}

// h2loadVersion is what h2load --version says.
func h2loadVersion(ctx context.Context, h2load string) (string, error) {
	out, err := exec.CommandContext(ctx, h2load, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("bench: h2load (apt-get install nghttp2-client): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// armHead is what an arm says of itself before it runs: its name, what it
// is, and why it cannot run here (nil when it may).
type armHead struct {
	name, summary string
	unavailable   error
}

func (h armHead) head() armHead { return h }

// listArms makes the arm of each of names, lists it in arms and, when it
// cannot run here, notes it as skipped with why (skippedNote); it returns
// them all, in order.
func listArms[A interface{ head() armHead }](names []string, arm func(name string) A, arms *[]ArmInfo, notes *[]string, progress io.Writer) []A {
	var out []A
	for _, name := range names {
		a := arm(name)
		h := a.head()
		info := ArmInfo{Name: h.name, Summary: h.summary}
		if h.unavailable != nil {
			info.Skipped = h.unavailable.Error()
			*notes = append(*notes, skippedNote(h.name, info.Skipped, progress))
		}
		*arms = append(*arms, info)
		out = append(out, a)
	}
	return out
}

// armsRun is the state every side-by-side run keeps: its temporary
// directory, each measurement's warm-up and window, and how many
// measurements it makes and has made (for the progress lines).
type armsRun struct {
	dir            string
	warmup, window time.Duration
	total, done    int
	// smoke is set when duration is too short for the measurements
	// (smokeBudget).
	smoke *Smoke
}

// budget counts the measurements of the run, perArm for each of arms not
// skipped, and splits duration among them (splitDuration), in whole
// milliseconds when they are h2load's (wholeMS), and sets smoke when they
// do not fit in it; a run with no arm left is an error (what names the
// harness).
func (s *armsRun) budget(what string, arms []ArmInfo, perArm int, duration time.Duration, wholeMS bool) error {
	for _, a := range arms {
		if a.Skipped == "" {
			s.total += perArm
		}
	}
	if s.total == 0 {
		return errors.New("bench: no " + what + " arm can run")
	}
	s.warmup, s.window = splitDuration(duration, s.total)
	// Before the rounding, which may add a fraction of a millisecond.
	s.smoke = smokeBudget(duration, s.total, s.warmup, s.window)
	if wholeMS {
		s.warmup, s.window = s.warmup.Round(time.Millisecond), s.window.Round(time.Millisecond)
	}
	return nil
}

// MachineWork is machine-wide CPU per request over a side-by-side
// measurement's window (ProxyResult.Machine, HTTP2Result.Machine), from
// /proc/stat read at the window's edges and counted as the bench report's
// MachineCPU is (machineCPU): over all CPUs, those of the proxy, the
// upstream, the server and the client and any other, so that it holds the
// softirq work the kernel did for a process on another CPU than the
// process's own, which the process's CPU figures leave out. Read the two
// together: softirq moved off a process's books is relocation, not
// reduction. /proc/stat counts in 10 ms ticks: short windows are coarse.
type MachineWork struct {
	// TotalUSPerReq is busy CPU-µs per request over all CPUs: user, nice,
	// system, irq and softirq time (MachineCPU.TotalUSPerReq).
	TotalUSPerReq float64 `json:"total_us_per_req"`
	// ClientPollUSPerReq is the part of it that the load generator's
	// threads spent in polls that found nothing (they poll unless they
	// share a CPU with the proxy or the upstream); 0 with h2load and the
	// TLS handshake clients, which sleep in their waits.
	ClientPollUSPerReq float64 `json:"client_poll_us_per_req"`
	// WorkUSPerReq is TotalUSPerReq minus ClientPollUSPerReq: "machine
	// work" (MachineCPU.WorkUSPerReq).
	WorkUSPerReq float64 `json:"work_us_per_req"`
	// SoftirqUSPerReq is the softirq time in it, over all CPUs.
	SoftirqUSPerReq float64 `json:"softirq_us_per_req"`
	// StealUSPerReq is steal time over all CPUs, in neither TotalUSPerReq
	// nor WorkUSPerReq (MachineCPU.StealUSPerReq).
	StealUSPerReq float64 `json:"steal_us_per_req"`
	// PerCPU splits the busy time per CPU as MachineCPU.PerCPU does:
	// which CPU took the softirq work, the process's or another. Each
	// CPU's Role names the processes pinned to it, joined by "+" where
	// there are several ("upstream+client"): "server" and "client" in
	// bench http2; "proxy", "upstream" and "client" in bench proxy; ""
	// for none.
	PerCPU []CPUSplit `json:"per_cpu"`
	// InterruptsPerReq is every interrupt (device and local: timer,
	// IPIs) per request on the CPUs of the process the clients send to,
	// as MachineCPU.ServerCPUInterruptsPerReq is on the server's: bench
	// http2's server (HTTP2Config.ServerCPUs), bench proxy's proxy
	// (ProxyConfig.ProxyCPUs, whatever the arm: with direct, which has no
	// proxy, what else landed there). DeviceIRQsPerReq is the device
	// interrupts among them, NetRxPerReq the NET_RX softirqs on the same
	// CPUs (/proc/softirqs).
	InterruptsPerReq float64 `json:"interrupts_per_req"`
	DeviceIRQsPerReq float64 `json:"device_irqs_per_req"`
	NetRxPerReq      float64 `json:"net_rx_per_req"`
}

// machineWorkText says what the side-by-side reports' tables print of
// MachineSummary, who being the process the clients send to ("server",
// "proxy"), whose CPUs the interrupts and NET_RX softirqs are counted on.
func machineWorkText(who string) string {
	return "machine-wide CPU in µs per request (/proc/stat: the busy time of every CPU, pinned or not, without the client's empty polls: \"machine work\", which holds the softirq work the process figures leave out), softirq machine-wide, and steal: time the hypervisor ran something else while this machine's CPUs had work, not in machine work; interrupts (device and local: timer, IPIs; /proc/interrupts) and NET_RX softirqs (/proc/softirqs) per request on the " + who + " CPUs"
}

// MachineSummary is the machine CPU of a side-by-side summary row, over
// the repetitions with replies (withReplies), as the bench report's
// SummaryRow has it: the spread of the work, the medians of softirq and
// steal; and the medians of the interrupts and NET_RX softirqs on the
// CPUs of the process the clients send to (MachineWork.InterruptsPerReq,
// NetRxPerReq).
type MachineSummary struct {
	MachineWorkUSPerReq Spread  `json:"machine_work_us_per_req"`
	SoftirqUSPerReq     float64 `json:"softirq_us_per_req"`
	StealUSPerReq       float64 `json:"steal_us_per_req"`
	InterruptsPerReq    float64 `json:"interrupts_per_req"`
	NetRxPerReq         float64 `json:"net_rx_per_req"`
}

// hostEdge is the host's /proc files read at one edge of a side-by-side
// measurement's window (procEdge), or the reads' error.
type hostEdge struct {
	procEdge
	err error
}

// readHostEdge reads the live host's /proc files now.
func readHostEdge() hostEdge {
	var e hostEdge
	e.err = liveProc().readProc(&e.procEdge)
	return e
}

// cpuRole is a process of a side-by-side measurement ("proxy",
// "upstream", "server", "client") and the CPUs it is pinned to.
type cpuRole struct {
	name string
	cpus []int
}

// roleOf returns what names a CPU in MachineWork.PerCPU: the names of
// the roles pinned to it, joined by "+", or "" for none.
func roleOf(roles []cpuRole) func(cpu int) string {
	return func(cpu int) string {
		var names []string
		for _, r := range roles {
			if slices.Contains(r.cpus, cpu) {
				names = append(names, r.name)
			}
		}
		return strings.Join(names, "+")
	}
}

// windowMachine is the machine CPU of a side-by-side measurement from the
// host's /proc files read at its window's edges (e), at the measurement's
// request rate w, the client's threads idle in their polls for clientIdle
// of the window, its processes pinned as roles say, the first the one the
// clients send to: machineCPU over the time between the two /proc/stat
// reads (the window where their times are missing), at the request rate
// between them (w.over), its per-CPU split (cpuSplit), and the interrupts
// and NET_RX softirqs on the first role's CPUs (countsOn), as bench's fill
// has them. Without replies it is zero: nothing to divide by.
func windowMachine(e [2]hostEdge, w windowRate, clientIdle time.Duration, roles []cpuRole) MachineWork {
	if w.replies == 0 || w.window <= 0 || e[0].stat == nil || e[1].stat == nil {
		return MachineWork{}
	}
	p := [2]procEdge{e[0].procEdge, e[1].procEdge}
	d := apart(p[0].statAt, p[1].statAt, w.window)
	rps := float64(w.replies) / w.window.Seconds()
	m := machineCPU(p[0].stat, p[1].stat, d, w.over(p[0].statAt, p[1].statAt, d), cpuUSPerReq(float64(clientIdle), w.window, rps)).work()
	m.PerCPU = cpuSplit(p, w, roleOf(roles))
	k := countsOn(p, roles[0].cpus, w)
	m.InterruptsPerReq, m.DeviceIRQsPerReq, m.NetRxPerReq = k.interrupts, k.deviceIRQs, k.netRx
	return m
}

// armSample is what every measurement of a side-by-side run has: its arm,
// streams value (0 for none), rate, latencies and how many they are of
// (0: not known), replies, repetition and machine CPU.
type armSample struct {
	arm       string
	streams   int
	rps       float64
	latency   Percentiles
	latencies int64
	requests  uint64
	rep       int
	machine   MachineWork
}

func (r HTTP2Result) sample() armSample {
	return armSample{r.Arm, r.Streams, r.AchievedRPS, r.Latency, r.LatencyCount, r.Requests, r.Rep, r.Machine}
}
func (r ProxyResult) sample() armSample {
	return armSample{r.Arm, r.Streams, r.AchievedRPS, r.Latency, r.LatencyCount, r.Requests, r.Rep, r.Machine}
}

// armPoint is a side-by-side load point: an arm at a streams value (0 for
// none), what the summaries group measurements by.
type armPoint struct {
	arm     string
	streams int
}

func armPointOf[R interface{ sample() armSample }](r R) armPoint {
	s := r.sample()
	return armPoint{s.arm, s.streams}
}

// armsFewLatenciesNotes are the notes on the load points of results whose
// p99 or p99.9, the tail percentiles the side-by-side tables show, rest on
// few latencies (fewLatenciesNote), each point named by name.
func armsFewLatenciesNotes[R interface{ sample() armSample }](results []R, name func(arm string, streams int) string) []string {
	order, groups := groupBy(results, armPointOf[R])
	var notes []string
	for _, k := range order {
		if n := fewLatenciesNote(name(k.arm, k.streams), groups[k], func(r R) int64 { return r.sample().latencies }, 99.9); n != "" {
			notes = append(notes, n)
		}
	}
	return notes
}

// armRates are what every summary row of a side-by-side report has: an
// arm at a streams value over its repetitions, the spreads of its rate
// and latencies, and its machine CPU.
type armRates struct {
	arm                 string
	streams, reps       int
	rps, p50, p99, p999 Spread
	machine             MachineSummary
}

// summarizeArms groups results by arm and streams, in first-seen order,
// and makes each group's summary row with row, from the group and its
// rates.
func summarizeArms[R interface{ sample() armSample }, S any](results []R, row func(armRates, []R) S) []S {
	order, groups := groupBy(results, armPointOf[R])
	var rows []S
	for _, k := range order {
		g := groups[k]
		timed := withLatencies(g, func(r R) Percentiles { return r.sample().latency })
		latency := func(f func(Percentiles) float64) Spread {
			return spreadBy(timed, func(r R) float64 { return f(r.sample().latency) })
		}
		// A CPU per request is over the repetitions with replies.
		answered := withReplies(g, func(r R) uint64 { return r.sample().requests })
		machine := func(f func(MachineWork) float64) Spread {
			return spreadBy(answered, func(r R) float64 { return f(r.sample().machine) })
		}
		rows = append(rows, row(armRates{
			arm: k.arm, streams: k.streams, reps: len(g),
			rps:  spreadBy(g, func(r R) float64 { return r.sample().rps }),
			p50:  latency(func(p Percentiles) float64 { return p.P50 }),
			p99:  latency(func(p Percentiles) float64 { return p.P99 }),
			p999: latency(func(p Percentiles) float64 { return p.P999 }),
			machine: MachineSummary{
				MachineWorkUSPerReq: machine(func(m MachineWork) float64 { return m.WorkUSPerReq }),
				SoftirqUSPerReq:     machine(func(m MachineWork) float64 { return m.SoftirqUSPerReq }).Median,
				StealUSPerReq:       machine(func(m MachineWork) float64 { return m.StealUSPerReq }).Median,
				InterruptsPerReq:    machine(func(m MachineWork) float64 { return m.InterruptsPerReq }).Median,
				NetRxPerReq:         machine(func(m MachineWork) float64 { return m.NetRxPerReq }).Median,
			},
		}, g))
	}
	return rows
}

// firstArm is the arm of the first of rows, the one a report's ratios
// divide by, or "the first arm" when there are none.
func firstArm[S any](rows []S, arm func(S) string) string {
	if len(rows) == 0 {
		return "the first arm"
	}
	return arm(rows[0])
}

// writeTableNotes prints notes under a plain-text table.
func writeTableNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
