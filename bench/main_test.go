package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary act as a server child (the harness
// re-executes it like it re-executes the spindle binary).
const childEnv = "SPINDLE_BENCH_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ServeMain(context.Background(), os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Start the runtime netpoller (an epoll fd and an eventfd that live as
	// long as the process) before counting fds.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	fds := openFDs()
	g := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		// Give closing goroutines a moment to finish.
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
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "leak: %d goroutines after the tests, %d before\n%s\n", n, g, buf)
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

// testChildCommand returns the argv and environment that start this test
// binary as a server child.
func testChildCommand() ([]string, []string) {
	return []string{os.Args[0]}, []string{childEnv + "=1"}
}

func skipUnlessLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the load generator and servers are Linux only")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
