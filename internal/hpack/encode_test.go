package hpack

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestAppendInt(t *testing.T) {
	tests := []struct {
		n    uint
		v    uint64
		want string
	}{
		{5, 10, "0a"},                  // RFC 7541 C.1.1
		{5, 1337, "1f9a0a"},            // C.1.2
		{8, 42, "2a"},                  // C.1.3
		{7, 127, "7f00"},               // exactly the prefix
		{4, 1<<32 - 1, "0ff0ffffff0f"}, // the largest the decoder takes
	}
	for _, tt := range tests {
		got := appendInt(nil, 0, tt.n, tt.v)
		if !bytes.Equal(got, dehex(tt.want)) {
			t.Errorf("appendInt(%d, %d) = %x, want %s", tt.n, tt.v, got, tt.want)
		}
		v, n, err := readInt(got, tt.n)
		if err != nil || v != tt.v || n != len(got) {
			t.Errorf("readInt(%x) = %d, %d, %v", got, v, n, err)
		}
	}
}

// TestEncodeRepresentations checks the representation the encoder picks for
// one field on a fresh table.
func TestEncodeRepresentations(t *testing.T) {
	tests := []struct {
		name  string
		f     hf
		want  string // the first byte or bytes of the representation
		added bool   // entered into the dynamic table
	}{
		{"static exact", ":method: GET", "82", false},
		{"static exact, second of a name", ":status: 404", "8d", false},
		{"static name", ":authority: x.y", "41", true},
		{"static name, not indexed", ":path: /a/b", "04", false},
		{"new name", "x-a: b", "40", true},
		{"sensitive", "x-a:: b", "10", false},
		{"sensitive static exact is a literal", ":method:: GET", "12", false},
		{"authorization", "authorization: Bearer abcdefghijklmnopqrstuvwxyz", "1f08", false},
		{"short cookie", "cookie: a=b", "1f11", false},
		{"long cookie", "cookie: session=0123456789abcdef", "60", true},
		{"set-cookie", "set-cookie: a=b", "0f28", false},
		{"too large for 3/4 of the table", hf("x-big: " + strings.Repeat("v", 3072)), "00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEncoder()
			blk := e.AppendField(e.StartBlock(nil), tt.f.field())
			if want := dehex(tt.want); !bytes.HasPrefix(blk, want) {
				t.Fatalf("%x, want a prefix %x", blk, want)
			}
			if (e.t.len() == 1) != tt.added {
				t.Fatalf("table has %d entries, want added %v", e.t.len(), tt.added)
			}
			got, err := decodeAll(NewDecoder(4096, 0), blk)
			if err != nil || len(got) != 1 || got[0] != fmtField(tt.f.field()) && !neverIndex(tt.f.field().Name, tt.f.field().Value) {
				t.Fatalf("decoded %q, %v", got, err)
			}
			// The second time, an added field is one byte.
			if tt.added {
				if b := e.AppendField(nil, tt.f.field()); !bytes.Equal(b, []byte{0x80 | 62}) {
					t.Fatalf("again: %x, want be", b)
				}
			}
		})
	}
}

// TestEncoderSizeUpdates checks the updates StartBlock emits after
// SetMaxTableSize (RFC 7541 4.2, 6.3) and that a decoder with the same
// settings takes them.
func TestEncoderSizeUpdates(t *testing.T) {
	tests := []struct {
		name  string
		sizes []uint32
		want  string
		limit uint32
	}{
		{"none", nil, "", 4096},
		{"same size", []uint32{4096}, "", 4096},
		{"above the cap", []uint32{65536}, "", 4096},
		{"lower", []uint32{256}, "3fe101", 256},
		{"zero", []uint32{0}, "20", 0},
		{"lower then back", []uint32{0, 4096}, "20 3fe11f", 4096},
		{"lowest then final", []uint32{100, 10, 200}, "2a 3fa901", 200},
		{"final is lowest", []uint32{200, 100}, "3f45", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEncoder()
			d := NewDecoder(4096, 0)
			blk := e.AppendField(e.StartBlock(nil), hf("x-a: b").field())
			if _, err := decodeAll(d, blk); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.sizes {
				e.SetMaxTableSize(s)
				d.SetMaxTableSize(s)
			}
			blk = e.StartBlock(nil)
			if !bytes.Equal(blk, dehex(tt.want)) {
				t.Fatalf("StartBlock = %x, want %s", blk, tt.want)
			}
			if e.t.limit != tt.limit {
				t.Fatalf("limit %d, want %d", e.t.limit, tt.limit)
			}
			blk = e.AppendField(blk, hf("x-a: b").field())
			if _, err := decodeAll(d, blk); err != nil {
				t.Fatalf("decoding %x: %v", blk, err)
			}
			et, _ := tableState(&e.t)
			dt, _ := tableState(&d.t)
			if !eqList(et, dt) {
				t.Fatalf("encoder table %q, decoder's %q", et, dt)
			}
			if blk := e.StartBlock(nil); len(blk) != 0 {
				t.Fatalf("second StartBlock = %x, want nothing", blk)
			}
		})
	}
}

