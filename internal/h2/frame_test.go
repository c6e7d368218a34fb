package h2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// frame builds a frame's bytes from a header and a raw payload (Length is
// taken from the payload).
func frame(t FrameType, fl Flags, id uint32, payload ...byte) []byte {
	return append(AppendFrameHeader(nil, FrameHeader{Length: uint32(len(payload)), Type: t, Flags: fl, StreamID: id}), payload...)
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func setting(id SettingID, v uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, uint16(id)), v)
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func TestFrameHeaderRoundTrip(t *testing.T) {
	h := FrameHeader{Length: 0xabcdef, Type: FrameGoAway, Flags: 0x25, StreamID: 0x7fffffff}
	b := AppendFrameHeader(nil, h)
	if len(b) != FrameHeaderLen {
		t.Fatalf("len %d", len(b))
	}
	if g, ok := ParseFrameHeader(b); !ok || g != h {
		t.Fatalf("got %+v %v, want %+v", g, ok, h)
	}
	b[5] |= 0x80 // the reserved bit is ignored
	if g, _ := ParseFrameHeader(b); g.StreamID != 0x7fffffff {
		t.Fatalf("reserved bit kept: %x", g.StreamID)
	}
	if _, ok := ParseFrameHeader(b[:8]); ok {
		t.Fatal("8 octets parsed")
	}
}

