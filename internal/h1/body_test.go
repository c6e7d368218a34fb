package h1

import (
	"fmt"
	"strings"
	"testing"
)

type bodyResult struct {
	n    int
	done bool
	err  error
	data int64 // Body.Data at the end
}

// feed runs b over in split at the given cut points and sums the results.
func feed(f Framing, length int64, in []byte, cuts ...int) bodyResult {
	var b Body
	b.Reset(f, length)
	var r bodyResult
	prev := 0
	for _, c := range append(cuts, len(in)) {
		if c < prev || c > len(in) {
			continue
		}
		n, done, err := b.Next(in[prev:c])
		r.n += n
		r.data = b.Data()
		if err != nil {
			r.err = err
			return r
		}
		if done {
			r.done = true
			return r
		}
		prev = c
	}
	return r
}

func TestBody(t *testing.T) {
	tests := []struct {
		name    string
		framing Framing
		length  int64
		in      string
		n       int
		done    bool
		status  int
	}{
		{name: "nobody", framing: NoBody, in: "abc", n: 0, done: true},
		{name: "length", framing: Length, length: 3, in: "abcdef", n: 3, done: true},
		{name: "length zero", framing: Length, in: "abc", n: 0, done: true},
		{name: "length short", framing: Length, length: 10, in: "abc", n: 3},
		{name: "until close", framing: UntilClose, in: "abc", n: 3},
		{name: "chunked", framing: Chunked, in: "5\r\nhello\r\n0\r\n\r\nNEXT", n: 15, done: true},
		{name: "chunked upper hex", framing: Chunked, in: "A\r\n0123456789\r\n0\r\n\r\n", n: 20, done: true},
		{name: "chunked ext", framing: Chunked, in: "5 ;a=b;c=\"d\"\r\nhello\r\n00;x\r\n\r\n", n: 29, done: true},
		{name: "chunked trailer", framing: Chunked, in: "1\r\na\r\n0\r\nX-T: 1\r\nY:\r\n\r\nZ", n: 23, done: true},
		{name: "chunked partial", framing: Chunked, in: "5\r\nhel", n: 6},
		{name: "no digits", framing: Chunked, in: "\r\n", status: 502},
		{name: "bad digit", framing: Chunked, in: "5x\r\n", n: 1, status: 502},
		{name: "negative", framing: Chunked, in: "-5\r\n", status: 502},
		{name: "0x prefix", framing: Chunked, in: "0x5\r\n", n: 1, status: 502},
		{name: "size overflow", framing: Chunked, in: "8000000000000000\r\n", n: 15, status: 502},
		{name: "size max", framing: Chunked, in: "7fffffffffffffff\r\n", n: 18},
		{name: "leading zeros", framing: Chunked, in: "0000000000000005\r\nhello\r\n0\r\n\r\n", n: 30, done: true},
		{name: "too many digits", framing: Chunked, in: "00000000000000005\r\nhello\r\n0\r\n\r\n", n: 16, status: 502},
		{name: "bare LF size line", framing: Chunked, in: "5\nhello\r\n", n: 1, status: 502},
		{name: "bare LF in ext", framing: Chunked, in: "5;a\nb\r\nhello\r\n", n: 3, status: 502},
		{name: "bare CR in size line", framing: Chunked, in: "5\rhello\r\n", n: 2, status: 502},
		// RFC 9112 7.1: BWS only before ";" of a chunk-ext.
		{name: "space after size", framing: Chunked, in: "5 \r\nhello\r\n0\r\n\r\n", n: 2, status: 502},
		{name: "tab after last-chunk size", framing: Chunked, in: "5\r\nhello\r\n0\t\r\n\r\n", n: 12, status: 502},
		{name: "space before ext", framing: Chunked, in: "5 \t;a\r\nhello\r\n0\r\n\r\n", n: 19, done: true},
		{name: "ctl in ext", framing: Chunked, in: "5;\x00\r\n", n: 2, status: 502},
		{name: "data without CRLF", framing: Chunked, in: "5\r\nhelloX\r\n", n: 8, status: 502},
		{name: "data with bare LF", framing: Chunked, in: "5\r\nhello\n0\r\n\r\n", n: 8, status: 502},
		{name: "last chunk bare LF", framing: Chunked, in: "0\n\r\n", n: 1, status: 502},
		{name: "end bare LF", framing: Chunked, in: "0\r\n\n", n: 3, status: 502},
		{name: "trailer obs-fold", framing: Chunked, in: "0\r\nA: b\r\n c\r\n\r\n", n: 9, status: 502},
		{name: "trailer space before colon", framing: Chunked, in: "0\r\nA : b\r\n\r\n", n: 4, status: 502},
		{name: "trailer bare LF", framing: Chunked, in: "0\r\nA: b\n\r\n", n: 7, status: 502},
		{name: "trailer content-length", framing: Chunked, in: "0\r\nX: 1\r\nContent-LENGTH: 5\r\n\r\n", n: 23, status: 502},
		{name: "trailer transfer-encoding", framing: Chunked, in: "0\r\ntransfer-encoding: chunked\r\n\r\n", n: 20, status: 502},
		{name: "trailer host", framing: Chunked, in: "0\r\nHost: x\r\n\r\n", n: 7, status: 502},
		{name: "trailer longer names", framing: Chunked, in: "0\r\nHosts: x\r\ntransfer-encodings: x\r\nHos: x\r\n\r\n", n: 46, done: true},
		{name: "trailer ctl", framing: Chunked, in: "0\r\nA: \x01\r\n\r\n", n: 6, status: 502},
		{name: "long size line", framing: Chunked, in: "5;" + strings.Repeat("a", MaxChunkLine) + "\r\n", n: MaxChunkLine, status: 502},
		{name: "size line at limit", framing: Chunked, in: "5;" + strings.Repeat("a", MaxChunkLine-2) + "\r\nhello\r\n0\r\n\r\n", n: MaxChunkLine + 14, done: true},
		{name: "long quoted ext", framing: Chunked, in: "5;a=\"" + strings.Repeat("x", MaxChunkLine) + "\"\r\n", n: MaxChunkLine, status: 502},
		{name: "quoted ext at limit", framing: Chunked, in: "5;a=\"" + strings.Repeat("x", MaxChunkLine-6) + "\"\r\nhello\r\n0\r\n\r\n", n: MaxChunkLine + 14, done: true},
		{name: "long trailer", framing: Chunked, in: "0\r\nA: " + strings.Repeat("a", MaxTrailer), n: 3 + MaxTrailer, status: 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			whole := feed(tt.framing, tt.length, in)
			if whole.n != tt.n || whole.done != tt.done || status(whole.err) != tt.status {
				t.Fatalf("got n=%d done=%v err=%v, want %d %v %d", whole.n, whole.done, whole.err, tt.n, tt.done, tt.status)
			}
			step := 1 + len(in)/256 // every split of short inputs, a sample of long ones
			for i := 0; i <= len(in); i += step {
				if got := feed(tt.framing, tt.length, in, i); got != whole {
					t.Fatalf("split at %d: %+v, whole %+v", i, got, whole)
				}
			}
			if len(in) < 64 {
				cuts := make([]int, len(in))
				for i := range cuts {
					cuts[i] = i
				}
				if got := feed(tt.framing, tt.length, in, cuts...); got != whole {
					t.Fatalf("byte by byte: %+v, whole %+v", got, whole)
				}
			}
		})
	}
}

