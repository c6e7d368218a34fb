package uring

import (
	"errors"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestAttachWQSQPoll shares one SQPOLL thread between two rings.
func TestAttachWQSQPoll(t *testing.T) {
	a := newRing(t, &Config{Entries: 8, SQPoll: true, SQAffinity: true, SQThreadCPU: 1 % runtime.NumCPU(), SQThreadIdle: 5 * time.Millisecond})
	b := newRing(t, &Config{Entries: 8, SQPoll: true, AttachWQ: a})
	for i, r := range []*Ring{a, b} {
		sqe(t, r).PrepNop(uint64(i))
		if c := reap(t, r, 1)[0]; c.UserData != uint64(i) || c.Res != 0 {
			t.Errorf("ring %d: %+v", i, c)
		}
	}
	// After the SQ thread went idle, a submission must wake it.
	time.Sleep(20 * time.Millisecond)
	sqe(t, b).PrepNop(9)
	if c := reap(t, b, 1)[0]; c.UserData != 9 {
		t.Errorf("after idle: %+v", c)
	}
}

// TestAttachWQRacesClose sets up rings attaching to a ring that its own
// goroutine closes at the same moment, then takes the freed fd number with
// eventfds: every attach must either share the ring's SQPOLL thread or see
// it closed (os.ErrClosed), never pass a number that now names another file
// (io_uring_setup: EINVAL or ENXIO).
func TestAttachWQRacesClose(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL", "IORING_SETUP_ATTACH_WQ")
	for i := range 200 {
		a, err := New(&Config{Entries: 4, SQPoll: true})
		if err != nil {
			t.Fatal(err)
		}
		attached := make(chan error, 1)
		start := make(chan struct{})
		go func() {
			<-start
			b, err := New(&Config{Entries: 4, SQPoll: true, AttachWQ: a})
			if err == nil {
				b.Close()
			}
			attached <- err
		}()
		close(start)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		var efds []int
		for range 4 {
			if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC); err == nil {
				efds = append(efds, fd)
			}
		}
		err = <-attached
		for _, fd := range efds {
			unix.Close(fd)
		}
		if err != nil && !errors.Is(err, os.ErrClosed) {
			t.Fatalf("attempt %d: attaching while the ring closed: %v", i, err)
		}
	}
}

// TestSubmitAll checks that an SQE failing at submission does not stop the
// SQEs after it (IORING_SETUP_SUBMIT_ALL).
func TestSubmitAll(t *testing.T) {
	needKernel(t, "IORING_SETUP_SUBMIT_ALL", "5.18")
	r := newRing(t, nil)
	sqe(t, r).PrepNop(1)
	bad := sqe(t, r)
	bad.PrepNop(2)
	bad.Opcode = 250 // no such opcode
	sqe(t, r).PrepNop(3)
	n, err := r.Submit()
	if err != nil || n != 3 {
		t.Fatalf("Submit = %d, %v; want all 3 consumed", n, err)
	}
	for _, c := range reap(t, r, 3) {
		if (c.UserData == 2) != (c.Err() != nil) {
			t.Errorf("completion %+v (%v)", c, c.Err())
		}
	}
}