// TestParseFrameErrors: each rule of RFC 9113 sections 4.2 and 6 that makes a
// frame an error, one row each, with the error's code and kind.
func TestParseFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     []byte
		err    *Error
		code   ErrCode
		stream bool
	}{
		{"frame over max frame size", frame(FrameData, 0, 1, make([]byte, MinMaxFrameSize+1)...), errFrameTooLarge, FrameSizeError, false},
		{"DATA on stream 0", frame(FrameData, 0, 0, 'x'), errStreamZero, ProtocolError, false},
		{"DATA padded empty", frame(FrameData, FlagPadded, 1), errShortPadded, FrameSizeError, false},
		{"DATA padding beyond payload", frame(FrameData, FlagPadded, 1, 3, 'a', 'b'), errPadding, ProtocolError, false},
		{"HEADERS on stream 0", frame(FrameHeaders, FlagEndHeaders, 0, 0x82), errStreamZero, ProtocolError, false},
		{"HEADERS padded empty", frame(FrameHeaders, FlagPadded, 1), errShortPadded, FrameSizeError, false},
		{"HEADERS padding beyond payload", frame(FrameHeaders, FlagPadded, 1, 2, 'a'), errPadding, ProtocolError, false},
		{"HEADERS priority short", frame(FrameHeaders, FlagPriority, 1, 0, 0, 0, 0), errShortHeaders, FrameSizeError, false},
		{"HEADERS padded priority short", frame(FrameHeaders, FlagPadded|FlagPriority, 1, 0, 0, 0, 0), errShortHeaders, FrameSizeError, false},
		{"HEADERS padding beyond priority", frame(FrameHeaders, FlagPadded|FlagPriority, 1, 1, 0, 0, 0, 3, 16), errPadding, ProtocolError, false},
		{"HEADERS depends on itself", frame(FrameHeaders, FlagPriority, 3, 0, 0, 0, 3, 16), errSelfDependency, ProtocolError, true},
		{"PRIORITY on stream 0", frame(FramePriority, 0, 0, 0, 0, 0, 1, 16), errStreamZero, ProtocolError, false},
		{"PRIORITY length 4", frame(FramePriority, 0, 1, 0, 0, 0, 3), errPriorityLen, FrameSizeError, true},
		{"PRIORITY length 6", frame(FramePriority, 0, 1, 0, 0, 0, 3, 16, 0), errPriorityLen, FrameSizeError, true},
		{"PRIORITY depends on itself", frame(FramePriority, 0, 5, 0, 0, 0, 5, 16), errSelfDependency, ProtocolError, true},
		{"RST_STREAM length 3", frame(FrameRSTStream, 0, 1, 0, 0, 8), errRSTLen, FrameSizeError, false},
		{"RST_STREAM on stream 0", frame(FrameRSTStream, 0, 0, u32(8)...), errStreamZero, ProtocolError, false},
		{"SETTINGS on a stream", frame(FrameSettings, 0, 1), errStreamNonZero, ProtocolError, false},
		{"SETTINGS ack with payload", frame(FrameSettings, FlagAck, 0, setting(SettingEnablePush, 0)...), errSettingsAckLen, FrameSizeError, false},
		{"SETTINGS length 5", frame(FrameSettings, 0, 0, 0, 2, 0, 0, 0), errSettingsLen, FrameSizeError, false},
		{"SETTINGS_ENABLE_PUSH 2", frame(FrameSettings, 0, 0, setting(SettingEnablePush, 2)...), errEnablePush, ProtocolError, false},
		{"SETTINGS_INITIAL_WINDOW_SIZE 2^31", frame(FrameSettings, 0, 0, setting(SettingInitialWindowSize, 1<<31)...), errInitialWindow, FlowControlError, false},
		{"SETTINGS_MAX_FRAME_SIZE 2^14-1", frame(FrameSettings, 0, 0, setting(SettingMaxFrameSize, 1<<14-1)...), errMaxFrameSize, ProtocolError, false},
		{"SETTINGS_MAX_FRAME_SIZE 2^24", frame(FrameSettings, 0, 0, setting(SettingMaxFrameSize, 1<<24)...), errMaxFrameSize, ProtocolError, false},
		{"SETTINGS bad value after a good one", frame(FrameSettings, 0, 0, cat(setting(SettingMaxFrameSize, 1<<14), setting(SettingEnablePush, 7))...), errEnablePush, ProtocolError, false},
		{"PUSH_PROMISE on stream 0", frame(FramePushPromise, FlagEndHeaders, 0, u32(2)...), errStreamZero, ProtocolError, false},
		{"PUSH_PROMISE short", frame(FramePushPromise, FlagEndHeaders, 1, 0, 0, 2), errShortPushPromise, FrameSizeError, false},
		{"PUSH_PROMISE padding beyond payload", frame(FramePushPromise, FlagPadded, 1, 9, 0, 0, 0, 2), errPadding, ProtocolError, false},
		{"PING length 7", frame(FramePing, 0, 0, make([]byte, 7)...), errPingLen, FrameSizeError, false},
		{"PING length 9", frame(FramePing, 0, 0, make([]byte, 9)...), errPingLen, FrameSizeError, false},
		{"PING on a stream", frame(FramePing, 0, 1, make([]byte, 8)...), errStreamNonZero, ProtocolError, false},
		{"GOAWAY on a stream", frame(FrameGoAway, 0, 1, make([]byte, 8)...), errStreamNonZero, ProtocolError, false},
		{"GOAWAY length 7", frame(FrameGoAway, 0, 0, make([]byte, 7)...), errGoAwayLen, FrameSizeError, false},
		{"WINDOW_UPDATE length 5", frame(FrameWindowUpdate, 0, 0, 0, 0, 0, 0, 1), errWindowUpdateLen, FrameSizeError, false},
		{"WINDOW_UPDATE of 0 on the connection", frame(FrameWindowUpdate, 0, 0, u32(0)...), errWindowZeroConn, ProtocolError, false},
		{"WINDOW_UPDATE of 0 on a stream", frame(FrameWindowUpdate, 0, 1, u32(0)...), errWindowZeroStream, ProtocolError, true},
		{"WINDOW_UPDATE of 0 with the reserved bit", frame(FrameWindowUpdate, 0, 1, u32(1<<31)...), errWindowZeroStream, ProtocolError, true},
		{"CONTINUATION on stream 0", frame(FrameContinuation, FlagEndHeaders, 0, 0x82), errStreamZero, ProtocolError, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, n, err := ParseFrame(tc.in, MinMaxFrameSize)
			var e *Error
			if !errors.As(err, &e) || e != tc.err {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if e.Code != tc.code || e.Stream != tc.stream {
				t.Fatalf("code %v stream %v, want %v %v", e.Code, e.Stream, tc.code, tc.stream)
			}
			if tc.err != errFrameTooLarge && (n != len(tc.in) || f.Type != FrameType(tc.in[3])) {
				t.Fatalf("n %d type %v, want the whole frame", n, f.Type)
			}
		})
	}
}

