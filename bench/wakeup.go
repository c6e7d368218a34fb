package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// WakeupSchema names the layout of WakeupReport. Version 2 took steal
// time out of WakeupResult.ReaderCPUBusyPercent and reports it as
// ReaderCPUStealPercent; in version 1 the busy share counted steal.
const WakeupSchema = "spindle-wakeup/2"

// Wake-up modes: how the reader waits for data.
const (
	// WakeBlock sleeps in a blocking read(2).
	WakeBlock = "block"
	// WakeSpin polls a non-blocking socket with read(2) in a loop.
	WakeSpin = "spin"
	// WakeBusyPoll sleeps in a blocking read(2) on a socket with
	// SO_BUSY_POLL set to cover the whole interval, so the kernel
	// busy-polls the device's NAPI instance instead of sleeping. Sockets
	// without a NAPI id (loopback) cannot busy-poll and behave as block.
	WakeBusyPoll = "busy-poll"
	// WakeURing sleeps in io_uring_enter(GETEVENTS) on a ring with
	// SINGLE_ISSUER|DEFER_TASKRUN waiting for a RECV completion.
	WakeURing = "uring"
	// WakeURingNAPI is WakeURing with IORING_REGISTER_NAPI busy polling
	// covering the interval (no effect without NAPI ids).
	WakeURingNAPI = "uring-napi"
)

// WakeupModes lists the modes in report order.
var WakeupModes = []string{WakeBlock, WakeSpin, WakeBusyPoll, WakeURing, WakeURingNAPI}

// CheckWakeupModes returns nil when every one of modes is one of
// WakeupModes, else an error naming the first that is not and those.
func CheckWakeupModes(modes []string) error {
	for _, m := range modes {
		if !slices.Contains(WakeupModes, m) {
			return fmt.Errorf("bench: unknown wake-up mode %q (have %v)", m, WakeupModes)
		}
	}
	return nil
}

// WakeupConfig configures the wake-up experiment (`spindle wakeup`). The
// zero value of a field selects its default.
type WakeupConfig struct {
	// Modes to measure, in order. Default WakeupModes.
	Modes []string
	// Interval between writes. Default 50 ms.
	Interval time.Duration
	// Samples measured per mode, after two dropped warm-up writes.
	// Default 60.
	Samples int
	// ReaderCPU pins the reader thread. Default 0.
	ReaderCPU int
	// WriterCPU pins the writer thread on *WriterCPU (CPU 0 included,
	// e.g. new(0)). Nil selects the default: the first CPU the process
	// may run on other than ReaderCPU (CPU 1 with the reader on CPU 0,
	// else CPU 0, where those are allowed), or ReaderCPU where it is the
	// only one.
	WriterCPU *int
	// Topology is "loopback" (default) or "wire"; with wire the reader is
	// in the server namespace and the writer in the client namespace.
	Topology string
	// Tag makes wire topology names unique. Default: the process id.
	Tag string
	// Progress receives one line per mode; nil discards.
	Progress io.Writer
}

// WakeupResult is one mode's measurement.
type WakeupResult struct {
	// Mode is the wait mode.
	Mode string `json:"mode"`
	// Samples is the number of wake-ups measured.
	Samples int `json:"samples"`
	// Latency is the time from just before the writer's write(2) to just
	// after the reader's read returned, in µs.
	Latency Percentiles `json:"latency"`
	// ReaderCPUPercent is the reader thread's CPU use over the mode's run,
	// in percent of one CPU (getrusage RUSAGE_THREAD).
	ReaderCPUPercent float64 `json:"reader_cpu_percent"`
	// ReaderCPUUSPerWake is the reader thread's CPU-µs per wake-up.
	ReaderCPUUSPerWake float64 `json:"reader_cpu_us_per_wake"`
	// ReaderCPUBusyPercent is the reader CPU's machine-wide busy share
	// over the mode's run, from /proc/stat: user, nice, system, irq and
	// softirq time, whoever ran it; not idle, iowait or steal.
	ReaderCPUBusyPercent float64 `json:"reader_cpu_busy_percent"`
	// ReaderCPUStealPercent is the reader CPU's steal share over the
	// mode's run: time the hypervisor ran something else (another guest,
	// the host) while the CPU had work (/proc/stat's steal), which
	// ReaderCPUBusyPercent leaves out. 0 on bare metal.
	ReaderCPUStealPercent float64 `json:"reader_cpu_steal_percent"`
	// Skipped, when set, says why the mode did not run.
	Skipped string `json:"skipped,omitempty"`
}