// TestWaitRetriesEINTR interrupts a thread blocked in SubmitAndWait with
// signals: the wait must continue until the completion arrives.
func TestWaitRetriesEINTR(t *testing.T) {
	needFeatures(t, configFeatures(ownerConfig)...)
	sender := newRing(t, nil)
	var (
		mu     sync.Mutex
		target *Ring
		tid    int
	)
	ready := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := New(ownerConfig)
		if err != nil {
			result <- err
			close(ready)
			return
		}
		defer r.Close()
		mu.Lock()
		target, tid = r, unix.Gettid()
		mu.Unlock()
		close(ready)
		var c [1]CQE
		for r.PeekCQEs(c[:]) == 0 {
			if _, err := r.SubmitAndWait(1, 5*time.Second); err != nil {
				result <- err
				return
			}
		}
		if c[0].UserData != 77 {
			result <- errors.New("wrong completion")
			return
		}
		if r.eintr.Load() == 0 {
			result <- errors.New("no io_uring_enter was interrupted: the test did not exercise EINTR")
			return
		}
		result <- nil
	}()
	<-ready
	mu.Lock()
	fd, wtid, tr := -1, tid, target
	if tr != nil {
		fd = tr.Fd()
	}
	mu.Unlock()
	if fd < 0 {
		t.Fatal(<-result)
	}
	// Signal until an io_uring_enter of the waiter was interrupted (under
	// load the waiter may take a while to block), then wake it for real.
	// SIGURG is the runtime's preemption signal: harmless, and it
	// interrupts io_uring_enter.
	for deadline := time.Now().Add(5 * time.Second); tr.eintr.Load() == 0 && time.Now().Before(deadline); {
		unix.Tgkill(unix.Getpid(), wtid, unix.SIGURG)
		time.Sleep(2 * time.Millisecond)
	}
	sqe(t, sender).PrepMsgRing(fd, 0, 77, 0, 1)
	reap(t, sender, 1)
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("waiting ring: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting ring never saw the message")
	}
}

// TestMsgRingFd passes a fixed file from one ring to another.
func TestMsgRingFd(t *testing.T) {
	needFeatures(t, "IORING_OP_MSG_RING", "IORING_RSRC_REGISTER_SPARSE")
	needKernel(t, "IORING_MSG_SEND_FD", "6.0")
	a, b, s := msgRingFdRings(t)
	sqe(t, a).PrepMsgRingFd(b.Fd(), 0, 2, 0xabc, 0, 1)
	if cq := reap(t, a, 1)[0]; cq.Res != 0 {
		t.Fatalf("msg_ring send fd: %v", cq.Err())
	}
	if cq := reap(t, b, 1)[0]; cq.UserData != 0xabc {
		t.Fatalf("target: %+v", cq)
	}
	sendFixed(t, b, 2, s, "moved", 2)
}

func TestEncodeSockaddr(t *testing.T) {
	tests := []struct {
		ap      string
		n       int
		wantErr bool
	}{
		{"127.0.0.1:80", 16, false},
		{"[::1]:443", 28, false},
		{"[fe80::1%eth0]:1", 0, true},
	}
	for _, tt := range tests {
		ap := netip.MustParseAddrPort(tt.ap)
		var b [SockaddrMax]byte
		n, err := EncodeSockaddr(b[:], ap)
		if (err != nil) != tt.wantErr || n != tt.n {
			t.Errorf("EncodeSockaddr(%s) = %d, %v", tt.ap, n, err)
			continue
		}
		if err == nil {
			if got := decodeSockaddr(b[:n]); got != ap {
				t.Errorf("round trip %s -> %s", ap, got)
			}
		}
	}
	if _, err := EncodeSockaddr(make([]byte, 8), netip.MustParseAddrPort("1.2.3.4:5")); err == nil {
		t.Error("short buffer accepted")
	}
}

// decodeSockaddr is the reverse of EncodeSockaddr, via the kernel layout.
func decodeSockaddr(b []byte) netip.AddrPort {
	port := uint16(b[2])<<8 | uint16(b[3])
	if len(b) == 16 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port)
}

func FuzzEncodeSockaddr(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, uint16(80))
	f.Add(make([]byte, 16), uint16(0))
	f.Fuzz(func(t *testing.T, raw []byte, port uint16) {
		addr, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		ap := netip.AddrPortFrom(addr, port)
		var b [SockaddrMax]byte
		n, err := EncodeSockaddr(b[:], ap)
		if err != nil {
			t.Fatalf("EncodeSockaddr(%s): %v", ap, err)
		}
		if got := decodeSockaddr(b[:n]); got != ap {
			t.Fatalf("round trip %s -> %s", ap, got)
		}
	})
}

