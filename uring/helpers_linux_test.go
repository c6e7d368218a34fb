package uring

import (
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

// probed is this kernel's Probe, run once, for needFeatures.
var probed struct {
	once sync.Once
	f    *Features
	err  error
}

// needFeatures skips t when Probe finds one of the named features (an
// IORING_* name or a Feat* constant) missing on a kernel older than the
// release that added it, naming the feature and the release, and fails t
// when the kernel is that new: a missing feature is a skip only where the
// kernel really lacks it.
func needFeatures(t testing.TB, names ...string) {
	t.Helper()
	probed.once.Do(func() { probed.f, probed.err = Probe() })
	if probed.err != nil {
		t.Fatalf("Probe: %v", probed.err)
	}
	for _, name := range names {
		x, ok := probed.f.Get(name)
		switch {
		case !ok:
			t.Fatalf("feature %q is not probed", name)
		case x.Supported:
		case kver.AtLeast(probed.f.Kernel, x.MinKernel):
			t.Fatalf("%s missing on kernel %s, which should have it (>= %s): %s", name, probed.f.Kernel, x.MinKernel, x.Reason)
		default:
			t.Skipf("%s not supported (requires >= %s, have %s)", name, x.MinKernel, probed.f.Kernel)
		}
	}
}

// needKernel skips t on a kernel older than min, for a feature Probe does
// not report (a flag of an opcode): what says which.
func needKernel(t testing.TB, what, min string) {
	t.Helper()
	if k := kver.Release(); !kver.AtLeast(k, min) {
		t.Skipf("%s not supported (requires >= %s, have %s)", what, min, k)
	}
}

// configFeatures lists the features a ring set up with cfg needs, and
// EXT_ARG, which every timed wait (reap, expectNone) uses.
func configFeatures(cfg *Config) []string {
	names := []string{"IORING_FEAT_EXT_ARG"}
	if cfg == nil {
		return names
	}
	for _, f := range []struct {
		on   bool
		name string
	}{
		{cfg.SingleIssuer, "IORING_SETUP_SINGLE_ISSUER"},
		{cfg.DeferTaskrun, "IORING_SETUP_DEFER_TASKRUN"},
		{cfg.CoopTaskrun, "IORING_SETUP_COOP_TASKRUN"},
		{cfg.SQPoll, "IORING_SETUP_SQPOLL"},
		{cfg.SQAffinity, "IORING_SETUP_SQ_AFF"},
		{cfg.AttachWQ != nil, "IORING_SETUP_ATTACH_WQ"},
		{cfg.RegisterRingFD, "IORING_REGISTER_RING_FDS"},
	} {
		if f.on {
			names = append(names, f.name)
		}
	}
	return names
}

// newRing creates a ring closed at cleanup, or skips the test where the
// kernel lacks what cfg asks for (needFeatures). Configs that tie the ring
// to a thread lock the test goroutine first (released at cleanup, after
// Close).
func newRing(t testing.TB, cfg *Config) *Ring {
	t.Helper()
	needFeatures(t, configFeatures(cfg)...)
	if cfg != nil && (cfg.SingleIssuer || cfg.RegisterRingFD) {
		runtime.LockOSThread()
	}
	r, err := New(cfg)
	if err != nil {
		if cfg != nil && (cfg.SingleIssuer || cfg.RegisterRingFD) {
			runtime.UnlockOSThread()
		}
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if cfg != nil && (cfg.SingleIssuer || cfg.RegisterRingFD) {
			runtime.UnlockOSThread()
		}
	})
	return r
}

// sqe returns a fresh SQE or fails the test.
func sqe(t testing.TB, r *Ring) *SQE {
	t.Helper()
	s := r.GetSQE()
	if s == nil {
		t.Fatal("GetSQE: SQ full")
	}
	return s
}

// reap submits and collects exactly n completions within a deadline.
func reap(t testing.TB, r *Ring, n int) []CQE {
	t.Helper()
	out := make([]CQE, 0, n)
	buf := make([]CQE, 64)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d of %d completions: %+v", len(out), n, out)
		}
		if _, err := r.SubmitAndWait(1, 100*time.Millisecond); err != nil && !errors.Is(err, unix.ETIME) {
			t.Fatalf("SubmitAndWait: %v", err)
		}
		k := r.PeekCQEs(buf[:min(len(buf), n-len(out))])
		out = append(out, buf[:k]...)
	}
	return out
}

// expectNone checks that no completion arrives within d.
func expectNone(t testing.TB, r *Ring, d time.Duration) {
	t.Helper()
	if _, err := r.SubmitAndWait(1, d); err != nil && !errors.Is(err, unix.ETIME) {
		t.Fatalf("SubmitAndWait: %v", err)
	}
	var c [1]CQE
	if r.PeekCQEs(c[:]) != 0 {
		t.Fatalf("unexpected completion %+v", c[0])
	}
}

