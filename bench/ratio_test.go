package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ratioResult is a measurement with the figures the paired ratios read.
func ratioResult(arm string, rep int, mode string, cpu, p99 float64) Result {
	return Result{Arm: arm, Rep: rep, Mode: mode, Requests: 100, AchievedRPS: 1000, Server: ServerCPU{TotalUSPerReq: cpu}, Latency: Percentiles{P99: p99}}
}

// TestPairedRatios: each arm's figures are divided by the reference's of
// the same repetition and load point, not by the reference's median; a
// repetition without a usable reference figure does not pair.
func TestPairedRatios(t *testing.T) {
	rs := []Result{
		// A machine that slows down over the run: go-net's CPU per request
		// grows 10 → 20 → 40, uring is half of it in every repetition.
		ratioResult("go-net", 1, "closed", 10, 100), ratioResult("uring", 1, "closed", 5, 50), ratioResult("gnet", 1, "closed", 11, 90),
		ratioResult("gnet", 2, "closed", 19, 210), ratioResult("uring", 2, "closed", 10, 200), ratioResult("go-net", 2, "closed", 20, 200),
		ratioResult("go-net", 3, "closed", 40, 400), ratioResult("uring", 3, "closed", 20, 440), ratioResult("gnet", 3, "closed", 44, 400),
	}
	open := func(arm string, rep int, cpu, p99 float64) Result {
		r := ratioResult(arm, rep, "open", cpu, p99)
		r.Fraction = 0.5
		return r
	}
	rs = append(rs, open("go-net", 1, 8, 30), open("uring", 1, 4, 30), open("go-net", 2, 0, 0), open("uring", 2, 6, 30))
	rs[len(rs)-2].Requests = 0 // go-net open rep 2: no replies, no pair

	got := pairedRatios(rs, []string{"go-net", "c-liburing", "gnet"})
	var lines []string
	for _, p := range got {
		var by []string
		for _, r := range p.ByRep {
			by = append(by, fmt.Sprintf("%d:%.2f/%.2f", r.Rep, r.ServerUSPerReq, r.P99))
		}
		lines = append(lines, fmt.Sprintf("%s/%s %s %.1f pairs %d cpu %.2f (%.2f–%.2f) ≤1 %d p99 %.2f (%.2f–%.2f) ≤1 %d [%s]", p.Arm, p.Ref, p.Mode, p.Fraction, p.Pairs,
			p.ServerUSPerReq.Median, p.ServerUSPerReq.Min, p.ServerUSPerReq.Max, p.ServerAtMost1, p.P99.Median, p.P99.Min, p.P99.Max, p.P99AtMost1, strings.Join(by, " ")))
	}
	want := []string{
		"uring/go-net closed 0.0 pairs 3 cpu 0.50 (0.50–0.50) ≤1 3 p99 1.00 (0.50–1.10) ≤1 2 [1:0.50/0.50 2:0.50/1.00 3:0.50/1.10]",
		"gnet/go-net closed 0.0 pairs 3 cpu 1.10 (0.95–1.10) ≤1 1 p99 1.00 (0.90–1.05) ≤1 2 [1:1.10/0.90 2:0.95/1.05 3:1.10/1.00]",
		"uring/go-net open 0.5 pairs 1 cpu 0.50 (0.50–0.50) ≤1 1 p99 1.00 (1.00–1.00) ≤1 1 [1:0.50/1.00]",
		"go-net/gnet closed 0.0 pairs 3 cpu 0.91 (0.91–1.05) ≤1 2 p99 1.00 (0.95–1.11) ≤1 2 [1:0.91/1.11 2:1.05/0.95 3:0.91/1.00]",
		"uring/gnet closed 0.0 pairs 3 cpu 0.45 (0.45–0.53) ≤1 3 p99 0.95 (0.56–1.10) ≤1 2 [1:0.45/0.56 2:0.53/0.95 3:0.45/1.10]",
	}
	equalLines(t, lines, want)
	// The ratio of the medians would be 10/20 for uring: the same here, but
	// gnet's median ratio 19/20 hides that it cost more in two of three.
}