// TestConnectIPv6 connects over ::1 with an encoded sockaddr_in6.
func TestConnectIPv6(t *testing.T) {
	lfd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	if err := unix.Listen(lfd, 1); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(lfd)
	ap := netip.AddrPortFrom(netip.IPv6Loopback(), uint16(sa.(*unix.SockaddrInet6).Port))
	_, enc := arenaSockaddr(t, ap)
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, fd)
	r := newRing(t, nil)
	sqe(t, r).PrepConnect(fd, enc, 1)
	if c := reap(t, r, 1)[0]; c.Res != 0 {
		t.Fatalf("connect [::1]: %v", c.Err())
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"defer without single issuer", Config{DeferTaskrun: true}},
		{"defer with sqpoll", Config{DeferTaskrun: true, SingleIssuer: true, SQPoll: true}},
		{"coop with sqpoll", Config{CoopTaskrun: true, SQPoll: true}},
		{"idle without sqpoll", Config{SQThreadIdle: time.Millisecond}},
		{"cq smaller than sq", Config{Entries: 64, CQEntries: 8}},
		{"cq smaller than the default sq", Config{CQEntries: 64}},
		{"affinity without sqpoll", Config{SQAffinity: true}},
		{"no taskrun flag without taskrun", Config{NoTaskrunFlag: true}},
		{"negative sq thread cpu", Config{SQPoll: true, SQAffinity: true, SQThreadCPU: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
			if r, err := New(&tt.cfg); err == nil {
				r.Close()
				t.Fatal("New accepted it")
			} else if errors.Is(err, ErrNotSupported) {
				t.Errorf("reported as unsupported feature: %v", err)
			}
		})
	}
	// A combination only the kernel rejects is reported as invalid, not as a
	// missing feature: SQ_AFF on a CPU that does not exist.
	_, err := New(&Config{SQPoll: true, SQAffinity: true, SQThreadCPU: 4096})
	if err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("SQPOLL on CPU 4096: %v, want a plain setup error", err)
	}
}

// TestSQThreadIdleSubMillisecond checks that an SQThreadIdle below the
// kernel's millisecond resolution makes the SQPOLL thread sleep after about
// a millisecond of idleness, not after the kernel's default of one second
// (what sq_thread_idle 0 means): the thread sets IORING_SQ_NEED_WAKEUP well
// before that second is up.
func TestSQThreadIdleSubMillisecond(t *testing.T) {
	r := newRing(t, &Config{Entries: 4, SQPoll: true, SQThreadIdle: 500 * time.Microsecond})
	sqe(t, r).PrepNop(1)
	reap(t, r, 1)
	start := time.Now()
	for r.mem.SQFlags.Load()&sys.IORING_SQ_NEED_WAKEUP == 0 {
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("SQPOLL thread with a 500µs idle time still polling after %v", d)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConfigSizes checks sizes the kernel takes (rounded up to powers of
// two, and with IORING_SETUP_CLAMP clamped to 32768 SQ and 65536 CQ
// entries): Validate must not refuse them, and the default CQ size must not
// overflow.
func TestConfigSizes(t *testing.T) {
	tests := []struct {
		cfg    Config
		sq, cq uint32
	}{
		{Config{Entries: 100, CQEntries: 90}, 128, 128},
		{Config{Entries: 1 << 20, CQEntries: 1 << 16}, 1 << 15, 1 << 16},
		{Config{Entries: 1 << 31}, 1 << 15, 1 << 16},
		{Config{Entries: 3}, 4, 8},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); err != nil {
			t.Errorf("%+v: Validate: %v", tt.cfg, err)
			continue
		}
		r, err := New(&tt.cfg)
		if err != nil {
			t.Errorf("%+v: New: %v", tt.cfg, err)
			continue
		}
		if r.SQEntries() != tt.sq || r.CQEntries() != tt.cq {
			t.Errorf("%+v: SQ %d, CQ %d; want %d, %d", tt.cfg, r.SQEntries(), r.CQEntries(), tt.sq, tt.cq)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
