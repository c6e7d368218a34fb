package engine

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPostToFromBrokenRing: a PostTo from a loop whose ring has just broken
// (a full SQ that cannot be submitted; the loop leaves at its next poll)
// prepared its MSG_RING wake-up on the spare SQE that never reaches the
// kernel: the destination loop, asleep with nothing else to do, never ran
// the function. It must be woken through its eventfd.
func TestPostToFromBrokenRing(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	failSubmits(t, -1, os.NewSyscallError("io_uring_enter", unix.EOWNERDEAD))
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0, 1}
	e := newEngine(t, cfg, &echoHandler{})
	ran := make(chan error, 1)
	go func() { ran <- e.Run(context.Background()) }()
	defer func() {
		e.Shutdown(context.Background())
		<-ran
	}()
	src, dst := e.Loops()[0], e.Loops()[1]
	sync := make(chan struct{})
	dst.Post(func() { close(sync) }) // dst running, then asleep
	<-sync
	done := make(chan struct{})
	src.Post(func() {
		fillSQ(src.be.(*uringBackend))
		src.PostTo(dst, func() { close(done) })
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a function PostTo sent from a loop whose ring broke did not run in 5 s")
	}
}
