package bench

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"
)

// ErrNotSupported is returned on systems other than Linux, where the load
// generator, servers and topologies are not implemented.
var ErrNotSupported = errors.New("bench: not supported on this system")

// LoadConfig configures one run of the load generator. The zero value of a
// field selects its default.
type LoadConfig struct {
	// Addr is the server's host:port.
	Addr string
	// Conns is the number of connections, spread over the threads.
	// Default 16.
	Conns int
	// InFlight is the closed-loop number of requests outstanding per
	// connection (pipelining depth). Default 1. Ignored in open loop.
	InFlight int
	// Rate is the open-loop rate in requests per second over all
	// connections. 0 selects closed loop.
	Rate float64
	// Protocol is ProtocolRPC (the default, "") or ProtocolHTTP: HTTP/1.1
	// keep-alive POSTs whose body is the payload, each answered with it
	// (see ProtocolHTTP). Both pipeline InFlight requests per connection
	// in closed loop, up to MaxOutstanding in open loop.
	Protocol string
	// Host is the HTTP requests' Host field. Default Addr.
	Host string
	// Payload is the RPC payload size in bytes, and the HTTP request and
	// response body size. Default DefaultPayload, minimum MinPayload.
	Payload int
	// Warmup is run before the measured window and dropped. Default 200 ms.
	Warmup time.Duration
	// Duration is the measured window. Default 1 s.
	Duration time.Duration
	// Threads is the number of client threads, each a locked OS thread
	// with its own epoll instance and histogram. Default 1.
	Threads int
	// CPUs pins thread i to CPUs[i%len(CPUs)]. Nil leaves threads unpinned.
	CPUs []int
	// PinProcess pins every thread of the calling process, the Go
	// runtime's included, to CPUs for the run (the load threads then
	// narrow theirs to one CPU each), and gives every thread the calling
	// thread's mask back at the end; GOMAXPROCS stays what it was. For a
	// load generator that is a process of its own (`spindle bench
	// client`): its runtime's threads would otherwise run on any CPU, the
	// server's included. It needs CPUs, and nothing else in the process
	// may change thread affinities during the run. The bench harness,
	// pinned already, leaves it false.
	PinProcess bool
	// NetNS is the path of a network namespace file (such as
	// /var/run/netns/NAME) to open the connections from; "" uses the
	// caller's namespace.
	NetNS string
	// Drain is how long a run waits after the window for the replies to
	// the window's requests still outstanding (closed loop sends nothing
	// new meanwhile). Default 1 s.
	Drain time.Duration
	// Window, if set, is called once from RunLoad's goroutine, before the
	// load starts, with the measured window's start and end, so that the
	// caller can take resource snapshots at the window's edges.
	Window func(start, end time.Time)
	// Block makes client threads sleep in epoll_wait between events (and,
	// in open loop, on a timerfd until the next send) instead of polling
	// without sleeping. Polling is the default: it keeps the client's own
	// wake-up latency (about 10 µs on a VM without cpuidle) out of the
	// measured latency and the open-loop schedule precise. Time spent in
	// polls that found nothing is reported as ClientIdle, not as busy CPU.
	Block bool
	// TLS, when set, makes every connection a TLS client with this
	// config (crypto/tls): each handshakes in the run's set-up, before
	// the load starts (within 10 s), and the requests and replies are
	// the protocol's inside the TLS records. Closed loop only. Nil:
	// plain TCP.
	TLS *tls.Config
	// MaxOutstanding caps the open-loop requests in flight per connection;
	// requests due while every connection is at the cap, or holds 1 MiB of
	// requests its socket has not taken yet (a server that stopped
	// reading), wait in the client unbuilt and still count from their
	// intended send time. Default 1024.
	MaxOutstanding int
}

// MaxRate is the highest open-loop rate a load run takes: well above what
// one client thread can send, and low enough that the accounting of the
// requests a run could not send stays bounded.
const MaxRate = 1e7

