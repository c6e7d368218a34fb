package h2

import (
	"bytes"
	"testing"
)

// indexedLiteral is a literal with incremental indexing and a new name
// (RFC 7541 6.2.1) whose value is n bytes of 'v', n from 127 to 16510.
func indexedLiteral(name string, n int) []byte {
	b := append([]byte{0x40, byte(len(name))}, name...)
	n -= 127
	b = append(b, 0x7f, byte(n&0x7f)|0x80, byte(n>>7))
	return append(b, bytes.Repeat([]byte{'v'}, n+127)...)
}

// A request's header block without the dynamic table: GET, http, /, and
// :authority x as a literal without indexing.
var plainRequest = []byte{0x82, 0x86, 0x84, 0x01, 0x01, 'x'}

// TestServerHeaderTableAboveDefault: a HeaderTableSize above 4096 binds
// the peer's encoder only once our SETTINGS is acknowledged (RFC 9113
// 6.5.3, RFC 7541 4.2), as one below does: until then the decoder's table
// is the RFC's 4096 bytes, so a size update above it, or an index of an
// entry a 4096-byte table has evicted, is a COMPRESSION_ERROR, and a peer
// that keeps to 4096 never makes the decoder hold more. After the ack the
// peer may raise its table with a size update, to HeaderTableSize at most.
func TestServerHeaderTableAboveDefault(t *testing.T) {
	// Three entries of 2035 bytes: a 4096-byte table holds the last two,
	// an 8192-byte one all three; 0xc0 indexes the oldest (61 + 3).
	three := cat(indexedLiteral("x-a", 2000), indexedLiteral("x-b", 2000), indexedLiteral("x-c", 2000), []byte{0xc0})
	to8192 := []byte{0x3f, 0xe1, 0x3f}
	to8193 := []byte{0x3f, 0xe2, 0x3f}
	for _, tc := range []struct {
		name  string
		ack   bool
		block []byte
		code  ErrCode
	}{
		{"update above 4096 before the ack", false, cat(to8192, plainRequest), CompressionError},
		{"index evicted from 4096 before the ack", false, cat(plainRequest, three), CompressionError},
		{"no update after the ack", true, cat(plainRequest, three), CompressionError},
		{"update after the ack", true, cat(to8192, plainRequest, three), noConnErr},
		{"update above HeaderTableSize after the ack", true, cat(to8193, plainRequest), CompressionError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			s, _ := open(t, h, &Config{HeaderTableSize: 8192})
			if tc.ack {
				if code := feed(t, s, frame(FrameSettings, FlagAck, 0)); code != noConnErr {
					t.Fatalf("SETTINGS ack: %v", code)
				}
			}
			code := feed(t, s, frame(FrameHeaders, FlagEndHeaders|FlagEndStream, 1, tc.block...))
			if code != tc.code {
				t.Fatalf("block of %d bytes: %v, want %v (%d events)", len(tc.block), code, tc.code, len(h.events))
			}
			if code == noConnErr && len(h.events) != 1 {
				t.Fatalf("events %q, want the request", h.events)
			}
		})
	}
}

// TestServerHeaderTableSizeBounded: a HeaderTableSize above
// MaxHeaderTableSize is taken as MaxHeaderTableSize, advertised and
// enforced, so that no configuration lets a peer make the decoder hold
// more (2^31 would have let it ask for 2 GiB of table).
func TestServerHeaderTableSizeBounded(t *testing.T) {
	cfg := &Config{HeaderTableSize: 1 << 31}
	f, _, err := ParseFrame(NewServer(&recorder{}, cfg).Pending(), MinMaxFrameSize)
	if err != nil || f.Type != FrameSettings || f.Setting(0) != (Setting{SettingHeaderTableSize, MaxHeaderTableSize}) {
		t.Fatalf("first frame %v %v, first setting %v, want HEADER_TABLE_SIZE %d", f.Type, err, f.Setting(0), MaxHeaderTableSize)
	}
	for _, tc := range []struct {
		name   string
		update []byte
		code   ErrCode
	}{
		{"update to the bound", []byte{0x3f, 0xe1, 0xff, 0x03}, noConnErr},
		{"update past the bound", []byte{0x3f, 0xe2, 0xff, 0x03}, CompressionError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := open(t, &recorder{}, cfg)
			in := cat(frame(FrameSettings, FlagAck, 0), frame(FrameHeaders, FlagEndHeaders|FlagEndStream, 1, cat(tc.update, plainRequest)...))
			if code := feed(t, s, in); code != tc.code {
				t.Fatalf("size update %x after the ack: %v, want %v", tc.update, code, tc.code)
			}
		})
	}
}
