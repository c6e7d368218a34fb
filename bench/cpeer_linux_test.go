package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

// cpeerComm is the C server's thread name as /proc shows it: the binary's
// name cut to 15 bytes.
const cpeerComm = "spindle-c-libur"

// skipUnlessCPeer skips when the C reference server cannot be built here
// for want of cc or liburing-dev (CI installs both, so there it runs), or
// when io_uring is disabled. Any other build problem is a failure.
func skipUnlessCPeer(t *testing.T) {
	t.Helper()
	skipUnlessLinux(t)
	if err := CPeerUnavailable(); errors.Is(err, errMissingTool) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Skipf("io_uring disabled here (kernel.io_uring_disabled=%s)", strings.TrimSpace(string(b)))
	}
}

// startCPeer builds the C server and starts it the way the harness does,
// pinned to CPU 0.
func startCPeer(t *testing.T, extra ...string) *serverProc {
	t.Helper()
	skipUnlessCPeer(t)
	argv, err := BuildCPeer(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	argv = append(argv, "-arm", CPeerArm, "-listen", "127.0.0.1:0", "-cpus", "0", "-control")
	p, err := startServerProc(context.Background(), append(argv, extra...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestCPeerSetupModes: the server says which io_uring setup it got. On a
// kernel that has DEFER_TASKRUN (6.1) it must be that one, not a fallback;
// the fallback, forced with -no-defer-taskrun, must say so and serve too.
func TestCPeerSetupModes(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"", "io_uring SINGLE_ISSUER|DEFER_TASKRUN"},
		{"-no-defer-taskrun", "io_uring SINGLE_ISSUER|COOP_TASKRUN (-no-defer-taskrun)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			var extra []string
			if tc.flag != "" {
				extra = append(extra, tc.flag)
			}
			p := startCPeer(t, extra...)
			if p.hello.Arm != CPeerArm || p.hello.Pid != p.cmd.Process.Pid || !strings.HasPrefix(p.hello.Note, "io_uring ") {
				t.Fatalf("hello %+v (child pid %d)", p.hello, p.cmd.Process.Pid)
			}
			if kver.AtLeast(kver.Release(), "6.1") && p.hello.Note != tc.want {
				t.Fatalf("the kernel has DEFER_TASKRUN; the server says %q, want %q", p.hello.Note, tc.want)
			}
			res := loadUntilSent(t, LoadConfig{
				Addr: p.hello.Addr, Conns: 4, InFlight: 4, Warmup: 20 * time.Millisecond, Duration: 300 * time.Millisecond,
			})
			if res.Answered == 0 || res.Answered != res.Sent || res.Unanswered != 0 {
				t.Fatalf("%d requests sent in the window, %d answered, %d unanswered", res.Sent, res.Answered, res.Unanswered)
			}
		})
	}
}

// TestCPeerFrames sends frames in awkward pieces on fresh connections: a
// 1-byte payload byte by byte (the header split over four receives), a
// 1 MiB payload in uneven parts, several frames in one write, and two
// 1 MiB frames back to back (the second completes while the first one's
// reply is still being sent). Each must come back whole. A frame above
// 1 MiB and an HTTP request (the arm has no HTTP mode) close the
// connection without a reply.
func TestCPeerFrames(t *testing.T) {
	p := startCPeer(t)
	frame := func(payload []byte) []byte {
		return append([]byte{byte(len(payload) >> 24), byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload))}, payload...)
	}
	big := AppendRequest(nil, 1, 7, MaxPayload)
	tests := []struct {
		name   string
		chunks [][]byte
		want   []byte // nil: the server must close without replying
	}{
		{"1-byte payload byte by byte", split(frame([]byte{'x'}), 1, 1, 1, 1), frame([]byte{'x'})},
		{"empty payload", [][]byte{frame(nil)}, frame(nil)},
		{"header split from payload", split(AppendRequest(nil, 1, 2, 300), 2), AppendRequest(nil, 1, 2, 300)},
		{"several frames in one write", [][]byte{slices.Concat(AppendRequest(nil, 1, 3, 16), frame([]byte{'y'}), AppendRequest(nil, 1, 4, 40000))},
			slices.Concat(AppendRequest(nil, 1, 3, 16), frame([]byte{'y'}), AppendRequest(nil, 1, 4, 40000))},
		{"1 MiB payload in parts", split(big, 3, 700001), big},
		{"two 1 MiB frames in one write", [][]byte{slices.Concat(big, AppendRequest(nil, 1, 8, MaxPayload))},
			slices.Concat(big, AppendRequest(nil, 1, 8, MaxPayload))},
		{"payload above 1 MiB", [][]byte{{0, 0x10, 0, 1, 'z'}}, nil},
		{"HTTP request", [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", p.hello.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			werr := make(chan error, 1)
			go func() {
				for i, ch := range tc.chunks {
					if i > 0 {
						// Let the server receive each piece on its own.
						time.Sleep(2 * time.Millisecond)
					}
					if _, err := c.Write(ch); err != nil {
						werr <- err
						return
					}
				}
				werr <- nil
			}()
			if tc.want == nil {
				n, err := io.Copy(io.Discard, c)
				if err != nil && !errors.Is(err, unix.ECONNRESET) {
					t.Fatalf("waiting for the server to close: %v", err)
				}
				if n != 0 {
					t.Fatalf("server replied %d bytes to a request it must refuse", n)
				}
				<-werr
				return
			}
			got := make([]byte, len(tc.want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("echo of %d bytes differs from the request", len(got))
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// loadUntilSent runs RunLoad with cfg, and again with the window twice as
// long (up to 8 s) while no request was sent in it: on a loaded machine the
// client can stall through a short window (or the warm-up's 1 MiB round
// trips outlast it), which then checks nothing. It waits up to 10 s for
// the window's replies (the drain ends at the last one): the callers
// require every one, and a loaded machine (CI beside other work) had
// 100 KB replies outlast the default 1 s.
func loadUntilSent(t *testing.T, cfg LoadConfig) *LoadResult {
	t.Helper()
	if cfg.Drain == 0 {
		cfg.Drain = 10 * time.Second
	}
	for {
		res, err := RunLoad(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%d conns, %d-byte payload: %v", cfg.Conns, cfg.Payload, err)
		}
		if res.Sent > 0 || cfg.Duration >= 8*time.Second {
			return res
		}
		t.Logf("%d conns, %d B: nothing sent in %v; again for %v", cfg.Conns, cfg.Payload, cfg.Duration, 2*cfg.Duration)
		cfg.Duration *= 2
	}
}

// split cuts b at the given piece lengths; the rest is the last piece.
func split(b []byte, lens ...int) [][]byte {
	var out [][]byte
	for _, n := range lens {
		out = append(out, b[:n])
		b = b[n:]
	}
	if len(b) > 0 {
		out = append(out, b)
	}
	return out
}

// TestCPeerLoad drives verified load at the C server: 200 connections at
// once with small requests, then 100 KB requests (each spans several
// receive buffers) and 1 MiB ones on a few connections (many connections
// of large requests would keep a race-enabled client busy past the
// window). Its
// usage report must be the C process's own: every thread is the C
// server's, pinned to CPU 0, its per-thread run times add up to its
// getrusage time, and that time is more than nothing and no more than one
// CPU could give it since it started.
func TestCPeerLoad(t *testing.T) {
	start := time.Now()
	p := startCPeer(t)
	for _, tc := range []struct{ conns, size int }{{200, DefaultPayload}, {8, 100 << 10}, {2, MaxPayload}} {
		res := loadUntilSent(t, LoadConfig{
			Addr: p.hello.Addr, Conns: tc.conns, InFlight: 2, Payload: tc.size, Warmup: 20 * time.Millisecond, Duration: 500 * time.Millisecond,
		})
		if res.Answered == 0 || res.Answered != res.Sent || res.Unanswered != 0 {
			t.Fatalf("%d conns, %d-byte payload: %d requests sent in the window, %d answered, %d unanswered", tc.conns, tc.size, res.Sent, res.Answered, res.Unanswered)
		}
		t.Logf("%d conns, %d B: %.0f req/s, %s", tc.conns, tc.size, res.Throughput(), res.Hist)
	}
	u, err := p.usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.MonoNS <= 0 {
		t.Errorf("usage has no mono_ns: the harness cannot time the C server's rusage reads")
	}
	elapsed := time.Since(start)
	cpu := time.Duration(u.UserNS + u.SysNS)
	if cpu <= 0 || cpu > elapsed+10*time.Millisecond {
		t.Errorf("server CPU %v in %v of wall time on one pinned CPU", cpu, elapsed)
	}
	var run time.Duration
	for _, th := range u.Threads {
		run += time.Duration(th.RunNS)
		if th.Comm != cpeerComm || th.Processor != 0 {
			t.Errorf("thread %+v: want the C server's (%s) on CPU 0", th, cpeerComm)
		}
	}
	if len(u.Threads) == 0 || math.Abs(float64(run-cpu)) > 0.25*float64(cpu)+float64(10*time.Millisecond) {
		t.Errorf("threads ran %v, the process used %v (getrusage)", run, cpu)
	}
	if u.Counters["waits"] == 0 || u.Counters["cqes"] == 0 || u.Counters["accepts"] < 200+8+2+1 {
		t.Errorf("counters %v: want waits, completions and every connection accepted", u.Counters)
	}
	t.Logf("usage: %v CPU, counters %v", cpu, u.Counters)
}

// TestCPeerRun runs the c-liburing arm through the harness, next to the
// uring arm, with 200 connections, closed loop and open loop, every reply
// verified. The harness builds the C server itself; its CPU figures must
// be the C process's (its thread names) and consistent: the threads' run
// time adds up to the process's, and the server's CPU is part of the
// machine's.
func TestCPeerRun(t *testing.T) {
	skipUnlessCPeer(t)
	argv, env := testChildCommand()
	var progress strings.Builder
	rep, err := Run(context.Background(), Config{
		Arms: []string{CPeerArm, "uring"}, Duration: 2 * time.Second, Reps: 1, Conns: 200,
		OpenFractions: []float64{0.5}, ServerCommand: argv, ServerEnv: env, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Arms) != 2 || rep.Arms[0].Skipped != "" || rep.Arms[1].Skipped != "" {
		t.Fatalf("arms %+v", rep.Arms)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, "arm c-liburing: io_uring ") }) {
		t.Errorf("the report does not say which io_uring setup the C server got: %q", rep.Notes)
	}
	answered := 0
	for _, r := range rep.Results {
		if r.Arm != CPeerArm {
			continue
		}
		if r.Requests == 0 {
			continue // a starved window; TestRunEndToEnd checks the note
		}
		answered++
		s := r.Server
		if s.TotalUSPerReq <= 0 || s.KernelWaitsPerReq <= 0 || len(s.Threads) == 0 {
			t.Errorf("%s rep %d: no server accounting: %+v", r.Mode, r.Rep, s)
		}
		var threads float64
		for _, th := range s.Threads {
			threads += th.USPerReq
			if th.Comm != cpeerComm {
				t.Errorf("%s rep %d: server thread %q is not the C server's", r.Mode, r.Rep, th.Comm)
			}
		}
		if math.Abs(threads-s.TotalUSPerReq) > 0.25*s.TotalUSPerReq+0.5 {
			t.Errorf("%s rep %d: server threads sum to %.2f µs/req, the process to %.2f", r.Mode, r.Rep, threads, s.TotalUSPerReq)
		}
		// /proc/stat is sampled at the tick: allow a quarter for that.
		if m := r.Machine.TotalUSPerReq; s.TotalUSPerReq > 1.25*m+0.5 {
			t.Errorf("%s rep %d: server %.2f µs/req exceeds the whole machine's %.2f", r.Mode, r.Rep, s.TotalUSPerReq, m)
		}
	}
	if answered == 0 {
		t.Errorf("no c-liburing measurement got replies:\n%s", progress.String())
	}
	t.Log(progress.String())
}

// TestCPeerSweepCompute: in a sweep the C server burns --compute-us per
// request (latency and server CPU grow by it, so the CPU measured is the
// process that does the work), and sits out the two-loop cells with a
// note instead of failing the sweep.
func TestCPeerSweepCompute(t *testing.T) {
	skipUnlessCPeer(t)
	argv, env := testChildCommand()
	const compute = 200
	rep, err := Sweep(context.Background(), SweepConfig{
		Config: Config{Arms: []string{CPeerArm}, Duration: 1200 * time.Millisecond, Reps: 1, Conns: 4,
			ServerCommand: argv, ServerEnv: env},
		Loops: []int{1, 2}, ComputeUS: []int{0, compute},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2 (one loop, two compute values)", len(rep.Results))
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "not measured at 2 loops") }) {
		t.Errorf("no note for the two-loop cells: %q", rep.Notes)
	}
	// The compute shows as a difference between the two cells, not
	// against a fixed figure: on a loaded host (CI runs packages side by
	// side) the plain echo's CPU per request alone was seen at 68-89 µs.
	var cpu [2]float64
	for _, r := range rep.Results {
		if r.Loops != 1 {
			t.Errorf("measured at %d loops", r.Loops)
		}
		// A window the loaded machine starved (no replies, or CPU read
		// late, each said in a note) has no figures to compare.
		if r.Requests == 0 && !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "got no replies") }) {
			t.Fatalf("compute %d µs: no replies, and no note says so: %q", r.ComputeUS, rep.Notes)
		}
		if n := lateReads(rep, r); r.Requests == 0 || n != "" {
			t.Skipf("compute %d µs: %d replies; %s", r.ComputeUS, r.Requests, n)
		}
		if r.ComputeUS > 0 {
			cpu[1] = r.Server.TotalUSPerReq
			if r.Latency.P50 < compute {
				t.Errorf("compute %d µs: p50 %.1f µs", r.ComputeUS, r.Latency.P50)
			}
		} else {
			cpu[0] = r.Server.TotalUSPerReq
		}
	}
	if cpu[1]-cpu[0] < compute/4 {
		t.Errorf("server CPU per request %.1f µs with %d µs of compute, %.1f µs without", cpu[1], compute, cpu[0])
	}
}

