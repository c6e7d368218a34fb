package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// goldenUpdateEnv set to 1 rewrites the golden files instead of comparing
// with them.
const goldenUpdateEnv = "SPINDLE_BENCH_GOLDEN_UPDATE"

// checkGolden compares the files a report writer made (report.json,
// report.md) and its plain-text table with testdata/golden/name.*, whole:
// the documents users' scripts read, and the tables they see, change only
// on purpose.
func checkGolden(t *testing.T, name string, write func(dir string) error, table string) {
	t.Helper()
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{".txt": []byte(table)}
	for ext, file := range map[string]string{".json": ReportJSON, ".md": ReportMarkdown} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		got[ext] = b
	}
	for ext, b := range got {
		path := filepath.Join("testdata", "golden", name+ext)
		if os.Getenv(goldenUpdateEnv) == "1" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Errorf("%s differs from %s:\n%s", name+ext, path, firstDiff(string(b), string(want)))
		}
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\ngot  " + gl + "\nwant " + wl
		}
	}
	return "(same lines)"
}

var (
	goldenStarted = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	goldenHost    = Host{Hostname: "bench1", Kernel: "6.18.0", CPUs: 2, CPUModel: "Test CPU @ 3.00GHz", GoVersion: "go1.26.0", TCPCongestion: "cubic"}
)

// TestHTTP2ReportGolden renders an HTTP/2 report made from fixed results
// (summarizeHTTP2, finish's paired ratios to go-net-http and notes) as report.json, report.md and the
// table, and compares them whole with the golden files.
func TestHTTP2ReportGolden(t *testing.T) {
	cfg := HTTP2Config{ServerCPUs: []int{0}, ClientCPUs: []int{0, 1}}
	r := &http2Runner{cfg: cfg, armsRun: armsRun{window: 400 * time.Millisecond}, report: &HTTP2Report{
		Schema: HTTP2Schema, Started: goldenStarted, Host: goldenHost,
		Config: HTTP2Settings{Conns: 50, Streams: []int{1, 10}, Body: 64, Reps: 2, ServerCPUs: cfg.ServerCPUs, ClientCPUs: cfg.ClientCPUs,
			ClientThreads: 2, H2load: "h2load nghttp2/1.64.0", WarmupSeconds: 0.1, WindowSeconds: 0.4},
		Arms:  []ArmInfo{{Name: HTTP2ArmSpindleUring, Summary: "uring"}, {Name: HTTP2ArmGoNetHTTP, Summary: "net/http"}, {Name: HTTP2ArmNginx, Summary: "nginx", Skipped: "nginx is not installed"}},
		Notes: []string{"a note from the run"},
	}}
	res := func(arm string, streams, rep int, rps, p99, cpu, pct float64, src string) HTTP2Result {
		r := HTTP2Result{Arm: arm, Streams: streams, Rep: rep, AchievedRPS: rps, Requests: uint64(rps * 0.4), LatencyCount: int64(rps * 0.4),
			Latency:        Percentiles{P50: p99 / 3, P90: p99 / 2, P99: p99, P999: p99 * 1.5, P9999: p99 * 2, Max: p99 * 3},
			ServerUSPerReq: cpu, ServerCPUPercent: pct, ServerCPUSource: src, ClientCPUPercent: 60 + pct/10}
		if rps > 0 {
			// h2load sleeps in its waits: no client polls.
			work := cpu*1.5 + 2
			r.Machine = MachineWork{TotalUSPerReq: work, WorkUSPerReq: work, SoftirqUSPerReq: cpu / 5, StealUSPerReq: float64(rep-1) / 4,
				PerCPU: []CPUSplit{
					{CPU: 0, Role: "server", BusyPercent: pct, UserUSPerReq: cpu * 0.6, SysUSPerReq: cpu * 0.4, SoftirqUSPerReq: cpu / 10},
					{CPU: 1, Role: "client", BusyPercent: 60, UserUSPerReq: cpu * 0.5, SysUSPerReq: 2 + cpu*0.3, SoftirqUSPerReq: cpu / 10},
				},
				InterruptsPerReq: 0.25 + float64(rep)/8, DeviceIRQsPerReq: 0, NetRxPerReq: 0.5 + cpu/100}
		}
		return r
	}
	r.report.Results = []HTTP2Result{
		res(HTTP2ArmSpindleUring, 1, 1, 41000, 95, 12.5, 99, "schedstat"), res(HTTP2ArmGoNetHTTP, 1, 1, 30000, 130, 21.25, 97, "schedstat"),
		res(HTTP2ArmSpindleUring, 10, 1, 90000, 400, 8.75, 99, "schedstat"), res(HTTP2ArmGoNetHTTP, 10, 1, 50000, 700, 17.5, 60, "stat"),
		res(HTTP2ArmSpindleUring, 1, 2, 43000, 90, 12, 98, "schedstat"), res(HTTP2ArmGoNetHTTP, 1, 2, 31000, 120, 20, 96, "schedstat"),
		res(HTTP2ArmSpindleUring, 10, 2, 0, 0, 0, 0, "stat"), res(HTTP2ArmGoNetHTTP, 10, 2, 52000, 650, 18, 91, "schedstat"),
	}
	r.report.Results[1].ClientCPUPercent = 95
	r.finish()
	r.report.Seconds = 12.25
	var table strings.Builder
	WriteHTTP2Table(&table, r.report)
	checkGolden(t, "http2", func(dir string) error { return WriteHTTP2Report(dir, r.report) }, table.String())
}