func TestBodyAfterEnd(t *testing.T) {
	var b Body
	b.Reset(Chunked, 0)
	if n, done, err := b.Next([]byte("0\r\n\r\nX")); n != 5 || !done || err != nil {
		t.Fatalf("%d %v %v", n, done, err)
	}
	if n, done, err := b.Next([]byte("X")); n != 0 || !done || err != nil {
		t.Fatalf("after end: %d %v %v", n, done, err)
	}
	b.Reset(Chunked, 0)
	if _, _, err := b.Next([]byte("x")); err == nil {
		t.Fatal("no error")
	}
	if n, _, err := b.Next([]byte("0\r\n\r\n")); n != 0 || err == nil {
		t.Fatalf("error not sticky: %d %v", n, err)
	}
}

// TestBodyData: Data counts a body's data bytes, without a chunked body's
// chunk-size lines, CRLFs and trailer, however its bytes are split.
func TestBodyData(t *testing.T) {
	tests := []struct {
		framing Framing
		length  int64
		in      string
		data    int64
	}{
		{NoBody, 0, "abc", 0},
		{Length, 3, "abcdef", 3},
		{Length, 10, "abc", 3},
		{UntilClose, 0, "abcd", 4},
		{Chunked, 0, "5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\nNEXT", 15},
		{Chunked, 0, "5\r\nhel", 3},
	}
	for _, tc := range tests {
		for cut := range len(tc.in) + 1 {
			var b Body
			b.Reset(tc.framing, tc.length)
			if _, done, err := b.Next([]byte(tc.in[:cut])); err == nil && !done {
				b.Next([]byte(tc.in[cut:]))
			}
			if got := b.Data(); got != tc.data {
				t.Errorf("%v %q cut at %d: Data %d, want %d", tc.framing, tc.in, cut, got, tc.data)
			}
		}
	}
}