func (c LoadConfig) withDefaults() (LoadConfig, error) {
	if c.Addr == "" {
		return c, errors.New("bench: load: no server address")
	}
	// Zero means the default; below zero is a mistake, not a default.
	if c.Conns < 0 || c.InFlight < 0 || c.Threads < 0 || c.Warmup < 0 || c.Duration < 0 {
		return c, fmt.Errorf("bench: load: negative setting (conns %d, inflight %d, threads %d, warm-up %v, duration %v)", c.Conns, c.InFlight, c.Threads, c.Warmup, c.Duration)
	}
	for _, cpu := range c.CPUs {
		if cpu < 0 {
			return c, fmt.Errorf("bench: load: negative CPU %d", cpu)
		}
	}
	if c.PinProcess && len(c.CPUs) == 0 {
		return c, errors.New("bench: load: PinProcess without CPUs to pin to")
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolRPC
	case ProtocolRPC, ProtocolHTTP:
	default:
		return c, fmt.Errorf("bench: load: protocol %q, want %s or %s", c.Protocol, ProtocolRPC, ProtocolHTTP)
	}
	if c.Host == "" {
		c.Host = c.Addr
	}
	if c.Protocol == ProtocolHTTP && !validHost(c.Host) {
		return c, fmt.Errorf("bench: load: HTTP host %q is not host[:port] (RFC 9110 7.2)", c.Host)
	}
	if c.Conns <= 0 {
		c.Conns = 16
	}
	if c.InFlight <= 0 {
		c.InFlight = 1
	}
	var err error
	if c.Payload, err = payloadDefault("bench: load", c.Payload, DefaultPayload); err != nil {
		return c, err
	}
	if c.Warmup == 0 {
		c.Warmup = 200 * time.Millisecond
	}
	if c.Duration <= 0 {
		c.Duration = time.Second
	}
	if c.Threads <= 0 {
		c.Threads = 1
	}
	if c.Threads > c.Conns {
		c.Threads = c.Conns
	}
	if c.Conns/c.Threads >= 1<<16 {
		return c, fmt.Errorf("bench: load: %d connections per thread; at most 65535", c.Conns/c.Threads)
	}
	if c.Drain <= 0 {
		c.Drain = time.Second
	}
	if c.MaxOutstanding <= 0 {
		c.MaxOutstanding = 1024
	}
	if c.Rate < 0 || c.Rate > MaxRate || math.IsNaN(c.Rate) {
		return c, fmt.Errorf("bench: load: rate %v outside 0..%v", c.Rate, MaxRate)
	}
	if c.TLS != nil && c.Rate > 0 {
		// The open loop's send lag and its cap on bytes not yet written
		// count the plaintext, which TLS encrypts before the socket takes it.
		return c, errors.New("bench: load: TLS is closed loop only")
	}
	return c, nil
}

