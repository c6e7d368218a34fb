package uring

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/cpulist"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestProbe checks that every feature the running kernel is new enough for
// is reported as supported, except the zero-copy receive opcode family that
// needs NIC support.
func TestProbe(t *testing.T) {
	f, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if !f.Available || f.Kernel == "" {
		t.Fatalf("Probe: %+v", f)
	}
	if len(f.List) < 40 {
		t.Errorf("only %d features probed", len(f.List))
	}
	for _, x := range f.List {
		if x.MinKernel == "" || x.Name == "" || x.Kind == "" {
			t.Errorf("incomplete feature %+v", x)
		}
		if kver.AtLeast(f.Kernel, x.MinKernel) && !x.Supported {
			t.Errorf("%s (%s, >= %s) unsupported on %s: %s", x.Name, x.Kind, x.MinKernel, f.Kernel, x.Reason)
		}
	}
	for _, name := range []string{FeatNAPI, FeatNAPIStatic, FeatMultishotRecv, FeatMultishotAccept, FeatRecvBundle} {
		if kver.AtLeast(f.Kernel, "6.13") && !f.Has(name) {
			t.Errorf("%s not supported", name)
		}
	}
	if err := f.Err("no such feature"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Err(unknown) = %v", err)
	}
	if err := f.Err(FeatNAPI); err != nil {
		t.Errorf("Err(%s) = %v", FeatNAPI, err)
	}
}

func TestUnsupportedFeatureError(t *testing.T) {
	err := error(&UnsupportedFeatureError{Feature: "IORING_REGISTER_NAPI", MinKernel: "6.9"})
	if !errors.Is(err, ErrNotSupported) {
		t.Error("not ErrNotSupported")
	}
	if got, want := err.Error(), "IORING_REGISTER_NAPI not supported (requires >= 6.9)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestSetupErrorNeeds checks that setupError retries a flag together with
// the flags it needs: COOP_TASKRUN|TASKRUN_FLAG refused with EINVAL is an
// invalid combination on a kernel that has both, not a missing
// IORING_SETUP_TASKRUN_FLAG (which the kernel refuses alone).
func TestSetupErrorNeeds(t *testing.T) {
	if k := kver.Release(); !kver.AtLeast(k, "5.19") {
		t.Skipf("IORING_SETUP_COOP_TASKRUN not supported (requires >= 5.19, have %s)", k)
	}
	err := setupError(sys.IORING_SETUP_COOP_TASKRUN|sys.IORING_SETUP_TASKRUN_FLAG, 0, unix.EINVAL)
	if errors.Is(err, ErrNotSupported) {
		t.Errorf("setupError = %v, want an invalid combination", err)
	}
}

// TestProbeSQAffOffCPU0: in a cpuset without CPU 0 (a container pinned to
// other CPUs) the probe still finds IORING_SETUP_SQ_AFF: it asked for an
// SQ thread on CPU 0, which the kernel refuses outside the caller's cpuset,
// and so reported the feature missing. Found in review.
func TestProbeSQAffOffCPU0(t *testing.T) {
	var f *Features
	var err error
	last := inCpuset(t, func() { f, err = Probe() })
	if err != nil {
		t.Fatal(err)
	}
	if !f.Has("IORING_SETUP_SQPOLL") {
		t.Skip("no SQPOLL here")
	}
	if ft, _ := f.Get("IORING_SETUP_SQ_AFF"); !ft.Supported {
		t.Errorf("SQ_AFF reported missing in a cpuset of CPU %d: %s", last, ft.Reason)
	}
}

// TestSetupErrorOffCPU0: setupError, explaining a refused setup with
// SQ_AFF, retried SQ_AFF alone with an SQ thread on CPU 0, which a kernel
// refuses outside the caller's cpuset: in a cpuset without CPU 0 a refused
// SQ thread CPU (here CPU 0 itself) was reported as a kernel without
// IORING_SETUP_SQ_AFF.
func TestSetupErrorOffCPU0(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL", "IORING_SETUP_SQ_AFF")
	var newErr, err error
	inCpuset(t, func() {
		_, newErr = New(&Config{SQPoll: true, SQAffinity: true, SQThreadCPU: 0})
		err = setupError(sys.IORING_SETUP_SQPOLL|sys.IORING_SETUP_SQ_AFF, 0, unix.EINVAL)
	})
	for _, err := range []error{newErr, err} {
		if !errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNotSupported) {
			t.Errorf("SQ thread on CPU 0 outside the cpuset: %v, want EINVAL, not ErrNotSupported", err)
		} else if !strings.Contains(err.Error(), "SQ thread CPU 0") {
			t.Errorf("SQ thread on CPU 0 outside the cpuset: %q does not name the CPU", err)
		}
	}
}