// spanResult sums NextSpan's spans over a body.
type spanResult struct {
	n       int    // bytes taken
	done    bool   // a span was Done
	err     error  // the error, if any
	data    string // the data pieces, reassembled
	trailer string // the trailer pieces, reassembled
	framing int    // the Skip bytes
	count   int64  // Body.Data at the end
}

// feedSpans runs b.NextSpan over in split at the given cut points, as a
// caller does: over each piece until it is all taken, the body ends or an
// error. It checks each span against the bytes it was given.
func feedSpans(t testing.TB, f Framing, length int64, in []byte, cuts ...int) spanResult {
	t.Helper()
	var b Body
	b.Reset(f, length)
	var r spanResult
	prev := 0
	for _, c := range append(cuts, len(in)) {
		if c < prev || c > len(in) {
			continue
		}
		p := in[prev:c]
		prev = c
		for {
			s, err := b.NextSpan(p)
			if s.Skip < 0 || s.Len < 0 || s.Skip+s.Len > len(p) {
				t.Fatalf("%q: span %+v of %d bytes", in, s, len(p))
			}
			if s.Len == 0 && s.Skip < len(p) && !s.Done && err == nil {
				t.Fatalf("%q: span %+v stops in framing before p's end (%d bytes)", in, s, len(p))
			}
			if s.Trailer && f != Chunked || s.Skip > 0 && f != Chunked {
				t.Fatalf("%q: span %+v of a %v body", in, s, f)
			}
			piece := string(p[s.Skip : s.Skip+s.Len])
			if s.Trailer {
				r.trailer += piece
			} else {
				r.data += piece
			}
			r.framing += s.Skip
			r.n += s.Skip + s.Len
			r.count = b.Data()
			p = p[s.Skip+s.Len:]
			if err != nil {
				r.err = err
				return r
			}
			if s.Done {
				r.done = true
				return r
			}
			if len(p) == 0 {
				break
			}
		}
	}
	return r
}

