package sys

import (
	"fmt"
	"os"
	"testing"
)

// TestMain fails the package when a test leaks a file descriptor (rings made
// by the raw calls) or a MapAnon mapping.
func TestMain(m *testing.M) {
	// Start the runtime's network poller (an epoll fd and an eventfd that
	// stay open) before counting.
	if pr, pw, err := os.Pipe(); err == nil {
		pr.Close()
		pw.Close()
	}
	fds := fdCount()
	maps := LiveMappings()
	code := m.Run()
	if code == 0 {
		if n := fdCount(); n != fds {
			fmt.Fprintf(os.Stderr, "leak check: %d fds open, %d before\n", n, fds)
			code = 1
		}
		if n := LiveMappings(); n != maps {
			fmt.Fprintf(os.Stderr, "leak check: %d MapAnon mappings left, %d before\n", n, maps)
			code = 1
		}
	}
	os.Exit(code)
}

// fdCount counts the process's open fds (the directory's own fd included
// both times).
func fdCount() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic(err)
	}
	return len(ents)
}