// TestPairedRatiosWhole: a load point's repetition pairs on both figures
// or on neither: a reference's figure of 0 leaves the repetition out, the
// other figure too, while an arm's figure of 0 is a ratio of 0 (unlike the
// side-by-side reports' ratios, which pair figure by figure).
func TestPairedRatiosWhole(t *testing.T) {
	rs := []Result{
		ratioResult("go-net", 1, "closed", 10, 0), ratioResult("uring", 1, "closed", 5, 50),
		ratioResult("go-net", 2, "closed", 10, 100), ratioResult("uring", 2, "closed", 0, 50),
		ratioResult("go-net", 3, "closed", 10, 100), ratioResult("uring", 3, "closed", 20, 100),
	}
	got := pairedRatios(rs, []string{"go-net"})
	if len(got) != 1 {
		t.Fatalf("%+v", got)
	}
	p := got[0]
	want := []RepRatio{{Rep: 2, ServerUSPerReq: 0, P99: 0.5}, {Rep: 3, ServerUSPerReq: 2, P99: 1}}
	if p.Pairs != 2 || !slices.Equal(p.ByRep, want) || p.ServerUSPerReq != (Spread{1, 0, 2}) || p.ServerAtMost1 != 1 || p.P99 != (Spread{0.75, 0.5, 1}) || p.P99AtMost1 != 2 {
		t.Errorf("%+v", p)
	}
}

// TestPairedRatiosServerRPS: with server RPS settings a reference names the
// arm, and each setting's arms pair among themselves.
func TestPairedRatiosServerRPS(t *testing.T) {
	var rs []Result
	for rep := 1; rep <= 2; rep++ {
		for _, rps := range []string{"none", "0"} {
			for _, arm := range []string{"go-net", "uring"} {
				cpu := 10.0
				if arm == "uring" {
					cpu = 5
				}
				if rps == "0" {
					cpu *= 2
				}
				r := ratioResult(arm+" rps="+rps, rep, "closed", cpu, 100)
				r.ServerRPS = rps
				rs = append(rs, r)
			}
		}
	}
	got := pairedRatios(rs, []string{"go-net"})
	if len(got) != 2 || got[0].Arm != "uring rps=none" || got[0].Ref != "go-net rps=none" || got[1].Arm != "uring rps=0" || got[1].Ref != "go-net rps=0" {
		t.Fatalf("%+v", got)
	}
	for _, p := range got {
		if p.Pairs != 2 || p.ServerUSPerReq != (Spread{0.5, 0.5, 0.5}) {
			t.Errorf("%s/%s: %+v", p.Arm, p.Ref, p)
		}
	}
}

func TestRatioRefs(t *testing.T) {
	for _, tc := range []struct {
		want, ran, refs []string
	}{
		{nil, []string{"uring", "c-liburing", "go-net"}, []string{"go-net", "c-liburing"}},
		{nil, []string{"uring", "epoll"}, []string{}},
		{[]string{"epoll"}, []string{"uring", "epoll", "go-net"}, []string{"epoll"}},
		{[]string{}, []string{"uring", "go-net"}, []string{}},
	} {
		if got := ratioRefs(tc.want, DefaultRatioTo, tc.ran); !slices.Equal(got, tc.refs) {
			t.Errorf("ratioRefs(%q, %q) = %q, want %q", tc.want, tc.ran, got, tc.refs)
		}
	}
}

