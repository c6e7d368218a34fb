package h1

import "math"

// Bounds on the parts of a chunked body that are not data.
const (
	// MaxChunkLine is the longest chunk-size line, extensions included,
	// without its CRLF.
	MaxChunkLine = 4096
	// MaxTrailer is the largest trailer section, CRLFs included.
	MaxTrailer = 16 << 10
	// maxSizeDigits bounds chunk-size digits, leading zeros included: a
	// longer size is an error even when its value is small, since a next hop
	// with a narrower parser could read it differently.
	maxSizeDigits = 16
)

// Chunked-body states (RFC 9112 7.1).
const (
	cSize0   uint8 = iota // first hex digit of chunk-size
	cSize                 // more hex digits
	cSizeWS               // BWS after the digits
	cExt                  // chunk-ext up to CR
	cSizeLF               // LF ending the chunk-size line
	cData                 // chunk-data
	cDataCR               // CR after chunk-data
	cDataLF               // LF after chunk-data
	cTrStart              // start of a trailer line (or the final CRLF)
	cTrName               // trailer field name
	cTrValue              // trailer field value
	cTrLF                 // LF ending a trailer line
	cEndLF                // LF of the final CRLF
	cDone
)

// Body tracks where a message body ends while its bytes stream past. The
// zero value is a finished body with no bytes (NoBody).
type Body struct {
	framing Framing
	state   uint8
	remain  int64 // Length: bytes left; Chunked: data bytes left in this chunk
	data    int64 // data bytes so far (Data)
	size    int64 // chunk-size being read
	line    int   // bytes of the current chunk-size line, or of the trailer section
	err     *Error
	name    [len("transfer-encoding")]byte // start of the trailer field name, lower case
	nameLen int                            // its length, up to len(name)+1
}

// addName records a byte of a trailer field name.
func (b *Body) addName(c byte) {
	if b.nameLen < len(b.name) {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.name[b.nameLen] = c
	}
	if b.nameLen <= len(b.name) {
		b.nameLen++
	}
}

// framingName reports a trailer field that must not be in a trailer since
// it frames or routes the message (RFC 9110 6.5.1): a next hop that merged
// it into the header section would see another message.
func (b *Body) framingName() bool {
	if b.nameLen > len(b.name) {
		return false
	}
	switch string(b.name[:b.nameLen]) {
	case "content-length", "transfer-encoding", "host":
		return true
	}
	return false
}

// Reset starts a body with the given framing; length is the body length for
// Length and ignored otherwise.
func (b *Body) Reset(f Framing, length int64) {
	*b = Body{framing: f, remain: length}
}

// Next reports how many leading bytes of p belong to the body and whether the
// body ends within them. For Chunked these are the body's bytes as sent:
// chunk-size lines with extensions, data, CRLFs, trailer fields and the final
// CRLF. Calls may split the body anywhere: the sums of n and the done and err
// results are the same as for one call with all the bytes. After the end,
// Next returns 0, true, nil. On an error, n counts the bytes before the
// offending one and later calls return 0 and the same error. An UntilClose
// body never ends: it takes all of p, and the caller ends it at EOF.
func (b *Body) Next(p []byte) (n int, done bool, err error) {
	if b.err != nil {
		return 0, false, b.err
	}
	switch b.framing {
	case NoBody:
		return 0, true, nil
	case Length:
		if int64(len(p)) >= b.remain {
			n = int(b.remain)
			b.data += b.remain
			b.remain = 0
			return n, true, nil
		}
		b.remain -= int64(len(p))
		b.data += int64(len(p))
		return len(p), false, nil
	case UntilClose:
		b.data += int64(len(p))
		return len(p), false, nil
	}
	n, e := b.chunked(p)
	if e != nil {
		b.err = e
		return n, false, e
	}
	return n, b.state == cDone, nil
}

