package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

func TestWakeupModes(t *testing.T) {
	rep, err := Wakeup(context.Background(), WakeupConfig{Samples: 8, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(WakeupModes) || rep.Schema != WakeupSchema {
		t.Fatalf("results %+v", rep.Results)
	}
	byMode := map[string]WakeupResult{}
	for _, r := range rep.Results {
		byMode[r.Mode] = r
		if r.Skipped != "" {
			// A mode may be missing only on a kernel too old for it.
			need := map[string][2]int{WakeURing: {6, 1}, WakeURingNAPI: {6, 9}}[r.Mode]
			if kver.AtLeast(kver.Release(), fmt.Sprintf("%d.%d", need[0], need[1])) {
				t.Errorf("%s skipped on kernel %s (new enough): %s", r.Mode, kver.Release(), r.Skipped)
			} else {
				t.Logf("%s skipped (kernel %s older than %d.%d): %s", r.Mode, kver.Release(), need[0], need[1], r.Skipped)
			}
			continue
		}
		if r.Samples != 8 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P50 {
			t.Errorf("%s: %+v", r.Mode, r)
		}
	}
	// Spinning burns the reader's CPU between writes by construction;
	// blocking does not. A reader starved by other processes on a shared
	// machine may not have run between the writes at all (its samples wait
	// in the socket and it reads them in one burst): measure again, up to
	// twice, before calling it a failure.
	spin, block := byMode[WakeSpin], byMode[WakeBlock]
	for try := 0; spin.ReaderCPUPercent < 10 || spin.ReaderCPUPercent <= block.ReaderCPUPercent; try++ {
		if try == 2 {
			t.Errorf("spin reader CPU %.1f%%, block %.1f%%: spin should burn its CPU", spin.ReaderCPUPercent, block.ReaderCPUPercent)
			break
		}
		t.Logf("spin reader CPU %.1f%% (p50 %.0f µs), block %.1f%%: measuring again", spin.ReaderCPUPercent, spin.Latency.P50, block.ReaderCPUPercent)
		again, err := Wakeup(context.Background(), WakeupConfig{Modes: []string{WakeBlock, WakeSpin}, Samples: 8, Interval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		block, spin = again.Results[0], again.Results[1]
	}
	t.Logf("%+v", rep.Results)
}

func TestWakeupUnknownMode(t *testing.T) {
	if _, err := Wakeup(context.Background(), WakeupConfig{Modes: []string{"nap"}}); err == nil {
		t.Fatal("accepted an unknown mode")
	}
}

// TestWakeupWriterFailsBeforeConnect: a writer that cannot start (here its
// CPU does not exist) fails the run, and the reader waiting in accept for
// it is ended, its listening socket closed, before Wakeup returns. The
// reader stayed in accept for good, with its socket and locked thread.
func TestWakeupWriterFailsBeforeConnect(t *testing.T) {
	const badCPU = 1023
	if allowed, err := allowedCPUs(); err != nil || slices.Contains(allowed, badCPU) {
		t.Skipf("CPU %d exists here (%v)", badCPU, err)
	}
	before := openSockets(t)
	_, err := Wakeup(context.Background(), WakeupConfig{Modes: []string{WakeBlock}, Samples: 2, Interval: time.Millisecond, WriterCPU: new(badCPU)})
	if err == nil {
		t.Fatalf("Wakeup with the writer on CPU %d succeeded", badCPU)
	}
	for fd, link := range openSockets(t) {
		if before[fd] != link {
			t.Errorf("fd %s (%s) left open by Wakeup, which failed: %v", fd, link, err)
		}
	}
}

// openSockets returns this process's open sockets, fd number to link.
func openSockets(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(link, "socket:") {
			out[e.Name()] = link
		}
	}
	return out
}

// TestWakeupNotOnMainThread: Wakeup's reader and writer pin their threads
// and never unlock them; on the process's main thread the runtime would
// park that thread for good, pinned, which sched_getaffinity of the
// process's id then shows. After several runs the main thread must still
// have every CPU it had. Found in review.
func TestWakeupNotOnMainThread(t *testing.T) {
	needTwoAllowedCPUs(t)
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &before); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := Wakeup(context.Background(), WakeupConfig{Modes: []string{WakeBlock}, Samples: 2, Interval: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		var now unix.CPUSet
		if err := unix.SchedGetaffinity(os.Getpid(), &now); err != nil {
			t.Fatal(err)
		}
		if now != before {
			t.Fatalf("run %d: the main thread's CPUs are %d of %d: a pinned thread of Wakeup's was the main thread", i, now.Count(), before.Count())
		}
	}
}

// TestWakeupWriterOnCPU0: a writer put on CPU 0 explicitly, with the
// reader there too, runs there. Zero meant "the default" (CPU 1 where the
// reader is on 0), so CPU 0 could not be chosen for the writer.
func TestWakeupWriterOnCPU0(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 || allowed[0] != 0 {
		t.Skipf("needs CPU 0 and another CPU this process may run on (the writer's default is then not CPU 0), has %v", allowed)
	}
	rep, err := Wakeup(context.Background(), WakeupConfig{Modes: []string{WakeBlock}, Samples: 2, Interval: time.Millisecond, ReaderCPU: 0, WriterCPU: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ReaderCPU != 0 || rep.WriterCPU != 0 {
		t.Errorf("reader on CPU %d, writer on CPU %d; want both on CPU 0, as asked", rep.ReaderCPU, rep.WriterCPU)
	}
}

// TestWakeupCPUDefaults: a nil WriterCPU selects the default (CPU 1 where
// the reader is on CPU 0 and there is another CPU, else CPU 0); a given
// one, CPU 0 included, is kept; negative CPUs are refused.
func TestWakeupCPUDefaults(t *testing.T) {
	multi := runtime.NumCPU() > 1
	def0 := 0
	if multi {
		def0 = 1
	}
	tests := []struct {
		name       string
		reader     int
		writer     *int
		wantWriter int
		wantErr    bool
	}{
		{"defaults", 0, nil, def0, false},
		{"reader on 1, writer default", 1, nil, 0, false},
		{"writer on 0 with the reader", 0, new(0), 0, false},
		{"writer on 0, reader on 1", 1, new(0), 0, false},
		{"writer on 1 with the reader", 1, new(1), 1, false},
		{"negative writer", 0, new(-1), 0, true},
		{"negative reader", -1, nil, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := WakeupConfig{ReaderCPU: tc.reader, WriterCPU: tc.writer}.withDefaults()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("accepted reader %d, writer %d", c.ReaderCPU, *c.WriterCPU)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ReaderCPU != tc.reader || *c.WriterCPU != tc.wantWriter {
				t.Errorf("reader %d, writer %d; want %d, %d", c.ReaderCPU, *c.WriterCPU, tc.reader, tc.wantWriter)
			}
		})
	}
}

// TestWakeupDefaultWriterAllowed: the default writer CPU is one the
// process may run on. On a thread allowed only its last CPU c, with the
// reader there, the writer goes to c too: it went to CPU 0 (or 1 with the
// reader on 0) whatever the affinity, and pinning it there failed.
func TestWakeupDefaultWriterAllowed(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("needs two CPUs this process may run on (the default writer CPU then differs from the reader's), has %v", allowed)
	}
	c := allowed[len(allowed)-1]
	type result struct {
		writer int
		err    error
	}
	done := make(chan result)
	go func() {
		// The thread's affinity is narrowed and never restored: it stays
		// locked, so the runtime ends it with the goroutine.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(c)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- result{err: err}
			return
		}
		cfg, err := WakeupConfig{ReaderCPU: c}.withDefaults()
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{writer: *cfg.WriterCPU}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.writer != c {
		t.Errorf("allowed only CPU %d, reader there: default writer on CPU %d, want %d", c, r.writer, c)
	}
}