// LoadResult is what one load run measured, over its measured window only.
type LoadResult struct {
	// Hist holds the latencies of the window's requests, merged over the
	// threads. Open loop measures from each request's intended send time;
	// closed loop from its actual send time.
	Hist *Histogram
	// Replies is the number of verified replies received during the
	// window, whatever request they answer (one sent in the warm-up
	// included): what the server delivered in the window. A reply to a
	// request of the window that arrives during the drain is not one.
	Replies uint64
	// Answered is the number of requests of the window (sent in it, or in
	// open loop due in it) that got their verified reply by the end of
	// the drain. Hist holds Answered + Unanswered latencies.
	Answered uint64
	// Sent is the number of requests of the window written to the server.
	Sent uint64
	// Scheduled is, in open loop, the number of requests whose intended
	// send time fell in the window (the offered load), sent or not; 0 in
	// closed loop.
	Scheduled uint64
	// Unanswered counts requests of the window without a reply when the
	// drain ended, in open loop with those never sent because every
	// connection was at MaxOutstanding or at its 1 MiB of requests not yet
	// written (see MaxOutstanding). They are recorded in Hist at the
	// time they had waited by then (a lower bound).
	Unanswered uint64
	// Window is the length of the measured window.
	Window time.Duration
	// Rate is, in open loop, the rate offered (LoadConfig.Rate); 0 in
	// closed loop. Drain is how long the run waited after the window for
	// its requests' replies (LoadConfig.Drain).
	Rate  float64
	Drain time.Duration
	// ClientUser and ClientSys are the client threads' CPU time during the
	// window (getrusage RUSAGE_THREAD), summed over threads.
	ClientUser, ClientSys time.Duration
	// PeakInFlight is, in open loop, the most requests in flight on one
	// connection, counted as each request of the window was sent: a
	// client that keeps its schedule while the server does not answer
	// piles up the requests due meanwhile (at most MaxOutstanding), however
	// late it gets the CPU to send them; one that waits for replies to
	// send has one. 0 in closed loop.
	PeakInFlight int
	// SendLag is, in open loop, how late each request of the window was
	// written relative to its intended send time, up to the write that
	// carried its last byte: a client that keeps its schedule has a lag of
	// a few µs, one that stops sending while the server stalls (or whose
	// requests wait in its buffer while the server does not read) has a
	// lag as long as the stall. A request still unwritten when the run
	// ends, in the client's buffer or never sent (see Unanswered), counts
	// the time it had waited by then, a lower bound: SendLag holds a lag
	// for each latency of Hist. Nil in closed loop.
	SendLag *Histogram
	// ClientIdle is the time the client threads spent in polls that found
	// nothing to do (0 with Block), summed over threads.
	ClientIdle time.Duration
	// Threads is the number of client threads that ran.
	Threads int
	// CPUs is the number of CPUs they ran on (clientCPUCount).
	CPUs int
	// TLS is what the connections' TLS handshakes agreed, with
	// LoadConfig.TLS; nil without.
	TLS *LoadTLS
	// times are when the replies came, the whole run's (warm-up and
	// drain included), so that a counter read at other times than the
	// window's edges is divided by the replies between its reads.
	times replyTimes
}

// rate is the run's request rate for per-request figures (windowRate).
func (r *LoadResult) rate() windowRate {
	return windowRate{replies: r.Replies, window: r.Window, times: r.times}
}

// LoadTLS is what a load run's TLS handshakes agreed (LoadConfig.TLS).
type LoadTLS struct {
	// Handshakes is the number of connections whose handshake completed:
	// every connection of the run.
	Handshakes int
	// Version (tls.VersionName: "TLS 1.3"), CipherSuite
	// (tls.CipherSuiteName) and ALPN (the protocol negotiated, "" for
	// none) are the connections' values; where they differ, the distinct
	// values in order, separated by ", ".
	Version, CipherSuite, ALPN string
}

// clientCPUCount is the number of CPUs threads client threads run on when
// thread i is pinned to cpus[i%len(cpus)]; unpinned (no cpus), at most one
// per thread and no more than the machine has.
func clientCPUCount(threads int, cpus []int) int {
	if len(cpus) == 0 {
		return min(threads, runtime.NumCPU())
	}
	seen := map[int]bool{}
	for i := range threads {
		seen[cpus[i%len(cpus)]] = true
	}
	return len(seen)
}

// Throughput is the verified replies received in the window per second of
// the window: an open-loop server that cannot keep up shows a rate below
// the offered one, however many late replies come in the drain. Any
// goroutine.
func (r *LoadResult) Throughput() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Replies) / r.Window.Seconds()
}

// ClientCPUPercent is the client's busy CPU during the window (its CPU
// time minus idle polling) as a percent of the CPUs its threads ran on: 100
// means the client CPUs were saturated, however many threads shared them.
// Any goroutine.
func (r *LoadResult) ClientCPUPercent() float64 {
	cpus := r.CPUs
	if cpus == 0 {
		cpus = r.Threads
	}
	if r.Window <= 0 || cpus == 0 {
		return 0
	}
	return 100 * float64(r.ClientBusy()) / float64(r.Window) / float64(cpus)
}

// ClientBusy is the client threads' CPU time minus idle polling. Any goroutine.
func (r *LoadResult) ClientBusy() time.Duration {
	return max(r.ClientUser+r.ClientSys-r.ClientIdle, 0)
}
