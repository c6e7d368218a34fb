// Package leakcheck is the TestMain leak check shared by spindle's test
// suites: after a passing run, no file descriptor, goroutine or (through
// extra checks) off-heap mapping may be left behind. It is imported by
// tests only.
package leakcheck

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Settle is how long Run waits for closing goroutines and asynchronously
// torn-down kernel objects (an io_uring ring's fd lingers briefly) before it
// calls what is left a leak.
const Settle = 2 * time.Second

// Run runs the tests and, if they passed outside fuzzing, fails the run when
// fds were left open or goroutines running (the os/signal watcher, which
// the first signal.Notify starts for good, excepted), or when an extra
// check still reports an error after Settle. It returns the exit code for os.Exit. Call it from
// TestMain only, as its last step:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
func Run(m *testing.M, extra ...func() error) int {
	// Start the runtime's network poller (an epoll fd and an eventfd that
	// stay open for the life of the process) before the snapshot.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	fds, goroutines := openFds(), goroutineStacks()
	code := m.Run()
	if code != 0 || fuzzing() {
		// A failed run has its own report; the fuzzing engine keeps its
		// own goroutines and fds.
		return code
	}
	if err := check(fds, goroutines, extra); err != nil {
		fmt.Fprintln(os.Stderr, "leak check:", err)
		return 1
	}
	return 0
}

func check(fds, goroutines map[string]string, extra []func() error) error {
	deadline := time.Now().Add(Settle)
	for {
		err := leaks(fds, goroutines, extra)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaks reports the fds open now that were not in fds, the goroutines
// running now that were not in goroutines (nil: not checked), and the
// first error of extra.
func leaks(fds, goroutines map[string]string, extra []func() error) error {
	var leaked []string
	for fd, target := range openFds() {
		if _, ok := fds[fd]; !ok {
			leaked = append(leaked, fd+" -> "+target)
		}
	}
	if len(leaked) > 0 {
		slices.Sort(leaked)
		return fmt.Errorf("fds left open: %v", leaked)
	}
	if goroutines != nil {
		var started []string
		for id, stack := range goroutineStacks() {
			if _, ok := goroutines[id]; !ok && !lifelong(stack) {
				started = append(started, stack)
			}
		}
		if len(started) > 0 {
			slices.Sort(started)
			return fmt.Errorf("%d goroutines left running:\n%s", len(started), strings.Join(started, "\n\n"))
		}
	}
	for _, f := range extra {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// goroutineStacks maps the id of each goroutine running now to its stack.
// Goroutines are compared by id, not counted: a goroutine left running
// must not hide behind one of the snapshot that has ended.
func goroutineStacks() map[string]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	m := make(map[string]string)
	for stack := range strings.SplitSeq(strings.TrimSpace(string(buf)), "\n\n") {
		// "goroutine 17 [chan receive]:"
		if f := strings.Fields(stack); len(f) > 1 && f[0] == "goroutine" {
			m[f[1]] = stack
		}
	}
	return m
}

// lifelong reports whether stack is of a goroutine the standard library
// starts once and keeps for the life of the process, which is no leak:
// the os/signal watcher started by the first signal.Notify.
func lifelong(stack string) bool {
	return strings.Contains(stack, "\nos/signal.loop()")
}

// openFds maps each open fd to what it refers to. The fd of the directory
// listing itself is gone by the time it is read and is skipped.
func openFds() map[string]string {
	ents, _ := os.ReadDir("/proc/self/fd")
	m := make(map[string]string, len(ents))
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			m[e.Name()] = target
		}
	}
	return m
}

func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

// Unchanged returns an extra check for Run that fails while now() differs
// from what it returned when Unchanged was called, for counters such as live
// off-heap mappings:
//
//	os.Exit(leakcheck.Run(m, leakcheck.Unchanged("off-heap mappings", sys.LiveMappings)))
func Unchanged(what string, now func() int) func() error {
	before := now()
	return func() error {
		if n := now(); n != before {
			return fmt.Errorf("%s: %d before the tests, %d after", what, before, n)
		}
		return nil
	}
}

// Explained returns check with what explain says added to its error, for
// a suite that knows more than check sees: which kinds of mapping a count
// of off-heap mappings is made of, say. explain runs only when check
// fails.
//
//	offHeap := leakcheck.Unchanged("off-heap mappings", sys.LiveMappings)
//	os.Exit(leakcheck.Run(m, leakcheck.Explained(offHeap, leftMapped)))
func Explained(check func() error, explain func() string) func() error {
	return func() error {
		if err := check(); err != nil {
			return fmt.Errorf("%w (%s)", err, explain())
		}
		return nil
	}
}
