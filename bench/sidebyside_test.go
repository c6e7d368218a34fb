package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSummaryRatioWithoutBase: a summary's ratio to the first arm's median
// prints "—" where that median is 0 (the first arm had no replies at that
// streams value: no ratio, 0 in the JSON), in bench http2's and bench
// proxy's Markdown and plain-text tables alike; where the median is above
// 0 it prints the ratio. They printed "0.00", a ratio the arms never had,
// but for the proxy CPU's.
func TestSummaryRatioWithoutBase(t *testing.T) {
	// At streams 1 the first arm had no replies; at streams 2 it had.
	var h2 []HTTP2Result
	var px []ProxyResult
	for rep := 1; rep <= 2; rep++ {
		h2 = append(h2,
			HTTP2Result{Arm: "first", Streams: 1, Rep: rep},
			HTTP2Result{Arm: "second", Streams: 1, Rep: rep, Requests: 200, AchievedRPS: 200, Latency: Percentiles{P99: 80}, ServerUSPerReq: 6},
			HTTP2Result{Arm: "first", Streams: 2, Rep: rep, Requests: 100, AchievedRPS: 100, Latency: Percentiles{P99: 40}, ServerUSPerReq: 3},
			HTTP2Result{Arm: "second", Streams: 2, Rep: rep, Requests: 200, AchievedRPS: 200, Latency: Percentiles{P99: 80}, ServerUSPerReq: 6})
		px = append(px,
			ProxyResult{Arm: "first", Streams: 1, Rep: rep},
			ProxyResult{Arm: "second", Streams: 1, Rep: rep, Requests: 200, AchievedRPS: 200, Latency: Percentiles{P99: 80}, ProxyUSPerReq: 6, UpstreamUSPerReq: 4},
			ProxyResult{Arm: "first", Streams: 2, Rep: rep, Requests: 100, AchievedRPS: 100, Latency: Percentiles{P99: 40}, ProxyUSPerReq: 3, UpstreamUSPerReq: 2},
			ProxyResult{Arm: "second", Streams: 2, Rep: rep, Requests: 200, AchievedRPS: 200, Latency: Percentiles{P99: 80}, ProxyUSPerReq: 6, UpstreamUSPerReq: 4})
	}
	h2rep := &HTTP2Report{Config: HTTP2Settings{Reps: 2}, Results: h2, Summary: summarizeHTTP2(h2)}
	pxrep := &ProxyReport{Config: ProxySettings{Protocol: ProxyProtocolH2, Reps: 2}, Results: px, Summary: summarizeProxy(px)}
	for _, s := range h2rep.Summary {
		if s.Arm == "second" && s.Streams == 1 && (s.RPSRatio != 0 || s.P99Ratio != 0 || s.ServerCPURatio != 0) {
			t.Errorf("http2 JSON ratios %v %v %v at streams 1, want 0 (the first arm's medians are 0)", s.RPSRatio, s.P99Ratio, s.ServerCPURatio)
		}
	}
	var h2md, h2txt, pxmd, pxtxt strings.Builder
	h2md.WriteString(HTTP2Markdown(h2rep))
	WriteHTTP2Table(&h2txt, h2rep)
	pxmd.WriteString(ProxyMarkdown(pxrep))
	WriteProxyTable(&pxtxt, pxrep)
	for _, c := range []struct {
		name     string
		out      string
		markdown bool
		ratios   int
	}{
		{"http2 markdown", h2md.String(), true, 3},
		{"http2 table", h2txt.String(), false, 3},
		{"proxy markdown", pxmd.String(), true, 4},
		{"proxy table", pxtxt.String(), false, 4},
	} {
		rows := secondArmRows(c.out, c.markdown)
		if len(rows) != 2 {
			t.Errorf("%s: %d rows of the second arm, want 2:\n%s", c.name, len(rows), c.out)
			continue
		}
		for i, want := range []string{"—", "2.00"} {
			cells := rows[i][len(rows[i])-c.ratios:]
			for _, cell := range cells {
				if cell != want {
					t.Errorf("%s, streams %d: ratios %q, want each %q", c.name, i+1, cells, want)
					break
				}
			}
		}
	}
}

// secondArmRows returns the cells of the rows of arm "second" in a
// summary table, in order: a Markdown table's between its bars, a
// plain-text table's fields.
func secondArmRows(out string, markdown bool) [][]string {
	var rows [][]string
	for line := range strings.Lines(out) {
		if markdown && strings.HasPrefix(line, "| second |") {
			var cells []string
			for _, c := range strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, cells)
		}
		if !markdown && strings.HasPrefix(line, "second ") {
			rows = append(rows, strings.Fields(line))
		}
	}
	return rows
}

