package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/bench"
)

// TestBenchProxy runs `spindle bench proxy` in each protocol with every
// arm for one short repetition: every reply through every proxy is
// verified by the load generator (a wrong echo, or in HTTP a proxy closing
// a connection, fails the run), every request is answered, and the report,
// on stdout and in --out, says the protocol (the JSON's config.protocol,
// the Markdown's title) and has a row per arm with a nonzero rate and, for
// each proxy, a nonzero CPU per request. An arm whose tool is not installed
// skips its check with the package to install; one skipped though
// installed fails.
func TestBenchProxy(t *testing.T) {
	bin := spindleBin(t)
	for _, tc := range []struct{ protocol, title string }{
		{bench.ProxyProtocolTCP, "# spindle bench proxy report: L4 TCP proxies"},
		{bench.ProxyProtocolHTTP, "# spindle bench proxy report: HTTP/1.1 reverse proxies"},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report")
			cmd := exec.Command(bin, "bench", "proxy", "--protocol", tc.protocol, "--duration", "2s", "--reps", "1", "--conns", "16", "--json", "--out", out)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			if err != nil {
				t.Fatalf("bench proxy: %v\n%s", err, stderr.String())
			}
			var rep bench.ProxyReport
			if err := json.Unmarshal(stdout, &rep); err != nil {
				t.Fatalf("report %q: %v", stdout, err)
			}
			if rep.Schema != bench.ProxySchema || rep.Config.Protocol != tc.protocol || len(rep.Arms) != len(bench.ProxyArms) {
				t.Fatalf("schema %q, protocol %q, arms %+v", rep.Schema, rep.Config.Protocol, rep.Arms)
			}
			md, err := os.ReadFile(filepath.Join(out, bench.ReportMarkdown))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(md), tc.title) {
				t.Errorf("report.md's title is not %q:\n%s", tc.title, md)
			}
			if _, err := os.Stat(filepath.Join(out, bench.ReportJSON)); err != nil {
				t.Fatal(err)
			}
			checkProxyArms(t, &rep, string(md))
		})
	}
}

// checkProxyArms checks that every arm of rep ran, or was skipped for want
// of its tool, and answered every request.
func checkProxyArms(t *testing.T, rep *bench.ProxyReport, md string) {
	rows := map[string]bench.ProxySummaryRow{}
	for _, s := range rep.Summary {
		rows[s.Arm] = s
	}
	tools := map[string]string{bench.ProxyArmHAProxy: "haproxy", bench.ProxyArmNginx: "nginx"}
	for _, a := range rep.Arms {
		t.Run(a.Name, func(t *testing.T) {
			if a.Skipped != "" {
				if tool := tools[a.Name]; tool != "" {
					if _, err := exec.LookPath(tool); err != nil {
						t.Skipf("%s skipped: %s", a.Name, a.Skipped)
					}
				}
				t.Fatalf("skipped: %s", a.Skipped)
			}
			s, ok := rows[a.Name]
			if !ok {
				t.Fatal("no summary row")
			}
			if s.AchievedRPS.Median <= 0 || s.Reps != 1 || s.Unanswered != 0 {
				t.Errorf("rate %v over %d reps, %d requests unanswered", s.AchievedRPS.Median, s.Reps, s.Unanswered)
			}
			if a.Name != bench.ProxyArmDirect && s.ProxyUSPerReq.Median <= 0 {
				t.Errorf("proxy CPU %v µs/req", s.ProxyUSPerReq.Median)
			}
			if !strings.Contains(md, "| "+a.Name+" |") {
				t.Errorf("report.md has no row for it:\n%s", md)
			}
		})
	}
}

// TestBenchProxyRefuses checks the command line's refusals.
func TestBenchProxyRefuses(t *testing.T) {
	bin := spindleBin(t)
	for _, args := range [][]string{
		{"--arms", "squid"},
		{"--arms", "nginx,nginx"},
		{"--duration", "0s"},
		{"--reps", "0"},
		{"--payload", "3"},
		{"--protocol", "udp"},
		{"--protocol", "rpc"},
		{"--proxy-cpu", "x"},
		{"--proxy-cpu", "4096"},
		{"extra"},
	} {
		cmd := exec.Command(bin, append([]string{"bench", "proxy", "--out", ""}, args...)...)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("bench proxy %v: no error\n%s", args, out)
		}
	}
}
