package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestConfigRetry: retry on a mode http listener and route takes its
// defaults (attempts 1, buffer 64 KiB, budget 20), -check's YAML and
// /debug/config's JSON write them, the YAML parses back to the same, and
// a route without one takes the listener's (to an h2c pool too), and
// refused-stream is a reason; bad values are refused naming the field.
func TestConfigRetry(t *testing.T) {
	pools := `pools: [{name: app, servers: ["127.0.0.1:1"]}, {name: api, servers: ["127.0.0.1:2"]}, {name: grpc, protocol: h2c, servers: ["127.0.0.1:3"]}]` + "\n"
	lst := func(extra string) string {
		return `listeners: [{name: web, listen: "127.0.0.1:0", mode: http, pool: app, ` + extra + `}]` + "\n" + pools
	}
	cfg, err := ParseConfig([]byte(lst(`retry: {on: [reset, "503"]}, routes: [{path_prefix: /api/, pool: api, retry: {on: [connect-failure, 502-504, response-timeout], attempts: 3, per_try_timeout: 250ms, buffer: 0, budget: 50}}, {path_prefix: /g/, pool: grpc}, {path_prefix: /x/, pool: app}]`)))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Listeners[0]
	if r := l.Retry; r.Attempts != 1 || *r.Buffer != DefaultRetryBuffer || *r.Budget != DefaultRetryBudget {
		t.Errorf("listener's retry with defaults: %+v", r)
	}
	if r := l.Routes[0].Retry; r.Attempts != 3 || *r.Buffer != 0 || *r.Budget != 50 {
		t.Errorf("route's retry: %+v", r)
	}
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"retry":{"on":["reset","503"],"attempts":1,"buffer":65536,"budget":20}`, `"retry":{"on":["connect-failure","502-504","response-timeout"],"attempts":3,"per_try_timeout":"250ms","buffer":0,"budget":50}`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON without %s:\n%s", want, js)
		}
	}
	back, err := ParseConfig(y)
	if err != nil {
		t.Fatalf("YAML parsed back: %v\n%s", err, y)
	}
	jsBack, _ := json.Marshal(back.Listeners[0])
	if string(jsBack) != string(js) {
		t.Errorf("YAML parsed back differs:\n%s\n%s", jsBack, js)
	}
	ln := &listener{cfg: l, routes: compileRoutes(l.Routes, map[string]*pool{"app": {}, "api": {}, "grpc": {h2: true}})}
	rps := ln.compileRetries()
	if own := rps[3]; own == nil || !own.reset || !own.hasStatus(503) || own.hasStatus(502) || own.attempts != 1 {
		t.Errorf("listener's policy %+v", own)
	}
	if r := rps[0]; r == nil || r.reset || !r.hasStatus(502) || !r.hasStatus(504) || r.hasStatus(505) || r.buffer != 0 || r.budget != 50 || !r.timeout || r.perTry != 250*time.Millisecond {
		t.Errorf("route api's policy %+v", r)
	}
	if cfg, err := ParseConfig([]byte(lst("retry: {on: [5xx]}"))); err != nil {
		t.Error(err)
	} else if rp, _ := cfg.Listeners[0].Retry.compile(); !rp.hasStatus(500) || !rp.hasStatus(599) || rp.reset {
		t.Errorf("5xx: %+v", rp)
	}
	if rps[1] != rps[3] || rps[2] != rps[3] {
		t.Errorf("the h2c route's policy %v, route x's %v (want the listener's %v)", rps[1], rps[2], rps[3])
	}
	if cfg, err := ParseConfig([]byte(lst("retry: {on: [refused-stream]}"))); err != nil {
		t.Error(err)
	} else if rp, _ := cfg.Listeners[0].Retry.compile(); !rp.refused || rp.reset || rp.status {
		t.Errorf("refused-stream: %+v", rp)
	}

	for _, tc := range []struct{ extra, want string }{
		{"retry: {}", `listeners[0] (web).retry.on: none listed`},
		{"retry: {on: [refused]}", `retry.on[0]: unknown "refused"`},
		{"retry: {on: [4xx]}", `retry.on[0]: "4xx": "4xx" is not a status`},
		{`retry: {on: ["429"]}`, `retry.on[0]: "429": 429 is below 500`},
		{`retry: {on: ["503,504"]}`, `retry.on[0]: unknown "503,504"`},
		{`retry: {on: ["600"]}`, `retry.on[0]:`},
		{"retry: {on: [reset], attempts: 6}", `retry.attempts: 6 is not from 1 to 5`},
		{"retry: {on: [reset], attempts: -1}", `retry.attempts: -1 is not from 1 to 5`},
		{"retry: {on: [reset], buffer: -1}", `retry.buffer: -1 is not from 0 to 16777216`},
		{"retry: {on: [reset], budget: 101}", `retry.budget: 101 is not from 0 to 100`},
		{"retry: {on: [reset], per_try: 1s}", `field per_try not found`},
		{"retry: {on: [response-timeout], per_try_timeout: -1s}", `retry.per_try_timeout: negative -1s`},
		{"routes: [{pool: app, retry: {on: [reset], budget: -1}}]", `listeners[0] (web).routes[0].retry.budget: -1`},
	} {
		if _, err := ParseConfig([]byte(lst(tc.extra))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.extra, err, tc.want)
		}
	}
	tcp := `listeners: [{name: l4, listen: "127.0.0.1:0", pool: app, retry: {on: [reset]}}]` + "\n" + pools
	if _, err := ParseConfig([]byte(tcp)); err == nil || !strings.Contains(err.Error(), `listeners[0] (l4).retry: only in mode http`) {
		t.Errorf("retry in mode tcp: %v", err)
	}
	h2 := `listeners: [{name: g, listen: "127.0.0.1:0", mode: http, pool: grpc, retry: {on: [reset, refused-stream]}, routes: [{path_prefix: /x/, pool: grpc, retry: {on: ["503"]}}]}]` + "\n" + pools
	if _, err := ParseConfig([]byte(h2)); err != nil {
		t.Errorf("retry to an h2c pool: %v", err)
	}
}

// TestRetryExample: the example config's gateway has a retry policy.
func TestRetryExample(t *testing.T) {
	cfg, err := LoadConfig("../examples/proxy/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Listeners[1].Retry
	if r == nil || len(r.On) != 3 || r.Attempts != 1 || time.Duration(r.PerTryTimeout) != 5*time.Second || *r.Buffer != 64<<10 || *r.Budget != 20 {
		t.Errorf("the gateway's retry: %+v", r)
	}
}
