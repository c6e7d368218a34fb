// Package bench is spindle's measurement harness: a load generator, the
// benchmark servers ("arms"), HDR latency histograms, CPU accounting from
// getrusage and /proc, network topologies, and reports.
//
// It follows the measuring rules of spindle's design:
//
//   - Arms are compared in one run, alternated over several repetitions;
//     reports give medians and the spread, never a single absolute figure
//     from a shared machine.
//   - The arms' order is balanced: at each load point the given order in
//     odd repetitions and the reverse in even ones (ABC CBA ABC …). A VM's
//     speed drifts by tens of percent over a run; in a fixed order the arm
//     measured last in every repetition gets the same side of a drift that
//     goes one way. Reversed, an arm's two positions in a pair of
//     repetitions add up to the same for every arm, so a drift linear over
//     the pair adds the same to each arm's two measurements. The order is
//     not random: a random one cancels a drift only on average, which three
//     to five repetitions are far from (one arm last in every repetition
//     stays likely), and two runs would not be measured alike. An odd
//     number of repetitions leaves the last unpaired; what drift remains
//     is in the spread, and in the paired ratios below.
//   - Arms are compared by paired ratios too (Report.PairedRatios): each
//     arm's server CPU per request and p99 divided by a reference arm's
//     (go-net, gnet and c-liburing by default) of the same repetition at
//     the same load point, the two measured close together, with the
//     median, min–max and how many were 1 or below. Where an arm's
//     achieved rate varied by more than 25 % between repetitions, a note
//     says the machine drifted and that those ratios are the ones to
//     trust, over ratios of each arm's medians. bench proxy and bench
//     http2 have them too (ArmsReport.PairedRatios): the proxies', the
//     upstream's and their summed CPU per request and p99 to haproxy's and
//     nginx's, the HTTP/2 servers' CPU per request and p99 to
//     go-net-http's and nginx's, by default.
//   - Open-loop load runs on a fixed schedule and measures each request's
//     latency from its intended send time, so a stalled server raises the
//     measured tail instead of silently slowing the client (no coordinated
//     omission). Closed-loop load (N connections × K requests in flight) is
//     the second mode and finds an arm's peak throughput.
//   - Every reply is verified byte for byte; one mismatch fails the run.
//   - CPU per request is read two ways together: the server process
//     (getrusage and per-thread run time of the server child) and
//     machine-wide (/proc/stat with irq and softirq split out per CPU), plus
//     context switches, interrupts and NET_RX softirqs per request on the
//     server's CPUs, and the client's own CPU so a saturated client is
//     visible. Each counter's change is divided by the replies the client
//     received between that counter's own two reads (the client counts
//     its replies by the millisecond they came in), not by the window's
//     rate: a read answered late, after the load stopped, lengthens its
//     interval without adding requests to it.
//   - Each server runs alone in a child process pinned to the server CPUs;
//     the client runs on its own pinned, locked OS thread driving raw epoll.
//
// Arms plug in by name through RegisterArm. Arms built into this package are
// "go-net" (a goroutine per connection on Go's netpoller); the gnet v2 peer
// lives in the nested module bench/peers and is built by the harness; the
// spindle engine arms register themselves when package engine is present.
// "c-liburing" is the reference for the engine's io_uring backend: a plain,
// single-threaded C liburing echo server (bench/cpeer/echo.c, embedded in
// this package) that the harness compiles with cc at run time and starts as
// its server child; it answers the same control protocol, so its CPU is
// read the same way. Without cc or liburing-dev it is skipped, with the
// package to install.
//
// RunProxy (`spindle bench proxy`) compares L4 proxies in the same way:
// `spindle proxy` on the uring and epoll backends, HAProxy (mode tcp, one
// thread) and nginx (stream module, one process) from the distribution,
// each from a generated config, and "direct" (no proxy) as the floor, all
// in front of one upstream echo server, closed loop. Each proxy is started
// fresh per measurement, pinned to the proxy CPUs from its first
// instruction, as the leader of its own process group; its CPU per request
// is the run time of every thread of every process of that group, the
// upstream's is counted the same way, and beside them the machine's (every
// CPU's busy time from /proc/stat, softirq and steal split out and split
// per CPU, each CPU named by the processes pinned to it, as bench's
// machine figures: MachineWork) holds the softirq work the kernel did for
// them elsewhere, with interrupts and NET_RX softirqs per request on the
// proxy's CPUs. A proxy that is not installed is skipped with the package
// to install.
//
// RunHTTP2 (`spindle bench http2`) compares HTTP/2 servers (h2c with prior
// knowledge) the same way, each started fresh per measurement and pinned
// to the server CPUs: the engine on the uring and epoll backends with
// internal/h2's Server (one loop), Go's net/http with unencrypted HTTP/2,
// and nginx's http2 module. The load is h2load, pinned to the client CPUs,
// closed loop at each streams-per-connection value; its summary and
// per-request log are parsed (ParseH2loadSummary, ParseH2loadLog: the
// latency percentiles come from the log through the harness's histogram),
// and a request that failed, errored or was answered other than 2xx fails
// the run; nghttp2 checks each body's length against its content-length,
// not its bytes, so a GET's reply is checked whole (status, content-type,
// content-length, body bytes) before and after each load. The CPU, the
// server's and the machine's (split per CPU as RunProxy's, with interrupts
// and NET_RX softirqs on the server's CPUs), is read at the main
// duration's edges, which h2load writes on its stdout, and divided by the
// responses that ended between its reads (from h2load's log).
//
// The wire protocol is a length-prefixed echo: a 4-byte big-endian payload
// length followed by the payload, echoed back unchanged. Every server except
// c-liburing also speaks HTTP/1.1 on the same port (detected per connection
// from the first byte), so wrk, h2load or ab can be pointed at those arms:
// requests are parsed by internal/h1, as the proxy parses them (a
// malformed one closes the connection unanswered), a request's body,
// Content-Length or chunked, is echoed, and a request that does not keep
// its connection alive (HTTP/1.0 without "Connection: keep-alive", or
// "Connection: close") is answered and the connection closed. The C server
// closes a connection that sends HTTP.
//
// The load generator speaks either (LoadConfig.Protocol): the RPC echo, or
// HTTP/1.1 keep-alive POSTs whose body is the RPC payload (so a reply
// delivered to the wrong request or connection fails verification, through
// a proxy too), each to be answered with a 200 and that body, framed by
// Content-Length. Both pipeline the same way, are accounted alike and fail
// the run on a wrong reply or a closed connection ("Connection: close"
// included).
package bench