// TestCPeerMissingTools: without a C compiler, or with one that has no
// liburing.h, the arm is unavailable with the reason and the package to
// install, and a run that asks for it skips it and measures the others.
func TestCPeerMissingTools(t *testing.T) {
	skipUnlessLinux(t)
	empty := t.TempDir()
	// A cc that fails as gcc does when a header is missing.
	noHeader := t.TempDir()
	script := "#!/bin/sh\necho '<stdin>:1:10: fatal error: liburing.h: No such file or directory' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(noHeader, "cc"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"no cc", empty, "no C compiler (cc not in PATH): apt-get install gcc"},
		{"no liburing.h", noHeader, "liburing-dev not installed (liburing.h not found): apt-get install liburing-dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			err := CPeerUnavailable()
			if !errors.Is(err, errMissingTool) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CPeerUnavailable() = %v, want %q", err, tc.want)
			}
			if _, err := BuildCPeer(context.Background(), t.TempDir()); !errors.Is(err, errMissingTool) {
				t.Fatalf("BuildCPeer: %v", err)
			}
			argv, env := testChildCommand()
			rep, err := Run(context.Background(), Config{
				Arms: []string{CPeerArm, "go-net"}, Duration: 300 * time.Millisecond, Reps: 1, Conns: 2,
				OpenFractions: []float64{}, ServerCommand: argv, ServerEnv: env,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Arms) != 2 || !strings.Contains(rep.Arms[0].Skipped, tc.want) || rep.Arms[1].Skipped != "" || len(rep.Results) != 1 {
				t.Fatalf("arms %+v, %d results", rep.Arms, len(rep.Results))
			}
		})
	}
}

