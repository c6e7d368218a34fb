package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
			rep := benchProxyReport(t, bin, "--protocol", tc.protocol, "--duration", "2s", "--reps", "1", "--conns", "16", "--json", "--out", out)
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
			checkProxyArms(t, bin, rep, string(md))
		})
	}
}

// benchProxyReport runs bin's `bench proxy` with args (which include --json)
// and returns its report.
func benchProxyReport(t *testing.T, bin string, args ...string) *bench.ProxyReport {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bench", "proxy"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench proxy %v: %v\n%s", args, err, stderr.String())
	}
	var rep bench.ProxyReport
	if err := json.Unmarshal(stdout, &rep); err != nil {
		t.Fatalf("report %q: %v", stdout, err)
	}
	return &rep
}

// maxArmDuration is the longest --duration checkProxyArms runs an arm
// alone with.
const maxArmDuration = 4 * time.Second

// checkProxyArms checks that every arm of rep ran, or was skipped for want
// of its tool, and answered every request.
//
// An arm whose figures need the proxy to have had the CPU in time (replies
// in its window, the window's requests answered by the end of the drain,
// CPU used in the window) is measured again, alone and with a longer
// --duration (2 s, then 4 s), while they are missing: on a loaded machine
// a proxy can be denied the CPU for longer than a share of a 2 s budget
// (0.32 s windows and drains for five arms). nginx, the slowest arm under
// contention, showed it first: 16 replies in its window, each 416 ms late,
// and no CPU used in the window; or 14 requests unanswered. A proxy that
// does not answer, or whose CPU is not counted, fails each time.
func checkProxyArms(t *testing.T, bin string, rep *bench.ProxyReport, md string) {
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
			if s.Reps != 1 {
				t.Errorf("%d reps, want 1", s.Reps)
			}
			if !strings.Contains(md, "| "+a.Name+" |") {
				t.Errorf("report.md has no row for it:\n%s", md)
			}
			for d := 2 * time.Second; ; d *= 2 {
				late := armLate(a.Name, s)
				if late == "" {
					break
				}
				if d > maxArmDuration {
					t.Fatal(late)
				}
				t.Logf("%s; measuring it alone with --duration %v", late, d)
				again := benchProxyReport(t, bin, "--protocol", rep.Config.Protocol, "--arms", a.Name, "--duration", d.String(), "--reps", "1", "--conns", strconv.Itoa(rep.Config.Conns), "--json", "--out", "")
				if len(again.Summary) != 1 || again.Summary[0].Arm != a.Name {
					t.Fatalf("alone: arms %+v, summary %+v", again.Arms, again.Summary)
				}
				s = again.Summary[0]
			}
		})
	}
}

// armLate says what of arm's summary row s shows that it did not serve in
// time, or returns "".
func armLate(arm string, s bench.ProxySummaryRow) string {
	if s.AchievedRPS.Median <= 0 || s.Unanswered != 0 {
		return fmt.Sprintf("rate %v, %d requests unanswered", s.AchievedRPS.Median, s.Unanswered)
	}
	if arm != bench.ProxyArmDirect && s.ProxyUSPerReq.Median <= 0 {
		return fmt.Sprintf("proxy CPU %v µs/req", s.ProxyUSPerReq.Median)
	}
	return ""
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
		{"--streams", "2"},
		{"--protocol", "http", "--streams", "1"},
		{"--protocol", "h2", "--streams", "0"},
		{"--protocol", "h2", "--streams", "1,1"},
		{"--protocol", "h2h2", "--streams", "0"},
		{"--protocol", "h2h2", "--upstream-arm", "epoll"},
		{"--protocol", "h2", "--tls-handshakes"},
		{"--protocol", "h2h2", "--tls-resume"},
		{"extra"},
	} {
		cmd := exec.Command(bin, append([]string{"bench", "proxy", "--out", ""}, args...)...)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("bench proxy %v: no error\n%s", args, out)
		}
	}
}

// TestBenchProxyH2 runs `spindle bench proxy --protocol h2`, and
// --protocol h2h2, with every arm at one streams value: h2load's requests
// through each proxy (with h2h2 to bench http2's spindle-epoll server, and
// straight to it: the direct arm), every one verified (a failed one fails
// the run), and the report, on stdout and in --out, says the protocol and
// streams and has a row per arm at them (the figures are TestRunProxyH2's,
// in bench). There is no direct arm with h2. An arm whose tool is not
// installed skips its check; one skipped though installed fails. -h names
// both measurements' commands for docs/BENCHMARKS.md.
func TestBenchProxyH2(t *testing.T) {
	bin := spindleBin(t)
	help, _ := exec.Command(bin, "bench", "proxy", "-h").CombinedOutput()
	for _, want := range []string{"docs/BENCHMARKS.md", "bench proxy --protocol h2 --duration 120s", "bench proxy --protocol h2h2 --duration 150s", "-streams"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("-h does not say %q:\n%s", want, help)
		}
	}
	if _, err := exec.LookPath("h2load"); err != nil {
		t.Skip("h2load is not installed (apt-get install nghttp2-client)")
	}
	for _, tc := range []struct {
		protocol, title string
		args            []string
		arms            int
	}{
		{bench.ProxyProtocolH2, "# spindle bench proxy report: HTTP/2 clients (h2c, prior knowledge) under h2load through reverse proxies to an HTTP/1.1 upstream", nil, len(bench.ProxyArms) - 1},
		{bench.ProxyProtocolH2H2, "# spindle bench proxy report: HTTP/2 clients (h2c, prior knowledge) under h2load through reverse proxies to an HTTP/2 (h2c) upstream", []string{"--upstream-arm", bench.HTTP2ArmSpindleEpoll}, len(bench.ProxyArms)},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report")
			rep := benchProxyReport(t, bin, append([]string{"--protocol", tc.protocol, "--streams", "2", "--duration", "2s", "--reps", "1", "--conns", "8", "--json", "--out", out}, tc.args...)...)
			if rep.Schema != bench.ProxySchema || rep.Config.Protocol != tc.protocol || len(rep.Config.Streams) != 1 || rep.Config.Streams[0] != 2 || len(rep.Arms) != tc.arms {
				t.Fatalf("schema %q, protocol %q, streams %v, arms %+v", rep.Schema, rep.Config.Protocol, rep.Config.Streams, rep.Arms)
			}
			md, err := os.ReadFile(filepath.Join(out, bench.ReportMarkdown))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(md), tc.title) {
				t.Errorf("report.md's title:\n%s", md)
			}
			checkH2Arms(t, rep, string(md))
		})
	}
}

