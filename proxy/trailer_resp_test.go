package proxy

import (
	"testing"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/hpack"
)

// TestKeepRespTrailerLines: a response's trailer section loses the
// lines of the fields no trailer may carry (the connection's and
// framing in any spelling, Via, Set-Cookie, challenges, response
// controls, the content's format) and those its response_headers remove
// or set, the others kept in order (the forwarding fields and
// Authentication-Info among them), in place and without an allocation.
func TestKeepRespTrailerLines(t *testing.T) {
	rules := hdrRules{compileOps(HeaderRules{Remove: []string{"X-L"}}),
		compileOps(HeaderRules{Set: map[string]string{"X-S": "v"}})}
	for _, tc := range []struct {
		rules    hdrRules
		in, want string
	}{
		{noRules, "", ""},
		{noRules, "X-Sum: a\r\n", "X-Sum: a\r\n"},
		{noRules, "Set-Cookie: s=1\r\nSet_Cookie: s=1\r\nVia: 1.1 x\r\nConnection: close\r\nKeep.Alive: 1\r\nTE: trailers\r\n" +
			"Trailer: X\r\nUpgrade: h2c\r\nHTTP2-Settings: AA\r\nProxy-Connection: close\r\n", ""},
		{noRules, "WWW-Authenticate: Basic\r\nProxy-Authenticate: Basic\r\nCache-Control: no-store\r\nAge: 1\r\nExpires: 0\r\n" +
			"Pragma: no-cache\r\nVary: *\r\nLocation: /x\r\nRetry-After: 1\r\nContent-Type: a/b\r\nContent-Encoding: gzip\r\n" +
			"Content-Language: de\r\nContent-Location: /x\r\nContent-Range: bytes 0-1/2\r\n", ""},
		{noRules, "grpc-status: 0\r\nX-Forwarded-For: 1\r\nX_Real_IP: 1\r\nAuthentication-Info: nextnonce=x\r\nX-L: l\r\n",
			"grpc-status: 0\r\nX-Forwarded-For: 1\r\nX_Real_IP: 1\r\nAuthentication-Info: nextnonce=x\r\nX-L: l\r\n"},
		{rules, "X-L: l\r\nX-Sum: a\r\nx_l: l\r\nX-S: s\r\ngrpc-message: a:b\r\n", "X-Sum: a\r\ngrpc-message: a:b\r\n"},
	} {
		if got := string(keepTrailerLines([]byte(tc.in), respTrailerRules(tc.rules))); got != tc.want {
			t.Errorf("keepTrailerLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	b := []byte("X-Sum: a\r\nSet-Cookie: s=1\r\nX-L: b\r\n")
	if n := testing.AllocsPerRun(100, func() { keepTrailerLines(b, respTrailerRules(rules)) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
	fs := []hpack.Field{{Name: []byte("x-sum")}, {Name: []byte("via")}, {Name: []byte("x-s")}}
	if got := keepTrailerFields(fs, respTrailerRules(rules)); len(got) != 1 || string(got[0].Name) != "x-sum" {
		t.Errorf("keepTrailerFields: %v, want x-sum alone", got)
	}
	fs = []hpack.Field{{Name: []byte("x-sum")}, {Name: []byte("via")}}
	if n := testing.AllocsPerRun(100, func() { keepTrailerFields(fs[:1], respTrailerRules(rules)) }); n != 0 {
		t.Errorf("keepTrailerFields: %v allocations", n)
	}
}

// TestTrailerListsHopByHop: the fields no rule may name (ruleRefused:
// internal/h1's ConnectionFields among them) are on both trailer lists
// but the forwarding fields, which a request's trailers drop in any
// spelling and a response's keep.
func TestTrailerListsHopByHop(t *testing.T) {
	for _, n := range h1.ConnectionFields {
		if ruleRefused[n] != "hop-by-hop" {
			t.Errorf("ruleRefused[%q] = %q, want hop-by-hop", n, ruleRefused[n])
		}
	}
	for n := range ruleRefused {
		fwd := forwardingAlias([]byte(n))
		for _, l := range []struct {
			name string
			l    [][]byte
		}{{"trailerRefused", trailerRefused}, {"respTrailerRefused", respTrailerRefused}} {
			if listed(l.l, []byte(n)) == fwd {
				t.Errorf("%s has %q: %v, want %v", l.name, n, !fwd, !fwd)
			}
		}
		if (trailerRules{}).kept([]byte(n)) || fwd != (respTrailerRules(noRules)).kept([]byte(n)) {
			t.Errorf("%q: kept in a request's trailers, or in a response's: %v (forwarding field: %v)", n, !fwd, fwd)
		}
	}
}

// TestTrailerRulesCount: a request trailer field dropped as a
// forwarding field spelled with another separator than '-' is counted
// in underscore_dropped as a head's is (X_Forwarded_For, X.Real.IP),
// and one under its own name (X-Forwarded-For) or on trailerRefused's
// list is not; without an allocation.
func TestTrailerRulesCount(t *testing.T) {
	ln := &listener{stats: []*lnStats{{}}, reqOps: noOps, respOps: noOps}
	tr := trailerRules{ln, 0, 0}
	for _, tc := range []struct {
		name  string
		count uint64
	}{
		{"X_Forwarded_For", 1}, {"X.Real.IP", 1}, {"x_forwarded-proto", 1},
		{"X-Forwarded-For", 0}, {"Forwarded", 0}, {"Cookie", 0}, {"X_Sum", 0},
	} {
		before := ln.stats[0].underscoreDropped.load()
		kept := tr.kept([]byte(tc.name))
		if d := ln.stats[0].underscoreDropped.load() - before; d != tc.count || kept != (tc.name == "X_Sum") {
			t.Errorf("%s: kept %v, counted %d, want %v, %d", tc.name, kept, d, tc.name == "X_Sum", tc.count)
		}
	}
	name := []byte("X_Forwarded_For")
	if n := testing.AllocsPerRun(100, func() { tr.kept(name) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// collect is a Write that appends to its bytes.
type collect struct{ b []byte }

func (c *collect) Write(p []byte) (int, error) { c.b = append(c.b, p...); return len(p), nil }

// TestHeldTrailerSplit: a chunked response body split in two anywhere
// goes on (the bytes next leaves alone as they came, pre and the
// section through sendTrailer) as the body with its trailer section
// filtered by its respTrailerRules, next's pieces ending with the body,
// and a body without a trailer section is not held; once warm without
// an allocation.
func TestHeldTrailerSplit(t *testing.T) {
	body := "5\r\nhello\r\n0\r\nX-Sum: a\r\nSet-Cookie: s=1\r\nX-L: l\r\ngrpc-status: 0\r\n\r\nNEXT"
	want := "5\r\nhello\r\n0\r\nX-Sum: a\r\ngrpc-status: 0\r\n\r\n"
	tr := respTrailerRules{compileOps(HeaderRules{Remove: []string{"X-L"}}), noOps}
	var h heldTrailer
	var b h1.Body
	var w collect
	pass := func(p []byte) (int, bool) {
		n, held, done, err := h.next(&b, p)
		if err != nil {
			t.Fatal(err)
		}
		if held >= 0 {
			sendTrailer(&h, &w, p[:held], done, tr)
		} else {
			w.Write(p[:n])
		}
		return n, done
	}
	for i := range len(body) + 1 {
		b.Reset(h1.Chunked, 0)
		h.reset(nil)
		w.b = w.b[:0]
		n, done := pass([]byte(body[:i]))
		if !done {
			m, d := pass([]byte(body[i:]))
			n, done = n+m, d
		}
		if got := string(w.b); !done || got != want || n != len(want)+len("Set-Cookie: s=1\r\nX-L: l\r\n") {
			t.Errorf("split at %d: %q (%d taken, done %v), want %q", i, got, n, done, want)
		}
	}
	plain := []byte("3\r\nabc\r\n0\r\n\r\n")
	b.Reset(h1.Chunked, 0)
	if n, held, done, err := h.next(&b, plain); n != len(plain) || held != -1 || !done || err != nil {
		t.Errorf("without trailers: %d, held %d, %v, %v; want %d, -1, true, nil", n, held, done, err, len(plain))
	}
	p := []byte(body)
	if n := testing.AllocsPerRun(100, func() {
		b.Reset(h1.Chunked, 0)
		w.b = w.b[:0]
		pass(p)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
