package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/memlocktest"
)

// memlockEnv marks the child of TestRingShortOfLockedMemoryRunsEpoll; its
// value is the index of the case the child runs in memlockCases.
const memlockEnv = "SPINDLE_TEST_MEMLOCK_CHILD"

// memlockCase is one child of TestRingShortOfLockedMemoryRunsEpoll: loops
// uring loops of cfg under RLIMIT_MEMLOCK limit, which must run one of
// want (nil: the epoll backend standing in for each, epollFor).
type memlockCase struct {
	name  string
	limit uint64
	loops int
	cfg   Config
	want  []Backend
	exact bool // needs the room under limit to be the limit (memlocktest.Shared)
	slab  bool // the rings fit and the send slab's registration does not
}

// memlockCases are the children of TestRingShortOfLockedMemoryRunsEpoll.
func memlockCases(t *testing.T) []memlockCase {
	one, err := LockedMemory(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return []memlockCase{
		// Every backend's ring refused.
		{name: "uring", limit: 64 << 10, loops: 1, cfg: Config{Backend: BackendURing}},
		{name: "uring-sqpoll", limit: 64 << 10, loops: 1, cfg: Config{Backend: BackendURingSQPoll, SQPoll: SQPollUnpinned}},
		{name: "uring-napi", limit: 64 << 10, loops: 1, cfg: Config{Backend: BackendURingNAPI}},
		// Room for one loop's ring of two.
		{name: "one loop of two", limit: one, loops: 2, cfg: Config{Backend: BackendURing}, want: []Backend{"loop 0: uring; loop 1: epoll", "loop 0: epoll; loop 1: uring"}, exact: true},
		// The ring fits, its 512 KiB buffer ring does not: io-wq placed
		// for a ring that is closed again.
		{name: "buffer ring refused", limit: 400 << 10, loops: 1, cfg: Config{Backend: BackendURing, ReadBuffers: 1 << 15}},
		// Room for one loop's rings, not for its send slab registered
		// for SEND_ZC: the loop runs uring without SEND_ZC.
		{name: "send slab refused", limit: one, loops: 1, cfg: Config{Backend: BackendURing, SendZCThreshold: 512}, want: []Backend{BackendURing}, exact: true, slab: true},
	}
}

// TestRingShortOfLockedMemoryRunsEpoll runs engines in children without
// CAP_IPC_LOCK (setpriv) under a low RLIMIT_MEMLOCK (prlimit), where the
// kernel charges each loop's ring and buffer ring to the limit (6.18):
// New's small probe ring fits, a loop's ring does not, and Run failed
// with "io_uring_setup: cannot allocate memory". A loop whose ring or
// buffer ring is refused so must run epoll (uring-napi epoll-busypoll
// where that works) and serve; the engine says so once, with the limit
// and what its loops take (LockedMemory), and Backend says each loop's:
// under 64 KiB every loop runs epoll; under what one loop takes, with two
// loops, one runs uring and the other epoll. The start-up line says
// nothing of io-wq workers for a loop that ends on epoll, nor the engine
// that a uring-sqpoll loop so runs uring without SQPOLL.
func TestRingShortOfLockedMemoryRunsEpoll(t *testing.T) {
	if v := os.Getenv(memlockEnv); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		ringShortOfLockedMemory(t, memlockCases(t)[i])
		return
	}
	skipWithBatchWait(t, "memlockCases' configs, which set none")
	if err := uringUsable(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range memlockCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			if why := memlocktest.Shared(); tc.exact && why != "" {
				t.Skip(why)
			}
			const name = "TestRingShortOfLockedMemoryRunsEpoll"
			cmd := memlocktest.Command(t, tc.limit, exe, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", memlockEnv, i))
			out, err := cmd.CombinedOutput()
			if err == nil && strings.Contains(string(out), "--- SKIP: "+name+" ") {
				t.Skipf("child skipped:\n%s", out)
			}
			if err != nil || !strings.Contains(string(out), "--- PASS: "+name+" ") {
				t.Fatalf("child under RLIMIT_MEMLOCK %d KiB without CAP_IPC_LOCK: %v\n%s", tc.limit>>10, err, out)
			}
		})
	}
}

// ringShortOfLockedMemory is a child of
// TestRingShortOfLockedMemoryRunsEpoll, under RLIMIT_MEMLOCK tc.limit.
func ringShortOfLockedMemory(t *testing.T, tc memlockCase) {
	if capIPCLock() {
		t.Fatal("the child has CAP_IPC_LOCK")
	}
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < tc.loops {
		t.Skipf("needs %d CPUs this process may run on, has %v", tc.loops, allowed)
	}
	var logs logLines
	cfg := tc.cfg
	cfg.CPUs, cfg.Logf = allowed[:tc.loops], logs.logf
	e := newEngine(t, &cfg, &echoHandler{})
	if e.Backend() != cfg.Backend {
		// Its probe ring refused: the limit is the user's count's, which
		// the user's other rings take from where the parent is not root.
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		t.Skipf("New ran %s for %s under RLIMIT_MEMLOCK %d KiB: %q", e.Backend(), cfg.Backend, tc.limit>>10, logs.all())
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	for e.BufferPages() == "" {
		select {
		case err := <-done:
			t.Fatalf("Run: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	got := e.Backend()
	for i := range 8 {
		if err := echoOnce(ln.Addr().String(), uint64(i), 64<<10, 16<<10, nil); err != nil {
			t.Errorf("connection %d: %v", i, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	want := tc.want
	if want == nil {
		eb, _ := epollFor(cfg.Backend)
		want = []Backend{eb}
	}
	if !slices.Contains(want, got) {
		t.Errorf("Backend %q, want one of %q", got, want)
	}
	need, err := LockedMemory(&cfg, tc.loops)
	if err != nil {
		t.Fatal(err)
	}
	said := fmt.Sprintf("RLIMIT_MEMLOCK is %d KiB without CAP_IPC_LOCK, and %d uring loop(s) take about %d KiB of it", tc.limit>>10, tc.loops, need>>10)
	if tc.slab {
		// Its probe ring for SEND_ZC (sendZCUsable) refused, or the
		// registration.
		if n := logs.count("sending without SEND_ZC"); n != 1 || logs.count(said) != 1 || logs.count("io_uring refused") != 0 {
			t.Errorf("said the slab's refusal %d times, want once, saying %q: %q", n, said, logs.all())
		}
		if zc := e.Stats().ZCSends; zc != 0 {
			t.Errorf("%d SEND_ZC sends, the send slab unregistered", zc)
		}
		return
	}
	if n := logs.count("io_uring refused"); n != 1 || logs.count(said) != 1 {
		t.Errorf("said the refusal %d times, want once, saying %q: %q", n, said, logs.all())
	}
	if n := logs.count("io-wq workers on"); (n != 0) != strings.Contains(string(got), "uring") {
		t.Errorf("backend %s, start-up line: %q", got, logs.all())
	}
	if n := logs.count("running uring without SQPOLL"); n != 0 {
		t.Errorf("backend %s, said it runs uring without SQPOLL: %q", got, logs.all())
	}
}
