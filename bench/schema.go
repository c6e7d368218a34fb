package bench

import "time"

// SchemaVersion names the layout of Report. It changes only when a field
// is removed or changes meaning; new fields may be added without a change.
// Version 2 took steal time out of the machine figures (MachineCPU's total
// and work, CPUSplit's busy share, SummaryRow's machine figures) and
// reports it as StealUSPerReq.
const SchemaVersion = "spindle-bench/2"

// SchemaVersion1 is the previous version, which ReadReport still reads:
// the same layout without the steal fields, its machine figures (total,
// work, busy percent) counting steal as busy.
const SchemaVersion1 = "spindle-bench/1"

// Report is the result of a benchmark run: `spindle bench --json` prints
// it, and bench-report/report.json holds it. docs/BENCH-SCHEMA.md describes
// it for readers who do not read Go. All latencies are in microseconds, all
// CPU figures per request are CPU-microseconds per verified reply.
type Report struct {
	// Schema is SchemaVersion.
	Schema string `json:"schema"`
	// Started is when the run started (UTC).
	Started time.Time `json:"started"`
	// Seconds is the run's wall-clock length.
	Seconds float64 `json:"seconds"`
	// Kind is "bench" for the default run and "sweep" for bench sweep.
	Kind string `json:"kind"`
	// Host describes the machine.
	Host Host `json:"host"`
	// Topology is "loopback" or "wire" (two network namespaces joined by a
	// veth pair with GRO on and TSO off).
	Topology string `json:"topology"`
	// Config is the run's configuration after defaults.
	Config RunSettings `json:"config"`
	// Arms lists every arm asked for, with the reason if it did not run.
	Arms []ArmInfo `json:"arms"`
	// Results has one entry per measurement, in the order they ran.
	Results []Result `json:"results"`
	// Summary has one row per arm and load point: medians over the
	// repetitions and their spread.
	Summary []SummaryRow `json:"summary"`
	// PairedRatios holds, for each reference arm (RunSettings.RatioTo),
	// load point and other arm, the other arm's server CPU per request and
	// p99 divided by the reference's repetition by repetition. Absent when
	// no reference arm ran.
	PairedRatios []PairedRatio `json:"paired_ratios,omitempty"`
	// ClientCeilingRPS estimates the load generator's capacity: the best
	// closed-loop achieved rate divided by the client CPUs it kept busy
	// (ClientCPUPercent/100 times the number of client CPUs), in requests
	// per second per client CPU. A figure near the arms' peaks means the
	// client, not the server, was measured.
	ClientCeilingRPS float64 `json:"client_ceiling_rps"`
	// Notes are caveats a reader must see (noisy host, skipped arms,
	// saturated client, …).
	Notes []string `json:"notes,omitempty"`
}

// Host describes the machine a report came from.
type Host struct {
	// Hostname is the machine's host name.
	Hostname string `json:"hostname"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel"`
	// CPUs is the number of online CPUs.
	CPUs int `json:"cpus"`
	// CPUModel is the first "model name" of /proc/cpuinfo.
	CPUModel string `json:"cpu_model"`
	// GoVersion is the Go toolchain that built the harness.
	GoVersion string `json:"go_version"`
	// TCPCongestion is the TCP congestion control the arms' sockets get:
	// the harness's network namespace's net.ipv4.tcp_congestion_control
	// (a namespace the wire topology makes starts with the same). Its
	// per-ACK work is in every arm's system time. "" if unread.
	TCPCongestion string `json:"tcp_congestion_control,omitempty"`
}