// Data returns how many bytes of the body's data Next has taken: all its
// bytes for Length and UntilClose; for Chunked the chunks' data, without
// chunk-size lines, CRLFs and trailer section. A server bounds a body's
// size with it.
func (b *Body) Data() int64 { return b.data }

// Unhex is the value of the hex digit c, or -1 if c is not one.
func Unhex(c byte) int64 {
	switch {
	case '0' <= c && c <= '9':
		return int64(c - '0')
	case 'a' <= c && c <= 'f':
		return int64(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int64(c - 'A' + 10)
	}
	return -1
}

// chunked runs the chunked-body state machine over p.
func (b *Body) chunked(p []byte) (int, *Error) {
	i := 0
	for i < len(p) {
		if b.state == cDone {
			return i, nil
		}
		if b.state == cData {
			take := int64(len(p) - i)
			if take > b.remain {
				take = b.remain
			}
			i += int(take)
			b.remain -= take
			b.data += take
			if b.remain == 0 {
				b.state = cDataCR
			}
			continue
		}
		c := p[i]
		switch b.state {
		case cSize0, cSize, cSizeWS, cExt:
			b.line++
			if b.line > MaxChunkLine && c != '\r' {
				return i, errChunkLine
			}
		case cTrStart, cTrName, cTrValue, cTrLF, cEndLF:
			b.line++
			if b.line > MaxTrailer {
				return i, errTrailerLarge
			}
		}
		switch b.state {
		case cSize0, cSize:
			if d := Unhex(c); d >= 0 {
				if b.line > maxSizeDigits || b.size > (math.MaxInt64-d)/16 {
					return i, errChunkTooBig
				}
				b.size = b.size*16 + d
				b.state = cSize
				break
			}
			if b.state == cSize0 {
				return i, errChunkSize
			}
			if e := b.afterSize(c); e != nil {
				return i, e
			}
		case cSizeWS:
			if c == '\r' {
				// BWS is allowed only before ";" (RFC 9112 7.1): a next
				// hop may read "5 " as no size.
				return i, errChunkBWS
			}
			if e := b.afterSize(c); e != nil {
				return i, e
			}
		case cExt:
			switch {
			case c == '\r':
				b.state = cSizeLF
			case ctl(c):
				return i, errChunkExt
			}
		case cSizeLF:
			if c != '\n' {
				return i, errChunkSize
			}
			b.line = 0
			if b.size == 0 {
				b.state = cTrStart
			} else {
				b.state, b.remain, b.size = cData, b.size, 0
			}
		case cDataCR, cDataLF:
			want := byte('\r')
			if b.state == cDataLF {
				want = '\n'
			}
			if c != want {
				return i, errChunkCRLF
			}
			if b.state == cDataCR {
				b.state = cDataLF
			} else {
				b.state, b.line = cSize0, 0
			}
		case cTrStart:
			switch {
			case c == '\r':
				b.state = cEndLF
			case tchar[c]:
				b.state, b.nameLen = cTrName, 0
				b.addName(c)
			default:
				return i, errTrailer
			}
		case cTrName:
			switch {
			case c == ':':
				if b.framingName() {
					return i, errTrailerField
				}
				b.state = cTrValue
			case !tchar[c]:
				return i, errTrailer
			default:
				b.addName(c)
			}
		case cTrValue:
			switch {
			case c == '\r':
				b.state = cTrLF
			case ctl(c):
				return i, errTrailer
			}
		case cTrLF, cEndLF:
			if c != '\n' {
				return i, errTrailer
			}
			if b.state == cTrLF {
				b.state = cTrStart
			} else {
				b.state = cDone
			}
		}
		i++
	}
	return i, nil
}

// afterSize handles a byte after the chunk-size digits: BWS, ";" starting an
// extension, or the CR ending the line.
func (b *Body) afterSize(c byte) *Error {
	switch c {
	case ' ', '\t':
		b.state = cSizeWS
	case ';':
		b.state = cExt
	case '\r':
		b.state = cSizeLF
	default:
		return errChunkSize
	}
	return nil
}
