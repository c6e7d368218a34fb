package proxy

import (
	"strings"
	"testing"
	"time"
)

// TestPoolProtocolConfig: protocol defaults to http1 and its h2c knobs to
// theirs; a bad protocol, knobs without h2c, knobs out of range and an h2c
// pool under a mode tcp listener are refused naming the field.
func TestPoolProtocolConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pools[0]; p.Protocol != ProtocolHTTP1 || p.H2MaxConcurrentStreams != 0 || p.H2MaxConnections != 0 {
		t.Errorf("pool defaults: protocol %q, h2 knobs %d %d", p.Protocol, p.H2MaxConcurrentStreams, p.H2MaxConnections)
	}
	cfg, err = ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http}]
pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pools[0]; p.H2MaxConcurrentStreams != DefaultPoolH2MaxConcurrentStreams || p.H2MaxConnections != DefaultPoolH2MaxConnections ||
		p.H2PingInterval != 0 || p.H2PingTimeout != Duration(DefaultPoolH2PingTimeout) {
		t.Errorf("h2c pool defaults: %d streams, %d connections, ping interval %v, timeout %v", p.H2MaxConcurrentStreams, p.H2MaxConnections,
			time.Duration(p.H2PingInterval), time.Duration(p.H2PingTimeout))
	}
	const http = `listeners: [{name: a, listen: ":1", pool: app, mode: http}]` + "\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown", http + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h3}]`, `pools[0] (app).protocol: unknown "h3"`},
		{"knobs http1", http + `pools: [{name: app, servers: ["127.0.0.1:1"], h2_max_connections: 2}]`, "pools[0] (app).h2_max_concurrent_streams, h2_max_connections: only with protocol h2c"},
		{"streams", http + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c, h2_max_concurrent_streams: -1}]`, "pools[0] (app).h2_max_concurrent_streams: -1 is not from 1"},
		{"conns", http + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c, h2_max_connections: 70000}]`, "pools[0] (app).h2_max_connections: 70000 is not from 1 to 65536"},
		{"ping http1", http + `pools: [{name: app, servers: ["127.0.0.1:1"], h2_ping_interval: 10s}]`, "pools[0] (app).h2_ping_interval, h2_ping_timeout: only with protocol h2c"},
		{"ping interval", http + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c, h2_ping_interval: -1s}]`, "pools[0] (app).h2_ping_interval: negative -1s"},
		{"ping timeout", http + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c, h2_ping_timeout: -1s}]`, "pools[0] (app).h2_ping_timeout: -1s is not positive"},
		{"tcp", `listeners: [{name: a, listen: ":1", pool: app}]` + "\n" + `pools: [{name: app, servers: ["127.0.0.1:1"], protocol: h2c}]`, `listeners[0] (a).pool: pool "app" has protocol h2c, which a mode tcp listener cannot send to`},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
