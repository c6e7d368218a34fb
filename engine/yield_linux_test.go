package engine

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopYields checks that a busy loop passes through the Go scheduler
// more often than every 10 ms. The runtime's monitor (sysmon) counts a
// goroutine that has not been rescheduled for 10 ms as running too long,
// and from then on takes its P away on every one of its ticks while it
// waits in a system call, whether or not another P is idle. A loop that
// never yields stays in that state for good: sysmon keeps its 20 µs tick
// and every wait ends in exitsyscall's slow path. What that costs is a
// speed figure (docs/BENCHMARKS.md, "The scheduler and the loops"); this
// test checks the mechanism: Stats.Yields of every loop that served
// traffic.
func TestLoopYields(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, addr := startEngine(t, testConfig(b), &echoHandler{})
			const conns = 4
			const run = 500 * time.Millisecond
			loops := e.Loops()
			before := make([]Stats, len(loops))
			for i, l := range loops {
				before[i] = l.Stats()
			}
			var clients [conns]net.Conn
			for i := range clients {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				clients[i] = c
			}
			// Traffic for run, and on until 2,000 messages have been served
			// (a CPU-starved CI run, with SQPOLL's thread competing, served
			// 683 in 500 ms), but for at most 5 s.
			start := time.Now()
			var served atomic.Int64
			for _, err := range concurrently(conns, func(i int) error {
				msg := make([]byte, 64)
				for d := time.Since(start); d < run || served.Load() < 2000 && d < 5*time.Second; d = time.Since(start) {
					if err := roundTrip(clients[i], msg); err != nil {
						return err
					}
					served.Add(1)
				}
				return nil
			}) {
				t.Fatal(err)
			}
			elapsed := time.Since(start)
			busy := 0
			for i, l := range loops {
				s := l.Stats()
				reads, yields := s.Reads-before[i].Reads, s.Yields-before[i].Yields
				t.Logf("loop %d: %d messages, %d waits (%d interrupted by a signal), %d yields in %v",
					i, reads, s.Waits-before[i].Waits, s.Interrupted-before[i].Interrupted, yields, elapsed)
				if reads < 500 {
					continue // little or no traffic steered here
				}
				busy++
				// At least once per 10 ms of traffic: half of that, for a
				// loop that started late or sat out a collection.
				if want := uint64(elapsed / (20 * time.Millisecond)); yields < want {
					t.Errorf("loop %d yielded %d times in %v of traffic, want at least %d (once every 10 ms, sysmon's threshold)", i, yields, elapsed, want)
				}
			}
			if busy == 0 {
				t.Fatalf("no loop served 500 of the %d messages", served.Load())
			}
		})
	}
}

// TestWaitCPU checks Stats.WaitCPUNanos on loopback, where sockets have no
// NAPI id: no backend measures CPU inside its waits there, the busy-poll
// ones included, since their waits cannot poll a device (and the clock
// reads would only cost). Over a veth, where they do poll, the busy-poll
// backends measure it (TestBusyPollOverVeth).
func TestWaitCPU(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, addr := startEngine(t, testConfig(b), &echoHandler{})
			if err := echoOnce(addr, 1, 1<<20, 4096, nil); err != nil {
				t.Fatal(err)
			}
			s := e.Stats()
			t.Logf("%d waits, %d ns in them, %d ns of CPU", s.Waits, s.WaitNanos, s.WaitCPUNanos)
			if s.Waits == 0 || s.WaitNanos == 0 {
				t.Errorf("%d waits lasting %d ns counted for a 1 MiB echo", s.Waits, s.WaitNanos)
			}
			if s.WaitCPUNanos != 0 || s.NAPIIDs != 0 {
				t.Errorf("%s measured %d ns of CPU in waits (%d NAPI ids) on loopback, which has no NAPI ids to poll", b, s.WaitCPUNanos, s.NAPIIDs)
			}
		})
	}
}
