package topo

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the package if its tests leak file descriptors (netlink
// sockets) or goroutines.
func TestMain(m *testing.M) {
	// The runtime's poller opens its epoll and event fds on first use;
	// open them now so they are not counted as a leak.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	fds, gs := openFDs(), runtime.NumGoroutine()
	code := m.Run()
	// The fuzzing engine keeps its own goroutines and fds: check leaks
	// only in ordinary test runs.
	if code == 0 && !fuzzing() {
		if err := checkLeaks(fds, gs); err != nil {
			fmt.Fprintln(os.Stderr, "leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func checkLeaks(fds, gs int) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		nf, ng := openFDs(), runtime.NumGoroutine()
		if nf <= fds && ng <= gs {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fds %d -> %d, goroutines %d -> %d", fds, nf, gs, ng)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
