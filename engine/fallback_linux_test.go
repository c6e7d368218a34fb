package engine

import (
	"context"
	"io"
	"net"
	"os"
	"testing"

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
