package hpack

import "hash/maphash"

// encoderMaxTable is the most dynamic table the encoder uses, whatever the
// peer allows: RFC 9113's initial SETTINGS_HEADER_TABLE_SIZE.
const encoderMaxTable = 4096

// Encoder encodes the header blocks of one connection, in order. It is used
// by one goroutine at a time (the connection's).
type Encoder struct {
	t table
	// A size change waiting for the next block: the least and the last
	// size set since the previous block (RFC 7541 4.2).
	pending           bool
	minSize, lastSize uint32
}

var seed = maphash.MakeSeed()

// NewEncoder returns an encoder whose dynamic table starts at the RFC's
// 4096 bytes.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.t.limit = encoderMaxTable
	return e
}

// SetMaxTableSize applies the peer's SETTINGS_HEADER_TABLE_SIZE n: the
// encoder uses at most min(n, 4096) and signals the change with the size
// update(s) RFC 7541 4.2 and 6.3 require at the start of the next block
// (the least size set since the previous block, then the last, or just one
// when they are equal; none when the table keeps its size).
func (e *Encoder) SetMaxTableSize(n uint32) {
	n = min(n, encoderMaxTable)
	if !e.pending {
		e.pending, e.minSize = true, n
	}
	e.minSize = min(e.minSize, n)
	e.lastSize = n
}

// StartBlock begins a header block: it appends any pending size update to
// dst. Call it before the block's first AppendField.
func (e *Encoder) StartBlock(dst []byte) []byte {
	if !e.pending {
		return dst
	}
	e.pending = false
	if e.minSize < e.lastSize {
		dst = appendInt(dst, 0x20, 5, uint64(e.minSize))
		e.t.setLimit(e.minSize)
	}
	if e.lastSize != e.t.limit {
		dst = appendInt(dst, 0x20, 5, uint64(e.lastSize))
		e.t.setLimit(e.lastSize)
	}
	return dst
}

// AppendField appends the representation of f to dst:
//   - an indexed field when name and value are in the static or dynamic
//     table (not for a never-indexed field);
//   - else a literal, naming the name by index when it is in a table
//     (static preferred), never indexed for f.Sensitive, "authorization",
//     and "cookie" values shorter than 20 bytes (as nghttp2 does: short
//     cookies are guessable), without indexing for fields whose values
//     change per message (see noIndex) or whose entry would take more than
//     3/4 of the table, and with incremental indexing otherwise;
//   - strings Huffman-coded when that is strictly shorter.
func (e *Encoder) AppendField(dst []byte, f Field) []byte {
	never := f.Sensitive || neverIndex(f.Name, f.Value)
	idx, exact := staticSearch(f.Name, f.Value, !never)
	var hn, h uint64
	if !exact {
		hn = maphash.Bytes(seed, f.Name)
		h = hn ^ maphash.Bytes(seed, f.Value)*0x9e3779b97f4a7c15
		if di, dexact := e.search(f.Name, f.Value, hn, h, !never); dexact || (idx == 0 && di != 0) {
			idx, exact = di, dexact
		}
	}
	if exact {
		return appendInt(dst, 0x80, 7, uint64(idx))
	}
	index := !never && !noIndex(f.Name) &&
		entrySize(len(f.Name), len(f.Value)) <= uint64(e.t.limit)*3/4
	switch {
	case index:
		dst = appendInt(dst, 0x40, 6, uint64(idx))
	case never:
		dst = appendInt(dst, 0x10, 4, uint64(idx))
	default:
		dst = appendInt(dst, 0, 4, uint64(idx))
	}
	if idx == 0 {
		dst = appendString(dst, f.Name)
	}
	dst = appendString(dst, f.Value)
	if index {
		e.t.add(f.Name, f.Value, hn, h)
	}
	return dst
}

// search looks name+value (match) or name up in the dynamic table, newest
// first, returning its index in the combined index space, or 0.
func (e *Encoder) search(name, value []byte, hn, h uint64, match bool) (idx int, exact bool) {
	n := e.t.len()
	for i := 1; i <= n; i++ {
		ent := e.t.at(i)
		if ent.hn != hn {
			continue
		}
		en, ev := e.t.field(ent)
		if string(en) != string(name) {
			continue
		}
		if match && ent.h == h && string(ev) == string(value) {
			return staticLen + i, true
		}
		if idx == 0 {
			idx = staticLen + i
		}
	}
	return idx, false
}

// neverIndex reports the fields always sent never-indexed.
func neverIndex(name, value []byte) bool {
	switch string(name) {
	case "authorization":
		return true
	case "cookie":
		return len(value) < 20
	}
	return false
}

// noIndex reports the fields whose values change from message to message,
// so an entry would only evict others (the list nghttp2 keeps).
func noIndex(name []byte) bool {
	switch string(name) {
	case ":path", "age", "content-length", "etag", "if-modified-since",
		"if-none-match", "location", "set-cookie":
		return true
	}
	return false
}
