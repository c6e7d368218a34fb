package topo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spindlenet/spindle/internal/cpulist"
)

// IRQCounts is one numbered line of /proc/interrupts.
type IRQCounts struct {
	// Counts holds one count per CPU column, in the order of
	// Interrupts.CPUs.
	Counts []uint64 `json:"counts"`
	// Desc is everything after the counts: chip, hardware IRQ, trigger and
	// action names ("PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0").
	Desc string `json:"desc"`
	// Name is the action (handler) name the kernel prints after the chip,
	// hardware IRQ and trigger fields, spaces included ("virtio2-input.0",
	// "iwlwifi: queue 1"); the actions of a shared IRQ are joined by ", "
	// as in the file. Without an action it is the last word of Desc.
	Name string `json:"name"`
}

// Interrupts is /proc/interrupts. Its methods only read it and may be
// called from any goroutine.
type Interrupts struct {
	// CPUs lists the CPU number of each count column (offline CPUs have
	// no column).
	CPUs []int `json:"cpus"`
	// IRQs maps an IRQ number to its counts.
	IRQs map[int]IRQCounts `json:"irqs"`
	// Other holds the named rows (LOC, RES, NMI, ...), one value per CPU
	// column, or a single value for rows such as ERR and MIS.
	Other map[string][]uint64 `json:"other"`
}

// PerCPU returns the count of irq on each CPU, keyed by CPU number.
func (in *Interrupts) PerCPU(irq int) map[int]uint64 {
	c, ok := in.IRQs[irq]
	if !ok {
		return nil
	}
	return byCPU(in.CPUs, c.Counts)
}

// byCPU keys the counts of a per-CPU row by the CPU numbers of its columns.
func byCPU(cpus []int, counts []uint64) map[int]uint64 {
	m := make(map[int]uint64, len(counts))
	for i, v := range counts {
		if i < len(cpus) {
			m[cpus[i]] = v
		}
	}
	return m
}

// parseCPUHeader parses a "CPU0 CPU1 ..." header line.
func parseCPUHeader(line string) ([]int, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, fmt.Errorf("empty cpu header")
	}
	if len(f) > MaxCPU {
		return nil, fmt.Errorf("cpu header has %d columns", len(f))
	}
	cpus := make([]int, 0, len(f))
	for _, w := range f {
		n, ok := strings.CutPrefix(w, "CPU")
		if !ok {
			return nil, fmt.Errorf("cpu header: unexpected %q", w)
		}
		c, err := cpulist.CPU(n)
		if err != nil {
			return nil, fmt.Errorf("cpu header: %w", err)
		}
		cpus = append(cpus, c)
	}
	return cpus, nil
}

// skipFields returns s after its first n space-separated fields.
func skipFields(s string, n int) string {
	for range n {
		_, s = cutField(s)
	}
	return s
}

// actionName returns the action part of the description of an IRQ line.
// The kernel (show_interrupts) pads the chip, hardware IRQ and trigger
// fields and prints the action names after two more spaces, so the action
// is what follows the last run of two or more spaces; an action name
// itself may hold single spaces ("iwlwifi: queue 1", "PCIe PME, aerdrv").
// A description without such a run gives last, its last word.
func actionName(desc, last string) string {
	desc = strings.TrimSpace(desc)
	i := strings.LastIndex(desc, "  ")
	if i < 0 {
		return last
	}
	return strings.TrimSpace(desc[i+1:])
}

// ErrCPUsChanged is wrapped by the error of ParseInterrupts for a line
// whose count columns are not one per CPU of the header: the kernel prints
// the header and each line for the CPUs online as it prints them, so a CPU
// that went on- or offline while the file was read leaves lines with one
// count more or less.
var ErrCPUsChanged = errors.New("count columns differ from the CPU header (a CPU went on- or offline during the read)")

// ReadInterrupts reads and parses the /proc/interrupts file at path,
// reading it again, up to 3 times in all, while ParseInterrupts finds
// ErrCPUsChanged. Its errors name path. It may be called from any
// goroutine.
func ReadInterrupts(path string) (*Interrupts, error) {
	var err error
	for range 3 {
		var b []byte
		if b, err = readFile(path); err != nil {
			return nil, err
		}
		var in *Interrupts
		if in, err = ParseInterrupts(b); err == nil {
			return in, nil
		}
		if !errors.Is(err, ErrCPUsChanged) {
			break
		}
	}
	return nil, fmt.Errorf("%s: %w", path, err)
}

// readFile is os.ReadFile; tests replace it to stand for a file that
// changes between readings.
var readFile = os.ReadFile

