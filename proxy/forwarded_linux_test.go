package proxy

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// forwardedHead sends req through a proxy made from httpConfig (listener
// "web", its pool's server a headServer) with edit's changes (nil for
// none) and returns the head the server got, its field lines by name
// (lower case) in order.
func forwardedHead(t *testing.T, b engine.Backend, edit func(*Config), req string) map[string][]string {
	return forwardedHeadVia(t, b, edit, req, dial)
}

// forwardedHeadVia is forwardedHead with the client dialed by dialc.
func forwardedHeadVia(t *testing.T, b engine.Backend, edit func(*Config), req string, dialc func(*testing.T, *Proxy) *net.TCPConn) map[string][]string {
	t.Helper()
	heads := make(chan string, 1)
	u := newUpstream(t, headServer(heads, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	cfg := httpConfig(b, u.addr)
	if edit != nil {
		edit(cfg)
	}
	p := startProxy(t, cfg)
	c := dialc(t, p)
	io.WriteString(c, req)
	if resp, _ := readResponse(t, c, "GET"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	head := <-heads
	fields := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")[1:] {
		name, value, _ := strings.Cut(line, ":")
		fields[strings.ToLower(name)] = append(fields[strings.ToLower(name)], strings.TrimSpace(value))
	}
	return fields
}

// checkForwarded fails t where fields (forwardedHead's) has other lines for
// a name of want than want lists (nil: none).
func checkForwarded(t *testing.T, fields map[string][]string, want map[string][]string) {
	t.Helper()
	for name, w := range want {
		if got := fields[name]; strings.Join(got, "\n") != strings.Join(w, "\n") || len(got) != len(w) {
			t.Errorf("server got %s: %q, want %q", name, got, w)
		}
	}
}

// TestHTTPForwardedUntrusted: from a client trusted_proxies does not list
// (the default lists none), the forwarding fields it sent (X-Forwarded-For,
// however many lines, X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP,
// Forwarded, in any case) are dropped, and the server sees only the
// proxy's: the client's address, http and the request's host.
func TestHTTPForwardedUntrusted(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, edit := range []func(*Config){nil, func(c *Config) {
			c.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		}} {
			f := forwardedHead(t, b, edit, "GET / HTTP/1.1\r\nHost: app.example.com:8080\r\n"+
				"X-Forwarded-For: 203.0.113.7\r\nx-forwarded-for: 198.51.100.1, 198.51.100.2\r\nX-Forwarded-For: 192.0.2.9\r\n"+
				"Forwarded: for=203.0.113.7;proto=https\r\nX-Real-IP: 203.0.113.7\r\n"+
				"X-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\nX-End: yes\r\n\r\n")
			checkForwarded(t, f, map[string][]string{
				"x-forwarded-for":   {"127.0.0.1"},
				"x-forwarded-proto": {"http"},
				"x-forwarded-host":  {"app.example.com:8080"},
				"x-real-ip":         nil,
				"forwarded":         nil,
				"x-end":             {"yes"},
			})
		}
	})
}

// TestHTTPForwardedTrusted: from a client trusted_proxies lists
// (127.0.0.1 in 127.0.0.0/8), the client is appended to the
// X-Forwarded-For it sent (every line, in order), and its
// X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP and Forwarded pass as
// they came; X-Forwarded-Proto and X-Forwarded-Host are written where it
// sent none.
func TestHTTPForwardedTrusted(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		trust := func(c *Config) {
			c.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("127.0.0.1/8")}
		}
		f := forwardedHead(t, b, trust, "GET / HTTP/1.1\r\nHost: app.example.com\r\n"+
			"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 198.51.100.1, 198.51.100.2\r\n"+
			"X-Forwarded-Proto: https\r\nX-Forwarded-Host: www.example.com\r\n"+
			"Forwarded: for=203.0.113.7;proto=https\r\nX-Real-IP: 203.0.113.7\r\n\r\n")
		checkForwarded(t, f, map[string][]string{
			"x-forwarded-for":   {"203.0.113.7, 198.51.100.1, 198.51.100.2, 127.0.0.1"},
			"x-forwarded-proto": {"https"},
			"x-forwarded-host":  {"www.example.com"},
			"x-real-ip":         {"203.0.113.7"},
			"forwarded":         {"for=203.0.113.7;proto=https"},
		})
		f = forwardedHead(t, b, trust, "GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n")
		checkForwarded(t, f, map[string][]string{
			"x-forwarded-for":   {"127.0.0.1"},
			"x-forwarded-proto": {"http"},
			"x-forwarded-host":  {"app.example.com"},
			"forwarded":         nil,
		})
	})
}

// TestHTTPForwardedAllocs: a trusted client's requests take no
// allocation either (TestHTTPAllocs with trusted_proxies).
func TestHTTPForwardedAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		httpAllocs(t, b, func(c *Config) {
			c.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8")}
		})
	})
}

// TestHTTPForwardedMapped: on a dual-stack listener an IPv4 client
// (::ffff:127.0.0.1 on the socket) compares as IPv4 against
// trusted_proxies, and goes into X-Forwarded-For as IPv4.
func TestHTTPForwardedMapped(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::]:0"); err != nil {
		t.Skipf("no dual-stack IPv6 listener: %v", err)
	} else {
		ln.Close()
	}
	dial4 := func(t *testing.T, p *Proxy) *net.TCPConn {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Addr("web").(*net.TCPAddr).Port)), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.TCPConn)
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		f := forwardedHeadVia(t, b, func(c *Config) {
			c.Listeners[0].Listen = "[::]:0"
			c.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}, "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n\r\n", dial4)
		checkForwarded(t, f, map[string][]string{
			"x-forwarded-for":   {"203.0.113.7, 127.0.0.1"},
			"x-forwarded-proto": {"https"},
		})
	})
}
