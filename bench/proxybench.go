package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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

// ProxySchema names the layout of a proxy report (ProxyReport).
const ProxySchema = "spindle-bench-proxy/1"

// Proxy arm names.
const (
	ProxyArmSpindleUring = "spindle-uring"
	ProxyArmSpindleEpoll = "spindle-epoll"
	// ProxyArmSpindleUringLog is spindle-uring writing an access log (JSON
	// lines, to a file in the run's temporary directory): what the log
	// costs. Not in the default arms; ask for it with Arms.
	ProxyArmSpindleUringLog = "spindle-uring-log"
	ProxyArmHAProxy         = "haproxy"
	ProxyArmNginx           = "nginx"
	ProxyArmDirect          = "direct"
)

// The protocols of `spindle bench proxy` (ProxyConfig.Protocol).
const (
	// ProxyProtocolTCP compares L4 proxies: each client connection is
	// spliced to an upstream connection of its own, and the load is the
	// RPC echo (ProtocolRPC).
	ProxyProtocolTCP = "tcp"
	// ProxyProtocolHTTP compares HTTP/1.1 reverse proxies, keep-alive on
	// both sides: the load is keep-alive POSTs whose body is the payload,
	// each answered with it (ProtocolHTTP), and each proxy parses every
	// request and response and keeps its upstream connections for reuse.
	ProxyProtocolHTTP = "http"
	// ProxyProtocolH2 compares the reverse proxies taking HTTP/2 clients
	// (h2c with prior knowledge) and forwarding each stream as an HTTP/1.1
	// request over keep-alive upstream connections: the load is h2load's
	// GETs (ProxyConfig.Streams in flight per connection), each answered
	// by the upstream with a body of the payload's size.
	ProxyProtocolH2 = "h2"
	// ProxyProtocolH2H2 is ProxyProtocolH2 with HTTP/2 to the upstream
	// too: the upstream is one of `spindle bench http2`'s h2c servers
	// (ProxyConfig.UpstreamArm), each client stream forwarded as an
	// HTTP/2 stream (spindle's pool protocol h2c, HAProxy's proto h2 on
	// the server line, nginx's grpc_pass), and h2load can go straight to
	// it (the direct arm).
	ProxyProtocolH2H2 = "h2h2"
)

// ProxyProtocols are the protocols of `spindle bench proxy`, the default
// first.
var ProxyProtocols = []string{ProxyProtocolTCP, ProxyProtocolHTTP, ProxyProtocolH2, ProxyProtocolH2H2}

// h2Clients reports whether protocol's clients are h2load's HTTP/2 ones
// (ProxyProtocolH2, ProxyProtocolH2H2), measured by measureH2.
func h2Clients(protocol string) bool {
	return protocol == ProxyProtocolH2 || protocol == ProxyProtocolH2H2
}

// proxyTLSNoDirect is why a run with ProxyConfig.TLS has no direct arm.
const proxyTLSNoDirect = "no direct arm with --tls: the upstream speaks no TLS, and the client would go to it in plain text"

// proxyH2NoDirect is why ProxyProtocolH2 has no direct arm.
const proxyH2NoDirect = "no direct arm with --protocol h2: the upstream (the bench server's echo) speaks HTTP/1.1 only, not h2c, so h2load cannot be pointed at it"

// ProxyConfig's defaults, for the fields left zero.
const (
	DefaultProxyProtocol    = ProxyProtocolTCP
	DefaultProxyDuration    = 60 * time.Second
	DefaultProxyReps        = 3
	DefaultProxyConns       = 50
	DefaultProxyPayload     = 64
	DefaultProxyUpstreamArm = "epoll"
	// DefaultProxyH2UpstreamArm is the upstream with ProxyProtocolH2H2:
	// a `spindle bench http2` arm.
	DefaultProxyH2UpstreamArm = HTTP2ArmSpindleUring
)

// ProxyConfig configures `spindle bench proxy`: L4 or HTTP/1.1 proxies
// side by side in front of one upstream echo server. The zero value of a
// field selects its default.
type ProxyConfig struct {
	// Protocol is ProxyProtocolTCP (L4 proxies, the RPC echo),
	// ProxyProtocolHTTP (HTTP/1.1 reverse proxies, keep-alive POSTs),
	// ProxyProtocolH2 (HTTP/2 clients under h2load, HTTP/1.1 upstream) or
	// ProxyProtocolH2H2 (HTTP/2 clients under h2load, HTTP/2 upstream).
	// Default ProxyProtocolTCP.
	Protocol string
	// Arms names the arms to run, in order; nil runs ProxyArms (without
	// direct with ProxyProtocolH2, proxyH2NoDirect, and with TLS,
	// proxyTLSNoDirect). The first arm that runs is the one the report's
	// ratios divide by.
	Arms []string
	// Duration is the measuring budget, shared among the measurements
	// (each gets a fifth as warm-up, the rest as its window); start-up and
	// drains come on top. A share under the least a measurement takes, a 50 ms warm-up and a
	// 100 ms window, still gets that least, over the budget: a smoke run,
	// said on Progress before measuring and in the report (Smoke). Default 60 s.
	Duration time.Duration
	// Reps is the number of repetitions; arms alternate within each, in
	// the given order in odd ones and reversed in even ones (ABC CBA …).
	// Default 3.
	Reps int
	// Conns is the number of client connections, each with one request
	// in flight (closed loop; with ProxyProtocolH2 and ProxyProtocolH2H2,
	// h2load's -c). Default 50.
	Conns int
	// Streams, with ProxyProtocolH2 and ProxyProtocolH2H2 only, lists the
	// streams in flight per connection (h2load -m), each a load point of
	// its own. Default DefaultHTTP2Streams.
	Streams []int
	// TLS makes the proxies terminate TLS 1.3 on the client side: each
	// serves a throwaway self-signed ECDSA P-256 certificate made at the
	// run's start (newProxyTLS), offering the protocol's ALPN
	// (proxyALPN), and the clients speak TLS to it (the load generator
	// with LoadConfig.TLS; h2load over https, HTTP/2 by ALPN) on
	// keep-alive connections, each handshaking once, before the
	// measurement. The upstream side stays plain. There is no direct arm
	// (proxyTLSNoDirect). A measurement whose clients did not agree on
	// TLS 1.3 with the protocol's ALPN fails the run.
	TLS bool
	// TLSHandshakes, with the tcp and http protocols, makes every
	// request one connection's, with a TLS 1.3 handshake of its own (TLS
	// implied): Conns connection slots, each opening a connection,
	// handshaking, sending one request, verifying the reply and closing
	// (the client first) before opening the next, closed loop. The
	// handshakes are full ones (the client offers no resumption) unless
	// TLSResume. A measurement where a connection resumed fails the run.
	TLSHandshakes bool
	// TLSResume is TLSHandshakes (implied) with session resumption: the
	// client offers the last ticket it was sent, and a measurement with
	// more full handshakes than one a slot fails the run.
	TLSResume bool
	// H2load is the h2load program (ProxyProtocolH2, ProxyProtocolH2H2).
	// Default: "h2load" on PATH.
	H2load string
	// Payload is the RPC payload size (the HTTP request and response
	// body; with ProxyProtocolH2 and ProxyProtocolH2H2 the response
	// body). Default 64.
	Payload int
	// ProxyCPUs pins the proxy process (all its threads and workers).
	// Default: the first CPU this process may run on.
	ProxyCPUs []int
	// ClientCPUs pins the client threads (one per CPU), and for the run
	// every other thread of this process (RunProxy). Default: the second
	// CPU this process may run on, or where that is a proxy CPU the first
	// that is not (the first on a single CPU).
	ClientCPUs []int
	// UpstreamCPUs pins the upstream server. Default: ClientCPUs.
	UpstreamCPUs []int
	// UpstreamArm is the `spindle bench server` arm serving as the
	// upstream, one of ProxyUpstreamArms: any this binary serves itself
	// (every engine backend's, uring-batch and go-net), each answering
	// the RPC echo and HTTP/1.1. Default "epoll". With ProxyProtocolH2H2
	// it is one of HTTP2Arms, the h2c servers of `spindle bench http2`;
	// default DefaultProxyH2UpstreamArm.
	UpstreamArm string
	// UpstreamCommand starts the upstream server; the harness appends the
	// server flags (-arm, -listen, -cpus, -control). Default: this
	// executable with "bench server". With ProxyProtocolH2H2 it starts
	// bench http2's servers (HTTP2Config.ServerCommand, whose flags the
	// harness appends); default this executable with "bench
	// http2-server".
	UpstreamCommand []string
	// ProxyCommand starts the spindle arms' proxy; the harness appends
	// "-config FILE -drain 1s". Default: this executable with "proxy".
	ProxyCommand []string
	// Env is added to the environment of the upstream and proxy children.
	Env []string
	// RatioTo names the reference arms of the report's paired ratios
	// (ProxyReport.PairedRatios): at each load point every other arm's
	// proxy, upstream and proxy-plus-upstream CPU per request and p99 are
	// divided by each reference's of the same repetition. Each must be one
	// of the arms asked for; one that is skipped has no ratios (a note
	// says so). Nil: those of DefaultProxyRatioTo that run; empty: none.
	RatioTo []string
	// Progress receives one line per measurement; nil discards them.
	Progress io.Writer
}

// DefaultProxyRatioTo are the reference arms of bench proxy's paired
// ratios when ProxyConfig.RatioTo is nil, those of them that run: the
// proxies spindle's are measured against.
var DefaultProxyRatioTo = []string{ProxyArmHAProxy, ProxyArmNginx}