// TestWindowMachineCountsEveryCPU: a bench proxy or bench http2
// measurement's machine figure comes from /proc/stat read at its window's
// edges (testdata/steal: CPU 0 the proxy's or server's, CPU 1 the
// client's and upstream's) as bench's MachineCPU does: busy time over
// every CPU, not the process's CPU alone (CPU 0 holds 900 of the 1440
// µs per request), divided by the time between the two reads and by the
// window's request rate, the client's empty polls taken out of the work,
// softirq and steal split out (steal in neither total nor work). A
// measurement without replies has none; the summaries take the work's
// spread and the medians of softirq and steal over the repetitions with
// replies, in both reports.
func TestWindowMachineCountsEveryCPU(t *testing.T) {
	var e [2]hostEdge
	t0 := time.Now()
	for i, dir := range []string{"before", "after"} {
		st, err := Proc{Root: filepath.Join("testdata", "steal", dir)}.Stat()
		if err != nil {
			t.Fatal(err)
		}
		// The reads are 1.25 s apart around a 1 s window.
		e[i] = hostEdge{procEdge: procEdge{stat: st, statAt: t0.Add(time.Duration(i) * 1250 * time.Millisecond)}}
	}
	// One tick (10 ms) per second at 1000 req/s is 10 µs per request;
	// over 1.25 s, 8 µs.
	m := windowMachine(e, windowRate{replies: 1000, window: time.Second}, 40*time.Millisecond, []cpuRole{{"proxy", []int{0}}})
	checkFigures(t, []figure{
		{"total µs/req (144 ticks: CPU 0's 90 and CPU 1's 54)", m.TotalUSPerReq, 1152},
		{"client poll µs/req", m.ClientPollUSPerReq, 40},
		{"work µs/req", m.WorkUSPerReq, 1152 - 40},
		{"softirq µs/req", m.SoftirqUSPerReq, 64},
		{"steal µs/req", m.StealUSPerReq, 320},
	})
	if none := windowMachine(e, windowRate{replies: 0, window: time.Second}, 0, []cpuRole{{"proxy", []int{0}}}); !reflect.DeepEqual(none, MachineWork{}) {
		t.Errorf("no replies: %+v, want none", none)
	}

	h2 := []HTTP2Result{
		{Arm: "a", Streams: 1, Rep: 1, Requests: 1000, AchievedRPS: 1000, Machine: m},
		{Arm: "a", Streams: 1, Rep: 2},
		{Arm: "a", Streams: 1, Rep: 3, Requests: 1000, AchievedRPS: 1000, Machine: MachineWork{WorkUSPerReq: 1000, SoftirqUSPerReq: 40, StealUSPerReq: 0}},
	}
	px := make([]ProxyResult, len(h2))
	for i, r := range h2 {
		px[i] = ProxyResult{Arm: r.Arm, Rep: r.Rep, Requests: r.Requests, AchievedRPS: r.AchievedRPS, Machine: r.Machine}
	}
	for name, got := range map[string]MachineSummary{"http2": summarizeHTTP2(h2)[0].MachineSummary, "proxy": summarizeProxy(px)[0].MachineSummary} {
		checkFigures(t, []figure{
			{name + " summary work µs/req median", got.MachineWorkUSPerReq.Median, 1056},
			{name + " summary work µs/req min", got.MachineWorkUSPerReq.Min, 1000},
			{name + " summary work µs/req max", got.MachineWorkUSPerReq.Max, 1112},
			{name + " summary softirq µs/req", got.SoftirqUSPerReq, 52},
			{name + " summary steal µs/req", got.StealUSPerReq, 160},
		})
	}
}

