package h1

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
)

// FuzzSplitTarget: SplitTarget of a target a request line of method
// carries (ValidTarget) gives absolute-form, and absolute-form only, an
// authority: the scheme, "://", the authority and the path reassemble the
// target, the authority is one ValidAuthority accepts and net/url reads
// as the host, and the path is empty or starts with '/' or '?'. Every
// other form is all path. A proxy routes by that authority, so a split
// that took part of the path for it, or part of it for the path, would
// route a client's request where the next hop does not.
func FuzzSplitTarget(f *testing.F) {
	for _, s := range []string{
		"http://h:8080/p?q", "http://h", "http://h?q", "HTTPS://[::1]:443/a/b", "http://h/p://x",
		"/p?q", "/http://h/p", "*", "h:443", "a+b.c-d://h.:/", "http://[::1]?x", "x://y",
	} {
		for _, m := range []string{"GET", "OPTIONS", "CONNECT"} {
			f.Add(m, s)
		}
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		a, p := SplitTarget([]byte(target))
		absolute := ValidTarget([]byte(method), []byte(target)) && method != "CONNECT" && target[0] != '/' && target != "*"
		if !absolute {
			if ValidTarget([]byte(method), []byte(target)) && (a != nil || string(p) != target) {
				t.Fatalf("%s %q: SplitTarget = %q, %q; want no authority, all path", method, target, a, p)
			}
			return
		}
		scheme, _, _ := strings.Cut(target, "://")
		if a == nil || scheme+"://"+string(a)+string(p) != target {
			t.Fatalf("%s %q: SplitTarget = %q (nil %v), %q; they do not reassemble the target", method, target, a, a == nil, p)
		}
		if bytes.ContainsAny(a, "/?") || len(p) > 0 && p[0] != '/' && p[0] != '?' || !ValidAuthority(a) {
			t.Fatalf("%s %q: SplitTarget = %q, %q; the authority runs into the path", method, target, a, p)
		}
		if u, err := url.ParseRequestURI(target); err == nil && u.Host != string(a) {
			t.Fatalf("%s %q: SplitTarget's authority %q, net/url's host %q", method, target, a, u.Host)
		}
	})
}

// FuzzNextElem: NextElem walks a list into the elements strings.Split
// finds between its commas, each trimmed of spaces and tabs, and ends
// (rest nil) after the last; ListHas finds a lower-case token, and
// ListHasName a name of any case, where one of them that is not empty is
// it in any case (ASCII only: "\u212a" is not "k"): no list has "".
// Connection, Transfer-Encoding and Upgrade are read this way.
func FuzzNextElem(f *testing.F) {
	for _, s := range [][2]string{
		{"close", "close"}, {" keep-alive , Upgrade", "upgrade"}, {"a,,b", ""}, {",", ""}, {"", ""},
		{"chunked\t,\tgzip ", "gzip"}, {"\u212aeep-alive", "keep-alive"}, {"a ,b,", "b"},
	} {
		f.Add(s[0], s[1])
	}
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	f.Fuzz(func(t *testing.T, list, token string) {
		if len(list) > 256 || len(token) > 32 {
			return // the fuzzer spent a 40 s run minimizing a long list
		}
		want := strings.Split(list, ",")
		rest := []byte(list)
		for i := 0; ; i++ {
			var e []byte
			e, rest = NextElem(rest)
			if i >= len(want) || string(e) != strings.Trim(want[i], " \t") {
				t.Fatalf("NextElem over %q: element %d is %q, want the elements %q trimmed", list, i, e, want)
			}
			if rest == nil {
				if i != len(want)-1 {
					t.Fatalf("NextElem over %q: ended after %d elements, want %d", list, i+1, len(want))
				}
				break
			}
		}
		has := false
		for _, e := range want {
			e = strings.Trim(e, " \t")
			same := e != "" && len(e) == len(token)
			for i := 0; same && i < len(e); i++ {
				same = lower(e[i]) == lower(token[i])
			}
			has = has || same
		}
		if got := ListHasName([]byte(list), []byte(token)); got != has {
			t.Fatalf("ListHasName(%q, %q) = %v, want %v", list, token, got, has)
		}
		if strings.ToLower(token) != token {
			return // ListHas takes a lower-case token, a constant
		}
		if got := ListHas([]byte(list), token); got != has {
			t.Fatalf("ListHas(%q, %q) = %v, want %v", list, token, got, has)
		}
	})
}

// TestListHasEmpty: an empty element of a list (RFC 9110 5.6.1: one a
// recipient ignores) is none, so that no list has the empty token or
// name, while its other elements are found.
func TestListHasEmpty(t *testing.T) {
	for _, list := range []string{"a,,b", ",", "", " , \t", "a, ,b", "close,"} {
		if ListHas([]byte(list), "") {
			t.Errorf("ListHas(%q, \"\") = true, want false", list)
		}
		if ListHasName([]byte(list), nil) {
			t.Errorf("ListHasName(%q, \"\") = true, want false", list)
		}
	}
	if !ListHas([]byte("a,,B"), "b") || !ListHasName([]byte("a,,B"), []byte("b")) {
		t.Errorf("the list \"a,,B\" does not have \"b\"")
	}
}