// ProxyArms are the arms of `spindle bench proxy`, in their default order.
var ProxyArms = []string{ProxyArmSpindleUring, ProxyArmSpindleEpoll, ProxyArmHAProxy, ProxyArmNginx, ProxyArmDirect}

// ProxyExtraArms are the arms of `spindle bench proxy` run only when asked
// for.
var ProxyExtraArms = []string{ProxyArmSpindleUringLog}

// CheckProxyArms returns nil when arms (ProxyConfig.Arms) name each a
// proxy arm, once, else an error naming the arm and those there are.
func CheckProxyArms(arms []string) error {
	_, err := armsDefault("proxy", arms, ProxyArms, slices.Concat(ProxyArms, ProxyExtraArms))
	return err
}

// ProxyUpstreamArms returns the arms that can serve as the upstream of
// protocol (a ProxyProtocols value), in their order: with
// ProxyProtocolH2H2 HTTP2Arms, else the `spindle bench server` arms that
// this binary serves itself (not a peers binary's arm, nor a program of
// its own such as c-liburing, which the upstream's command cannot start),
// each of which answers both the RPC echo and HTTP/1.1. Any goroutine.
func ProxyUpstreamArms(protocol string) []string {
	if protocol == ProxyProtocolH2H2 {
		return slices.Clone(HTTP2Arms)
	}
	var served []string
	for _, a := range Arms() {
		if a.Start != nil {
			served = append(served, a.Name)
		}
	}
	return served
}

// CheckProxyUpstreamArm returns nil when arm (ProxyConfig.UpstreamArm) is
// one of ProxyUpstreamArms(protocol).
func CheckProxyUpstreamArm(protocol, arm string) error {
	arms := ProxyUpstreamArms(protocol)
	if slices.Contains(arms, arm) {
		return nil
	}
	if protocol == ProxyProtocolH2H2 {
		return fmt.Errorf("bench: upstream arm %q: with the h2h2 protocol one of bench http2's (%s)", arm, HTTP2ArmsFlag())
	}
	return fmt.Errorf("bench: upstream arm %q: with the %s protocol one of the bench server arms this binary serves (%s)", arm, protocol, strings.Join(arms, ", "))
}

// ProxyReport is the result of `spindle bench proxy`: its Schema is
// ProxySchema, its Summary one row per arm that ran (with "h2" and "h2h2",
// per arm and streams value).
type ProxyReport = ArmsReport[ProxySettings, ProxyResult, ProxySummaryRow]