// ParseInterrupts parses the contents of /proc/interrupts. A numbered line
// without one count per CPU of the header is an error wrapping
// ErrCPUsChanged. Its errors do not name the file, which the caller read
// (under a root, perhaps).
func ParseInterrupts(b []byte) (*Interrupts, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		return nil, errors.New("empty")
	}
	cpus, err := parseCPUHeader(sc.Text())
	if err != nil {
		return nil, err
	}
	in := &Interrupts{CPUs: cpus, IRQs: map[int]IRQCounts{}, Other: map[string][]uint64{}}
	for sc.Scan() {
		line := sc.Text()
		label, rest, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return nil, fmt.Errorf("line without colon: %q", line)
		}
		label = strings.TrimSpace(label)
		f := strings.Fields(rest)
		var counts []uint64
		i := 0
		for ; i < len(f) && i < len(cpus); i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				break
			}
			counts = append(counts, v)
		}
		irq, err := strconv.Atoi(label)
		if err != nil || irq < 0 {
			in.Other[label] = counts
			continue
		}
		// After the counts comes the chip's name, never a number: a
		// number there is a count of a CPU the header does not have.
		more := false
		if i < len(f) {
			_, err := strconv.ParseUint(f[i], 10, 64)
			more = err == nil
		}
		if len(counts) != len(cpus) || more {
			return nil, fmt.Errorf("irq %d: not one count for each of the %d cpus: %w", irq, len(cpus), ErrCPUsChanged)
		}
		c := IRQCounts{Counts: counts, Desc: strings.Join(f[i:], " ")}
		if len(f) > i {
			c.Name = actionName(skipFields(rest, i), f[len(f)-1])
		}
		in.IRQs[irq] = c
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return in, nil
}

// Softirqs is /proc/softirqs. Its methods only read it and may be called
// from any goroutine.
type Softirqs struct {
	// CPUs lists the CPU number of each column.
	CPUs []int `json:"cpus"`
	// Counts maps a softirq name (NET_RX, NET_TX, ...) to one count per
	// column.
	Counts map[string][]uint64 `json:"counts"`
}

// PerCPU returns the count of the named softirq keyed by CPU number.
func (s *Softirqs) PerCPU(name string) map[int]uint64 { return byCPU(s.CPUs, s.Counts[name]) }

// ParseSoftirqs parses the contents of /proc/softirqs. Its errors do not
// name the file, which the caller read (under a root, perhaps).
func ParseSoftirqs(b []byte) (*Softirqs, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		return nil, errors.New("empty")
	}
	cpus, err := parseCPUHeader(sc.Text())
	if err != nil {
		return nil, err
	}
	s := &Softirqs{CPUs: cpus, Counts: map[string][]uint64{}}
	for sc.Scan() {
		label, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != len(cpus) {
			return nil, fmt.Errorf("%s has %d counts for %d cpus", strings.TrimSpace(label), len(f), len(cpus))
		}
		counts := make([]uint64, len(f))
		for i, w := range f {
			if counts[i], err = strconv.ParseUint(w, 10, 64); err != nil {
				return nil, fmt.Errorf("%s: %w", strings.TrimSpace(label), err)
			}
		}
		s.Counts[strings.TrimSpace(label)] = counts
	}
	return s, sc.Err()
}