// inCpuset runs fn on the test's thread, locked and moved into a new
// cgroup-v1 cpuset of the root cpuset's last CPU (which it returns), then
// moves the thread back and removes the cpuset. It skips where there is no
// such hierarchy (root) or no CPU but CPU 0.
func inCpuset(t *testing.T, fn func()) int {
	t.Helper()
	const root = "/sys/fs/cgroup/cpuset"
	if _, err := os.Stat(filepath.Join(root, "tasks")); err != nil {
		t.Skipf("needs the cgroup-v1 cpuset hierarchy at %s (root): %v", root, err)
	}
	cpus, err := os.ReadFile(filepath.Join(root, "cpuset.cpus"))
	if err != nil {
		t.Fatal(err)
	}
	mems, err := os.ReadFile(filepath.Join(root, "cpuset.mems"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := cpulist.Parse(strings.TrimSpace(string(cpus)))
	last := -1
	if len(list) > 0 {
		last = list[len(list)-1]
	}
	if last <= 0 {
		t.Skipf("needs a CPU other than CPU 0: cpuset.cpus %q", cpus)
	}
	dir := filepath.Join(root, fmt.Sprintf("spindle-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			t.Skipf("a cpuset of the test's own (CPU %d) needs write access to the cgroup-v1 cpuset hierarchy, root's: %v", last, err)
		}
		t.Fatal(err)
	}
	defer func() {
		// The SQPOLL threads fn started leave the cpuset as they exit, a
		// little after their rings are closed.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			err := os.Remove(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("cpuset %s left behind: %v", dir, err)
				return
			}
		}
	}()
	for file, v := range map[string]string{"cpuset.cpus": strconv.Itoa(last), "cpuset.mems": strings.TrimSpace(string(mems))} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	tid := []byte(strconv.Itoa(unix.Gettid()))
	if err := os.WriteFile(filepath.Join(dir, "tasks"), tid, 0o644); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	fn()
	// Back in the root cpuset the thread may run on all its CPUs: its own
	// affinity is set back too, or the thread stays locked and exits with
	// the test.
	if err := os.WriteFile(filepath.Join(root, "tasks"), tid, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	runtime.UnlockOSThread()
	return last
}

// TestProbeSendZC checks that the feature table's IORING_OP_SEND_ZC is what
// PrepSendZC needs: the release that added its usage report (6.2), not the
// opcode's (6.0, whose SEND_ZC refuses the report), supported on a kernel
// that new; and that the probe behind it reports a kernel's refusal of the
// SQE, as a 6.0 or 6.1 kernel refuses IORING_SEND_ZC_REPORT_USAGE: here a
// flag no kernel knows stands in for it.
func TestProbeSendZC(t *testing.T) {
	f, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	x, ok := f.Get("IORING_OP_SEND_ZC")
	if !ok || x.MinKernel != "6.2" {
		t.Fatalf("IORING_OP_SEND_ZC = %+v, want MinKernel 6.2 (IORING_SEND_ZC_REPORT_USAGE, which PrepSendZC sets)", x)
	}
	if kver.AtLeast(f.Kernel, "6.2") && !x.Supported {
		t.Errorf("IORING_OP_SEND_ZC unsupported on %s: %s", f.Kernel, x.Reason)
	}
	if err := probeSendZC(0); err != nil {
		t.Errorf("probeSendZC: %v", err)
	}
	err = probeSendZC(1 << 15)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("probeSendZC with an unknown ioprio flag: %v, want EINVAL", err)
	}
	// The refusal is the kernel's answer, which HasSendZC keeps.
	var verdict *probeVerdict
	if !errors.As(err, &verdict) {
		t.Errorf("probeSendZC's refusal %v is not a verdict: HasSendZC would probe again at every call", err)
	}
	if kver.AtLeast(f.Kernel, "6.2") && !HasSendZC() {
		t.Errorf("HasSendZC false on %s", f.Kernel)
	}
}