// ProxySettings are a proxy run's settings as measured.
type ProxySettings struct {
	// Protocol is the ProxyConfig.Protocol that ran ("tcp", "http", "h2"
	// or "h2h2").
	Protocol string `json:"protocol"`
	// TLS is ProxyConfig.TLS: the proxies terminated TLS 1.3 on the
	// client side.
	TLS bool `json:"tls,omitempty"`
	// TLSHandshakes and TLSResume are ProxyConfig's: a connection, and a
	// handshake, per request, Conns slots at a time.
	TLSHandshakes bool `json:"tls_handshakes,omitempty"`
	TLSResume     bool `json:"tls_resume,omitempty"`
	Conns         int  `json:"conns"`
	// InFlight is the requests in flight per connection, or with "h2" and
	// "h2h2" per stream: 1 (closed loop).
	InFlight int `json:"inflight"`
	// Streams, with "h2" and "h2h2", are the streams in flight per
	// connection measured (h2load -m), each a load point; ClientThreads
	// h2load's threads; H2load what `h2load --version` says.
	Streams       []int   `json:"streams,omitempty"`
	ClientThreads int     `json:"client_threads,omitempty"`
	H2load        string  `json:"h2load,omitempty"`
	Payload       int     `json:"payload"`
	Reps          int     `json:"reps"`
	ProxyCPUs     []int   `json:"proxy_cpus"`
	ClientCPUs    []int   `json:"client_cpus"`
	UpstreamCPUs  []int   `json:"upstream_cpus"`
	UpstreamArm   string  `json:"upstream_arm"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// Smoke, when present, says that Duration was too short for the
	// measurements (RunSettings.Smoke).
	Smoke *Smoke `json:"smoke,omitempty"`
	// RatioTo are the reference arms of the paired ratios; nil for none.
	RatioTo []string `json:"ratio_to,omitempty"`
}

// ProxyResult is one measurement of one arm.
type ProxyResult struct {
	Arm string `json:"arm"`
	// Streams is the streams per connection of an "h2" or "h2h2"
	// measurement.
	Streams int `json:"streams,omitempty"`
	Rep     int `json:"rep"`
	// AchievedRPS is verified replies in the window per second.
	AchievedRPS float64 `json:"achieved_rps"`
	// Requests is the verified replies in the window.
	Requests   uint64      `json:"requests"`
	Unanswered uint64      `json:"unanswered"`
	Latency    Percentiles `json:"latency"`
	// LatencyClamped counts the latencies of Latency longer than a minute,
	// which count as a minute (as Result.LatencyClamped; a note says so).
	// Absent when there were none.
	LatencyClamped int64 `json:"latency_clamped,omitempty"`
	// LatencyCount is the number of latencies Latency is of (as
	// Result.LatencyCount; a note says where p99 or p99.9 falls among a
	// repetition's ten slowest). Absent in reports written before
	// 2026-12-06.
	LatencyCount int64 `json:"latency_count,omitempty"`
	// ProxyUSPerReq is the proxy's CPU (utime+stime of every process of
	// its process and any children, all threads) per request, in µs; 0 for direct.
	ProxyUSPerReq float64 `json:"proxy_us_per_req"`
	// ProxyCPUPercent is that CPU as a percent of one CPU.
	ProxyCPUPercent float64 `json:"proxy_cpu_percent"`
	// ProxyCPUSource is where the proxy CPU came from: "schedstat" (its
	// threads' run time, ns) or "stat" (utime+stime, 10 ms ticks, where
	// its threads changed during the window or schedstat is missing).
	ProxyCPUSource string `json:"proxy_cpu_source,omitempty"`
	// ProxyProcs is the number of processes counted.
	ProxyProcs int `json:"proxy_procs"`
	// UpstreamUSPerReq, UpstreamCPUPercent and UpstreamCPUSource are the
	// upstream server's CPU over the same window, as the proxy's are
	// counted (every thread of its process and of any children); with
	// the direct arm, the upstream's alone.
	UpstreamUSPerReq   float64 `json:"upstream_us_per_req"`
	UpstreamCPUPercent float64 `json:"upstream_cpu_percent"`
	UpstreamCPUSource  string  `json:"upstream_cpu_source,omitempty"`
	ClientCPUPercent   float64 `json:"client_cpu_percent"`
	// Machine is machine-wide CPU per request over the same window, all
	// CPUs' (the proxy's, the upstream's, the client's and any other),
	// from /proc/stat: it holds the softirq work the kernel did for the
	// proxy and the upstream wherever it ran, which their CPU figures
	// leave out.
	Machine MachineWork `json:"machine"`
	// TLS, in a run with ProxyConfig.TLS, is what the clients' TLS
	// handshakes agreed; nil without.
	TLS *ProxyTLSResult `json:"tls,omitempty"`
	// TimeWait, with ProxyConfig.TLSHandshakes, counts the sockets gone
	// into TIME_WAIT during the measurement, by side; nil without.
	TimeWait *ProxyTimeWait `json:"time_wait,omitempty"`
}

// ProxySummaryRow is one arm's medians (with min and max) over the
// repetitions (with "h2" and "h2h2", at one streams value), and its ratios
// to the first arm's medians (at the same streams).
type ProxySummaryRow struct {
	Arm           string `json:"arm"`
	Streams       int    `json:"streams,omitempty"`
	Reps          int    `json:"reps"`
	AchievedRPS   Spread `json:"achieved_rps"`
	P50           Spread `json:"p50_us"`
	P99           Spread `json:"p99_us"`
	P999          Spread `json:"p99_9_us"`
	ProxyUSPerReq Spread `json:"proxy_us_per_req"`
	// ProxyCPUPercent is the median proxy CPU in percent of one CPU.
	ProxyCPUPercent float64 `json:"proxy_cpu_percent"`
	// UpstreamUSPerReq and UpstreamCPUPercent are the upstream's, as the
	// proxy's.
	UpstreamUSPerReq   Spread  `json:"upstream_us_per_req"`
	UpstreamCPUPercent float64 `json:"upstream_cpu_percent"`
	// MachineSummary is the machine-wide CPU (ProxyResult.Machine): the
	// spread of the work, the medians of softirq and steal.
	MachineSummary
	// ClientCPUPercent is the median client CPU.
	ClientCPUPercent float64 `json:"client_cpu_percent"`
	Unanswered       uint64  `json:"unanswered"`
	// The ratios of this arm's medians to the first arm's (1 for the
	// first arm; 0 where the first arm's figure is 0, which the tables
	// print as "—").
	RPSRatio         float64 `json:"rps_ratio"`
	P99Ratio         float64 `json:"p99_ratio"`
	ProxyCPURatio    float64 `json:"proxy_cpu_ratio"`
	UpstreamCPURatio float64 `json:"upstream_cpu_ratio"`
}

func (c ProxyConfig) withDefaults() (ProxyConfig, error) {
	if err := budgetDefaults(&c.Duration, &c.Reps, &c.Conns, DefaultProxyDuration, DefaultProxyReps, DefaultProxyConns); err != nil {
		return c, err
	}
	if c.Protocol == "" {
		c.Protocol = DefaultProxyProtocol
	}
	if err := c.handshakeDefaults(); err != nil {
		return c, err
	}
	if !slices.Contains(ProxyProtocols, c.Protocol) {
		return c, fmt.Errorf("bench: unknown proxy protocol %q (protocols: %s)", c.Protocol, strings.Join(ProxyProtocols, ", "))
	}
	var err error
	if c.Payload, err = payloadDefault("bench", c.Payload, DefaultProxyPayload); err != nil {
		return c, err
	}
	if h2Clients(c.Protocol) {
		if c.Streams, err = streamsDefault(c.Streams); err != nil {
			return c, err
		}
		if c.H2load == "" {
			c.H2load = "h2load"
		}
	} else if c.Streams != nil {
		return c, fmt.Errorf("bench: streams are for the h2 and h2h2 protocols, not %s", c.Protocol)
	}
	if c.Arms == nil && (c.Protocol == ProxyProtocolH2 || c.TLS) {
		c.Arms = slices.DeleteFunc(slices.Clone(ProxyArms), func(a string) bool { return a == ProxyArmDirect })
	}
	if c.Arms, err = armsDefault("proxy", c.Arms, ProxyArms, slices.Concat(ProxyArms, ProxyExtraArms)); err != nil {
		return c, err
	}
	if err := CheckRatioTo(c.RatioTo, c.Arms); err != nil {
		return c, err
	}
	var online []int
	c.ProxyCPUs, c.ClientCPUs, online, _ = defaultCPUs(c.ProxyCPUs, c.ClientCPUs, 1)
	if len(c.UpstreamCPUs) == 0 {
		c.UpstreamCPUs = slices.Clone(c.ClientCPUs)
	}
	if err := checkOnline(online, "CPU", slices.Concat(c.ProxyCPUs, c.ClientCPUs, c.UpstreamCPUs)); err != nil {
		return c, err
	}
	switch {
	case c.Protocol == ProxyProtocolH2H2 && c.UpstreamArm == "":
		c.UpstreamArm = DefaultProxyH2UpstreamArm
	case c.UpstreamArm == "":
		c.UpstreamArm = DefaultProxyUpstreamArm
	}
	if err := CheckProxyUpstreamArm(c.Protocol, c.UpstreamArm); err != nil {
		return c, err
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if len(c.UpstreamCommand) == 0 {
		server := "server"
		if c.Protocol == ProxyProtocolH2H2 {
			server = "http2-server"
		}
		if c.UpstreamCommand, err = selfCommand("bench", server); err != nil {
			return c, err
		}
	}
	if len(c.ProxyCommand) == 0 {
		if c.ProxyCommand, err = selfCommand("proxy"); err != nil {
			return c, err
		}
	}
	return c, nil
}

// proxyArm is how one arm is started.
type proxyArm struct {
	// armHead's unavailable says why the arm cannot run here without
	// starting it (its program is not installed, or lacks a module).
	armHead
	// argv writes the arm's config into dir and returns its command line
	// for a proxy on listen forwarding to upstream; nil for the direct
	// arm.
	argv func(dir, listen, upstream string) ([]string, error)
	// check, when set, looks at what the proxy wrote once it serves and
	// says why the arm is not what it claims to be (an engine that fell
	// back to another backend).
	check func(output string) error
}

// engineFellBack returns an error when a spindle proxy's start-up output
// says the engine runs another backend than backend asked for (its Logf
// line "engine: io_uring unavailable (…); running on epoll").
func engineFellBack(backend, output string) error {
	for l := range strings.Lines(output) {
		if strings.Contains(l, "engine: ") && strings.Contains(l, "; running on ") && !strings.HasSuffix(strings.TrimSpace(l), "running on "+backend) {
			return fmt.Errorf("the engine does not run %s here: %s", backend, strings.TrimSpace(l))
		}
	}
	return nil
}

func (r *proxyRunner) arm(name string) proxyArm {
	cfg := r.cfg
	writeConf := func(dir, file, text string) (string, error) {
		path := filepath.Join(dir, file)
		return path, os.WriteFile(path, []byte(text), 0o644)
	}
	httpMode := cfg.Protocol != ProxyProtocolTCP
	// Each arm keeps up to idle upstream connections: one per request in
	// flight.
	idle := r.inFlight()
	spindle := func(backend string, accessLog bool) proxyArm {
		name := "spindle-" + backend
		summary := fmt.Sprintf("spindle proxy (this binary), engine backend %s, one loop", backend)
		switch {
		case cfg.TLS && h2Clients(cfg.Protocol):
			summary += ", TLS 1.3 on its listener (tls: the engine's crypto/tls; HTTP/2 by ALPN)"
		case cfg.TLS:
			summary += ", TLS 1.3 on its listener (tls: the engine's crypto/tls)"
		}
		switch cfg.Protocol {
		case ProxyProtocolHTTP, ProxyProtocolH2:
			summary += fmt.Sprintf(", mode http, up to %d idle upstream connections kept (max_idle)", idle)
		case ProxyProtocolH2H2:
			summary += fmt.Sprintf(", mode http, h2c: true, the pool's protocol h2c (HTTP/2 from the client, each stream an HTTP/2 stream over multiplexed upstream connections, up to %d: h2_max_connections)", idle)
		}
		if cfg.Protocol == ProxyProtocolH2 && !cfg.TLS {
			summary += ", h2c: true (HTTP/2 from the client, HTTP/1.1 to the upstream)"
		}
		if accessLog {
			name += "-log"
			summary += ", access log as JSON lines to a file in the run's temporary directory"
		}
		var missing error
		if _, err := exec.LookPath(cfg.ProxyCommand[0]); err != nil {
			missing = fmt.Errorf("the proxy command: %w", err)
		}
		return proxyArm{
			armHead: armHead{name, summary, missing},
			argv: func(dir, listen, upstream string) ([]string, error) {
				log := ""
				if accessLog {
					log = filepath.Join(dir, name+".access.log")
				}
				path, err := writeConf(dir, name+".yaml", spindleProxyConfig(cfg.Protocol, backend, listen, upstream, cfg.ProxyCPUs[0], idle, log, r.tls))
				if err != nil {
					return nil, err
				}
				return append(slices.Clone(cfg.ProxyCommand), "-config", path, "-drain", "1s"), nil
			},
			check: func(output string) error { return engineFellBack(backend, output) },
		}
	}
	switch name {
	case ProxyArmSpindleUring:
		return spindle("uring", false)
	case ProxyArmSpindleUringLog:
		return spindle("uring", true)
	case ProxyArmSpindleEpoll:
		return spindle("epoll", false)
	case ProxyArmHAProxy:
		// Looked up once per run; each measurement writes a config.
		bin, lookErr := exec.LookPath("haproxy")
		summary := "HAProxy from the distribution, mode tcp, nbthread 1 (-db: foreground)"
		if httpMode {
			summary = "HAProxy from the distribution, mode http with option http-keep-alive and http-reuse always (idle-pool fd ratios 100), nbthread 1 (-db: foreground)"
		}
		switch cfg.Protocol {
		case ProxyProtocolH2:
			summary += ", the frontend's bind with proto h2 (HTTP/2 with prior knowledge), HTTP/1.1 to the upstream"
		case ProxyProtocolH2H2:
			summary += ", the frontend's bind and the server line with proto h2 (HTTP/2 with prior knowledge both sides, upstream connections shared by http-reuse always)"
		}
		if cfg.TLS {
			summary += ", TLS 1.3 on its bind (ssl crt, OpenSSL)"
		}
		switch {
		case lookErr != nil:
			lookErr = errors.New("haproxy is not installed (apt-get install haproxy)")
		case cfg.TLS:
			lookErr = haproxyTLS(bin)
		}
		return proxyArm{
			armHead: armHead{name, summary, lookErr},
			argv: func(dir, listen, upstream string) ([]string, error) {
				path, err := writeConf(dir, "haproxy.cfg", HAProxyConfig(cfg.Protocol, listen, upstream, idle, r.tls))
				if err != nil {
					return nil, err
				}
				return []string{bin, "-db", "-f", path}, nil
			},
		}
	case ProxyArmNginx:
		// Looked up once per run; each measurement writes a config.
		bin, lookErr := exec.LookPath("nginx")
		var mod string
		summary := "nginx from the distribution, stream module, one process (master_process off, worker_processes 1)"
		switch {
		case lookErr != nil && httpMode:
			lookErr = errors.New("nginx is not installed (apt-get install nginx)")
		case lookErr != nil:
			lookErr = errors.New("nginx is not installed (apt-get install nginx libnginx-mod-stream)")
		case httpMode:
			lookErr = nginxHTTPProxy(bin)
			if lookErr == nil && h2Clients(cfg.Protocol) {
				lookErr = nginxHTTP2(bin)
			}
			summary = fmt.Sprintf("nginx from the distribution, http proxy module, keep-alive both sides (upstream keepalive %d, keepalive_requests %d), one process (master_process off, worker_processes 1)", idle, nginxKeepaliveRequests)
			switch cfg.Protocol {
			case ProxyProtocolH2:
				summary += ", `listen … http2` without ssl (HTTP/2 with prior knowledge), proxy_http_version 1.1 with an empty Connection field to the upstream"
			case ProxyProtocolH2H2:
				if lookErr == nil {
					lookErr = nginxH2Upstream(bin)
				}
				summary = fmt.Sprintf("nginx from the distribution, `listen … http2` without ssl (HTTP/2 with prior knowledge), grpc_pass grpc:// to the upstream (nginx's only HTTP/2 to an upstream: one stream per upstream connection, kept alive: keepalive %d, keepalive_requests %d both sides), one process (master_process off, worker_processes 1)", idle, nginxKeepaliveRequests)
			}
		default:
			mod, lookErr = nginxStream(bin)
		}
		if cfg.TLS {
			summary += ", TLS 1.3 on its listener (listen … ssl, OpenSSL)"
			if lookErr == nil {
				lookErr = nginxTLS(bin, httpMode)
			}
		}
		return proxyArm{
			armHead: armHead{name, summary, lookErr},
			argv: func(dir, listen, upstream string) ([]string, error) {
				path, err := writeConf(dir, "nginx.conf", NginxConfig(cfg.Protocol, dir, mod, listen, upstream, idle, r.tls))
				if err != nil {
					return nil, err
				}
				return []string{bin, "-c", path, "-p", dir, "-e", "stderr"}, nil
			},
		}
	}
	a := proxyArm{armHead: armHead{name: ProxyArmDirect, summary: "no proxy: the client straight to the upstream (the floor; its CPU per request is the upstream's alone)"}}
	switch {
	case cfg.TLS:
		a.unavailable = errors.New(proxyTLSNoDirect)
	case cfg.Protocol == ProxyProtocolH2:
		a.unavailable = errors.New(proxyH2NoDirect)
	}
	return a
}

// inFlight is the most requests a run has in flight: a connection's
// streams (their most) on each connection with ProxyProtocolH2 and
// ProxyProtocolH2H2, else one on each. The proxies keep as many idle
// upstream connections.
func (r *proxyRunner) inFlight() int {
	return r.cfg.Conns * max(slices.Max(append([]int{1}, r.cfg.Streams...)), 1)
}

// proxyRunner holds the state of one proxy run.
type proxyRunner struct {
	armsRun
	cfg ProxyConfig
	// upstream is the upstream server's address, upstreamPID its process
	// (0 where the upstream is not a child of the run: some tests').
	upstream    string
	upstreamPID int
	report      *ProxyReport
	// tls is the proxies' certificate with ProxyConfig.TLS, clientTLS
	// the clients' config (proxyClientTLS); both nil without.
	tls       *ProxyTLS
	clientTLS *tls.Config
}

// RunProxy runs `spindle bench proxy`: one upstream server (this binary's
// `bench server` echo, or with ProxyProtocolH2H2 a `bench http2` server),
// and in front of it each arm's proxy, started
// fresh, pinned to cfg.ProxyCPUs, for each measurement; arms alternate
// within each repetition. Every reply is verified; a proxy that fails to
// start in its arm's first measurement is a skipped arm (with the reason),
// one that fails later, or during a measurement, fails the run. Everything started is stopped, and the temporary configs removed,
// before it returns. Every thread of the calling process runs on
// cfg.ClientCPUs from the upstream's start to its stop, then on the CPUs
// it had; GOMAXPROCS stays what it was.
func RunProxy(ctx context.Context, cfg ProxyConfig) (*ProxyReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var version string
	if h2Clients(cfg.Protocol) {
		if version, err = h2loadVersion(ctx, cfg.H2load); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "spindle-bench-proxy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	r := &proxyRunner{cfg: cfg, armsRun: armsRun{dir: dir}, report: &ProxyReport{
		Schema: ProxySchema, Started: time.Now().UTC(), Host: hostInfo(),
		Config: ProxySettings{
			Protocol: cfg.Protocol, TLS: cfg.TLS, TLSHandshakes: cfg.TLSHandshakes, TLSResume: cfg.TLSResume, Conns: cfg.Conns, InFlight: 1, Payload: cfg.Payload, Reps: cfg.Reps, ProxyCPUs: cfg.ProxyCPUs,
			ClientCPUs: cfg.ClientCPUs, UpstreamCPUs: cfg.UpstreamCPUs, UpstreamArm: cfg.UpstreamArm,
			Streams: cfg.Streams, H2load: version,
		},
	}}
	if h2Clients(cfg.Protocol) {
		r.report.Config.ClientThreads = min(len(cfg.ClientCPUs), cfg.Conns)
	}
	if cfg.TLS {
		var pool *x509.CertPool
		if r.tls, pool, err = newProxyTLS(dir); err != nil {
			return nil, fmt.Errorf("bench: the proxies' certificate: %w", err)
		}
		r.clientTLS = proxyClientTLS(pool, proxyALPN(cfg.Protocol))
	}
	// Every thread of the harness on the client CPUs for the run, as
	// bench's runs pin theirs (newRunner): its reads at each window's edges
	// and the Go runtime's threads (the garbage collector's workers, busy
	// with the --tls-handshakes clients' allocations) would otherwise take
	// CPU time on any CPU, the proxy's included, unaccounted. A proxy
	// sharing a CPU with the client is in the report's notes (finish).
	if err := pinnedRun(cfg.ClientCPUs, cfg.Progress, func() error { return r.runUpstream(ctx) }); err != nil {
		return nil, err
	}
	r.finish()
	return r.report, nil
}

// runUpstream starts the upstream server, measures the arms in front of
// it (run) and stops it.
func (r *proxyRunner) runUpstream(ctx context.Context) error {
	stop, err := r.startUpstream(ctx)
	if err != nil {
		return fmt.Errorf("bench: upstream (%s arm): %w", r.cfg.UpstreamArm, err)
	}
	err = r.run(ctx, r.armSet())
	if serr := stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("bench: upstream: %w", serr))
	}
	return err
}

// startUpstream starts the upstream server pinned to the upstream CPUs,
// checked with a request of the run's protocol, and returns how to stop
// it: `bench server`'s echo, which with ProxyProtocolH2 answers a GET with
// a body of the payload's size, or with ProxyProtocolH2H2 the `bench
// http2` server arm cfg.UpstreamArm, started as bench http2 starts it (its
// files, nginx's config, in a directory of their own).
func (r *proxyRunner) startUpstream(ctx context.Context) (stop func() error, err error) {
	cfg := r.cfg
	if cfg.Protocol == ProxyProtocolH2H2 {
		h := &http2Runner{armsRun: armsRun{dir: filepath.Join(r.dir, "upstream")}, cfg: HTTP2Config{
			ServerCommand: cfg.UpstreamCommand, ServerCPUs: cfg.UpstreamCPUs, Body: cfg.Payload, Conns: r.inFlight(), Env: cfg.Env,
		}}
		if err := os.Mkdir(h.dir, 0o755); err != nil {
			return nil, err
		}
		a := h.arm(cfg.UpstreamArm)
		if a.unavailable != nil {
			return nil, a.unavailable
		}
		p, err := h.start(ctx, a)
		if err != nil {
			return nil, err
		}
		r.upstream, r.upstreamPID = p.addr, p.cmd.Process.Pid
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("the upstream is bench http2's %s arm: %s", a.name, a.summary))
		return p.stop, nil
	}
	upArgs := []string{"-arm", cfg.UpstreamArm, "-listen", "127.0.0.1:0", "-loops", "1", "-cpus", FormatCPUList(cfg.UpstreamCPUs), "-control"}
	if cfg.Protocol == ProxyProtocolH2 {
		// The echo answers a GET with this many bytes (appendBody's).
		upArgs = append(upArgs, "-body", strconv.Itoa(cfg.Payload))
	}
	up, err := startServerProc(ctx, append(slices.Clone(cfg.UpstreamCommand), upArgs...), cfg.Env)
	if err != nil {
		return nil, err
	}
	r.upstream, r.upstreamPID = up.hello.Addr, up.cmd.Process.Pid
	if err := echoCheck(r.upstream, r.framing(r.upstream)); err != nil {
		return nil, errors.Join(fmt.Errorf("does not answer %s: %w", r.loadProtocol(), err), up.stop())
	}
	return up.stop, nil
}

