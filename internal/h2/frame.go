package h2

import (
	"encoding/binary"
	"strconv"
)

// FrameHeaderLen is the length of a frame header (RFC 9113 4.1).
const FrameHeaderLen = 9

// Frame size bounds (RFC 9113 4.2, 6.5.2).
const (
	MinMaxFrameSize = 1 << 14   // the initial SETTINGS_MAX_FRAME_SIZE, and its least value
	MaxMaxFrameSize = 1<<24 - 1 // the largest SETTINGS_MAX_FRAME_SIZE
	MaxWindow       = 1<<31 - 1 // the largest flow-control window (RFC 9113 6.9.1)
)

// FrameType is a frame's type (RFC 9113 6).
type FrameType uint8

// Frame types.
const (
	FrameData         FrameType = 0x0
	FrameHeaders      FrameType = 0x1
	FramePriority     FrameType = 0x2
	FrameRSTStream    FrameType = 0x3
	FrameSettings     FrameType = 0x4
	FramePushPromise  FrameType = 0x5
	FramePing         FrameType = 0x6
	FrameGoAway       FrameType = 0x7
	FrameWindowUpdate FrameType = 0x8
	FrameContinuation FrameType = 0x9
)

var frameNames = [...]string{"DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS",
	"PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"}

// String returns the type's name as the RFC spells it.
func (t FrameType) String() string {
	if int(t) < len(frameNames) {
		return frameNames[t]
	}
	return "UNKNOWN_FRAME_TYPE_" + strconv.Itoa(int(t))
}

// Flags are a frame header's flags.
type Flags uint8

// Frame flags (RFC 9113 6). Their meaning depends on the frame type.
const (
	FlagEndStream  Flags = 0x1  // DATA, HEADERS
	FlagAck        Flags = 0x1  // SETTINGS, PING
	FlagEndHeaders Flags = 0x4  // HEADERS, PUSH_PROMISE, CONTINUATION
	FlagPadded     Flags = 0x8  // DATA, HEADERS, PUSH_PROMISE
	FlagPriority   Flags = 0x20 // HEADERS
)

// Has reports whether all of v are set in f.
func (f Flags) Has(v Flags) bool { return f&v == v }

// FrameHeader is the fixed 9-octet header of a frame (RFC 9113 4.1).
type FrameHeader struct {
	Length   uint32 // payload length, 24 bits
	Type     FrameType
	Flags    Flags
	StreamID uint32 // 31 bits; the reserved bit is dropped on parse
}

// ParseFrameHeader parses the frame header at the start of b; ok is false
// when b is shorter than FrameHeaderLen.
func ParseFrameHeader(b []byte) (h FrameHeader, ok bool) {
	if len(b) < FrameHeaderLen {
		return h, false
	}
	return FrameHeader{
		Length:   uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		Type:     FrameType(b[3]),
		Flags:    Flags(b[4]),
		StreamID: binary.BigEndian.Uint32(b[5:]) & MaxWindow,
	}, true
}

// AppendFrameHeader appends h's 9 octets to dst. The caller keeps Length
// below 2^24 and StreamID below 2^31.
func AppendFrameHeader(dst []byte, h FrameHeader) []byte {
	return append(dst, byte(h.Length>>16), byte(h.Length>>8), byte(h.Length),
		byte(h.Type), byte(h.Flags),
		byte(h.StreamID>>24), byte(h.StreamID>>16), byte(h.StreamID>>8), byte(h.StreamID))
}

// ErrCode is an error code of RST_STREAM and GOAWAY (RFC 9113 7).
type ErrCode uint32

// Error codes.
const (
	NoError            ErrCode = 0x0
	ProtocolError      ErrCode = 0x1
	InternalError      ErrCode = 0x2
	FlowControlError   ErrCode = 0x3
	SettingsTimeout    ErrCode = 0x4
	StreamClosed       ErrCode = 0x5
	FrameSizeError     ErrCode = 0x6
	RefusedStream      ErrCode = 0x7
	Cancel             ErrCode = 0x8
	CompressionError   ErrCode = 0x9
	ConnectError       ErrCode = 0xa
	EnhanceYourCalm    ErrCode = 0xb
	InadequateSecurity ErrCode = 0xc
	HTTP11Required     ErrCode = 0xd
)