// TestProbeSendZCCouldNotAsk runs the SEND_ZC probe in a network namespace
// whose loopback is down, where it cannot bind its UDP socket to 127.0.0.1
// and so cannot ask the kernel: ProbeSendZC must say that with an error that
// is not the kernel's refusal (ErrNotSupported), HasSendZC reports false
// there, and the failure is not kept: back in the test's namespace the probe
// asks again and the kernel answers. A refusal, kept, is ErrNotSupported.
func TestProbeSendZCCouldNotAsk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN: not root")
	}
	forgetSendZC := func() {
		sendZC.mu.Lock()
		sendZC.known, sendZC.err = false, nil
		sendZC.mu.Unlock()
	}
	forgetSendZC()
	t.Cleanup(forgetSendZC)
	type result struct {
		err error
		has bool
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread leaves the test's network namespace
		// for good and exits with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setup: %w", os.NewSyscallError("unshare", err))}
			return
		}
		err := ProbeSendZC()
		done <- result{err, HasSendZC()}
	}()
	res := <-done
	if res.err != nil && strings.HasPrefix(res.err.Error(), "setup: ") {
		t.Fatal(res.err)
	}
	if res.err == nil {
		t.Fatal("ProbeSendZC succeeded in a network namespace with loopback down")
	}
	t.Logf("ProbeSendZC with loopback down: %v", res.err)
	if errors.Is(res.err, ErrNotSupported) {
		t.Errorf("ProbeSendZC with loopback down: %v: the kernel's refusal, but the probe never asked it", res.err)
	}
	if res.has {
		t.Error("HasSendZC true with loopback down")
	}
	if !kver.AtLeast(kver.Release(), "6.2") {
		return
	}
	if err := ProbeSendZC(); err != nil {
		t.Errorf("ProbeSendZC back in the test's namespace: %v (the failure to ask was kept?)", err)
	}

	// A refusal is the kernel's answer: kept, and ErrNotSupported.
	forgetSendZC()
	if err := sendZC.check(func() error { return probeSendZC(1 << 15) }); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("probe with an unknown ioprio flag: %v, want ErrNotSupported", err)
	}
	err := ProbeSendZC()
	var ue *UnsupportedFeatureError
	if !errors.As(err, &ue) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("ProbeSendZC after the kernel refused: %v, want the kept *UnsupportedFeatureError (EINVAL)", err)
	}
}

// TestProbeUnknownWithoutLoopback runs Probe in a network namespace whose
// loopback is down, where the multishot accept and SEND_ZC probes cannot
// connect or bind on 127.0.0.1 and so never ask the kernel: those features
// must be Unknown (not a kernel's refusal: Err is not ErrNotSupported and
// says the probe could not ask), and in the test's own namespace nothing is
// Unknown. Before, a host with loopback down read as a kernel without
// multishot accept ("requires >= 5.19").
func TestProbeUnknownWithoutLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN: not root")
	}
	if !kver.AtLeast(kver.Release(), "6.2") {
		t.Skip("multishot accept (5.19) and SEND_ZC with usage reports (6.2) needed to tell the two apart")
	}
	type result struct {
		f   *Features
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread leaves the test's network namespace
		// for good and exits with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- result{err: os.NewSyscallError("unshare", err)}
			return
		}
		f, err := Probe()
		done <- result{f, err}
	}()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, name := range []string{FeatMultishotAccept, "IORING_OP_SEND_ZC"} {
		x, ok := res.f.Get(name)
		if !ok || x.Supported || !x.Unknown {
			t.Errorf("%s with loopback down: %+v, want unsupported and unknown", name, x)
			continue
		}
		err := res.f.Err(name)
		if err == nil || errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "could not probe") {
			t.Errorf("%s with loopback down: Err = %v, want a failure to ask, not the kernel's refusal", name, err)
		}
	}
	if x, _ := res.f.Get(FeatMultishotRecv); !x.Supported {
		t.Errorf("multishot recv (a socketpair, no loopback needed) with loopback down: %+v", x)
	}
	f, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range f.List {
		if x.Unknown {
			t.Errorf("%s unknown in the test's namespace: %s", x.Name, x.Reason)
		}
	}
	if !f.Has(FeatMultishotAccept) {
		t.Errorf("multishot accept: %v", f.Err(FeatMultishotAccept))
	}
}

// TestProbeRecvUnknownWithoutDescriptors runs the multishot recv probe with
// one descriptor free below RLIMIT_NOFILE, so that its socketpair fails
// with EMFILE before the kernel is asked: that is a failure to ask (a
// *probeFailure, which Probe marks Unknown), not the kernel's refusal, and
// HasRecvLimit does not keep it. Before, Probe reported multishot recv,
// recv bundle and the recv byte limit unsupported on such a failure.
func TestProbeRecvUnknownWithoutDescriptors(t *testing.T) {
	if !kver.AtLeast(kver.Release(), "6.0") {
		t.Skipf("multishot recv not supported (requires >= 6.0, have %s)", kver.Release())
	}
	forgetRecvLimit := func() {
		recvLimit.mu.Lock()
		recvLimit.known, recvLimit.err = false, nil
		recvLimit.mu.Unlock()
	}
	forgetRecvLimit()
	t.Cleanup(forgetRecvLimit)
	var err, limitErr error
	withOneFreeFd(t, func() {
		err = probeRecv(false, 0)
		limitErr = recvLimit.check(func() error { return probeRecv(false, 2) })
	})
	var pf *probeFailure
	if !errors.As(err, &pf) || !errors.Is(err, unix.EMFILE) || errors.Is(err, ErrNotSupported) {
		t.Errorf("probe without descriptors: %v, want a *probeFailure wrapping EMFILE", err)
	}
	if !errors.As(limitErr, &pf) {
		t.Errorf("recv limit probe without descriptors: %v, want a *probeFailure", limitErr)
	}
	recvLimit.mu.Lock()
	kept := recvLimit.known
	recvLimit.mu.Unlock()
	if kept {
		t.Errorf("HasRecvLimit kept the failure to ask: %v", limitErr)
	}
	if err := probeRecv(false, 0); err != nil {
		t.Errorf("probe with descriptors again: %v", err)
	}
}

