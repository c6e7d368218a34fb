package hpack

import (
	"bytes"
	"errors"
	"testing"
)

// TestHuffmanCodes checks codes built from the lengths against codes listed
// in RFC 7541 Appendix B, and that the lengths make a complete prefix code
// (Kraft sum exactly 1).
func TestHuffmanCodes(t *testing.T) {
	tests := []struct {
		sym  int
		code uint32
		len  uint8
	}{
		{0, 0x1ff8, 13},
		{' ', 0x14, 6},
		{'0', 0x0, 5},
		{'a', 0x3, 5},
		{'e', 0x5, 5},
		{'A', 0x21, 6},
		{'{', 0x7ffe, 15},
		{'\n', 0x3ffffffc, 30},
		{0x80, 0xfffe6, 20},
		{0xff, 0x3ffffee, 26},
		{eos, 0x3fffffff, 30},
	}
	for _, tt := range tests {
		if huffCode[tt.sym] != tt.code || huffLen[tt.sym] != tt.len {
			t.Errorf("symbol %d: code %#x/%d, want %#x/%d", tt.sym, huffCode[tt.sym], huffLen[tt.sym], tt.code, tt.len)
		}
	}
	var kraft uint64
	for _, l := range huffLen {
		kraft += 1 << (maxCodeLen - l)
	}
	if kraft != 1<<maxCodeLen {
		t.Errorf("Kraft sum %d/2^30, want 1", kraft)
	}
}

func TestHuffmanRoundTrip(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, s := range [][]byte{nil, []byte("www.example.com"), []byte("no-cache"), all, bytes.Repeat([]byte{0xfe, 'a'}, 100)} {
		enc := huffAppend(nil, s)
		if len(enc) != huffEncodedLen(s) {
			t.Errorf("%q: encoded %d bytes, huffEncodedLen says %d", s, len(enc), huffEncodedLen(s))
		}
		dec, err := huffDecode(nil, enc)
		if err != nil || !bytes.Equal(dec, s) {
			t.Errorf("%q: decoded %q, %v", s, dec, err)
		}
	}
	// RFC 7541 C.4.1.
	if got := huffAppend(nil, []byte("www.example.com")); !bytes.Equal(got, dehex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")) {
		t.Errorf("www.example.com: %x", got)
	}
}

func TestHuffmanDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  error
	}{
		{"EOS alone", "ffff fffc", errHuffEOS},             // 30 ones, then 00
		{"EOS after a symbol", "1fff ffff ff", errHuffEOS}, // 'a', then 30+ ones
		{"padding of 8 ones", "ff", errHuffPadding},
		{"padding of 7 zeros", "00", errHuffPadding}, // '0' (00000) then 000
		{"padding mixed", "1a", errHuffPadding},      // 'a' then 010
		{"a code cut short", "fe", errHuffPadding},   // 11111110: part of a longer code
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := huffDecode(nil, dehex(tt.in))
			if !errors.Is(err, tt.err) {
				t.Fatalf("huffDecode(%s) = %v, want %v", tt.in, err, tt.err)
			}
		})
	}
	// Padding of 1 to 7 ones is accepted.
	for _, in := range []string{"1f", "07", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"} {
		if _, err := huffDecode(nil, dehex(in)); err != nil {
			t.Errorf("huffDecode(%s): %v", in, err)
		}
	}
}
