package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigAbortOnClose: abort_on_close is false by default, true where
// set, in mode http only; -check's YAML and /debug/config's JSON write
// it where set, and the YAML parses back to it.
func TestConfigAbortOnClose(t *testing.T) {
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	lst := func(extra string) string {
		return `listeners: [{name: web, listen: "127.0.0.1:0", pool: app, ` + extra + `}]` + "\n" + pool
	}
	for _, tc := range []struct {
		extra string
		want  bool
	}{
		{"mode: http", false},
		{"mode: http, abort_on_close: false", false},
		{"mode: http, abort_on_close: true", true},
	} {
		cfg, err := ParseConfig([]byte(lst(tc.extra)))
		if err != nil {
			t.Fatalf("%s: %v", tc.extra, err)
		}
		y, yerr := cfg.YAML()
		js, jerr := json.Marshal(cfg.Listeners[0])
		back, berr := ParseConfig(y)
		if yerr != nil || jerr != nil || berr != nil {
			t.Fatalf("%s: YAML %v, JSON %v, YAML parsed back %v", tc.extra, yerr, jerr, berr)
		}
		got := []bool{cfg.Listeners[0].AbortOnClose, back.Listeners[0].AbortOnClose,
			strings.Contains(string(y), "abort_on_close: true"), strings.Contains(string(js), `"abort_on_close":true`)}
		for _, v := range got {
			if v != tc.want {
				t.Errorf("%s: parsed, parsed back, in YAML, in JSON: %v, want %v each\n%s\n%s", tc.extra, got, tc.want, y, js)
				break
			}
		}
		if !tc.want && (strings.Contains(string(y), "abort_on_close") || strings.Contains(string(js), "abort_on_close")) {
			t.Errorf("%s: abort_on_close written where not set:\n%s\n%s", tc.extra, y, js)
		}
	}
	for _, tc := range []struct{ extra, want string }{
		{"abort_on_close: true", `listeners[0] (web).abort_on_close: only in mode http`},
		{"mode: http, abort_on_close: yes please", `line 1: abort_on_close: "yes please" is not true or false`},
	} {
		if _, err := ParseConfig([]byte(lst(tc.extra))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.extra, err, tc.want)
		}
	}
}