// armSet lists the arms asked for in the report and returns how each is
// started. An arm whose program is missing is skipped here, before the
// budget is split (run); whether one that is installed can run here is
// found by its first measurement, not by starting it once more
// beforehand.
func (r *proxyRunner) armSet() []proxyArm {
	return listArms(r.cfg.Arms, r.arm, &r.report.Arms, &r.report.Notes, r.cfg.Progress)
}

// startError is a proxy that could not be started or did not serve: in its
// arm's first measurement, the arm is skipped with it as the reason.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// run measures arms, those armSet did not skip, Reps times. The budget is
// split over them; one that then fails to start in its first measurement
// is skipped there, and its share goes unused (the measurements already
// made keep the windows the others get).
func (r *proxyRunner) run(ctx context.Context, arms []proxyArm) error {
	c := r.cfg
	points := max(len(c.Streams), 1)
	// h2load takes whole milliseconds.
	if err := r.budget("proxy", r.report.Arms, c.Reps*points, c.Duration, h2Clients(c.Protocol)); err != nil {
		return err
	}
	r.report.Config.WarmupSeconds = r.warmup.Seconds()
	r.report.Config.WindowSeconds = r.window.Seconds()
	r.report.Config.Smoke = r.smoke
	if r.smoke != nil {
		r.report.Notes = append(r.report.Notes, r.smoke.String())
		fmt.Fprintf(r.cfg.Progress, "spindle bench proxy: %v\n", r.smoke)
	}
	fmt.Fprintf(r.cfg.Progress, "spindle bench proxy (%s): %d measurements, each %v warm-up + %v measured; proxy CPUs %v, client CPUs %v, upstream CPUs %v\n",
		c.Protocol, r.total, r.warmup, r.window, c.ProxyCPUs, c.ClientCPUs, c.UpstreamCPUs)
	return measureAlternating(ctx, "proxy", r.report.Arms, &r.report.Notes, c.Progress, c.Reps, points, func(i, point, rep int) error {
		var res ProxyResult
		var err error
		if h2Clients(c.Protocol) {
			res, err = r.measureH2(ctx, arms[i], c.Streams[point], rep)
			if err != nil {
				return fmt.Errorf("bench: proxy %s streams %d rep %d: %w", arms[i].name, c.Streams[point], rep, err)
			}
		} else if res, err = r.measure(ctx, arms[i], rep); err != nil {
			return fmt.Errorf("bench: proxy %s rep %d: %w", arms[i].name, rep, err)
		}
		r.report.Results = append(r.report.Results, res)
		return nil
	}, func(n int) { r.total -= n })
}