// TestCPeerOldLiburing: liburing-dev older than 2.3 (Ubuntu 22.04 has 2.1),
// here the installed headers with io_uring_prep_recv_multishot hidden as
// 2.1 lacks it, makes the arm unavailable with that reason, as a missing
// liburing-dev does. It was reported available, and its build then failed
// with the compiler's errors (and these tests failed instead of skipping).
func TestCPeerOldLiburing(t *testing.T) {
	skipUnlessCPeer(t)
	inc := t.TempDir()
	hdr := "#include_next <liburing.h>\n/* As liburing 2.1: no multishot receive (2.3). */\n" +
		"#define io_uring_prep_recv_multishot io_uring_prep_recv_multishot_needs_2_3\n"
	if err := os.WriteFile(filepath.Join(inc, "liburing.h"), []byte(hdr), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CPATH", inc) // searched before the system's headers
	const want = "liburing-dev too old: the C server needs liburing 2.3 or later"
	if err := CPeerUnavailable(); !errors.Is(err, errMissingTool) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CPeerUnavailable() = %v, want %q", err, want)
	}
}

// TestCPeerAcceptBacksOff: at its descriptor limit (64 here, and 100
// connections waiting) the C server retries its failing accept after a
// back-off, 5 ms doubling to 1 s, and accepts again once connections close.
// It re-armed the accept at once, and spun on EMFILE (2.5 million failed
// accepts in a second, a whole CPU). 300 ms at the limit may see 7 with the
// back-off; the bound is 100.
func TestCPeerAcceptBacksOff(t *testing.T) {
	skipUnlessCPeer(t)
	argv, err := BuildCPeer(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, conns := startAtFdLimit(t, append(argv, "-arm", CPeerArm, "-cpus", "0", "-control"), nil)
	waitFds(t, p.cmd.Process.Pid, fdLimit)
	time.Sleep(300 * time.Millisecond) // the window the failed accepts are counted in
	for _, c := range conns {
		c.Close()
	}
	if err := selfCheck(p.hello.Addr); err != nil {
		t.Fatalf("once EMFILE had passed, a new connection: %v", err)
	}
	u, err := p.usage()
	if err != nil {
		t.Fatal(err)
	}
	if n := u.Counters["accept_errors"]; n == 0 || n > 100 {
		t.Errorf("%d failed accepts in 300 ms at the descriptor limit: want some, and a back-off", n)
	}
}

// TestCPeerNotServedByServeMain: `spindle bench server -arm c-liburing`
// says where the arm comes from instead of starting something else.
func TestCPeerNotServedByServeMain(t *testing.T) {
	err := ServeMain(context.Background(), []string{"-arm", CPeerArm}, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "program of its own") {
		t.Fatalf("ServeMain -arm %s: %v", CPeerArm, err)
	}
}

// TestCPeerInDefaultRun: the arm is in the default arm set, ordered with
// the baselines before the engine arms, and refuses more than one loop.
func TestCPeerInDefaultRun(t *testing.T) {
	a, err := LookupArm(CPeerArm)
	if err != nil {
		t.Fatal(err)
	}
	if a.Order >= 99 || a.Program == nil || a.MaxLoops != 1 || !strings.Contains(a.Summary, "no HTTP") {
		t.Fatalf("arm %+v", a)
	}
	var names []string
	for _, x := range Arms() {
		names = append(names, x.Name)
	}
	i, g, u := slices.Index(names, CPeerArm), slices.Index(names, "gnet"), slices.Index(names, "uring")
	if g < 0 || u < 0 || !(g < i && i < u) {
		t.Errorf("arm order %v: want c-liburing after gnet and before uring", names)
	}
}

// TestCPeerClosesNonReader: a multishot recv cannot be paused, so replies
// for a peer that sends without reading queue in the server; past 16 MiB
// queued the server closes the connection instead of growing without
// bound. The client sends 64 MiB of 1 MiB frames and never reads: its
// writes must fail before the end.
func TestCPeerClosesNonReader(t *testing.T) {
	p := startCPeer(t)
	c, err := net.Dial("tcp", p.hello.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	frame := AppendRequest(nil, 1, 1, MaxPayload)
	for i := range 64 {
		if _, err := c.Write(frame); err != nil {
			if !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
				t.Fatalf("write %d: %v, want the server to have closed the connection", i, err)
			}
			t.Logf("closed by the server after %d MiB sent", i)
			return
		}
	}
	t.Fatal("the server took 64 MiB of requests from a client that reads none of the replies")
}
