package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPassiveDefaults: a passive section from before http_errors keeps
// its constant cooldown (max_cooldown = cooldown) and no bound on the
// servers ejected (100%); with http_errors, max_cooldown is 10 cooldowns
// and http_error_statuses every 5xx but 501 and 505; max_ejected_percent
// 0 stays 0 (eject none); and -check's YAML and /debug/config's JSON
// carry the fields and parse back to the same.
func TestPassiveDefaults(t *testing.T) {
	const lst = `listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http}]` + "\n"
	for _, tc := range []struct {
		passive     string
		httpErrors  int
		statuses    string
		maxCooldown time.Duration
		percent     int
	}{
		{`{fails: 3, cooldown: 10s}`, 0, "", 10 * time.Second, 100},
		{`{fails: 3, cooldown: 10s, http_errors: 5}`, 5, DefaultHTTPErrorStatuses, 100 * time.Second, 100},
		{`{fails: 3, cooldown: 10s, http_errors: 5, max_cooldown: 30s, max_ejected_percent: 0}`, 5, DefaultHTTPErrorStatuses, 30 * time.Second, 0},
		{`{fails: 1, cooldown: 2s, max_cooldown: 2s, max_ejected_percent: 50}`, 0, "", 2 * time.Second, 50},
		{`{fails: 1, cooldown: 2562047h, http_errors: 1, http_error_statuses: "502-504"}`, 1, "502-504", time.Duration(1<<63 - 1), 100},
	} {
		cfg, err := ParseConfig([]byte(lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: ` + tc.passive + `}]` + "\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.passive, err)
			continue
		}
		ps := cfg.Pools[0].Passive
		if ps.HTTPErrors != tc.httpErrors || ps.HTTPErrorStatuses != tc.statuses || time.Duration(ps.MaxCooldown) != tc.maxCooldown || ps.MaxEjectedPercent == nil || *ps.MaxEjectedPercent != tc.percent {
			t.Errorf("%s: parsed as %+v (max_ejected_percent %v); want http_errors %d, http_error_statuses %q, max_cooldown %v, max_ejected_percent %d", tc.passive, *ps, ps.MaxEjectedPercent, tc.httpErrors, tc.statuses, tc.maxCooldown, tc.percent)
			continue
		}
		out, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseConfig(out)
		if err != nil {
			t.Errorf("%s: printed config: %v\n%s", tc.passive, err, out)
			continue
		}
		a := *again.Pools[0].Passive
		if *a.MaxEjectedPercent != tc.percent {
			t.Errorf("%s: printed and parsed: max_ejected_percent %d, want %d\n%s", tc.passive, *a.MaxEjectedPercent, tc.percent, out)
		}
		if a.MaxEjectedPercent = ps.MaxEjectedPercent; a != *ps {
			t.Errorf("%s: printed and parsed: %+v, want %+v\n%s", tc.passive, a, *ps, out)
		}
		if !strings.Contains(string(out), "max_ejected_percent: ") || !strings.Contains(string(out), "max_cooldown: ") {
			t.Errorf("%s: YAML lacks the passive fields:\n%s", tc.passive, out)
		}
		js, err := json.Marshal(ps)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), `"max_ejected_percent":`) {
			t.Errorf("%s: JSON %s lacks max_ejected_percent", tc.passive, js)
		}
	}
}

// TestMaxEjected: max_ejected_percent's bound on a pool's ejected servers.
func TestMaxEjected(t *testing.T) {
	for _, tc := range []struct{ n, pct, want int }{
		{1, 100, 1}, {2, 100, 2}, {5, 100, 5},
		{1, 50, 0}, {1, 99, 0}, {2, 50, 1}, {2, 99, 1}, {3, 50, 1}, {4, 50, 2},
		{10, 10, 1}, {10, 1, 1}, {10, 35, 3}, {10, 99, 9}, {3, 1, 1},
		{1, 0, 0}, {10, 0, 0},
	} {
		if got := maxEjected(tc.n, tc.pct); got != tc.want {
			t.Errorf("maxEjected(%d servers, %d%%) = %d, want %d", tc.n, tc.pct, got, tc.want)
		}
	}
}

// TestErrorStatuses: the statuses that count as failed exchanges, by
// default and as given.
func TestErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		spec string
		in   func(int) bool
	}{
		{DefaultHTTPErrorStatuses, func(st int) bool { return st >= 500 && st != 501 && st != 505 }},
		{"500-599", func(st int) bool { return st >= 500 }},
		{"502-504, 599", func(st int) bool { return st >= 502 && st <= 504 || st == 599 }},
	} {
		ss, err := errorStatuses(tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		for st := 0; st <= 700; st++ {
			if got, want := ss.has(st), st <= 599 && tc.in(st); got != want {
				t.Errorf("%q: has(%d) = %v, want %v", tc.spec, st, got, want)
			}
		}
	}
}