// proxyProc is a running proxy, the leader of a process group of its own.
type proxyProc struct {
	cmd    *exec.Cmd
	addr   string
	errb   *lockedBuffer
	exited chan struct{} // closed when cmd.Wait has returned
	err    error         // cmd.Wait's, once exited is closed
	// ready is startServing's check that it serves, a reply verified
	// whole; h2loadDriver.measure runs it again after its load.
	ready func() error
}

// loadProtocol is the load generator's protocol for the run's (with
// ProxyProtocolH2, what the upstream is checked with; unused with
// ProxyProtocolH2H2).
func (r *proxyRunner) loadProtocol() string {
	if r.cfg.Protocol != ProxyProtocolTCP {
		return ProtocolHTTP
	}
	return ProtocolRPC
}

// framing is the run's protocol for one request to addr (its Host), of
// MinPayload bytes, as echoCheck sends it.
func (r *proxyRunner) framing(addr string) loadFraming {
	return newLoadFraming(LoadConfig{Protocol: r.loadProtocol(), Host: addr, Payload: MinPayload})
}

// echoCheck sends one request in framing f to addr and verifies its reply,
// within five seconds.
func echoCheck(addr string, f loadFraming) error { return echoCheckTLS(addr, f, nil) }

// echoCheckTLS is echoCheck over TLS with cfg, when it is not nil.
func echoCheckTLS(addr string, f loadFraming, cfg *tls.Config) error {
	c, err := tlsDial(addr, cfg, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(f.appendRequest(nil, 0xffff, 1)); err != nil {
		return err
	}
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := f.replyLen(buf)
		if err != nil {
			return err
		}
		if n > 0 && len(buf) >= n {
			_, err = f.verify(buf[:n], 0xffff, 1, nil)
			return err
		}
		k, err := c.Read(chunk)
		if k == 0 && err != nil {
			return fmt.Errorf("after %d bytes of the reply: %w", len(buf), err)
		}
		buf = append(buf, chunk[:k]...)
	}
}

// startProxy starts arm a's proxy pinned to the proxy CPUs and waits until
// a request through it (in the run's protocol) comes back verified.
func (r *proxyRunner) startProxy(ctx context.Context, a proxyArm) (*proxyProc, error) {
	if a.unavailable != nil {
		return nil, a.unavailable
	}
	port, err := holdPort()
	if err != nil {
		return nil, err
	}
	defer port.release()
	listen := port.addr
	argv, err := a.argv(r.dir, listen, r.upstream)
	if err != nil {
		return nil, err
	}
	ready := func() error { return echoCheckTLS(listen, r.framing(listen), r.clientTLS) }
	switch {
	case h2Clients(r.cfg.Protocol) && r.clientTLS != nil:
		ready = func() error { return h2TLSCheck(listen, r.cfg.Payload, r.clientTLS) }
	case h2Clients(r.cfg.Protocol):
		ready = func() error { return h2cCheck(listen, r.cfg.Payload) }
	}
	return startServing(ctx, argv, r.cfg.Env, r.cfg.ProxyCPUs, listen, ready, a.check)
}

// startServing starts argv (with env added to this process's environment)
// pinned to cpus, as the leader of a process group of its own, and waits
// up to ten seconds until ready, which checks the server on listen,
// passes. check, when set, then looks at what the program wrote (see
// proxyArm.check). A program that exits first, or is not ready in time,
// is an error carrying its output.
func startServing(ctx context.Context, argv, env []string, cpus []int, listen string, ready func() error, check func(string) error) (*proxyProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	p := &proxyProc{cmd: cmd, addr: listen, errb: &lockedBuffer{}, exited: make(chan struct{}), ready: ready}
	cmd.Stdout, cmd.Stderr = p.errb, p.errb
	if err := startPinned(cmd, cpus); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ready()
		if err == nil && check != nil {
			if cerr := check(p.errb.String()); cerr != nil {
				p.stop()
				return nil, cerr
			}
		}
		if err == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before serving (%v): %s", argv[0], p.err, strings.TrimSpace(p.errb.String()))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s does not serve on %s within 10s (%v): %s", argv[0], listen, err, strings.TrimSpace(p.errb.String()))
		}
	}
}

// stop ends the proxy's process group: SIGTERM, then SIGKILL after five
// seconds; any process left in the group after its leader exits is killed.
// A proxy that exited before it was stopped is an error.
func (p *proxyProc) stop() error {
	pgid := p.cmd.Process.Pid
	var early error
	select {
	case <-p.exited:
		early = fmt.Errorf("%s exited during the run (%v): %s", p.cmd.Args[0], p.err, strings.TrimSpace(p.errb.String()))
	default:
	}
	signalGroup(pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		signalGroup(pgid, syscall.SIGKILL)
		<-p.exited
	}
	signalGroup(pgid, syscall.SIGKILL)
	return early
}

// cpuEdge is the proxy's group CPU at one edge of the window.
type cpuEdge struct {
	g   GroupCPU
	at  time.Time
	err error
}

// proxyEdges are the reads at the edges of a proxy measurement's window:
// the proxy's and the upstream's CPU, and the machine's (/proc/stat).
type proxyEdges struct {
	proxy, upstream [2]cpuEdge
	host            [2]hostEdge
}

func (r *proxyRunner) measure(ctx context.Context, a proxyArm, rep int) (ProxyResult, error) {
	res := ProxyResult{Arm: a.name, Rep: rep}
	addr, p, err := r.startArm(ctx, a)
	if err != nil {
		return res, err
	}
	proxyPID := 0
	if p != nil {
		proxyPID = p.cmd.Process.Pid
	}
	done := make(chan struct{})
	edges := make(chan proxyEdges, 1)
	lc := LoadConfig{
		Addr: addr, Protocol: r.loadProtocol(), Conns: r.cfg.Conns, InFlight: 1, Payload: r.cfg.Payload, Warmup: r.warmup, Duration: r.window,
		Threads: len(r.cfg.ClientCPUs), CPUs: r.cfg.ClientCPUs, Drain: drainFor(r.window), Block: r.clientBlocks(), TLS: r.clientTLS,
		Window: func(start, end time.Time) {
			go func() {
				var e proxyEdges
				for i, t := range []time.Time{start, end} {
					if !waitUntil(done, t) {
						return
					}
					e.proxy[i], e.upstream[i], e.host[i] = readEdge(proxyPID), readEdge(r.upstreamPID), readHostEdge()
				}
				edges <- e
			}()
		},
	}
	var load *LoadResult
	var hsTLS *ProxyTLSResult
	var twBefore []twSocket
	if r.cfg.TLSHandshakes {
		if twBefore, err = readTimeWait("/"); err != nil {
			err = fmt.Errorf("TIME_WAIT sockets: %w", err)
		}
	}
	began := time.Now()
	switch {
	case err != nil:
		// No load: the measurement fails with it.
	case r.cfg.TLSHandshakes:
		load, hsTLS, err = runHandshakes(ctx, handshakeLoad{
			addr: addr, tls: handshakeClientTLS(r.clientTLS, r.cfg.TLSResume), framing: LoadConfig{Addr: addr, Protocol: lc.Protocol, Payload: lc.Payload},
			slots: lc.Conns, cpus: lc.CPUs, warmup: lc.Warmup, window: lc.Duration, Window: lc.Window,
		})
	default:
		load, err = RunLoad(ctx, lc)
	}
	var e proxyEdges
	if err == nil {
		e = <-edges
		err = errors.Join(e.proxy[0].err, e.proxy[1].err, e.upstream[0].err, e.upstream[1].err, e.host[0].err, e.host[1].err)
	}
	close(done)
	if p != nil {
		if serr := p.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return res, err
	}
	res.AchievedRPS = load.Throughput()
	res.Requests = load.Replies
	res.Unanswered = load.Unanswered
	res.Latency, res.LatencyClamped, res.LatencyCount = load.Hist.latencyFigures()
	res.ClientCPUPercent = load.ClientCPUPercent()
	switch {
	case r.cfg.TLSHandshakes:
		res.TLS = hsTLS
		if err := checkHandshakes(res.TLS, r.cfg.Conns, proxyALPN(r.cfg.Protocol), r.cfg.TLSResume); err != nil {
			return res, err
		}
		socks, err := readTimeWait("/")
		if err != nil {
			return res, fmt.Errorf("TIME_WAIT sockets: %w", err)
		}
		// Since after the read: no socket of the measurement is left out.
		tw := countTimeWait(twBefore, socks, time.Since(began), portOf(addr), portOf(r.upstream))
		res.TimeWait = &tw
	case r.clientTLS != nil:
		res.TLS = tlsFromLoad(load.TLS)
		if err := checkTLS(res.TLS, r.cfg.Conns, proxyALPN(r.cfg.Protocol)); err != nil {
			return res, err
		}
	}
	res.Machine = windowMachine(e.host, load.rate(), load.ClientIdle, r.roles())
	r.recordCPU(&res, fmt.Sprintf("%s rep %d", a.name, rep), p != nil, e.proxy, e.upstream, windowCPU(e.proxy, load.rate()), windowCPU(e.upstream, load.rate()))
	return res, nil
}

// roles are the processes of a proxy measurement and their CPUs, the
// proxy's first (windowMachine counts interrupts and NET_RX there).
func (r *proxyRunner) roles() []cpuRole {
	return []cpuRole{{"proxy", r.cfg.ProxyCPUs}, {"upstream", r.cfg.UpstreamCPUs}, {"client", r.cfg.ClientCPUs}}
}

