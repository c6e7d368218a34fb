package bench

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spindlenet/spindle/topo"
)

// ClockTick is the unit of the time fields of /proc/stat and
// /proc/<pid>/stat: USER_HZ, which Linux fixes at 100 on every architecture
// Go supports.
const ClockTick = 10_000_000 // ns

var errProcFormat = errors.New("bench: unexpected /proc format")

// Softirqs maps a softirq name (NET_RX, TIMER, …) to its per-CPU counts
// from /proc/softirqs, indexed by CPU number.
type Softirqs map[string][]uint64

// ParseSoftirqs parses the contents of /proc/softirqs with
// topo.ParseSoftirqs and indexes each row by CPU number.
func ParseSoftirqs(b []byte) (Softirqs, error) {
	t, err := topo.ParseSoftirqs(b)
	if err != nil {
		return nil, err
	}
	s := Softirqs{}
	for name, counts := range t.Counts {
		s[name] = addByCPU(make([]uint64, slices.Max(t.CPUs)+1), t.CPUs, counts)
	}
	return s, nil
}

// addByCPU adds counts, one per column, into dst indexed by the columns'
// CPU numbers, and returns dst.
func addByCPU(dst []uint64, cpus []int, counts []uint64) []uint64 {
	for i, v := range counts {
		dst[cpus[i]] += v
	}
	return dst
}

// Interrupts are per-CPU interrupt counts from /proc/interrupts, indexed
// by CPU number.
type Interrupts struct {
	// Device counts the numbered (device) IRQ rows per CPU.
	Device []uint64
	// Total counts every per-CPU row, including the local ones (timer,
	// rescheduling, function-call, TLB shootdown IPIs).
	Total []uint64
}

// ParseInterrupts parses the contents of /proc/interrupts with
// topo.ParseInterrupts and sums its rows per CPU.
func ParseInterrupts(b []byte) (*Interrupts, error) {
	t, err := topo.ParseInterrupts(b)
	if err != nil {
		return nil, err
	}
	n := slices.Max(t.CPUs) + 1
	in := &Interrupts{Device: make([]uint64, n), Total: make([]uint64, n)}
	for _, irq := range t.IRQs {
		addByCPU(in.Device, t.CPUs, irq.Counts)
		addByCPU(in.Total, t.CPUs, irq.Counts)
	}
	for _, counts := range t.Other {
		if len(counts) == len(t.CPUs) { // not ERR or MIS: one count for the machine
			addByCPU(in.Total, t.CPUs, counts)
		}
	}
	return in, nil
}

// TaskStat is one thread's accounting from /proc/<pid>/task/<tid>/stat and
// schedstat.
type TaskStat struct {
	// TID is the thread id.
	TID int `json:"tid"`
	// Comm is the thread's name.
	Comm string `json:"comm"`
	// State is the thread's state letter (stat field 3): 'R' running or
	// waiting for a CPU, 'S' asleep, …
	State byte `json:"-"`
	// UTime and STime are user and system time in clock ticks.
	UTime uint64 `json:"utime_ticks"`
	STime uint64 `json:"stime_ticks"`
	// Processor is the CPU the thread last ran on.
	Processor int `json:"cpu"`
	// RunNS is the time on CPU in nanoseconds (schedstat), 0 if unknown.
	RunNS uint64 `json:"run_ns"`
	// Timeslices counts the thread's runs on a CPU (schedstat).
	Timeslices uint64 `json:"timeslices"`
	// Start is when the thread started, in clock ticks after boot (stat
	// field 22): with the TID it tells a thread from a later one given
	// the same TID (TIDs are reused once the kernel's pid_max wraps).
	Start uint64 `json:"start_ticks"`
	// PGrp is the process group (stat field 5).
	PGrp int `json:"-"`
}

// threadKey tells a thread from any other, a later one given the same
// TID included.
type threadKey struct {
	tid   int
	start uint64
}

func (t TaskStat) key() threadKey { return threadKey{t.TID, t.Start} }

// threadRuns returns the threads of after that ran between the reads
// before and after, each with RunNS its run time in between: after's
// less before's for a thread in both (the same TID and start time), all
// of it for a thread started in between, a new thread with an exited
// one's TID included. Threads that exited in between are not in it.
func threadRuns(before, after []TaskStat) []TaskStat {
	ran := make(map[threadKey]uint64, len(before))
	for _, t := range before {
		ran[t.key()] = t.RunNS
	}
	var out []TaskStat
	for _, t := range after {
		t.RunNS -= min(ran[t.key()], t.RunNS)
		if t.RunNS > 0 {
			out = append(out, t)
		}
	}
	return out
}

