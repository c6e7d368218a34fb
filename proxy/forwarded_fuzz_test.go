package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/h1"
)

// FuzzForwardedClient: the address forwardedClient finds for a client
// and its fields is what a plain walk finds: the peer where
// trusted_proxies does not list it; else, over the elements of every
// X-Forwarded-For field (any case), in order, split at their commas and
// trimmed, empty ones skipped, from the last: each one netip.ParseAddr
// reads without a zone (unmapped) until one trusted_proxies does not
// list, the walk ending at the address before an element that is not
// one. A client chooses every byte of these fields; the budget of
// rate_limit's key client is spent by what this returns.
func FuzzForwardedClient(f *testing.F) {
	for _, s := range [][4]string{
		{"10.0.0.1", "203.0.113.1", "x-forwarded-for", "10.0.0.2, 10.0.0.3"},
		{"192.0.2.1", "203.0.113.1", "X-Forwarded-For", ""},
		{"::ffff:10.0.0.1", "198.51.100.1, unknown", "X-FORWARDED-FOR", "::ffff:203.0.113.9"},
		{"fd00::1", "2001:db8::7,, fd00::2", "Forwarded", "for=192.0.2.60"},
		{"10.0.0.1", "\t10.0.0.9 ,fe80::1%eth0", "x-forwarded-for", "10.0.0.2:80"},
		{"10.0.0.1", "[2001:db8::1]", "x-forwarded-fo", "1.2.3.4"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	prefixes := Prefixes{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.0.2.0/24")}
	l := &listener{cfg: ListenerConfig{TrustedProxies: prefixes}}
	trusted := func(a netip.Addr) bool {
		for _, p := range prefixes {
			if p.Contains(a.WithZone("")) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, peerS, xff, name, value string) {
		if len(peerS) > 64 || len(xff) > 256 || len(name) > 32 || len(value) > 256 {
			return // the fuzzer minimizes every input that finds new code, slowly a long one
		}
		peer, err := netip.ParseAddr(peerS)
		if err != nil {
			peer = netip.MustParseAddr("10.0.0.1")
		}
		peer = peer.Unmap()
		hs := []h1.Header{
			{Name: []byte("Accept"), Value: []byte("*/*")},
			{Name: []byte("X-Forwarded-For"), Value: []byte(xff)},
			{Name: []byte(name), Value: []byte(value)},
		}
		got := l.forwardedClient(peer, len(hs), func(k int) ([]byte, []byte) { return hs[k].Name, hs[k].Value })

		want := peer
		if trusted(peer) {
			var elems []string
			for _, h := range hs {
				if !strings.EqualFold(string(h.Name), "x-forwarded-for") {
					continue
				}
				for e := range strings.SplitSeq(string(h.Value), ",") {
					if e = strings.Trim(e, " \t"); e != "" {
						elems = append(elems, e)
					}
				}
			}
			for i := len(elems) - 1; i >= 0; i-- {
				a, err := netip.ParseAddr(elems[i])
				if err != nil || a.Zone() != "" {
					break
				}
				if want = a.Unmap(); !trusted(want) {
					break
				}
			}
		}
		if got != want {
			t.Fatalf("from %v with X-Forwarded-For %q and %s: %q: %v, want %v", peer, xff, name, value, got, want)
		}
	})
}
