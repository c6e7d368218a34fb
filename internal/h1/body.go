package h1

import "math"

// Bounds on the parts of a chunked body that are not data.
const (
	// MaxChunkLine is the longest chunk-size line, extensions included,
	// without its CRLF.
	MaxChunkLine = 4096
	// MaxTrailer is the largest trailer section, CRLFs included.
	MaxTrailer = 16 << 10
	// MaxTrailerFields is the most field lines a trailer section may
	// have, as many as a head by default (DefaultMaxHeaders): MaxTrailer
	// alone lets 4096 one-letter fields through, which a next hop keeps
	// as as many fields (an HTTP/2 trailer block's, 56 bytes each).
	MaxTrailerFields = DefaultMaxHeaders
	// maxSizeDigits bounds chunk-size digits, leading zeros included: a
	// longer size is an error even when its value is small, since a next hop
	// with a narrower parser could read it differently.
	maxSizeDigits = 16
)

// Chunked-body states (RFC 9112 7.1).
//
// The chunk-size line's states, up to cSizeLF, take chunk-ext exactly as
// RFC 9112 7.1.1 has it:
//
//	chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//	chunk-ext-name = token
//	chunk-ext-val  = token / quoted-string
//
// (quoted-string as RFC 9110 5.6.4 has it, quoted-pair and obs-text
// included). The proxy forwards the line as it came: a next hop that
// ends the line or an extension elsewhere than this parser, at a CR, an
// LF or a ";" in a quoted-string or a bare byte after a value, would
// read another body ("chunk extension smuggling").
const (
	cSize0     uint8 = iota // first hex digit of chunk-size
	cSize                   // more hex digits
	cSizeWS                 // BWS after the digits: ";" follows
	cExt                    // BWS after ";", then chunk-ext-name
	cExtName                // more chunk-ext-name
	cExtNameWS              // BWS after chunk-ext-name: "=" or ";" follows
	cExtEq                  // BWS after "=", then chunk-ext-val
	cExtToken               // more of a token chunk-ext-val
	cExtQuoted              // in a quoted-string chunk-ext-val
	cExtPair                // the byte after "\" in a quoted-string
	cExtEnd                 // after a quoted-string's closing '"'
	cExtWS                  // BWS after chunk-ext-val: ";" follows
	cSizeLF                 // LF ending the chunk-size line
	cData                   // chunk-data
	cDataCR                 // CR after chunk-data
	cDataLF                 // LF after chunk-data
	cTrStart                // start of a trailer line (or the final CRLF)
	cTrName                 // trailer field name
	cTrValue                // trailer field value
	cTrLF                   // LF ending a trailer line
	cEndLF                  // LF of the final CRLF
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
	fields  int   // the trailer section's field lines so far
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
// it into the header section would see another message. These make the
// body an error, not a field to leave out as the other fields no trailer
// carries are (the proxy's trailer lists, which name these too): the
// sender and the next hop would disagree on where the message ends.
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

// A Span is one step of NextSpan through a body's bytes: Skip bytes of a
// chunked body's framing, then a piece of Len bytes, the body's data or, if
// Trailer, its trailer section.
type Span struct {
	// Skip counts the framing bytes before the piece: chunk-size lines with
	// their extensions, the CRLF after a chunk's data, the final CRLF. It is
	// 0 for Length and UntilClose bodies, which are all data.
	Skip int
	// Len counts the piece's bytes, which follow the framing: in NextSpan's
	// p they are p[Skip:Skip+Len].
	Len int
	// Trailer: the piece is trailer section bytes (field lines, each with
	// its CRLF, as checked: no framing field, no obs-fold), not data.
	Trailer bool
	// Done: the body ends with the span. A chunked body's last span is its
	// final CRLF (Len 0); a Length body's is its last data.
	Done bool
}

// NextSpan takes the body's bytes from p's start up to the end of its next
// piece, data or trailer section, checking the framing before it as Next
// does, and reports where the piece lies in them. A piece ends where a
// chunk's data, the trailer section, the body or p ends. NextSpan takes
// s.Skip+s.Len bytes, and the next call starts after them; Len is 0 only
// where p ended in framing, the body ended (Done) or on an error. Calls may
// split the body anywhere: the data and trailer pieces reassembled, the
// bytes taken in all, Done and the error are the same however p is split
// (a piece p's end cuts comes in parts). After the end, NextSpan returns
// Span{Done: true}, nil. On an error, the span's bytes are those before
// the offending one, and later calls return Span{} and the same error. An
// UntilClose body never ends: it takes all of p as data. NextSpan does not
// allocate.
func (b *Body) NextSpan(p []byte) (Span, error) {
	if b.err != nil {
		return Span{}, b.err
	}
	switch b.framing {
	case NoBody:
		return Span{Done: true}, nil
	case Length:
		if int64(len(p)) >= b.remain {
			n := b.remain
			b.data += n
			b.remain = 0
			return Span{Len: int(n), Done: true}, nil
		}
		b.remain -= int64(len(p))
		b.data += int64(len(p))
		return Span{Len: len(p)}, nil
	case UntilClose:
		b.data += int64(len(p))
		return Span{Len: len(p)}, nil
	}
	if b.state == cDone {
		return Span{Done: true}, nil
	}
	s, e := b.chunked(p)
	if e != nil {
		b.err = e
		return s, e
	}
	return s, nil
}

// Next reports how many leading bytes of p belong to the body and whether the
// body ends within them. For Chunked these are the body's bytes as sent:
// chunk-size lines with extensions, data, CRLFs, trailer fields and the final
// CRLF. Calls may split the body anywhere: the sums of n and the done and err
// results are the same as for one call with all the bytes. After the end,
// Next returns 0, true, nil. On an error, n counts the bytes before the
// offending one and later calls return 0 and the same error. An UntilClose
// body never ends: it takes all of p, and the caller ends it at EOF. It is
// NextSpan's steps over p, for a caller that needs only where the body ends.
func (b *Body) Next(p []byte) (n int, done bool, err error) {
	for {
		s, err := b.NextSpan(p[n:])
		n += s.Skip + s.Len
		if err != nil || s.Done || n == len(p) {
			return n, s.Done, err
		}
	}
}

// Data returns how many bytes of the body's data Next (or NextSpan) has
// taken: all its bytes for Length and UntilClose; for Chunked the chunks'
// data, without chunk-size lines, CRLFs and trailer section. A server
// bounds a body's size with it.
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

// chunked runs the chunked-body state machine over p up to the end of its
// next span (NextSpan), the body not done at the start.
func (b *Body) chunked(p []byte) (Span, *Error) {
	tr := -1 // where the trailer section's bytes in p start
	for i := 0; i < len(p); i++ {
		if b.state == cData {
			take := min(b.remain, int64(len(p)-i))
			b.remain -= take
			b.data += take
			if b.remain == 0 {
				b.state = cDataCR
			}
			return Span{Skip: i, Len: int(take)}, nil
		}
		c := p[i]
		if b.state >= cTrStart && b.state < cEndLF { // a trailer line, or the final CR
			if b.state != cTrStart || c != '\r' {
				if tr < 0 {
					tr = i
				}
			} else if tr >= 0 {
				return upTo(i, tr), nil // the final CRLF is the next span's framing
			}
		}
		switch {
		case b.state < cSizeLF: // the chunk-size line
			b.line++
			if b.line > MaxChunkLine && c != '\r' {
				return upTo(i, tr), errChunkLine
			}
		case b.state >= cTrStart: // the trailer section
			b.line++
			if b.line > MaxTrailer {
				return upTo(i, tr), errTrailerLarge
			}
		}
		switch b.state {
		case cSize0, cSize:
			if d := Unhex(c); d >= 0 {
				if b.line > maxSizeDigits || b.size > (math.MaxInt64-d)/16 {
					return upTo(i, tr), errChunkTooBig
				}
				b.size = b.size*16 + d
				b.state = cSize
				break
			}
			if b.state == cSize0 {
				return upTo(i, tr), errChunkSize
			}
			if e := b.endRun(c, cSizeWS, errChunkSize); e != nil {
				return upTo(i, tr), e
			}
		case cSizeWS, cExtNameWS, cExtWS:
			switch {
			case c == ' ' || c == '\t':
			case c == ';':
				b.state = cExt
			case c == '=' && b.state == cExtNameWS:
				b.state = cExtEq
			case c == '\r':
				// BWS is allowed only before ";" and "=" (RFC 9112
				// 7.1.1): a next hop may read "5 " as no size.
				return upTo(i, tr), errChunkBWS
			case b.state == cSizeWS:
				return upTo(i, tr), errChunkSize
			default:
				return upTo(i, tr), errChunkExt
			}
		case cExt, cExtEq:
			switch {
			case c == ' ' || c == '\t':
			case tchar[c] && b.state == cExt:
				b.state = cExtName
			case tchar[c]:
				b.state = cExtToken
			case c == '"' && b.state == cExtEq:
				b.state = cExtQuoted
			default:
				return upTo(i, tr), errChunkExt
			}
		case cExtName:
			if tchar[c] {
				break
			}
			if c == '=' {
				b.state = cExtEq
			} else if e := b.endRun(c, cExtNameWS, errChunkExt); e != nil {
				return upTo(i, tr), e
			}
		case cExtToken, cExtEnd:
			if tchar[c] && b.state == cExtToken {
				break
			}
			if e := b.endRun(c, cExtWS, errChunkExt); e != nil {
				return upTo(i, tr), e
			}
		case cExtQuoted, cExtPair:
			// qdtext and a quoted-pair's second byte are HTAB, SP,
			// VCHAR and obs-text: no CTL, so no CR or LF.
			switch {
			case ctl(c):
				return upTo(i, tr), errChunkExt
			case b.state == cExtPair:
				b.state = cExtQuoted
			case c == '\\':
				b.state = cExtPair
			case c == '"':
				b.state = cExtEnd
			}
		case cSizeLF:
			if c != '\n' {
				return upTo(i, tr), errChunkSize
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
				return upTo(i, tr), errChunkCRLF
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
				if b.fields++; b.fields > MaxTrailerFields {
					return upTo(i, tr), errTrailerLarge
				}
				b.state, b.nameLen = cTrName, 0
				b.addName(c)
			default:
				return upTo(i, tr), errTrailer
			}
		case cTrName:
			switch {
			case c == ':':
				if b.framingName() {
					return upTo(i, tr), errTrailerField
				}
				b.state = cTrValue
			case !tchar[c]:
				return upTo(i, tr), errTrailer
			default:
				b.addName(c)
			}
		case cTrValue:
			switch {
			case c == '\r':
				b.state = cTrLF
			case ctl(c):
				return upTo(i, tr), errTrailer
			}
		case cTrLF, cEndLF:
			if c != '\n' {
				return upTo(i, tr), errTrailer
			}
			if b.state == cTrLF {
				b.state = cTrStart
			} else {
				b.state = cDone
				return Span{Skip: i + 1, Done: true}, nil
			}
		}
	}
	return upTo(len(p), tr), nil
}

// upTo is the span of a chunked body's bytes before p[i], for an error at
// p[i] or a piece ending there: framing, then trailer bytes from p[tr] if
// tr >= 0.
func upTo(i, tr int) Span {
	if tr >= 0 {
		return Span{Skip: tr, Len: i - tr, Trailer: true}
	}
	return Span{Skip: i}
}

// endRun handles the byte after chunk-size, a chunk-ext-name or a
// chunk-ext-val: BWS (state ws), ";" starting an extension or the CR
// ending the line; any other is the error bad.
func (b *Body) endRun(c byte, ws uint8, bad *Error) *Error {
	switch c {
	case ' ', '\t':
		b.state = ws
	case ';':
		b.state = cExt
	case '\r':
		b.state = cSizeLF
	default:
		return bad
	}
	return nil
}
