package engine

import (
	"net"
	"runtime"
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
// test checks the mechanism: Stats.Yields of every loop while it serves
// traffic and a timer.
//
// A loop yields before a wait, so it can yield only as often as it wakes,
// and only while its thread runs; the test counted elapsed time, and on a
// loaded CI machine failed now and then, when the clients were held up (no
// wake-ups) or the loop's thread waited for a CPU (here, under load, 40 to
// 75% of the time). So each loop also wakes every millisecond for a timer
// of its own, whatever the clients manage to send, the time its thread
// waited on a run queue (schedstat) does not count, and the traffic goes
// on until each loop's thread has had half a second to run in.
func TestLoopYields(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, addr := startEngine(t, testConfig(b), &echoHandler{})
			const conns = 4
			const run = 500 * time.Millisecond
			loops := e.Loops()
			var stop atomic.Bool
			defer stop.Store(true)
			ticking := make(chan struct{})
			for _, l := range loops {
				var tick func()
				tick = func() {
					if !stop.Load() {
						l.AfterFunc(time.Millisecond, tick)
					}
				}
				l.Post(func() {
					tick()
					ticking <- struct{}{}
				})
			}
			for range loops {
				<-ticking // and each loop's ThreadID is set
			}
			var clients [conns]net.Conn
			for i := range clients {
				clients[i] = mustDial(t, "tcp", addr)
			}
			before := make([]Stats, len(loops))
			delay0 := make([]time.Duration, len(loops))
			for i, l := range loops {
				before[i], delay0[i] = l.Stats(), runDelay(t, l)
			}
			// Traffic until every loop's thread has had run to run in (at
			// most 20 s).
			start := time.Now()
			var done atomic.Bool
			enough := make(chan struct{})
			go func() {
				defer close(enough)
				defer done.Store(true)
				for !done.Load() && time.Since(start) < 20*time.Second {
					time.Sleep(20 * time.Millisecond)
					ran := true
					for i, l := range loops {
						ran = ran && time.Since(start)-(runDelay(t, l)-delay0[i]) >= run
					}
					if ran {
						return
					}
				}
			}()
			for _, err := range concurrently(conns, func(i int) error {
				msg := make([]byte, 64)
				for !done.Load() {
					if err := roundTrip(clients[i], msg); err != nil {
						done.Store(true)
						return err
					}
				}
				return nil
			}) {
				t.Fatal(err)
			}
			<-enough
			elapsed := time.Since(start)
			for i, l := range loops {
				s := l.Stats()
				delayed := runDelay(t, l) - delay0[i]
				reads, yields := s.Reads-before[i].Reads, s.Yields-before[i].Yields
				t.Logf("loop %d: %d messages, %d waits (%d interrupted by a signal), %d yields in %v, %v of it waiting for a CPU",
					i, reads, s.Waits-before[i].Waits, s.Interrupted-before[i].Interrupted, yields, elapsed, delayed)
				// At least once per 10 ms that the thread could run: half
				// of that, for a loop that sat out a collection.
				if want := uint64((elapsed - delayed) / (20 * time.Millisecond)); yields < want {
					t.Errorf("loop %d yielded %d times in %v (%v of it waiting for a CPU), want at least %d (once every 10 ms, sysmon's threshold)", i, yields, elapsed, delayed, want)
				}
			}
		})
	}
}

// runDelay is the time l's thread has spent waiting on a run queue: ready
// to run but not running (the second field of its schedstat). Any
// goroutine.
func runDelay(t *testing.T, l *Loop) time.Duration {
	_, waited, err := threadSchedstat(l.ThreadID())
	if err != nil {
		t.Errorf("loop %d's schedstat: %v", l.ID(), err)
	}
	return waited
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

// TestTimerAfterSlowYield: a loop's yield (a Gosched every 8 ms) is a pass
// through the Go scheduler, which may take its time to give the loop
// goroutine its thread back when every P is busy. A timer due meanwhile
// runs once the yield has returned, not a whole timer's wait later: the
// wait that follows the yield is bounded from a clock read after it. Here
// a posted function sets a timer for 1 s on an idle loop, whose next
// yield then takes 1.2 s (gosched replaced: a scheduler that slow cannot
// be brought about on purpose). The wait before the timer was computed
// before the yield, 1 s from the post, and then counted from the yield's
// end (epoll_wait's timeout, the uring backends' relative kernel timeout
// submitted after it): the timer ran 1 s after the yield returned. The
// bound is half that: on a loaded host (CI's, load 16) the loop thread
// has been seen to get its CPU back 242 ms after the yield.
func TestTimerAfterSlowYield(t *testing.T) {
	const d, slowFor = time.Second, 1200 * time.Millisecond
	var slow atomic.Pointer[Loop] // the loop whose next yield is slow
	var yieldEnd atomic.Int64     // time.Time.UnixNano of the slow yield's end
	was := gosched
	t.Cleanup(func() { gosched = was })
	gosched = func(l *Loop) {
		if !slow.CompareAndSwap(l, nil) {
			runtime.Gosched()
			return
		}
		time.Sleep(slowFor)
		runtime.Gosched()
		// The yield has returned once the Go scheduler has given the
		// loop goroutine its thread back: under load that hand-off (to
		// another M and back, each waiting for a CPU) takes the
		// scheduler's time, not the wait's. (With the end taken before
		// it, CI once saw 1.07 s on uring-sqpoll under load; that the
		// hand-off was the cause is not proven.)
		yieldEnd.Store(time.Now().UnixNano())
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, _ := startEngine(t, cfg, &echoHandler{})
			l := e.Loops()[0]
			ran := make(chan time.Time, 1)
			// Idle for longer than yieldEvery: the loop yields before
			// its next wait, after the posted function.
			time.Sleep(5 * yieldEvery)
			l.Post(func() {
				l.AfterFunc(d, func() { ran <- time.Now() })
				slow.Store(l)
			})
			select {
			case at := <-ran:
				if slow.Load() != nil {
					t.Fatal("the loop did not yield after the posted function")
				}
				if late := at.Sub(time.Unix(0, yieldEnd.Load())); late > d/2 {
					t.Errorf("the timer, due during a yield of %v, ran %v after the yield returned", slowFor, late.Round(time.Millisecond))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the timer has not run after 10 s")
			}
		})
	}
}