// RunSettings is the configuration a report was made with.
type RunSettings struct {
	// Conns is the number of client connections.
	Conns int `json:"conns"`
	// InFlight is the closed-loop requests in flight per connection.
	InFlight int `json:"in_flight"`
	// Payload is the RPC payload in bytes.
	Payload int `json:"payload_bytes"`
	// ComputeUS is the µs each server spins per request (Spin; a sweep's
	// measurements take theirs from SweepComputeUS).
	ComputeUS int `json:"compute_us"`
	// Loops is the number of server event loops (a sweep's measurements
	// take theirs from SweepLoops).
	Loops int `json:"loops"`
	// SweepLoops and SweepComputeUS are a sweep's grid: the loop counts
	// and compute µs it measured each arm at, every pair. Absent outside
	// a sweep.
	SweepLoops     []int `json:"sweep_loops,omitempty"`
	SweepComputeUS []int `json:"sweep_compute_us,omitempty"`
	// ServerCPUs and ClientCPUs are the CPUs the server process and the
	// client threads were pinned to.
	ServerCPUs []int `json:"server_cpus"`
	ClientCPUs []int `json:"client_cpus"`
	// ClientThreads is the number of client threads.
	ClientThreads int `json:"client_threads"`
	// ClientBlock is true when the client threads slept between events
	// instead of polling (--client-block).
	ClientBlock bool `json:"client_block,omitempty"`
	// Reps is the number of repetitions of each measurement.
	Reps int `json:"reps"`
	// WarmupSeconds and WindowSeconds are each measurement's dropped
	// warm-up and measured window.
	WarmupSeconds float64 `json:"warmup_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// Smoke, when present, says that the duration was too short for the
	// measurements, which took longer than it: the figures are a smoke
	// run's, not measurements.
	Smoke *Smoke `json:"smoke,omitempty"`
	// OpenFractions are the open-loop rates as fractions of the slowest
	// arm's median closed-loop peak.
	OpenFractions []float64 `json:"open_fractions"`
	// ServerRPS lists the wire topology's server-side receive steering
	// settings (--server-rps): CPU lists, or "none" for RPS off, each arm
	// measured under every one. Absent when the veth kept its defaults.
	ServerRPS []string `json:"server_rps,omitempty"`
	// RatioTo are the reference arms of the paired ratios (--ratio-to):
	// as given, or by default those of go-net, gnet and c-liburing that
	// ran. Absent when there are none.
	RatioTo []string `json:"ratio_to,omitempty"`
}

// ArmInfo is one arm of a run.
type ArmInfo struct {
	// Name is the arm's name.
	Name string `json:"name"`
	// Summary describes the arm.
	Summary string `json:"summary"`
	// Skipped, when not empty, says why the arm did not run.
	Skipped string `json:"skipped,omitempty"`
}

// Result is one measurement: one arm, one repetition, one load point.
type Result struct {
	// Arm is the arm's name; with server RPS settings, "ARM rps=ENTRY".
	Arm string `json:"arm"`
	// ServerRPS is the server veth's RPS setting this measurement ran
	// under (a CPU list or "none"); absent when the run set none.
	ServerRPS string `json:"server_rps,omitempty"`
	// Rep is the repetition, from 1.
	Rep int `json:"rep"`
	// Mode is "closed" (closed-loop peak) or "open" (fixed-rate).
	Mode string `json:"mode"`
	// Fraction is, in open loop, the offered rate as a fraction of the
	// slowest arm's peak; 0 in closed loop.
	Fraction float64 `json:"fraction,omitempty"`
	// ComputeUS and Loops are the server settings of this measurement
	// (they vary in a sweep).
	ComputeUS int `json:"compute_us"`
	Loops     int `json:"loops"`
	// OfferedRPS is the open-loop schedule's rate; 0 in closed loop.
	OfferedRPS float64 `json:"offered_rps"`
	// AchievedRPS is the verified replies received during the window per
	// second of the window: what the server answered. In open loop a
	// server that cannot keep up shows less than OfferedRPS (and the
	// report notes it); replies that come in the drain after the window
	// are not counted here, though their latencies are.
	AchievedRPS float64 `json:"achieved_rps"`
	// Requests is the number of verified replies received during the
	// window (to requests of the window or of the warm-up): with the
	// window, AchievedRPS. A per-request figure of the server or the
	// machine is divided by the replies received between its counter's
	// own two reads instead, which are not at the window's edges.
	Requests uint64 `json:"requests"`
	// Unanswered counts requests of the window still without a reply at
	// the end of the drain, in open loop with those never sent because
	// every connection had its maximum in flight or 1 MiB of requests its
	// socket had not taken (recorded in the latencies at a lower bound).
	Unanswered uint64 `json:"unanswered"`
	// LatencyClamped counts the latencies of Latency longer than a minute,
	// the histogram's highest trackable value, which count as a minute:
	// Latency.Max and the percentiles they reach are then lower bounds (a
	// note says so). Absent when there were none.
	LatencyClamped int64 `json:"latency_clamped,omitempty"`
	// LatencyCount is the number of latencies Latency is of: the
	// window's requests, answered or not. Where a tail percentile falls
	// among a measurement's ten slowest latencies, a note says so: it is
	// those few requests' latency, not a measured tail. Absent in reports
	// written before 2026-12-06.
	LatencyCount int64 `json:"latency_count,omitempty"`
	// Errors counts failed requests. Reply mismatches and connection
	// errors fail the whole run instead, so a report holds only 0 here.
	Errors uint64 `json:"errors"`
	// Latency are the percentiles of every request of the window (sent in
	// it, or in open loop due in it), answered in the window, in the drain,
	// or not at all (Unanswered), measured from the intended send time in
	// open loop and the actual send time in closed loop.
	Latency Percentiles `json:"latency"`
	// Spectrum is the latency percentile spectrum for plotting.
	Spectrum []SpectrumPoint `json:"spectrum"`
	// Server is the server process's CPU per request.
	Server ServerCPU `json:"server"`
	// Machine is machine-wide CPU per request from /proc/stat.
	Machine MachineCPU `json:"machine"`
	// ClientCPUPercent is the client threads' busy CPU, in percent of the
	// client CPUs they ran on (100 = every client CPU saturated, however
	// many threads shared them). The client polls instead of sleeping;
	// polls that found nothing are idle and not counted.
	ClientCPUPercent float64 `json:"client_cpu_percent"`
	// ClientSendLagP99US is, in open loop, the 99th percentile of how late
	// the client wrote requests relative to their intended send times; a
	// large value means the client (or its CPU) fell behind. 0 in closed
	// loop.
	ClientSendLagP99US float64 `json:"client_send_lag_p99_us"`
	// ClientSendLagP999US and ClientSendLagP9999US are, in open loop, the
	// send lag's 99.9th and 99.99th percentiles: a client that fell behind
	// for a few ms makes the tail latencies of those percentiles while its
	// p99 stays small, and a note says so. Absent in closed loop, and in
	// reports written before 2026-12-06.
	ClientSendLagP999US  float64 `json:"client_send_lag_p99_9_us,omitempty"`
	ClientSendLagP9999US float64 `json:"client_send_lag_p99_99_us,omitempty"`
	// ClientUSPerReq is the client's busy CPU-µs per request.
	ClientUSPerReq float64 `json:"client_us_per_req"`
}

// ServerCPU is the server process's accounting over a window.
type ServerCPU struct {
	// UserUSPerReq, SysUSPerReq and TotalUSPerReq are the server process's
	// user, system and total CPU-µs per request (getrusage RUSAGE_SELF).
	UserUSPerReq  float64 `json:"user_us_per_req"`
	SysUSPerReq   float64 `json:"sys_us_per_req"`
	TotalUSPerReq float64 `json:"total_us_per_req"`
	// CtxSwitchesPerReq is voluntary plus involuntary context switches of
	// the server process per request.
	CtxSwitchesPerReq float64 `json:"ctx_switches_per_req"`
	// KernelWaitsPerReq is, for spindle engine arms, the loops' waiting
	// system calls (io_uring_enter or epoll_wait, plus io_uring_enter calls
	// made only to flush a full submission queue) per request; 0 for arms
	// that do not count them.
	KernelWaitsPerReq float64 `json:"kernel_waits_per_req"`
	// WaitCPUUSPerReq is, for the busy-poll engine arms (uring-napi,
	// epoll-busypoll), the CPU-µs per request the loops spent inside their
	// waits: busy polling and the packet and socket work it runs there
	// (engine.Stats.WaitCPUNanos); 0 for other arms, and 0 where sockets
	// have no NAPI id (loopback), since those waits cannot poll.
	WaitCPUUSPerReq float64 `json:"wait_cpu_us_per_req"`
	// Threads is CPU per request of each server thread that ran in the
	// window and was alive at its end (schedstat run time): a thread that
	// exited in between (an io-wq worker, say) is not listed, though its
	// CPU is in the process's figures above, so the list can sum to less.
	Threads []ThreadCPU `json:"threads"`
}

// ThreadCPU is one server thread's share.
type ThreadCPU struct {
	// TID and Comm identify the thread.
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
	// USPerReq is the thread's on-CPU µs per request.
	USPerReq float64 `json:"us_per_req"`
	// CPU is the CPU the thread last ran on.
	CPU int `json:"cpu"`
}

// MachineCPU is machine-wide accounting over a window, from /proc/stat,
// /proc/softirqs and /proc/interrupts. /proc/stat counts in 10 ms ticks
// and, on kernels without CONFIG_IRQ_TIME_ACCOUNTING, samples irq and
// softirq time at the tick: short windows are coarse.
type MachineCPU struct {
	// TotalUSPerReq is busy CPU-µs per request over all CPUs: user, nice,
	// system, irq and softirq time. Idle, iowait and steal are not busy.
	TotalUSPerReq float64 `json:"total_us_per_req"`
	// UserUSPerReq, SysUSPerReq, IRQUSPerReq and SoftirqUSPerReq split
	// TotalUSPerReq and add up to it (user includes nice, and guest time,
	// which the kernel counts inside user and nice).
	UserUSPerReq    float64 `json:"user_us_per_req"`
	SysUSPerReq     float64 `json:"sys_us_per_req"`
	IRQUSPerReq     float64 `json:"irq_us_per_req"`
	SoftirqUSPerReq float64 `json:"softirq_us_per_req"`
	// StealUSPerReq is steal time per request over all CPUs, in CPU-µs:
	// time the hypervisor ran something else (another guest, the host)
	// while this guest's CPU had work (/proc/stat's steal). It is not
	// work of this machine and is in neither TotalUSPerReq nor
	// WorkUSPerReq; a large value means the figures come from a VM whose
	// neighbours were busy. 0 on bare metal.
	StealUSPerReq float64 `json:"steal_us_per_req"`
	// ClientPollUSPerReq is the part of TotalUSPerReq that the client
	// spent polling without finding work (its threads poll instead of
	// sleeping unless --client-block): busy in /proc/stat, but not work.
	ClientPollUSPerReq float64 `json:"client_poll_us_per_req"`
	// WorkUSPerReq is TotalUSPerReq minus ClientPollUSPerReq: every CPU's
	// busy time except the client's empty polls (server, client work,
	// kernel threads, softirq, and whatever else ran on the machine).
	WorkUSPerReq float64 `json:"work_us_per_req"`
	// PerCPU splits the same per CPU.
	PerCPU []CPUSplit `json:"per_cpu"`
	// CtxSwitchesPerReq is machine-wide context switches per request.
	CtxSwitchesPerReq float64 `json:"ctx_switches_per_req"`
	// ServerCPUInterruptsPerReq is all interrupts (device and local:
	// timer, IPIs) on the server's CPUs per request.
	ServerCPUInterruptsPerReq float64 `json:"server_cpu_interrupts_per_req"`
	// ServerCPUDeviceIRQsPerReq is device interrupts on the server's CPUs
	// per request.
	ServerCPUDeviceIRQsPerReq float64 `json:"server_cpu_device_irqs_per_req"`
	// ServerCPUNetRxPerReq is NET_RX softirqs on the server's CPUs per
	// request.
	ServerCPUNetRxPerReq float64 `json:"server_cpu_net_rx_per_req"`
}

// CPUSplit is one CPU's busy time per request, split.
type CPUSplit struct {
	// CPU is the CPU number.
	CPU int `json:"cpu"`
	// Role is "server", "client", "both" or "" (neither).
	Role string `json:"role"`
	// BusyPercent is the CPU's busy share of the window: user, nice,
	// system, irq and softirq time, not idle, iowait or steal.
	BusyPercent float64 `json:"busy_percent"`
	// UserUSPerReq, SysUSPerReq, IRQUSPerReq, SoftirqUSPerReq and
	// StealUSPerReq are CPU-µs per request on this CPU, split like
	// MachineCPU's.
	UserUSPerReq    float64 `json:"user_us_per_req"`
	SysUSPerReq     float64 `json:"sys_us_per_req"`
	IRQUSPerReq     float64 `json:"irq_us_per_req"`
	SoftirqUSPerReq float64 `json:"softirq_us_per_req"`
	StealUSPerReq   float64 `json:"steal_us_per_req"`
}

// SummaryRow is one arm at one load point over the repetitions: the
// median of each figure and, for the main ones, the spread (min and max).
type SummaryRow struct {
	// Arm, Mode and Fraction identify the load point like in Result.
	Arm      string  `json:"arm"`
	Mode     string  `json:"mode"`
	Fraction float64 `json:"fraction,omitempty"`
	// ComputeUS and Loops are the server settings.
	ComputeUS int `json:"compute_us"`
	Loops     int `json:"loops"`
	// Reps is the number of repetitions summarized.
	Reps int `json:"reps"`
	// OfferedRPS is the open-loop rate (0 in closed loop).
	OfferedRPS float64 `json:"offered_rps"`
	// AchievedRPS, P50, P99, P999, ServerUSPerReq and MachineUSPerReq are
	// medians with their spread.
	AchievedRPS     Spread `json:"achieved_rps"`
	P50             Spread `json:"p50_us"`
	P90             Spread `json:"p90_us"`
	P99             Spread `json:"p99_us"`
	P999            Spread `json:"p99_9_us"`
	P9999           Spread `json:"p99_99_us"`
	Max             Spread `json:"max_us"`
	ServerUSPerReq  Spread `json:"server_us_per_req"`
	MachineUSPerReq Spread `json:"machine_us_per_req"`
	// MachineWorkUSPerReq is the median and spread of the machine-wide
	// CPU without the client's empty polls (MachineCPU.WorkUSPerReq).
	MachineWorkUSPerReq Spread `json:"machine_work_us_per_req"`
	// SoftirqUSPerReq is the median machine-wide softirq CPU-µs per
	// request.
	SoftirqUSPerReq float64 `json:"softirq_us_per_req"`
	// StealUSPerReq is the median machine-wide steal CPU-µs per request
	// (MachineCPU.StealUSPerReq), which MachineUSPerReq and
	// MachineWorkUSPerReq leave out.
	StealUSPerReq float64 `json:"steal_us_per_req"`
	// ClientCPUPercent is the median client busy CPU.
	ClientCPUPercent float64 `json:"client_cpu_percent"`
	// ClientSendLagP99US is the median open-loop send lag p99.
	ClientSendLagP99US float64 `json:"client_send_lag_p99_us"`
	// Unanswered is the total over the repetitions.
	Unanswered uint64 `json:"unanswered"`
}

// Spread is a median with the smallest and largest value it summarizes.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// PairedRatio is one arm's server CPU per request and p99 divided by a
// reference arm's at one load point, repetition by repetition: the two
// measurements of a repetition were made close together (the arms
// alternate within it), so a drift of the machine's speed over the run
// moves both, and their ratio is steadier than the ratio of the two arms'
// medians.
type PairedRatio struct {
	// Ref is the reference arm (the denominator), Arm the other (the
	// numerator); with server RPS settings both are "ARM rps=SETTING" of
	// the same setting.
	Ref string `json:"ref"`
	Arm string `json:"arm"`
	// Mode, Fraction, ComputeUS and Loops identify the load point as in
	// SummaryRow.
	Mode      string  `json:"mode"`
	Fraction  float64 `json:"fraction,omitempty"`
	ComputeUS int     `json:"compute_us"`
	Loops     int     `json:"loops"`
	// Pairs is the number of repetitions in which both arms were measured
	// with replies and the reference's figures were above zero: what the
	// ratios are taken over.
	Pairs int `json:"pairs"`
	// ServerUSPerReq is the median and spread over the pairs of
	// Arm's server total_us_per_req over Ref's; ServerAtMost1 is how many
	// of the pairs were 1 or below (Arm as cheap as Ref or cheaper).
	ServerUSPerReq Spread `json:"server_us_per_req"`
	ServerAtMost1  int    `json:"server_us_per_req_at_most_1"`
	// P99 and P99AtMost1 are the same for the latency's p99.
	P99        Spread `json:"p99_us"`
	P99AtMost1 int    `json:"p99_us_at_most_1"`
	// ByRep lists each pair's ratios.
	ByRep []RepRatio `json:"by_rep"`
}

// RepRatio is one repetition's ratios of a PairedRatio.
type RepRatio struct {
	Rep            int     `json:"rep"`
	ServerUSPerReq float64 `json:"server_us_per_req"`
	P99            float64 `json:"p99_us"`
}
