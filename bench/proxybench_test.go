package bench

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/proxy"
)

// TestSpindleProxyConfig checks that the spindle arms' config is one the
// proxy's strict parser takes, with the backend, loop CPU, listener and
// upstream asked for.
func TestSpindleProxyConfig(t *testing.T) {
	for _, backend := range []string{"uring", "epoll"} {
		text := SpindleProxyConfig(ProxyProtocolTCP, backend, "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, nil)
		cfg, err := proxy.ParseConfig([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v\n%s", backend, err, text)
		}
		if cfg.Engine.Backend != backend || len(cfg.Engine.CPUs) != 1 || cfg.Engine.CPUs[0] != 1 {
			t.Errorf("%s: engine %+v", backend, cfg.Engine)
		}
		if len(cfg.Listeners) != 1 || cfg.Listeners[0].Listen != "127.0.0.1:4000" || cfg.Listeners[0].Pool != cfg.Pools[0].Name {
			t.Errorf("%s: listeners %+v", backend, cfg.Listeners)
		}
		if len(cfg.Pools) != 1 || len(cfg.Pools[0].Servers) != 1 || cfg.Pools[0].Servers[0].Address != "127.0.0.1:5000" || cfg.Pools[0].Health != nil {
			t.Errorf("%s: pools %+v", backend, cfg.Pools)
		}
		if cfg.Admin.Listen != "" {
			t.Errorf("%s: admin server %q in a benchmark config", backend, cfg.Admin.Listen)
		}
		if strings.Contains(text, "mode:") || strings.Contains(text, "max_idle") {
			t.Errorf("%s: HTTP settings in the tcp config:\n%s", backend, text)
		}
	}
}

// TestSpindleProxyHTTPConfig checks the spindle arms' HTTP config: a
// listener in mode http to the one pool, which keeps as many idle upstream
// connections as there are client connections, as the proxy's strict
// parser reads it.
func TestSpindleProxyHTTPConfig(t *testing.T) {
	text := SpindleProxyConfig(ProxyProtocolHTTP, "epoll", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, nil)
	for _, want := range []string{"mode: http", "max_idle: 50", "backend: epoll", `listen: "127.0.0.1:4000"`, `servers: ["127.0.0.1:5000"]`, "pool: upstream"} {
		hasLine(t, text, want)
	}
	cfg, err := proxy.ParseConfig([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Mode != proxy.ModeHTTP || len(cfg.Listeners[0].Routes) != 0 || cfg.Listeners[0].Pool != "upstream" {
		t.Errorf("listeners %+v", cfg.Listeners)
	}
	if len(cfg.Pools) != 1 || cfg.Pools[0].MaxIdle != 50 || len(cfg.Pools[0].Servers) != 1 || cfg.Pools[0].Servers[0].Address != "127.0.0.1:5000" {
		t.Errorf("pools %+v", cfg.Pools)
	}
}

// lines returns the trimmed non-empty lines of s.
func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func hasLine(t *testing.T, text, want string) {
	t.Helper()
	for _, l := range lines(text) {
		if l == want {
			return
		}
	}
	t.Errorf("no line %q in\n%s", want, text)
}

// TestHAProxyConfig checks the generated HAProxy config's directives and,
// where haproxy is installed, that haproxy -c accepts it.
func TestHAProxyConfig(t *testing.T) {
	for _, protocol := range ProxyProtocols {
		t.Run(protocol, func(t *testing.T) {
			text := HAProxyConfig(protocol, "127.0.0.1:4000", "127.0.0.1:5000", 50, nil)
			want := []string{"nbthread 1", "maxconn 114", "mode tcp", "bind 127.0.0.1:4000", "server s1 127.0.0.1:5000", "default_backend upstream", "timeout client 5m", "timeout server 5m"}
			if protocol == ProxyProtocolH2 || protocol == ProxyProtocolH2H2 {
				want[3] = "bind 127.0.0.1:4000 proto h2"
			}
			if protocol == ProxyProtocolH2H2 {
				want[4] = "server s1 127.0.0.1:5000 proto h2"
			} else if strings.Contains(text, "5000 proto h2") {
				t.Errorf("HTTP/2 to the upstream in the %s config:\n%s", protocol, text)
			}
			if protocol != ProxyProtocolTCP {
				want = append(want[:2], append([]string{"mode http", "option http-keep-alive", "http-reuse always", "tune.pool-low-fd-ratio 100", "tune.pool-high-fd-ratio 100"}, want[3:]...)...)
			} else if strings.Contains(text, "http") {
				t.Errorf("http settings in the tcp config:\n%s", text)
			}
			for _, w := range want {
				hasLine(t, text, w)
			}
			haproxyCheck(t, text, nil)
		})
	}
}

// haproxyCheck runs haproxy -c on config text and fails the test where
// haproxy refuses it. It skips the test with the reason where haproxy is
// not installed, or where has (when set) says the haproxy found lacks
// what the config needs.
func haproxyCheck(t *testing.T, text string, has func(haproxy string) error) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (apt-get install haproxy): the config was not checked by haproxy -c")
	}
	if has != nil {
		if err := has(bin); err != nil {
			t.Skipf("haproxy -c not run: %v", err)
		}
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, text)
	}
}

// TestNginxConfig checks the generated nginx config's directives and,
// where nginx and its stream module are installed, that nginx -t accepts
// it.
func TestNginxConfig(t *testing.T) {
	dir := t.TempDir()
	text := NginxConfig(ProxyProtocolTCP, dir, "/x/ngx_stream_module.so", "127.0.0.1:4000", "127.0.0.1:5000", 50, nil)
	for _, want := range []string{"load_module /x/ngx_stream_module.so;", "daemon off;", "master_process off;", "worker_processes 1;",
		"pid " + filepath.Join(dir, "nginx.pid") + ";", "worker_connections 164;", "listen 127.0.0.1:4000;", "proxy_pass 127.0.0.1:5000;"} {
		hasLine(t, text, want)
	}
	if strings.Contains(NginxConfig(ProxyProtocolTCP, dir, "", "127.0.0.1:4000", "127.0.0.1:5000", 50, nil), "load_module") {
		t.Error("load_module with the stream module built in")
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed (apt-get install nginx libnginx-mod-stream): the config was not checked by nginx -t")
	}
	mod, err := nginxStream(bin)
	if err != nil {
		t.Skipf("nginx -t not run: %v", err)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(NginxConfig(ProxyProtocolTCP, dir, mod, "127.0.0.1:4000", "127.0.0.1:5000", 50, nil)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-c", path, "-p", dir, "-e", "stderr").CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

// TestNginxHTTPConfig checks the generated nginx HTTP config's directives
// (keep-alive both sides, for far more requests than nginx's default
// 1000, and nginx's temporary files in the run's directory) and, where
// nginx is installed, that nginx -t accepts it.
func TestNginxHTTPConfig(t *testing.T) {
	dir := t.TempDir()
	text := NginxConfig(ProxyProtocolHTTP, dir, "/x/ngx_stream_module.so", "127.0.0.1:4000", "127.0.0.1:5000", 50, nil)
	for _, want := range []string{"daemon off;", "master_process off;", "worker_processes 1;", "pid " + filepath.Join(dir, "nginx.pid") + ";",
		"worker_connections 164;", "access_log off;", "upstream u {", "server 127.0.0.1:5000;", "keepalive 50;", "keepalive_requests 1000000000;",
		"listen 127.0.0.1:4000;", "keepalive_timeout 300s;", "proxy_pass http://u;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`,
		"client_body_temp_path " + filepath.Join(dir, "client_body") + ";", "proxy_temp_path " + filepath.Join(dir, "proxy") + ";"} {
		hasLine(t, text, want)
	}
	if strings.Count(text, "keepalive_requests 1000000000;") != 2 {
		t.Errorf("keepalive_requests not raised on both sides:\n%s", text)
	}
	if strings.Contains(text, "load_module") || strings.Contains(text, "stream {") {
		t.Errorf("the stream module in the HTTP config:\n%s", text)
	}
	nginxCheck(t, dir, text, nginxHTTPProxy)
}

// nginxCheck runs nginx -t on config text, written as dir/nginx.conf
// (the config's prefix), and fails the test where nginx refuses it. It
// skips the test with the reason where nginx is not installed, or where
// has (when set) says the nginx found lacks what the config needs.
func nginxCheck(t *testing.T, dir, text string, has func(nginx string) error) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed (apt-get install nginx): the config was not checked by nginx -t")
	}
	if has != nil {
		if err := has(bin); err != nil {
			t.Skipf("nginx -t not run: %v", err)
		}
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-c", path, "-p", dir, "-e", "stderr").CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s\n%s", err, out, text)
	}
}

// writeFakeProc writes proc/<pid>/stat files below root: each entry is a
// pid's stat line.
func writeFakeProc(t *testing.T, root string, stats map[string]string) {
	t.Helper()
	for pid, line := range stats {
		dir := filepath.Join(root, "proc", pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// statLine is a /proc/<pid>/stat line with the given comm, process group,
// utime and stime; the other fields are plausible values.
func statLine(pid int, comm string, pgrp int, utime, stime uint64) string {
	return strings.Join([]string{
		itoa(pid), "(" + comm + ")", "S", "1", itoa(pgrp), itoa(pgrp), "0", "-1", "4194304", "100", "0", "0", "0",
		u64(utime), u64(stime), "0", "0", "20", "0", "2", "0", "12345", "1000000", "300",
		"18446744073709551615", "1", "1", "0", "0", "0", "0", "0", "4096", "0", "0", "0", "0", "17", "0", "0", "0", "0", "0", "0",
	}, " ") + "\n"
}

func itoa(v int) string   { return strconv.Itoa(v) }
func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// TestProcessCPUFakeProc sums a process's CPU, and its children's, from a
// fake /proc: the leader and the worker one of its threads forked (whose
// comm has spaces and parentheses) count, found through the thread's
// children file; a process of the same group that is not its child does
// not, nor does another.
func TestProcessCPUFakeProc(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, map[string]string{
		"100": statLine(100, "nginx", 100, 30, 12),
		"101": statLine(101, "nginx: worker (1) ) x", 100, 500, 250),
		"102": statLine(102, "bash", 100, 9000, 9000),
		"300": statLine(300, "haproxy", 300, 1, 1),
	})
	p := Proc{Root: root}
	g, err := p.ProcessCPU(100)
	if err != nil {
		t.Fatal(err)
	}
	if g.Ticks != 30+12 || !slices.Equal(g.PIDs, []int{100}) || g.RunNS != 0 || g.TIDs != nil {
		t.Errorf("process 100 without task files: %+v, want 42 ticks from [100] and no run time", g)
	}
	// With the threads' schedstat: the leader's two threads, one of
	// which forked the worker, and the worker's one.
	for _, th := range []struct {
		pid, tid      int
		run, children string
	}{{100, 100, "1000 5 3", ""}, {100, 105, "20000 5 9", "101 "}, {101, 101, "300000 1 2", ""}} {
		dir := filepath.Join(root, "proc", itoa(th.pid), "task", itoa(th.tid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "stat"), []byte(statLine(th.tid, "t", 100, 1, 1)), 0o644)
		os.WriteFile(filepath.Join(dir, "schedstat"), []byte(th.run+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "children"), []byte(th.children), 0o644)
	}
	if g, err = p.ProcessCPU(100); err != nil {
		t.Fatal(err)
	}
	if g.RunNS != 321000 || !slices.Equal(g.TIDs, []int{100, 101, 105}) || g.Ticks != 792 || !slices.Equal(g.PIDs, []int{100, 101}) {
		t.Errorf("process 100 with task files: %+v, want 321000 ns from [100 101 105], 792 ticks from [100 101]", g)
	}
	if _, err := p.ProcessCPU(999); err == nil {
		t.Error("no such process: no error")
	}
	writeFakeProc(t, root, map[string]string{"103": "103 (broken) S 1\n"})
	os.WriteFile(filepath.Join(root, "proc", "101", "task", "101", "children"), []byte("103"), 0o644)
	if _, err := p.ProcessCPU(100); err == nil {
		t.Error("a malformed stat file: no error")
	}
}

// TestProcessCPULive counts this test binary and a child it started (the
// children file lists it), and not the whole process group.
func TestProcessCPULive(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task: not Linux")
	}
	if _, err := os.Stat("/proc/self/task/" + itoa(os.Getpid()) + "/children"); err != nil {
		t.Skip("no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)")
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	g, err := Proc{}.ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.PIDs, slices.Sorted(slices.Values([]int{os.Getpid(), cmd.Process.Pid}))) {
		t.Errorf("processes %v, want this one (%d) and its child %d", g.PIDs, os.Getpid(), cmd.Process.Pid)
	}
	if g.Ticks == 0 && g.RunNS == 0 {
		t.Errorf("no CPU time counted: %+v", g)
	}
}

func TestParseTaskStatPGrpLive(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc/self/stat: not Linux")
	}
	st, err := ParseTaskStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.PGrp <= 0 {
		t.Errorf("pgrp %d", st.PGrp)
	}
}

// TestProxyCPU checks the per-request arithmetic: 50 ticks (0.5 s of CPU)
// over 1 s between the reads is 50% of a CPU; at 10,000 req/s that is
// 50 µs per request. With the same threads' run time at both reads, that
// (0.25 s here) is used instead; with other threads, the ticks.
func TestProxyCPU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuEdge{g: GroupCPU{Ticks: 100}, at: t0}
	b := cpuEdge{g: GroupCPU{Ticks: 150}, at: t0.Add(time.Second)}
	us, pct, fine := proxyCPU(a, b, windowRate{replies: 20000, window: 2 * time.Second})
	if us != 50 || pct != 50 || fine {
		t.Errorf("ticks: got %v µs/req, %v%%, fine %v; want 50, 50, false", us, pct, fine)
	}
	if us, pct, _ := proxyCPU(b, a, windowRate{replies: 20000, window: 2 * time.Second}); us != 0 || pct != 0 {
		t.Errorf("reads out of order: %v, %v; want 0, 0", us, pct)
	}
	if us, _, _ := proxyCPU(a, b, windowRate{replies: 0, window: 2 * time.Second}); us != 0 {
		t.Errorf("no replies: %v µs/req", us)
	}
	a.g.RunNS, a.g.TIDs = 1_000_000_000, []int{7, 8}
	b.g.RunNS, b.g.TIDs = 1_250_000_000, []int{7, 8}
	us, pct, fine = proxyCPU(a, b, windowRate{replies: 20000, window: 2 * time.Second})
	if us != 25 || pct != 25 || !fine {
		t.Errorf("run time: got %v µs/req, %v%%, fine %v; want 25, 25, true", us, pct, fine)
	}
	b.g.TIDs = []int{7, 9}
	if us, _, fine := proxyCPU(a, b, windowRate{replies: 20000, window: 2 * time.Second}); us != 50 || fine {
		t.Errorf("threads changed: got %v µs/req, fine %v; want the ticks' 50, false", us, fine)
	}
}

