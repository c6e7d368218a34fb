package engine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/uring"
)

// TestDegradedSaidPerEngine runs two uring-napi engines, one after the other,
// each asking for busy polling and SEND_ZC from a kernel that refuses both
// (the NAPI registration as without CONFIG_NET_RX_BUSY_POLL, SEND_ZC's
// usage report as 6.0 and 6.1 do): each engine must say once, through its
// own Logf, that it runs without each, and send without SEND_ZC. One
// process-wide Once used to say only the first refusal of the first engine.
func TestDegradedSaidPerEngine(t *testing.T) {
	register, usable := registerNAPI, sendZCUsable
	registerNAPI = func(*uring.Ring, uring.NAPIConfig) (uring.NAPIConfig, error) {
		return uring.NAPIConfig{}, os.NewSyscallError("io_uring_register", unix.EINVAL)
	}
	sendZCUsable = func() error {
		return &uring.UnsupportedFeatureError{Feature: "IORING_OP_SEND_ZC with IORING_SEND_ZC_REPORT_USAGE", MinKernel: "6.2", Err: unix.EINVAL}
	}
	t.Cleanup(func() { registerNAPI, sendZCUsable = register, usable })
	for i := range 2 {
		var logs logLines
		cfg := testConfig(BackendURingNAPI)
		cfg.Logf = logs.logf
		cfg.SendZCThreshold = 4096
		e, addr := startEngine(t, cfg, &echoHandler{})
		if err := echoOnce(addr, uint64(i), 1<<20, 64<<10, nil); err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.ZCSends != 0 {
			t.Errorf("engine %d: %d SEND_ZC requests where the kernel refuses them", i, s.ZCSends)
		}
		for _, want := range []string{"without busy polling", "without SEND_ZC", "the kernel refuses SEND_ZC"} {
			if n := logs.count(want); n != 1 {
				t.Errorf("engine %d said %q %d times, want once; logs: %q", i, want, n, logs.all())
			}
		}
	}
}

// TestBackendSaysEachLoopsNAPIRefusal runs two uring-napi loops where the
// kernel takes the first ring's NAPI registration and refuses the
// other's: that loop runs plain uring, without busy polling. Backend
// said uring-napi for the engine all the same; once Run has started the
// loops it must say each loop's.
func TestBackendSaysEachLoopsNAPIRefusal(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for 2 loops")
	}
	register := registerNAPI
	var mu sync.Mutex
	var first *uring.Ring
	var firstErr error
	registerNAPI = func(r *uring.Ring, c uring.NAPIConfig) (uring.NAPIConfig, error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = r
		}
		if r != first {
			return uring.NAPIConfig{}, os.NewSyscallError("io_uring_register", unix.EINVAL)
		}
		c, firstErr = register(r, c)
		return c, firstErr
	}
	t.Cleanup(func() { registerNAPI = register })
	cfg := testConfig(BackendURingNAPI)
	cfg.CPUs = []int{0, 1}
	e, _ := startEngine(t, cfg, &echoHandler{})
	waitFor(t, "the loops to start", func() bool { return e.BufferPages() != "" })
	mu.Lock()
	err := firstErr
	mu.Unlock()
	if err != nil {
		// Dynamic tracking (6.9) is the ring's last try.
		t.Skipf("IORING_REGISTER_NAPI not supported (requires >= 6.9): %v", err)
	}
	var got []string
	for _, l := range e.Loops() {
		napi := make(chan bool, 1)
		l.Post(func() { napi <- l.be.(*uringBackend).napi })
		if <-napi {
			got = append(got, fmt.Sprintf("loop %d: %s", l.id, BackendURingNAPI))
		} else {
			got = append(got, fmt.Sprintf("loop %d: %s", l.id, BackendURing))
		}
	}
	if want := Backend(strings.Join(got, "; ")); e.Backend() != want {
		t.Errorf("Backend() = %s, want %s", e.Backend(), want)
	}
}

