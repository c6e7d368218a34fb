package leakcheck

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// Run runs the tests and returns the exit code, 1 if they passed but left
// more open file descriptors or goroutines than there were before them.
// Closing goroutines get two seconds. Under -test.fuzz only descriptors are
// checked: the fuzzing engine keeps goroutines of its own. Call it from
// TestMain: os.Exit(leakcheck.Run(m)).
func Run(m *testing.M) int {
	// Start the runtime netpoller (an epoll fd and an eventfd that live as
	// long as the process) before counting fds.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	fds, g := openFDs(), runtime.NumGoroutine()
	code := m.Run()
	if code != 0 {
		return code
	}
	fuzzing := false
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		fuzzing = true
	}
	goroutinesLeft := func() bool { return !fuzzing && runtime.NumGoroutine() > g }
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && (openFDs() > fds || goroutinesLeft()) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := openFDs(); n > fds {
		fmt.Fprintf(os.Stderr, "leak: %d fds open after the tests, %d before\n", n, fds)
		code = 1
	}
	if goroutinesLeft() {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "leak: %d goroutines after the tests, %d before\n%s\n", runtime.NumGoroutine(), g, buf)
		code = 1
	}
	return code
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
