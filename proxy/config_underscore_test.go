package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigHeadersWithUnderscores: headers_with_underscores is allow,
// drop or reject, allow by default in mode http and absent in mode tcp,
// refused there and for another value; -check's YAML and /debug/config's
// JSON write it, and the YAML parses back to it.
func TestConfigHeadersWithUnderscores(t *testing.T) {
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	lst := func(extra string) string {
		return `listeners: [{name: web, listen: "127.0.0.1:0", pool: app, ` + extra + `}]` + "\n" + pool
	}
	for _, tc := range []struct{ extra, want string }{
		{"mode: http", UnderscoresAllow},
		{"mode: http, headers_with_underscores: allow", UnderscoresAllow},
		{"mode: http, headers_with_underscores: drop", UnderscoresDrop},
		{"mode: http, headers_with_underscores: reject", UnderscoresReject},
		{"mode: tcp", ""},
	} {
		cfg, err := ParseConfig([]byte(lst(tc.extra)))
		if err != nil {
			t.Fatalf("%s: %v", tc.extra, err)
		}
		if got := cfg.Listeners[0].HeadersWithUnderscores; got != tc.want {
			t.Errorf("%s: %q, want %q", tc.extra, got, tc.want)
		}
		y, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(cfg.Listeners[0])
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == "" {
			if strings.Contains(string(y), "headers_with_underscores") || strings.Contains(string(js), "headers_with_underscores") {
				t.Errorf("%s: YAML or JSON has headers_with_underscores:\n%s\n%s", tc.extra, y, js)
			}
			continue
		}
		if !strings.Contains(string(y), "headers_with_underscores: "+tc.want) || !strings.Contains(string(js), `"headers_with_underscores":"`+tc.want+`"`) {
			t.Errorf("%s: YAML or JSON without headers_with_underscores: %s:\n%s\n%s", tc.extra, tc.want, y, js)
		}
		back, err := ParseConfig(y)
		if err != nil || back.Listeners[0].HeadersWithUnderscores != tc.want {
			t.Errorf("%s: YAML parsed back: %v, %v", tc.extra, back, err)
		}
	}
	for _, tc := range []struct{ extra, want string }{
		{"mode: http, headers_with_underscores: Drop", `listeners[0] (web).headers_with_underscores: unknown "Drop" (want allow, drop or reject)`},
		{"mode: http, headers_with_underscores: ignore", `headers_with_underscores: unknown "ignore"`},
		{"mode: http, headers_with_underscores: [drop]", "line 1: headers_with_underscores: want a string"},
		{"headers_with_underscores: drop", `listeners[0] (web).headers_with_underscores: only in mode http`},
	} {
		if _, err := ParseConfig([]byte(lst(tc.extra))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.extra, err, tc.want)
		}
	}
}
