// Package mainproc runs a command's main in a child process of its own test
// binary, for tests of what only a whole process shows: its signals and
// how it ends. It is imported by tests only.
package mainproc

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env marks a child started by Start: its TestMain runs main, not the tests.
const env = "SPINDLE_TEST_RUN_MAIN"

// Run runs main with args, in place of the tests, in a child that Start
// started, and exits when main returns; elsewhere it returns at once.
// TestMain calls it first.
func Run(main func(), args ...string) {
	if os.Getenv(env) == "" {
		return
	}
	os.Args = append([]string{os.Args[0]}, args...)
	main()
	os.Exit(0)
}

// Child is a running main.
type Child struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdout *bufio.Scanner
	stderr *bufio.Scanner
	done   chan struct{} // closed when the child has ended, err set
	err    error         // Wait's
}

// Start starts the test binary again, running main as TestMain's Run has
// it. The child is killed at the test's end if it still runs.
func Start(t testing.TB) *Child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &Child{t: t, cmd: exec.Command(exe), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env+"=1")
	// Pipes of our own, not StdoutPipe's: those Wait closes, and Wait
	// must not come before the reads are done.
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		t.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = outW, errW
	err = c.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		t.Fatal(err)
	}
	c.stdout, c.stderr = bufio.NewScanner(outR), bufio.NewScanner(errR)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
		outR.Close()
		errR.Close()
	})
	return c
}

// Stdout returns what follows prefix on the first line of the child's
// standard output that starts with it, the lines before it skipped. The
// test fails if the output ends first.
func (c *Child) Stdout(prefix string) string {
	c.t.Helper()
	return c.line(c.stdout, "standard output", prefix)
}

// Stderr is Stdout for the child's standard error.
func (c *Child) Stderr(prefix string) string {
	c.t.Helper()
	return c.line(c.stderr, "standard error", prefix)
}

func (c *Child) line(s *bufio.Scanner, name, prefix string) string {
	c.t.Helper()
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), prefix); ok {
			return rest
		}
	}
	c.t.Fatalf("the child's %s ended (%v) without a line starting %q", name, s.Err(), prefix)
	return ""
}

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// KilledBy waits up to limit for the child to end, and fails the test
// unless sig's default action ended it.
func (c *Child) KilledBy(sig syscall.Signal, limit time.Duration) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(limit):
		c.t.Fatalf("the child still runs %v after the signal", limit)
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == sig {
			return
		}
	}
	c.t.Fatalf("the child ended with %v, want killed by %v", c.err, sig)
}