// ParseTaskStat parses the contents of a /proc/<pid>[/task/<tid>]/stat
// file. The command name may contain spaces and parentheses; it ends at the
// last ')'.
func ParseTaskStat(b []byte) (TaskStat, error) {
	var t TaskStat
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return t, fmt.Errorf("%w: task stat without (comm)", errProcFormat)
	}
	tid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return t, fmt.Errorf("%w: task stat pid: %v", errProcFormat, err)
	}
	t.TID, t.Comm = tid, string(b[open+1:closing])
	// Fields after the comm start at field 3 (state); pgrp is field 5,
	// utime 14, stime 15, starttime 22, processor 39 (proc(5), 1-based).
	f := strings.Fields(string(b[closing+1:]))
	if len(f) < 37 {
		return t, fmt.Errorf("%w: task stat has %d fields after comm", errProcFormat, len(f))
	}
	get := func(field int) (uint64, error) {
		return strconv.ParseUint(f[field-3], 10, 64)
	}
	pgrp, err := strconv.Atoi(f[5-3])
	if err != nil {
		return t, fmt.Errorf("%w: pgrp: %v", errProcFormat, err)
	}
	t.PGrp = pgrp
	t.State = f[0][0]
	if t.UTime, err = get(14); err != nil {
		return t, fmt.Errorf("%w: utime: %v", errProcFormat, err)
	}
	if t.STime, err = get(15); err != nil {
		return t, fmt.Errorf("%w: stime: %v", errProcFormat, err)
	}
	if t.Start, err = get(22); err != nil {
		return t, fmt.Errorf("%w: starttime: %v", errProcFormat, err)
	}
	p, err := get(39)
	if err != nil || p > 1<<16 {
		return t, fmt.Errorf("%w: processor: %v", errProcFormat, err)
	}
	t.Processor = int(p)
	return t, nil
}

// parseSchedstat parses /proc/<pid>/task/<tid>/schedstat: run time in ns,
// wait time in ns, timeslices.
func parseSchedstat(b []byte) (run, slices uint64, err error) {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0, fmt.Errorf("%w: schedstat %q", errProcFormat, b)
	}
	if run, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%w: schedstat: %v", errProcFormat, err)
	}
	if slices, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%w: schedstat: %v", errProcFormat, err)
	}
	return run, slices, nil
}

// Proc reads /proc files below a root directory: "/" for the live host, a
// fixture directory in tests.
type Proc struct {
	// Root is the directory that holds "proc"; "" means "/".
	Root string
}

// path is the file rel below proc in p.Root.
func (p Proc) path(rel string) string {
	root := p.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "proc", rel)
}

func (p Proc) read(rel string) ([]byte, error) { return os.ReadFile(p.path(rel)) }

// readParsed reads p's file rel and parses it with parse; a parse error
// names the file (topo's parsers do not: their callers read it, under a
// root perhaps).
func readParsed[T any](p Proc, rel string, parse func([]byte) (T, error)) (T, error) {
	b, err := p.read(rel)
	if err != nil {
		var none T
		return none, err
	}
	v, err := parse(b)
	if err != nil {
		return v, fmt.Errorf("%s: %w", p.path(rel), err)
	}
	return v, nil
}

// Stat reads proc/stat and parses it with topo.ParseStat. Any goroutine.
func (p Proc) Stat() (*topo.Stat, error) { return readParsed(p, "stat", topo.ParseStat) }

// Softirqs reads and parses proc/softirqs. Any goroutine.
func (p Proc) Softirqs() (Softirqs, error) { return readParsed(p, "softirqs", ParseSoftirqs) }

// Interrupts reads and parses proc/interrupts. Any goroutine.
func (p Proc) Interrupts() (*Interrupts, error) {
	return readParsed(p, "interrupts", ParseInterrupts)
}

