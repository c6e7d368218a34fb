package proxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// switchServer returns an upstream's serve function that reads one
// request head byte for byte, sends it on heads and answers with the
// response its target names: /101-h2c and /101-websocket a 101 to that
// protocol, anything else a 200.
func switchServer(heads chan<- string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		head, ok := readHeadBytes(c)
		if !ok {
			return
		}
		heads <- head
		target := strings.Fields(head)[1]
		if proto, ok := strings.CutPrefix(target, "/101-"); ok {
			c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: " + proto + "\r\n\r\n"))
			c.Read(make([]byte, 1)) // holds the tunnel until the client goes
			return
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	}
}

// TestHTTPUpgrades: a listener tunnels only the upgrades its upgrades list
// allows (default websocket): a request asking for another (h2c, the
// route to talking HTTP/2 to the server past the proxy's routing) goes as
// a plain request, without Upgrade, Connection: upgrade and
// HTTP2-Settings, and a 101 to a protocol not allowed, or to a request
// that asked none allowed, gets the client 502.
func TestHTTPUpgrades(t *testing.T) {
	const h2c = "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
	const ws = "Connection: upgrade\r\nUpgrade: websocket\r\n\r\n"
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, tc := range []struct {
			name     string
			upgrades []string // nil: the default
			send     string
			status   string // the client's status line's code
			upgrade  string // the Upgrade field the server gets, "" for none
		}{
			{"h2c plain", nil, "GET / HTTP/1.1\r\nHost: x\r\n" + h2c, "200", ""},
			{"h2c, HTTP2-Settings not in Connection", nil, "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", "200", ""},
			{"h2c switched", nil, "GET /101-h2c HTTP/1.1\r\nHost: x\r\n" + h2c, "502", ""},
			{"websocket", nil, "GET /101-websocket HTTP/1.1\r\nHost: x\r\n" + ws, "101", "websocket"},
			{"websocket switched to h2c", nil, "GET /101-h2c HTTP/1.1\r\nHost: x\r\n" + ws, "502", "websocket"},
			{"websocket among others", nil, "GET /101-websocket HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: h2c, WebSocket/13, foo\r\n\r\n", "101", "WebSocket/13"},
			{"none allowed", []string{}, "GET /101-websocket HTTP/1.1\r\nHost: x\r\n" + ws, "502", ""},
			{"none allowed plain", []string{}, "GET / HTTP/1.1\r\nHost: x\r\n" + ws, "200", ""},
			{"h2c allowed", []string{"H2C"}, "GET /101-h2c HTTP/1.1\r\nHost: x\r\n" + h2c, "101", "h2c"},
		} {
			heads := make(chan string, 1)
			u := newUpstream(t, switchServer(heads))
			cfg := httpConfig(b, u.addr)
			cfg.Listeners[0].Upgrades = tc.upgrades
			p := startProxy(t, cfg)
			c := dial(t, p)
			c.Write([]byte(tc.send))
			head := rawHead(t, c, bufio.NewReader(c))
			if !strings.HasPrefix(head, "HTTP/1.1 "+tc.status+" ") {
				t.Errorf("%s: %q, want %s", tc.name, head, tc.status)
			}
			var got string
			select {
			case got = <-heads:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no request reached the server", tc.name)
			}
			if up := fieldLines(got, "Upgrade"); tc.upgrade == "" && len(up) > 0 || tc.upgrade != "" && (len(up) != 1 || up[0] != tc.upgrade) {
				t.Errorf("%s: the server got Upgrade %q, want %q", tc.name, up, tc.upgrade)
			}
			conn := strings.ToLower(strings.Join(fieldLines(got, "Connection"), ","))
			if tc.upgrade == "" && strings.Contains(conn, "upgrade") || tc.upgrade != "" && !strings.Contains(conn, "upgrade") {
				t.Errorf("%s: the server got Connection %q", tc.name, conn)
			}
			if hs := fieldLines(got, "HTTP2-Settings"); len(hs) > 0 && tc.upgrade != "h2c" {
				t.Errorf("%s: the server got HTTP2-Settings %q", tc.name, hs)
			}
			c.Close()
		}
	})
}

// TestHTTPDotSegments: a request whose target's path has dot-segments
// ("/api/../admin", which a route's path_prefix "/api/" matches while the
// server serves /admin), however spelled, gets 400 and reaches no server;
// targets that only look like it pass.
func TestHTTPDotSegments(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		heads := make(chan string, 100)
		u := newUpstream(t, switchServer(heads))
		p := startProxy(t, httpConfig(b, u.addr))
		for _, tc := range []struct {
			target, status string
		}{
			{"/api/../admin", "400"},
			{"/api/./admin", "400"},
			{"/api/%2e%2E/admin", "400"},
			{"/api/x%2F..%2Fadmin", "400"},
			{"/api/..%5cadmin", "400"},
			{"http://x/api/../admin", "400"},
			{"/api/group%2Fproject", "200"},
			{"/api/..x/y", "200"},
			{"/api/x?next=/../admin", "200"},
		} {
			c := dial(t, p)
			c.Write([]byte("GET " + tc.target + " HTTP/1.1\r\nHost: x\r\n\r\n"))
			if head := rawHead(t, c, bufio.NewReader(c)); !strings.HasPrefix(head, "HTTP/1.1 "+tc.status+" ") {
				t.Errorf("%s: %q, want %s", tc.target, head, tc.status)
			}
			c.Close()
		}
		if n := len(heads); n != 3 {
			t.Errorf("%d requests reached the server, want 3", n)
		}
	})
}
