package bench

import (
	"bytes"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// steadyReplies is a run's replies at perMS a millisecond from origin for
// ms milliseconds, none after.
func steadyReplies(origin time.Time, perMS uint64, ms int) replyTimes {
	r := replyTimes{origin: origin, perMS: make([]uint64, ms+1000)}
	for i := range ms {
		r.perMS[i] = perMS
	}
	return r
}

// TestReplyTimesBetween: the replies between two times are the whole
// milliseconds between them and the part of each edge's millisecond
// inside, pro rata; times outside the record count none beyond it.
func TestReplyTimesBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := replyTimes{origin: t0, perMS: []uint64{10, 20, 30}}
	ms := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Millisecond))) }
	for _, c := range []struct {
		from, to time.Time
		want     float64
	}{
		{ms(0), ms(3), 60},
		{ms(-5), ms(10), 60},
		{ms(0.5), ms(2.5), 5 + 20 + 15},
		{ms(1.25), ms(1.75), 10},
		{ms(3), ms(4), 0},
	} {
		if got := r.between(c.from, c.to); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("between %v and %v ms: %v replies, want %v", c.from.Sub(t0).Seconds()*1e3, c.to.Sub(t0).Seconds()*1e3, got, c.want)
		}
	}
}

// TestFillDividesByTheRepliesBetweenItsReads: a server's CPU is read
// between two usage answers and the machine's between two /proc/stat
// reads, none of them exactly at the window's edges; the load stops at
// the window's end. A busy child whose last answer comes 0.5 s after the
// window's end has a CPU interval of 1.5 s with the requests of 1 s in it:
// dividing its CPU rate by the window's request rate read 667 µs per
// request for a server that spent 1000. Each counter is divided by the
// replies received between its own reads.
func TestFillDividesByTheRepliesBetweenItsReads(t *testing.T) {
	for _, childClock := range []bool{true, false} {
		t.Run(fmt.Sprintf("child clock %v", childClock), func(t *testing.T) {
			r := &runner{cfg: Config{ServerCPUs: []int{0}, ClientCPUs: []int{1}}}
			t0 := time.Now()
			at := func(d time.Duration) time.Time { return t0.Add(d) }
			// 1000 replies a second from the warm-up (200 ms before the
			// window) to the window's end at 1 s; the server's CPU 0 is
			// busy for 1 ms of each.
			load := &LoadResult{Hist: NewHistogram(), Window: time.Second, Replies: 1000, Threads: 1,
				times: steadyReplies(at(-200*time.Millisecond), 1, 1200)}
			var e [2]snapshot
			e[0] = snapshot{
				usageAt: at(0), usageRead: at(0),
				procEdge: procEdge{
					stat: &topo.Stat{CPU: map[int]topo.CPUTime{0: {}}}, statAt: at(0),
					soft: Softirqs{"NET_RX": {0}}, softAt: at(0),
					intr: &Interrupts{Total: []uint64{0}, Device: []uint64{0}}, intrAt: at(0),
				},
			}
			e[1] = snapshot{
				usage:   ServerUsage{UserNS: int64(time.Second), Nvcsw: 1000},
				usageAt: at(1500 * time.Millisecond), usageRead: at(1500 * time.Millisecond),
				procEdge: procEdge{
					stat: &topo.Stat{Total: topo.CPUTime{User: 100}, CPU: map[int]topo.CPUTime{0: {User: 100}}, Ctxt: 2000}, statAt: at(1200 * time.Millisecond),
					soft: Softirqs{"NET_RX": {1000}}, softAt: at(1200 * time.Millisecond),
					intr: &Interrupts{Total: []uint64{1000}, Device: []uint64{500}}, intrAt: at(1200 * time.Millisecond),
				},
			}
			if childClock {
				// The child read its rusage at the edges; its answers
				// reached the harness later.
				e[0].usage.MonoNS, e[1].usage.MonoNS = int64(time.Hour), int64(time.Hour+1500*time.Millisecond)
				e[0].usageAt, e[1].usageAt = at(300*time.Millisecond), at(1700*time.Millisecond)
			}
			var res Result
			r.fill(&res, load, e)
			checkFigures(t, []figure{
				{"server µs/req", res.Server.TotalUSPerReq, 1000},
				{"server context switches/req", res.Server.CtxSwitchesPerReq, 1},
				{"machine µs/req", res.Machine.TotalUSPerReq, 1000},
				{"machine context switches/req", res.Machine.CtxSwitchesPerReq, 2},
				{"server CPU interrupts/req", res.Machine.ServerCPUInterruptsPerReq, 1},
				{"server CPU device IRQs/req", res.Machine.ServerCPUDeviceIRQsPerReq, 0.5},
				{"server CPU NET_RX/req", res.Machine.ServerCPUNetRxPerReq, 1},
				{"achieved req/s", res.AchievedRPS, 1000},
			})
		})
	}
}

