package leakcheck

import (
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv names the scenario a re-executed test binary plays: its
// TestMain then runs the scenario's test under Run, as a package's
// TestMain would, and the parent test reads the exit status.
const childEnv = "SPINDLE_LEAKCHECK_CHILD"

// ended is closed by the "swap" scenario to end a goroutine that was
// running when Run took its snapshot.
var ended = make(chan struct{})

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "swap":
		go func() { <-ended }()
	}
	os.Exit(Run(m))
}

// runChild runs test in a child process whose TestMain is Run, and
// returns its exit code and output.
func runChild(t *testing.T, scenario, test string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+scenario)
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestRunSeesALeakedGoroutineAfterAnEndedOne: Run compared goroutine
// counts, so a goroutine left running passed when one that was running at
// the snapshot had ended meanwhile (a timer's, a test framework's).
func TestRunSeesALeakedGoroutineAfterAnEndedOne(t *testing.T) {
	code, out := runChild(t, "swap", "TestChildSwap")
	if code == 0 || !strings.Contains(out, "leakedForever") {
		t.Fatalf("exit %d, want a failed leak check naming the leaked goroutine:\n%s", code, out)
	}
}

func TestChildSwap(t *testing.T) {
	if os.Getenv(childEnv) != "swap" {
		t.Skip("run by TestRunSeesALeakedGoroutineAfterAnEndedOne")
	}
	n := runtime.NumGoroutine()
	close(ended)
	for runtime.NumGoroutine() >= n {
		runtime.Gosched()
	}
	go leakedForever()
}

func leakedForever() { select {} }

// TestRunIgnoresTheSignalWatcher: the first signal.Notify starts the
// os/signal watcher goroutine, which runs for the life of the process;
// code that stops its notifications correctly (signal.NotifyContext's
// stop) failed the leak check.
func TestRunIgnoresTheSignalWatcher(t *testing.T) {
	if code, out := runChild(t, "signal", "TestChildSignal"); code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
}

func TestChildSignal(t *testing.T) {
	if os.Getenv(childEnv) != "signal" {
		t.Skip("run by TestRunIgnoresTheSignalWatcher")
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	signal.Stop(c)
}

func TestLeaksSeesAnFd(t *testing.T) {
	before := openFds()
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	err = leaks(before, nil, nil)
	f.Close()
	if err == nil || !strings.Contains(err.Error(), "/dev/null") {
		t.Fatalf("an open fd was not reported: %v", err)
	}
	if err := leaks(before, nil, nil); err != nil {
		t.Fatalf("after close: %v", err)
	}
}

// TestLeaksSeesAGoroutine leaves a goroutine running, and the check names
// it, whatever goroutines of the test framework end meanwhile (a count
// could not see that: a loaded CI run once counted one goroutine started
// and one ended, and saw no leak).
func TestLeaksSeesAGoroutine(t *testing.T) {
	stop := make(chan struct{})
	before := goroutineStacks()
	go func() { <-stop }()
	err := leaks(openFds(), before, nil)
	close(stop)
	if err == nil || !strings.Contains(err.Error(), "created by github.com/spindlenet/spindle/internal/leakcheck.TestLeaksSeesAGoroutine") {
		t.Fatalf("a running goroutine was not reported: %v", err)
	}
}

func TestExtraCheckRetriedUntilSettled(t *testing.T) {
	start := time.Now()
	calls := 0
	err := check(openFds(), nil, []func() error{func() error {
		calls++
		if time.Since(start) < 100*time.Millisecond {
			return os.ErrExist
		}
		return nil
	}})
	if err != nil || calls < 2 {
		t.Fatalf("err %v after %d calls; want nil after a retry", err, calls)
	}
}

func TestUnchanged(t *testing.T) {
	n := 3
	c := Unchanged("things", func() int { return n })
	if err := c(); err != nil {
		t.Fatal(err)
	}
	n = 4
	if err := c(); err == nil || !strings.Contains(err.Error(), "things: 3 before the tests, 4 after") {
		t.Fatalf("a changed counter was not reported: %v", err)
	}
}

// TestExplainedSaysWhatTheSuiteKnows: a failed check carries the
// explanation, and explain is not asked while the check passes.
func TestExplainedSaysWhatTheSuiteKnows(t *testing.T) {
	n, asked := 3, 0
	c := Explained(Unchanged("things", func() int { return n }), func() string {
		asked++
		return "one of them a widget"
	})
	if err := c(); err != nil || asked != 0 {
		t.Fatalf("unchanged: err %v, explain asked %d times; want nil and none", err, asked)
	}
	n = 4
	if err := c(); err == nil || err.Error() != "things: 3 before the tests, 4 after (one of them a widget)" {
		t.Fatalf("a changed counter was reported as %v", err)
	}
}

// TestLeaksSeesAProcFd: an fd left open on a /proc file (a /proc/stat or
// /proc/self/task reader that forgot to close) was not reported, since
// every target under /proc/ was skipped.
func TestLeaksSeesAProcFd(t *testing.T) {
	before := openFds()
	f, err := os.Open("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	err = leaks(before, nil, nil)
	f.Close()
	if err == nil || !strings.Contains(err.Error(), "/stat") {
		t.Fatalf("an fd open on /proc/self/stat was not reported: %v", err)
	}
}