func TestParseFrameValid(t *testing.T) {
	prio := []byte{0x80, 0, 0, 1, 200}
	for _, tc := range []struct {
		name string
		in   []byte
		want Frame
	}{
		{"DATA", frame(FrameData, FlagEndStream, 1, 'h', 'i'), Frame{Data: []byte("hi")}},
		{"DATA padded", frame(FrameData, FlagPadded, 1, 2, 'h', 'i', 0, 0), Frame{Data: []byte("hi")}},
		{"DATA all padding", frame(FrameData, FlagPadded, 1, 2, 0, 0), Frame{Data: []byte{}}},
		{"HEADERS padded priority", frame(FrameHeaders, FlagPadded|FlagPriority|FlagEndHeaders, 3, cat([]byte{1}, prio, []byte{0x82, 0})...),
			Frame{Data: []byte{0x82}, Dependency: 1, Exclusive: true, Weight: 200}},
		{"PRIORITY", frame(FramePriority, 0, 3, prio...), Frame{Dependency: 1, Exclusive: true, Weight: 200}},
		{"RST_STREAM", frame(FrameRSTStream, 0, 3, u32(8)...), Frame{Code: Cancel}},
		{"SETTINGS unknown id ignored", frame(FrameSettings, 0, 0, setting(0x99, 1<<31)...), Frame{Data: setting(0x99, 1<<31)}},
		{"SETTINGS edge values", frame(FrameSettings, 0, 0, cat(setting(SettingInitialWindowSize, MaxWindow), setting(SettingMaxFrameSize, MaxMaxFrameSize))...),
			Frame{Data: cat(setting(SettingInitialWindowSize, MaxWindow), setting(SettingMaxFrameSize, MaxMaxFrameSize))}},
		{"SETTINGS ack", frame(FrameSettings, FlagAck, 0), Frame{}},
		{"PUSH_PROMISE", frame(FramePushPromise, FlagEndHeaders, 1, cat(u32(2), []byte{0x82})...), Frame{Promised: 2, Data: []byte{0x82}}},
		{"PING", frame(FramePing, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8), Frame{Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}},
		{"GOAWAY", frame(FrameGoAway, 0, 0, cat(u32(7), u32(uint32(EnhanceYourCalm)), []byte("bye"))...), Frame{LastStream: 7, Code: EnhanceYourCalm, Data: []byte("bye")}},
		{"WINDOW_UPDATE", frame(FrameWindowUpdate, 0, 0, u32(MaxWindow)...), Frame{Increment: MaxWindow}},
		{"CONTINUATION", frame(FrameContinuation, FlagEndHeaders, 1, 0x82), Frame{Data: []byte{0x82}}},
		{"unknown type", frame(0xfa, 0xff, 9, 1, 2), Frame{Data: []byte{1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append(tc.in, "next"...)
			f, n, err := ParseFrame(in, MinMaxFrameSize)
			if err != nil || n != len(tc.in) {
				t.Fatalf("n %d err %v", n, err)
			}
			tc.want.FrameHeader, _ = ParseFrameHeader(tc.in)
			if !frameEqual(&f, &tc.want) {
				t.Fatalf("got %+v\nwant %+v", f, tc.want)
			}
			for k := range len(tc.in) { // every prefix is incomplete
				if _, n, err := ParseFrame(tc.in[:k], MinMaxFrameSize); n != 0 || err != nil {
					t.Fatalf("prefix %d: n %d err %v", k, n, err)
				}
			}
		})
	}
}

func frameEqual(a, b *Frame) bool {
	return a.FrameHeader == b.FrameHeader && bytes.Equal(a.Data, b.Data) && a.Code == b.Code &&
		a.LastStream == b.LastStream && a.Promised == b.Promised && a.Increment == b.Increment &&
		a.Dependency == b.Dependency && a.Weight == b.Weight && a.Exclusive == b.Exclusive
}

func TestAppendHeadersSplit(t *testing.T) {
	block := bytes.Repeat([]byte{0x82}, 2*MinMaxFrameSize+5)
	b := AppendHeaders(nil, 5, block, true, MinMaxFrameSize)
	var got []byte
	var types []FrameType
	var flags []Flags
	for len(b) > 0 {
		f, n, err := ParseFrame(b, MinMaxFrameSize)
		if err != nil || n == 0 {
			t.Fatalf("n %d err %v", n, err)
		}
		if f.StreamID != 5 {
			t.Fatalf("stream %d", f.StreamID)
		}
		types, flags = append(types, f.Type), append(flags, f.Flags)
		got = append(got, f.Data...)
		b = b[n:]
	}
	if !bytes.Equal(got, block) {
		t.Fatal("block differs")
	}
	wantT := []FrameType{FrameHeaders, FrameContinuation, FrameContinuation}
	wantF := []Flags{FlagEndStream, 0, FlagEndHeaders}
	for i := range wantT {
		if i >= len(types) || types[i] != wantT[i] || flags[i] != wantF[i] {
			t.Fatalf("frames %v flags %v", types, flags)
		}
	}
	if len(types) != 3 {
		t.Fatalf("frames %v", types)
	}
	// A block that fits is one HEADERS with both flags; an empty one too.
	for _, blk := range [][]byte{{0x82}, nil} {
		f, n, err := ParseFrame(AppendHeaders(nil, 1, blk, true, MinMaxFrameSize), MinMaxFrameSize)
		if err != nil || n != FrameHeaderLen+len(blk) || f.Flags != FlagEndStream|FlagEndHeaders {
			t.Fatalf("block %x: n %d err %v flags %x", blk, n, err, f.Flags)
		}
	}
}

func TestAppendControlFrames(t *testing.T) {
	ping := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, tc := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"DATA end", AppendData(nil, 3, []byte("ab"), true), frame(FrameData, FlagEndStream, 3, 'a', 'b')},
		{"DATA", AppendData(nil, 3, nil, false), frame(FrameData, 0, 3)},
		{"SETTINGS", AppendSettings(nil, []Setting{{SettingMaxConcurrentStreams, 100}, {SettingInitialWindowSize, 1 << 20}}),
			frame(FrameSettings, 0, 0, cat(setting(SettingMaxConcurrentStreams, 100), setting(SettingInitialWindowSize, 1<<20))...)},
		{"SETTINGS ack", AppendSettingsAck(nil), frame(FrameSettings, FlagAck, 0)},
		{"PING ack", AppendPing(nil, ping, true), frame(FramePing, FlagAck, 0, ping[:]...)},
		{"GOAWAY", AppendGoAway(nil, 9, EnhanceYourCalm, []byte("calm")), frame(FrameGoAway, 0, 0, cat(u32(9), u32(0xb), []byte("calm"))...)},
		{"RST_STREAM", AppendRSTStream(nil, 7, RefusedStream), frame(FrameRSTStream, 0, 7, u32(7)...)},
		{"WINDOW_UPDATE", AppendWindowUpdate(nil, 0, 1<<20), frame(FrameWindowUpdate, 0, 0, u32(1<<20)...)},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s: %x, want %x", tc.name, tc.got, tc.want)
		}
		if _, _, err := ParseFrame(tc.got, MinMaxFrameSize); err != nil {
			t.Errorf("%s: reparse: %v", tc.name, err)
		}
	}
}

