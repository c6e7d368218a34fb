package hpack

// Decoder decodes the header blocks of one connection, in order. It is used
// by one goroutine at a time (the connection's).
type Decoder struct {
	t          table
	max        uint32 // the maximum a size update may set (our SETTINGS)
	maxList    uint64
	needUpdate bool   // SetMaxTableSize went below the table's size:
	needMax    uint32 // the next block must start with an update <= needMax
	nbuf, vbuf []byte // scratch for Huffman-decoded or copied names and values
}

// keepScratch is the most scratch (each of nbuf and vbuf) a Decoder keeps
// between blocks: a larger string's buffer is dropped when Decode returns,
// so that one large header does not cost its size for the connection's
// life (internal/h2 trims its own header buffers at the same size).
const keepScratch = 4 << 10

// NewDecoder returns a decoder whose dynamic table's maximum size, and the
// most a size update may set, is tableSize: in HTTP/2 the RFC's 4096, which
// the peer's encoder starts with whatever our SETTINGS say (SetMaxTableSize
// applies them once acknowledged). It bounds a block's decoded header list
// to maxList counted as RFC 9113's SETTINGS_MAX_HEADER_LIST_SIZE is (name +
// value + 32 per field); 0 is no bound.
func NewDecoder(tableSize, maxList uint32) *Decoder {
	d := &Decoder{max: tableSize, maxList: uint64(maxList)}
	d.t.limit = tableSize
	return d
}

// SetMaxTableSize changes the maximum the peer's size updates may reach:
// call it when our SETTINGS carrying a new HEADER_TABLE_SIZE is
// acknowledged. If n is below the table's current size, the next block must
// start with a size update to at most n (RFC 7541 4.2) or is an error; when
// it is called more than once before that block, the least n counts.
func (d *Decoder) SetMaxTableSize(n uint32) {
	d.max = n
	if n < d.t.limit && (!d.needUpdate || n < d.needMax) {
		d.needUpdate, d.needMax = true, n
	}
}

// Decode decodes one complete header block (a HEADERS or PUSH_PROMISE
// fragment and its CONTINUATION fragments, joined), calling emit for each
// field in order. The Field's slices are valid only during the call.
//
// An error returned by Decode other than ErrListTooLarge or emit's error is
// a COMPRESSION_ERROR: the dynamic table is out of step and the connection
// must end. When emit returns an error, or the list exceeds maxList, Decode
// calls emit no more but decodes the rest of the block, keeping the table in
// step, and returns emit's first error or ErrListTooLarge (in that order)
// unless the block turns out to be malformed or the fields it adds to the
// table come to more than 4×maxList bytes (then decoding stops there, an
// error that ends the connection: a legitimate list, which holds every
// field added, is at most maxList).
func (d *Decoder) Decode(block []byte, emit func(Field) error) error {
	err := d.decode(block, emit)
	if cap(d.nbuf) > keepScratch {
		d.nbuf = nil
	}
	if cap(d.vbuf) > keepScratch {
		d.vbuf = nil
	}
	return err
}

