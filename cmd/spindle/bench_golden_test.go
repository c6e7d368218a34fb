package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestBenchSideBySideCLIGolden runs bench, bench http2 and bench proxy with -h
// and with command lines refused by the command or by the package (whose
// messages show the settings the flags were parsed into), and compares
// what each prints and its exit status, whole, with benchCLIGolden.
// SPINDLE_BENCH_GOLDEN_UPDATE=1 prints the text to paste instead.
func TestBenchSideBySideCLIGolden(t *testing.T) {
	var b strings.Builder
	for _, args := range [][]string{
		{"bench", "-h"},
		{"bench", "http2", "-h"},
		{"bench", "http2", "--bogus"},
		{"bench", "http2", "--duration", "0s"},
		{"bench", "http2", "--reps", "0", "--body", "-1"},
		{"bench", "http2", "--body", "-1"},
		{"bench", "http2", "--streams", "1,x"},
		{"bench", "http2", "--server-cpus", "x", "--client-cpus", "y"},
		{"bench", "http2", "--client-cpus", "y"},
		{"bench", "http2", "--out", "", "--arms", "h2o,nginx"},
		{"bench", "http2", "--out", "", "--ratio-to", "go-net"},
		{"bench", "http2", "--out", "", "--conns", "3", "--duration", "2s", "--reps", "2", "--streams", "2,5", "--body", "10", "--server-cpus", "4000", "--client-cpus", "4001"},
		{"bench", "proxy", "-h"},
		{"bench", "proxy", "extra"},
		{"bench", "proxy", "--protocol", "udp", "--duration", "0s"},
		{"bench", "proxy", "--duration", "-1s", "--payload", "1"},
		{"bench", "proxy", "--conns", "0"},
		{"bench", "proxy", "--payload", "1"},
		{"bench", "proxy", "--streams", "1"},
		{"bench", "proxy", "--protocol", "h2", "--streams", "0"},
		{"bench", "proxy", "--proxy-cpu", "x", "--client-cpus", "y", "--upstream-cpus", "z"},
		{"bench", "proxy", "--upstream-cpus", "z"},
		{"bench", "proxy", "--out", "", "--arms", "squid"},
		{"bench", "proxy", "--out", "", "--protocol", "h2h2", "--upstream-arm", "epoll"},
		{"bench", "proxy", "--out", "", "--json", "--protocol", "http", "--reps", "2", "--conns", "3", "--payload", "100", "--upstream-cpus", "4002"},
		{"bench", "proxy", "--out", "", "--proxy-cpu", "4000", "--client-cpus", "0"},
		{"bench", "proxy", "--out", "", "--arms", "spindle-uring,nginx", "--ratio-to", "haproxy"},
		{"bench", "proxy", "--out", "", "--ratio-to", "nginx,nginx"},
	} {
		cmd := spindleCmd(args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("spindle %v: %v", args, err)
		}
		fmt.Fprintf(&b, "$ spindle %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	// The CPUs this machine has, which the package's refusals list.
	text := regexp.MustCompile(`online CPUs: [0-9,-]+`).ReplaceAllString(b.String(), "online CPUs: N")
	if os.Getenv("SPINDLE_BENCH_GOLDEN_UPDATE") == "1" {
		fmt.Print(text)
		return
	}
	// Compared command by command, to show the one that differs.
	got, want := strings.SplitAfter(text, "$ spindle "), strings.SplitAfter(benchCLIGolden, "$ spindle ")
	for i, g := range got {
		if i >= len(want) || g != want[i] {
			t.Fatalf("spindle %s", strings.Join([]string{g, "want:", want[min(i, len(want)-1)]}, "\n"))
		}
	}
	if len(want) != len(got) {
		t.Fatalf("%d commands' output, want %d", len(got), len(want))
	}
}