func TestNames(t *testing.T) {
	if FrameContinuation.String() != "CONTINUATION" || FrameType(0xa).String() != "UNKNOWN_FRAME_TYPE_10" {
		t.Error(FrameContinuation, FrameType(0xa))
	}
	if HTTP11Required.String() != "HTTP_1_1_REQUIRED" || ErrCode(0xe).String() != "UNKNOWN_ERROR_14" {
		t.Error(HTTP11Required, ErrCode(0xe))
	}
	if s := errWindowZeroStream.Error(); s != "h2: stream error PROTOCOL_ERROR: WINDOW_UPDATE of 0 on a stream" {
		t.Error(s)
	}
}

func TestParseFrameNoAllocs(t *testing.T) {
	in := frame(FrameHeaders, FlagPadded|FlagPriority|FlagEndHeaders, 3, 1, 0, 0, 0, 1, 16, 0x82, 0)
	if n := testing.AllocsPerRun(100, func() { ParseFrame(in, MinMaxFrameSize) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

// FuzzFrame: any bytes parse without panic into an error, an incomplete
// frame, or a frame that AppendFrame re-encodes into bytes that parse to the
// same frame (padding dropped).
func FuzzFrame(f *testing.F) {
	for _, s := range [][]byte{
		frame(FrameData, FlagPadded|FlagEndStream, 1, 2, 'h', 'i', 0, 0),
		frame(FrameHeaders, FlagPadded|FlagPriority|FlagEndHeaders, 3, 1, 0x80, 0, 0, 1, 16, 0x82, 0),
		frame(FramePriority, 0, 3, 0, 0, 0, 1, 16),
		frame(FrameRSTStream, 0, 3, u32(8)...),
		frame(FrameSettings, 0, 0, setting(SettingMaxFrameSize, 1<<14)...),
		frame(FrameSettings, FlagAck, 0),
		frame(FramePushPromise, FlagPadded, 1, cat([]byte{1}, u32(2), []byte{0x82, 0})...),
		frame(FramePing, FlagAck, 0, make([]byte, 8)...),
		frame(FrameGoAway, 0, 0, cat(u32(7), u32(0), []byte("x"))...),
		frame(FrameWindowUpdate, 0, 1, u32(1)...),
		frame(FrameContinuation, FlagEndHeaders, 1, 0x82),
		frame(0x20, 0, 1, 9),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, n, err := ParseFrame(in, MinMaxFrameSize)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T", err)
			}
			return
		}
		if n == 0 {
			return
		}
		if n > len(in) {
			t.Fatalf("n %d > %d", n, len(in))
		}
		out := AppendFrame(nil, &fr)
		fr2, n2, err := ParseFrame(out, MaxMaxFrameSize)
		if err != nil || n2 != len(out) {
			t.Fatalf("reparse of %x: n %d err %v", out, n2, err)
		}
		fr.Flags &^= FlagPadded
		fr.Length = fr2.Length
		if !frameEqual(&fr, &fr2) {
			t.Fatalf("reparse differs:\n%+v\n%+v", fr, fr2)
		}
	})
}
