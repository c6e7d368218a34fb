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

// modelTable is a dynamic table as RFC 7541 describes it (2.3.2, 4.1, 4.3,
// 4.4), written as plainly as can be: FuzzRoundTrip holds both ends'
// tables, which share package hpack's table type, to it.
type modelTable struct {
	ents  []hf     // newest first
	sizes []uint64 // their sizes (4.1)
	size  uint64
	limit uint64
}

// evictTo evicts the oldest entries until the size is at most n.
func (m *modelTable) evictTo(n uint64) {
	for m.size > n {
		last := len(m.ents) - 1
		m.size -= m.sizes[last]
		m.ents, m.sizes = m.ents[:last], m.sizes[:last]
	}
}

func (m *modelTable) setLimit(n uint64) { m.limit = n; m.evictTo(n) }

// add inserts name: value, first evicting what RFC 7541 4.4 says.
func (m *modelTable) add(name, value []byte) {
	s := entrySize(len(name), len(value))
	if s > m.limit {
		m.evictTo(0)
		return
	}
	m.evictTo(m.limit - s)
	m.ents = append([]hf{hf(string(name) + ": " + string(value))}, m.ents...)
	m.sizes = append([]uint64{s}, m.sizes...)
	m.size += s
}

// FuzzRoundTrip encodes the fields and table size changes the fuzzer's
// bytes describe, over several blocks of one connection, and decodes them:
// the decoder must give back each field (never-indexed where the encoder
// said so), and the encoder and decoder must hold the dynamic table that
// modelTable builds from the block (the size updates the encoder wrote
// and the fields it sent with incremental indexing) after each block.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("\x02\x03\x04GET\x05\x01\x02b\x01\x03\x00\x02\x00\x01\x02\x02\x01x"))
	f.Add([]byte("\x0a\x40\x01\x09abc\x00\x00\x10\x01\x06\x0b\x05\x14hello world hello abc\x01\x06\x0b\x05"))
	f.Add([]byte("\x00\x00\x00\x00\x10\x00\x03\x02\x01xy\x01\x03\x02\x01xy"))
	// A 100-byte table and 16 fields of 43 to 49 bytes in four blocks:
	// each insertion evicts, and the table's bytes are moved to the front.
	f.Add([]byte("\x00\x00d\x1ax-0\x08aaaaaaaa\x1ax-1\x09bbbbbbbbb\x1ax-2\x0acccccccccc\x1ax-3\x0bddddddddddd\x01" +
		"\x1ax-0\x09eeeeeeeee\x1ax-1\x0affffffffff\x1ax-2\x0bggggggggggg\x1ax-3\x0chhhhhhhhhhhh\x01" +
		"\x1ax-0\x0aiiiiiiiiii\x1ax-1\x0bjjjjjjjjjjj\x1ax-2\x0ckkkkkkkkkkkk\x1ax-3\x0dlllllllllllll\x01" +
		"\x1ax-0\x0bmmmmmmmmmmm\x1ax-1\x0cnnnnnnnnnnnn\x1ax-2\x0dooooooooooooo\x1ax-3\x0epppppppppppppp\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, d := NewEncoder(), NewDecoder(4096, 0)
		m := modelTable{limit: encoderMaxTable}
		var (
			fields []Field
			blk    []byte
		)
		flush := func() {
			blk = e.StartBlock(blk[:0])
			for p := blk; len(p) > 0; {
				v, n, err := readInt(p, 5)
				if err != nil || p[0]&0xe0 != 0x20 {
					t.Fatalf("StartBlock wrote %x: %v", blk, err)
				}
				m.setLimit(v)
				p = p[n:]
			}
			for _, f := range fields {
				start := len(blk)
				blk = e.AppendField(blk, f)
				if blk[start]&0xc0 == 0x40 { // literal with incremental indexing
					m.add(f.Name, f.Value)
				}
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
			if !eqList(dt, m.ents) || ds != m.size || uint64(d.t.limit) != m.limit {
				t.Fatalf("block %x: tables %q (%d, limit %d), RFC 7541's %q (%d, limit %d)", blk, dt, ds, d.t.limit, m.ents, m.size, m.limit)
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