// waitFor polls ok until it holds, failing the test after 10 seconds.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func closeFd(t testing.TB, fd int) {
	t.Cleanup(func() { unix.Close(fd) })
}

// pipe returns a pipe's read and write ends, closed at cleanup.
func pipe(t testing.TB) (rfd, wfd int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	closeFd(t, p[0])
	closeFd(t, p[1])
	return p[0], p[1]
}

// listenTCP returns a listening loopback socket (closed at cleanup) and its
// address.
func listenTCP(t testing.TB) (int, netip.AddrPort) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 256); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	in := sa.(*unix.SockaddrInet4)
	return fd, netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
}

// dialTCP connects a blocking client socket (closed at cleanup).
func dialTCP(t testing.TB, ap netip.AddrPort) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		t.Fatal(err)
	}
	return fd
}

// tcpPair returns a connected loopback pair (client, server), closed at
// cleanup.
func tcpPair(t testing.TB) (int, int) {
	t.Helper()
	lfd, ap := listenTCP(t)
	c := dialTCP(t, ap)
	s, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, s)
	return c, s
}

// msgRingFdRings returns two rings, each with a sparse table of 4 fixed
// files, a's slot 0 holding the client end of a tcpPair, and the pair's
// server end: a fixed file for PrepMsgRingFd to pass from a to b.
func msgRingFdRings(t testing.TB) (*Ring, *Ring, int) {
	t.Helper()
	a := newRing(t, nil)
	b := newRing(t, nil)
	for _, r := range []*Ring{a, b} {
		if err := r.RegisterFiles(4); err != nil {
			t.Fatal(err)
		}
	}
	c, peer := tcpPair(t)
	if _, err := a.UpdateFiles(0, []int{c}); err != nil {
		t.Fatal(err)
	}
	return a, b, peer
}

// offHeap maps n bytes off the Go heap, unmapped at cleanup.
func offHeap(t testing.TB, n int) []byte {
	t.Helper()
	b, _, err := MapAnon(n, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmap(b) })
	return b
}

// pattern returns the test byte at stream offset i: a hash of the offset
// (splitmix64 of the 8-byte word index), so no two regions of a stream look
// alike and a buffer delivered at the wrong place or out of order fails the
// content check.
func pattern(i int) byte {
	x := uint64(i>>3) + 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	x ^= x >> 31
	return byte(x >> (8 * (i & 7)))
}

// expectRemoved reaps two completions: the request target, which must end
// with -ECANCELED and without F_MORE, and the cancel or remove SQE by that
// ended it, which must succeed.
func expectRemoved(t testing.TB, r *Ring, target, by uint64) {
	t.Helper()
	for _, c := range reap(t, r, 2) {
		switch c.UserData {
		case target:
			if !errors.Is(c.Err(), unix.ECANCELED) || c.More() {
				t.Errorf("request %d after removal: %+v (%v), want ECANCELED without F_MORE", target, c, c.Err())
			}
		case by:
			if c.Res != 0 {
				t.Errorf("removal %d: %v", by, c.Err())
			}
		default:
			t.Errorf("unexpected completion %+v", c)
		}
	}
}

// sendFixed sends msg on fixed-file slot of r and checks that peer reads
// exactly msg.
func sendFixed(t testing.TB, r *Ring, slot, peer int, msg string, userData uint64) {
	t.Helper()
	buf := offHeap(t, len(msg))
	copy(buf, msg)
	w := sqe(t, r)
	w.PrepSend(slot, buf, 0, userData)
	w.SetFlags(FlagFixedFile)
	if cq := reap(t, r, 1)[0]; cq.Res != int32(len(msg)) {
		t.Fatalf("send on fixed file %d: res %d (%v)", slot, cq.Res, cq.Err())
	}
	got := make([]byte, len(msg)+8)
	if n, _ := unix.Read(peer, got); string(got[:n]) != msg {
		t.Errorf("peer read %q, want %q", got[:n], msg)
	}
}

// newArena maps a one-page Arena, closed at cleanup.
func newArena(t testing.TB) *Arena {
	t.Helper()
	a, err := NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// arenaSockaddr returns a fresh arena holding ap encoded as a socket address.
func arenaSockaddr(t testing.TB, ap netip.AddrPort) (*Arena, []byte) {
	t.Helper()
	a := newArena(t)
	sa, err := a.Sockaddr(ap)
	if err != nil {
		t.Fatal(err)
	}
	return a, sa
}
