package bench

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHTTP2ConfigDefaults(t *testing.T) {
	c, err := HTTP2Config{ServerCommand: []string{"x"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Duration != DefaultHTTP2Duration || c.Reps != DefaultHTTP2Reps || c.Conns != DefaultHTTP2Conns || c.Body != DefaultHTTP2Body ||
		!slices.Equal(c.Streams, DefaultHTTP2Streams) || !slices.Equal(c.Arms, HTTP2Arms) || c.H2load != "h2load" || len(c.ServerCPUs) != 1 || len(c.ClientCPUs) != 1 {
		t.Fatalf("defaults: %+v", c)
	}
	for name, bad := range map[string]HTTP2Config{
		"negative duration": {Duration: -time.Second},
		"negative conns":    {Conns: -1},
		"streams 0":         {Streams: []int{0}},
		"streams twice":     {Streams: []int{1, 1}},
		"streams above max": {Streams: []int{1, MaxHTTP2Streams + 1}},
		"body too big":      {Body: MaxHTTP2Body + 1},
		"body negative":     {Body: -1},
		"unknown arm":       {Arms: []string{"h2o"}},
		"arm twice":         {Arms: []string{HTTP2ArmNginx, HTTP2ArmNginx}},
		"offline CPU":       {ServerCPUs: []int{4095}},
	} {
		bad.ServerCommand = []string{"x"}
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestH2loadArgs(t *testing.T) {
	r := &http2Runner{cfg: HTTP2Config{H2load: "/usr/bin/h2load", Conns: 50}, threads: 2, armsRun: armsRun{warmup: 500 * time.Millisecond, window: 2 * time.Second}}
	got := strings.Join(r.driver().args("127.0.0.1:9", 10, "/tmp/x.log"), " ")
	want := "/usr/bin/h2load -t 2 -c 50 -m 10 --warm-up-time 500ms -D 2000ms --log-file /tmp/x.log http://127.0.0.1:9/"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestSummarizeHTTP2 checks the medians and that each streams value's
// ratios divide by its own first arm, the rows grouped by streams.
func TestSummarizeHTTP2(t *testing.T) {
	res := func(arm string, streams, rep int, rps, p99, cpu float64) HTTP2Result {
		return HTTP2Result{Arm: arm, Streams: streams, Rep: rep, AchievedRPS: rps, Requests: uint64(rps), Latency: Percentiles{P99: p99}, ServerUSPerReq: cpu, ServerCPUPercent: 100, ClientCPUPercent: 50}
	}
	var results []HTTP2Result
	for rep := 1; rep <= 3; rep++ {
		f := float64(rep)
		results = append(results,
			res("a", 1, rep, 1000*f, 100*f, 10*f), res("b", 1, rep, 2000*f, 50*f, 5*f),
			res("a", 10, rep, 4000*f, 400*f, 4*f), res("b", 10, rep, 2000*f, 800*f, 8*f))
	}
	rows := summarizeHTTP2(results)
	type got struct {
		arm             string
		streams         int
		rps, rpsR, p99R float64
		cpuR            float64
	}
	var g []got
	for _, r := range rows {
		g = append(g, got{r.Arm, r.Streams, r.AchievedRPS.Median, r.RPSRatio, r.P99Ratio, r.ServerCPURatio})
	}
	want := []got{{"a", 1, 2000, 1, 1, 1}, {"b", 1, 4000, 2, 0.5, 0.5}, {"a", 10, 8000, 1, 1, 1}, {"b", 10, 4000, 0.5, 2, 2}}
	if !slices.Equal(g, want) {
		t.Fatalf("got  %+v\nwant %+v", g, want)
	}
	if s := rows[0].AchievedRPS; s.Min != 1000 || s.Max != 3000 || rows[0].Reps != 3 {
		t.Fatalf("spread %+v reps %d", s, rows[0].Reps)
	}
}

// TestNginxHTTP2Config checks the generated nginx config's directives
// and, where nginx is installed with its http2 module, that nginx -t
// accepts it.
func TestNginxHTTP2Config(t *testing.T) {
	dir := t.TempDir()
	conf := NginxHTTP2Config(dir, "127.0.0.1:8443", 30, 50)
	for _, want := range []string{
		"listen 127.0.0.1:8443 http2;",
		`return 200 "abcdefghijklmnopqrstuvwxyzabcd";`,
		"default_type " + http2ContentType + ";",
		"keepalive_requests 1000000000;",
		"keepalive_timeout 300s;",
		"daemon off;",
		"master_process off;",
		"worker_processes 1;",
		"worker_connections 114;",
		"pid " + filepath.Join(dir, "nginx.pid") + ";",
		"access_log off;",
		"client_body_temp_path " + filepath.Join(dir, "client_body") + ";",
	} {
		hasLine(t, conf, want)
	}
	nginxCheck(t, dir, conf, nginxHTTP2)
}

func TestHTTP2Markdown(t *testing.T) {
	rep := &HTTP2Report{
		Schema: HTTP2Schema, Config: HTTP2Settings{Conns: 50, Streams: []int{1}, Body: 64, Reps: 1},
		Arms:    []ArmInfo{{Name: "go-net-http"}, {Name: "spindle-uring", Skipped: "not built"}},
		Summary: summarizeHTTP2([]HTTP2Result{{Arm: "go-net-http", Streams: 1, Rep: 1, AchievedRPS: 1234, Requests: 1234, ServerUSPerReq: 9.5}}),
	}
	md := HTTP2Markdown(rep)
	for _, want := range []string{"| go-net-http | 1 | 1234 |", "| 9.50 |", "*skipped: not built*"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	var b strings.Builder
	WriteHTTP2Table(&b, rep)
	if !strings.Contains(b.String(), "go-net-http") || !strings.Contains(b.String(), "ratios to go-net-http") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestLateEdgesNote(t *testing.T) {
	t0 := time.Unix(1796150892, 0)
	l := H2loadLog{Requests: 100, FirstEndUS: t0.UnixMicro(), LastEndUS: t0.Add(2 * time.Second).UnixMicro()}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		from, to int // ms after the first response
		late     bool
	}{
		{-5, 2005, false},
		{100, 1900, false},
		{900, 2100, false}, // 55%
		{1100, 2100, true}, // read late at the start: 45%
		{1990, 2001, true}, // both after the window, nearly
		{2100, 2200, true}, // both after it
		{-500, -100, true}, // both before it
	} {
		n := lateEdgesNote("nginx streams 10 rep 2", "server", at(tc.from), at(tc.to), l)
		if (n != "") != tc.late {
			t.Errorf("reads at %d and %d ms: note %q, want late %v", tc.from, tc.to, n, tc.late)
		}
		if n != "" && !strings.HasPrefix(n, "nginx streams 10 rep 2: the harness read the CPU") {
			t.Errorf("note %q", n)
		}
	}
	if n := lateEdgesNote("nginx streams 10 rep 2", "server", at(0), at(0), H2loadLog{}); n != "" {
		t.Errorf("no request: %q", n)
	}
}

// TestH2loadClientPercent: h2load's CPU is a percent of the client CPUs
// its threads can run on, as the load generator's is (ClientCPUPercent):
// one thread on two client CPUs (--conns 1) that keeps one of them busy
// is saturated, 100 %, where it read 50 % and no saturation note came.
func TestH2loadClientPercent(t *testing.T) {
	for _, tc := range []struct {
		threads   int
		cpus      []int
		pct, want float64
	}{
		{1, []int{1}, 80, 80},
		{1, []int{1, 2}, 100, 100},
		{2, []int{1, 2}, 100, 50},
		{2, []int{1, 2}, 200, 100},
		{3, []int{1, 2}, 200, 100},
	} {
		d := h2loadDriver{threads: tc.threads, cpus: tc.cpus}
		if got := d.clientPercent(tc.pct); got != tc.want {
			t.Errorf("%d threads on CPUs %v using %v%% of a CPU: %v%%, want %v%%", tc.threads, tc.cpus, tc.pct, got, tc.want)
		}
	}
}
