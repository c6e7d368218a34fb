package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestServerForms: a server is a "host:port" string or an {address,
// weight} map; weights default to 1; -check's YAML and /debug/config's
// JSON write the string where the weight is 1 and the map otherwise, and
// the YAML parses back to the same servers.
func TestServerForms(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app}]
pools:
  - name: app
    servers:
      - "127.0.0.1:1"
      - {address: "127.0.0.1:2", weight: 5}
      - {address: "db.local:3"}
      - address: "[::1]:4"
        weight: 256
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerConfig{{Address: "127.0.0.1:1", Weight: 1}, {Address: "127.0.0.1:2", Weight: 5}, {Address: "db.local:3", Weight: 1}, {Address: "[::1]:4", Weight: 256}}
	got := cfg.Pools[0].Servers
	if len(got) != len(want) {
		t.Fatalf("servers %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("servers[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	js, err := json.Marshal(cfg.Pools[0].Servers)
	if err != nil {
		t.Fatal(err)
	}
	if w := `["127.0.0.1:1",{"address":"127.0.0.1:2","weight":5},"db.local:3",{"address":"[::1]:4","weight":256}]`; string(js) != w {
		t.Errorf("JSON %s, want %s", js, w)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"- 127.0.0.1:1\n", "- address: 127.0.0.1:2\n", "weight: 5\n", "- db.local:3\n"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("YAML lacks %q:\n%s", w, out)
		}
	}
	again, err := ParseConfig(out)
	if err != nil {
		t.Fatalf("printed config: %v\n%s", err, out)
	}
	for i := range want {
		if again.Pools[0].Servers[i] != want[i] {
			t.Errorf("printed and parsed: servers[%d] = %+v, want %+v", i, again.Pools[0].Servers[i], want[i])
		}
	}
}

// TestHealthConfig: type http's defaults, and tcp's.
func TestHealthConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app}]
pools: [{name: app, servers: ["127.0.0.1:1"], health: {type: http}}, {name: b, servers: ["127.0.0.1:2"], health: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Pools[0].Health; h.Type != HealthHTTP || h.Path != "/" || h.Expect != "200-399" || h.Host != "" {
		t.Errorf("http defaults: %+v", *h)
	}
	if h := cfg.Pools[1].Health; h.Type != HealthTCP || h.Path != "" || h.Expect != "" {
		t.Errorf("tcp defaults: %+v", *h)
	}
	rs, err := parseExpect("200, 204,300-302")
	if err != nil {
		t.Fatal(err)
	}
	for st, want := range map[int]bool{199: false, 200: true, 201: false, 204: true, 299: false, 300: true, 302: true, 303: false} {
		if expected(rs, st) != want {
			t.Errorf("expect 200,204,300-302: %d passes %v, want %v", st, !want, want)
		}
	}
}

// TestHealthWeightErrors: each mistake in servers' weights and health
// checks is reported with its field.
func TestHealthWeightErrors(t *testing.T) {
	lst := `listeners: [{name: web, listen: ":1", pool: app}]` + "\n"
	pool := func(s string) string { return lst + `pools: [{name: app, ` + s + `}]` }
	health := func(h string) string { return pool(`servers: ["127.0.0.1:1"], health: {` + h + `}`) }
	tests := []struct{ name, yaml, want string }{
		{"weight 0", pool(`servers: [{address: "127.0.0.1:1", weight: 0}]`), "server weight 0: remove the server instead"},
		{"weight big", pool(`servers: [{address: "127.0.0.1:1", weight: 257}]`), "pools[0] (app).servers[0].weight: 257 not from 1 to 256"},
		{"weight negative", pool(`servers: [{address: "127.0.0.1:1", weight: -1}]`), "pools[0] (app).servers[0].weight: -1 not from 1 to 256"},
		{"weight string", pool(`servers: [{address: "127.0.0.1:1", weight: heavy}]`), "server weight: want a whole number"},
		{"weight float", pool(`servers: [{address: "127.0.0.1:1", weight: 1.5}]`), "server weight: want a whole number"},
		{"server field", pool(`servers: [{address: "127.0.0.1:1", wieght: 2}]`), `server field "wieght" unknown`},
		{"server twice", pool(`servers: [{address: "127.0.0.1:1", address: "127.0.0.1:2"}]`), `"address"`},
		{"no address", pool(`servers: [{weight: 2}]`), "server without an address"},
		{"address list", pool(`servers: [{address: ["127.0.0.1:1"]}]`), "server address: want a string"},
		{"server list", pool(`servers: [["127.0.0.1:1"]]`), "want a server"},
		{"bad address", pool(`servers: [{address: "127.0.0.1", weight: 2}]`), `pools[0] (app).servers[0]: "127.0.0.1" is not host:port`},
		{"same address", pool(`servers: ["127.0.0.1:1", {address: "127.0.0.1:1", weight: 2}]`), `pools[0] (app).servers[1]: "127.0.0.1:1" listed twice`},
		{"type", health(`type: udp`), `pools[0] (app).health.type: unknown "udp"`},
		{"path in tcp", health(`path: /healthz`), "pools[0] (app).health.path: only with type http"},
		{"host in tcp", health(`type: tcp, host: x.org`), "pools[0] (app).health.host: only with type http"},
		{"expect in tcp", health(`expect: "200"`), "pools[0] (app).health.expect: only with type http"},
		{"path", health(`type: http, path: healthz`), `pools[0] (app).health.path: "healthz" does not begin with /`},
		{"path space", health(`type: http, path: "/a b"`), `pools[0] (app).health.path: "/a b" has a space`},
		{"host", health(`type: http, host: "a b"`), `pools[0] (app).health.host: "a b" is not a host name`},
		{"host port", health(`type: http, host: "x.org:http"`), `pools[0] (app).health.host: "x.org:http"`},
		{"expect range", health(`type: http, expect: "399-200"`), `pools[0] (app).health.expect: "399-200": "399-200" is an empty range`},
		{"expect low", health(`type: http, expect: "99"`), `"99" is not within 100-599`},
		{"expect high", health(`type: http, expect: "200-600"`), `"200-600" is not within 100-599`},
		{"expect word", health(`type: http, expect: "2xx"`), `"2xx" is not a status`},
		{"expect empty item", health(`type: http, expect: "200,"`), `"" is not a status`},
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
