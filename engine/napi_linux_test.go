package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
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
		t.Skip("needs root for network namespaces")
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
		t.Run(string(b), func(t *testing.T) { busyPollOverVeth(t, b, nsA, nsB, ip) })
	}
}

func busyPollOverVeth(t *testing.T, b Backend, nsA, nsB, ip string) {
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
	e, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if e.Backend() != b {
		t.Fatalf("engine runs %s", e.Backend())
	}
	var ln *Listener
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
		checkNAPIRegistered(t, e)
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
		attached bool // loops after the first share its SQPOLL thread
	}{
		{BackendURing, sys.IORING_SETUP_SINGLE_ISSUER | sys.IORING_SETUP_DEFER_TASKRUN, sys.IORING_SETUP_SQPOLL, false},
		{BackendURingNAPI, sys.IORING_SETUP_SINGLE_ISSUER | sys.IORING_SETUP_DEFER_TASKRUN, sys.IORING_SETUP_SQPOLL, false},
		{BackendURingSQPoll, sys.IORING_SETUP_SQPOLL, sys.IORING_SETUP_DEFER_TASKRUN, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(tc.b), &echoHandler{})
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
				if tc.attached && l.ID() > 0 && r.flags&sys.IORING_SETUP_ATTACH_WQ == 0 {
					t.Errorf("loop %d: SQPOLL ring not attached to loop 0's (flags %#x)", l.ID(), r.flags)
				}
				if tc.b == BackendURingNAPI && !r.napi {
					t.Errorf("loop %d: NAPI registration not in effect", l.ID())
				}
			}
			if tc.b == BackendURingNAPI {
				checkNAPIRegistered(t, e)
			}
		})
	}
}

// checkNAPIRegistered asks each loop's ring for the NAPI settings the kernel
// holds (registering the same ones again returns the previous) and
// compares them with the engine's configuration: busy-poll time, prefer
// flag, static tracking.
func checkNAPIRegistered(t *testing.T, e *Engine) {
	t.Helper()
	want := uring.NAPIConfig{BusyPollTimeout: e.cfg.BusyPoll, PreferBusyPoll: e.cfg.PreferBusyPoll, Static: true}
	for _, l := range e.Loops() {
		type res struct {
			prev uring.NAPIConfig
			err  error
		}
		got := make(chan res, 1)
		l.Post(func() {
			prev, err := l.be.(*uringBackend).r.RegisterNAPI(want)
			got <- res{prev, err}
		})
		if r := <-got; r.err != nil || r.prev != want {
			t.Errorf("loop %d: the kernel holds NAPI settings %+v (%v), want %+v", l.ID(), r.prev, r.err, want)
		}
	}
}
