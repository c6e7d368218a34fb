package proxy

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

const minimal = `
listeners: [{name: web, listen: "127.0.0.1:0", pool: app}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine.Backend != "uring" || cfg.Engine.WriteHighWater != 256<<10 || time.Duration(cfg.Engine.WriteTimeout) != time.Minute || time.Duration(cfg.Engine.CloseTimeout) != 30*time.Second {
		t.Errorf("engine defaults: %+v", cfg.Engine)
	}
	l := cfg.Listeners[0]
	if time.Duration(l.ConnectTimeout) != DefaultConnectTimeout || l.IdleTimeout != 0 || l.MaxConns != 0 {
		t.Errorf("listener defaults: %+v", l)
	}
	if l.Mode != ModeTCP || l.RequestTimeout != 0 || l.ResponseTimeout != 0 || l.KeepaliveTimeout != 0 {
		t.Errorf("tcp listener defaults: %+v", l)
	}
	if p := cfg.Pools[0]; p.Balance != RoundRobin || p.Health != nil || p.MaxIdle != DefaultMaxIdle || time.Duration(p.IdleTimeout) != DefaultPoolIdleTimeout {
		t.Errorf("pool defaults: %+v", p)
	}
	cfg, err = ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, routes: [{host: "*.example.com", pool: app}]}]
pools: [{name: app, servers: ["127.0.0.1:1"], max_idle: -1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	l = cfg.Listeners[0]
	if time.Duration(l.RequestTimeout) != DefaultRequestTimeout || time.Duration(l.ResponseTimeout) != DefaultResponseTimeout || time.Duration(l.KeepaliveTimeout) != DefaultKeepaliveTimeout || l.Routes[0].PathPrefix != "/" {
		t.Errorf("http listener defaults: %+v", l)
	}
	if cfg.Pools[0].MaxIdle != -1 {
		t.Errorf("max_idle -1 became %d", cfg.Pools[0].MaxIdle)
	}
	if !slices.Equal(l.Upgrades, Tokens{"websocket"}) || cfg.Listeners[0].Upgrades == nil {
		t.Errorf("http listener upgrades: %q, want [websocket]", l.Upgrades)
	}
	if l.IdleTimeout != 0 || l.MaxRequestBody != 0 {
		t.Errorf("http listener: idle_timeout %v, max_request_body %d, want 0 (none)", time.Duration(l.IdleTimeout), l.MaxRequestBody)
	}
	// idle_timeout bounds an HTTP listener's upgraded tunnels.
	cfg, err = ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, idle_timeout: 5m, max_request_body: 1048576, upgrades: []}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Listeners[0]; l.Upgrades == nil || len(l.Upgrades) != 0 {
		t.Errorf("upgrades: [] became %q, want none", l.Upgrades)
	}
	if l := cfg.Listeners[0]; time.Duration(l.IdleTimeout) != 5*time.Minute || l.MaxRequestBody != 1<<20 {
		t.Errorf("http listener: %+v", l)
	}
	cfg, err = ParseConfig([]byte(minimal[:len(minimal)-3] + `, health: {interval: 300ms}}]` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Pools[0].Health
	if time.Duration(h.Interval) != 300*time.Millisecond || time.Duration(h.Timeout) != 300*time.Millisecond || h.Rise != DefaultRise || h.Fall != DefaultFall {
		t.Errorf("health defaults: %+v", *h)
	}
}

func TestParseConfigExample(t *testing.T) {
	for _, path := range []string{"testdata/example.yaml", "../examples/proxy/proxy.yaml"} {
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Pools[0].Balance != LeastConn || cfg.Pools[0].Health.Fall != 3 || time.Duration(cfg.Listeners[0].IdleTimeout) != 5*time.Minute {
			t.Errorf("%s parsed as %+v", path, cfg)
		}
		if path == "../examples/proxy/proxy.yaml" {
			if l := cfg.Listeners[1]; l.Mode != ModeHTTP || len(l.Routes) != 2 || l.Routes[0].Pool != "api" || time.Duration(l.RequestTimeout) != 10*time.Second {
				t.Errorf("%s: http listener %+v", path, l)
			}
		}
		if ps := cfg.Pools[0].Passive; path == "../examples/proxy/proxy.yaml" && (ps == nil || ps.Fails != 3 || time.Duration(ps.Cooldown) != 10*time.Second) {
			t.Errorf("%s: passive %+v", path, ps)
		}
	}
}

// TestConfigErrors: each mistake is reported with the field that holds it.
func TestConfigErrors(t *testing.T) {
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	lst := `listeners: [{name: web, listen: "127.0.0.1:0", pool: app}]` + "\n"
	tests := []struct{ name, yaml, want string }{
		{"empty", "", "config is empty"},
		{"unknown top", lst + pool + "foo: 1\n", "field foo not found"},
		{"unknown listener field", `listeners: [{name: web, listen: ":1", pool: app, timeout: 1s}]` + "\n" + pool, "field timeout not found"},
		{"two documents", lst + pool + "---\n" + lst, "more than one YAML document"},
		{"bad duration", `listeners: [{name: web, listen: ":1", pool: app, idle_timeout: 5}]` + "\n" + pool, `"5" is not a duration`},
		{"duration list", `listeners: [{name: web, listen: ":1", pool: app, idle_timeout: [1]}]` + "\n" + pool, "want a duration"},
		{"backend", "engine: {backend: kqueue}\n" + lst + pool, `engine.backend: unknown backend "kqueue"`},
		{"cpu twice", "engine: {cpus: [0, 0]}\n" + lst + pool, "engine.cpus[1]: CPU 0 given twice"},
		{"negative cpu", "engine: {cpus: [-1]}\n" + lst + pool, "engine.cpus[0]: negative CPU -1"},
		{"high water", "engine: {write_high_water: 100}\n" + lst + pool, "engine.write_high_water: 100 below 4096"},
		{"no pools", lst, "pools: none defined"},
		{"no listeners", pool, "listeners: none defined"},
		{"pool name", lst + `pools: [{servers: ["127.0.0.1:1"]}]`, "pools[0].name: missing"},
		{"pool twice", lst + `pools: [{name: app, servers: ["127.0.0.1:1"]}, {name: app, servers: ["127.0.0.1:2"]}]`, `pools[1] (app).name: pool "app" defined twice`},
		{"no servers", lst + `pools: [{name: app}]`, "pools[0] (app).servers: none listed"},
		{"server empty host", lst + `pools: [{name: app, servers: ["127.0.0.1:1", ":5432"]}]`, `pools[0] (app).servers[1]: ":5432": empty host`},
		{"server name twice", lst + `pools: [{name: app, servers: ["db.local:5432", "DB.local:5432"]}]`, `pools[0] (app).servers[1]: "DB.local:5432" listed twice`},
		{"server name port", lst + `pools: [{name: app, servers: ["db.local:pg"]}]`, `pools[0] (app).servers[0]: "db.local:pg": port "pg" is not a number`},
		{"server no port", lst + `pools: [{name: app, servers: ["127.0.0.1"]}]`, `pools[0] (app).servers[0]: "127.0.0.1" is not host:port`},
		{"server port 0", lst + `pools: [{name: app, servers: ["127.0.0.1:0"]}]`, `servers[0]: "127.0.0.1:0": port "0" is not a number from 1 to 65535`},
		{"server twice", lst + `pools: [{name: app, servers: ["127.0.0.1:1", "127.0.0.1:1"]}]`, `pools[0] (app).servers[1]: "127.0.0.1:1" listed twice`},
		{"server twice mapped", lst + `pools: [{name: app, servers: ["127.0.0.1:1", "[::ffff:127.0.0.1]:1"]}]`, `pools[0] (app).servers[1]: "[::ffff:127.0.0.1]:1" listed twice`},
		{"balance", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], balance: random}]`, `pools[0] (app).balance: unknown "random"`},
		{"interval", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], health: {interval: 1ms}}]`, "pools[0] (app).health.interval: 1ms below 10ms"},
		{"timeout", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], health: {interval: 1s, timeout: 2s}}]`, "pools[0] (app).health.timeout: 2s longer than the interval 1s"},
		{"rise", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], health: {rise: -1}}]`, "pools[0] (app).health.rise: -1 below 1"},
		{"fall", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], health: {fall: -2}}]`, "pools[0] (app).health.fall: -2 below 1"},
		{"passive fails", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {cooldown: 1s}}]`, "pools[0] (app).passive.fails: 0 below 1"},
		{"passive cooldown", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: -1s}}]`, "pools[0] (app).passive.cooldown: -1s is not positive"},
		{"passive no cooldown", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3}}]`, "pools[0] (app).passive.cooldown: 0s is not positive"},
		{"passive http errors", `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, http_errors: -1}}]`, "pools[0] (app).passive.http_errors: negative -1"},
		{"passive http errors tcp", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, http_errors: 5}}]`, "pools[0] (app).passive.http_errors: no mode http listener uses the pool"},
		{"passive http errors unused", `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"]}, {name: b, servers: ["127.0.0.1:2"], passive: {fails: 3, cooldown: 1s, http_errors: 5}}]`, "pools[1] (b).passive.http_errors: no mode http listener uses the pool"},
		{"passive max cooldown", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 10s, max_cooldown: 5s}}]`, "pools[0] (app).passive.max_cooldown: 5s below the cooldown 10s"},
		{"passive max cooldown negative", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 10s, max_cooldown: -1s}}]`, "pools[0] (app).passive.max_cooldown: -1s below the cooldown 10s"},
		{"passive statuses", `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, http_errors: 1, http_error_statuses: "429,500-599"}}]`, `pools[0] (app).passive.http_error_statuses: "429,500-599": 429 is below 500`},
		{"passive statuses range", `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, http_errors: 1, http_error_statuses: "500-600"}}]`, `pools[0] (app).passive.http_error_statuses: "500-600": "500-600" is not within 100-599`},
		{"passive statuses alone", `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, http_error_statuses: "503"}}]`, `pools[0] (app).passive.http_error_statuses: only with http_errors`},
		{"passive percent", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, max_ejected_percent: 101}}]`, "pools[0] (app).passive.max_ejected_percent: 101 not from 0 to 100"},
		{"passive percent negative", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], passive: {fails: 3, cooldown: 1s, max_ejected_percent: -5}}]`, "pools[0] (app).passive.max_ejected_percent: -5 not from 0 to 100"},
		{"listener name", `listeners: [{listen: ":1", pool: app}]` + "\n" + pool, "listeners[0].name: missing"},
		{"listener twice", `listeners: [{name: a, listen: ":1", pool: app}, {name: a, listen: ":2", pool: app}]` + "\n" + pool, `listeners[1] (a).name: listener "a" defined twice`},
		{"listen", `listeners: [{name: a, listen: "8080", pool: app}]` + "\n" + pool, `listeners[0] (a).listen: "8080" is not host:port`},
		{"listen host", `listeners: [{name: a, listen: "example.com:80", pool: app}]` + "\n" + pool, `listeners[0] (a).listen: "example.com:80": host "example.com" is not an IP address`},
		{"listen port", `listeners: [{name: a, listen: ":http", pool: app}]` + "\n" + pool, `listeners[0] (a).listen: ":http": port "http" is not a number`},
		{"listen overlap", `listeners: [{name: a, listen: "127.0.0.1:80", pool: app}, {name: b, listen: ":80", pool: app}]` + "\n" + pool, `listeners[1] (b).listen: ":80" overlaps listener "a"`},
		{"listen overlap mapped", `listeners: [{name: a, listen: "127.0.0.1:80", pool: app}, {name: b, listen: "[::ffff:127.0.0.1]:80", pool: app}]` + "\n" + pool, `listeners[1] (b).listen: "[::ffff:127.0.0.1]:80" overlaps listener "a"`},
		{"no pool", `listeners: [{name: a, listen: ":1"}]` + "\n" + pool, "listeners[0] (a).pool: missing"},
		{"unknown pool", `listeners: [{name: a, listen: ":1", pool: db}]` + "\n" + pool, `listeners[0] (a).pool: no pool named "db"`},
		{"connect timeout", `listeners: [{name: a, listen: ":1", pool: app, connect_timeout: -1s}]` + "\n" + pool, "listeners[0] (a).connect_timeout: -1s is not positive"},
		{"idle timeout", `listeners: [{name: a, listen: ":1", pool: app, idle_timeout: -1s}]` + "\n" + pool, "listeners[0] (a).idle_timeout: negative -1s"},
		{"max conns", `listeners: [{name: a, listen: ":1", pool: app, max_conns: -1}]` + "\n" + pool, "listeners[0] (a).max_conns: negative -1"},
		{"mode", `listeners: [{name: a, listen: ":1", pool: app, mode: https}]` + "\n" + pool, `listeners[0] (a).mode: unknown "https"`},
		{"routes in tcp", `listeners: [{name: a, listen: ":1", pool: app, routes: [{pool: app}]}]` + "\n" + pool, "listeners[0] (a).routes: only in mode http"},
		{"request timeout in tcp", `listeners: [{name: a, listen: ":1", pool: app, request_timeout: 1s}]` + "\n" + pool, "listeners[0] (a).request_timeout: only in mode http"},
		{"max request body in tcp", `listeners: [{name: a, listen: ":1", pool: app, max_request_body: 5}]` + "\n" + pool, "listeners[0] (a).max_request_body: only in mode http"},
		{"max request body", `listeners: [{name: a, listen: ":1", pool: app, mode: http, max_request_body: -1}]` + "\n" + pool, "listeners[0] (a).max_request_body: negative -1"},
		{"write timeout", "engine: {write_timeout: -1s}\n" + lst + pool, "engine.write_timeout: -1s is not positive"},
		{"close timeout", "engine: {close_timeout: -5s}\n" + lst + pool, "engine.close_timeout: -5s is not positive"},
		{"h2c in tcp", `listeners: [{name: a, listen: ":1", pool: app, h2c: true}]` + "\n" + pool, "listeners[0] (a).h2c: only in mode http"},
		{"h2 knob without h2c", `listeners: [{name: a, listen: ":1", pool: app, mode: http, h2_initial_window: 70000}]` + "\n" + pool, "listeners[0] (a).h2_max_concurrent_streams, h2_initial_window, h2_response_hold: only with h2c: true"},
		{"h2 hold without h2c", `listeners: [{name: a, listen: ":1", pool: app, mode: http, h2_response_hold: 1048576}]` + "\n" + pool, "listeners[0] (a).h2_max_concurrent_streams, h2_initial_window, h2_response_hold: only with h2c: true"},
		{"h2 hold below a window", `listeners: [{name: a, listen: ":1", pool: app, mode: http, h2c: true, h2_response_hold: 65535}]` + "\n" + pool, "listeners[0] (a).h2_response_hold: 65535 is not from 65536 (a stream's window to an h2c pool's server) to 2147483647"},
		{"h2 hold in mode tcp", `listeners: [{name: a, listen: ":1", pool: app, h2_response_hold: 1048576}]` + "\n" + pool, "listeners[0] (a).h2_response_hold: only in mode http"},
		{"h2 window small", `listeners: [{name: a, listen: ":1", pool: app, mode: http, h2c: true, h2_initial_window: 1000}]` + "\n" + pool, "listeners[0] (a).h2_initial_window: 1000 is not from 65535 to 2147483647"},
		{"upgrades in tcp", `listeners: [{name: a, listen: ":1", pool: app, upgrades: []}]` + "\n" + pool, "listeners[0] (a).upgrades: only in mode http"},
		{"upgrades version", `listeners: [{name: a, listen: ":1", pool: app, mode: http, upgrades: [websocket, TLS/1.2]}]` + "\n" + pool, `listeners[0] (a).upgrades[1]: "TLS/1.2" is not a protocol name`},
		{"upgrades empty", `listeners: [{name: a, listen: ":1", pool: app, mode: http, upgrades: [""]}]` + "\n" + pool, `listeners[0] (a).upgrades[0]: "" is not a protocol name`},
		{"response timeout", `listeners: [{name: a, listen: ":1", pool: app, mode: http, response_timeout: -1s}]` + "\n" + pool, "listeners[0] (a).response_timeout: -1s is not positive"},
		{"keepalive timeout", `listeners: [{name: a, listen: ":1", pool: app, mode: http, keepalive_timeout: -2s}]` + "\n" + pool, "listeners[0] (a).keepalive_timeout: -2s is not positive"},
		{"route pool", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: x.org}]}]` + "\n" + pool, "listeners[0] (a).routes[0].pool: missing"},
		{"route unknown pool", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: x.org, pool: db}]}]` + "\n" + pool, `listeners[0] (a).routes[0].pool: no pool named "db"`},
		{"route host port", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "x.org:80", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "x.org:80": ':' is not allowed`},
		{"route host dots", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "*.", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "*." is not a host name`},
		{"route host v6", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "[1.2.3.4]", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "[1.2.3.4]" is not a bracketed IPv6`},
		{"route host v4-mapped", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "[::ffff:127.0.0.1]", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "[::ffff:127.0.0.1]" is IPv4-mapped (requests for either route alike: write 127.0.0.1)`},
		{"route host v4 zeros", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "127.0.0.01", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "127.0.0.01" is neither a host name`},
		{"route host v4 short", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "127.1", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "127.1" is neither a host name`},
		{"route host v4 wildcard", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{host: "*.0.0.1", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].host: "*.0.0.1" is neither a host name`},
		{"route path", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{path_prefix: api, pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].path_prefix: "api" does not begin with /`},
		{"route path space", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{path_prefix: "/a b", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].path_prefix: "/a b" has a space`},
		{"max idle", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], max_idle: -2}]`, "pools[0] (app).max_idle: -2 below -1"},
		{"pool idle timeout", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], idle_timeout: -1s}]`, "pools[0] (app).idle_timeout: -1s is not positive"},
		{"admin", lst + pool + "admin: {listen: localhost}\n", `admin.listen: "localhost" is not host:port`},
		{"admin overlap", `listeners: [{name: web, listen: ":9901", pool: app}]` + "\n" + pool + "admin: {listen: \"127.0.0.1:9901\"}\n", `admin.listen: "127.0.0.1:9901" overlaps listener "web"`},
		{"admin same", `listeners: [{name: web, listen: "[::1]:9901", pool: app}]` + "\n" + pool + "admin: {listen: \"[::1]:9901\"}\n", `admin.listen: "[::1]:9901" overlaps listener "web"`},
		{"admin port", lst + pool + "admin: {listen: \"127.0.0.1:99999\"}\n", `admin.listen: "127.0.0.1:99999": port "99999"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParseConfig: ParseConfig never panics, what it accepts passes