func TestDecodeListLimit(t *testing.T) {
	e := NewEncoder()
	var blk []byte
	for _, f := range []hf{":method: GET", "x-a: 0123456789", "x-b: 0123456789", "x-c: c"} {
		blk = e.AppendField(blk, f.field())
	}
	// 7+3+32 + 3+10+32 = 87; the third field makes 132.
	d := NewDecoder(4096, 100)
	got, err := decodeAll(d, blk)
	if !errors.Is(err, ErrListTooLarge) || len(got) != 2 {
		t.Fatalf("got %q, %v; want 2 fields and ErrListTooLarge", got, err)
	}
	// The table is in step: all three literals were added.
	if d.t.len() != 3 {
		t.Fatalf("decoder table has %d entries, want 3", d.t.len())
	}
	got, err = decodeAll(d, e.AppendField(nil, hf("x-c: c").field()))
	if err != nil || len(got) != 1 || got[0] != "x-c: c" {
		t.Fatalf("next block: %q, %v", got, err)
	}
}

func TestDecodeEmitError(t *testing.T) {
	e := NewEncoder()
	var blk []byte
	for _, f := range []hf{"x-a: a", "X-Bad: b", "x-c: c"} {
		blk = e.AppendField(blk, f.field())
	}
	d := NewDecoder(4096, 0)
	stop := errors.New("uppercase")
	n := 0
	err := d.Decode(blk, func(f Field) error {
		n++
		if bytes.ContainsAny(f.Name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("Decode = %v after %d calls, want %v after 2", err, n, stop)
	}
	if d.t.len() != 3 {
		t.Fatalf("decoder table has %d entries, want 3", d.t.len())
	}
	// A malformed block after the emit error is still a compression error.
	err = d.Decode(append(blk[:len(blk):len(blk)], 0x80), func(Field) error { return stop })
	if !errors.Is(err, errIndexZero) {
		t.Fatalf("Decode = %v, want %v", err, errIndexZero)
	}
}

// requestBlock and responseBlock are the benchmarks' and the allocation
// tests' fields: a browser-like GET and a gRPC response.
var (
	requestFields = []Field{
		hf(":method: GET").field(),
		hf(":scheme: https").field(),
		hf(":authority: www.example.com").field(),
		hf(":path: /static/js/app.4f3e2a1b.js?v=12").field(),
		hf("user-agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0").field(),
		hf("accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8").field(),
		hf("accept-encoding: gzip, deflate, br, zstd").field(),
		hf("cookie: sessionid=3f2a9c0d8e7b6a5f4e3d2c1b0a998877; theme=dark; lang=en").field(),
	}
	responseFields = []Field{
		hf(":status: 200").field(),
		hf("content-type: application/grpc").field(),
		hf("grpc-encoding: identity").field(),
		hf("grpc-accept-encoding: gzip").field(),
		hf("date: Tue, 01 Dec 2026 19:00:00 GMT").field(),
	}
)

var blockCases = []struct {
	name   string
	fields []Field
}{{"request", requestFields}, {"response", responseFields}}

func encodeBlock(e *Encoder, dst []byte, fields []Field) []byte {
	dst = e.StartBlock(dst)
	for _, f := range fields {
		dst = e.AppendField(dst, f)
	}
	return dst
}

func TestZeroAllocs(t *testing.T) {
	for _, tc := range blockCases {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEncoder()
			first := encodeBlock(e, nil, tc.fields) // fills the dynamic table
			dst := make([]byte, 0, 1024)
			var blk []byte
			if n := testing.AllocsPerRun(100, func() { blk = encodeBlock(e, dst[:0], tc.fields) }); n != 0 {
				t.Errorf("encoding: %v allocs, want 0", n)
			}
			// The literal block (first) and the indexed one (blk), alternately:
			// each adds entries, so the table evicts and reclaims its space.
			d := NewDecoder(4096, 0)
			count := 0
			emit := func(Field) error { count++; return nil }
			if err := d.Decode(first, emit); err != nil {
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(100, func() {
				if err := d.Decode(blk, emit); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("decoding: %v allocs, want 0", n)
			}
			d2 := NewDecoder(4096, 0)
			for range 200 { // reach the steady state of buf and ents
				if err := d2.Decode(first, emit); err != nil {
					t.Fatal(err)
				}
			}
			if n := testing.AllocsPerRun(100, func() {
				if err := d2.Decode(first, emit); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("decoding literals: %v allocs, want 0", n)
			}
			if cap(d2.t.buf) > 2*4096 {
				t.Errorf("table buffer capacity %d, want at most twice the table size", cap(d2.t.buf))
			}
		})
	}
}

// BenchmarkDecode decodes a block as first sent (literals entering the
// table) and as sent again (indexed fields).
func BenchmarkDecode(b *testing.B) {
	for _, tc := range blockCases {
		e := NewEncoder()
		first := encodeBlock(e, nil, tc.fields)
		next := encodeBlock(e, nil, tc.fields)
		emit := func(Field) error { return nil }
		for _, v := range []struct {
			name         string
			prime, block []byte
		}{{"first", nil, first}, {"indexed", first, next}} {
			b.Run(tc.name+"/"+v.name, func(b *testing.B) {
				d := NewDecoder(4096, 0)
				if err := d.Decode(v.prime, emit); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(v.block)))
				for b.Loop() {
					if err := d.Decode(v.block, emit); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, tc := range blockCases {
		b.Run(tc.name, func(b *testing.B) {
			e := NewEncoder()
			dst := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				dst = encodeBlock(e, dst[:0], tc.fields)
			}
		})
	}
}

// TestDecodeListFlood: a block whose literals with incremental indexing
// copy far more than maxList into the table (here two bytes on the wire per
// field naming a 3,900-byte dynamic entry, which each copies again) ends
// the connection instead of being decoded to its end: the work a block
// costs stays bounded by the limit, not by how much a few bytes expand to.
func TestDecodeListFlood(t *testing.T) {
	// A literal with incremental indexing of a new 3,900-byte name (the
	// encoder would not index it: over 3/4 of the table), then literals
	// with incremental indexing naming index 62 (the big entry) with an
	// empty value: 0x7e 0x00, two bytes per 3,932-byte field.
	big := strings.Repeat("n", 3900)
	first := appendInt([]byte{0x40}, 0, 7, uint64(len(big)))
	first = appendInt(append(first, big...), 0, 7, 1)
	first = append(first, 'v')
	blk := bytes.Clone(first)
	for range 2000 {
		blk = append(blk, 0x7e, 0x00)
	}
	d := NewDecoder(4096, 1<<14)
	n := 0
	err := d.Decode(blk, func(Field) error { n++; return nil })
	if !errors.Is(err, errListFlood) {
		t.Fatalf("Decode = %v after %d fields, want errListFlood", err, n)
	}
	// Past maxList but within the flood bound: the block is decoded and the
	// table kept in step (ErrListTooLarge, the connection may go on).
	blk = bytes.Clone(first)
	for range 8 {
		blk = append(blk, 0x7e, 0x00)
	}
	d = NewDecoder(4096, 1<<14)
	if err := d.Decode(blk, func(Field) error { return nil }); !errors.Is(err, ErrListTooLarge) {
		t.Fatalf("Decode = %v, want ErrListTooLarge", err)
	}
}

// TestDecodeScratchNotRetained decodes one block whose Huffman-coded name
// and value are 10 KB each: the decoder's scratch grows to hold them for
// the call, and is dropped when Decode returns, not kept as long as the
// connection is open (internal/h2 drops its own header buffers past 4 KiB
// the same way). A block of small strings keeps its scratch.
func TestDecodeScratchNotRetained(t *testing.T) {
	big := []byte(strings.Repeat("a", 10<<10))
	e, d := NewEncoder(), NewDecoder(4096, 0)
	block := e.AppendField(e.StartBlock(nil), Field{Name: big, Value: big, Sensitive: true})
	n := 0
	if err := d.Decode(block, func(f Field) error {
		n++
		if !bytes.Equal(f.Name, big) || !bytes.Equal(f.Value, big) {
			t.Errorf("decoded a %d-byte name and a %d-byte value, want the 10 KB strings", len(f.Name), len(f.Value))
		}
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("Decode: %v, %d fields", err, n)
	}
	if c := cap(d.nbuf) + cap(d.vbuf); c > 2*keepScratch {
		t.Errorf("decoder keeps %d bytes of scratch after a block of two 10 KB strings, want at most %d", c, 2*keepScratch)
	}
	small := e.AppendField(e.StartBlock(nil), Field{Name: []byte("x-small"), Value: []byte("value"), Sensitive: true})
	if err := d.Decode(small, func(Field) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if cap(d.vbuf) == 0 {
		t.Error("a block of small strings left no scratch: small blocks would allocate")
	}
}
