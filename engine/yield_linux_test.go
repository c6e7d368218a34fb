package engine

import (
	"net"
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
			deadline := time.Now().Add(run)
			for _, err := range concurrently(conns, func(i int) error {
				msg := make([]byte, 64)
				for time.Now().Before(deadline) {
					if err := roundTrip(clients[i], msg); err != nil {
						return err
					}
				}
				return nil
			}) {
				t.Fatal(err)
			}
			busy := 0
			for i, l := range loops {
				s := l.Stats()
				reads, yields := s.Reads-before[i].Reads, s.Yields-before[i].Yields
				t.Logf("loop %d: %d messages, %d waits (%d interrupted by a signal), %d yields in %v",
					i, reads, s.Waits-before[i].Waits, s.Interrupted-before[i].Interrupted, yields, run)
				if reads < 1000 {
					continue // little or no traffic steered here
				}
				busy++
				// At least once per 10 ms of traffic: half of that, for a
				// loop that started late or sat out a collection.
				if want := uint64(run / (20 * time.Millisecond)); yields < want {
					t.Errorf("loop %d yielded %d times in %v of traffic, want at least %d (once every 10 ms, sysmon's threshold)", i, yields, run, want)
				}
			}
			if busy == 0 {
				t.Fatal("no loop served 1,000 messages")
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