// TestDriftNotes: a load point at which an arm's achieved rate varied by
// more than 25 % between repetitions gets one note naming those arms;
// 25 % itself, one repetition, or a repetition without replies do not.
func TestDriftNotes(t *testing.T) {
	row := func(arm, point string, reps int, lo, hi float64) driftRow {
		return driftRow{arm: arm, point: point, reps: reps, rps: Spread{Median: lo, Min: lo, Max: hi}, paired: point == "closed"}
	}
	rows := []driftRow{
		row("go-net", "closed", 3, 68000, 94000), row("gnet", "closed", 3, 79000, 98750), row("uring", "closed", 3, 100000, 133000),
		row("go-net", "open", 3, 40000, 40000), row("uring", "open", 1, 10000, 40000), row("epoll", "open", 3, 0, 40000),
		row("go-net", "sweep", 3, 10000, 20000),
	}
	want := []string{
		"closed: the achieved rate varied between repetitions by more than 25% (go-net 68000–94000 req/s (+38%), uring 100000–133000 req/s (+33%)): the machine's speed drifted during the run, and each arm's median mixes repetitions measured at different speeds; the paired ratios at this load point (each repetition's measurement divided by the reference arm's of the same repetition, made side by side) are the ones to trust, over ratios of each arm's medians",
		"sweep: the achieved rate varied between repetitions by more than 25% (go-net 10000–20000 req/s (+100%)): the machine's speed drifted during the run, and each arm's median mixes repetitions measured at different speeds; compare the arms here repetition by repetition (the results, each repetition's arms measured side by side), not by ratios of their medians",
	}
	if notes := driftNotes(rows); !slices.Equal(notes, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
}

// TestSideBySideDriftNotes: bench proxy and bench http2 note the drift too,
// at each streams value (a TCP proxy run has the one load point), and send
// the reader to the paired ratios where there are some.
func TestSideBySideDriftNotes(t *testing.T) {
	drifted := func(notes []string, point, arm string) bool {
		return slices.ContainsFunc(notes, func(n string) bool {
			return strings.HasPrefix(n, point+": the achieved rate varied") && strings.Contains(n, arm+" 40000–60000 req/s (+50%)") && strings.Contains(n, "repetition by repetition")
		})
	}
	pres := func(arm string, streams, rep int, rps float64) ProxyResult {
		return ProxyResult{Arm: arm, Streams: streams, Rep: rep, AchievedRPS: rps, Requests: 1000, Latency: Percentiles{P99: 100}, ProxyUSPerReq: 5, ProxyCPUPercent: 99}
	}
	for _, tc := range []struct {
		protocol, point string
		streams         int
	}{{ProxyProtocolTCP, "closed loop", 0}, {ProxyProtocolH2, "streams 10", 10}} {
		r := &proxyRunner{cfg: ProxyConfig{Protocol: tc.protocol, ProxyCPUs: []int{0}, ClientCPUs: []int{1}, UpstreamCPUs: []int{1}}, report: &ProxyReport{
			Results: []ProxyResult{pres("spindle-uring", tc.streams, 1, 40000), pres("haproxy", tc.streams, 1, 41000), pres("haproxy", tc.streams, 2, 45000), pres("spindle-uring", tc.streams, 2, 60000)},
		}}
		r.finish()
		if !drifted(r.report.Notes, tc.point, "spindle-uring") || slices.ContainsFunc(r.report.Notes, func(n string) bool { return strings.Contains(n, "haproxy 41000") }) {
			t.Errorf("proxy %s notes %q", tc.protocol, r.report.Notes)
		}
	}
	hres := func(arm string, streams, rep int, rps float64) HTTP2Result {
		return HTTP2Result{Arm: arm, Streams: streams, Rep: rep, AchievedRPS: rps, Requests: 1000, Latency: Percentiles{P99: 100}, ServerUSPerReq: 5, ServerCPUPercent: 99}
	}
	r := &http2Runner{cfg: HTTP2Config{ServerCPUs: []int{0}, ClientCPUs: []int{1}}, report: &HTTP2Report{
		Results: []HTTP2Result{hres("spindle-uring", 1, 1, 40000), hres("go-net-http", 1, 1, 30000), hres("go-net-http", 1, 2, 31000), hres("spindle-uring", 1, 2, 60000)},
	}}
	r.finish()
	if !drifted(r.report.Notes, "streams 1", "spindle-uring") {
		t.Errorf("http2 notes %q", r.report.Notes)
	}
	// With a reference arm that ran, the note sends the reader to the
	// paired ratios.
	r = &http2Runner{cfg: HTTP2Config{ServerCPUs: []int{0}, ClientCPUs: []int{1}}, report: &HTTP2Report{
		Arms:    []ArmInfo{{Name: HTTP2ArmSpindleUring}, {Name: HTTP2ArmGoNetHTTP}},
		Results: []HTTP2Result{hres("spindle-uring", 1, 1, 40000), hres("go-net-http", 1, 1, 30000), hres("go-net-http", 1, 2, 31000), hres("spindle-uring", 1, 2, 60000)},
	}}
	r.finish()
	if !slices.ContainsFunc(r.report.Notes, func(n string) bool {
		return strings.HasPrefix(n, "streams 1: the achieved rate varied") && strings.Contains(n, "the paired ratios at this load point")
	}) || len(r.report.PairedRatios) != 1 {
		t.Errorf("http2 with ratios: notes %q", r.report.Notes)
	}
}

// TestRunnerRatioRefs: by default the references are those of go-net, gnet
// and c-liburing that run, with no note for one skipped; one given that is
// skipped gets a note, and one not in the run is refused.
func TestRunnerRatioRefs(t *testing.T) {
	arms := []ArmInfo{{Name: "uring"}, {Name: "gnet", Skipped: "no peers"}, {Name: "go-net"}}
	for _, tc := range []struct {
		ratioTo []string
		want    string
	}{
		{nil, "[go-net] []"},
		{[]string{"gnet", "uring"}, "[gnet uring] [no paired ratios to gnet: it was skipped]"},
		{[]string{}, "[] []"},
		{[]string{"broken"}, `error: bench: ratio reference "broken" is not one of this run's arms (uring, gnet, go-net)`},
	} {
		r := &runner{cfg: Config{RatioTo: tc.ratioTo}, report: &Report{Arms: arms}}
		got := "error: "
		if err := r.ratioRefs(); err != nil {
			got += err.Error()
		} else {
			got = fmt.Sprintf("%v %v", r.report.Config.RatioTo, r.report.Notes)
		}
		if got != tc.want {
			t.Errorf("RatioTo %q: got %s, want %s", tc.ratioTo, got, tc.want)
		}
	}
}

// equalLines fails t unless got and want are the same lines.
func equalLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// armsRatioLines renders side-by-side paired ratios one line each: the
// figures present, each as median (min–max) ≤1 count/pairs, then by rep.
func armsRatioLines(got []ArmsPairedRatio) []string {
	var lines []string
	for _, p := range got {
		l := fmt.Sprintf("%s/%s s%d pairs %d", p.Arm, p.Ref, p.Streams, p.Pairs)
		for _, f := range []armsFigure{figProxy, figUpstream, figSum, figServer, figP99} {
			if s := *p.figure(f); s != nil {
				l += fmt.Sprintf(" %s %.2f (%.2f–%.2f) %d/%d", armsFigureNames[f], s.Median, s.Min, s.Max, s.AtMost1, s.Pairs)
			}
		}
		for _, r := range p.ByRep {
			l += fmt.Sprintf(" [%d", r.Rep)
			for _, f := range []armsFigure{figProxy, figUpstream, figSum, figServer, figP99} {
				if v := *r.figure(f); v != 0 {
					l += fmt.Sprintf(" %s %.2f", armsFigureNames[f], v)
				}
			}
			l += "]"
		}
		lines = append(lines, l)
	}
	return lines
}

// TestProxyPairedRatios: bench proxy's arms' proxy CPU, upstream CPU,
// their sum and p99 divided by the reference's of the same repetition;
// direct, which has no proxy CPU, pairs on the others (its sum the
// upstream's alone), as the numerator or the reference; a repetition
// without replies does not pair.
func TestProxyPairedRatios(t *testing.T) {
	res := func(arm string, streams, rep int, px, up, p99 float64) ProxyResult {
		return ProxyResult{Arm: arm, Streams: streams, Rep: rep, Requests: 100, AchievedRPS: 1000, ProxyUSPerReq: px, UpstreamUSPerReq: up, Latency: Percentiles{P99: p99}}
	}
	// A machine that slows down: haproxy's figures double each repetition,
	// spindle-uring's proxy CPU is half of haproxy's in every one.
	rs := []ProxyResult{
		res(ProxyArmSpindleUring, 0, 1, 5, 4, 50), res(ProxyArmHAProxy, 0, 1, 10, 4, 100), res(ProxyArmDirect, 0, 1, 0, 3, 40),
		res(ProxyArmDirect, 0, 2, 0, 6, 80), res(ProxyArmHAProxy, 0, 2, 20, 8, 200), res(ProxyArmSpindleUring, 0, 2, 10, 10, 220),
		res(ProxyArmSpindleUring, 0, 3, 20, 16, 400), res(ProxyArmHAProxy, 0, 3, 40, 16, 400), res(ProxyArmDirect, 0, 3, 0, 12, 160),
	}
	rs[4].Requests = 0 // haproxy rep 2: no replies, no pair with it
	got := armsRatioLines(proxyPairedRatios(rs, []string{ProxyArmHAProxy, ProxyArmDirect}))
	want := []string{
		"spindle-uring/haproxy s0 pairs 2 proxy 0.50 (0.50–0.50) 2/2 upstream 1.00 (1.00–1.00) 2/2 proxy+upstream 0.64 (0.64–0.64) 2/2 p99 0.75 (0.50–1.00) 2/2 [1 proxy 0.50 upstream 1.00 proxy+upstream 0.64 p99 0.50] [3 proxy 0.50 upstream 1.00 proxy+upstream 0.64 p99 1.00]",
		"direct/haproxy s0 pairs 2 upstream 0.75 (0.75–0.75) 2/2 proxy+upstream 0.21 (0.21–0.21) 2/2 p99 0.40 (0.40–0.40) 2/2 [1 upstream 0.75 proxy+upstream 0.21 p99 0.40] [3 upstream 0.75 proxy+upstream 0.21 p99 0.40]",
		"spindle-uring/direct s0 pairs 3 upstream 1.33 (1.33–1.67) 0/3 proxy+upstream 3.00 (3.00–3.33) 0/3 p99 2.50 (1.25–2.75) 0/3 [1 upstream 1.33 proxy+upstream 3.00 p99 1.25] [2 upstream 1.67 proxy+upstream 3.33 p99 2.75] [3 upstream 1.33 proxy+upstream 3.00 p99 2.50]",
		"haproxy/direct s0 pairs 2 upstream 1.33 (1.33–1.33) 0/2 proxy+upstream 4.67 (4.67–4.67) 0/2 p99 2.50 (2.50–2.50) 0/2 [1 upstream 1.33 proxy+upstream 4.67 p99 2.50] [3 upstream 1.33 proxy+upstream 4.67 p99 2.50]",
	}
	equalLines(t, got, want)
}

// TestHTTP2PairedRatios: bench http2's arms' server CPU and p99 divided by
// the reference's of the same repetition, at each streams value.
func TestHTTP2PairedRatios(t *testing.T) {
	res := func(arm string, streams, rep int, cpu, p99 float64) HTTP2Result {
		return HTTP2Result{Arm: arm, Streams: streams, Rep: rep, Requests: 100, AchievedRPS: 1000, ServerUSPerReq: cpu, Latency: Percentiles{P99: p99}}
	}
	rs := []HTTP2Result{
		res(HTTP2ArmSpindleUring, 1, 1, 6, 90), res(HTTP2ArmGoNetHTTP, 1, 1, 12, 100),
		res(HTTP2ArmSpindleUring, 10, 1, 4, 300), res(HTTP2ArmGoNetHTTP, 10, 1, 10, 250),
		res(HTTP2ArmGoNetHTTP, 1, 2, 20, 200), res(HTTP2ArmSpindleUring, 1, 2, 12, 220),
		res(HTTP2ArmGoNetHTTP, 10, 2, 16, 500), res(HTTP2ArmSpindleUring, 10, 2, 0, 400),
	}
	got := armsRatioLines(http2PairedRatios(rs, []string{HTTP2ArmGoNetHTTP}))
	want := []string{
		"spindle-uring/go-net-http s1 pairs 2 server 0.55 (0.50–0.60) 2/2 p99 1.00 (0.90–1.10) 1/2 [1 server 0.50 p99 0.90] [2 server 0.60 p99 1.10]",
		"spindle-uring/go-net-http s10 pairs 2 server 0.40 (0.40–0.40) 1/1 p99 1.00 (0.80–1.20) 1/2 [1 server 0.40 p99 1.20] [2 p99 0.80]",
	}
	equalLines(t, got, want)
}

// TestSideRatioRefs: bench proxy's references are by default those of
// haproxy and nginx that run, bench http2's those of go-net-http and
// nginx; one given that was skipped gets a note, one not asked for, or
// given twice, is refused before the run.
func TestSideRatioRefs(t *testing.T) {
	pr := &proxyRunner{report: &ProxyReport{Arms: []ArmInfo{{Name: ProxyArmSpindleUring}, {Name: ProxyArmHAProxy}, {Name: ProxyArmNginx, Skipped: "not installed"}}}}
	pr.finish()
	if got := pr.report.Config.RatioTo; !slices.Equal(got, []string{ProxyArmHAProxy}) {
		t.Errorf("proxy default refs %q", got)
	}
	pr = &proxyRunner{cfg: ProxyConfig{RatioTo: []string{ProxyArmNginx}}, report: &ProxyReport{Arms: pr.report.Arms}}
	pr.finish()
	if !slices.Equal(pr.report.Config.RatioTo, []string{ProxyArmNginx}) || !slices.Contains(pr.report.Notes, "no paired ratios to nginx: it was skipped") {
		t.Errorf("proxy refs %q, notes %q", pr.report.Config.RatioTo, pr.report.Notes)
	}
	hr := &http2Runner{report: &HTTP2Report{Arms: []ArmInfo{{Name: HTTP2ArmSpindleUring}, {Name: HTTP2ArmGoNetHTTP}, {Name: HTTP2ArmNginx}}}}
	hr.finish()
	if got := hr.report.Config.RatioTo; !slices.Equal(got, []string{HTTP2ArmGoNetHTTP, HTTP2ArmNginx}) {
		t.Errorf("http2 default refs %q", got)
	}
	for _, c := range []ProxyConfig{
		{RatioTo: []string{ProxyArmHAProxy, ProxyArmHAProxy}},
		{Arms: []string{ProxyArmSpindleUring, ProxyArmNginx}, RatioTo: []string{ProxyArmHAProxy}},
		{Protocol: ProxyProtocolH2, RatioTo: []string{ProxyArmDirect}},
	} {
		if _, err := c.withDefaults(); err == nil || !strings.Contains(err.Error(), "ratio reference") {
			t.Errorf("proxy %+v: %v", c, err)
		}
	}
	if _, err := (HTTP2Config{ServerCommand: []string{"x"}, RatioTo: []string{"go-net"}}).withDefaults(); err == nil || !strings.Contains(err.Error(), "ratio reference") {
		t.Errorf("http2 go-net: %v", err)
	}
	c, err := ProxyConfig{RatioTo: []string{}, UpstreamCommand: []string{"x"}, ProxyCommand: []string{"x"}}.withDefaults()
	if err != nil || c.RatioTo == nil || len(c.RatioTo) != 0 {
		t.Errorf("proxy none: %q, %v", c.RatioTo, err)
	}
}