func (d *Decoder) decode(block []byte, emit func(Field) error) error {
	// Size updates (6.3) may only start a block; RFC 7541 4.2 and 6.3 do
	// not limit their number (an encoder needs two at most, the least
	// size since the last block and the final one), so any number is
	// taken, each at most the maximum and, where SetMaxTableSize lowered
	// it, one of them at most the least maximum set. Each costs a few
	// bytes of the block and its evictions (an entry is evicted once), so
	// a block of them costs what its length does, which h2 bounds.
	p := block
	sawNeeded := !d.needUpdate
	for len(p) > 0 && p[0]&0xe0 == 0x20 {
		v, n, err := readInt(p, 5)
		if err != nil {
			return err
		}
		if v > uint64(d.max) {
			return errSizeUpdate
		}
		if v <= uint64(d.needMax) {
			sawNeeded = true
		}
		d.t.setLimit(uint32(v))
		p = p[n:]
	}
	if !sawNeeded {
		return errMissingUpdate
	}
	d.needUpdate = false

	var (
		list     uint64
		added    uint64 // bytes copied into the table
		emitErr  error
		tooLarge bool
	)
	for len(p) > 0 {
		b := p[0]
		var f Field
		if b&0x80 != 0 { // indexed (6.1)
			i, n, err := readInt(p, 7)
			if err != nil {
				return err
			}
			p = p[n:]
			if f.Name, f.Value, err = d.get(i); err != nil {
				return err
			}
		} else {
			var prefix uint = 4 // without indexing (6.2.2) or never indexed (6.2.3)
			index := b&0xc0 == 0x40
			switch {
			case index: // with incremental indexing (6.2.1)
				prefix = 6
			case b&0xe0 == 0x20:
				return errLateUpdate
			case b&0xf0 == 0x10:
				f.Sensitive = true
			}
			i, n, err := readInt(p, prefix)
			if err != nil {
				return err
			}
			p = p[n:]
			d.nbuf, d.vbuf = d.nbuf[:0], d.vbuf[:0]
			if i == 0 {
				if f.Name, p, err = d.readString(p, &d.nbuf); err != nil {
					return err
				}
			} else {
				if f.Name, _, err = d.get(i); err != nil {
					return err
				}
				if index && i > staticLen {
					// The entry may be evicted by adding this one (4.4).
					d.nbuf = append(d.nbuf, f.Name...)
					f.Name = d.nbuf[:len(d.nbuf):len(d.nbuf)]
				}
			}
			if f.Value, p, err = d.readString(p, &d.vbuf); err != nil {
				return err
			}
			if index {
				d.t.add(f.Name, f.Value, 0, 0)
				added += uint64(len(f.Name) + len(f.Value))
				if d.maxList > 0 && added > floodFactor*d.maxList {
					return errListFlood
				}
			}
		}
		list += entrySize(len(f.Name), len(f.Value))
		if d.maxList > 0 && list > d.maxList {
			tooLarge = true
		}
		if !tooLarge && emitErr == nil {
			emitErr = emit(f)
		}
	}
	if emitErr != nil {
		return emitErr
	}
	if tooLarge {
		return ErrListTooLarge
	}
	return nil
}

// get returns the field at index i of the static and dynamic tables (2.3.3).
func (d *Decoder) get(i uint64) (name, value []byte, err error) {
	switch {
	case i == 0:
		return nil, nil, errIndexZero
	case i <= staticLen:
		e := &staticTable[i]
		n := len(e.name)
		b := staticBytes[i]
		return b[:n:n], b[n:len(b):len(b)], nil
	case i-staticLen <= uint64(d.t.len()):
		name, value = d.t.field(d.t.at(int(i - staticLen)))
		return name, value, nil
	}
	return nil, nil, errIndexRange
}

// readString reads a string literal (5.2) from p, returning it and the rest
// of p. A Huffman-coded string is decoded into *buf; a plain one aliases p.
// The length is checked against p before anything is decoded. s ends at its
// length (an append to it copies), as every slice Decode emits does.
func (d *Decoder) readString(p []byte, buf *[]byte) (s, rest []byte, err error) {
	if len(p) == 0 {
		return nil, nil, errTruncated
	}
	huff := p[0]&0x80 != 0
	l, n, err := readInt(p, 7)
	if err != nil {
		return nil, nil, err
	}
	p = p[n:]
	if l > uint64(len(p)) {
		return nil, nil, errTruncated
	}
	s, rest = p[:l:l], p[l:]
	if !huff {
		return s, rest, nil
	}
	if *buf, err = huffDecode((*buf)[:0], s); err != nil {
		return nil, nil, err
	}
	return (*buf)[:len(*buf):len(*buf)], rest, nil
}

// staticBytes[i] is staticTable[i]'s name and value back to back, so that
// the decoder emits static fields without converting strings.
var staticBytes = func() (b [staticLen + 1][]byte) {
	for i := 1; i <= staticLen; i++ {
		b[i] = []byte(staticTable[i].name + staticTable[i].value)
	}
	return b
}()