// TestSendZCProbeFailureSaid runs an engine asking for SEND_ZC where the
// probe could not ask the kernel (as in a network namespace whose loopback
// is down): it must send without SEND_ZC and say that the probe failed, with
// the probe's error, not that the kernel refuses SEND_ZC.
func TestSendZCProbeFailureSaid(t *testing.T) {
	usable := sendZCUsable
	probeErr := errors.New("uring: could not probe SEND_ZC: UDP socket on 127.0.0.1 to itself: connect: network is unreachable")
	sendZCUsable = func() error { return probeErr }
	t.Cleanup(func() { sendZCUsable = usable })
	var logs logLines
	cfg := testConfig(BackendURing)
	cfg.Logf = logs.logf
	cfg.SendZCThreshold = 4096
	e, addr := startEngine(t, cfg, &echoHandler{})
	if err := echoOnce(addr, 0, 1<<20, 64<<10, nil); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(); s.ZCSends != 0 {
		t.Errorf("%d SEND_ZC requests where the probe failed", s.ZCSends)
	}
	if n := logs.count("without SEND_ZC"); n != 1 {
		t.Errorf("said %q %d times, want once; logs: %q", "without SEND_ZC", n, logs.all())
	}
	if logs.count("refuses") != 0 || logs.count(probeErr.Error()) != 1 {
		t.Errorf("logs %q: want the probe's failure (%v), not a refusal", logs.all(), probeErr)
	}
}

// TestWarningsSaidPerEngine runs two engines of each kind one after the
// other where each must warn: uring-napi and epoll-busypoll on loopback,
// whose sockets have no NAPI id, and uring-sqpoll with a loop on every
// allowed CPU, leaving its SQPOLL thread unpinned. Each engine must say so
// once through its own Logf: process-wide Onces said it to the first
// engine only, as b67f997 found for the features loops run without.
func TestWarningsSaidPerEngine(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    Backend
		cpus []int
		want string
	}{
		{BackendURingNAPI, []int{0}, "have no NAPI id"},
		{BackendEpollBusyPoll, []int{0}, "have no NAPI id"},
		{BackendURingSQPoll, allowed, "the SQPOLL thread is not pinned"},
	} {
		t.Run(string(tc.b), func(t *testing.T) {
			for i := range 2 {
				var logs logLines
				cfg := testConfig(tc.b)
				cfg.CPUs, cfg.Logf = tc.cpus, logs.logf
				_, addr := startEngine(t, cfg, &echoHandler{})
				if err := echoOnce(addr, uint64(i), 4096, 4096, nil); err != nil {
					t.Fatal(err)
				}
				if logs.count("without busy polling") > 0 {
					t.Skipf("the kernel refuses NAPI busy polling: %q", logs.all())
				}
				if n := logs.count(tc.want); n != 1 {
					t.Errorf("engine %d said %q %d times, want once; logs: %q", i, tc.want, n, logs.all())
				}
			}
		})
	}
}

// TestNAPIWarningCostsNothing: napiSocket runs for each connection of a
// busy-poll backend, and where sockets have no NAPI id (loopback) neither
// its warning, said once, nor the error saying why may allocate per call
// (the warning's arguments were boxed at each call, and the error was a
// fmt.Errorf; comparing with that error's own allocations was flaky under
// -race, where sync.Pool drops a quarter of what is put in it, and fmt's
// printers with it).
func TestNAPIWarningCostsNothing(t *testing.T) {
	fd := loopbackFdWithoutNAPI(t)
	l := &Loop{e: &Engine{cfg: Config{Logf: func(string, ...any) {}}, backend: BackendURingNAPI}, backend: BackendURingNAPI}
	conn := &Conn{fd: fd}
	l.napiSocket(conn) // says it
	if n := testing.AllocsPerRun(100, func() { l.napiSocket(conn) }); n > 0 {
		t.Errorf("napiSocket allocates %v times per call once it has warned", n)
	}
}

// TestBatchWaitSaysKernelWithoutMinTimeout runs a uring engine with
// Config.BatchWait where the kernel has IORING_FEAT_MIN_TIMEOUT and where
// it has not (6.11 and older, hasMinWait replaced): there the loops wait
// without a minimum wait, which the engine said only through Logf, while
// its start-up line and accessors could not tell it from a loop that
// batches. BatchWait and the start-up line must say what the loops use.
func TestBatchWaitSaysKernelWithoutMinTimeout(t *testing.T) {
	const wait = 50 * time.Microsecond
	for _, has := range []bool{true, false} {
		t.Run(fmt.Sprintf("minTimeout=%v", has), func(t *testing.T) {
			if !has {
				real := hasMinWait
				hasMinWait = func(*uring.Ring) bool { return false }
				t.Cleanup(func() { hasMinWait = real })
			}
			var logs logLines
			cfg := testConfig(BackendURing)
			cfg.BatchWait = wait
			cfg.Logf = logs.logf
			e, _ := startEngine(t, cfg, &echoHandler{})
			report := startupReport(t, &logs)
			want, say := wait, ", batch wait 50µs,"
			if !has {
				want, say = 0, ", batch wait none,"
			} else if !kver.AtLeast(kver.Release(), "6.12") {
				t.Skip("IORING_FEAT_MIN_TIMEOUT not supported (requires >= 6.12)")
			}
			if got := e.BatchWait(); got != want {
				t.Errorf("BatchWait() = %v, want %v", got, want)
			}
			if !strings.Contains(report, say) {
				t.Errorf("start-up report %q does not say %q", report, say)
			}
		})
	}
}

