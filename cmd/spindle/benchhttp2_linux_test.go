package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/bench"
)

// TestBenchHTTP2 runs `spindle bench http2` as CI's smoke run does (one
// short repetition, JSON on stdout) plus --out: every arm runs, or is
// skipped for want of nginx (or spindle-uring where io_uring is disabled); those
// that run have a row per streams value with a nonzero rate and server
// CPU, in the JSON and in report.md.
func TestBenchHTTP2(t *testing.T) {
	if _, err := exec.LookPath("h2load"); err != nil {
		t.Skip("h2load is not installed (apt-get install nghttp2-client)")
	}
	bin := spindleBin(t)
	out := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(bin, "bench", "http2", "--duration", "2s", "--reps", "1", "--conns", "8", "--json", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench http2: %v\n%s", err, stderr.String())
	}
	var rep bench.HTTP2Report
	if err := json.Unmarshal(stdout, &rep); err != nil {
		t.Fatalf("report %q: %v", stdout, err)
	}
	md, err := os.ReadFile(filepath.Join(out, bench.ReportMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, s := range rep.Summary {
		rows[s.Arm]++
	}
	noted := func(prefix string) bool {
		return slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, prefix) })
	}
	for _, res := range rep.Results {
		// No request in the window, or no CPU counted, only where the
		// server or the harness was starved, and the report says so
		// (bench's TestRunHTTP2 measures such an arm again, alone).
		what := fmt.Sprintf("%s streams %d rep %d", res.Arm, res.Streams, res.Rep)
		switch {
		case res.Requests == 0 && !noted(what+" got no replies"):
			t.Errorf("%s: no request, and no note", what)
		case res.Requests > 0 && res.ServerUSPerReq <= 0 && !noted(what+": the harness read the CPU"):
			t.Errorf("%s: server CPU %v µs/req", what, res.ServerUSPerReq)
		}
	}
	if rep.Schema != bench.HTTP2Schema || len(rep.Arms) != len(bench.HTTP2Arms) {
		t.Fatalf("schema %q, arms %+v", rep.Schema, rep.Arms)
	}
	for _, a := range rep.Arms {
		switch {
		case a.Skipped == "":
			if rows[a.Name] != len(rep.Config.Streams) || !strings.Contains(string(md), "| "+a.Name+" | ") {
				t.Errorf("%s: %d rows for streams %v; report.md:\n%s", a.Name, rows[a.Name], rep.Config.Streams, md)
			}
		case a.Name == bench.HTTP2ArmNginx:
			if _, err := exec.LookPath("nginx"); err == nil {
				t.Errorf("nginx is installed but skipped: %s", a.Skipped)
			}
		case a.Name == bench.HTTP2ArmSpindleUring && strings.Contains(a.Skipped, "would fall back"):
			t.Logf("%s skipped: %s", a.Name, a.Skipped) // io_uring disabled here
		default:
			t.Errorf("%s skipped: %s", a.Name, a.Skipped)
		}
	}
}

// TestBenchHTTP2Refuses checks the command line's refusals.
func TestBenchHTTP2Refuses(t *testing.T) {
	bin := spindleBin(t)
	for _, args := range [][]string{
		{"--arms", "h2o"},
		{"--arms", "nginx,nginx"},
		{"--duration", "0s"},
		{"--reps", "0"},
		{"--conns", "0"},
		{"--streams", "0"},
		{"--streams", "1,1"},
		{"--streams", "x"},
		{"--body", "-1"},
		{"--body", "2000000"},
		{"--server-cpus", "x"},
		{"--client-cpus", "4096"},
		{"extra"},
	} {
		cmd := exec.Command(bin, append([]string{"bench", "http2", "--out", ""}, args...)...)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("bench http2 %v: no error\n%s", args, out)
		}
	}
}