var codeNames = [...]string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR",
	"FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR",
	"REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
	"ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}

// String returns the code's name as the RFC spells it.
func (c ErrCode) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "UNKNOWN_ERROR_" + strconv.FormatUint(uint64(c), 10)
}

// Error is a protocol violation found in a frame or a sequence of frames.
// A connection error (Stream false) ends the connection with GOAWAY(Code);
// a stream error (Stream true) resets the stream of the frame that caused it
// with RST_STREAM(Code) (RFC 9113 5.4). Errors returned by this package are
// shared values: do not modify them.
type Error struct {
	Code   ErrCode
	Stream bool
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	kind := "connection"
	if e.Stream {
		kind = "stream"
	}
	return "h2: " + kind + " error " + e.Code.String() + ": " + e.Reason
}

func connErr(c ErrCode, reason string) *Error   { return &Error{Code: c, Reason: reason} }
func streamErr(c ErrCode, reason string) *Error { return &Error{Code: c, Stream: true, Reason: reason} }

var (
	errFrameTooLarge    = connErr(FrameSizeError, "frame larger than SETTINGS_MAX_FRAME_SIZE")
	errStreamZero       = connErr(ProtocolError, "frame type needs a stream, got stream 0")
	errStreamNonZero    = connErr(ProtocolError, "frame type is for stream 0 only")
	errPadding          = connErr(ProtocolError, "padding longer than the payload")
	errShortPadded      = connErr(FrameSizeError, "padded frame too short for its pad length")
	errShortHeaders     = connErr(FrameSizeError, "HEADERS too short for its priority fields")
	errSelfDependency   = streamErr(ProtocolError, "stream depends on itself")
	errPriorityLen      = streamErr(FrameSizeError, "PRIORITY length not 5")
	errRSTLen           = connErr(FrameSizeError, "RST_STREAM length not 4")
	errSettingsAckLen   = connErr(FrameSizeError, "SETTINGS ack with a payload")
	errSettingsLen      = connErr(FrameSizeError, "SETTINGS length not a multiple of 6")
	errEnablePush       = connErr(ProtocolError, "SETTINGS_ENABLE_PUSH neither 0 nor 1")
	errInitialWindow    = connErr(FlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
	errMaxFrameSize     = connErr(ProtocolError, "SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1")
	errShortPushPromise = connErr(FrameSizeError, "PUSH_PROMISE too short for the promised stream")
	errPingLen          = connErr(FrameSizeError, "PING length not 8")
	errGoAwayLen        = connErr(FrameSizeError, "GOAWAY shorter than 8")
	errWindowUpdateLen  = connErr(FrameSizeError, "WINDOW_UPDATE length not 4")
	errWindowZeroConn   = connErr(ProtocolError, "WINDOW_UPDATE of 0 on the connection")
	errWindowZeroStream = streamErr(ProtocolError, "WINDOW_UPDATE of 0 on a stream")
)

// SettingID identifies a setting (RFC 9113 6.5.2).
type SettingID uint16

// Settings defined by RFC 9113.
const (
	SettingHeaderTableSize      SettingID = 0x1
	SettingEnablePush           SettingID = 0x2
	SettingMaxConcurrentStreams SettingID = 0x3
	SettingInitialWindowSize    SettingID = 0x4
	SettingMaxFrameSize         SettingID = 0x5
	SettingMaxHeaderListSize    SettingID = 0x6
)

// Setting is one parameter of a SETTINGS frame.
type Setting struct {
	ID  SettingID
	Val uint32
}

// valid checks the ranges RFC 9113 6.5.2 gives; unknown settings are valid.
func (s Setting) valid() *Error {
	switch s.ID {
	case SettingEnablePush:
		if s.Val > 1 {
			return errEnablePush
		}
	case SettingInitialWindowSize:
		if s.Val > MaxWindow {
			return errInitialWindow
		}
	case SettingMaxFrameSize:
		if s.Val < MinMaxFrameSize || s.Val > MaxMaxFrameSize {
			return errMaxFrameSize
		}
	}
	return nil
}

// Frame is one parsed frame. Its slices point into the buffer given to
// ParseFrame and are valid while it is. Which fields are set depends on Type.
type Frame struct {
	FrameHeader
	// Data is DATA's payload, the header block fragment of HEADERS,
	// PUSH_PROMISE and CONTINUATION, SETTINGS' parameters (see Setting),
	// PING's 8 octets, GOAWAY's debug data, or an unknown type's payload.
	// Padding is removed.
	Data []byte
	// Code is the error code of RST_STREAM and GOAWAY.
	Code ErrCode
	// LastStream is GOAWAY's last stream id; Promised is PUSH_PROMISE's
	// promised stream id; Increment is WINDOW_UPDATE's increment.
	LastStream, Promised, Increment uint32
	// Dependency, Weight and Exclusive are PRIORITY's fields and those of
	// HEADERS with FlagPriority (RFC 9113 5.3.2, deprecated; kept so a
	// frame can be re-appended as received).
	Dependency uint32
	Weight     uint8
	Exclusive  bool
}

// NumSettings returns the number of parameters of a SETTINGS frame.
func (f *Frame) NumSettings() int { return len(f.Data) / 6 }

// Setting returns a SETTINGS frame's i'th parameter.
func (f *Frame) Setting(i int) Setting {
	p := f.Data[i*6:]
	return Setting{ID: SettingID(binary.BigEndian.Uint16(p)), Val: binary.BigEndian.Uint32(p[2:])}
}

// ParseFrame parses the frame at the start of b. maxFrameSize is the
// SETTINGS_MAX_FRAME_SIZE we advertised: a longer frame is a connection
// error FRAME_SIZE_ERROR, known from its header alone. n == 0 with a nil
// error means b holds no complete frame yet. On an error with n > 0, f's
// header is set (a stream error applies to f.StreamID) and n covers the
// frame, so the caller may skip it after resetting the stream. Errors are
// *Error. Frames of unknown types parse without error (the caller ignores
// them, RFC 9113 5.5). ParseFrame does not allocate.
func ParseFrame(b []byte, maxFrameSize uint32) (f Frame, n int, err error) {
	h, ok := ParseFrameHeader(b)
	if !ok {
		return f, 0, nil
	}
	f.FrameHeader = h
	if h.Length > maxFrameSize {
		return f, 0, errFrameTooLarge
	}
	n = FrameHeaderLen + int(h.Length)
	if len(b) < n {
		return Frame{}, 0, nil
	}
	if e := f.parsePayload(b[FrameHeaderLen:n]); e != nil {
		return f, n, e
	}
	return f, n, nil
}

func (f *Frame) parsePayload(p []byte) *Error {
	switch f.Type {
	case FrameData:
		if f.StreamID == 0 {
			return errStreamZero
		}
		var e *Error
		f.Data, e = unpad(f.Flags, p)
		return e
	case FrameHeaders:
		if f.StreamID == 0 {
			return errStreamZero
		}
		if f.Flags.Has(FlagPadded) {
			if len(p) < 1 {
				return errShortPadded
			}
			pad := int(p[0])
			p = p[1:]
			if f.Flags.Has(FlagPriority) {
				if len(p) < 5 {
					return errShortHeaders
				}
				f.parsePriority(p)
				p = p[5:]
			}
			if pad > len(p) {
				return errPadding
			}
			p = p[:len(p)-pad]
		} else if f.Flags.Has(FlagPriority) {
			if len(p) < 5 {
				return errShortHeaders
			}
			f.parsePriority(p)
			p = p[5:]
		}
		f.Data = p
		if f.Flags.Has(FlagPriority) && f.Dependency == f.StreamID {
			return errSelfDependency
		}
	case FramePriority:
		if f.StreamID == 0 {
			return errStreamZero
		}
		if len(p) != 5 {
			return errPriorityLen
		}
		f.parsePriority(p)
		if f.Dependency == f.StreamID {
			return errSelfDependency
		}
	case FrameRSTStream:
		if len(p) != 4 {
			return errRSTLen
		}
		if f.StreamID == 0 {
			return errStreamZero
		}
		f.Code = ErrCode(binary.BigEndian.Uint32(p))
	case FrameSettings:
		if f.StreamID != 0 {
			return errStreamNonZero
		}
		if f.Flags.Has(FlagAck) {
			if len(p) != 0 {
				return errSettingsAckLen
			}
			return nil
		}
		if len(p)%6 != 0 {
			return errSettingsLen
		}
		f.Data = p
		for i := range f.NumSettings() {
			if e := f.Setting(i).valid(); e != nil {
				return e
			}
		}
	case FramePushPromise:
		if f.StreamID == 0 {
			return errStreamZero
		}
		d, e := unpad(f.Flags, p)
		if e != nil {
			return e
		}
		if len(d) < 4 {
			return errShortPushPromise
		}
		f.Promised = binary.BigEndian.Uint32(d) & MaxWindow
		f.Data = d[4:]
	case FramePing:
		if len(p) != 8 {
			return errPingLen
		}
		if f.StreamID != 0 {
			return errStreamNonZero
		}
		f.Data = p
	case FrameGoAway:
		if f.StreamID != 0 {
			return errStreamNonZero
		}
		if len(p) < 8 {
			return errGoAwayLen
		}
		f.LastStream = binary.BigEndian.Uint32(p) & MaxWindow
		f.Code = ErrCode(binary.BigEndian.Uint32(p[4:]))
		f.Data = p[8:]
	case FrameWindowUpdate:
		if len(p) != 4 {
			return errWindowUpdateLen
		}
		f.Increment = binary.BigEndian.Uint32(p) & MaxWindow
		if f.Increment == 0 {
			if f.StreamID == 0 {
				return errWindowZeroConn
			}
			return errWindowZeroStream
		}
	case FrameContinuation:
		if f.StreamID == 0 {
			return errStreamZero
		}
		f.Data = p
	default:
		f.Data = p
	}
	return nil
}

// unpad removes the pad length octet and the padding of a PADDED frame.
// Padding as long as the rest of the payload is allowed (an empty body);
// longer is a PROTOCOL_ERROR (RFC 9113 6.1, 6.6).
func unpad(fl Flags, p []byte) ([]byte, *Error) {
	if !fl.Has(FlagPadded) {
		return p, nil
	}
	if len(p) < 1 {
		return nil, errShortPadded
	}
	pad := int(p[0])
	p = p[1:]
	if pad > len(p) {
		return nil, errPadding
	}
	return p[:len(p)-pad], nil
}

func (f *Frame) parsePriority(p []byte) {
	d := binary.BigEndian.Uint32(p)
	f.Exclusive = d>>31 != 0
	f.Dependency = d & MaxWindow
	f.Weight = p[4]
}

// AppendFrame appends f to dst as it would be sent, without padding (f's
// Length and FlagPadded are ignored; Data is not split). It serves tests
// and tools; a server uses the Append* function of each frame type.
func AppendFrame(dst []byte, f *Frame) []byte {
	h := f.FrameHeader
	h.Flags &^= FlagPadded
	switch f.Type {
	case FrameHeaders:
		if h.Flags.Has(FlagPriority) {
			h.Length = 5 + uint32(len(f.Data))
			dst = AppendFrameHeader(dst, h)
			dst = appendPriority(dst, f)
			return append(dst, f.Data...)
		}
	case FramePriority:
		h.Length = 5
		return appendPriority(AppendFrameHeader(dst, h), f)
	case FrameRSTStream:
		h.Length = 4
		return binary.BigEndian.AppendUint32(AppendFrameHeader(dst, h), uint32(f.Code))
	case FramePushPromise:
		h.Length = 4 + uint32(len(f.Data))
		dst = binary.BigEndian.AppendUint32(AppendFrameHeader(dst, h), f.Promised)
		return append(dst, f.Data...)
	case FrameGoAway:
		h.Length = 8 + uint32(len(f.Data))
		dst = binary.BigEndian.AppendUint32(AppendFrameHeader(dst, h), f.LastStream)
		dst = binary.BigEndian.AppendUint32(dst, uint32(f.Code))
		return append(dst, f.Data...)
	case FrameWindowUpdate:
		h.Length = 4
		return binary.BigEndian.AppendUint32(AppendFrameHeader(dst, h), f.Increment)
	}
	h.Length = uint32(len(f.Data))
	return append(AppendFrameHeader(dst, h), f.Data...)
}

func appendPriority(dst []byte, f *Frame) []byte {
	d := f.Dependency
	if f.Exclusive {
		d |= 1 << 31
	}
	return append(binary.BigEndian.AppendUint32(dst, d), f.Weight)
}

// AppendData appends a DATA frame carrying p on stream id, with END_STREAM
// if end. The caller keeps p within the peer's SETTINGS_MAX_FRAME_SIZE and
// the flow-control windows.
func AppendData(dst []byte, id uint32, p []byte, end bool) []byte {
	var fl Flags
	if end {
		fl = FlagEndStream
	}
	dst = AppendFrameHeader(dst, FrameHeader{Length: uint32(len(p)), Type: FrameData, Flags: fl, StreamID: id})
	return append(dst, p...)
}

// AppendHeaders appends the header block block for stream id as a HEADERS
// frame followed by as many CONTINUATION frames as maxFrameSize (the peer's
// SETTINGS_MAX_FRAME_SIZE) requires, with END_STREAM on HEADERS if end and
// END_HEADERS on the last frame.
func AppendHeaders(dst []byte, id uint32, block []byte, end bool, maxFrameSize uint32) []byte {
	t, fl := FrameHeaders, Flags(0)
	if end {
		fl = FlagEndStream
	}
	for {
		frag := block
		if uint32(len(frag)) > maxFrameSize {
			frag = frag[:maxFrameSize]
		}
		block = block[len(frag):]
		if len(block) == 0 {
			fl |= FlagEndHeaders
		}
		dst = AppendFrameHeader(dst, FrameHeader{Length: uint32(len(frag)), Type: t, Flags: fl, StreamID: id})
		dst = append(dst, frag...)
		if len(block) == 0 {
			return dst
		}
		t, fl = FrameContinuation, 0
	}
}

// AppendSettings appends a SETTINGS frame carrying s.
func AppendSettings(dst []byte, s []Setting) []byte {
	dst = AppendFrameHeader(dst, FrameHeader{Length: uint32(6 * len(s)), Type: FrameSettings})
	for _, x := range s {
		dst = binary.BigEndian.AppendUint16(dst, uint16(x.ID))
		dst = binary.BigEndian.AppendUint32(dst, x.Val)
	}
	return dst
}

// AppendSettingsAck appends a SETTINGS frame with ACK.
func AppendSettingsAck(dst []byte) []byte {
	return AppendFrameHeader(dst, FrameHeader{Type: FrameSettings, Flags: FlagAck})
}

// AppendPing appends a PING frame carrying data, with ACK if ack.
func AppendPing(dst []byte, data [8]byte, ack bool) []byte {
	var fl Flags
	if ack {
		fl = FlagAck
	}
	dst = AppendFrameHeader(dst, FrameHeader{Length: 8, Type: FramePing, Flags: fl})
	return append(dst, data[:]...)
}

// AppendGoAway appends a GOAWAY frame with the last stream id last, code
// and debug data.
func AppendGoAway(dst []byte, last uint32, code ErrCode, debug []byte) []byte {
	dst = AppendFrameHeader(dst, FrameHeader{Length: 8 + uint32(len(debug)), Type: FrameGoAway})
	dst = binary.BigEndian.AppendUint32(dst, last)
	dst = binary.BigEndian.AppendUint32(dst, uint32(code))
	return append(dst, debug...)
}

// AppendRSTStream appends a RST_STREAM frame for stream id with code.
func AppendRSTStream(dst []byte, id uint32, code ErrCode) []byte {
	dst = AppendFrameHeader(dst, FrameHeader{Length: 4, Type: FrameRSTStream, StreamID: id})
	return binary.BigEndian.AppendUint32(dst, uint32(code))
}

// AppendWindowUpdate appends a WINDOW_UPDATE frame for stream id (0: the
// connection) with increment inc (1..2^31-1).
func AppendWindowUpdate(dst []byte, id uint32, inc uint32) []byte {
	dst = AppendFrameHeader(dst, FrameHeader{Length: 4, Type: FrameWindowUpdate, StreamID: id})
	return binary.BigEndian.AppendUint32(dst, inc)
}
