package proxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// BenchmarkHeaderRulesKeep: the check of each field of a 20-field
// request head against a listener's and a route's rules that drop (set
// and remove) rules names in all, none of them in the head but two.
func BenchmarkHeaderRulesKeep(b *testing.B) {
	head := [][]byte{
		[]byte("Host"), []byte("User-Agent"), []byte("Accept"), []byte("Accept-Language"), []byte("Accept-Encoding"),
		[]byte("Referer"), []byte("Cookie"), []byte("Authorization"), []byte("Cache-Control"), []byte("Pragma"),
		[]byte("Content-Type"), []byte("Origin"), []byte("Sec-Fetch-Dest"), []byte("Sec-Fetch-Mode"), []byte("Sec-Fetch-Site"),
		[]byte("X-Request-Id"), []byte("X-Debug"), []byte("X-Amzn-Trace-Id"), []byte("Traceparent"), []byte("x-rule-1"),
	}
	for _, rules := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			var ln, rt HeaderRules
			for i := range rules {
				name := fmt.Sprintf("X-Rule-%d", i)
				switch {
				case i == rules-1:
					name = "X-Debug"
				case i%2 == 0:
					rt.Remove = append(rt.Remove, name)
					continue
				}
				if ln.Set == nil {
					ln.Set = map[string]string{}
				}
				ln.Set[name] = "v"
			}
			h := hdrRules{compileOps(ln), compileOps(rt)}
			b.ReportAllocs()
			kept := 0
			for b.Loop() {
				for _, name := range head {
					if h.keep(name) {
						kept++
					}
				}
			}
			if kept == 0 {
				b.Fatal("nothing kept")
			}
		})
	}
}

// TestHeaderOpsDrops: drops, a binary search of the sorted names behind a
// check of their lengths, reports what equalDash over every name reports:
// for rules of one name or many, names of 63 bytes or more among them,
// each name in other cases and separators, and names that differ from
// one in a byte, are a byte longer or shorter, or are not there at all.
func TestHeaderOpsDrops(t *testing.T) {
	long := strings.Repeat("x-long", 12) // 72 bytes
	for _, h := range []HeaderRules{
		{Remove: []string{"X-Debug"}},
		{Set: map[string]string{"X-A": "1"}, Remove: []string{"b"}},
		{Set: map[string]string{"Server": "s", long: "v", long + "1": "v"}, Add: map[string]string{"X-Add": "a"},
			Remove: []string{"X-Debug", "x-trace-id", "Cookie", "X_Real_IP", strings.Repeat("a", 63), strings.Repeat("b", 62), "z"}},
	} {
		o := compileOps(h)
		var candidates []string
		for _, n := range append(slices.Concat(h.Remove, slices.Collect(maps.Keys(h.Set)), slices.Collect(maps.Keys(h.Add))), "Host", "x", "", "X-Debugs", "X-Debu", "X-Debuf", strings.Repeat("a", 64), strings.Repeat("a", 62), long+"2", long[1:]) {
			candidates = append(candidates, n, strings.ToUpper(n), strings.ReplaceAll(n, "-", "_"), strings.ReplaceAll(n, "_", "."))
		}
		for _, n := range candidates {
			want := slices.ContainsFunc(o.drop, func(d []byte) bool { return equalDash([]byte(n), d) })
			if got := o.drops([]byte(n)); got != want {
				t.Errorf("rules %v: drops(%q) %v, want %v", h, n, got, want)
			}
		}
		for _, n := range slices.Concat(h.Remove, slices.Collect(maps.Keys(h.Set))) {
			if !o.drops([]byte(strings.ToUpper(n))) {
				t.Errorf("rules %v: %q not dropped", h, n)
			}
		}
	}
}