// startArm starts arm a's proxy (startProxy) and returns the address
// the clients go to: the proxy's, or with the direct arm (no proxy: p is
// nil) the upstream's. A proxy that does not serve is a startError.
func (r *proxyRunner) startArm(ctx context.Context, a proxyArm) (addr string, p *proxyProc, err error) {
	if a.argv == nil {
		return r.upstream, nil, nil
	}
	if p, err = r.startProxy(ctx, a); err != nil {
		return "", nil, &startError{err}
	}
	return p.addr, p, nil
}

// measureH2 measures arm a with h2load (ProxyProtocolH2 and
// ProxyProtocolH2H2), streams in flight on each connection, verified as
// h2loadDriver.measure verifies; the direct arm's h2load goes straight
// to the upstream (ProxyProtocolH2H2's, which speaks h2c).
func (r *proxyRunner) measureH2(ctx context.Context, a proxyArm, streams, rep int) (ProxyResult, error) {
	res := ProxyResult{Arm: a.name, Streams: streams, Rep: rep}
	addr, p, err := r.startArm(ctx, a)
	if err != nil {
		return res, err
	}
	d := h2loadDriver{h2load: r.cfg.H2load, threads: r.report.Config.ClientThreads, conns: r.cfg.Conns, cpus: r.cfg.ClientCPUs, warmup: r.warmup, window: r.window, https: r.clientTLS != nil, roles: r.roles()}
	// The direct arm's load goes to the upstream, which serves the whole
	// run: a reply of it is checked whole after the load, as a proxy's is.
	check := func() error { return h2cCheck(addr, r.cfg.Payload) }
	if p != nil {
		check = p.ready
	}
	m, err := d.measure(ctx, r.dir, addr, streams, p, r.upstreamPID, check)
	if err != nil {
		return res, err
	}
	if d.https {
		res.TLS = &ProxyTLSResult{Version: m.tls.Version, CipherSuite: m.tls.CipherSuite, ALPN: m.protocol}
		if err := checkTLS(res.TLS, r.cfg.Conns, proxyALPN(r.cfg.Protocol)); err != nil {
			return res, fmt.Errorf("h2load: %w", err)
		}
	}
	res.Requests, res.AchievedRPS, res.Latency, res.LatencyClamped, res.LatencyCount, res.ClientCPUPercent = m.requests, m.rps, m.latency, m.clamped, m.count, m.clientPercent
	res.Machine = m.machine
	what := fmt.Sprintf("%s streams %d rep %d", a.name, streams, rep)
	served, f := "proxy", m.server
	if p == nil {
		served, f = "upstream", m.upstream
	}
	r.report.Notes = append(r.report.Notes, m.notes(what, served, f)...)
	r.recordCPU(&res, what, p != nil, m.edges.server, m.edges.upstream, m.server, m.upstream)
	return res, nil
}

// recordCPU puts the proxy's CPU (with proxied: the direct arm has none)
// and the upstream's over measurement what's window into res, from the
// reads at its edges and their figures, notes a change of the proxy's
// processes during it, and writes its progress line.
func (r *proxyRunner) recordCPU(res *ProxyResult, what string, proxied bool, proxy, upstream [2]cpuEdge, proxyF, upF cpuFigures) {
	if proxied {
		res.ProxyUSPerReq, res.ProxyCPUPercent, res.ProxyCPUSource = proxyF.usPerReq, proxyF.percent, proxyF.source
		res.ProxyProcs = len(proxy[1].g.PIDs)
		if !slices.Equal(proxy[0].g.PIDs, proxy[1].g.PIDs) {
			r.report.Notes = append(r.report.Notes, fmt.Sprintf("%s: the proxy's processes changed during the window (%v, then %v): the CPU of one that exited is not counted", what, proxy[0].g.PIDs, proxy[1].g.PIDs))
		}
	}
	if r.upstreamPID != 0 {
		res.UpstreamUSPerReq, res.UpstreamCPUPercent, res.UpstreamCPUSource = upF.usPerReq, upF.percent, upF.source
	}
	r.done++
	fmt.Fprintf(r.cfg.Progress, "[%2d/%d] %-34s %8.0f req/s  p50 %7.1fµs  p99 %8.1fµs  p99.9 %8.1fµs  proxy %6.2fµs/req (%3.0f%% CPU)  upstream %6.2fµs/req (%3.0f%% CPU)  machine work %6.2fµs/req  client %3.0f%%\n",
		r.done, r.total, what, res.AchievedRPS, res.Latency.P50, res.Latency.P99, res.Latency.P999, res.ProxyUSPerReq, res.ProxyCPUPercent, res.UpstreamUSPerReq, res.UpstreamCPUPercent, res.Machine.WorkUSPerReq, res.ClientCPUPercent)
}

// proxyCPU turns the group CPU read at two edges into µs per request and a
// percent of one CPU: the CPU's rate over the time between the reads,
// divided by the request rate over the same time (w.over: the replies
// between the reads, or the window's rate where their times are not
// known). The
// CPU is the threads' schedstat run time where both reads have it for the
// same threads (ns resolution), else utime+stime (10 ms ticks, which
// also count threads that exited); fine says which.
func proxyCPU(a, b cpuEdge, w windowRate) (usPerReq, percent float64, fine bool) {
	between := b.at.Sub(a.at)
	if between <= 0 || w.window <= 0 || b.g.Ticks < a.g.Ticks {
		return 0, 0, false
	}
	cpuNS := float64(b.g.Ticks-a.g.Ticks) * ClockTick
	if a.g.sameThreads(b.g) && b.g.RunNS >= a.g.RunNS {
		cpuNS, fine = float64(b.g.RunNS-a.g.RunNS), true
	}
	percent = 100 * cpuNS / float64(between)
	if w.replies == 0 {
		return 0, percent, fine
	}
	return cpuUSPerReq(cpuNS, between, w.over(a.at, b.at, between)), percent, fine
}

func (r *proxyRunner) finish() {
	rep := r.report
	rep.Summary = summarizeProxy(rep.Results)
	// withDefaults took only references among the arms.
	rep.Config.RatioTo, _ = runRatioRefs(r.cfg.RatioTo, DefaultProxyRatioTo, rep.Arms, &rep.Notes)
	rep.PairedRatios = proxyPairedRatios(rep.Results, rep.Config.RatioTo)
	rep.Seconds = time.Since(rep.Started).Seconds()
	h2 := h2Clients(r.cfg.Protocol)
	for _, res := range rep.Results {
		what := fmt.Sprintf("%s rep %d", res.Arm, res.Rep)
		if h2 {
			what = fmt.Sprintf("%s streams %d rep %d", res.Arm, res.Streams, res.Rep)
		}
		if res.Requests == 0 {
			rep.Notes = append(rep.Notes, noRepliesNote(what, "proxy or upstream", r.window))
		}
		if res.Unanswered > 0 {
			rep.Notes = append(rep.Notes, unansweredNote(what, res.Unanswered, drainFor(r.window)))
		}
		if res.LatencyClamped > 0 {
			rep.Notes = append(rep.Notes, clampedNote(what, res.LatencyClamped))
		}
		if res.ClientCPUPercent >= clientSaturatedPercent {
			rep.Notes = append(rep.Notes, saturatedNote(what, "proxy", res.ClientCPUPercent))
		}
	}
	// An arm as the notes on its summary row name it.
	point := func(arm string, streams int) string {
		if h2 {
			return fmt.Sprintf("%s at %d streams", arm, streams)
		}
		return arm
	}
	rep.Notes = append(rep.Notes, armsFewLatenciesNotes(rep.Results, point)...)
	for _, s := range rep.Summary {
		arm := point(s.Arm, s.Streams)
		if s.Arm != ProxyArmDirect && s.ProxyCPUPercent < proxyBusyPercent {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s used %.0f%% of a CPU (median): it was not the bottleneck, so its rate and latency are bounded elsewhere (the client and upstream CPUs); compare its CPU per request", arm, s.ProxyCPUPercent))
		}
	}
	rep.Notes = append(rep.Notes, sideDriftNotes(rep.Summary, func(s ProxySummaryRow) driftRow {
		point := "closed loop"
		if h2 {
			point = fmt.Sprintf("streams %d", s.Streams)
		}
		return driftRow{arm: s.Arm, point: point, reps: s.Reps, rps: s.AchievedRPS, paired: sidePaired(rep.PairedRatios, s.Arm, s.Streams)}
	})...)
	switch {
	case r.cfg.TLSHandshakes:
		rep.Notes = append(rep.Notes, proxyHandshakeNote(r.cfg.TLSResume), proxyChurnNote(tcpSysctls("/")))
	case r.cfg.TLS:
		rep.Notes = append(rep.Notes, proxyTLSNote(h2))
	}
	if r.cfg.TLS {
		var suites []string
		for _, res := range rep.Results {
			if res.TLS != nil {
				suites = appendNew(suites, res.TLS.CipherSuite)
			}
		}
		if len(suites) > 1 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the arms' TLS cipher suites differ (%s; each arm's in the TLS line above): their record costs differ by more than the proxies'", strings.Join(suites, "; ")))
		}
	}
	switch noDirect := !slices.Contains(r.cfg.Arms, ProxyArmDirect); {
	case r.cfg.TLS && noDirect:
		rep.Notes = append(rep.Notes, proxyTLSNoDirect)
	case r.cfg.Protocol == ProxyProtocolH2 && noDirect:
		rep.Notes = append(rep.Notes, proxyH2NoDirect)
	}
	if h2 {
		rep.Notes = append(rep.Notes, h2loadLogNote, h2loadVerifiedNote("proxy"))
	} else if r.clientBlocks() && !r.cfg.TLSHandshakes {
		rep.Notes = append(rep.Notes, "the client shares a CPU with the upstream or the proxy: it sleeps in epoll_wait between events instead of polling, and its wake-ups are in the latencies")
	}
	if cpuOverlap(r.cfg.ProxyCPUs, slices.Concat(r.cfg.ClientCPUs, r.cfg.UpstreamCPUs)) {
		rep.Notes = append(rep.Notes, "the proxy shares a CPU with the client or the upstream: figures include their contention")
	}
	coarse, upCoarse := 0, 0
	for _, res := range rep.Results {
		if res.ProxyCPUSource == "stat" {
			coarse++
		}
		if res.UpstreamCPUSource == "stat" {
			upCoarse++
		}
	}
	rep.Notes = append(rep.Notes, processCPUNote("proxy")+"; the upstream's CPU is counted the same way, over the same windows", machineWorkNote)
	if coarse > 0 {
		rep.Notes = append(rep.Notes, coarseCPUNote(coarse, "proxy"))
	}
	if upCoarse > 0 {
		rep.Notes = append(rep.Notes, coarseCPUNote(upCoarse, "upstream"))
	}
}

