package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HTTP2Schema names the layout of an HTTP/2 report (HTTP2Report).
const HTTP2Schema = "spindle-bench-http2/1"

// The arms of `spindle bench http2`.
const (
	HTTP2ArmSpindleUring = "spindle-uring"
	HTTP2ArmSpindleEpoll = "spindle-epoll"
	HTTP2ArmGoNetHTTP    = "go-net-http"
	HTTP2ArmNginx        = "nginx"
)

// HTTP2Arms are the arms of `spindle bench http2`, in their default order.
var HTTP2Arms = []string{HTTP2ArmSpindleUring, HTTP2ArmSpindleEpoll, HTTP2ArmGoNetHTTP, HTTP2ArmNginx}

// CheckHTTP2Arms returns nil when arms (HTTP2Config.Arms) name each an
// arm of HTTP2Arms, once, else an error naming the arm and those there are.
func CheckHTTP2Arms(arms []string) error {
	_, err := armsDefault("http2", arms, HTTP2Arms, HTTP2Arms)
	return err
}

// HTTP2Config's defaults and bounds.
const (
	DefaultHTTP2Duration = 60 * time.Second
	DefaultHTTP2Reps     = 3
	DefaultHTTP2Conns    = 50
	DefaultHTTP2Body     = 64
	MinHTTP2Body         = 0
	MaxHTTP2Body         = MaxPayload
)

// DefaultHTTP2Streams are the streams per connection measured by default:
// one (each request waits for the one before it on its connection: the
// protocol's cost per request) and ten (multiplexed).
var DefaultHTTP2Streams = []int{1, 10}

// HTTP2Config configures `spindle bench http2`: HTTP/2 servers (h2c with
// prior knowledge) side by side under h2load. The zero value of a field
// selects its default.
type HTTP2Config struct {
	// Arms names the arms to run, in order; nil runs HTTP2Arms. The first
	// arm that runs is the one the report's ratios divide by.
	Arms []string
	// Duration is the measuring budget, shared among the measurements
	// (each gets a fifth as warm-up, the rest as its window); start-up
	// comes on top. A share under the least a measurement takes, a 50 ms warm-up and a
	// 100 ms window, still gets that least, over the budget: a smoke run,
	// said on Progress before measuring and in the report (Smoke). Default 60 s.
	Duration time.Duration
	// Reps is the number of repetitions; arms alternate within each, in
	// the given order in odd ones and reversed in even ones (ABC CBA …).
	// Default 3.
	Reps int
	// Conns is h2load's connections (-c). Default 50.
	Conns int
	// Streams lists the streams in flight per connection (h2load -m,
	// closed loop), each a load point of its own. Default
	// DefaultHTTP2Streams.
	Streams []int
	// Body is the response body size, MinHTTP2Body to MaxHTTP2Body.
	// Default 64.
	Body int
	// ServerCPUs pins the server process (all its threads). Default: the
	// first CPU this process may run on.
	ServerCPUs []int
	// ClientCPUs pins h2load, which runs one thread per CPU. Default: the
	// second CPU this process may run on, or where that is a server CPU
	// the first that is not (the first on a single CPU).
	ClientCPUs []int
	// ServerCommand starts the arms served by this binary; the harness
	// appends -arm, -listen, -cpus and -body. Default: this executable
	// with "bench http2-server".
	ServerCommand []string
	// H2load is the h2load program. Default: "h2load" on PATH.
	H2load string
	// Env is added to the environment of the server children.
	Env []string
	// RatioTo names the reference arms of the report's paired ratios
	// (HTTP2Report.PairedRatios): at each streams value every other arm's
	// server CPU per request and p99 are divided by each reference's of
	// the same repetition. Each must be one of the arms asked for; one
	// that is skipped has no ratios (a note says so). Nil: those of
	// DefaultHTTP2RatioTo that run; empty: none.
	RatioTo []string
	// Progress receives one line per measurement; nil discards them.
	Progress io.Writer
}

// DefaultHTTP2RatioTo are the reference arms of bench http2's paired
// ratios when HTTP2Config.RatioTo is nil, those of them that run: the
// servers spindle's are measured against.
var DefaultHTTP2RatioTo = []string{HTTP2ArmGoNetHTTP, HTTP2ArmNginx}

// HTTP2Report is the result of `spindle bench http2`: its Schema is
// HTTP2Schema, its Summary one row per arm and streams value.
type HTTP2Report = ArmsReport[HTTP2Settings, HTTP2Result, HTTP2SummaryRow]