// TestRingCloseFailuresSaidEach stops a uring engine of two loops whose
// rings' Close fails in both ways: one cannot confirm that its requests
// ended (its receive buffers and send slab stay mapped), the other fails
// otherwise. Each kind must be said once; both shared one Once, so that
// the second kind to come was never said.
func TestRingCloseFailuresSaidEach(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("needs 2 CPUs this process may run on, has %v", allowed)
	}
	var logs logLines
	cfg := testConfig(BackendURing)
	cfg.CPUs, cfg.Logf = allowed[:2], logs.logf
	e := newEngine(t, cfg, &echoHandler{})
	stop := runUntilStopped(t, e)
	waitFor(t, "the loops to start", func() bool { return e.BufferPages() != "" })

	// Loop 0's ring and send slab, to tell its Close and to unmap the slab
	// it leaves mapped.
	l := e.Loops()[0]
	type ring struct {
		r       *uring.Ring
		regions [][]byte
	}
	got := make(chan ring, 1)
	l.Post(func() {
		if ub, ok := l.be.(*uringBackend); ok {
			got <- ring{ub.r, slices.Clone(l.chunks.regions)}
		} else {
			got <- ring{}
		}
	})
	first := <-got
	if first.r == nil {
		// Its ring was refused at start (ENOMEM or EPERM: the engine said
		// why in its log) and it serves on epoll: nothing here to close.
		t.Fatalf("loop 0 is not on uring, its ring refused at start; the engine's log: %q", logs.all())
	}
	real := closeRing
	closeRing = func(r *uring.Ring, onto int) error {
		if err := real(r, onto); errors.Is(err, uring.ErrCancelUnconfirmed) {
			// The kernel did not confirm that the ring's requests had
			// ended: the Close left the ring's receive buffers mapped
			// for good, which TestMain is not to count. Nothing runs in
			// io-wq here, and a Close stalled past its wait on a loaded
			// host asks the kernel again (TestCloseAsksKernelAfterStall),
			// so only a cancel the kernel fails should get here. The
			// failure the test gives the loop stands: no request reads
			// a send slab here (no connection), so the slab may go.
			ringLeftMappings.Add(1)
		} else if err != nil {
			return err
		}
		if r == first.r {
			return fmt.Errorf("uring: Close: %w (a test's)", uring.ErrCancelUnconfirmed)
		}
		return os.NewSyscallError("close", unix.EBADF)
	}
	defer func() { closeRing = real }()
	before := LeftMappedBytes()
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	releaseLeftSlab(first.regions, LeftMappedBytes()-before)
	for _, want := range []string{"loop 0: closing its io_uring ring: uring: Close: " + uring.ErrCancelUnconfirmed.Error(), "loop 1: closing its io_uring ring: close: bad file descriptor"} {
		if n := logs.count(want); n != 1 {
			t.Errorf("said %q %d times, want once: %q", want, n, logs.all())
		}
	}
}

// TestNAPIWarningNamesLoopBackend: a uring-napi loop whose ring the kernel
// refused runs epoll-busypoll (runEpollInstead), and its warning about
// sockets without a NAPI id named the engine's backend, uring-napi, as the
// one whose busy polling does nothing; it must name the loop's.
func TestNAPIWarningNamesLoopBackend(t *testing.T) {
	fd := loopbackFdWithoutNAPI(t)
	var logs logLines
	l := &Loop{e: &Engine{cfg: Config{Logf: logs.logf}, backend: BackendURingNAPI}, backend: BackendEpollBusyPoll}
	l.napiSocket(&Conn{fd: fd})
	if n := logs.count("; epoll-busypoll busy polling does nothing for them"); n != 1 {
		t.Errorf("the warning does not name the loop's backend, epoll-busypoll: %q", logs.all())
	}
}

// loopbackFdWithoutNAPI returns the fd of a loopback TCP connection, open
// until t ends, and skips t where loopback sockets have a NAPI id.
func loopbackFdWithoutNAPI(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fd := int(f.Fd())
	if _, err := napiID(fd); err == nil {
		t.Skip("loopback sockets have a NAPI id here")
	}
	return fd
}