// withOneFreeFd runs f with RLIMIT_NOFILE lowered to leave exactly one
// descriptor free (the gaps below it filled), then closes the fillers and
// restores the limit.
func withOneFreeFd(t *testing.T, f func()) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	top := 0
	for _, ent := range ents {
		if n, err := strconv.Atoi(ent.Name()); err == nil {
			top = max(top, n)
		}
	}
	lim := old
	lim.Cur = uint64(top + 2)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fill []int
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			break
		}
		fill = append(fill, fd)
	}
	if len(fill) > 0 {
		// Leave the highest one free.
		unix.Close(fill[len(fill)-1])
		fill = fill[:len(fill)-1]
	}
	f()
	for _, fd := range fill {
		unix.Close(fd)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
}

// TestProbeReapAsksKernelAfterStall: a probe's thread may not run for longer
// than its wait (Ring.Close's was off its CPU for 2.7s at a load of about 14
// on 2 CPUs), and probeReap must still ask the kernel before it says no
// completion came. It gave up on its own clock instead, and Probe then
// reported the feature as unknown. The stall is a deadline already passed
// when probeReap starts, with a NOP prepared and not yet submitted (as the
// receive probe leaves its SQE to probeReap), or submitted; with nothing in
// flight it must still give up at once.
func TestProbeReapAsksKernelAfterStall(t *testing.T) {
	tests := []struct {
		name      string
		prepare   func(r *Ring) error
		completes bool
	}{
		{"prepared", func(r *Ring) error {
			sqe(t, r).PrepNop(7)
			return nil
		}, true},
		{"submitted", func(r *Ring) error {
			sqe(t, r).PrepNop(7)
			_, err := r.Submit()
			return err
		}, true},
		{"nothing in flight", func(*Ring) error { return nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(&Config{Entries: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := tt.prepare(r); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			c, err := probeReap(r, start.Add(-probeWait))
			if took := time.Since(start); took >= probeWait {
				t.Errorf("probeReap with its deadline passed took %v", took)
			}
			switch {
			case !tt.completes && err == nil:
				t.Errorf("probeReap with nothing in flight: %+v, want an error", c)
			case tt.completes && err != nil:
				t.Fatalf("probeReap with its deadline passed and a NOP to complete: %v", err)
			case tt.completes && (c.UserData != 7 || c.Res != 0):
				t.Errorf("probeReap: %+v, want the NOP's completion", c)
			}
		})
	}
}

// TestProbeShortSend checks what the engine's quiet SENDs rest on, as the
// probe sees it: on a kernel that reports the bytes a failed SEND sent
// (6.0), a MSG_DONTWAIT|MSG_WAITALL SEND cut short fails its link and,
// with FlagCQESkipSuccess, posts its result all the same; Probe lists both
// as supported, and HasShortSendLinkCut and HasShortSendSkipCleared say so.
// On an older kernel it only checks that the probe asked the kernel (a
// verdict either way, not a failure to ask).
func TestProbeShortSend(t *testing.T) {
	k := kver.Release()
	for _, skip := range []bool{false, true} {
		name, has := FeatShortSendLinkCut, HasShortSendLinkCut
		if skip {
			name, has = FeatShortSendSkipCleared, HasShortSendSkipCleared
		}
		t.Run(name, func(t *testing.T) {
			err := probeShortSend(skip)
			var failure *probeFailure
			if errors.As(err, &failure) {
				t.Fatalf("probeShortSend(%v) could not ask the kernel: %v", skip, err)
			}
			if !kver.AtLeast(k, "6.0") {
				t.Skipf("%s: %v (the kernel reports the bytes of a failed SEND from 6.0, have %s)", name, err, k)
			}
			if err != nil {
				t.Errorf("probeShortSend(%v) on %s: %v", skip, k, err)
			}
			if !has() {
				t.Errorf("%s false on %s", name, k)
			}
		})
	}
	f, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FeatShortSendLinkCut, FeatShortSendSkipCleared} {
		x, ok := f.Get(name)
		if !ok || x.Kind != "behaviour" || x.MinKernel != "6.0" {
			t.Errorf("%s = %+v, %v: want a behaviour from 6.0", name, x, ok)
		}
		if kver.AtLeast(f.Kernel, "6.0") && !x.Supported {
			t.Errorf("%s unsupported on %s: %s", name, f.Kernel, x.Reason)
		}
	}
}