// TestBodySpans: NextSpan finds a body's data and trailer section, the
// framing checked as Next checks it: the same pieces, bytes taken, end and
// error however the body is split, and the same as Next's.
func TestBodySpans(t *testing.T) {
	tests := []struct {
		name    string
		framing Framing
		length  int64
		in      string
		n       int
		done    bool
		status  int
		data    string
		trailer string
	}{
		{name: "nobody", framing: NoBody, in: "abc", done: true},
		{name: "length", framing: Length, length: 3, in: "abcdef", n: 3, done: true, data: "abc"},
		{name: "length zero", framing: Length, in: "abc", done: true},
		{name: "length short", framing: Length, length: 10, in: "abc", n: 3, data: "abc"},
		{name: "until close", framing: UntilClose, in: "abc", n: 3, data: "abc"},
		{name: "chunked", framing: Chunked, in: "5\r\nhello\r\n0\r\n\r\nNEXT", n: 15, done: true, data: "hello"},
		{name: "chunks", framing: Chunked, in: "5\r\nhello\r\n1\r\n \r\na\r\n0123456789\r\n0\r\n\r\n", n: 36, done: true, data: "hello 0123456789"},
		{name: "data like framing", framing: Chunked, in: "5\r\n0\r\n\r\n\r\n0\r\n\r\n", n: 15, done: true, data: "0\r\n\r\n"},
		{name: "extensions", framing: Chunked, in: "5 ;a=b;c=\"d\"\r\nhello\r\n6;x\r\n world\r\n00;x\r\n\r\n", n: 42, done: true, data: "hello world"},
		{name: "trailer", framing: Chunked, in: "1\r\na\r\n0\r\nX-T: 1\r\nY:\r\n\r\nZ", n: 23, done: true, data: "a", trailer: "X-T: 1\r\nY:\r\n"},
		{name: "extensions and trailer", framing: Chunked,
			in: "3;e=1\r\nabc\r\nA;x=\"y z\"\r\n0123456789\r\n0;last\r\nT1: a b\r\nT2:\tc\r\n\r\nrest",
			n:  61, done: true, data: "abc0123456789", trailer: "T1: a b\r\nT2:\tc\r\n"},
		{name: "no data, trailer", framing: Chunked, in: "0\r\nA: \r\n\r\n", n: 10, done: true, trailer: "A: \r\n"},
		{name: "partial data", framing: Chunked, in: "5\r\nhel", n: 6, data: "hel"},
		{name: "partial trailer", framing: Chunked, in: "2\r\nhi\r\n0\r\nA: b\r\n", n: 16, data: "hi", trailer: "A: b\r\n"},
		{name: "partial final CRLF", framing: Chunked, in: "0\r\nA: b\r\n\r", n: 10, trailer: "A: b\r\n"},
		{name: "bad size", framing: Chunked, in: "5\r\nhello\r\nx\r\n", n: 10, status: 502, data: "hello"},
		{name: "data without CRLF", framing: Chunked, in: "5\r\nhelloX\r\n", n: 8, status: 502, data: "hello"},
		{name: "bad extension", framing: Chunked, in: "2\r\nhi\r\n5;\x00\r\n", n: 9, status: 502, data: "hi"},
		{name: "trailer ctl", framing: Chunked, in: "1\r\na\r\n0\r\nA: \x01\r\n\r\n", n: 12, status: 502, data: "a", trailer: "A: "},
		{name: "trailer host", framing: Chunked, in: "0\r\nX: 1\r\nHost: x\r\n\r\n", n: 13, status: 502, trailer: "X: 1\r\nHost"},
		{name: "end bare LF", framing: Chunked, in: "0\r\nA: b\r\n\n", n: 9, status: 502, trailer: "A: b\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			whole := feedSpans(t, tt.framing, tt.length, in)
			if whole.n != tt.n || whole.done != tt.done || status(whole.err) != tt.status || whole.data != tt.data || whole.trailer != tt.trailer {
				t.Fatalf("got n=%d done=%v err=%v data %q trailer %q, want %d %v %d %q %q",
					whole.n, whole.done, whole.err, whole.data, whole.trailer, tt.n, tt.done, tt.status, tt.data, tt.trailer)
			}
			if whole.framing != whole.n-len(whole.data)-len(whole.trailer) || whole.count != int64(len(whole.data)) {
				t.Fatalf("%+v: framing or Data count off", whole)
			}
			if next := feed(tt.framing, tt.length, in); next.n != whole.n || next.done != whole.done || next.err != whole.err || next.data != whole.count {
				t.Fatalf("Next: %+v, NextSpan: %+v", next, whole)
			}
			for i := 0; i <= len(in); i++ {
				if got := feedSpans(t, tt.framing, tt.length, in, i); got != whole {
					t.Fatalf("split at %d: %+v, whole %+v", i, got, whole)
				}
				for j := i; j <= len(in); j++ {
					if got := feedSpans(t, tt.framing, tt.length, in, i, j); got != whole {
						t.Fatalf("split at %d and %d: %+v, whole %+v", i, j, got, whole)
					}
				}
			}
			cuts := make([]int, len(in))
			for i := range cuts {
				cuts[i] = i
			}
			if got := feedSpans(t, tt.framing, tt.length, in, cuts...); got != whole {
				t.Fatalf("byte by byte: %+v, whole %+v", got, whole)
			}
		})
	}
}

