package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the package if a test leaks file descriptors or
// goroutines (a gnet engine that did not stop, a connection left open).
func TestMain(m *testing.M) {
	// Start the runtime netpoller (its fds live as long as the process)
	// before counting.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	fds, g := openFDs(), runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && (openFDs() > fds || runtime.NumGoroutine() > g) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := openFDs(); n > fds {
			fmt.Fprintf(os.Stderr, "leak: %d fds open after the tests, %d before\n", n, fds)
			code = 1
		}
		if n := runtime.NumGoroutine(); n > g {
			buf := make([]byte, 1<<16)
			fmt.Fprintf(os.Stderr, "leak: %d goroutines after the tests, %d before\n%s\n", n, g, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
