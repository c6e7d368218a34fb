package proxy

import (
	"net/netip"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestHTTPForwardedUntrustedFamily: the other fields servers read a
// client's scheme, host, port or path prefix from, X-Forwarded-Ssl,
// X-Forwarded-Port, X-Forwarded-Prefix, X-Forwarded-Server,
// X-Forwarded-Scheme, X-Forwarded-Protocol (every X-Forwarded-*) and
// Front-End-Https, are dropped from a client trusted_proxies does not
// list, as the five are: Spring's ForwardedHeaderFilter takes "X-Forwarded-Ssl:
// on" for https and X-Forwarded-Prefix for its context path, Rack
// X-Forwarded-Ssl and -Scheme, Ktor X-Forwarded-Server, -Protocol and
// Front-End-Https, whatever X-Forwarded-Proto the proxy wrote. A trusted
// client's pass.
func TestHTTPForwardedUntrustedFamily(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		req := "GET / HTTP/1.1\r\nHost: app.example.com\r\n" +
			"X-Forwarded-Ssl: on\r\nX-Forwarded-Port: 443\r\nX-Forwarded-Prefix: /evil\r\n" +
			"x-forwarded-server: evil.example\r\nX-Forwarded-Scheme: https\r\nX-Forwarded-Protocol: https\r\n" +
			"Front-End-Https: on\r\nX-Forwarded: yes\r\nX-End: yes\r\n\r\n"
		f := forwardedHead(t, b, nil, req)
		checkForwarded(t, f, map[string][]string{
			"x-forwarded-proto":    {"http"},
			"x-forwarded-ssl":      nil,
			"x-forwarded-port":     nil,
			"x-forwarded-prefix":   nil,
			"x-forwarded-server":   nil,
			"x-forwarded-scheme":   nil,
			"x-forwarded-protocol": nil,
			"front-end-https":      nil,
			"x-forwarded":          {"yes"},
			"x-end":                {"yes"},
		})
		f = forwardedHead(t, b, func(c *Config) {
			c.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}, req)
		checkForwarded(t, f, map[string][]string{
			"x-forwarded-ssl":    {"on"},
			"x-forwarded-port":   {"443"},
			"x-forwarded-prefix": {"/evil"},
			"front-end-https":    {"on"},
		})
	})
}