// proxyTLSNote says what a --tls run measured: with h2, h2load's TLS.
func proxyTLSNote(h2 bool) string {
	client := "the load generator's connections are crypto/tls clients offering X25519 alone as key exchange (Go's default would offer X25519MLKEM768, which the spindle arms' Go server takes and HAProxy's and nginx's OpenSSL 3.0 do not), their records read and written by its epoll loop"
	when := "in the load generator's set-up, before the warm-up"
	if h2 {
		client = "h2load's connections are OpenSSL's (https, HTTP/2 by ALPN, X25519 its first key exchange)"
		// h2load does not wait for its connections: connectNote says
		// where it connected in the window.
		when = "in h2load's warm-up where no note says it made connections in the window"
	}
	return fmt.Sprintf("TLS 1.3 on the client side: each proxy serves %s; %s; every connection handshakes once (keep-alive), %s, so the figures are TLS's per-request cost (records encrypted and decrypted), not the handshakes'; the client's own TLS work is in its CPU; proxy to upstream is plain", proxyTLSCert, client, when)
}

// processCPUNote says how the CPU of who's process is counted (proxyCPU
// over ProcessCPU reads at a window's edges), and where the softirq work
// it leaves out is (machineWorkNote).
func processCPUNote(who string) string {
	return fmt.Sprintf("loopback; %[1]s CPU is the CPU time of every thread of the %[1]s's process (and of any children it forked) over each window: the threads' schedstat run time (ns; the clock utime+stime are scaled from), softirq work the kernel did for it on other CPUs not included (machine work has it)", who)
}

// machineWorkNote says how the side-by-side reports' machine work is
// counted (windowMachine) and how to read it.
var machineWorkNote = fmt.Sprintf("machine work is the busy time of every CPU over each window (/proc/stat, in %d ms ticks: coarse in a short window), the client's empty polls taken out: read it with the process CPU figures, as softirq work moved off a process's books onto another CPU is relocation, not reduction; the JSON report splits it per CPU (machine.per_cpu, each CPU named by the processes pinned to it)", ClockTick/1_000_000)

// coarseCPUNote says n measurements' CPU of who came from utime+stime.
func coarseCPUNote(n int, who string) string {
	return fmt.Sprintf("%d measurements' %s CPU is utime+stime from /proc/PID/stat, in %d ms ticks (the %s's threads changed during the window, or schedstat is missing): in a short window it is coarse", n, who, ClockTick/1_000_000, who)
}

// proxyBusyPercent is the share of a CPU (every arm's data path is one
// thread) below which a proxy is noted as not its measurement's bottleneck.
const proxyBusyPercent = 90

// clientBlocks reports whether the client sleeps in epoll_wait instead of
// polling: it does when it shares a CPU with the upstream or the proxy,
// whom a polling client would leave only what the scheduler takes from it
// (on two CPUs, client and upstream share CPU 1, and a polling client made
// every arm's median latency milliseconds of time slices).
func (r *proxyRunner) clientBlocks() bool {
	return cpuOverlap(r.cfg.ClientCPUs, slices.Concat(r.cfg.UpstreamCPUs, r.cfg.ProxyCPUs))
}

func cpuOverlap(a, b []int) bool {
	return slices.ContainsFunc(a, func(c int) bool { return slices.Contains(b, c) })
}

// summarizeProxy groups results by arm, in first-seen order, and takes
// medians, spreads and the ratios to the first arm.
func summarizeProxy(results []ProxyResult) []ProxySummaryRow {
	rows := summarizeArms(results, func(a armRates, g []ProxyResult) ProxySummaryRow {
		spread := func(f func(ProxyResult) float64) Spread { return spreadBy(g, f) }
		answered := withReplies(g, func(r ProxyResult) uint64 { return r.Requests })
		perReq := func(f func(ProxyResult) float64) Spread { return spreadBy(answered, f) }
		row := ProxySummaryRow{
			Arm: a.arm, Streams: a.streams, Reps: a.reps, AchievedRPS: a.rps, P50: a.p50, P99: a.p99, P999: a.p999,
			ProxyUSPerReq:    perReq(func(r ProxyResult) float64 { return r.ProxyUSPerReq }),
			ProxyCPUPercent:  spread(func(r ProxyResult) float64 { return r.ProxyCPUPercent }).Median,
			ClientCPUPercent: spread(func(r ProxyResult) float64 { return r.ClientCPUPercent }).Median,

			UpstreamUSPerReq:   perReq(func(r ProxyResult) float64 { return r.UpstreamUSPerReq }),
			UpstreamCPUPercent: spread(func(r ProxyResult) float64 { return r.UpstreamCPUPercent }).Median,
			MachineSummary:     a.machine,
		}
		for _, res := range g {
			row.Unanswered += res.Unanswered
		}
		return row
	})
	// With "h2" and "h2h2", ratios at each streams value (the others have
	// 0 only).
	return ratiosByStreams(rows, func(r ProxySummaryRow) int { return r.Streams }, func(r *ProxySummaryRow, f ProxySummaryRow) {
		r.RPSRatio = ratioOf(r.AchievedRPS.Median, f.AchievedRPS.Median)
		r.P99Ratio = ratioOf(r.P99.Median, f.P99.Median)
		r.ProxyCPURatio = ratioOf(r.ProxyUSPerReq.Median, f.ProxyUSPerReq.Median)
		r.UpstreamCPURatio = ratioOf(r.UpstreamUSPerReq.Median, f.UpstreamUSPerReq.Median)
	})
}

// WriteProxyReport writes rep into dir (created if needed) as report.json
// and report.md, each written whole to a temporary file and renamed.
func WriteProxyReport(dir string, rep *ProxyReport) error {
	return writeJSONAndMarkdown(dir, rep, ProxyMarkdown(rep))
}

// writeJSONAndMarkdown writes rep as report.json and md as report.md into
// dir (created if needed), each whole to a temporary file and renamed.
func writeJSONAndMarkdown(dir string, rep any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(dir, []string{ReportJSON, ReportMarkdown}, [][]byte{append(js, '\n'), []byte(md)})
}