// Tasks reads every thread of process pid ("self" for the caller when pid
// is 0). Threads that exit while being read are skipped. Any goroutine.
func (p Proc) Tasks(pid int) ([]TaskStat, error) {
	dir := "self"
	if pid != 0 {
		dir = strconv.Itoa(pid)
	}
	ents, err := os.ReadDir(p.path(filepath.Join(dir, "task")))
	if err != nil {
		return nil, err
	}
	var out []TaskStat
	for _, e := range ents {
		b, err := p.read(filepath.Join(dir, "task", e.Name(), "stat"))
		if err != nil {
			continue // thread exited
		}
		t, err := ParseTaskStat(b)
		if err != nil {
			return nil, err
		}
		if b, err := p.read(filepath.Join(dir, "task", e.Name(), "schedstat")); err == nil {
			t.RunNS, t.Timeslices, _ = parseSchedstat(b)
		}
		out = append(out, t)
	}
	return out, nil
}

// GroupCPU is the CPU time of a process and its descendants, from
// proc/<pid>/stat and the threads' schedstat.
type GroupCPU struct {
	// Ticks is the sum of utime and stime (clock ticks) of the
	// processes, each process's figure covering all its threads, live and
	// exited.
	Ticks uint64
	// PIDs are the processes counted, in order.
	PIDs []int
	// RunNS is the time on CPU of the processes' live threads in ns, from
	// each thread's schedstat: the clock utime and stime are scaled from,
	// at full resolution (the ticks are 10 ms). It leaves out threads
	// that have exited; TIDs lists the threads it counts, in order, so
	// that two reads can be seen to cover the same threads. 0 with TIDs
	// nil where a thread's schedstat could not be read.
	RunNS uint64
	TIDs  []int
	// Starts are the start times of TIDs' threads (TaskStat.Start), in
	// the same order: a thread that exited and a new one given its TID
	// have the same TID, not the same start.
	Starts []uint64
}

// sameThreads reports whether g and h count the run time of the same
// threads, so that h.RunNS-g.RunNS is their CPU in between.
func (g GroupCPU) sameThreads(h GroupCPU) bool {
	return g.TIDs != nil && slices.Equal(g.TIDs, h.TIDs) && slices.Equal(g.Starts, h.Starts)
}

// ProcessCPU sums the CPU time of process pid and of its descendants,
// found through each thread's proc/<pid>/task/<tid>/children
// (CONFIG_PROC_CHILDREN), reading only their own directories, not every
// process's: every proxy arm is one process (haproxy -db with nbthread 1,
// nginx with master_process off and daemon off, spindle proxy), whose
// threads are all counted, and the processes of an arm that forked would
// be too. Descendants that exit while being read are skipped; pid gone is
// an error. Any goroutine.
func (p Proc) ProcessCPU(pid int) (GroupCPU, error) {
	var g GroupCPU
	var threads []threadKey
	runOK := true
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		rel := strconv.Itoa(queue[0])
		b, err := p.read(filepath.Join(rel, "stat"))
		if err != nil {
			if queue[0] == pid {
				return g, fmt.Errorf("bench: process %d: %w", pid, err)
			}
			continue // exited
		}
		st, err := ParseTaskStat(b)
		if err != nil {
			return g, fmt.Errorf("%s: %w", p.path(filepath.Join(rel, "stat")), err)
		}
		g.Ticks += st.UTime + st.STime
		g.PIDs = append(g.PIDs, queue[0])
		tasks, err := p.Tasks(queue[0])
		if err != nil {
			runOK = false
			continue
		}
		for _, t := range tasks {
			if t.RunNS == 0 && t.Timeslices == 0 {
				runOK = false // no schedstat (or a thread that never ran)
			}
			g.RunNS += t.RunNS
			threads = append(threads, t.key())
			b, err := p.read(filepath.Join(rel, "task", strconv.Itoa(t.TID), "children"))
			if err != nil {
				continue // exited
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && !slices.Contains(g.PIDs, c) && !slices.Contains(queue, c) {
					queue = append(queue, c)
				}
			}
		}
	}
	slices.Sort(g.PIDs)
	if !runOK {
		g.RunNS = 0
		return g, nil
	}
	slices.SortFunc(threads, func(a, b threadKey) int { return cmp.Or(cmp.Compare(a.tid, b.tid), cmp.Compare(a.start, b.start)) })
	for _, k := range threads {
		g.TIDs, g.Starts = append(g.TIDs, k.tid), append(g.Starts, k.start)
	}
	return g, nil
}
