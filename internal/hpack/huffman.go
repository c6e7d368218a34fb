package hpack

import "errors"

// huffLen is the code length in bits of each symbol of RFC 7541 Appendix B,
// symbol 256 being EOS. The code is canonical (codes of one length are
// consecutive, in symbol order, and shorter codes precede longer ones), so
// the lengths determine the codes, which init builds into huffCode.
var huffLen = [257]uint8{
	13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
	28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
	6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
	5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
	13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
	7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
	15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
	6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
	20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
	24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
	22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
	21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
	26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
	19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
	20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
	26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
	30, // EOS
}

const (
	eos        = 256
	maxCodeLen = 30
)

// huffCode is each symbol's code, right-aligned in huffLen bits.
var huffCode [257]uint32

// The decoder is a state machine consuming 4 bits at a time (as nghttp2's
// does). A state is an internal node of the code tree (there are 256: a full
// binary tree with 257 leaves), node 0 the root. huffDec[s][x] gives the state
// after nibble x from state s and the symbol completed on the way, if any (at
// most one: the shortest code is 5 bits).
type huffStep struct {
	next  uint8
	sym   uint8
	flags uint8
}

const (
	huffEmit = 1 << iota // sym was completed
	huffFail             // EOS was completed: an error (RFC 7541 5.2)
)

var (
	huffDec [256][16]huffStep
	// huffAccept[s]: a string may end in state s, i.e. s is the root or
	// reached from it by 1 to 7 one bits (the EOS prefix as padding).
	huffAccept [256]bool
)

func init() {
	// Canonical codes: by length, then symbol.
	code, prev := uint32(0), uint8(0)
	for l := uint8(1); l <= maxCodeLen; l++ {
		for s := range huffLen {
			if huffLen[s] != l {
				continue
			}
			code <<= l - prev
			prev = l
			huffCode[s] = code
			code++
		}
	}
	// The tree: kid[n][b] > 0 is an internal node, < 0 is leaf -(sym+1).
	var kid [256][2]int16
	nodes := 1
	for s := range huffLen {
		n := 0
		for i := int(huffLen[s]) - 1; i >= 0; i-- {
			b := huffCode[s] >> uint(i) & 1
			if i == 0 {
				kid[n][b] = int16(-(s + 1))
				break
			}
			if kid[n][b] == 0 {
				kid[n][b] = int16(nodes)
				nodes++
			}
			n = int(kid[n][b])
		}
	}
	// Accepting states: the root and the first 7 nodes of the all-ones path.
	huffAccept[0] = true
	for n, d := 0, 1; d <= 7; d++ {
		n = int(kid[n][1])
		huffAccept[n] = true
	}
	for s := range 256 {
		for x := range 16 {
			n, st := s, huffStep{}
			for i := 3; i >= 0; i-- {
				k := kid[n][x>>uint(i)&1]
				if k > 0 {
					n = int(k)
					continue
				}
				sym := int(-k) - 1
				if sym == eos {
					st.flags |= huffFail
					break
				}
				st.sym, st.flags = uint8(sym), st.flags|huffEmit
				n = 0
			}
			st.next = uint8(n)
			huffDec[s][x] = st
		}
	}
}

var (
	errHuffEOS     = errors.New("hpack: Huffman string contains EOS")
	errHuffPadding = errors.New("hpack: Huffman string padding is longer than 7 bits or not the EOS prefix")
)

// huffDecode appends the decoding of src to dst.
func huffDecode(dst, src []byte) ([]byte, error) {
	s := uint8(0)
	for _, b := range src {
		st := huffDec[s][b>>4]
		if st.flags != 0 {
			if st.flags&huffFail != 0 {
				return dst, errHuffEOS
			}
			dst = append(dst, st.sym)
		}
		st2 := huffDec[st.next][b&0xf]
		if st2.flags != 0 {
			if st2.flags&huffFail != 0 {
				return dst, errHuffEOS
			}
			dst = append(dst, st2.sym)
		}
		s = st2.next
	}
	if !huffAccept[s] {
		return dst, errHuffPadding
	}
	return dst, nil
}

// huffEncodedLen is the length in bytes of s Huffman-encoded.
func huffEncodedLen(s []byte) int {
	n := 0
	for _, c := range s {
		n += int(huffLen[c])
	}
	return (n + 7) / 8
}

// huffAppend appends s Huffman-encoded to dst, padded with ones.
func huffAppend(dst, s []byte) []byte {
	var acc uint64
	var n uint
	for _, c := range s {
		acc = acc<<huffLen[c] | uint64(huffCode[c])
		n += uint(huffLen[c])
		for n >= 8 {
			n -= 8
			dst = append(dst, byte(acc>>n))
		}
	}
	if n > 0 {
		dst = append(dst, byte(acc<<(8-n))|byte(0xff>>n))
	}
	return dst
}
