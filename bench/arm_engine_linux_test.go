package bench

import (
	"context"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/engine"
)

// TestEngineArmUnpinnedUsesAllowedCPUs: an engine arm given no CPUs (`bench
// server` without -cpus) puts its loops on CPUs the process may run on.
// Under taskset or a cpuset those need not start at CPU 0: here the
// starting thread may run on the last CPU only, and the arm must serve from
// there (it took CPUs 0..n-1 and failed: CPU 0 is not in the affinity
// mask).
func TestEngineArmUnpinnedUsesAllowedCPUs(t *testing.T) {
	skipUnlessLinux(t)
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("needs two CPUs this process may run on, has %v", allowed)
	}
	last := allowed[len(allowed)-1]
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	one.Set(last)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	srv, err := startEngine(context.Background(), engine.BackendEpoll, ServerConfig{})
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
		t.Fatal(rerr) // the thread stays locked, and exits with the test
	}
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatalf("an unpinned engine arm on a process allowed CPU %d only: %v", last, err)
	}
	defer srv.Close()
	if err := selfCheck(srv.Addr().String()); err != nil {
		t.Fatal(err)
	}
}