// WakeupReport is the result of `spindle wakeup`.
type WakeupReport struct {
	// Schema is WakeupSchema.
	Schema string `json:"schema"`
	// Started is when the run started (UTC).
	Started time.Time `json:"started"`
	// Host describes the machine.
	Host Host `json:"host"`
	// Topology is "loopback" or "wire".
	Topology string `json:"topology"`
	// IntervalMS is the time between writes.
	IntervalMS float64 `json:"interval_ms"`
	// ReaderCPU and WriterCPU are the CPUs the reader and writer were
	// pinned to.
	ReaderCPU int `json:"reader_cpu"`
	WriterCPU int `json:"writer_cpu"`
	// Results has one entry per mode.
	Results []WakeupResult `json:"results"`
	// Notes are caveats.
	Notes []string `json:"notes,omitempty"`
}

// WriteWakeupTable prints rep as a plain-text table.
func WriteWakeupTable(w io.Writer, rep *WakeupReport) {
	// %g: an interval below a millisecond, or not a whole number of them,
	// is printed as it is (0.25 ms), not rounded to whole milliseconds.
	fmt.Fprintf(w, "\nwake-up latency, %s topology, a write every %g ms, reader CPU %d, writer CPU %d\n",
		rep.Topology, rep.IntervalMS, rep.ReaderCPU, rep.WriterCPU)
	fmt.Fprintf(w, "%-11s %7s %9s %9s %9s %9s %11s %13s %12s %7s\n", "mode", "samples", "p50 µs", "p90 µs", "p99 µs", "max µs", "reader CPU%", "reader µs/wake", "CPU busy%", "steal%")
	for _, r := range rep.Results {
		if r.Skipped != "" {
			fmt.Fprintf(w, "%-11s skipped: %s\n", r.Mode, r.Skipped)
			continue
		}
		fmt.Fprintf(w, "%-11s %7d %9.1f %9.1f %9.1f %9.1f %11.1f %13.1f %12.1f %7.1f\n", r.Mode, r.Samples, r.Latency.P50, r.Latency.P90,
			r.Latency.P99, r.Latency.Max, r.ReaderCPUPercent, r.ReaderCPUUSPerWake, r.ReaderCPUBusyPercent, r.ReaderCPUStealPercent)
	}
	writeTableNotes(w, rep.Notes)
}

// fillReaderCPU sets r's machine-wide figures for the reader's CPU from
// /proc/stat read at the start (s0) and end (s1) of a run of length wall;
// it leaves them 0 where a read failed or the CPU is missing.
func (r *WakeupResult) fillReaderCPU(s0, s1 *topo.Stat, cpu int, wall time.Duration) {
	if s0 == nil || s1 == nil || wall <= 0 {
		return
	}
	c0, ok0 := s0.CPU[cpu]
	c1, ok1 := s1.CPU[cpu]
	if !ok0 || !ok1 {
		return
	}
	d := c1.Sub(c0)
	pct := func(ticks uint64) float64 { return 100 * float64(ticks) * ClockTick / float64(wall) }
	r.ReaderCPUBusyPercent = pct(workTicks(d))
	r.ReaderCPUStealPercent = pct(d.Steal)
}

// wakeupStealNote returns a note naming the modes whose reader CPU's steal
// reached stealShare of its busy plus steal time, or "" if none did.
func wakeupStealNote(results []WakeupResult) string {
	var modes []string
	for _, r := range results {
		if all := r.ReaderCPUBusyPercent + r.ReaderCPUStealPercent; r.Skipped == "" && r.ReaderCPUStealPercent > 0 && r.ReaderCPUStealPercent >= stealShare*all {
			modes = append(modes, fmt.Sprintf("%s %.0f%%", r.Mode, 100*r.ReaderCPUStealPercent/all))
		}
	}
	if len(modes) == 0 {
		return ""
	}
	return fmt.Sprintf("the hypervisor ran something else while the reader's CPU had work (steal, in percent of its busy plus steal time: %s): a VM with busy neighbours; CPU busy%% leaves steal out, but the latencies include its pauses", strings.Join(modes, ", "))
}

// wakeupTickNote returns a note when a mode's run (samples × interval) is
// too short for /proc/stat's CPU busy and steal shares, which count whole
// clock ticks (ClockTick, 10 ms): one tick more or less is more than 2 % of
// a run under half a second, and a 25 ms run read 118 % busy. "" when runs
// are long enough. The reader's own CPU (getrusage) is exact.
func wakeupTickNote(run time.Duration) string {
	if run <= 0 {
		return ""
	}
	tick := time.Duration(ClockTick)
	if err := float64(tick) / float64(run); err > 0.02 {
		return fmt.Sprintf("each mode ran %v (samples × interval): CPU busy%% and steal%% count /proc/stat's %v ticks, ±%.0f%% at this length (reader CPU%% is exact); use more samples or a longer interval", run.Round(time.Millisecond), tick, 100*err)
	}
	return ""
}