// TestBodySpanAfterEnd: after the end NextSpan takes nothing and reports
// Done; after an error it takes nothing and reports the same error.
func TestBodySpanAfterEnd(t *testing.T) {
	var b Body
	b.Reset(Chunked, 0)
	if s, err := b.NextSpan([]byte("0\r\n\r\nX")); s != (Span{Skip: 5, Done: true}) || err != nil {
		t.Fatalf("%+v %v", s, err)
	}
	if s, err := b.NextSpan([]byte("X")); s != (Span{Done: true}) || err != nil {
		t.Fatalf("after end: %+v %v", s, err)
	}
	b.Reset(Chunked, 0)
	_, err := b.NextSpan([]byte("x"))
	if err == nil {
		t.Fatal("no error")
	}
	if s, err2 := b.NextSpan([]byte("0\r\n\r\n")); s != (Span{}) || err2 != err {
		t.Fatalf("error not sticky: %+v %v", s, err2)
	}
}

// TestBodySpanAllocs: finding a chunked body's spans, and Next over it,
// allocate nothing, errors included.
func TestBodySpanAllocs(t *testing.T) {
	in := []byte("3;e=1\r\nabc\r\nA;x=\"y z\"\r\n0123456789\r\n0;last\r\nT1: a b\r\nT2:\tc\r\n\r\n")
	bad := []byte("3\r\nabc\r\n0\r\nHost: x\r\n\r\n")
	var b Body
	spans := func(in []byte) {
		b.Reset(Chunked, 0)
		for p := in; len(p) > 0; {
			s, err := b.NextSpan(p)
			if err != nil || s.Done || s.Skip+s.Len == 0 {
				break
			}
			p = p[s.Skip+s.Len:]
		}
	}
	if a := testing.AllocsPerRun(100, func() { spans(in) }); a != 0 {
		t.Errorf("NextSpan: %v allocs", a)
	}
	if a := testing.AllocsPerRun(100, func() { spans(bad) }); a != 0 {
		t.Errorf("NextSpan, an error: %v allocs", a)
	}
	if a := testing.AllocsPerRun(100, func() { b.Reset(Chunked, 0); b.Next(in) }); a != 0 {
		t.Errorf("Next: %v allocs", a)
	}
}