// HTTP2Settings are an HTTP/2 run's settings as measured.
type HTTP2Settings struct {
	Conns         int   `json:"conns"`
	Streams       []int `json:"streams"`
	Body          int   `json:"body"`
	Reps          int   `json:"reps"`
	ServerCPUs    []int `json:"server_cpus"`
	ClientCPUs    []int `json:"client_cpus"`
	ClientThreads int   `json:"client_threads"`
	// H2load is what `h2load --version` says.
	H2load        string  `json:"h2load"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// Smoke, when present, says that Duration was too short for the
	// measurements (RunSettings.Smoke).
	Smoke *Smoke `json:"smoke,omitempty"`
	// RatioTo are the reference arms of the paired ratios; nil for none.
	RatioTo []string `json:"ratio_to,omitempty"`
}

// HTTP2Result is one measurement of one arm at one streams value.
type HTTP2Result struct {
	Arm     string `json:"arm"`
	Streams int    `json:"streams"`
	Rep     int    `json:"rep"`
	// AchievedRPS is the requests of h2load's main duration (each one's
	// status and body length checked) per second of it.
	AchievedRPS float64 `json:"achieved_rps"`
	// Requests is the requests done in the main duration.
	Requests uint64 `json:"requests"`
	// Latency is from h2load's log: each request's time from its start to
	// the end of its response.
	Latency Percentiles `json:"latency"`
	// LatencyClamped counts the latencies of Latency longer than a minute,
	// which count as a minute (as Result.LatencyClamped; a note says so).
	// Absent when there were none.
	LatencyClamped int64 `json:"latency_clamped,omitempty"`
	// LatencyCount is the number of latencies Latency is of, h2load's log
	// rows of the main duration (as Result.LatencyCount; a note says where
	// p99 or p99.9 falls among a repetition's ten slowest). Absent in
	// reports written before 2026-12-06.
	LatencyCount int64 `json:"latency_count,omitempty"`
	// ServerUSPerReq is the server's CPU (every thread of its process and
	// of any children) per request, in µs.
	ServerUSPerReq float64 `json:"server_us_per_req"`
	// ServerCPUPercent is that CPU as a percent of one CPU.
	ServerCPUPercent float64 `json:"server_cpu_percent"`
	// ServerCPUSource is "schedstat" or "stat", as ProxyResult's.
	ServerCPUSource string `json:"server_cpu_source,omitempty"`
	// ClientCPUPercent is h2load's CPU as a percent of the client CPUs
	// its threads can run on (ClientThreads of them at most).
	ClientCPUPercent float64 `json:"client_cpu_percent"`
	// Machine is machine-wide CPU per request over the same main
	// duration, all CPUs' (the server's, h2load's and any other), from
	// /proc/stat: it holds the softirq work the kernel did for the server
	// wherever it ran, which its CPU figures leave out.
	Machine MachineWork `json:"machine"`
}

// HTTP2SummaryRow is one arm's medians (with min and max) at one streams
// value over the repetitions, and its ratios to the first arm's medians
// at that streams value.
type HTTP2SummaryRow struct {
	Arm            string `json:"arm"`
	Streams        int    `json:"streams"`
	Reps           int    `json:"reps"`
	AchievedRPS    Spread `json:"achieved_rps"`
	P50            Spread `json:"p50_us"`
	P99            Spread `json:"p99_us"`
	P999           Spread `json:"p99_9_us"`
	ServerUSPerReq Spread `json:"server_us_per_req"`
	// MachineSummary is the machine-wide CPU (HTTP2Result.Machine): the
	// spread of the work, the medians of softirq and steal.
	MachineSummary
	// ServerCPUPercent and ClientCPUPercent are medians.
	ServerCPUPercent float64 `json:"server_cpu_percent"`
	ClientCPUPercent float64 `json:"client_cpu_percent"`
	// The ratios of this arm's medians to the first arm's (1 for the
	// first arm; 0 where the first arm's figure is 0, which the tables
	// print as "—").
	RPSRatio       float64 `json:"rps_ratio"`
	P99Ratio       float64 `json:"p99_ratio"`
	ServerCPURatio float64 `json:"server_cpu_ratio"`
}

func (c HTTP2Config) withDefaults() (HTTP2Config, error) {
	if err := budgetDefaults(&c.Duration, &c.Reps, &c.Conns, DefaultHTTP2Duration, DefaultHTTP2Reps, DefaultHTTP2Conns); err != nil {
		return c, err
	}
	var err error
	if c.Streams, err = streamsDefault(c.Streams); err != nil {
		return c, err
	}
	if c.Body == 0 {
		c.Body = DefaultHTTP2Body
	}
	if c.Body < MinHTTP2Body || c.Body > MaxHTTP2Body {
		return c, fmt.Errorf("bench: body %d outside %d..%d", c.Body, MinHTTP2Body, MaxHTTP2Body)
	}
	if c.Arms, err = armsDefault("http2", c.Arms, HTTP2Arms, HTTP2Arms); err != nil {
		return c, err
	}
	if err := CheckRatioTo(c.RatioTo, c.Arms); err != nil {
		return c, err
	}
	var online []int
	c.ServerCPUs, c.ClientCPUs, online, _ = defaultCPUs(c.ServerCPUs, c.ClientCPUs, 1)
	if err := checkOnline(online, "CPU", slices.Concat(c.ServerCPUs, c.ClientCPUs)); err != nil {
		return c, err
	}
	if c.H2load == "" {
		c.H2load = "h2load"
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if len(c.ServerCommand) == 0 {
		if c.ServerCommand, err = selfCommand("bench", "http2-server"); err != nil {
			return c, err
		}
	}
	return c, nil
}

// http2Arm is how one arm is started.
type http2Arm struct {
	armHead
	// argv writes the arm's config into dir, if it has one, and returns
	// its command line for a server on listen.
	argv func(dir, listen string) ([]string, error)
}

func (r *http2Runner) arm(name string) http2Arm {
	cfg := r.cfg
	self := func(summary string) http2Arm {
		var unavailable error
		if _, err := exec.LookPath(cfg.ServerCommand[0]); err != nil {
			unavailable = fmt.Errorf("the server command: %w", err)
		}
		return http2Arm{armHead: armHead{name, summary, unavailable}, argv: func(_, listen string) ([]string, error) {
			return append(slices.Clone(cfg.ServerCommand), "-arm", name, "-listen", listen, "-cpus", FormatCPUList(cfg.ServerCPUs), "-body", strconv.Itoa(cfg.Body)), nil
		}}
	}
	switch name {
	case HTTP2ArmGoNetHTTP:
		return self("Go's net/http server (this binary's Go), unencrypted HTTP/2 only (Protocols.SetUnencryptedHTTP2), its defaults otherwise; GOMAXPROCS = the server CPUs")
	case HTTP2ArmSpindleUring, HTTP2ArmSpindleEpoll:
		return self(fmt.Sprintf("spindle engine, %s backend, one loop: internal/h2's Server fed each read, its output written with Conn.Write (one copy, into the loop's send slab)", strings.TrimPrefix(name, "spindle-")))
	}
	bin, lookErr := exec.LookPath("nginx")
	if lookErr != nil {
		lookErr = errors.New("nginx is not installed (apt-get install nginx)")
	} else {
		lookErr = nginxHTTP2(bin)
	}
	return http2Arm{
		armHead: armHead{name: name, unavailable: lookErr,
			summary: "nginx from the distribution, http2 module, `listen … http2` without TLS (h2c with prior knowledge), `return 200` of the body, one process (master_process off, worker_processes 1: the process pinned is the one that serves), no access log"},
		argv: func(dir, listen string) ([]string, error) {
			path := filepath.Join(dir, "nginx.conf")
			if err := os.WriteFile(path, []byte(NginxHTTP2Config(dir, listen, cfg.Body, cfg.Conns)), 0o644); err != nil {
				return nil, err
			}
			return []string{bin, "-c", path, "-p", dir, "-e", "stderr"}, nil
		},
	}
}

// http2Runner holds the state of one HTTP/2 run.
type http2Runner struct {
	armsRun
	cfg     HTTP2Config
	report  *HTTP2Report
	threads int
}

// RunHTTP2 runs `spindle bench http2`: each arm's server started fresh,
// pinned to cfg.ServerCPUs, for each measurement, and h2load pinned to
// cfg.ClientCPUs against it, closed loop; arms alternate within each
// repetition and streams value. Every request of a measurement has its
// status and body length checked (h2load's summary and log: status 2xx,
// streams closed cleanly, nghttp2 checking each body's length against its
// content-length), and each server's reply to a GET is checked whole
// (status, content-type, content-length, body bytes) before and after its
// load; an arm whose server fails to start in its
// first measurement is skipped with the reason, a failure after that fails
// the run. Everything started is stopped, and the temporary files removed,
// before it returns.
func RunHTTP2(ctx context.Context, cfg HTTP2Config) (*HTTP2Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	version, err := h2loadVersion(ctx, cfg.H2load)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "spindle-bench-http2-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	r := &http2Runner{cfg: cfg, armsRun: armsRun{dir: dir}, threads: min(len(cfg.ClientCPUs), cfg.Conns), report: &HTTP2Report{
		Schema: HTTP2Schema, Started: time.Now().UTC(), Host: hostInfo(),
		Config: HTTP2Settings{
			Conns: cfg.Conns, Streams: cfg.Streams, Body: cfg.Body, Reps: cfg.Reps, ServerCPUs: cfg.ServerCPUs, ClientCPUs: cfg.ClientCPUs,
			H2load: version,
		},
	}}
	r.report.Config.ClientThreads = r.threads
	arms := listArms(cfg.Arms, r.arm, &r.report.Arms, &r.report.Notes, cfg.Progress)
	if err := pinnedRun(cfg.ClientCPUs, cfg.Progress, func() error { return r.run(ctx, arms) }); err != nil {
		return nil, err
	}
	r.finish()
	return r.report, nil
}

// run measures the arms that were not skipped, Reps times at each streams
// value (measureAlternating).
func (r *http2Runner) run(ctx context.Context, arms []http2Arm) error {
	c := r.cfg
	if err := r.budget("http2", r.report.Arms, c.Reps*len(c.Streams), c.Duration, true); err != nil {
		return err
	}
	r.report.Config.WarmupSeconds = r.warmup.Seconds()
	r.report.Config.WindowSeconds = r.window.Seconds()
	r.report.Config.Smoke = r.smoke
	if r.smoke != nil {
		r.report.Notes = append(r.report.Notes, r.smoke.String())
		fmt.Fprintf(c.Progress, "spindle bench http2: %v\n", r.smoke)
	}
	fmt.Fprintf(c.Progress, "spindle bench http2: %d measurements, each %v warm-up + %v measured; server CPUs %v, client CPUs %v (%s, %d threads)\n",
		r.total, r.warmup, r.window, c.ServerCPUs, c.ClientCPUs, r.report.Config.H2load, r.threads)
	return measureAlternating(ctx, "http2", r.report.Arms, &r.report.Notes, c.Progress, c.Reps, len(c.Streams), func(i, point, rep int) error {
		res, err := r.measure(ctx, arms[i], c.Streams[point], rep)
		if err != nil {
			return fmt.Errorf("bench: http2 %s streams %d rep %d: %w", arms[i].name, c.Streams[point], rep, err)
		}
		r.report.Results = append(r.report.Results, res)
		return nil
	}, func(n int) { r.total -= n })
}

// h2loadEdges are the CPU reads of the server (the process h2load's
// connections go to), of the upstream behind it (a proxy's, where there
// is one), of h2load and of the machine (/proc/stat) at the start and the
// end of h2load's main duration.
type h2loadEdges struct {
	server, upstream, client [2]cpuEdge
	host                     [2]hostEdge
	seen                     int // edges read: 0, 1 or 2
}

// start starts arm a's server on a free loopback port (held until it
// serves: holdPort), pinned to the
// server CPUs, and waits until its reply to a GET is verified (h2cCheck);
// a server that cannot be started or does not serve is a startError.
func (r *http2Runner) start(ctx context.Context, a http2Arm) (*proxyProc, error) {
	port, err := holdPort()
	if err != nil {
		return nil, err
	}
	defer port.release()
	listen := port.addr
	argv, err := a.argv(r.dir, listen)
	if err != nil {
		return nil, &startError{err}
	}
	p, err := startServing(ctx, argv, r.cfg.Env, r.cfg.ServerCPUs, listen, func() error { return h2cCheck(listen, r.cfg.Body) }, nil)
	if err != nil {
		return nil, &startError{err}
	}
	return p, nil
}

func (r *http2Runner) measure(ctx context.Context, a http2Arm, streams, rep int) (HTTP2Result, error) {
	res := HTTP2Result{Arm: a.name, Streams: streams, Rep: rep}
	p, err := r.start(ctx, a)
	if err != nil {
		return res, err
	}
	m, err := r.driver().measure(ctx, r.dir, p.addr, streams, p, 0, p.ready)
	if err != nil {
		return res, err
	}
	res.Requests, res.AchievedRPS, res.Latency, res.LatencyClamped, res.LatencyCount = m.requests, m.rps, m.latency, m.clamped, m.count
	res.ServerUSPerReq, res.ServerCPUPercent, res.ServerCPUSource, res.ClientCPUPercent = m.server.usPerReq, m.server.percent, m.server.source, m.clientPercent
	res.Machine = m.machine
	what := fmt.Sprintf("%s streams %d rep %d", a.name, streams, rep)
	r.report.Notes = append(r.report.Notes, m.notes(what, "server", m.server)...)
	r.done++
	fmt.Fprintf(r.cfg.Progress, "[%2d/%d] rep %d streams %-3d %-14s %8.0f req/s  p50 %7.1fµs  p99 %8.1fµs  p99.9 %8.1fµs  server %6.2fµs/req (%3.0f%% CPU)  machine work %6.2fµs/req  client %3.0f%%\n",
		r.done, r.total, rep, streams, a.name, res.AchievedRPS, res.Latency.P50, res.Latency.P99, res.Latency.P999, res.ServerUSPerReq, res.ServerCPUPercent, res.Machine.WorkUSPerReq, res.ClientCPUPercent)
	return res, nil
}

// h2loadDriver runs h2load for a harness (`spindle bench http2`, and
// `spindle bench proxy --protocol h2`): threads threads pinned to cpus,
// conns connections, the warm-up and the main duration.
type h2loadDriver struct {
	h2load         string
	threads, conns int
	cpus           []int
	warmup, window time.Duration
	// https: h2load speaks TLS (an https URI), HTTP/2 chosen by ALPN.
	https bool
	// roles are the measurement's processes and their CPUs, the one
	// h2load sends to first, for the machine CPU (windowMachine).
	roles []cpuRole
}

func (r *http2Runner) driver() h2loadDriver {
	return h2loadDriver{h2load: r.cfg.H2load, threads: r.threads, conns: r.cfg.Conns, cpus: r.cfg.ClientCPUs, warmup: r.warmup, window: r.window,
		roles: []cpuRole{{"server", r.cfg.ServerCPUs}, {"client", r.cfg.ClientCPUs}}}
}

// h2loadMeasure is one verified h2load run's figures.
type h2loadMeasure struct {
	requests uint64
	rps      float64
	latency  Percentiles
	// clamped is how many latencies were longer than the histogram's
	// minute (Histogram.Overflow); count how many there were.
	clamped, count int64
	// server and upstream are the CPU of the process serving h2load and
	// of the upstream behind it; clientPercent h2load's, in percent of
	// the client CPUs its threads can run on (clientPercent).
	server, upstream cpuFigures
	clientPercent    float64
	// machine is the machine-wide CPU (windowMachine; h2load sleeps in
	// its waits: no polls to take out).
	machine MachineWork
	edges   h2loadEdges
	log     H2loadLog
	// protocol and tls are what h2load's summary says its first
	// connection's application protocol and (https) TLS were.
	protocol string
	tls      H2loadTLS
	// connectMax is H2loadSummary.ConnectMax: not 0 when h2load made a
	// connection in its main duration.
	connectMax time.Duration
}

// cpuFigures are a process's CPU over a measurement's window (windowCPU).
type cpuFigures struct {
	usPerReq, percent float64
	// source is "schedstat" or "stat", as ProxyResult.ProxyCPUSource.
	source string
}

// windowCPU is proxyCPU of the reads e at a window's edges, at the
// measurement's request rate w, with where the CPU came from.
func windowCPU(e [2]cpuEdge, w windowRate) cpuFigures {
	var f cpuFigures
	var fine bool
	f.usPerReq, f.percent, fine = proxyCPU(e[0], e[1], w)
	f.source = "stat"
	if fine {
		f.source = "schedstat"
	}
	return f
}

// readEdge reads the CPU of process pid (ProcessCPU) now; pid 0 is none,
// an edge with the time only.
func readEdge(pid int) cpuEdge {
	var e cpuEdge
	if pid != 0 {
		e.g, e.err = Proc{}.ProcessCPU(pid)
	}
	e.at = time.Now()
	return e
}

// measure runs h2load against listen with streams in flight per
// connection, its log in dir, while reading the CPU of p (the process
// serving listen, which it stops once h2load is done; nil for none: the
// upstream serves h2load itself) and of process upstreamPID (0 for none),
// and verifies every request's status and that its stream closed cleanly
// (verifyH2load; nghttp2 checks each body's length against its
// content-length, not its bytes). After the load, while the server is
// still up, check runs: a GET whose reply is verified whole (p's start
// check, proxyProc.ready; for the direct arm's upstream, which serves the
// whole run, its own), so that a server whose replies went wrong under
// the load, with a content-length that matches a wrong body, fails the
// measurement.
func (d h2loadDriver) measure(ctx context.Context, dir, listen string, streams int, p *proxyProc, upstreamPID int, check func() error) (h2loadMeasure, error) {
	var m h2loadMeasure
	logPath := filepath.Join(dir, "h2load.log")
	defer os.Remove(logPath)
	serverPID := 0
	if p != nil {
		serverPID = p.cmd.Process.Pid
	}
	edges, out, err := d.run(ctx, listen, streams, logPath, serverPID, upstreamPID)
	// The check after the load runs while the server is up; its failure
	// counts once h2load's own verification passed, which names more.
	var after error
	if err == nil {
		if cerr := check(); cerr != nil {
			after = fmt.Errorf("after its load, a GET's reply checked whole: %w", cerr)
		}
	}
	if p != nil {
		if serr := p.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return m, err
	}
	sum, err := ParseH2loadSummary(out)
	if err != nil {
		return m, fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	h := NewHistogram()
	f, err := os.Open(logPath)
	if err != nil {
		return m, err
	}
	var ends replyTimes
	lg, err := parseH2loadLog(f, h, &ends)
	f.Close()
	if err == nil {
		err = verifyH2load(sum, lg)
	}
	if err == nil {
		err = after
	}
	if err != nil {
		return m, err
	}
	m.requests, m.rps, m.edges, m.log, m.tls = sum.Done, float64(sum.Done)/d.window.Seconds(), edges, lg, sum.TLS
	m.latency, m.clamped, m.count = h.latencyFigures()
	m.protocol, m.connectMax = sum.Protocol, sum.ConnectMax
	rate := windowRate{replies: sum.Done, window: d.window, times: ends}
	m.server, m.upstream = windowCPU(edges.server, rate), windowCPU(edges.upstream, rate)
	_, clientPct, _ := proxyCPU(edges.client[0], edges.client[1], rate)
	m.clientPercent = d.clientPercent(clientPct)
	m.machine = windowMachine(edges.host, rate, 0, d.roles)
	return m, nil
}

// clientPercent is h2load's CPU, pct percent of one CPU, as a percent of
// the client CPUs its d.threads threads can run on (a thread is on one
// CPU at a time), as LoadResult.ClientCPUPercent is of the CPUs the load
// generator's threads ran on: 100 is saturated.
func (d h2loadDriver) clientPercent(pct float64) float64 {
	return pct / float64(max(min(d.threads, len(d.cpus)), 1))
}

// cpuNote returns a note on measurement what (its name in the notes) when
// its CPU figures, of served (the process measured, whose figures are f)
// and of h2load, are not its window's, or "": when the reads at its edges
// were late (lateEdgesNote), or when their times covered the window yet a
// side did no work in it while requests were answered (a starved harness
// between h2load's line and its read).
func (m h2loadMeasure) cpuNote(what, served string, f cpuFigures) string {
	if n := lateEdgesNote(what, served, m.edges.client[0].at, m.edges.client[1].at, m.log); n != "" {
		return n
	}
	if m.requests > 0 && (f.usPerReq <= 0 || m.clientPercent <= 0) {
		return fmt.Sprintf("%s: the harness read the CPU of a window with %d requests as %s %.2f µs/req and client %.0f%%, one of them none: starved, it read them off the window; its CPU figures are not that window's",
			what, m.requests, served, f.usPerReq, m.clientPercent)
	}
	return ""
}

// notes are measurement what's notes for the report (served the process
// measured, f its CPU figures): cpuNote's and connectNote's, those that
// say something.
func (m h2loadMeasure) notes(what, served string, f cpuFigures) []string {
	var ns []string
	for _, n := range []string{m.cpuNote(what, served, f), m.connectNote(what)} {
		if n != "" {
			ns = append(ns, n)
		}
	}
	return ns
}

// connectNote returns a note on measurement what (its name in the notes)
// when h2load made connections in its main duration, or "". h2load starts
// its main duration when its warm-up timer fires, whether or not its
// connections are made. Those still connecting then (a slow TLS
// handshake, many connections, an h2load thread that started late), and
// any it makes again after a close, connect (and with TLS handshake) in
// the window, whose CPU per request and latencies then include it.
func (m h2loadMeasure) connectNote(what string) string {
	if m.connectMax <= 0 {
		return ""
	}
	return fmt.Sprintf("%s: h2load made connections in the window (its time for connect up to %.1f ms; with TLS, each a handshake): they were not made by the warm-up's end, or were made again, so its CPU per request and latencies include connecting; a longer --duration gives each measurement a longer warm-up",
		what, ms(m.connectMax))
}

// lateEdgesNote returns a note on measurement what (its name in the
// notes) when the CPU reads at the edges of its main duration, at from and
// to, cover less than minProcCover of the time its responses ended in (l's first to last, on the wall clock, as the
// reads' times): the harness, starved, read h2load's lines late, so that
// its CPU figures (of served, the process measured, of the client and of
// the machine) are not the window's. "" when they cover enough, or no
// request was done.
func lateEdgesNote(what, served string, from, to time.Time, l H2loadLog) string {
	if l.Requests == 0 || l.LastEndUS <= l.FirstEndUS {
		return ""
	}
	first, last := time.UnixMicro(l.FirstEndUS), time.UnixMicro(l.LastEndUS)
	span := last.Sub(first)
	covered := span - max(from.Sub(first), 0) - max(last.Sub(to), 0)
	if covered >= time.Duration(minProcCover*float64(span)) {
		return ""
	}
	return fmt.Sprintf("%s: the harness read the CPU %.0f ms and %.0f ms after h2load's first and last responses of the window (it was starved and read h2load's output late), covering %.0f%% of the window: its %s, client and machine CPU figures are not that window's",
		what, ms(from.Sub(first)), ms(to.Sub(last)), 100*max(covered.Seconds(), 0)/span.Seconds(), served)
}

// The lines h2load writes when each thread's main duration starts and
// ends.
const (
	h2loadMainStarted = "Main benchmark duration is started for thread #"
	h2loadMainOver    = "Main benchmark duration is over for thread #"
)

// args is h2load's command line for one measurement against listen:
// d.threads threads, closed loop with streams in flight on each of the
// connections, h2c with prior knowledge (an http URI; with https, TLS and
// HTTP/2 by ALPN: an https one), the warm-up and the
// main duration in whole milliseconds, each request logged to logPath.
func (d h2loadDriver) args(listen string, streams int, logPath string) []string {
	ms := func(t time.Duration) string { return strconv.FormatInt(t.Milliseconds(), 10) + "ms" }
	scheme := "http://"
	if d.https {
		scheme = "https://"
	}
	return []string{d.h2load, "-t", strconv.Itoa(d.threads), "-c", strconv.Itoa(d.conns), "-m", strconv.Itoa(streams),
		"--warm-up-time", ms(d.warmup), "-D", ms(d.window), "--log-file", logPath, scheme + listen + "/"}
}

// run runs h2load against listen, pinned to the client CPUs in a
// process group of its own, and returns its stdout and the CPU of the
// server (process serverPID), of the upstream (upstreamPID), of h2load and
// of the machine (/proc/stat) read when the last of its threads began its main duration and when the
// first ended it, as it says so on stdout (a pid 0 is not read: readEdge).
// It is killed when ctx is done or when it runs a minute past its warm-up
// and duration.
func (d h2loadDriver) run(ctx context.Context, listen string, streams int, logPath string, serverPID, upstreamPID int) (h2loadEdges, []byte, error) {
	var e h2loadEdges
	argv := d.args(listen, streams, logPath)
	cmd := exec.Command(argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return e, nil, err
	}
	errb := &lockedBuffer{}
	cmd.Stderr = errb
	if err := startPinned(cmd, d.cpus); err != nil {
		return e, nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	pid := cmd.Process.Pid
	stop := make(chan struct{})
	go func() {
		timer := time.NewTimer(d.warmup + d.window + time.Minute)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-stop:
			return
		}
		signalGroup(pid, syscall.SIGKILL)
	}()
	read := func(i int) {
		e.server[i], e.upstream[i], e.client[i], e.host[i] = readEdge(serverPID), readEdge(upstreamPID), readEdge(pid), readHostEdge()
		e.seen++
	}
	var out []byte
	started := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out = append(out, line...)
		out = append(out, '\n')
		switch {
		case strings.HasPrefix(line, h2loadMainStarted):
			if started++; started == d.threads && e.seen == 0 {
				read(0)
			}
		case strings.HasPrefix(line, h2loadMainOver) && e.seen == 1:
			read(1)
		}
	}
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	close(stop)
	signalGroup(pid, syscall.SIGKILL) // anything it left in its group
	switch {
	case ctx.Err() != nil:
		return e, out, ctx.Err()
	case werr != nil:
		return e, out, fmt.Errorf("h2load: %w: %s%s", werr, strings.TrimSpace(errb.String()), lastLines(out, 3))
	case e.seen < 2:
		return e, out, fmt.Errorf("h2load did not say when its main duration started and ended (%q, %q)%s", h2loadMainStarted, h2loadMainOver, lastLines(out, 3))
	}
	return e, out, errors.Join(e.server[0].err, e.server[1].err, e.upstream[0].err, e.upstream[1].err, e.client[0].err, e.client[1].err, e.host[0].err, e.host[1].err)
}

// lastLines returns the last n lines of out, after ": ", or "".
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return ""
	}
	return ": " + strings.Join(lines[max(len(lines)-n, 0):], " / ")
}

func (r *http2Runner) finish() {
	rep := r.report
	rep.Summary = summarizeHTTP2(rep.Results)
	// withDefaults took only references among the arms.
	rep.Config.RatioTo, _ = runRatioRefs(r.cfg.RatioTo, DefaultHTTP2RatioTo, rep.Arms, &rep.Notes)
	rep.PairedRatios = http2PairedRatios(rep.Results, rep.Config.RatioTo)
	rep.Seconds = time.Since(rep.Started).Seconds()
	for _, res := range rep.Results {
		what := fmt.Sprintf("%s streams %d rep %d", res.Arm, res.Streams, res.Rep)
		if res.Requests == 0 {
			rep.Notes = append(rep.Notes, noRepliesNote(what, "server or h2load", r.window))
		}
		if res.LatencyClamped > 0 {
			rep.Notes = append(rep.Notes, clampedNote(what, res.LatencyClamped))
		}
		if res.ClientCPUPercent >= clientSaturatedPercent {
			rep.Notes = append(rep.Notes, saturatedNote(what, "server", res.ClientCPUPercent))
		}
	}
	rep.Notes = append(rep.Notes, armsFewLatenciesNotes(rep.Results, func(arm string, streams int) string {
		return fmt.Sprintf("%s at %d streams", arm, streams)
	})...)
	for _, s := range rep.Summary {
		if s.ServerCPUPercent < proxyBusyPercent {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s at %d streams used %.0f%% of a CPU (median): it was not the bottleneck, so its rate and latency are bounded elsewhere (the client, or a busy machine); compare its CPU per request", s.Arm, s.Streams, s.ServerCPUPercent))
		}
	}
	rep.Notes = append(rep.Notes, sideDriftNotes(rep.Summary, func(s HTTP2SummaryRow) driftRow {
		return driftRow{arm: s.Arm, point: fmt.Sprintf("streams %d", s.Streams), reps: s.Reps, rps: s.AchievedRPS, paired: sidePaired(rep.PairedRatios, s.Arm, s.Streams)}
	})...)
	if cpuOverlap(r.cfg.ServerCPUs, r.cfg.ClientCPUs) {
		rep.Notes = append(rep.Notes, "the server shares a CPU with the client: figures include their contention")
	}
	rep.Notes = append(rep.Notes, processCPUNote("server"), machineWorkNote, h2loadLogNote, h2loadVerifiedNote("server"))
	coarse := 0
	for _, res := range rep.Results {
		if res.ServerCPUSource == "stat" {
			coarse++
		}
	}
	if coarse > 0 {
		rep.Notes = append(rep.Notes, coarseCPUNote(coarse, "server"))
	}
}

// h2loadLogNote says what h2load's log costs it.
const h2loadLogNote = "h2load writes each request's row to its log file (buffered) for the latencies: that costs it CPU, in its client CPU figure"

// h2loadVerifiedNote says how the requests h2load made to each server (or
// proxy: who) were verified.
func h2loadVerifiedNote(who string) string {
	return fmt.Sprintf("verified: every request of every window closed cleanly with status 2xx (h2load's summary and log) and nghttp2 checked each body's length against its content-length, not its bytes; a reply of each %s was checked whole (status, content-type, content-length, body bytes) before its load and another after it", who)
}

// summarizeHTTP2 groups results by arm and streams, in first-seen order,
// and takes medians, spreads and the ratios to the first arm at the same
// streams.
func summarizeHTTP2(results []HTTP2Result) []HTTP2SummaryRow {
	rows := summarizeArms(results, func(a armRates, g []HTTP2Result) HTTP2SummaryRow {
		spread := func(f func(HTTP2Result) float64) Spread { return spreadBy(g, f) }
		answered := withReplies(g, func(r HTTP2Result) uint64 { return r.Requests })
		return HTTP2SummaryRow{
			Arm: a.arm, Streams: a.streams, Reps: a.reps, AchievedRPS: a.rps, P50: a.p50, P99: a.p99, P999: a.p999,
			ServerUSPerReq:   spreadBy(answered, func(r HTTP2Result) float64 { return r.ServerUSPerReq }),
			MachineSummary:   a.machine,
			ServerCPUPercent: spread(func(r HTTP2Result) float64 { return r.ServerCPUPercent }).Median,
			ClientCPUPercent: spread(func(r HTTP2Result) float64 { return r.ClientCPUPercent }).Median,
		}
	})
	return ratiosByStreams(rows, func(r HTTP2SummaryRow) int { return r.Streams }, func(r *HTTP2SummaryRow, f HTTP2SummaryRow) {
		r.RPSRatio = ratioOf(r.AchievedRPS.Median, f.AchievedRPS.Median)
		r.P99Ratio = ratioOf(r.P99.Median, f.P99.Median)
		r.ServerCPURatio = ratioOf(r.ServerUSPerReq.Median, f.ServerUSPerReq.Median)
	})
}

// ratiosByStreams calls ratios on each of rows with the first row of its
// streams value, then returns rows sorted by streams, stably (each load
// point's arms together, in arm order).
func ratiosByStreams[R any](rows []R, streams func(R) int, ratios func(row *R, first R)) []R {
	first := firstByStreams(rows, streams)
	for i, row := range rows {
		ratios(&rows[i], first[streams(row)])
	}
	slices.SortStableFunc(rows, func(a, b R) int { return streams(a) - streams(b) })
	return rows
}

// firstByStreams maps each streams value of rows to the first row with
// it: the row whose medians the summary's ratios divide by
// (ratiosByStreams; sorting by streams, stably, keeps it first).
func firstByStreams[R any](rows []R, streams func(R) int) map[int]R {
	first := map[int]R{}
	for _, row := range rows {
		if _, ok := first[streams(row)]; !ok {
			first[streams(row)] = row
		}
	}
	return first
}

// ratioOf is a / b, or 0 where b is 0.
func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// medianRatioCell prints a summary's ratio of medians, or "—" where the
// median it divides by (base) is 0: there is no ratio (ratioOf's 0).
func medianRatioCell(ratio, base float64) string {
	if base == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", ratio)
}

// http2RatioCells are the printed ratios of each of rows (a summary, in
// order): req/s, p99 and server CPU (medianRatioCell).
func http2RatioCells(rows []HTTP2SummaryRow) [][3]string {
	first := firstByStreams(rows, func(s HTTP2SummaryRow) int { return s.Streams })
	cells := make([][3]string, len(rows))
	for i, s := range rows {
		f := first[s.Streams]
		cells[i] = [3]string{medianRatioCell(s.RPSRatio, f.AchievedRPS.Median), medianRatioCell(s.P99Ratio, f.P99.Median), medianRatioCell(s.ServerCPURatio, f.ServerUSPerReq.Median)}
	}
	return cells
}

// WriteHTTP2Report writes rep into dir (created if needed) as report.json
// and report.md, each written whole to a temporary file and renamed.
func WriteHTTP2Report(dir string, rep *HTTP2Report) error {
	return writeJSONAndMarkdown(dir, rep, HTTP2Markdown(rep))
}

// HTTP2Markdown renders rep as a Markdown document.
func HTTP2Markdown(rep *HTTP2Report) string {
	var b strings.Builder
	c := rep.Config
	fmt.Fprintf(&b, "# spindle bench http2 report: HTTP/2 servers (h2c, prior knowledge) under h2load\n\n")
	writeHostLine(&b, rep.Host)
	fmt.Fprintf(&b, "- loopback; server CPUs %v, client CPUs %v (%s, %d threads)\n", c.ServerCPUs, c.ClientCPUs, c.H2load, c.ClientThreads)
	fmt.Fprintf(&b, "- %d connections × streams %v in flight each (closed loop), GET answered with a %d-byte body, %d reps (arms alternated), each %.2fs warm-up + %.2fs measured; started %s, %.0fs\n\n",
		c.Conns, c.Streams, c.Body, c.Reps, c.WarmupSeconds, c.WindowSeconds, rep.Started.Format("2006-01-02 15:04 UTC"), rep.Seconds)
	b.WriteString("Medians over the repetitions with (min–max); latency in µs; server CPU in µs per request (run time of every thread of the server's processes) and in percent of a CPU; " + machineWorkText("server") + "; client CPU in percent of the client CPUs; ratios to the first arm's medians at the same streams.\n\n")
	b.WriteString("| arm | streams | req/s | p50 | p99 | p99.9 | server CPU µs/req | server CPU % | machine work CPU µs/req | softirq µs/req | steal µs/req | interrupts/req on server CPUs | NET_RX/req on server CPUs | client CPU % | req/s ratio | p99 ratio | server CPU ratio |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	ratios := http2RatioCells(rep.Summary)
	for i, s := range rep.Summary {
		r := ratios[i]
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %.0f | %s | %.2f | %.2f | %.2f | %.2f | %.0f | %s | %s | %s |\n", s.Arm, s.Streams, fmtSpread(s.AchievedRPS, 0), fmtSpread(s.P50, 1),
			fmtSpread(s.P99, 1), fmtSpread(s.P999, 1), fmtSpread(s.ServerUSPerReq, 2), s.ServerCPUPercent,
			fmtSpread(s.MachineWorkUSPerReq, 2), s.SoftirqUSPerReq, s.StealUSPerReq, s.InterruptsPerReq, s.NetRxPerReq, s.ClientCPUPercent, r[0], r[1], r[2])
	}
	b.WriteString(http2RatioLayout.markdown(rep.PairedRatios))
	writeArmsAndNotes(&b, rep.Arms, rep.Notes)
	return b.String()
}

// http2RatioLayout is how bench http2's paired-ratio tables look.
var http2RatioLayout = armsRatioLayout{
	figs: []armsFigure{figServer, figP99}, byRep: figServer,
	what:    "server CPU µs per request and p99",
	missing: "one of the two arms had no replies in every repetition, or the figure was not measured",
	streams: true,
}

// WriteHTTP2Table prints rep's summary as a plain-text table.
func WriteHTTP2Table(w io.Writer, rep *HTTP2Report) {
	first := firstArm(rep.Summary, func(s HTTP2SummaryRow) string { return s.Arm })
	fmt.Fprintf(w, "\nbench http2, h2c under h2load, loopback, %d reps, medians (min–max); latency in µs, server and machine-wide CPU in µs per request, interrupts and NET_RX softirqs per request on the server CPUs; ratios to %s at the same streams\n", rep.Config.Reps, first)
	fmt.Fprintf(w, "%-14s %7s %-22s %-20s %-20s %-20s %-18s %-19s %8s %8s %7s %7s %7s %7s %7s %7s\n", "arm", "streams", "req/s", "p50", "p99", "p99.9", "server µs/req", "machine work µs/req", "softirq", "steal", "intr", "NET_RX", "client%", "rps×", "p99×", "cpu×")
	ratios := http2RatioCells(rep.Summary)
	for i, s := range rep.Summary {
		r := ratios[i]
		fmt.Fprintf(w, "%-14s %7d %-22s %-20s %-20s %-20s %-18s %-19s %8.2f %8.2f %7.2f %7.2f %7.0f %7s %7s %7s\n", s.Arm, s.Streams, fmtSpread(s.AchievedRPS, 0), fmtSpread(s.P50, 1),
			fmtSpread(s.P99, 1), fmtSpread(s.P999, 1), fmtSpread(s.ServerUSPerReq, 2), fmtSpread(s.MachineWorkUSPerReq, 2), s.SoftirqUSPerReq, s.StealUSPerReq,
			s.InterruptsPerReq, s.NetRxPerReq, s.ClientCPUPercent, r[0], r[1], r[2])
	}
	http2RatioLayout.writeTable(w, rep.PairedRatios)
	writeTableNotes(w, rep.Notes)
}

// NginxHTTP2Config returns an nginx config serving h2c with prior
// knowledge on listen (`listen … http2` without ssl), answering every
// request with status 200 and body bytes of appendBody, for up to conns
// clients: one process (no master, no daemon), its pid file and temporary
// directories in dir, errors on stderr, no access log. Keep-alive lasts
// nginxKeepaliveRequests requests (keepalive_requests applies to HTTP/2
// connections since nginx 1.19.7; http2_max_requests, its old name, ended
// a connection with GOAWAY after 1000) and 300 s idle.
func NginxHTTP2Config(dir, listen string, body, conns int) string {
	return "# spindle bench http2: generated, removed after the run\n" + nginxMain(dir, conns+64) + fmt.Sprintf(`http {
    access_log off;
%s
    server {
        listen %s http2;
        keepalive_requests %d;
        keepalive_timeout 300s;
        default_type %s;
        location / {
            return 200 "%s";
        }
    }
}
`, nginxTempPaths(dir), listen, nginxKeepaliveRequests, http2ContentType, appendBody(nil, body))
}

// nginxHTTP2 checks that nginx has the http2 module, which `nginx -V`
// lists as --with-http_v2_module.
func nginxHTTP2(nginx string) error {
	out, err := exec.Command(nginx, "-V").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -V: %v", nginx, err)
	}
	if !slices.Contains(strings.Fields(string(out)), "--with-http_v2_module") {
		return errors.New("nginx was built without --with-http_v2_module: it cannot serve HTTP/2")
	}
	return nil
}

// HTTP2ArmsFlag lists the arms for a usage message.
func HTTP2ArmsFlag() string { return strings.Join(HTTP2Arms, ",") }