// CPUTime is one cpu or cpuN line of /proc/stat, in clock ticks (USER_HZ).
// Its methods are pure and may be called from any goroutine.
type CPUTime struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Total returns the sum of all fields (guest time is already inside User
// and Nice, so it is not counted twice).
func (t CPUTime) Total() uint64 {
	return t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal
}

// Busy returns the non-idle time: Total without Idle and IOWait.
func (t CPUTime) Busy() uint64 {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
}

// Sub returns t minus u, field by field; a field that went backwards
// (a CPU that went offline and came back) is 0.
func (t CPUTime) Sub(u CPUTime) CPUTime {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return CPUTime{d(t.User, u.User), d(t.Nice, u.Nice), d(t.System, u.System), d(t.Idle, u.Idle),
		d(t.IOWait, u.IOWait), d(t.IRQ, u.IRQ), d(t.SoftIRQ, u.SoftIRQ), d(t.Steal, u.Steal)}
}

// Stat is the part of /proc/stat that spindle reads.
type Stat struct {
	// Total is the aggregate "cpu" line: the kernel's sum of the cpuN
	// lines.
	Total CPUTime `json:"total"`
	// CPU holds the cpuN lines keyed by CPU number; offline CPUs have no
	// line and no entry.
	CPU map[int]CPUTime `json:"cpu"`
	// Ctxt is the context switches since boot (the "ctxt" line).
	Ctxt uint64 `json:"ctxt"`
	// Intr is the interrupts serviced since boot (the first number of the
	// "intr" line).
	Intr uint64 `json:"intr"`
}

// ParseStat parses the contents of /proc/stat. It needs the aggregate
// "cpu" line and at least one cpuN line; lines it does not use are
// ignored. Its errors do not name the file, which the caller read. It may
// be called from any goroutine.
func ParseStat(b []byte) (*Stat, error) {
	s := &Stat{CPU: map[int]CPUTime{}}
	total := false
	for line := range strings.Lines(string(b)) {
		// The intr line has one count per IRQ number, thousands on a
		// large machine: only the names and the numbers used are split
		// off.
		name, rest := cutField(line)
		switch {
		case name == "ctxt" || name == "intr":
			v, _ := cutField(rest)
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if name == "ctxt" {
				s.Ctxt = n
			} else {
				s.Intr = n
			}
		case strings.HasPrefix(name, "cpu"):
			t, err := parseCPUTime(strings.Fields(rest))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if name == "cpu" {
				s.Total, total = t, true
				continue
			}
			cpu, err := cpulist.CPU(name[3:])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			s.CPU[cpu] = t
		}
	}
	if !total {
		return nil, errors.New("no cpu line")
	}
	if len(s.CPU) == 0 {
		return nil, errors.New("no cpuN lines")
	}
	return s, nil
}

// cutField returns the first space-separated field of s and the rest of s
// after it.
func cutField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t\n")
	if i := strings.IndexAny(s, " \t\n"); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// parseCPUTime parses the numbers of a cpu line: user, nice, system, idle,
// iowait, irq, softirq and, since Linux 2.6.11, steal. The guest columns
// after them are already inside user and nice and are not read.
func parseCPUTime(f []string) (CPUTime, error) {
	if len(f) < 7 {
		return CPUTime{}, fmt.Errorf("%d fields, want at least 7", len(f))
	}
	var v [8]uint64
	for i := range min(len(f), len(v)) {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return CPUTime{}, err
		}
		v[i] = n
	}
	return CPUTime{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}, nil
}

// Softnet is one line of /proc/net/softnet_stat: the packet-processing
// counters of one CPU.
type Softnet struct {
	// CPU is the CPU number (column 13 since Linux 5.10; the line index
	// before that).
	CPU int `json:"cpu"`
	// Processed counts packets taken off the CPU's backlog and NAPI polls.
	Processed uint64 `json:"processed"`
	// Dropped counts packets dropped because the backlog was full
	// (netdev_max_backlog).
	Dropped uint64 `json:"dropped"`
	// TimeSqueeze counts net_rx_action runs that stopped with work left
	// (netdev_budget or netdev_budget_usecs exhausted).
	TimeSqueeze uint64 `json:"time_squeeze"`
	// ReceivedRPS counts IPIs received to process RPS-steered packets.
	ReceivedRPS uint64 `json:"received_rps"`
	// FlowLimit counts packets dropped by the flow limit.
	FlowLimit uint64 `json:"flow_limit"`
}

// ParseSoftnet parses /proc/net/softnet_stat (11, 13 or 15 hexadecimal
// columns depending on the kernel; this one has 15). Before Linux 5.10
// (11 columns) a line has no CPU column and the kernel skips offline CPUs:
// ParseSoftnet then numbers lines 0, 1, ..., right only when every CPU up
// to the last is online. Use ParseSoftnetOnline when the online CPUs are
// known. Its errors do not name the file, which the caller read.
func ParseSoftnet(b []byte) ([]Softnet, error) { return ParseSoftnetOnline(b, nil) }

// ParseSoftnetOnline is ParseSoftnet for a host whose online CPUs are
// online: a line without the CPU column (before Linux 5.10) is the i-th
// online CPU's, as the kernel prints one line per online CPU in order.
// More such lines than online CPUs is an error. A nil online numbers the
// lines 0, 1, ...
func ParseSoftnetOnline(b []byte, online CPUSet) ([]Softnet, error) {
	var out []Softnet
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	row := 0
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 11 {
			return nil, fmt.Errorf("line %d: %d columns, want at least 11", line, len(f))
		}
		v := make([]uint64, len(f))
		for i, w := range f {
			n, err := strconv.ParseUint(w, 16, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d column %d: %w", line, i, err)
			}
			v[i] = n
		}
		s := Softnet{CPU: row, Processed: v[0], Dropped: v[1], TimeSqueeze: v[2], ReceivedRPS: v[9], FlowLimit: v[10]}
		switch {
		case len(f) >= 13:
			if v[12] >= MaxCPU {
				return nil, fmt.Errorf("line %d: cpu %d out of range", line, v[12])
			}
			s.CPU = int(v[12])
		case online != nil:
			if row >= online.Len() {
				return nil, fmt.Errorf("line %d: more lines than the %d online CPUs (%s)", line, online.Len(), online)
			}
			s.CPU = online[row]
		}
		row++
		out = append(out, s)
	}
	return out, sc.Err()
}