// TestSummarizeProxy checks medians and the ratios to the first arm.
func TestSummarizeProxy(t *testing.T) {
	res := func(arm string, rps, p99, cpu float64) ProxyResult {
		// The upstream's CPU: twice the proxy's, plus one.
		return ProxyResult{Arm: arm, AchievedRPS: rps, Requests: uint64(rps), Latency: Percentiles{P99: p99}, ProxyUSPerReq: cpu, UpstreamUSPerReq: 2*cpu + 1, UpstreamCPUPercent: rps / 10}
	}
	rows := summarizeProxy([]ProxyResult{
		res("a", 100, 10, 4), res("b", 50, 30, 8), res("direct", 200, 5, 0),
		res("a", 110, 12, 5), res("b", 60, 20, 6), res("direct", 210, 6, 0),
		res("a", 90, 11, 3), res("b", 55, 25, 7), res("direct", 220, 7, 0),
	})
	if len(rows) != 3 || rows[0].Arm != "a" || rows[1].Arm != "b" || rows[2].Arm != "direct" {
		t.Fatalf("rows %+v", rows)
	}
	a, b, d := rows[0], rows[1], rows[2]
	if a.RPSRatio != 1 || a.P99Ratio != 1 || a.ProxyCPURatio != 1 {
		t.Errorf("first arm's ratios %v %v %v, want 1", a.RPSRatio, a.P99Ratio, a.ProxyCPURatio)
	}
	if b.AchievedRPS.Median != 55 || b.RPSRatio != 0.55 || b.P99Ratio != 25.0/11 || b.ProxyCPURatio != 7.0/4 {
		t.Errorf("b: %+v", b)
	}
	if d.ProxyCPURatio != 0 || d.RPSRatio != 2.1 {
		t.Errorf("direct: %+v", d)
	}
	if b.UpstreamUSPerReq != (Spread{Median: 15, Min: 13, Max: 17}) || b.UpstreamCPUPercent != 5.5 || a.UpstreamCPURatio != 1 || b.UpstreamCPURatio != 15.0/9 || d.UpstreamCPURatio != 1.0/9 {
		t.Errorf("upstream CPU: a %+v, b %+v, direct %+v", a, b, d)
	}
}

