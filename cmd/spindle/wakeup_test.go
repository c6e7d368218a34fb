package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestWakeupWriterCPUFlag: --writer-cpu puts the writer on the CPU given,
// CPU 0 included with the reader there too; without it the writer goes to
// the default (CPU 1 with the reader on CPU 0, else CPU 0). --writer-cpu 0
// with the reader on CPU 0 put the writer on CPU 1: the package took a
// writer on CPU 0 for "the default".
func TestWakeupWriterCPUFlag(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skipf("needs Linux and two CPUs (the default writer CPU is then not 0); %s, %d CPUs", runtime.GOOS, runtime.NumCPU())
	}
	tests := []struct {
		args           []string
		reader, writer int
	}{
		{nil, 0, 1},
		{[]string{"--writer-cpu", "0"}, 0, 0},
		{[]string{"--reader-cpu", "0", "--writer-cpu", "0"}, 0, 0},
		{[]string{"--reader-cpu", "1"}, 1, 0},
		{[]string{"--reader-cpu", "1", "--writer-cpu", "1"}, 1, 1},
		{[]string{"--writer-cpu", "-1"}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"wakeup", "--modes", "block", "--samples", "1", "--interval", "1ms", "--json"}, tc.args...)
			out, err := spindleCmd(args...).Output()
			if err != nil {
				t.Fatalf("spindle %v: %v", args, err)
			}
			var rep struct {
				ReaderCPU int `json:"reader_cpu"`
				WriterCPU int `json:"writer_cpu"`
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if rep.ReaderCPU != tc.reader || rep.WriterCPU != tc.writer {
				t.Errorf("reader on CPU %d, writer on CPU %d; want %d and %d", rep.ReaderCPU, rep.WriterCPU, tc.reader, tc.writer)
			}
		})
	}
}

// TestWakeupCPUFlagsOutsideAllowed: a --reader-cpu or --writer-cpu the
// process may not run on is refused before the run, naming the flag, with
// exit status 1, as this host's refusal (it was 2, a usage error, while
// bench exited 1 for a CPU that is not online: TestHostRefusalsExit1). A CPU
// that does not exist failed at the thread's pinning, exit 1, with
// "pin to CPUs [4096]" and no word of whose CPU it was; one outside a
// taskset the command ran under was taken, the thread widening its
// affinity past it.
func TestWakeupCPUFlagsOutsideAllowed(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skipf("needs Linux and two CPUs (one left out by taskset); %s, %d CPUs", runtime.GOOS, runtime.NumCPU())
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("needs taskset (apt-get install util-linux)")
	}
	tests := []struct {
		taskset string // CPUs the command runs under, "" for all
		args    []string
		want    string
	}{
		{"", []string{"--reader-cpu", "4096"}, "--reader-cpu 4096: not a CPU this process may run on"},
		{"", []string{"--writer-cpu", "4096"}, "--writer-cpu 4096: not a CPU this process may run on"},
		{"0", []string{"--writer-cpu", "1"}, "--writer-cpu 1: not a CPU this process may run on (0)"},
		{"1", []string{"--reader-cpu", "0"}, "--reader-cpu 0: not a CPU this process may run on (1)"},
	}
	for _, tc := range tests {
		name := "every CPU " + strings.Join(tc.args, " ")
		if tc.taskset != "" {
			name = "taskset " + tc.taskset + " " + strings.Join(tc.args, " ")
		}
		t.Run(name, func(t *testing.T) {
			args := append([]string{"wakeup", "--modes", "block", "--samples", "1", "--interval", "1ms", "--json"}, tc.args...)
			cmd := spindleCmd(args...)
			if tc.taskset != "" {
				env := cmd.Env
				cmd = exec.Command("taskset", append([]string{"-c", tc.taskset}, cmd.Args...)...)
				cmd.Env = env
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("taskset %q, spindle %v: %v, want exit status 1 (this host's refusal) and %q:\n%s", tc.taskset, args, err, tc.want, stderr.String())
			}
		})
	}
}
