package engine

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/proctask"
	"github.com/spindlenet/spindle/uring"
)

// TestIOWQPlacement runs a loop pinned to the last allowed CPU and checks
// that its ring's io-wq is placed: the start-up report says where, the
// limits read back through the ring are iowqMaxWorkers (8 and RLIMIT_NPROC
// without placeIOWQ, on this 2-CPU VM), and a NOP the test forces to io-wq
// on the loop's ring (IOSQE_ASYNC; the engine's own requests do not go
// there) runs on a worker that may run on the loop's CPU alone (uring) or
// the SQPOLL thread's (uring-sqpoll, on the first CPU: without placeIOWQ
// the SQ thread's worker was seen allowed on the loop's CPU alone, 6.18;
// a loop thread's own worker was seen on the loop's CPU without it too, so
// for uring only the report and the limits tell). Without SQPOLL the
// loop's thread, whose io-wq workers stay pinned, exits with the loop
// instead of going back to the Go scheduler.
func TestIOWQPlacement(t *testing.T) {
	cpus := allowedCPUList(t)
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs, to tell one from all and to keep the SQPOLL thread off the loop's; allowed: %v", cpus)
	}
	f, err := uring.Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{uring.FeatIOWQAff, uring.FeatIOWQMaxWorkers} {
		if !f.Has(name) {
			// The engine needs 6.1; both are 5.15 at the latest.
			t.Fatalf("%s missing on %s: %v", name, f.Kernel, f.Err(name))
		}
	}
	loopCPU, sqCPU := cpus[len(cpus)-1], cpus[0]
	for _, tc := range []struct {
		b      Backend
		want   int    // the workers' CPU
		report string // in the start-up report
	}{
		{BackendURing, loopCPU, "io-wq workers on each loop's CPU, at most 2 bounded and 2 unbounded per loop"},
		{BackendURingSQPoll, sqCPU, fmt.Sprintf("io-wq workers on the SQPOLL thread's CPU %d, at most 2 bounded and 2 unbounded for the SQPOLL thread", sqCPU)},
	} {
		t.Run(string(tc.b), func(t *testing.T) {
			var logs logLines
			cfg := testConfig(tc.b)
			cfg.CPUs = []int{loopCPU}
			cfg.Logf = logs.logf
			e := newEngine(t, cfg, &echoHandler{})
			stopRun := runUntilStopped(t, e)
			stop := func() {
				if err := stopRun(); err != nil {
					t.Errorf("Run: %v", err)
				}
			}

			report := startupReport(t, &logs)
			if !strings.Contains(report, tc.report) {
				t.Errorf("start-up report %q does not say %q", report, tc.report)
			}

			// On the loop: read the limits, force a NOP to io-wq.
			l := e.Loops()[0]
			type limits struct {
				bounded, unbounded uint32
				err                error
				fd                 int // the ring's
			}
			got := make(chan limits, 1)
			l.Post(func() {
				b := l.be.(*uringBackend)
				var x limits
				x.bounded, x.unbounded, x.err = b.r.RegisterIOWQMaxWorkers(0, 0)
				x.fd = b.r.Fd()
				q := b.sqe()
				q.PrepNop(udata(opCancel, 0, 0)) // a completion the loop counts off
				q.SetFlags(uring.FlagAsync)
				b.inflight++
				got <- x
			})
			x := <-got
			if x.err != nil || x.bounded != iowqMaxWorkers || x.unbounded != iowqMaxWorkers {
				t.Errorf("io-wq limits read back: %d, %d, %v; want %d, %d", x.bounded, x.unbounded, x.err, iowqMaxWorkers, iowqMaxWorkers)
			}

			// The worker belongs to the submitting thread: the loop's, or
			// the SQ thread the ring's fdinfo names.
			owner := l.ThreadID()
			if tc.b == BackendURingSQPoll {
				owner = sqThreadOf(t, x.fd)
			}
			want := strconv.Itoa(tc.want)
			// A thread the loop took over from the Go scheduler may have
			// an idle worker from before, outside the new mask: the kernel
			// ends it at its next idle timeout (5 s). One that stays with
			// another affinity fails the test.
			var seen []string
			defer func() {
				if t.Failed() {
					t.Logf("io-wq workers of thread %d, last seen: %v", owner, seen)
				}
			}()
			waitFor(t, fmt.Sprintf("io-wq workers of thread %d on CPU %s alone", owner, want), func() bool {
				seen = seen[:0]
				ok := true
				for _, w := range proctask.IOWorkers(owner) {
					cpus, err := proctask.CPUsAllowed(w)
					if err != nil {
						continue // exited meanwhile
					}
					seen = append(seen, fmt.Sprintf("%d: %s", w, cpus))
					ok = ok && cpus == want
				}
				return ok && len(seen) > 0
			})

			stop()
			if tc.b == BackendURing && owner != os.Getpid() {
				waitFor(t, fmt.Sprintf("the loop's thread %d to exit", owner), func() bool {
					_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", owner))
					return os.IsNotExist(err)
				})
			}
		})
	}
}

// startupReport waits for Run's start-up report in logs and returns it.
func startupReport(t *testing.T, logs *logLines) string {
	t.Helper()
	waitFor(t, "the start-up report", func() bool { return logs.count(" loops on CPUs ") == 1 })
	for _, s := range logs.all() {
		if strings.Contains(s, " loops on CPUs ") {
			return s
		}
	}
	panic("unreachable: counted above")
}

// TestIOWQRefusedSaid runs an engine of two loops where the kernel refuses
// the io-wq affinity (as one older than 5.14 would): the loops serve, the
// engine says so once, still bounds the workers, and its start-up report
// says where they run.
func TestIOWQRefusedSaid(t *testing.T) {
	register := registerIOWQAffinity
	registerIOWQAffinity = func(*uring.Ring, []int) error {
		return &uring.UnsupportedFeatureError{Feature: uring.FeatIOWQAff, MinKernel: "5.14", Err: os.NewSyscallError("io_uring_register", unix.EINVAL)}
	}
	t.Cleanup(func() { registerIOWQAffinity = register })
	var logs logLines
	cfg := testConfig(BackendURing)
	cfg.Logf = logs.logf
	e, addr := startEngine(t, cfg, &echoHandler{})
	if err := echoOnce(addr, 0, 64<<10, 4096, nil); err != nil {
		t.Fatal(err)
	}
	want := "io-wq workers on any CPU (pinning them failed), at most 2 bounded and 2 unbounded per loop"
	if report := startupReport(t, &logs); !strings.Contains(report, want) {
		t.Errorf("start-up report %q does not say %q", report, want)
	}
	if n := logs.count("pinning the rings' io-wq workers failed"); n != 1 {
		t.Errorf("the refusal was said %d times by %d loops, want once; logs: %q", n, len(e.Loops()), logs.all())
	}
}

// sqThreadOf returns the id of the SQ thread of the SQPOLL ring fd, from
// its fdinfo (SqThread), which the kernel leaves out while the ring is
// busy: read until it says. Not from new iou-sqp threads in
// /proc/self/task: reading that directory while threads exit can skip
// some.
func sqThreadOf(t *testing.T, fd int) int {
	t.Helper()
	tid := 0
	waitFor(t, fmt.Sprintf("an SQ thread in the fdinfo of ring %d", fd), func() bool {
		info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "SqThread:"); ok {
				tid, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		return tid > 0
	})
	return tid
}
