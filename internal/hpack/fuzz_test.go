package hpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzDecode decodes any bytes as two blocks on one connection (split at
// the first byte's value) with the table size and list bound the fuzzer
// picks: Decode must not panic, must return fields or an error, and must
// keep the table within its size and the scratch within the block's.
func FuzzDecode(f *testing.F) {
	for _, ex := range rfcExamples {
		var all []byte
		for _, s := range ex.steps {
			all = append(all, dehex(s.block)...)
		}
		f.Add(uint16(ex.tableSize), uint16(0), byte(len(dehex(ex.steps[0].block))), all)
	}
	f.Add(uint16(4096), uint16(100), byte(0), dehex("3fe101 4001 6101 62 be"))
	f.Add(uint16(70), uint16(0), byte(5), dehex("4001 6101 62 7e01 65 7f00 0166"))
	f.Add(uint16(4096), uint16(0), byte(0), dehex("00 01 61 84 ffff ffff"))
	f.Fuzz(func(t *testing.T, tableSize, maxList uint16, split byte, in []byte) {
		d := NewDecoder(uint32(tableSize), uint32(maxList))
		cut := min(int(split), len(in))
		for _, blk := range [][]byte{in[:cut], in[cut:]} {
			var list uint64
			err := d.Decode(blk, func(f Field) error {
				list += entrySize(len(f.Name), len(f.Value))
				return nil
			})
			if maxList > 0 && list > uint64(maxList) {
				t.Fatalf("emitted a list of %d, the bound is %d", list, maxList)
			}
			if d.t.used > uint64(d.t.limit) || d.t.limit > d.max {
				t.Fatalf("table size %d, limit %d, max %d", d.t.used, d.t.limit, d.max)
			}
			// The limit may have been higher earlier: bound by the maximum.
			if c := cap(d.t.buf); c > 2*int(tableSize) {
				t.Fatalf("table buffer capacity %d for a maximum of %d", c, tableSize)
			}
			if c := cap(d.t.ents); c > int(tableSize)/8+4 {
				t.Fatalf("table index capacity %d for a maximum of %d", c, tableSize)
			}
			// Scratch holds the last field's strings, from this block or the last.
			if c := len(d.nbuf) + len(d.vbuf); c > 2*len(in)+int(tableSize) {
				t.Fatalf("scratch %d bytes for blocks of %d", c, len(in))
			}
			if err != nil && !errors.Is(err, ErrListTooLarge) {
				break // the connection would end here
			}
		}
	})
}

// names the round-trip fuzzer picks from, to hit the static table and the
// encoder's special cases.
var fuzzNames = []string{":method", ":path", ":status", "cookie", "authorization", "set-cookie", "x-a", "accept-encoding"}

// FuzzRoundTrip encodes the fields and table size changes the fuzzer's
// bytes describe, over several blocks of one connection, and decodes them:
// the decoder must give back each field (never-indexed where the encoder
// said so) and hold the same dynamic table as the encoder after each block.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("\x02\x03\x04GET\x05\x01\x02b\x01\x03\x00\x02\x00\x01\x02\x02\x01x"))
	f.Add([]byte("\x0a\x40\x01\x09abc\x00\x00\x10\x01\x06\x0b\x05\x14hello world hello abc\x01\x06\x0b\x05"))
	f.Add([]byte("\x00\x00\x00\x00\x10\x00\x03\x02\x01xy\x01\x03\x02\x01xy"))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, d := NewEncoder(), NewDecoder(4096, 0)
		var (
			fields []Field
			blk    []byte
		)
		flush := func() {
			blk = e.StartBlock(blk[:0])
			for _, f := range fields {
				blk = e.AppendField(blk, f)
			}
			i := 0
			err := d.Decode(blk, func(g Field) error {
				if i >= len(fields) {
					t.Fatalf("block %x: more fields than %d", blk, len(fields))
				}
				want := fields[i]
				want.Sensitive = want.Sensitive || neverIndex(want.Name, want.Value)
				if !bytes.Equal(g.Name, want.Name) || !bytes.Equal(g.Value, want.Value) || g.Sensitive != want.Sensitive {
					t.Fatalf("block %x field %d: %q, want %q", blk, i, fmtField(g), fmtField(want))
				}
				i++
				return nil
			})
			if err != nil || i != len(fields) {
				t.Fatalf("block %x: %d of %d fields, %v", blk, i, len(fields), err)
			}
			et, es := tableState(&e.t)
			dt, ds := tableState(&d.t)
			if !eqList(et, dt) || es != ds {
				t.Fatalf("encoder table %q (%d), decoder's %q (%d)", et, es, dt, ds)
			}
			fields = fields[:0]
		}
		next := func(n int) []byte {
			n = min(n, len(in))
			b := in[:n]
			in = in[n:]
			return b
		}
		for len(in) > 0 {
			op := next(1)[0]
			switch op % 8 {
			case 0: // the peer's SETTINGS_HEADER_TABLE_SIZE, acknowledged
				var s [2]byte
				copy(s[:], next(2))
				n := uint32(binary.BigEndian.Uint16(s[:])) % 5000
				e.SetMaxTableSize(n)
				d.SetMaxTableSize(n)
			case 1:
				flush()
			default:
				var name []byte
				if op&0x80 != 0 {
					name = []byte(fuzzNames[int(op>>3&7)])
				} else {
					name = bytes.Clone(next(int(op >> 3 & 15)))
				}
				var l [1]byte
				copy(l[:], next(1))
				value := bytes.Clone(next(int(l[0])))
				fields = append(fields, Field{Name: name, Value: value, Sensitive: op&4 != 0 && op&2 != 0})
			}
		}
		flush()
	})
}
