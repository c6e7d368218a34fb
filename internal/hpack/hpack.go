package hpack

import (
	"errors"
	"math"
)

// Field is one header field. Name and Value alias the decoder's memory
// (valid only during the emit call; each ends at its length, so an append
// copies) or the caller's (encoder).
type Field struct {
	Name, Value []byte
	Sensitive   bool // never-indexed representation (RFC 7541 6.2.3)
}

// ErrListTooLarge is returned by Decoder.Decode when the decoded header list
// exceeds the decoder's maxList. The block was decoded to its end and the
// dynamic table is in step with the peer's, so the connection may go on:
// HTTP/2 answers 431 or resets the stream.
var ErrListTooLarge = errors.New("hpack: header list larger than the limit")

// The decoding errors; each is a COMPRESSION_ERROR in HTTP/2.
var (
	errTruncated     = errors.New("hpack: truncated header block")
	errIntOverflow   = errors.New("hpack: integer too large")
	errIndexZero     = errors.New("hpack: index 0")
	errIndexRange    = errors.New("hpack: index out of range")
	errSizeUpdate    = errors.New("hpack: dynamic table size update above the maximum")
	errLateUpdate    = errors.New("hpack: dynamic table size update after a field")
	errMissingUpdate = errors.New("hpack: required dynamic table size update missing")
	errListFlood     = errors.New("hpack: a block adds more than 4 times the header list limit to the table")
)

// floodFactor bounds the bytes a block's literals with incremental indexing
// may copy into the dynamic table, as a multiple of maxList, while Decode
// goes on decoding past maxList to keep the table in step: two bytes on the
// wire can name a dynamic entry of up to the table's size, which each such
// literal copies again, so a block of a frame's size could cost tens of
// megabytes of copying. (Indexed fields copy nothing: a list of them past
// maxList stays ErrListTooLarge.)
const floodFactor = 4

// readInt decodes an integer with an n-bit prefix (RFC 7541 5.1) from p,
// returning it and the bytes it took. Values above 2^32-1 and more than five
// continuation bytes (enough for any of them) are errors.
func readInt(p []byte, n uint) (uint64, int, error) {
	if len(p) == 0 {
		return 0, 0, errTruncated
	}
	mask := uint64(1)<<n - 1
	v := uint64(p[0]) & mask
	if v < mask {
		return v, 1, nil
	}
	var m uint
	for i := 1; i < len(p); i++ {
		if i > 5 {
			return 0, 0, errIntOverflow
		}
		b := p[i]
		v += uint64(b&0x7f) << m
		if v > math.MaxUint32 {
			return 0, 0, errIntOverflow
		}
		if b&0x80 == 0 {
			return v, i + 1, nil
		}
		m += 7
	}
	return 0, 0, errTruncated
}

// appendInt appends v with an n-bit prefix, the byte's other bits being
// first's.
func appendInt(dst []byte, first byte, n uint, v uint64) []byte {
	mask := uint64(1)<<n - 1
	if v < mask {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(mask))
	v -= mask
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// appendString appends a string literal (RFC 7541 5.2), Huffman-coded when
// that is strictly shorter.
func appendString(dst, s []byte) []byte {
	if h := huffEncodedLen(s); h < len(s) {
		dst = appendInt(dst, 0x80, 7, uint64(h))
		return huffAppend(dst, s)
	}
	dst = appendInt(dst, 0, 7, uint64(len(s)))
	return append(dst, s...)
}