func TestProxyConfigRefuses(t *testing.T) {
	for _, c := range []ProxyConfig{
		{Arms: []string{"squid"}},
		{Arms: []string{"nginx", "nginx"}},
		{Reps: -1},
		{Payload: 1},
		{ProxyCPUs: []int{4096}},
		{Protocol: "udp"},
		{Protocol: ProtocolRPC},
		{Protocol: ProxyProtocolHTTP, Streams: []int{1}},
		{Protocol: ProxyProtocolH2, Streams: []int{1, 1}},
		{Protocol: ProxyProtocolH2, Streams: []int{0}},
		{Protocol: ProxyProtocolH2H2, Streams: []int{MaxHTTP2Streams + 1}},
		{Protocol: ProxyProtocolH2H2, Streams: []int{1, 1}},
		{Protocol: ProxyProtocolH2H2, UpstreamArm: "epoll"},
		{Protocol: ProxyProtocolH2H2, UpstreamArm: "test-503-after-first"},
	} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestEngineFellBack checks that a spindle arm whose engine fell back to
// another backend is caught from its start-up line, and one that runs what
// it was asked for is not.
func TestEngineFellBack(t *testing.T) {
	line := "2026/12/01 11:00:00 engine: io_uring unavailable (operation not permitted); running on epoll\n"
	if err := engineFellBack("uring", "spindle proxy: listener bench on 127.0.0.1:1, pool upstream\n"+line); err == nil || !strings.Contains(err.Error(), "io_uring unavailable") {
		t.Errorf("uring arm on epoll: %v", err)
	}
	if err := engineFellBack("uring", "spindle proxy: listener bench on 127.0.0.1:1, pool upstream\n"); err != nil {
		t.Errorf("uring arm without a fallback: %v", err)
	}
	if err := engineFellBack("epoll", line); err != nil {
		t.Errorf("epoll arm: %v", err)
	}
}

// TestProxyNotes checks that a proxy below proxyBusyPercent of a CPU is
// noted as not the bottleneck, a busy one and the direct arm are not, and
// a proxy sharing the client's CPU is noted.
func TestProxyNotes(t *testing.T) {
	r := &proxyRunner{cfg: ProxyConfig{ProxyCPUs: []int{0}, ClientCPUs: []int{1}, UpstreamCPUs: []int{1}}, report: &ProxyReport{
		Results: []ProxyResult{
			{Arm: "idle-proxy", Requests: 10, AchievedRPS: 10, ProxyCPUPercent: 40},
			{Arm: "busy-proxy", Requests: 10, AchievedRPS: 10, ProxyCPUPercent: 99},
			{Arm: ProxyArmDirect, Requests: 10, AchievedRPS: 10},
		},
	}}
	r.finish()
	notes := strings.Join(r.report.Notes, "\n")
	if !strings.Contains(notes, "idle-proxy used 40% of a CPU") {
		t.Errorf("no note for the idle proxy:\n%s", notes)
	}
	if strings.Contains(notes, "busy-proxy used") || strings.Contains(notes, "direct used") {
		t.Errorf("note for a busy proxy or the direct arm:\n%s", notes)
	}
	if strings.Contains(notes, "proxy shares a CPU") {
		t.Errorf("shared-CPU note with the proxy alone on its CPU:\n%s", notes)
	}
	if !r.clientBlocks() || !strings.Contains(notes, "sleeps in epoll_wait") {
		t.Errorf("client sharing the upstream's CPU polls, or no note says it blocks:\n%s", notes)
	}
	// The notes on one measurement are the main runner's (one source).
	r.window = 400 * time.Millisecond
	r.report.Notes = nil
	r.report.Results = []ProxyResult{{Arm: "stalled", Rep: 2}, {Arm: "late", Rep: 1, Requests: 10, Unanswered: 3, ClientCPUPercent: 95}}
	r.finish()
	for _, want := range []string{
		noRepliesNote("stalled rep 2", "proxy or upstream", r.window),
		unansweredNote("late rep 1", 3, 400*time.Millisecond),
		saturatedNote("late rep 1", "proxy", 95),
	} {
		if !slices.Contains(r.report.Notes, want) {
			t.Errorf("no note %q:\n%s", want, strings.Join(r.report.Notes, "\n"))
		}
	}
	r.cfg.UpstreamCPUs = []int{0}
	if r.clientBlocks() {
		t.Error("client alone on its CPU blocks")
	}
	r.cfg.ClientCPUs = []int{0}
	r.report.Notes = nil
	r.finish()
	if !strings.Contains(strings.Join(r.report.Notes, "\n"), "proxy shares a CPU") {
		t.Errorf("no shared-CPU note:\n%s", strings.Join(r.report.Notes, "\n"))
	}
}

// TestEchoCheck checks the start-up check of a proxy and the upstream in
// each protocol: a verified reply, even in pieces, passes; a wrong status,
// a wrong body and a close before the reply fail.
func TestEchoCheck(t *testing.T) {
	body := string(appendPayload(nil, 0xffff, 1, MinPayload))
	head := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(MinPayload) + "\r\n\r\n"
	for _, tc := range []struct {
		name     string
		protocol string
		reply    []string // written in turn, 10 ms apart; nil echoes the request
		ok       bool
	}{
		{"rpc echo", ProtocolRPC, nil, true},
		{"http echo in pieces", ProtocolHTTP, []string{head[:9], head[9:], body[:3], body[3:]}, true},
		{"http 503", ProtocolHTTP, []string{"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"}, false},
		{"http wrong body", ProtocolHTTP, []string{head, strings.Repeat("x", MinPayload)}, false},
		{"http rpc reply", ProtocolHTTP, nil, false},
		{"http close", ProtocolHTTP, []string{head}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if tc.reply == nil {
					// As an RPC echo server answers any request:
					// with what came.
					b := make([]byte, 4096)
					n, _ := c.Read(b)
					c.Write(b[:n])
					return
				}
				for _, p := range tc.reply {
					c.Write([]byte(p))
					time.Sleep(10 * time.Millisecond)
				}
			}()
			addr := l.Addr().String()
			err = echoCheck(addr, newLoadFraming(LoadConfig{Protocol: tc.protocol, Host: addr, Payload: MinPayload}))
			if tc.ok && err != nil || !tc.ok && err == nil {
				t.Errorf("echoCheck: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestSpindleProxyLogConfig checks the spindle-uring-log arm's config: the
// same listener with a JSON access log at the path given, in both
// protocols, as the proxy's strict parser reads it; and that the arm is
// accepted by name but not run by default.
func TestSpindleProxyLogConfig(t *testing.T) {
	for _, protocol := range ProxyProtocols {
		text := spindleProxyConfig(protocol, "uring", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, "/tmp/x y/access.log", nil)
		cfg, err := proxy.ParseConfig([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v\n%s", protocol, err, text)
		}
		a := cfg.Listeners[0].AccessLog
		if a == nil || a.Path != "/tmp/x y/access.log" || a.Format != proxy.AccessLogJSON {
			t.Errorf("%s: access log %+v\n%s", protocol, a, text)
		}
		if (cfg.Listeners[0].Mode == proxy.ModeHTTP) != (protocol != ProxyProtocolTCP) {
			t.Errorf("%s: mode %q", protocol, cfg.Listeners[0].Mode)
		}
		if plain := SpindleProxyConfig(protocol, "uring", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, nil); strings.Contains(plain, "access_log") {
			t.Errorf("%s: access log in the plain arm's config:\n%s", protocol, plain)
		}
	}
	c, err := ProxyConfig{Arms: []string{ProxyArmSpindleUring, ProxyArmSpindleUringLog}}.withDefaults()
	if err != nil || len(c.Arms) != 2 {
		t.Errorf("arms %v: %v", c.Arms, err)
	}
	if c, _ := (ProxyConfig{}).withDefaults(); slices.Contains(c.Arms, ProxyArmSpindleUringLog) {
		t.Errorf("default arms %v include %s", c.Arms, ProxyArmSpindleUringLog)
	}
}

// TestProxyH2Configs checks the h2 protocol's configs: each proxy takes
// HTTP/2 with prior knowledge on its listener (spindle's h2c, HAProxy's
// bind … proto h2, nginx's listen … http2) in an HTTP mode keeping idle
// HTTP/1.1 connections to the upstream, as the http protocol's do.
func TestProxyH2Configs(t *testing.T) {
	text := SpindleProxyConfig(ProxyProtocolH2, "uring", "127.0.0.1:4000", "127.0.0.1:5000", 1, 500, nil)
	for _, want := range []string{"mode: http", "h2c: true", "max_idle: 500"} {
		hasLine(t, text, want)
	}
	cfg, err := proxy.ParseConfig([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if l := cfg.Listeners; len(l) != 1 || l[0].Mode != proxy.ModeHTTP || !l[0].H2C {
		t.Errorf("listeners %+v", l)
	}
	if strings.Contains(SpindleProxyConfig(ProxyProtocolHTTP, "uring", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, nil), "h2c") {
		t.Error("the http protocol's spindle config has h2c")
	}
	ha := HAProxyConfig(ProxyProtocolH2, "127.0.0.1:4000", "127.0.0.1:5000", 500, nil)
	for _, want := range []string{"bind 127.0.0.1:4000 proto h2", "mode http", "option http-keep-alive", "http-reuse always", "maxconn 564"} {
		hasLine(t, ha, want)
	}
	ng := NginxConfig(ProxyProtocolH2, "/tmp/x", "/mod.so", "127.0.0.1:4000", "127.0.0.1:5000", 500, nil)
	for _, want := range []string{"listen 127.0.0.1:4000 http2;", "keepalive 500;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`} {
		hasLine(t, ng, want)
	}
	if strings.Contains(ng, "load_module") {
		t.Errorf("the h2 nginx config loads the stream module:\n%s", ng)
	}
	dir := t.TempDir()
	nginxCheck(t, dir, NginxConfig(ProxyProtocolH2, dir, "", "127.0.0.1:4000", "127.0.0.1:5000", 500, nil), nil)
}

// TestProxyH2Defaults checks the h2 protocol's defaults: streams 1 and 10,
// every arm but direct (the upstream does not speak h2c), whose arm, asked
// for, is unavailable with the reason; the proxies keep an idle upstream
// connection per stream in flight.
func TestProxyH2Defaults(t *testing.T) {
	cfg, err := ProxyConfig{Protocol: ProxyProtocolH2, UpstreamCommand: []string{"/nonexistent"}, ProxyCommand: []string{"/nonexistent"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Streams, DefaultHTTP2Streams) || slices.Contains(cfg.Arms, ProxyArmDirect) || len(cfg.Arms) != len(ProxyArms)-1 || cfg.H2load != "h2load" {
		t.Errorf("streams %v, arms %v, h2load %q", cfg.Streams, cfg.Arms, cfg.H2load)
	}
	r := &proxyRunner{cfg: cfg}
	if got := r.inFlight(); got != DefaultProxyConns*10 {
		t.Errorf("in flight %d, want %d", got, DefaultProxyConns*10)
	}
	if a := r.arm(ProxyArmDirect); a.unavailable == nil || a.unavailable.Error() != proxyH2NoDirect {
		t.Errorf("direct arm unavailable: %v", a.unavailable)
	}
	http, err := ProxyConfig{Protocol: ProxyProtocolHTTP, UpstreamCommand: []string{"/nonexistent"}, ProxyCommand: []string{"/nonexistent"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if http.Streams != nil || !slices.Contains(http.Arms, ProxyArmDirect) {
		t.Errorf("http: streams %v, arms %v", http.Streams, http.Arms)
	}
	if got := (&proxyRunner{cfg: http}).inFlight(); got != DefaultProxyConns {
		t.Errorf("http: in flight %d, want %d", got, DefaultProxyConns)
	}
}

// TestProxyH2H2Configs checks the h2h2 protocol's configs: each proxy
// takes HTTP/2 with prior knowledge on its listener as the h2 protocol's
// do and speaks HTTP/2 to the upstream: spindle's pool with protocol h2c
// and a bound on its upstream connections no run reaches (one per stream
// in flight; its default, 4, at the server's 100 streams each, would
// queue the default run's 500 streams),
// HAProxy's server line with proto h2, nginx's grpc_pass (its only way to
// an HTTP/2 upstream) with upstream keep-alive, and no HTTP/1.1 proxy
// settings. The proxy's strict parser reads the spindle one; nginx -t
// checks nginx's where installed (TestHAProxyConfig runs haproxy -c on
// HAProxy's).
func TestProxyH2H2Configs(t *testing.T) {
	text := SpindleProxyConfig(ProxyProtocolH2H2, "uring", "127.0.0.1:4000", "127.0.0.1:5000", 1, 500, nil)
	for _, want := range []string{"mode: http", "h2c: true", "protocol: h2c", "h2_max_connections: 500", `servers: ["127.0.0.1:5000"]`} {
		hasLine(t, text, want)
	}
	if strings.Contains(text, "max_idle") {
		t.Errorf("max_idle (HTTP/1.1 connections) in the h2h2 config:\n%s", text)
	}
	for _, other := range ProxyProtocols {
		if other != ProxyProtocolH2H2 && strings.Contains(SpindleProxyConfig(other, "uring", "127.0.0.1:4000", "127.0.0.1:5000", 1, 50, nil), "protocol:") {
			t.Errorf("the %s protocol's spindle config names the pool's protocol", other)
		}
	}
	cfg, err := proxy.ParseConfig([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if l := cfg.Listeners; len(l) != 1 || l[0].Mode != proxy.ModeHTTP || !l[0].H2C {
		t.Errorf("listeners %+v", l)
	}
	if p := cfg.Pools; len(p) != 1 || p[0].Protocol != proxy.ProtocolH2C || p[0].H2MaxConnections != 500 {
		t.Errorf("pools %+v", p)
	}
	ha := HAProxyConfig(ProxyProtocolH2H2, "127.0.0.1:4000", "127.0.0.1:5000", 500, nil)
	for _, want := range []string{"bind 127.0.0.1:4000 proto h2", "server s1 127.0.0.1:5000 proto h2", "mode http", "option http-keep-alive", "http-reuse always", "maxconn 564"} {
		hasLine(t, ha, want)
	}
	dir := t.TempDir()
	ng := NginxConfig(ProxyProtocolH2H2, dir, "/mod.so", "127.0.0.1:4000", "127.0.0.1:5000", 500, nil)
	for _, want := range []string{"listen 127.0.0.1:4000 http2;", "upstream u {", "server 127.0.0.1:5000;", "keepalive 500;", "grpc_pass grpc://u;"} {
		hasLine(t, ng, want)
	}
	for _, not := range []string{"load_module", "proxy_pass", "proxy_http_version"} {
		if strings.Contains(ng, not) {
			t.Errorf("the h2h2 nginx config has %s:\n%s", not, ng)
		}
	}
	if strings.Contains(NginxConfig(ProxyProtocolH2, dir, "", "127.0.0.1:4000", "127.0.0.1:5000", 500, nil), "grpc_pass") {
		t.Error("the h2 protocol's nginx config has grpc_pass")
	}
	nginxCheck(t, dir, ng, nginxH2Upstream)
}

// TestProxyH2H2Defaults checks the h2h2 protocol's defaults: streams 1 and
// 10, every arm with direct (the upstream speaks h2c), bench http2's
// spindle-uring arm as the upstream, started as this binary's `bench
// http2-server`; the proxies keep an idle upstream connection per stream
// in flight, as with h2.
func TestProxyH2H2Defaults(t *testing.T) {
	cfg, err := ProxyConfig{Protocol: ProxyProtocolH2H2, ProxyCommand: []string{"/nonexistent"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Streams, DefaultHTTP2Streams) || !slices.Equal(cfg.Arms, ProxyArms) || cfg.H2load != "h2load" || cfg.UpstreamArm != HTTP2ArmSpindleUring {
		t.Errorf("streams %v, arms %v, h2load %q, upstream arm %q", cfg.Streams, cfg.Arms, cfg.H2load, cfg.UpstreamArm)
	}
	if n := len(cfg.UpstreamCommand); n < 2 || cfg.UpstreamCommand[n-2] != "bench" || cfg.UpstreamCommand[n-1] != "http2-server" {
		t.Errorf("upstream command %q, want this binary's bench http2-server", cfg.UpstreamCommand)
	}
	r := &proxyRunner{cfg: cfg}
	if got := r.inFlight(); got != DefaultProxyConns*10 {
		t.Errorf("in flight %d, want %d", got, DefaultProxyConns*10)
	}
	if a := r.arm(ProxyArmDirect); a.unavailable != nil {
		t.Errorf("direct arm unavailable: %v", a.unavailable)
	}
	for _, arm := range HTTP2Arms {
		if _, err := (ProxyConfig{Protocol: ProxyProtocolH2H2, UpstreamArm: arm, UpstreamCommand: []string{"/nonexistent"}, ProxyCommand: []string{"/nonexistent"}}).withDefaults(); err != nil {
			t.Errorf("upstream arm %s: %v", arm, err)
		}
	}
	tcp, err := ProxyConfig{UpstreamCommand: []string{"/nonexistent"}, ProxyCommand: []string{"/nonexistent"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if tcp.UpstreamArm != DefaultProxyUpstreamArm {
		t.Errorf("tcp: upstream arm %q", tcp.UpstreamArm)
	}
}

// TestSideReportsNoteClampedLatencies: a bench proxy or bench http2
// measurement with latencies past the histogram's minute says how many
// in its result and in a note, as bench's do
// (TestReportShowsClampedLatencies). Their histograms counted the clamped
// values (h2load's log rows included) and the reports dropped the count:
// a max and tail percentiles of a minute read as measured.
func TestSideReportsNoteClampedLatencies(t *testing.T) {
	h := NewHistogram()
	if _, err := ParseH2loadLog(strings.NewReader("1000\t200\t500\n2000\t200\t61000000\n"), h); err != nil {
		t.Fatal(err)
	}
	if h.Overflow() != 1 {
		t.Fatalf("h2load log row of 61 s: %d clamped, want 1", h.Overflow())
	}
	pr := &proxyRunner{cfg: ProxyConfig{ProxyCPUs: []int{0}, ClientCPUs: []int{1}, UpstreamCPUs: []int{1}}, armsRun: armsRun{window: 90 * time.Second}, report: &ProxyReport{
		Results: []ProxyResult{{Arm: "haproxy", Rep: 2, Requests: 10, AchievedRPS: 10, ProxyCPUPercent: 99, LatencyClamped: 3}},
	}}
	pr.finish()
	if want := clampedNote("haproxy rep 2", 3); !slices.Contains(pr.report.Notes, want) {
		t.Errorf("proxy: no note %q:\n%s", want, strings.Join(pr.report.Notes, "\n"))
	}
	hr := &http2Runner{cfg: HTTP2Config{ServerCPUs: []int{0}, ClientCPUs: []int{1}}, armsRun: armsRun{window: 90 * time.Second}, report: &HTTP2Report{
		Results: []HTTP2Result{{Arm: "nginx", Streams: 10, Rep: 1, Requests: 10, AchievedRPS: 10, ServerCPUPercent: 99, LatencyClamped: 1}},
	}}
	hr.finish()
	if want := clampedNote("nginx streams 10 rep 1", 1); !slices.Contains(hr.report.Notes, want) {
		t.Errorf("http2: no note %q:\n%s", want, strings.Join(hr.report.Notes, "\n"))
	}
}

// TestSideReportsNoteTailPercentilesOfFewLatencies: a bench proxy or bench
// http2 measurement says how many latencies its percentiles are of, and a
// note names the p99 and p99.9, the tail percentiles their tables show,
// that fall among the ten slowest latencies of an arm's repetition with the
// fewest at a load point, as bench's do
// (TestReportNotesTailPercentilesOfFewLatencies). Neither report said how
// many latencies there were: a p99.9 of 2000 (among the three slowest) read
// like a measured tail.
func TestSideReportsNoteTailPercentilesOfFewLatencies(t *testing.T) {
	const few = "measured as few as 2000 latencies in a repetition: its p99.9 is among its 3 slowest;"
	check := func(t *testing.T, results any, notes []string, want string) {
		t.Helper()
		b, err := json.Marshal(results)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"latency_count":2000`) {
			t.Errorf("results' JSON has no latency_count: %s", b)
		}
		var got []string
		for _, n := range notes {
			if strings.Contains(n, "latencies in a repetition") {
				got = append(got, n)
			}
		}
		// The other arm's 50000 latencies get none: their p99.99, among
		// the 6 slowest, is in the results but not in the tables.
		if len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("notes %q, want one starting %q", got, want)
		}
	}
	t.Run("proxy", func(t *testing.T) {
		r := &proxyRunner{cfg: ProxyConfig{Protocol: ProxyProtocolH2, ProxyCPUs: []int{0}, ClientCPUs: []int{1}, UpstreamCPUs: []int{1}}, report: &ProxyReport{
			Results: []ProxyResult{
				{Arm: "haproxy", Streams: 10, Rep: 1, Requests: 2000, LatencyCount: 2000, ProxyCPUPercent: 99},
				{Arm: "haproxy", Streams: 10, Rep: 2, Requests: 20000, LatencyCount: 20000, ProxyCPUPercent: 99},
				{Arm: "nginx", Streams: 10, Rep: 1, Requests: 50000, LatencyCount: 50000, ProxyCPUPercent: 99},
			},
		}}
		r.finish()
		check(t, r.report.Results, r.report.Notes, "haproxy at 10 streams "+few)
	})
	t.Run("http2", func(t *testing.T) {
		r := &http2Runner{cfg: HTTP2Config{ServerCPUs: []int{0}, ClientCPUs: []int{1}}, report: &HTTP2Report{
			Results: []HTTP2Result{
				{Arm: "nginx", Streams: 1, Rep: 1, Requests: 50000, LatencyCount: 50000, ServerCPUPercent: 99},
				{Arm: "go-net-http", Streams: 1, Rep: 1, Requests: 2000, LatencyCount: 2000, ServerCPUPercent: 99},
			},
		}}
		r.finish()
		check(t, r.report.Results, r.report.Notes, "go-net-http at 1 streams "+few)
	})
}