// TestChunkExt: a chunk-size line's extensions are exactly RFC 9112
// 7.1.1's chunk-ext, BWS ";" BWS token [ BWS "=" BWS ( token /
// quoted-string ) ] repeated, or the body is an error at the first byte
// outside it, however the body is split. The proxy forwards the lines as
// they came, so a next hop that ends the line or the extension elsewhere
// (a CR, an LF or a ";" in a quoted-string, a bare byte after a value)
// would read another body.
func TestChunkExt(t *testing.T) {
	tests := []struct {
		line string // the chunk-size line of a 5-byte chunk, CRLF included
		at   int    // the offending byte, -1 if the line is valid
		err  error
	}{
		{"5;a\r\n", -1, nil},
		{"5 ;a=b\r\n", -1, nil},
		{"5;a=\"x;y\"\r\n", -1, nil},
		{"5;a=\"\\\"\"\r\n", -1, nil},
		{"5;a;b=c\r\n", -1, nil},
		{"5\t; \ta \t= \tb \t;c\r\n", -1, nil},
		{"5;a=\"\"\r\n", -1, nil},
		{"5;a=\"\t x\\\t\\ \\\x80\x80\xff\"\r\n", -1, nil},
		{"5;!#$%&'*+-.^_`|~09AZaz=!#$%&'*+-.^_`|~09AZaz\r\n", -1, nil},
		{"5;a=\"b\" ;c\r\n", -1, nil},
		{"5 ; a = \"x;y\\\"\\\\\" ;b\r\n", -1, nil},

		{"5;\r\n", 2, errChunkExt},
		{"5;a=\r\n", 4, errChunkExt},
		{"5;a b\r\n", 4, errChunkExt},
		{"5;a=\"x\r\n", 6, errChunkExt},
		{"5;=b\r\n", 2, errChunkExt},
		{"5;a=\"x\"y\r\n", 7, errChunkExt},
		{"5;a=b c\r\n", 6, errChunkExt},
		{"5;;a\r\n", 2, errChunkExt},
		{"5;a;\r\n", 4, errChunkExt},
		{"5; \r\n", 3, errChunkExt},
		{"5;a=b=c\r\n", 5, errChunkExt},
		{"5;a,b\r\n", 3, errChunkExt},
		{"5;a=b,c\r\n", 5, errChunkExt},
		{"5;a=\"x\"\"\r\n", 7, errChunkExt},
		{"5;a=\"x\\\r\n", 7, errChunkExt},
		{"5;a=\"x\\\"\r\n", 8, errChunkExt},
		{"5;a=\"x\ny\"\r\n", 6, errChunkExt},
		{"5;a=\"x\ry\"\r\n", 6, errChunkExt},
		{"5;a=\"\x00\"\r\n", 5, errChunkExt},
		{"5;a=\"\x7f\"\r\n", 5, errChunkExt},
		{"5;a=\"\\\x00\"\r\n", 6, errChunkExt},
		{"5;a=\"\\\n\"\r\n", 6, errChunkExt},
		{"5;\x80\r\n", 2, errChunkExt},
		{"5;a\x80\r\n", 3, errChunkExt},
		{"5;a=\x80\r\n", 4, errChunkExt},
		{"5;a=b\x80\r\n", 5, errChunkExt},
		{"5;a=\"b\"\x80\r\n", 7, errChunkExt},
		{"5;a(b)\r\n", 3, errChunkExt},
		{"5;a=b\"c\"\r\n", 5, errChunkExt},
		{"5;\"a\"\r\n", 2, errChunkExt},
		{"5;a\n\r\n", 3, errChunkExt},
		{"5;a=b\n\r\n", 5, errChunkExt},
		{"5;a=\"b\"\n\r\n", 7, errChunkExt},
		// BWS only before ";" or "=", not before the CR.
		{"5;a \r\n", 4, errChunkBWS},
		{"5;a=b\t\r\n", 6, errChunkBWS},
		{"5;a=\"b\" \r\n", 8, errChunkBWS},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.line), func(t *testing.T) {
			in := []byte(tt.line + "hello\r\n0" + tt.line[1:] + "\r\n") // the last chunk with the same extensions
			n, done, err, data := len(in), true, error(nil), "hello"
			if tt.at >= 0 {
				n, done, err, data = tt.at, false, tt.err, ""
			}
			whole := feedSpans(t, Chunked, 0, in)
			if whole.n != n || whole.done != done || whole.err != err || whole.data != data {
				t.Fatalf("%q: n=%d done=%v err=%v data %q, want %d %v %v %q", in, whole.n, whole.done, whole.err, whole.data, n, done, err, data)
			}
			if next := feed(Chunked, 0, in); next.n != n || next.done != done || next.err != err {
				t.Fatalf("Next: %+v", next)
			}
			cuts := make([]int, len(in))
			for i := range cuts {
				cuts[i] = i
				if got := feedSpans(t, Chunked, 0, in, i); got != whole {
					t.Fatalf("split at %d: %+v, whole %+v", i, got, whole)
				}
			}
			if got := feedSpans(t, Chunked, 0, in, cuts...); got != whole {
				t.Fatalf("byte by byte: %+v, whole %+v", got, whole)
			}
		})
	}
}