// TestWindowMachineSplitsPerCPU: a bench proxy or bench http2
// measurement's machine figure has bench's per-CPU split, each CPU named
// by the processes pinned to it, and the interrupts and NET_RX softirqs on
// the CPUs of the process the clients send to (the proxy's, the
// server's), from /proc/stat, /proc/interrupts and /proc/softirqs read at
// its edges (testdata/steal): each file's counts are divided by the
// replies received between its own two reads, as bench's are. Each
// file's reads are 1.25 s apart around a 1 s window, replies coming at
// 1000 a second from 200 ms before it to its end: /proc/stat's at the
// window's start and 250 ms after its end, 1000 replies between them;
// the others' 250 ms later each, 750 replies between them, not the
// window's 1000 a second over 1.25 s.
func TestWindowMachineSplitsPerCPU(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var e [2]hostEdge
	for i, dir := range []string{"before", "after"} {
		p := Proc{Root: filepath.Join("testdata", "steal", dir)}
		var err [3]error
		e[i].stat, err[0] = p.Stat()
		e[i].soft, err[1] = p.Softirqs()
		e[i].intr, err[2] = p.Interrupts()
		if err := errors.Join(err[:]...); err != nil {
			t.Fatal(err)
		}
	}
	e[0].statAt, e[1].statAt = at(0), at(1250*time.Millisecond)
	e[0].softAt, e[1].softAt = at(250*time.Millisecond), at(1500*time.Millisecond)
	e[0].intrAt, e[1].intrAt = at(250*time.Millisecond), at(1500*time.Millisecond)
	w := windowRate{replies: 1000, window: time.Second, times: steadyReplies(at(-200*time.Millisecond), 1, 1200)}
	roles := []cpuRole{{"proxy", []int{0}}, {"upstream", []int{1}}, {"client", []int{1}}}
	m := windowMachine(e, w, 0, roles)

	// 1000 replies between the /proc/stat reads, 1.25 s apart: one tick
	// (10 ms) is 10 µs per request; CPU 0 was busy 90 of 125 ticks, CPU 1
	// 54 (nice counted as user).
	want := []CPUSplit{
		{CPU: 0, Role: "proxy", BusyPercent: 72, UserUSPerReq: 600, SysUSPerReq: 200, IRQUSPerReq: 20, SoftirqUSPerReq: 80, StealUSPerReq: 100},
		{CPU: 1, Role: "upstream+client", BusyPercent: 43.2, UserUSPerReq: 440, SysUSPerReq: 100, StealUSPerReq: 300},
	}
	if len(m.PerCPU) != len(want) {
		t.Fatalf("per-CPU split %+v, want %+v", m.PerCPU, want)
	}
	for i, g := range m.PerCPU {
		w := want[i]
		if g.CPU != w.CPU || g.Role != w.Role {
			t.Errorf("CPU %d: %+v, want %+v", w.CPU, g, w)
		}
		cpu := fmt.Sprintf("CPU %d", w.CPU)
		checkFigures(t, []figure{
			{cpu + " busy %", g.BusyPercent, w.BusyPercent},
			{cpu + " user µs/req", g.UserUSPerReq, w.UserUSPerReq},
			{cpu + " sys µs/req", g.SysUSPerReq, w.SysUSPerReq},
			{cpu + " irq µs/req", g.IRQUSPerReq, w.IRQUSPerReq},
			{cpu + " softirq µs/req", g.SoftirqUSPerReq, w.SoftirqUSPerReq},
			{cpu + " steal µs/req", g.StealUSPerReq, w.StealUSPerReq},
		})
	}
	// On CPU 0, between reads with 750 replies between them: 1250
	// interrupts (625 of the device's, 500 timer, 125 rescheduling) and
	// 2500 NET_RX; CPU 1's are not counted.
	checkFigures(t, []figure{
		{"interrupts/req", m.InterruptsPerReq, 1250.0 / 750},
		{"device IRQs/req", m.DeviceIRQsPerReq, 625.0 / 750},
		{"NET_RX/req", m.NetRxPerReq, 2500.0 / 750},
	})

	h2 := []HTTP2Result{
		{Arm: "a", Rep: 1, Requests: 1000, AchievedRPS: 1000, Machine: m},
		{Arm: "a", Rep: 2},
		{Arm: "a", Rep: 3, Requests: 1000, AchievedRPS: 1000, Machine: MachineWork{InterruptsPerReq: 0.5, NetRxPerReq: 1.125}},
	}
	px := make([]ProxyResult, len(h2))
	for i, r := range h2 {
		px[i] = ProxyResult{Arm: r.Arm, Rep: r.Rep, Requests: r.Requests, AchievedRPS: r.AchievedRPS, Machine: r.Machine}
	}
	// The medians over the repetitions with replies.
	for name, got := range map[string]MachineSummary{"http2": summarizeHTTP2(h2)[0].MachineSummary, "proxy": summarizeProxy(px)[0].MachineSummary} {
		checkFigures(t, []figure{
			{name + " summary interrupts/req", got.InterruptsPerReq, (1250.0/750 + 0.5) / 2},
			{name + " summary NET_RX/req", got.NetRxPerReq, (2500.0/750 + 1.125) / 2},
		})
	}
}