// ProxyMarkdown renders rep as a Markdown document.
func ProxyMarkdown(rep *ProxyReport) string {
	var b strings.Builder
	c := rep.Config
	fmt.Fprintf(&b, "# spindle bench proxy report: %s\n\n", proxyTitle(c))
	writeHostLine(&b, rep.Host)
	fmt.Fprintf(&b, "- loopback; proxy CPUs %v, client CPUs %v, upstream (%s) CPUs %v\n", c.ProxyCPUs, c.ClientCPUs, c.UpstreamArm, c.UpstreamCPUs)
	b.WriteString(proxyTLSLine(rep))
	b.WriteString(proxyTimeWaitLine(rep))
	h2 := h2Clients(c.Protocol)
	rate := "req/s"
	switch {
	case c.TLSHandshakes:
		rate = "handshakes/s"
		fmt.Fprintf(&b, "- %d connection slots, closed loop: each connection one request (a TLS handshake, a %d-byte payload, the reply, closed by the client), %d reps (arms alternated), each %.2fs warm-up + %.2fs measured; started %s, %.0fs\n\n",
			c.Conns, c.Payload, c.Reps, c.WarmupSeconds, c.WindowSeconds, rep.Started.Format("2006-01-02 15:04 UTC"), rep.Seconds)
	case h2:
		fmt.Fprintf(&b, "- %d connections × streams %v in flight each (%s, %d threads, closed loop), GET answered by the upstream with a %d-byte body, %d reps (arms alternated), each %.2fs warm-up + %.2fs measured; started %s, %.0fs\n\n",
			c.Conns, c.Streams, c.H2load, c.ClientThreads, c.Payload, c.Reps, c.WarmupSeconds, c.WindowSeconds, rep.Started.Format("2006-01-02 15:04 UTC"), rep.Seconds)
	default:
		fmt.Fprintf(&b, "- %d connections, %d in flight each (closed loop), %d-byte payload, %d reps (arms alternated), each %.2fs warm-up + %.2fs measured; started %s, %.0fs\n\n",
			c.Conns, c.InFlight, c.Payload, c.Reps, c.WarmupSeconds, c.WindowSeconds, rep.Started.Format("2006-01-02 15:04 UTC"), rep.Seconds)
	}
	same, streamsHead, streamsAlign := "", "", ""
	if h2 {
		same, streamsHead, streamsAlign = " at the same streams", " streams |", " ---: |"
	}
	b.WriteString("Medians over the repetitions with (min–max); latency in µs; proxy and upstream CPU in µs per request (run time of every thread of the proxy's, or the upstream's, processes) and in percent of a CPU; " + machineWorkText("proxy") + "; client CPU in percent of the client CPUs; ratios to the first arm's medians" + same + ".\n\n")
	b.WriteString("| arm |" + streamsHead + " " + rate + " | p50 | p99 | p99.9 | proxy CPU µs/req | proxy CPU % | upstream CPU µs/req | upstream CPU % | machine work CPU µs/req | softirq µs/req | steal µs/req | interrupts/req on proxy CPUs | NET_RX/req on proxy CPUs | client CPU % | req/s ratio | p99 ratio | proxy CPU ratio | upstream CPU ratio |\n")
	b.WriteString("| --- |" + streamsAlign + " ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	ratios := proxyRatioCells(rep.Summary)
	for i, s := range rep.Summary {
		r := ratios[i]
		pct := "—"
		if s.Arm != ProxyArmDirect {
			pct = fmt.Sprintf("%.0f", s.ProxyCPUPercent)
		}
		streams := ""
		if h2 {
			streams = fmt.Sprintf(" %d |", s.Streams)
		}
		fmt.Fprintf(&b, "| %s |%s %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %.2f | %.2f | %.2f | %.2f | %.0f | %s | %s | %s | %s |\n", s.Arm, streams, fmtSpread(s.AchievedRPS, 0), fmtSpread(s.P50, 1),
			fmtSpread(s.P99, 1), fmtSpread(s.P999, 1), cpuCell(s), pct, fmtSpread(s.UpstreamUSPerReq, 2), s.UpstreamCPUPercent,
			fmtSpread(s.MachineWorkUSPerReq, 2), s.SoftirqUSPerReq, s.StealUSPerReq, s.InterruptsPerReq, s.NetRxPerReq, s.ClientCPUPercent, r[0], r[1], r[2], r[3])
	}
	b.WriteString(proxyRatioLayout(h2).markdown(rep.PairedRatios))
	writeArmsAndNotes(&b, rep.Arms, rep.Notes)
	return b.String()
}

// proxyRatioLayout is how bench proxy's paired-ratio tables look (with
// h2: a streams column).
func proxyRatioLayout(h2 bool) armsRatioLayout {
	return armsRatioLayout{
		figs: []armsFigure{figProxy, figUpstream, figSum, figP99}, byRep: figSum,
		what:    "proxy CPU µs per request, upstream CPU µs per request, their sum (proxy+upstream) and p99",
		missing: "one of the two arms had no replies in every repetition, or the figure was not measured (direct has no proxy CPU; its proxy+upstream is the upstream's alone)",
		streams: h2,
	}
}

func cpuCell(s ProxySummaryRow) string {
	if s.Arm == ProxyArmDirect {
		return "—"
	}
	return fmtSpread(s.ProxyUSPerReq, 2)
}

// proxyRatioCells are the printed ratios of each of rows (a summary, in
// order): req/s, p99, proxy CPU and upstream CPU (medianRatioCell; the
// proxy CPU's "—" too for direct, which has none, and for an arm without
// replies).
func proxyRatioCells(rows []ProxySummaryRow) [][4]string {
	first := firstByStreams(rows, func(s ProxySummaryRow) int { return s.Streams })
	cells := make([][4]string, len(rows))
	for i, s := range rows {
		f := first[s.Streams]
		cpu := medianRatioCell(s.ProxyCPURatio, f.ProxyUSPerReq.Median)
		if s.Arm == ProxyArmDirect || s.ProxyCPURatio == 0 {
			cpu = "—"
		}
		cells[i] = [4]string{medianRatioCell(s.RPSRatio, f.AchievedRPS.Median), medianRatioCell(s.P99Ratio, f.P99.Median), cpu, medianRatioCell(s.UpstreamCPURatio, f.UpstreamUSPerReq.Median)}
	}
	return cells
}

// WriteProxyTable prints rep's summary as a plain-text table.
func WriteProxyTable(w io.Writer, rep *ProxyReport) {
	h2 := h2Clients(rep.Config.Protocol)
	same, streamsHead := "", ""
	if h2 {
		same, streamsHead = " at the same streams", fmt.Sprintf(" %7s", "streams")
	}
	fmt.Fprintf(w, "\nbench proxy, %s, loopback, %d reps, medians (min–max); latency in µs, proxy, upstream and machine-wide CPU in µs per request, interrupts and NET_RX softirqs per request on the proxy CPUs; ratios to %s%s\n", proxyTitle(rep.Config), rep.Config.Reps, firstArm(rep.Summary, func(s ProxySummaryRow) string { return s.Arm }), same)
	fmt.Fprintf(w, "%-17s%s %-22s %-20s %-20s %-20s %-18s %-18s %-19s %8s %8s %7s %7s %7s %7s %7s %7s %7s\n", "arm", streamsHead, "req/s", "p50", "p99", "p99.9", "proxy µs/req", "upstream µs/req", "machine work µs/req", "softirq", "steal", "intr", "NET_RX", "client%", "rps×", "p99×", "cpu×", "up cpu×")
	ratios := proxyRatioCells(rep.Summary)
	for i, s := range rep.Summary {
		r := ratios[i]
		streams := ""
		if h2 {
			streams = fmt.Sprintf(" %7d", s.Streams)
		}
		fmt.Fprintf(w, "%-17s%s %-22s %-20s %-20s %-20s %-18s %-18s %-19s %8.2f %8.2f %7.2f %7.2f %7.0f %7s %7s %7s %7s\n", s.Arm, streams, fmtSpread(s.AchievedRPS, 0), fmtSpread(s.P50, 1),
			fmtSpread(s.P99, 1), fmtSpread(s.P999, 1), cpuCell(s), fmtSpread(s.UpstreamUSPerReq, 2), fmtSpread(s.MachineWorkUSPerReq, 2), s.SoftirqUSPerReq, s.StealUSPerReq,
			s.InterruptsPerReq, s.NetRxPerReq, s.ClientCPUPercent, r[0], r[1], r[2], r[3])
	}
	proxyRatioLayout(h2).writeTable(w, rep.PairedRatios)
	writeTableNotes(w, rep.Notes)
}

// proxyTitle says what a report compares: its protocol's title
// (proxyProtocolTitle), with TLS saying so.
func proxyTitle(c ProxySettings) string {
	t := proxyProtocolTitle(c.Protocol)
	switch {
	case !c.TLS:
		return t
	case h2Clients(c.Protocol):
		return strings.Replace(t, "(h2c, prior knowledge)", "(TLS 1.3, h2 by ALPN)", 1)
	case c.TLSResume:
		return strings.Replace(t, "keep-alive POSTs", "POSTs", 1) + ", TLS 1.3 on the client side, a connection and a resumed handshake per request"
	case c.TLSHandshakes:
		return strings.Replace(t, "keep-alive POSTs", "POSTs", 1) + ", TLS 1.3 on the client side, a connection and a full handshake per request"
	}
	return t + ", TLS 1.3 on the client side"
}

// proxyTLSLine is a --tls report's line on what each arm's clients'
// handshakes agreed (its first measurement's; the run fails where one's
// are not TLS 1.3 with the protocol's ALPN), or "".
func proxyTLSLine(rep *ProxyReport) string {
	if !rep.Config.TLS {
		return ""
	}
	var arms []string
	seen := map[string]bool{}
	for _, res := range rep.Results {
		if seen[res.Arm] || res.TLS == nil {
			continue
		}
		seen[res.Arm] = true
		a := fmt.Sprintf("%s %s %s", res.Arm, res.TLS.Version, res.TLS.CipherSuite)
		if res.TLS.ALPN != "" {
			a += " " + res.TLS.ALPN
		}
		switch {
		case rep.Config.TLSResume:
			a += fmt.Sprintf(" (%d handshakes, %d resumed, %d tickets sent, %.0f bytes from the server a connection)", res.TLS.Handshakes, res.TLS.Resumed, res.TLS.Tickets, res.TLS.ServerBytes)
		case rep.Config.TLSHandshakes:
			a += fmt.Sprintf(" (%d handshakes, all full, %.0f bytes from the server a connection)", res.TLS.Handshakes, res.TLS.ServerBytes)
		case res.TLS.Handshakes > 0:
			a += fmt.Sprintf(" (%d handshakes)", res.TLS.Handshakes)
		}
		arms = append(arms, a)
	}
	return fmt.Sprintf("- TLS 1.3 on the client side, %s, upstream plain; the clients agreed: %s\n", proxyTLSCert, strings.Join(arms, "; "))
}

// proxyProtocolTitle says what a report's protocol compares; a report
// without one (written before ProxySettings.Protocol) is a TCP one.
func proxyProtocolTitle(protocol string) string {
	switch protocol {
	case ProxyProtocolHTTP:
		return "HTTP/1.1 reverse proxies (keep-alive POSTs, echoed)"
	case ProxyProtocolH2:
		return "HTTP/2 clients (h2c, prior knowledge) under h2load through reverse proxies to an HTTP/1.1 upstream"
	case ProxyProtocolH2H2:
		return "HTTP/2 clients (h2c, prior knowledge) under h2load through reverse proxies to an HTTP/2 (h2c) upstream"
	}
	return "L4 TCP proxies (RPC echo)"
}

// ProxyArmsFlag lists the arms for a usage message: the default ones,
// then those run only when asked for.
func ProxyArmsFlag() string {
	return strings.Join(ProxyArms, ",") + " (the default), or also " + strings.Join(ProxyExtraArms, ",")
}
