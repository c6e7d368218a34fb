package bench

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLoadThreadsNotOnMainThread: no client thread runs on the process's
// main thread. A client thread changes its affinity (and network
// namespace) and is never unlocked; on the main thread the runtime parks
// the thread for good instead of ending it, and the process's id (so
// /proc/self, sched_getaffinity of the pid) then shows the client's CPU
// pin and namespace for the whole process.
func TestLoadThreadsNotOnMainThread(t *testing.T) {
	addr := startTestServer(t, "go-net")
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &before); err != nil {
		t.Fatal(err)
	}
	pin := -1
	for cpu := range 1024 {
		if before.IsSet(cpu) {
			pin = cpu
		}
	}
	var onMain atomic.Int64
	testClientThread = func() {
		if unix.Gettid() == os.Getpid() {
			onMain.Add(1)
		}
	}
	defer func() { testClientThread = nil }()
	for i := range 300 {
		_, err := RunLoad(context.Background(), LoadConfig{
			Addr: addr, Conns: 2, Threads: 2, CPUs: []int{pin},
			Warmup: time.Microsecond, Duration: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		var after unix.CPUSet
		if err := unix.SchedGetaffinity(os.Getpid(), &after); err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("run %d: the main thread's affinity is %d CPUs, was %d: a client thread's pin to CPU %d stayed on it", i, after.Count(), before.Count(), pin)
		}
		if n := onMain.Load(); n > 0 {
			t.Fatalf("run %d: %d client threads ran on the main thread", i, n)
		}
	}
}
