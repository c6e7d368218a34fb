package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

// childEnv makes the test binary act as a server child (the harness
// re-executes it like it re-executes the spindle binary); http2ChildEnv
// makes it `bench http2-server`, which stops at SIGTERM.
const (
	childEnv      = "SPINDLE_BENCH_TEST_SERVER"
	http2ChildEnv = "SPINDLE_BENCH_TEST_HTTP2_SERVER"
	// proxyChildEnv makes it `spindle proxy -config FILE -drain D`
	// (testProxyMain), which stops at SIGTERM; it wins over childEnv.
	proxyChildEnv = "SPINDLE_BENCH_TEST_PROXY"
)

func TestMain(m *testing.M) {
	if os.Getenv(orphanChildEnv) == "1" {
		os.Exit(orphanMain())
	}
	// Before childEnv: a proxy child has the upstream's environment too.
	if os.Getenv(proxyChildEnv) == "1" {
		if err := testProxyMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(childEnv) == "1" {
		if err := ServeMain(context.Background(), os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(http2ChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := ServeHTTP2Main(ctx, os.Args[1:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(leakcheck.Run(m))
}

// testChildCommand returns the argv and environment that start this test
// binary as a server child.
func testChildCommand() ([]string, []string) {
	return []string{os.Args[0]}, []string{childEnv + "=1", noRaceExitSleep()}
}

// noRaceExitSleep is a GORACE setting for child processes: a race-enabled
// binary otherwise sleeps a second at exit (atexit_sleep_ms=1000), which
// every server child of a test would add to the test's time.
func noRaceExitSleep() string {
	return strings.TrimSpace("GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0")
}

func skipUnlessLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the load generator and servers are Linux only")
	}
}