// checkH2Arms checks TestBenchProxyH2's report rep, arm by arm.
func checkH2Arms(t *testing.T, rep *bench.ProxyReport, md string) {
	tools := map[string]string{bench.ProxyArmHAProxy: "haproxy", bench.ProxyArmNginx: "nginx"}
	for _, a := range rep.Arms {
		t.Run(a.Name, func(t *testing.T) {
			if a.Name == bench.ProxyArmDirect && rep.Config.Protocol == bench.ProxyProtocolH2 {
				t.Fatal("a direct arm with h2")
			}
			if a.Skipped != "" {
				if tool := tools[a.Name]; tool != "" {
					if _, err := exec.LookPath(tool); err != nil {
						t.Skipf("%s skipped: %s", a.Name, a.Skipped)
					}
				}
				t.Fatalf("skipped: %s", a.Skipped)
			}
			if !strings.Contains(md, "| "+a.Name+" | 2 |") {
				t.Errorf("report.md has no row for it at 2 streams:\n%s", md)
			}
			for _, s := range rep.Summary {
				if s.Arm == a.Name && (s.Streams != 2 || s.Reps != 1) {
					t.Errorf("row %+v", s)
				}
			}
		})
	}
}

// TestBenchProxyTLS runs `spindle bench proxy --tls --protocol http` with
// the spindle epoll arm (this binary's `spindle proxy`) and HAProxy for
// one short repetition: the JSON report says tls in its config, and each
// arm that ran has, in every measurement, the TLS its clients agreed (TLS
// 1.3, http/1.1 by ALPN, one handshake per connection); there is no direct
// arm. -h names --tls and the measurement's command for docs/BENCHMARKS.md.
// HAProxy not installed skips its check.
func TestBenchProxyTLS(t *testing.T) {
	bin := spindleBin(t)
	help, _ := exec.Command(bin, "bench", "proxy", "-h").CombinedOutput()
	for _, want := range []string{"-tls", "bench proxy --tls --protocol http"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("-h does not say %q:\n%s", want, help)
		}
	}
	rep := benchProxyReport(t, bin, "--tls", "--protocol", "http", "--arms", "spindle-epoll,haproxy", "--duration", "1s", "--reps", "1", "--conns", "4", "--json", "--out", "")
	if !rep.Config.TLS || len(rep.Arms) != 2 {
		t.Fatalf("tls %v, arms %+v", rep.Config.TLS, rep.Arms)
	}
	for _, a := range rep.Arms {
		if a.Skipped != "" {
			if _, err := exec.LookPath("haproxy"); a.Name == bench.ProxyArmHAProxy && err != nil {
				continue
			}
			t.Errorf("%s skipped: %s", a.Name, a.Skipped)
		}
	}
	if len(rep.Results) == 0 {
		t.Fatal("no results")
	}
	for _, res := range rep.Results {
		if res.TLS == nil || res.TLS.Version != "TLS 1.3" || res.TLS.ALPN != "http/1.1" || res.TLS.Handshakes != 4 {
			t.Errorf("%s rep %d: TLS %+v", res.Arm, res.Rep, res.TLS)
		}
	}
}

// TestBenchProxyTLSHandshakes runs `spindle bench proxy --tls-handshakes`
// and --tls-resume (tcp, one spindle arm, a short run): the flags reach
// the run (the report says TLS, handshakes, resumption), every connection
// a full handshake, or with --tls-resume all but one a slot resumed (the
// figures are TestRunProxyTLSHandshakes's, in bench). -h names the
// measurement's command for docs/BENCHMARKS.md.
func TestBenchProxyTLSHandshakes(t *testing.T) {
	bin := spindleBin(t)
	help, _ := exec.Command(bin, "bench", "proxy", "-h").CombinedOutput()
	for _, want := range []string{"-tls-handshakes", "-tls-resume", "bench proxy --tls-handshakes --protocol http"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("-h does not say %q:\n%s", want, help)
		}
	}
	for _, resume := range []bool{false, true} {
		flag := "--tls-handshakes"
		if resume {
			flag = "--tls-resume"
		}
		rep := benchProxyReport(t, bin, flag, "--protocol", "tcp", "--arms", "spindle-epoll", "--duration", "1s", "--reps", "1", "--conns", "2", "--json", "--out", "")
		if c := rep.Config; !c.TLS || !c.TLSHandshakes || c.TLSResume != resume || len(rep.Results) != 1 {
			t.Fatalf("%s: settings %+v, %d results", flag, c, len(rep.Results))
		}
		res := rep.Results[0]
		if hs := res.TLS; hs == nil || hs.Handshakes == 0 || resume && hs.Handshakes-hs.Resumed > 2 || !resume && hs.Resumed != 0 || res.TimeWait == nil {
			t.Errorf("%s: TLS %+v, TIME_WAIT %+v", flag, res.TLS, res.TimeWait)
		}
	}
}
