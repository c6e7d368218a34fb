package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/uring"
)

// wireTopology makes two network namespaces joined by a veth pair with GRO
// on and TSO off on both ends, so TCP sockets get NAPI ids. It returns the
// namespace names and the server address inside the first one.
func wireTopology(t testing.TB) (nsA, nsB, ipA string) {
	t.Helper()
	if err := veth.Requirements(); err != nil {
		var te *veth.ToolError
		if errors.As(err, &te) {
			t.Skipf("needs %s (apt-get install iproute2 ethtool)", te.Tool)
		}
		t.Skipf("two network namespaces joined by a veth pair, where TCP sockets have NAPI ids (loopback's have none): %v", err)
	}
	p, err := veth.New(veth.Config{Tag: "eng", AddrA: "10.201.0.1/24", AddrB: "10.201.0.2/24"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.NSA, p.NSB, p.IPA()
}

// inNetns runs f on a thread inside network namespace ns. Sockets f creates
// stay in ns. The thread returns to its namespace afterwards, or exits if
// it cannot.
func inNetns(t testing.TB, ns string, f func()) {
	t.Helper()
	if err := veth.InNetNS(veth.Path(ns), func() error { f(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestURingNAPIOverVeth checks the busy-poll backends over a real NAPI
// device: the accepted sockets have NAPI ids, uring-napi's rings get them
// in their static NAPI list with the registration in effect, and both
// backends then measure the CPU their waits spend busy polling.
func TestURingNAPIOverVeth(t *testing.T) {
	nsA, nsB, ip := wireTopology(t)
	for _, b := range []Backend{BackendURingNAPI, BackendEpollBusyPoll} {
		t.Run(string(b), func(t *testing.T) { busyPollOverVeth(t, b, nsA, nsB, ip, "static") })
	}
}

// TestURingNAPIDynamicFallback runs uring-napi over the veth as on kernels
// 6.9 to 6.12, which have NAPI registration but refuse static tracking (the
// registration hook returns the binding's error for it there): the loops
// must busy poll with dynamic tracking, the kernel learning the NAPI ids
// from the sockets it polls, and say so once. They ran without busy polling
// at all. The rings' fdinfo shows the registration in effect in dynamic
// mode, no static id is added, and the waits spend CPU busy polling.
func TestURingNAPIDynamicFallback(t *testing.T) {
	nsA, nsB, ip := wireTopology(t)
	var staticTries, adds atomic.Int64
	register, add := registerNAPI, addNAPIID
	registerNAPI = func(r *uring.Ring, c uring.NAPIConfig) (uring.NAPIConfig, error) {
		if c.Static {
			staticTries.Add(1)
			return uring.NAPIConfig{}, &uring.UnsupportedFeatureError{Feature: "IORING_REGISTER_NAPI static tracking", MinKernel: "6.13", Err: os.NewSyscallError("io_uring_register", unix.EINVAL)}
		}
		return register(r, c)
	}
	addNAPIID = func(r *uring.Ring, id uint32) error {
		adds.Add(1)
		return add(r, id)
	}
	t.Cleanup(func() { registerNAPI, addNAPIID = register, add })
	logs := busyPollOverVeth(t, BackendURingNAPI, nsA, nsB, ip, "dynamic")
	if staticTries.Load() == 0 {
		t.Error("static tracking was not tried")
	}
	if n := adds.Load(); n != 0 {
		t.Errorf("%d static NAPI ids added to rings with dynamic tracking", n)
	}
	said := 0
	for _, l := range logs {
		if strings.Contains(l, "NAPI busy polling") {
			said++
			if !strings.Contains(l, "dynamic tracking") {
				t.Errorf("log says %q, want dynamic tracking", l)
			}
		}
	}
	if said != 1 {
		t.Errorf("the tracking mode was said %d times, want once; logs: %q", said, logs)
	}
}

// busyPollOverVeth echoes over the veth on backend b and checks that its
// sockets have NAPI ids, that uring-napi's rings hold them (tracking
// "static" or "dynamic") with the registration in effect, and that the
// waits spend CPU busy polling. It returns what the engine logged.
func busyPollOverVeth(t *testing.T, b Backend, nsA, nsB, ip, tracking string) []string {
	napiIDs := make(chan int, 8)
	h := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
		id, _ := unix.GetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
		select {
		case napiIDs <- id:
		default:
		}
		c.Write(b.Bytes())
		return false
	}}
	var mu sync.Mutex
	var logs []string
	cfg := testConfig(b)
	cfg.Logf = func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	e := newEngine(t, cfg, h)
	if e.Backend() != b {
		t.Fatalf("engine runs %s", e.Backend())
	}
	var (
		ln  *Listener
		err error
	)
	inNetns(t, nsA, func() { ln, err = e.Listen("tcp", ip+":0", nil) })
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	var conns []net.Conn
	inNetns(t, nsB, func() {
		for i := 0; i < 4; i++ {
			c, err2 := net.Dial("tcp", ln.Addr().String())
			if err2 != nil {
				err = err2
				return
			}
			conns = append(conns, c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		defer c.Close()
		msg := make([]byte, 64)
		for i := 0; i < 10; i++ {
			c.Write(msg)
			if _, err := io.ReadFull(c, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := <-napiIDs
	if id < 257 {
		t.Fatalf("accepted socket over veth (GRO on, TSO off) has NAPI id %d", id)
	}
	mu.Lock()
	defer mu.Unlock()
	if b == BackendURingNAPI {
		if n := e.Stats().NAPIIDs; n == 0 {
			t.Fatalf("no NAPI id was added to the rings (socket NAPI id %d); logs: %q", id, logs)
		}
		checkNAPIRegistered(t, e, tracking)
	}
	if s := e.Stats(); s.WaitCPUNanos == 0 || s.WaitCPUNanos > s.WaitNanos+s.Waits*1000 {
		t.Errorf("busy-poll CPU inside waits %d ns for %d ns of waits (%d waits): want some, at most the waits' wall time", s.WaitCPUNanos, s.WaitNanos, s.Waits)
	} else {
		t.Logf("%d waits: %.2f ms in them, %.2f ms of it on the CPU (busy polling)", s.Waits, float64(s.WaitNanos)/1e6, float64(s.WaitCPUNanos)/1e6)
	}
	for _, l := range logs {
		if strings.Contains(l, "NAPI") && (strings.Contains(l, "fail") || strings.Contains(l, "no NAPI id")) {
			t.Errorf("unexpected: %s", l)
		}
	}
	return append([]string(nil), logs...)
}

// TestEpollBusyPollParams checks that epoll-busypoll loops have the
// configured busy-poll parameters in effect on their epoll instances.
// BusyPoll is whole microseconds rounded up, as uring-napi's registration
// takes it, and at most the kernel's S32_MAX: it was truncated (500ns was
// 0, no busy polling) and passed on beyond the kernel's bound (Run failed
// with EINVAL from EPIOCSPARAMS). Found in review.
func TestEpollBusyPollParams(t *testing.T) {
	for _, tc := range []struct {
		busy time.Duration
		want uint32
	}{
		{70 * time.Microsecond, 70},
		{500 * time.Nanosecond, 1},
		{1500 * time.Nanosecond, 2},
		{(math.MaxInt32 + 5) * time.Microsecond, math.MaxInt32},
	} {
		t.Run(tc.busy.String(), func(t *testing.T) {
			cfg := testConfig(BackendEpollBusyPoll)
			cfg.BusyPoll = tc.busy
			cfg.PreferBusyPoll = true
			e, _ := startEngine(t, cfg, &echoHandler{})
			for _, l := range e.Loops() {
				got := make(chan sys.EpollParams, 1)
				errc := make(chan error, 1)
				l.Post(func() {
					p, err := sys.EpollGetParams(l.be.(*epollBackend).epfd)
					errc <- err
					got <- p
				})
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				p := <-got
				if p.BusyPollUsecs != tc.want || p.PreferBusyPoll != 1 || p.BusyPollBudget == 0 {
					t.Errorf("loop %d: epoll params %+v, want %dµs, prefer, budget > 0", l.ID(), p, tc.want)
				}
			}
		})
	}
}

// TestURingSetup checks that each io_uring backend runs the ring setup it
// promises, rather than a degraded one.
func TestURingSetup(t *testing.T) {
	tests := []struct {
		b        Backend
		want     uint32
		wantNot  uint32
		attached bool // every loop but the first to start shares its SQPOLL thread
	}{
		{BackendURing, sys.IORING_SETUP_SINGLE_ISSUER | sys.IORING_SETUP_DEFER_TASKRUN, sys.IORING_SETUP_SQPOLL, false},
		{BackendURingNAPI, sys.IORING_SETUP_SINGLE_ISSUER | sys.IORING_SETUP_DEFER_TASKRUN, sys.IORING_SETUP_SQPOLL, false},
		{BackendURingSQPoll, sys.IORING_SETUP_SQPOLL, sys.IORING_SETUP_DEFER_TASKRUN, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(tc.b), &echoHandler{})
			// The loops start at once, and the first to get there makes
			// the ring the others attach to: loop 1 as well as loop 0,
			// when loop 0's thread waits its turn on a busy CPU.
			var own []int
			for _, l := range e.Loops() {
				type res struct {
					flags uint32
					napi  bool
				}
				got := make(chan res, 1)
				l.Post(func() {
					ub := l.be.(*uringBackend)
					got <- res{ub.r.SetupFlags(), ub.napi}
				})
				r := <-got
				if r.flags&tc.want != tc.want || r.flags&tc.wantNot != 0 {
					t.Errorf("loop %d: setup flags %#x, want %#x set and %#x clear", l.ID(), r.flags, tc.want, tc.wantNot)
				}
				if r.flags&sys.IORING_SETUP_ATTACH_WQ == 0 {
					own = append(own, l.ID())
				}
				if tc.b == BackendURingNAPI && !r.napi {
					t.Errorf("loop %d: NAPI registration not in effect", l.ID())
				}
			}
			if tc.attached && len(own) != 1 {
				t.Errorf("loops %v made SQPOLL rings of their own, want one, which the other loops attach to", own)
			}
			if tc.b == BackendURingNAPI {
				checkNAPIRegistered(t, e, "static")
			}
		})
	}
}

// checkNAPIRegistered reads the NAPI settings the kernel holds for each
// loop's ring from the ring's fdinfo (io_uring/fdinfo.c: "NAPI: enabled",
// "napi tracking: static|dynamic", napi_busy_poll_dt in ns,
// napi_prefer_busy_poll) and compares them with the engine's configuration
// and the tracking wanted.
func checkNAPIRegistered(t *testing.T, e *Engine, tracking string) {
	t.Helper()
	prefer := "false"
	if e.cfg.PreferBusyPoll {
		prefer = "true"
	}
	want := map[string]string{
		"NAPI":                  "enabled",
		"napi tracking":         tracking,
		"napi_busy_poll_dt":     strconv.FormatInt(int64((e.cfg.BusyPoll+time.Microsecond-1)/time.Microsecond*1000), 10),
		"napi_prefer_busy_poll": prefer,
	}
	for _, l := range e.Loops() {
		fdc := make(chan int, 1)
		l.Post(func() { fdc <- l.be.(*uringBackend).r.Fd() })
		info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", <-fdc))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, line := range strings.Split(string(info), "\n") {
			if k, v, ok := strings.Cut(line, ":\t"); ok {
				got[k] = v
			}
		}
		if _, ok := got["NAPI"]; !ok {
			t.Skipf("the ring's fdinfo has no NAPI section (an older kernel, or CONFIG_NET_RX_BUSY_POLL off):\n%s", info)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("loop %d: the ring's fdinfo says %s: %q, want %q", l.ID(), k, got[k], v)
			}
		}
	}
}
