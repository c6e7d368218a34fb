package h1

import (
	"strings"
	"testing"
)

// headOf returns a head of exactly n bytes: start, a filler field, the empty
// line. n must leave room for "A: " and two CRLFs after start.
func headOf(start string, n int) string {
	fill := n - len(start) - len("A: \r\n\r\n")
	return start + "A: " + strings.Repeat("b", fill) + "\r\n\r\n"
}

// TestLimitsAtBoundary: each limit accepts a head, target, field count or
// trailer section of exactly its size and refuses one byte (or field) more,
// complete or not.
func TestLimitsAtBoundary(t *testing.T) {
	const max = 200
	lim := Limits{MaxHead: max, MaxTarget: 50}
	reqStart := "GET / HTTP/1.1\r\nHost: x\r\n"
	respStart := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
	var r Request
	var resp Response
	for _, tc := range []struct {
		name  string
		parse func([]byte) (int, error)
		start string
		over  int // status one byte over
	}{
		{"request", func(b []byte) (int, error) { return r.Parse(b, lim) }, reqStart, 431},
		{"response", func(b []byte) (int, error) { return resp.Parse(b, false, lim) }, respStart, 502},
	} {
		at, over := headOf(tc.start, max), headOf(tc.start, max+1)
		if n, err := tc.parse([]byte(at + "NEXT")); n != max || err != nil {
			t.Errorf("%s: head of MaxHead bytes: n=%d err=%v", tc.name, n, err)
		}
		if _, err := tc.parse([]byte(over)); status(err) != tc.over {
			t.Errorf("%s: head of MaxHead+1 bytes: %v, want %d", tc.name, err, tc.over)
		}
		// Incomplete: MaxHead bytes may still become a head, MaxHead+1 not.
		if n, err := tc.parse([]byte(over[:max])); n != 0 || err != nil {
			t.Errorf("%s: incomplete MaxHead bytes: n=%d err=%v", tc.name, n, err)
		}
		if _, err := tc.parse([]byte(over[:max+1])); status(err) != tc.over {
			t.Errorf("%s: incomplete MaxHead+1 bytes: %v, want %d", tc.name, err, tc.over)
		}
		// An incomplete start line alone is held to MaxHead as well.
		line := tc.start[:3] + strings.Repeat("a", max)
		if n, err := tc.parse([]byte(line[:max])); n != 0 || err != nil {
			t.Errorf("%s: incomplete start line of MaxHead bytes: n=%d err=%v", tc.name, n, err)
		}
		if _, err := tc.parse([]byte(line[:max+1])); status(err) != tc.over {
			t.Errorf("%s: incomplete start line of MaxHead+1 bytes: %v, want %d", tc.name, err, tc.over)
		}
	}

	target := "/" + strings.Repeat("t", 49)
	if _, err := r.Parse([]byte("GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n"), lim); err != nil {
		t.Errorf("target of MaxTarget bytes: %v", err)
	}
	if _, err := r.Parse([]byte("GET "+target+"t HTTP/1.1\r\nHost: x\r\n\r\n"), lim); status(err) != 414 {
		t.Errorf("target of MaxTarget+1 bytes: %v, want 414", err)
	}
	if n, err := r.Parse([]byte("GET "+target), lim); n != 0 || err != nil {
		t.Errorf("incomplete target of MaxTarget bytes: n=%d err=%v", n, err)
	}
	if _, err := r.Parse([]byte("GET "+target+"t"), lim); status(err) != 414 {
		t.Errorf("incomplete target of MaxTarget+1 bytes: %v, want 414", err)
	}

	lim = Limits{MaxHeaders: 3}
	for i, tc := range []struct {
		parse func([]byte) (int, error)
		start string
		over  int
	}{
		{func(b []byte) (int, error) { return r.Parse(b, lim) }, "GET / HTTP/1.1\r\nHost: x\r\n", 431},
		{func(b []byte) (int, error) { return resp.Parse(b, false, lim) }, "HTTP/1.1 204 OK\r\nA: b\r\n", 502},
	} {
		if _, err := tc.parse([]byte(tc.start + "B: c\r\nC: d\r\n\r\n")); err != nil {
			t.Errorf("%d: MaxHeaders fields: %v", i, err)
		}
		if _, err := tc.parse([]byte(tc.start + "B: c\r\nC: d\r\nD: e\r\n\r\n")); status(err) != tc.over {
			t.Errorf("%d: MaxHeaders+1 fields: %v, want %d", i, err, tc.over)
		}
		// The field over the limit is refused before the head is complete.
		if _, err := tc.parse([]byte(tc.start + "B: c\r\nC: d\r\nD: e\r\n")); status(err) != tc.over {
			t.Errorf("%d: MaxHeaders+1 fields, incomplete: %v, want %d", i, err, tc.over)
		}
	}

	// The trailer section, final CRLF included, may be MaxTrailer bytes.
	last := "0\r\n"
	trailer := "T: " + strings.Repeat("v", MaxTrailer-len("T: \r\n\r\n")) + "\r\n\r\n"
	if got := feed(Chunked, 0, []byte(last+trailer)); !got.done || got.err != nil || got.n != len(last)+MaxTrailer {
		t.Errorf("trailer of MaxTrailer bytes: %+v", got)
	}
	trailer = "T: " + strings.Repeat("v", MaxTrailer+1-len("T: \r\n\r\n")) + "\r\n\r\n"
	if got := feed(Chunked, 0, []byte(last+trailer)); got.err == nil || got.n != len(last)+MaxTrailer {
		t.Errorf("trailer of MaxTrailer+1 bytes: %+v, want an error at byte %d", got, len(last)+MaxTrailer)
	}

	// It may have MaxTrailerFields field lines, as a head MaxHeaders: the
	// one past them is refused at its first byte, however the body is
	// split.
	trailer = strings.Repeat("t:\r\n", MaxTrailerFields) + "\r\n"
	if got := feed(Chunked, 0, []byte(last+trailer)); !got.done || got.err != nil {
		t.Errorf("trailer of MaxTrailerFields fields: %+v", got)
	}
	in := []byte(last + strings.Repeat("t:\r\n", MaxTrailerFields+1) + "\r\n")
	at := len(last) + MaxTrailerFields*len("t:\r\n")
	for cut := range len(in) + 1 {
		if got := feed(Chunked, 0, in, cut); status(got.err) != 502 || got.n != at {
			t.Fatalf("trailer of MaxTrailerFields+1 fields, cut at %d: %+v, want a 502 at byte %d", cut, got, at)
		}
	}
}