// TestProxyReportGolden is TestHTTP2ReportGolden for proxy reports: a TCP
// one (with the direct arm and unanswered requests, paired ratios to
// haproxy by default) and an h2h2 one (at two streams values, paired
// ratios to direct).
func TestProxyReportGolden(t *testing.T) {
	res := func(arm string, streams, rep int, rps, p99, cpu, pct float64, src string) ProxyResult {
		r := ProxyResult{Arm: arm, Streams: streams, Rep: rep, AchievedRPS: rps, Requests: uint64(rps * 0.4), LatencyCount: int64(rps * 0.4),
			Latency:       Percentiles{P50: p99 / 3, P90: p99 / 2, P99: p99, P999: p99 * 1.5, P9999: p99 * 2, Max: p99 * 3},
			ProxyUSPerReq: cpu, ProxyCPUPercent: pct, ProxyCPUSource: src, ProxyProcs: 1,
			UpstreamUSPerReq: cpu/2 + 3, UpstreamCPUPercent: pct / 2, UpstreamCPUSource: "schedstat", ClientCPUPercent: 50 + pct/5}
		if rps > 0 {
			// The client shares CPU 1 with the upstream (tcp: it sleeps
			// in its waits), or is h2load (h2h2): no client polls.
			work := cpu*1.5 + 7
			r.Machine = MachineWork{TotalUSPerReq: work, WorkUSPerReq: work, SoftirqUSPerReq: 1.5 + cpu/10, StealUSPerReq: float64(rep-1) / 4,
				PerCPU: []CPUSplit{
					{CPU: 0, Role: "proxy", BusyPercent: pct, UserUSPerReq: cpu * 0.5, SysUSPerReq: cpu * 0.4, SoftirqUSPerReq: 0.5},
					{CPU: 1, Role: "upstream+client", BusyPercent: 70, UserUSPerReq: 3 + cpu*0.25, SysUSPerReq: 2.5 + cpu/4, SoftirqUSPerReq: 1 + cpu/10},
				},
				InterruptsPerReq: 0.5 + float64(rep)/4, DeviceIRQsPerReq: 0, NetRxPerReq: 1 + cpu/50}
		}
		if arm == ProxyArmDirect {
			r.ProxyUSPerReq, r.ProxyCPUPercent, r.ProxyCPUSource, r.ProxyProcs = 0, 0, "", 0
		}
		if rep == 2 && arm == ProxyArmHAProxy {
			r.Unanswered, r.UpstreamCPUSource = 7, "stat"
		}
		return r
	}
	for _, tc := range []struct {
		name, protocol string
		streams        []int
		results        []ProxyResult
	}{
		{"proxy-tcp", ProxyProtocolTCP, nil, []ProxyResult{
			res(ProxyArmSpindleUring, 0, 1, 61000, 70, 9.5, 99, "schedstat"), res(ProxyArmHAProxy, 0, 1, 40000, 110, 16.25, 98, "stat"), res(ProxyArmDirect, 0, 1, 90000, 40, 0, 0, ""),
			res(ProxyArmSpindleUring, 0, 2, 63000, 66, 9, 97, "schedstat"), res(ProxyArmHAProxy, 0, 2, 0, 0, 0, 40, "schedstat"), res(ProxyArmDirect, 0, 2, 92000, 38, 0, 0, ""),
		}},
		{"proxy-h2h2", ProxyProtocolH2H2, []int{1, 10}, []ProxyResult{
			res(ProxyArmSpindleUring, 1, 1, 31000, 120, 14.5, 99, "schedstat"), res(ProxyArmDirect, 1, 1, 45000, 80, 0, 0, ""),
			res(ProxyArmSpindleUring, 10, 1, 70000, 500, 7.25, 99, "schedstat"), res(ProxyArmDirect, 10, 1, 95000, 300, 0, 0, ""),
			res(ProxyArmSpindleUring, 1, 2, 32000, 118, 14, 70, "schedstat"), res(ProxyArmDirect, 1, 2, 46000, 79, 0, 0, ""),
			res(ProxyArmSpindleUring, 10, 2, 72000, 480, 7, 99, "stat"), res(ProxyArmDirect, 10, 2, 96000, 310, 0, 0, ""),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ProxyConfig{Protocol: tc.protocol, Arms: []string{ProxyArmSpindleUring, ProxyArmHAProxy, ProxyArmDirect}, Streams: tc.streams,
				ProxyCPUs: []int{0}, ClientCPUs: []int{1}, UpstreamCPUs: []int{1}}
			settings := ProxySettings{Protocol: tc.protocol, Conns: 50, InFlight: 1, Payload: 64, Reps: 2, ProxyCPUs: cfg.ProxyCPUs,
				ClientCPUs: cfg.ClientCPUs, UpstreamCPUs: cfg.UpstreamCPUs, UpstreamArm: DefaultProxyUpstreamArm, WarmupSeconds: 0.1, WindowSeconds: 0.4}
			arms := []ArmInfo{{Name: ProxyArmSpindleUring, Summary: "uring"}, {Name: ProxyArmHAProxy, Summary: "haproxy"}, {Name: ProxyArmDirect, Summary: "none"}}
			if h2Clients(tc.protocol) {
				// haproxy, the default reference, is skipped: the ratios
				// are to direct, which has no proxy CPU.
				cfg.RatioTo = []string{ProxyArmDirect}
				settings.Streams, settings.ClientThreads, settings.H2load, settings.UpstreamArm = tc.streams, 1, "h2load nghttp2/1.64.0", DefaultProxyH2UpstreamArm
				arms[1].Skipped = "haproxy is not installed"
			}
			r := &proxyRunner{cfg: cfg, armsRun: armsRun{window: 400 * time.Millisecond}, report: &ProxyReport{
				Schema: ProxySchema, Started: goldenStarted, Host: goldenHost, Config: settings, Arms: arms,
				Results: tc.results, Notes: []string{"a note from the run"},
			}}
			r.report.Results[0].ClientCPUPercent = 93
			r.finish()
			r.report.Seconds = 7.5
			var table strings.Builder
			WriteProxyTable(&table, r.report)
			checkGolden(t, tc.name, func(dir string) error { return WriteProxyReport(dir, r.report) }, table.String())
		})
	}
}

