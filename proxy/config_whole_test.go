package proxy

import (
	"strings"
	"testing"
)

// TestConfigFractionRefused: a number with a fraction where the config
// wants a whole number is refused, naming its line; yaml.v3 truncates a
// float decoded into an int, so that max_conns: 0.5 or max_request_body:
// 0.9 was 0, no bound at all, and rate: 1.5 was 1. A whole number written
// as a float (1e3) is that number, as before.
func TestConfigFractionRefused(t *testing.T) {
	const pool = "pools: [{name: app, servers: [\"127.0.0.1:1\"]}]\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"listener max_conns", `listeners: [{name: a, listen: ":1", pool: app, max_conns: 0.5}]` + "\n" + pool, "line 1: max_conns: 0.5 is not a whole number"},
		{"max_request_body", `listeners: [{name: a, listen: ":1", pool: app, mode: http, max_request_body: 0.9}]` + "\n" + pool, "max_request_body: 0.9 is not a whole number"},
		{"rate", `listeners: [{name: a, listen: ":1", pool: app, mode: http, rate_limit: {rate: 1.5}}]` + "\n" + pool, "rate: 1.5 is not a whole number"},
		{"pool max_conns", "listeners: [{name: a, listen: \":1\", pool: app}]\npools:\n  - name: app\n    servers: [\"127.0.0.1:1\"]\n    max_conns: 2.5\n", "line 5: max_conns: 2.5 is not a whole number"},
		{"cpus", "engine: {cpus: [0.5]}\n" + `listeners: [{name: a, listen: ":1", pool: app}]` + "\n" + pool, "cpus: 0.5 is not a whole number"},
		{"retry budget", `listeners: [{name: a, listen: ":1", pool: app, mode: http, retry: {on: [reset], budget: 0.5}}]` + "\n" + pool, "budget: 0.5 is not a whole number"},
		{"merge key", "listeners: [{<<: {max_conns: 0.5}, name: a, listen: \":1\", pool: app}]\n" + pool, "max_conns: 0.5 is not a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	cfg, err := ParseConfig([]byte(`listeners: [{name: a, listen: ":1", pool: app, mode: http, max_request_body: 1e3}]` + "\n" + pool))
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Listeners[0].MaxRequestBody; n != 1000 {
		t.Errorf("max_request_body: 1e3 is %d, want 1000", n)
	}
}
