package engine

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// sysIOURingSetup is the number of io_uring_setup, the same on every
// architecture (include/uapi/asm-generic/unistd.h, 425).
const sysIOURingSetup = 425

// fallbackEnv marks the child of TestFallbackToEpoll.
const fallbackEnv = "SPINDLE_TEST_FALLBACK_CHILD"

// TestFallbackToEpoll runs a child process in which io_uring_setup fails with
// EPERM (a seccomp filter, as under a container runtime's default profile):
// every uring backend must run on epoll, say so once, and serve; uring-napi
// keeps busy polling on epoll-busypoll where the kernel has EPIOCSPARAMS.
func TestFallbackToEpoll(t *testing.T) {
	if os.Getenv(fallbackEnv) != "" {
		fallBackToEpoll(t)
		return
	}
	runChild(t, "TestFallbackToEpoll", fallbackEnv, nil)
}

// fallBackToEpoll is the child of TestFallbackToEpoll.
func fallBackToEpoll(t *testing.T) {
	if err := sys.DenySyscall(sysIOURingSetup, unix.EPERM); err != nil {
		t.Skipf("%s: %v", seccompRefused, err)
	}
	busyPoll := sys.EpollBusyPollUsable()
	for _, b := range []Backend{BackendURing, BackendURingSQPoll, BackendURingNAPI} {
		var logs logLines
		cfg := &Config{Backend: b, Logf: logs.logf}
		e := newEngine(t, cfg, &echoHandler{})
		want := BackendEpoll
		if b == BackendURingNAPI && busyPoll == nil {
			want = BackendEpollBusyPoll // busy polling kept
		}
		if e.Backend() != want {
			t.Fatalf("%s without io_uring runs %s, want %s", b, e.Backend(), want)
		}
		ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ping"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("%q %v", buf, err)
		}
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Said once by each engine, to its own Logf.
		if n := logs.count("io_uring unavailable"); n != 1 {
			t.Fatalf("%s: %d fallback messages, want 1: %q", b, n, logs.all())
		}
	}
}

// refusedAfterNewEnv marks the child of TestRingRefusedAfterNewRunsEpoll.
const refusedAfterNewEnv = "SPINDLE_TEST_REFUSED_AFTER_NEW_CHILD"

// TestRingRefusedAfterNewRunsEpoll runs a child in which io_uring_setup
// starts failing with EPERM after New has probed io_uring and chosen it
// (a seccomp filter installed in between, as kernel.io_uring_disabled
// raised meanwhile would): the loop must run epoll, say so once, and
// serve, not fail Run.
func TestRingRefusedAfterNewRunsEpoll(t *testing.T) {
	if os.Getenv(refusedAfterNewEnv) != "" {
		ringRefusedAfterNew(t)
		return
	}
	skipWithBatchWait(t, "a uring one whose ring is refused, running epoll")
	runChild(t, "TestRingRefusedAfterNewRunsEpoll", refusedAfterNewEnv, nil)
}

// ringRefusedAfterNew is the child of TestRingRefusedAfterNewRunsEpoll.
func ringRefusedAfterNew(t *testing.T) {
	var logs logLines
	e := newEngine(t, &Config{Backend: BackendURing, Logf: logs.logf}, &echoHandler{})
	if e.Backend() != BackendURing {
		t.Skipf("New ran %s: %q", e.Backend(), logs.all())
	}
	if err := sys.DenySyscall(sysIOURingSetup, unix.EPERM); err != nil {
		t.Skipf("%s: %v", seccompRefused, err)
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	for deadline := time.Now().Add(10 * time.Second); e.BufferPages() == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the loops have not started in 10 s: %q", logs.all())
		}
	}
	if err := echoOnce(ln.Addr().String(), 1, 64<<10, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	if b := e.Backend(); b != BackendEpoll {
		t.Errorf("Backend %s, want epoll", b)
	}
	if n := logs.count("operation not permitted); running epoll on it"); n != 1 || logs.count("io_uring refused") != 1 {
		t.Errorf("said the refusal %d times, want once: %q", n, logs.all())
	}
}