// TestReportGolden renders a bench report made from fixed results (finish's
// summary, paired ratios and notes) as report.json, report.md and the
// table, and compares them whole with the golden files: three repetitions
// of go-net, uring and epoll in the balanced order, closed loop on a
// machine that slows down (the drift note), then open loop at 50 %.
func TestReportGolden(t *testing.T) {
	// c-liburing, a reference given, is skipped: no ratios to it, and a
	// note.
	cfg := Config{ServerCPUs: []int{0}, ClientCPUs: []int{1}, ClientThreads: 1, RatioTo: []string{"go-net", "c-liburing"}}
	r := &runner{cfg: cfg, window: 400 * time.Millisecond, report: &Report{
		Schema: SchemaVersion, Started: goldenStarted, Kind: "bench", Host: goldenHost, Topology: "wire",
		Config: RunSettings{Conns: 50, InFlight: 1, Payload: 64, Loops: 1, ServerCPUs: cfg.ServerCPUs, ClientCPUs: cfg.ClientCPUs,
			ClientThreads: 1, Reps: 3, WarmupSeconds: 0.1, WindowSeconds: 0.4, OpenFractions: []float64{0.5}},
		Arms: []ArmInfo{{Name: "go-net", Summary: "netpoller"}, {Name: "uring", Summary: "io_uring"}, {Name: "epoll", Summary: "epoll"},
			{Name: "c-liburing", Summary: "C", Skipped: "cc is not installed"}},
		Notes: []string{"a note from the run"},
	}}
	if err := r.ratioRefs(); err != nil {
		t.Fatal(err)
	}
	res := func(arm string, rep int, frac, rps, p99, cpu float64) Result {
		mode, offered := "closed", 0.0
		if frac > 0 {
			mode, offered = "open", 30000
		}
		return Result{Arm: arm, Rep: rep, Mode: mode, Fraction: frac, OfferedRPS: offered, Loops: 1, AchievedRPS: rps, Requests: uint64(rps * 0.4),
			Latency: Percentiles{P50: p99 / 3, P90: p99 / 2, P99: p99, P999: p99 * 1.5, P9999: p99 * 2, Max: p99 * 3},
			Server:  ServerCPU{TotalUSPerReq: cpu, UserUSPerReq: cpu / 4, SysUSPerReq: cpu * 3 / 4},
			Machine: MachineCPU{TotalUSPerReq: cpu * 2, WorkUSPerReq: cpu * 1.5, ClientPollUSPerReq: cpu / 2}, ClientCPUPercent: 95}
	}
	r.report.Results = []Result{
		res("go-net", 1, 0, 68000, 800, 14), res("uring", 1, 0, 94000, 560, 10), res("epoll", 1, 0, 93000, 570, 10.5),
		res("epoll", 2, 0, 80000, 650, 12.5), res("uring", 2, 0, 79000, 640, 12.25), res("go-net", 2, 0, 62000, 880, 15.5),
		res("go-net", 3, 0, 60000, 900, 16), res("uring", 3, 0, 70000, 700, 13.5), res("epoll", 3, 0, 71000, 720, 14.5),
		res("go-net", 1, 0.5, 30000, 120, 15), res("uring", 1, 0.5, 30000, 110, 11), res("epoll", 1, 0.5, 30000, 115, 11.5),
		res("epoll", 2, 0.5, 30000, 118, 12), res("uring", 2, 0.5, 30000, 125, 12), res("go-net", 2, 0.5, 29990, 130, 15.5),
		res("go-net", 3, 0.5, 30000, 119, 16), res("uring", 3, 0.5, 30000, 121, 11.5), res("epoll", 3, 0.5, 30000, 117, 12),
	}
	r.finish()
	r.report.Seconds = 9.5
	var table strings.Builder
	WriteTable(&table, r.report)
	checkGolden(t, "bench", func(dir string) error { return WriteReport(dir, r.report) }, table.String())
}