// Validate again (defaults applied twice change nothing), and its YAML (as
// `spindle proxy -check` prints it) parses back to the same config.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("engine: {backend: epoll, cpus: [0]}\nlisteners: [{name: a, listen: \":0\", pool: p, idle_timeout: 1s, max_conns: 3}]\npools: [{name: p, servers: [\"[::1]:80\", \"db.local:80\"], balance: least-conn, health: {interval: 1s, rise: 1, fall: 1}, passive: {fails: 2, cooldown: 30s}}]\nadmin: {listen: \":0\"}\n"))
	f.Add([]byte("listeners: [{name: a, listen: \":0\", pool: p, connect_timeout: 1h}]\npools: [{name: p, servers: []}]"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("listeners: [{name: a, listen: \":0\", pool: p}]\npools: [{name: p, servers: [\"127.0.0.1:80\", {address: \"db.local:81\", weight: 5}, &s {address: \"[::1]:82\"}], health: {type: http, path: /healthz, host: \"x.org:8080\", expect: \"200,300-399\", interval: 1s}}]\n"))
	f.Add([]byte("listeners: [{name: a, listen: \":0\", pool: p}]\npools: [{name: p, servers: [{address: \"127.0.0.1:80\", weight: 256}], balance: least-conn, health: {type: tcp}}]\n"))
	f.Add([]byte("listeners: [{name: a, listen: \":0\", pool: p, mode: http}]\npools: [{name: p, servers: [\"127.0.0.1:80\"], passive: {fails: 2, cooldown: 1s, http_errors: 5, http_error_statuses: \"502-504\", max_cooldown: 1m, max_ejected_percent: 0}}]\n"))
	f.Add([]byte("listeners: [{name: a, listen: \":0\", pool: p, mode: http, request_timeout: 5s, routes: [{host: \"*.x.org\", path_prefix: /api/, pool: q}, {host: \"[::1]\", pool: p}]}]\npools: [{name: p, servers: [\"127.0.0.1:80\"], max_idle: -1, idle_timeout: 5s}, {name: q, servers: [\"127.0.0.1:81\"]}]\n"))
	f.Add([]byte("listeners: [{name: a, listen: \":0\", pool: p, mode: http, request_headers: {set: {X-A: b}, remove: [X-C]}, response_headers: {add: {X-D: \"\"}}, routes: [{path_prefix: /api/, pool: p, rewrite_prefix: /v2/, host_rewrite: \"b:81\", request_headers: {add: {X-E: f}}}]}]\npools: [{name: p, servers: [\"127.0.0.1:80\"]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatalf("defaults applied twice: %v", err)
		}
		out, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("printed config does not parse: %v\n%s", err, out)
		}
		if out2, _ := again.YAML(); !bytes.Equal(out, out2) {
			t.Fatalf("printed config parses to another:\n%s\nthen\n%s", out, out2)
		}
	})
}
