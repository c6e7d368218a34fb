package proxy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseMaxConns: a pool's max_conns, a server's own (a map entry),
// and the queue's defaults (max_queue 1024, queue_timeout 5s) where some
// server has a cap; none without. -check's YAML and /debug/config's JSON
// show them, a server with its own cap as the map, and the YAML parses
// back to the same config.
func TestParseMaxConns(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app}]
pools:
  - {name: app, servers: ["127.0.0.1:1", {address: "127.0.0.1:2", max_conns: 0}, {address: "127.0.0.1:3", weight: 2, max_conns: 7}], max_conns: 100}
  - {name: q, servers: ["127.0.0.1:4"], max_conns: 5, max_queue: -1, queue_timeout: 250ms}
  - {name: none, servers: ["127.0.0.1:5"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	app, q, none := &cfg.Pools[0], &cfg.Pools[1], &cfg.Pools[2]
	if got := []int{app.serverMaxConns(0), app.serverMaxConns(1), app.serverMaxConns(2)}; !reflect.DeepEqual(got, []int{100, 0, 7}) {
		t.Errorf("servers' caps %v, want [100 0 7]", got)
	}
	if app.MaxQueue != DefaultMaxQueue || time.Duration(app.QueueTimeout) != DefaultQueueTimeout {
		t.Errorf("queue defaults: max_queue %d, queue_timeout %v", app.MaxQueue, time.Duration(app.QueueTimeout))
	}
	if q.MaxQueue != -1 || time.Duration(q.QueueTimeout) != 250*time.Millisecond {
		t.Errorf("queue given: max_queue %d, queue_timeout %v", q.MaxQueue, time.Duration(q.QueueTimeout))
	}
	if none.MaxConns != 0 || none.MaxQueue != 0 || none.QueueTimeout != 0 {
		t.Errorf("uncapped pool: %+v", none)
	}
	y := yamlRoundTrip(t, cfg)
	for _, want := range []string{"max_conns: 100", "max_queue: 1024", "queue_timeout: 5s", "max_conns: 7", "- 127.0.0.1:1\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("-check's YAML lacks %q:\n%s", want, y)
		}
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"address":"127.0.0.1:2","weight":1,"max_conns":0}`, `"max_conns":100,"max_queue":1024,"queue_timeout":"5s"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("/debug/config's JSON lacks %s:\n%s", want, j)
		}
	}
}

// TestParseMaxConnsErrors: the cap and queue fields are checked strictly.
func TestParseMaxConnsErrors(t *testing.T) {
	lst := `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"negative", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], max_conns: -1}]`, "pools[0] (app).max_conns: negative -1"},
		{"server negative", lst + `pools: [{name: app, servers: [{address: "127.0.0.1:1", max_conns: -2}]}]`, "server max_conns: want a whole number, 0 or more"},
		{"server not a number", lst + `pools: [{name: app, servers: [{address: "127.0.0.1:1", max_conns: many}]}]`, "server max_conns: want a whole number"},
		{"queue without cap", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], max_queue: 5}]`, "pools[0] (app).max_queue, queue_timeout: only with a max_conns"},
		{"timeout without cap", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], max_conns: 0, queue_timeout: 1s}]`, "pools[0] (app).max_queue, queue_timeout: only with a max_conns"},
		{"queue below -1", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], max_conns: 3, max_queue: -2}]`, "pools[0] (app).max_queue: -2 below -1"},
		{"queue timeout", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], max_conns: 3, queue_timeout: -1s}]`, "pools[0] (app).queue_timeout: -1s is not positive"},
		{"h2c pool", lst + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c, max_conns: 3}]`, "pools[0] (app).max_conns: not with protocol h2c"},
		{"h2c server", lst + `pools: [{name: app, servers: [{address: "127.0.0.1:1", max_conns: 3}], protocol: h2c}]`, "pools[0] (app).max_conns: not with protocol h2c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
