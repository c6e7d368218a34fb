package bench

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// cpeerSource is the C reference server, bench/cpeer/echo.c. It lives in a
// directory without Go files (a .c file in a Go package directory needs
// cgo) and is embedded rather than looked up in the working tree as the
// peers module is: a spindle binary then builds exactly the server it was
// built with, from any directory, and needs only a C compiler and
// liburing-dev at run time.
//
//go:embed cpeer/echo.c
var cpeerSource []byte

// CPeerArm is the name of the C liburing reference arm.
const CPeerArm = "c-liburing"

// errMissingTool marks a missing C compiler or liburing-dev: the arm is
// unavailable on this host, which is not a failure of the arm.
var errMissingTool = errors.New("missing build tool")

// CPU accounting. The C server is the harness's server child itself: it
// takes ServeMain's flags, pins itself to -cpus with sched_setaffinity
// before it creates its ring (as ServeMain pins a Go child before starting
// its arm), and answers "usage" on stdin with getrusage(RUSAGE_SELF) and
// /proc/self/task stat and schedstat, so its figures are the same calls on
// the same kind of process as every other arm's: all its threads, user and
// system time. The alternative, a Go shim that starts the C program and
// reads its usage from outside, was rejected: RUSAGE_CHILDREN counts only
// children that have been waited for, so the shim would have had to read
// /proc/<pid>/stat, whose utime and stime are in clock ticks (10 ms) where
// getrusage gives microseconds; and the shim's own runtime threads would
// run either on the server CPU (disturbing the server it measures) or on
// the client's. With no shim there is nothing to keep off the books.
func init() {
	RegisterArm(Arm{
		Name: CPeerArm,
		Summary: "reference: a plain C liburing echo (bench/cpeer/echo.c): one thread, SINGLE_ISSUER|DEFER_TASKRUN, multishot accept and multishot recv " +
			"on a buffer ring, one SEND per batch of replies, one io_uring_submit_and_wait per iteration; RPC only (no HTTP/1.1 mode), one loop only",
		Program:     BuildCPeer,
		Unavailable: CPeerUnavailable,
		MaxLoops:    1,
		// Next to the other baselines (go-net, gnet), before the spindle
		// engine arms it is the reference for.
		Order: 15,
	})
}

// CPeerUnavailable says why the C reference server cannot be built here:
// not Linux, no C compiler, no liburing headers (with the package that
// provides them) or ones older than liburing 2.3. Nil when it can. Any
// goroutine.
func CPeerUnavailable() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: the C liburing server is Linux only", errMissingTool)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		return fmt.Errorf("%w: no C compiler (cc not in PATH): apt-get install gcc", errMissingTool)
	}
	// The server's source checked against the header, without the build's
	// warnings (a warning a new compiler adds fails the build, not this):
	// it finds a missing header, and a liburing before 2.3 (Ubuntu 22.04
	// has 2.1), which has the header but not all the calls the server makes
	// (io_uring_prep_recv_multishot, 2.3).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cc, "-fsyntax-only", "-Werror=implicit-function-declaration", "-x", "c", "-")
	cmd.Stdin = bytes.NewReader(cpeerSource)
	var msg bytes.Buffer
	cmd.Stderr = &msg
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(msg.String())
		switch {
		case strings.Contains(out, "liburing.h: No such file") || strings.Contains(out, "'liburing.h' file not found"):
			return fmt.Errorf("%w: liburing-dev not installed (liburing.h not found): apt-get install liburing-dev", errMissingTool)
		case strings.Contains(out, "io_uring") || strings.Contains(out, "IORING_"):
			return fmt.Errorf("%w: liburing-dev too old: the C server needs liburing 2.3 or later: %s", errMissingTool, firstError(out))
		}
		return fmt.Errorf("%s cannot compile the C server: %w: %s", cc, err, out)
	}
	return nil
}

// firstError returns the first line of compiler output s that reports an
// error, else s.
func firstError(s string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, "error") {
			return strings.TrimSpace(line)
		}
	}
	return s
}

// BuildCPeer compiles the C reference server into outDir with
// `cc -O2 -Wall -Wextra -Werror … -luring` and returns its command line.
// The error says what is missing when cc or liburing-dev is.
func BuildCPeer(ctx context.Context, outDir string) ([]string, error) {
	if err := CPeerUnavailable(); err != nil {
		return nil, err
	}
	src := filepath.Join(outDir, "spindle-c-liburing.c")
	if err := os.WriteFile(src, cpeerSource, 0o644); err != nil {
		return nil, fmt.Errorf("cannot build the %s server: %w", CPeerArm, err)
	}
	out := filepath.Join(outDir, "spindle-c-liburing")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", out, src, "-luring")
	killGroupOnCancel(cmd)
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cannot build the %s server: cc: %w: %s", CPeerArm, err, strings.TrimSpace(msg.String()))
	}
	return []string{out}, nil
}
