package main

import (
	"encoding/json"
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
