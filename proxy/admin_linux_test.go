package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// sampleLine is a Prometheus text-format sample: name{labels} value.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)$`)

// scrape gets /metrics and parses it, failing on any line that is not a
// sample, # HELP or # TYPE. It returns the samples by name{labels}.
func scrape(t *testing.T, p *Proxy) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	out := map[string]float64{}
	typed := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "#" && (f[1] == "HELP" || f[1] == "TYPE") {
			if f[1] == "TYPE" {
				if f[3] != "counter" && f[3] != "gauge" {
					t.Errorf("type %q in %q", f[3], line)
				}
				typed[f[2]] = true
			}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("not a sample line: %q", line)
			continue
		}
		if !typed[m[1]] {
			t.Errorf("sample before its # TYPE: %q", line)
		}
		if !strings.HasPrefix(m[1], "spindle_proxy_") {
			t.Errorf("metric outside spindle_proxy_: %q", line)
		}
		v, err := strconv.ParseFloat(m[len(m)-1], 64)
		if err != nil {
			t.Errorf("%q: %v", line, err)
		}
		out[m[1]+m[2]] = v
	}
	return out
}

// TestAdmin: /metrics parses and its counts match the traffic; /healthz
// and /debug/config answer.
func TestAdmin(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		dead := deadAddr(t)
		cfg := testConfig(b, u.addr, dead)
		cfg.Listeners[0].MaxConns = 3
		p := startProxy(t, cfg)
		const size = 10000
		msg := strings.Repeat("x", size)
		for i := range 3 { // the second bounces off the dead server

			if err := roundTrip(dial(t, p), msg); err != nil {
				t.Fatalf("conn %d: %v", i, err)
			}
		}
		// The fourth client is over max_conns.
		if err := closedByProxy(dial(t, p)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the rejected client counted and closed", func() bool {
			return p.Totals().Listeners[0].Rejected == 1 && p.Engine().Stats().Open == 6
		})
		m := scrape(t, p)
		srv := fmt.Sprintf(`{pool="app",server="%s"}`, u.addr)
		deadSrv := fmt.Sprintf(`{pool="app",server="%s"}`, dead)
		want := map[string]float64{
			`spindle_proxy_listener_accepted_total{listener="web"}`:  4,
			`spindle_proxy_listener_rejected_total{listener="web"}`:  1,
			`spindle_proxy_listener_active{listener="web"}`:          3,
			`spindle_proxy_listener_no_server_total{listener="web"}`: 0,
			"spindle_proxy_server_connects_total" + srv:              3,
			"spindle_proxy_server_connect_failures_total" + srv:      0,
			"spindle_proxy_server_connect_failures_total" + deadSrv:  1,
			"spindle_proxy_server_active" + srv:                      3,
			"spindle_proxy_server_bytes_out_total" + srv:             3 * size,
			"spindle_proxy_server_bytes_in_total" + srv:              3 * size,
			"spindle_proxy_server_up" + srv:                          1,
			"spindle_proxy_engine_open_connections":                  6,
		}
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}

		resp, err := http.Get("http://" + p.AdminAddr().String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok\n" {
			t.Errorf("/healthz: %d %q", resp.StatusCode, body)
		}

		resp, err = http.Get("http://" + p.AdminAddr().String() + "/debug/config")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		l := got["listeners"].([]any)[0].(map[string]any)
		if l["name"] != "web" || l["connect_timeout"] != "2s" || l["idle_timeout"] != "0s" || l["max_conns"] != 3.0 {
			t.Errorf("/debug/config listener: %v", l)
		}
		if e := got["engine"].(map[string]any); e["backend"] != string(b) {
			t.Errorf("/debug/config engine: %v", e)
		}
	})
}

// TestMetricsEscape: label values are escaped.
func TestMetricsEscape(t *testing.T) {
	if got := escape("a\"b\\c\nd"); got != `a\"b\\c\nd` {
		t.Errorf("escape: %s", got)
	}
}
