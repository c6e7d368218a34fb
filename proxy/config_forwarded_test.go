package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestConfigTrustedProxies: trusted_proxies takes CIDRs (IPv4 and IPv6),
// in mode http only; a bare address, a bad prefix, an IPv4-mapped prefix
// (clients compare as IPv4: it would match none) are refused, naming
// the field; bits set past a prefix's length are ignored (127.0.0.1/8 is
// 127.0.0.0/8), as nginx does.
func TestConfigTrustedProxies(t *testing.T) {
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	cfg, err := ParseConfig([]byte(`listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, trusted_proxies: ["10.0.0.0/8", "fd00::/8", "192.0.2.1/32", "127.0.0.1/8"]}]` + "\n" + pool))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("127.0.0.1/8")}
	if got := cfg.Listeners[0].TrustedProxies; !slices.Equal(got, want) {
		t.Errorf("trusted_proxies %v, want %v", got, want)
	}
	if cfg, err = ParseConfig([]byte(`listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http}]` + "\n" + pool)); err != nil || cfg.Listeners[0].TrustedProxies != nil {
		t.Errorf("default trusted_proxies %v (%v), want none", cfg.Listeners[0].TrustedProxies, err)
	}
	for _, tc := range []struct{ name, list, want string }{
		{"bare address", `["10.0.0.1"]`, `line 1: trusted_proxies: "10.0.0.1" is not a network such as "10.0.0.0/8" (no '/')`},
		{"bad", `["10.0.0.0/33"]`, `line 1: trusted_proxies: "10.0.0.0/33" is not a network such as "10.0.0.0/8"`},
		{"name", `["localhost/8"]`, `line 1: trusted_proxies: "localhost/8" is not a network such as "10.0.0.0/8"`},
		{"not a list", `"10.0.0.0/8"`, `line 1: trusted_proxies: want a list of networks such as ["10.0.0.0/8"]`},
		{"a map in the list", `[{a: b}]`, `line 1: trusted_proxies: want a network such as "10.0.0.0/8"`},
		{"mapped", `["10.0.0.0/8", "::ffff:10.0.0.0/104"]`, `listeners[0] (web).trusted_proxies[1]: ::ffff:10.0.0.0/104 is IPv4-mapped (clients compare as IPv4: write 10.0.0.0/8)`},
	} {
		_, err := ParseConfig([]byte(`listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, trusted_proxies: ` + tc.list + `}]` + "\n" + pool))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	_, err = ParseConfig([]byte(`listeners: [{name: web, listen: "127.0.0.1:0", pool: app, trusted_proxies: ["10.0.0.0/8"]}]` + "\n" + pool))
	if want := "listeners[0] (web).trusted_proxies: only in mode http"; err == nil || err.Error() != want {
		t.Errorf("mode tcp: error %v, want %q", err, want)
	}
	// Go callers: the zero Prefix is refused.
	cfg.Listeners[0].TrustedProxies = []netip.Prefix{{}}
	if err := cfg.Validate(); err == nil || err.Error() != "listeners[0] (web).trusted_proxies[0]: not a valid prefix" {
		t.Errorf("zero prefix: error %v", err)
	}
}
