package leakcheck

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestLeaksSeesAnFd(t *testing.T) {
	before := openFds()
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	err = leaks(before, 1<<30, nil)
	f.Close()
	if err == nil || !strings.Contains(err.Error(), "/dev/null") {
		t.Fatalf("an open fd was not reported: %v", err)
	}
	if err := leaks(before, 1<<30, nil); err != nil {
		t.Fatalf("after close: %v", err)
	}
}

// TestLeaksSeesAGoroutine leaves four goroutines running: more than one,
// since a goroutine of the test framework may end meanwhile (a loaded CI
// run once counted one goroutine started and one ended, and saw no leak).
func TestLeaksSeesAGoroutine(t *testing.T) {
	stop := make(chan struct{})
	n := runtime.NumGoroutine()
	for range 4 {
		go func() { <-stop }()
	}
	err := leaks(openFds(), n, nil)
	close(stop)
	if err == nil || !strings.Contains(err.Error(), "goroutines") {
		t.Fatalf("a running goroutine was not reported: %v", err)
	}
}

func TestExtraCheckRetriedUntilSettled(t *testing.T) {
	start := time.Now()
	calls := 0
	err := check(openFds(), 1<<30, []func() error{func() error {
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

// TestLeaksSeesAProcFd: an fd left open on a /proc file (a /proc/stat or
// /proc/self/task reader that forgot to close) was not reported, since
// every target under /proc/ was skipped.
func TestLeaksSeesAProcFd(t *testing.T) {
	before := openFds()
	f, err := os.Open("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	err = leaks(before, 1<<30, nil)
	f.Close()
	if err == nil || !strings.Contains(err.Error(), "/stat") {
		t.Fatalf("an fd open on /proc/self/stat was not reported: %v", err)
	}
}