// TestWindowPlacesUsageReadByTheChildClock: the child stamps its usage
// with CLOCK_MONOTONIC when it reads it; the harness places that read on
// its own clock by CLOCK_MONOTONIC read as the answer arrives, so that a
// late answer does not move the read.
func TestWindowPlacesUsageReadByTheChildClock(t *testing.T) {
	start := time.Unix(2000, 0)
	end := start.Add(time.Second)
	clk := &fakeClock{t: start}
	// CLOCK_MONOTONIC reads an hour at start and runs with clk.
	mono := func() int64 { return int64(time.Hour + clk.now().Sub(start)) }
	var answers atomic.Int32
	er := edgeReader{
		now: clk.now, mono: mono,
		usage: func() (ServerUsage, error) {
			// The child reads its usage at once and answers 300 ms late.
			u := ServerUsage{MonoNS: mono()}
			clk.advance(clk.now().Add(300 * time.Millisecond))
			answers.Add(1)
			return u, nil
		},
		stat: func() (*topo.Stat, error) { return &topo.Stat{}, nil },
		soft: func() (Softirqs, error) { return Softirqs{}, nil },
		intr: func() (*Interrupts, error) { return &Interrupts{}, nil },
	}
	// Neither goroutine moves the clock to the window's end before the
	// child has answered at its start.
	sleepUntil := func(t time.Time) bool {
		for t.Equal(end) && answers.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		clk.advance(t)
		return true
	}
	e, ok := er.window(start, end, sleepUntil)
	if !ok || answers.Load() != 2 {
		t.Fatalf("window: ok %v, %d answers", ok, answers.Load())
	}
	for i, want := range []time.Time{start, end} {
		if !e[i].usageRead.Equal(want) {
			t.Errorf("edge %d: usage read at %v, want %v (answer at %v)", i, e[i].usageRead.Sub(start), want.Sub(start), e[i].usageAt.Sub(start))
		}
	}
}

// TestProxyCPUDividesByTheRepliesBetweenItsReads: the proxy's CPU read
// 0.5 s after a 1 s window whose load then stopped is divided by the
// replies between the reads, not by the window's rate over 1.5 s.
func TestProxyCPUDividesByTheRepliesBetweenItsReads(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// 100 ms of CPU (ticks: utime+stime) for 1000 replies in the window.
	a := cpuEdge{g: GroupCPU{Ticks: 100}, at: t0}
	b := cpuEdge{g: GroupCPU{Ticks: 110}, at: t0.Add(1500 * time.Millisecond)}
	w := windowRate{replies: 1000, window: time.Second, times: steadyReplies(t0, 1, 1000)}
	if us, _, _ := proxyCPU(a, b, w); math.Abs(us-100) > 1e-9 {
		t.Errorf("%v µs/req, want 100", us)
	}
	// Without the replies' times: the window's rate.
	w.times = replyTimes{}
	if us, _, _ := proxyCPU(a, b, w); math.Abs(us-100/1.5) > 1e-9 {
		t.Errorf("without times: %v µs/req, want %v", us, 100/1.5)
	}
}

// TestH2loadLogCountsResponsesByTheirEnd: h2load's log rows counted by the
// millisecond their response ended (start plus duration) give the
// requests between two CPU reads.
func TestH2loadLogCountsResponsesByTheirEnd(t *testing.T) {
	const startUS = 1_700_000_000_000_000
	var log bytes.Buffer
	// 2000 rows, one ending every 500 µs over 1 s.
	for i := range 2000 {
		fmt.Fprintf(&log, "%d\t200\t%d\n", startUS+int64(i)*500-100, 100)
	}
	var ends replyTimes
	l, err := parseH2loadLog(&log, nil, &ends)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMicro(startUS)
	if got := ends.between(t0, t0.Add(time.Second)); got != float64(l.Requests) {
		t.Errorf("%v responses over the second, want %d", got, l.Requests)
	}
	if got := ends.between(t0.Add(250*time.Millisecond), t0.Add(2*time.Second)); got != 1500 {
		t.Errorf("%v responses from 250 ms on, want 1500", got)
	}
}
