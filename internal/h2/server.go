package h2

import (
	"errors"
	"strconv"

	"github.com/spindlenet/spindle/internal/hpack"
)

// ClientPreface is what a client sends first, before its SETTINGS (RFC 9113 3.4).
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Config is a connection's settings and abuse bounds, a Server's or a
// Client's. A nil *Config or a zero field means its default. A Client does
// not send MaxConcurrentStreams (the server opens no stream), resets a
// response whose header list passes MaxHeaderListSize (CANCEL) instead of
// answering 431, and counts under MaxEarlyResets the stream errors it
// found in the server's frames.
type Config struct {
	// MaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS (default
	// 100): a request beyond it is refused with REFUSED_STREAM.
	MaxConcurrentStreams uint32
	// InitialWindowSize is SETTINGS_INITIAL_WINDOW_SIZE, each stream's
	// receive window (default 256 KiB, at most 2^31-1).
	InitialWindowSize uint32
	// ConnWindowSize is the connection's receive window, raised from the
	// RFC's 65535 by a WINDOW_UPDATE after our SETTINGS (default 1 MiB).
	ConnWindowSize uint32
	// MaxFrameSize is SETTINGS_MAX_FRAME_SIZE (default and least 16384).
	MaxFrameSize uint32
	// MaxHeaderListSize is SETTINGS_MAX_HEADER_LIST_SIZE (default 64 KiB):
	// a request whose decoded header list is larger gets a 431 response, a
	// header block whose encoded size passes it by MaxFrameSize ends the
	// connection (ENHANCE_YOUR_CALM) before it is decoded.
	MaxHeaderListSize uint32
	// HeaderTableSize is SETTINGS_HEADER_TABLE_SIZE, the most HPACK
	// dynamic table our decoder keeps (default 4096; zero means the
	// default, see NoHeaderTable; at most MaxHeaderTableSize, 64 KiB, a
	// larger value is taken as that). It holds once our SETTINGS is
	// acknowledged: until then the peer's encoder may use 4096 bytes and
	// no more, and past 4096 only after a size update asks for it.
	HeaderTableSize uint32
	// NoHeaderTable advertises a SETTINGS_HEADER_TABLE_SIZE of 0, no
	// dynamic table (HeaderTableSize is not used): once our SETTINGS is
	// acknowledged the peer's header blocks index nothing, less memory per
	// connection for repeated fields sent whole.
	NoHeaderTable bool
	// MaxOutput bounds the unsent output (Pending) past which a PING is not
	// answered and a SETTINGS or a stream error, which need an answer, end
	// the connection with ENHANCE_YOUR_CALM, and a WINDOW_UPDATE due
	// (the DATA received consumed) raises the increment of the last one
	// of its stream or of the connection still wholly in Pending rather
	// than adding another: a peer that sends and does not read (default 1
	// MiB). Beyond it are what the handler writes (HEADERS, DATA within
	// the peer's windows, Reset, Shutdown, a Client's Request and Ping),
	// the caller's to bound by draining Pending, one GOAWAY, and one
	// WINDOW_UPDATE for the connection and one per stream (a stream
	// that ends leaves its own: in proportion to the requests, as the
	// handler's answers are).
	MaxOutput int
	// MaxControlFrames is the budget of frames that carry no request:
	// SETTINGS, PING, PRIORITY, WINDOW_UPDATE, RST_STREAM, GOAWAY, empty
	// DATA without END_STREAM and empty CONTINUATION. Each costs 1; each
	// request opened and each non-empty DATA frame we send (a Client's:
	// or receive on an open stream) gives 1 back, up to the budget.
	// Spent: GOAWAY ENHANCE_YOUR_CALM (default 1000).
	// A WINDOW_UPDATE that returns window our DATA used, at least 1 KiB
	// of it or all that is owed, costs nothing (traffic in proportion to
	// ours); one crediting less, or more than we sent, costs 1. A
	// Client's PING answered costs nothing either.
	MaxControlFrames int
	// MaxEarlyResets bounds the streams the peer resets before our
	// response to them ended or sent DATA (rapid reset, CVE-2023-44487,
	// also when the client waits for each response's header before it
	// resets), together with the streams we refuse or reset for a stream
	// error (the handler's Reset too, of a stream it marked Local); each
	// stream that ended both ways without a reset, answered by the
	// handler (not as Local), gives one back. Past it: GOAWAY ENHANCE_YOUR_CALM
	// (default 200). A reset after our DATA is not counted: the response
	// did its work as a completed one does (a client cancelling
	// server-streaming calls at their deadlines); a client that only ever
	// cancels long responses before their first DATA byte (watches that
	// saw no event) meets it after that many.
	MaxEarlyResets int
}

// Defaults of Config.
const (
	DefaultMaxConcurrentStreams = 100
	DefaultInitialWindowSize    = 256 << 10
	DefaultConnWindowSize       = 1 << 20
	DefaultMaxHeaderListSize    = 64 << 10
	DefaultHeaderTableSize      = 4096
	DefaultMaxOutput            = 1 << 20
	DefaultMaxControlFrames     = 1000
	DefaultMaxEarlyResets       = 200
)

// MaxHeaderTableSize bounds Config.HeaderTableSize, so that no
// configuration lets a peer make a connection's decoder hold more: it
// holds up to about 7 times its table's size (the entries' bytes twice
// over between compactions, and an index entry per 8 bytes at most),
// about 450 KiB at 64 KiB, the order of a connection's other buffers
// (MaxOutput's default 1 MiB).
const MaxHeaderTableSize = 64 << 10

// initialWindow is the RFC's flow-control window before SETTINGS change it.
const initialWindow = 65535

// recentClosed is how many closed streams are told from never-opened
// ones, for the code of a HEADERS on them: STREAM_CLOSED or PROTOCOL_ERROR,
// a connection error either way.
const recentClosed = 32

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.MaxConcurrentStreams == 0 {
		d.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if d.InitialWindowSize == 0 {
		d.InitialWindowSize = DefaultInitialWindowSize
	}
	d.InitialWindowSize = min(d.InitialWindowSize, MaxWindow)
	if d.ConnWindowSize == 0 {
		d.ConnWindowSize = DefaultConnWindowSize
	}
	d.ConnWindowSize = min(max(d.ConnWindowSize, initialWindow), MaxWindow)
	d.MaxFrameSize = min(max(d.MaxFrameSize, MinMaxFrameSize), MaxMaxFrameSize)
	if d.MaxHeaderListSize == 0 {
		d.MaxHeaderListSize = DefaultMaxHeaderListSize
	}
	switch {
	case d.NoHeaderTable:
		d.HeaderTableSize = 0
	case d.HeaderTableSize == 0:
		d.HeaderTableSize = DefaultHeaderTableSize
	}
	d.HeaderTableSize = min(d.HeaderTableSize, MaxHeaderTableSize)
	if d.MaxOutput <= 0 {
		d.MaxOutput = DefaultMaxOutput
	}
	if d.MaxControlFrames <= 0 {
		d.MaxControlFrames = DefaultMaxControlFrames
	}
	if d.MaxEarlyResets <= 0 {
		d.MaxEarlyResets = DefaultMaxEarlyResets
	}
	return d
}

// Request is a request's header section, decoded and validated (RFC 9113
// 8.3.1). Its slices are valid only during the Handler call that gets it.
type Request struct {
	// Method, Scheme, Authority and Path are the pseudo-header fields.
	// A CONNECT request (RFC 9113 8.5) has Authority only, host:port as
	// a CONNECT request line's target (h1.ValidTarget); other requests
	// have Method, Scheme and a non-empty Path, and Authority if sent.
	Method, Scheme, Authority, Path []byte
	// Fields are the regular fields in order, names lowercase. Cookie
	// crumbs (RFC 9113 8.2.3) are left as separate fields.
	Fields []hpack.Field
	// ContentLength is the content-length field's value, or -1.
	ContentLength int64
	// NeverIndexed are the pseudo-header fields sent as never-indexed
	// literals (RFC 7541 6.2.3): the Server sets it, and Client.Request
	// sends these never-indexed, as an intermediary must pass them on.
	NeverIndexed Pseudo
}

// Pseudo is a set of pseudo-header fields: a request's (the first four
// members) or a response's (PseudoStatus).
type Pseudo uint8

// The members of a Pseudo.
const (
	PseudoMethod Pseudo = 1 << iota
	PseudoScheme
	PseudoAuthority
	PseudoPath
	PseudoStatus
)

// Handler receives a connection's events. Its methods are called from Feed
// (OnReset also from Close), on the connection's goroutine; they may call
// the Server's Write*, Reset, Consumed, Shutdown and ShutdownNow methods,
// not Feed.
type Handler interface {
	// OnRequest: stream id opened with request r; end means the request
	// has no body (END_STREAM).
	OnRequest(s *Server, id uint32, r *Request, end bool)
	// OnData: request body bytes p of stream id, a slice of Feed's input
	// valid during the call; end marks the body's end (p may be empty).
	// The handler returns the bytes to the peer's window with Consumed
	// when it is done with them (at once, or later for backpressure).
	OnData(s *Server, id uint32, p []byte, end bool)
	// OnTrailers: the request's trailer section, which ends it. fields is
	// valid during the call.
	OnTrailers(s *Server, id uint32, fields []hpack.Field)
	// OnReset: stream id is gone before its end: reset by the peer (code
	// is the peer's), by a stream error we found (our code), or by the
	// connection ending (Feed's error's code, or CANCEL from Close).
	// Not called for a stream the handler resets itself.
	OnReset(s *Server, id uint32, code ErrCode)
	// OnWritable: the send window of stream id, which WriteData left
	// short, has room again.
	OnWritable(s *Server, id uint32)
	// OnGoAway: the peer sent GOAWAY; it opens no more streams. Streams
	// open go on; Done reports when the last has ended.
	OnGoAway(s *Server, code ErrCode, debug []byte)
}

// Server is the server side of one HTTP/2 connection (h2c with prior
// knowledge, or a TLS connection that negotiated "h2"), sans-IO: Feed
// takes received bytes and calls the Handler; what must be sent gathers in
// an output buffer the caller drains with Pending and Written. A Server is
// used by one goroutine at a time, the connection's.
//
// Output: the caller writes Pending() and then calls Written(n). Frames
// are encoded straight into this one buffer, so a transport that copies
// into its own send queue (engine.Conn.Write) or writes from the slice
// (net.Conn.Write) copies them once, and a partial write keeps the rest for
// the next call. Response bodies are the bulk: WriteData copies them into
// the buffer, a second copy on such a transport, which WriteDataTo saves
// by handing the buffer, each DATA frame's header and the caller's bytes
// to the transport's Write in turn.
//
// Send flow control: WriteData writes what the windows allow and returns
// the count; the rest stays with the caller, who is called back
// (OnWritable) when the window opens. Nothing is queued inside, so a slow
// reader costs the server no memory, and a proxy passes the backpressure
// on to its upstream.
type Server struct {
	conn
	h           Handler
	prefaceDone bool // ClientPreface seen

	// Decoding.
	req      Request
	pseudo   [4]span // method, scheme, authority, path
	havePs   uint8
	host     span
	haveHost bool
	status   []byte // the :status digits we send
}

const (
	decodeDiscard = iota
	decodeRequest
	decodeTrailers
)

// Errors of the Write methods.
var (
	ErrStreamGone    = errors.New("h2: stream not open for sending")
	ErrHeadersSent   = errors.New("h2: response header already sent")
	ErrNoHeaders     = errors.New("h2: DATA before the response header")
	ErrConnFailed    = errors.New("h2: connection ended")
	errBadPreface    = connErr(ProtocolError, "invalid connection preface")
	errFirstFrame    = connErr(ProtocolError, "first frame not SETTINGS")
	errIdleFrame     = connErr(ProtocolError, "frame on an idle stream")
	errEvenStream    = connErr(ProtocolError, "client opened an even stream id")
	errStreamOrder   = connErr(ProtocolError, "HEADERS on a lower stream id, never opened")
	errClosedHeaders = connErr(StreamClosed, "HEADERS on a closed stream")
	errContExpected  = connErr(ProtocolError, "frame interleaved in a header block")
	errContStray     = connErr(ProtocolError, "CONTINUATION without a header block")
	errPushPromise   = connErr(ProtocolError, "client sent PUSH_PROMISE")
	errConnFlow      = connErr(FlowControlError, "DATA beyond the connection window")
	errConnWindow    = connErr(FlowControlError, "connection send window above 2^31-1")
	errInitWindow    = connErr(FlowControlError, "INITIAL_WINDOW_SIZE change puts a window above 2^31-1")
	errCompression   = connErr(CompressionError, "header block does not decode")
	errBlockLarge    = connErr(EnhanceYourCalm, "header block too large")
	errContFlood     = connErr(EnhanceYourCalm, "too many CONTINUATION frames")
	errCtrlFlood     = connErr(EnhanceYourCalm, "too many control frames")
	errRapidReset    = connErr(EnhanceYourCalm, "too many streams reset early, refused or in error")
	errOutput        = connErr(EnhanceYourCalm, "peer does not read its answers")
	errStreamFlow    = streamErr(FlowControlError, "DATA beyond the stream window")
	errStreamWindow  = streamErr(FlowControlError, "stream send window above 2^31-1")
	errHalfClosed    = streamErr(StreamClosed, "frame on a half-closed (remote) or closed stream")
	errMalformed     = streamErr(ProtocolError, "malformed request header or trailer section")
	errTrailersEnd   = streamErr(ProtocolError, "trailers without END_STREAM")
	errCLMismatch    = streamErr(ProtocolError, "DATA length differs from content-length")
	errRefused       = streamErr(RefusedStream, "MAX_CONCURRENT_STREAMS reached")
	errInterimEnd    = errors.New("h2: interim response with END_STREAM")
	errStatus        = errors.New("h2: status not 1xx-9xx, or 101 (RFC 9113 8.6)")
	errShortWrite    = errors.New("h2: WriteDataTo: short write")
	errWriteLost     = connErr(InternalError, "a write of WriteDataTo failed")
)

// NewServer returns a server connection calling h, with our SETTINGS and
// connection WINDOW_UPDATE already in Pending (the server preface, which may
// be sent before the client's arrives).
func NewServer(h Handler, c *Config) *Server {
	cfg := c.withDefaults()
	s := &Server{h: h, req: Request{ContentLength: -1}}
	s.conn = newConn(s, cfg, false)
	s.emitFn, s.list = s.emit, &s.req.Fields
	s.out = AppendSettings(s.out, []Setting{
		{SettingHeaderTableSize, cfg.HeaderTableSize},
		{SettingMaxConcurrentStreams, cfg.MaxConcurrentStreams},
		{SettingInitialWindowSize, cfg.InitialWindowSize},
		{SettingMaxFrameSize, cfg.MaxFrameSize},
		{SettingMaxHeaderListSize, cfg.MaxHeaderListSize},
	})
	s.appendWindowUpdate()
	return s
}

// Feed processes the complete frames at the start of in (the client
// preface first) and returns how many bytes it consumed: the caller keeps
// in[n:], appends what it reads next and feeds it again. Data handed to
// the handler points into in. A connection error is returned as *Error
// after GOAWAY was appended to Pending and every stream the handler knew
// got OnReset; Feed then consumes nothing more. Connection goroutine.
func (s *Server) Feed(in []byte) (n int, err error) {
	if s.err != nil {
		return 0, s.err
	}
	s.compact()
	if !s.prefaceDone {
		k := min(len(in), len(ClientPreface))
		if string(in[:k]) != ClientPreface[:k] {
			return 0, s.fail(errBadPreface)
		}
		if k < len(ClientPreface) {
			return 0, nil
		}
		s.prefaceDone = true
		n = k
	}
	return s.frames(in, n)
}

// frame processes a frame conn.frame leaves to the side.
func (s *Server) frame(f *Frame) *Error {
	switch f.Type {
	case FrameHeaders:
		if f.StreamID%2 == 0 {
			return errEvenStream
		}
		return s.headerBlock(f)
	case FrameRSTStream:
		return s.rstStream(f)
	case FramePushPromise:
		return errPushPromise
	case FramePing: // an ACK (conn.frame charged it unless it answers ours)
		if s.goAwayFirst && [8]byte(f.Data) == shutdownPing {
			s.ShutdownNow() // a round trip after the first GOAWAY
		}
	case FrameGoAway:
		if e := s.control(); e != nil {
			return e
		}
		s.goAwayRecv = true
		s.h.OnGoAway(s, f.Code, f.Data)
	}
	return nil
}

func (s *Server) rstStream(f *Frame) *Error {
	if e := s.control(); e != nil {
		return e
	}
	if s.idle(f.StreamID) {
		return errIdleFrame
	}
	st := s.find(f.StreamID)
	if st == nil {
		return nil
	}
	// Early: before our response ended, not only before its header: a
	// client that waits for each header and resets would have the handler
	// (a proxy's upstream) do a response's work per stream without bound.
	// Not once the response sent DATA: a long stream (a gRPC call
	// cancelled at its deadline) did its work as a completed one does,
	// which gives an early reset back, and a connection of such streams
	// reached the limit with none completing.
	if st.sendOpen && !st.dataSent {
		if s.earlyResets++; s.earlyResets > s.cfg.MaxEarlyResets {
			return errRapidReset
		}
	}
	ann := st.announced
	s.remove(st)
	if ann {
		s.h.OnReset(s, f.StreamID, f.Code)
	}
	return nil
}

// block handles a complete header block of stream id.
func (s *Server) block(id uint32, block []byte) *Error {
	end := s.hend
	if e := s.hreset; e != nil {
		s.hreset = nil
		if _, ce := s.decode(block, decodeDiscard); ce != nil {
			return ce
		}
		s.lastID = max(s.lastID, id)
		return e
	}
	if st := s.find(id); st != nil {
		if !st.recvOpen {
			if _, e := s.decode(block, decodeDiscard); e != nil {
				return e
			}
			return errHalfClosed
		}
		if e := s.trailers(st, block, end, errMalformed); e != nil {
			return e
		}
		s.h.OnTrailers(s, id, s.tfields)
		s.closeIfDone(id)
		return nil
	}
	if id <= s.lastID {
		if _, e := s.decode(block, decodeDiscard); e != nil {
			return e
		}
		switch {
		case s.ignored(id):
			return nil
		case s.closed.has(id):
			return errClosedHeaders
		}
		return errStreamOrder
	}
	s.lastID = id
	if s.goAwaySent || s.live() >= int(s.cfg.MaxConcurrentStreams) {
		if _, e := s.decode(block, decodeDiscard); e != nil {
			return e
		}
		if s.goAwaySent { // above the last stream id we announced: ignored
			return nil
		}
		if s.earlyResets++; s.earlyResets > s.cfg.MaxEarlyResets {
			return errRapidReset
		}
		return errRefused
	}
	tooLarge, e := s.decode(block, decodeRequest)
	if e != nil {
		return e
	}
	if !tooLarge && !s.bad {
		s.request()
	}
	if s.bad {
		return errMalformed
	}
	if end && s.req.ContentLength > 0 {
		return errCLMismatch
	}
	s.refill()
	s.compact()
	s.streams = append(s.streams, stream{
		id: id, recvOpen: !end, sendOpen: true,
		sendWin: s.peerInitial, recvWin: s.streamInitial, cl: s.req.ContentLength,
	})
	st := &s.streams[len(s.streams)-1]
	if tooLarge {
		if len(s.out) > s.cfg.MaxOutput {
			return errOutput
		}
		s.writeStatusOnly(st, 431)
		return nil
	}
	st.announced = true
	s.h.OnRequest(s, id, &s.req, end)
	return nil
}

// writeStatusOnly answers st with a bodiless status and ends it, asking
// the peer to stop its request (RFC 9113 8.1) if it was still sending.
func (s *Server) writeStatusOnly(st *stream, status int) {
	st.responded = true
	s.writeBlock(st.id, status, false, nil, true)
	st.sendOpen = false
	if st.recvOpen {
		s.out = AppendRSTStream(s.out, st.id, NoError)
		s.quieten(st.id)
		st.recvOpen = false
	}
	s.maybeClose(st)
}

// Local tells that the handler ends stream id itself, for an error it
// found in the request, at no cost to it (a proxy's 400 that no server
// saw, or its reset of a request whose trailers it cannot pass on): the
// stream's end gives no early reset back (MaxEarlyResets), as the
// Server's own 431 gives none, and a Reset of it before its response
// ended or sent DATA counts as one, as the Server's own stream errors do.
// Else a client putting such a request between each two rapid resets
// kept the count level, and one repeating a request the handler resets
// was not counted at all. Connection goroutine.
func (s *Server) Local(id uint32) {
	if st := s.find(id); st != nil {
		st.local = true
	}
}

// WriteHeaders sends the response header section of stream id: status
// (1xx interim responses other than 101 may precede the final one) and
// fields, whose names the caller keeps lowercase and free of
// connection-specific fields. end ends our side of the stream (no body).
// Ending our side while the request is still coming leaves the stream
// half-closed: the handler may Reset(id, NoError) to stop the request
// (RFC 9113 8.1) or read on (a CONNECT tunnel's half-close). Connection
// goroutine.
func (s *Server) WriteHeaders(id uint32, status int, fields []hpack.Field, end bool) error {
	return s.writeHeaders(id, status, false, fields, end)
}

// writeHeaders is WriteHeaders, :status never-indexed where never.
func (s *Server) writeHeaders(id uint32, status int, never bool, fields []hpack.Field, end bool) error {
	st, err := s.sendable(id)
	if err != nil {
		return err
	}
	if st.responded {
		return ErrHeadersSent
	}
	switch {
	case status < 100 || status > 999 || status == 101:
		return errStatus
	case status >= 200:
		st.responded = true
	case end:
		return errInterimEnd
	}
	s.writeBlock(id, status, never, fields, end)
	if end {
		st.sendOpen = false
		s.maybeClose(st)
	}
	return nil
}

// WriteResponse is WriteHeaders with r's Status and Fields, :status sent
// as a never-indexed literal where r.NeverIndexed has PseudoStatus (RFC
// 7541 6.2.3: an intermediary passes a Client's Response on so);
// r.ContentLength is not used (put content-length in Fields). Connection
// goroutine.
func (s *Server) WriteResponse(id uint32, r *Response, end bool) error {
	return s.writeHeaders(id, r.Status, r.NeverIndexed&PseudoStatus != 0, r.Fields, end)
}

// writeBlock sends a header section: status first unless 0, a
// never-indexed literal where never.
func (s *Server) writeBlock(id uint32, status int, never bool, fields []hpack.Field, end bool) {
	b := s.startBlock()
	if status != 0 {
		s.status = strconv.AppendInt(s.status[:0], int64(status), 10)
		b = s.enc.AppendField(b, hpack.Field{Name: statusName, Value: s.status, Sensitive: never})
	}
	s.sendBlock(id, b, fields, end)
}

var statusName = []byte(":status")

func (s *Server) clear() {
	s.havePs, s.haveHost = 0, false
	s.req.ContentLength = -1
}

func (s *Server) deliver(id uint32, p []byte, end bool) { s.h.OnData(s, id, p, end) }
func (s *Server) writable(id uint32)                    { s.h.OnWritable(s, id) }
func (s *Server) gone(id uint32, code ErrCode)          { s.h.OnReset(s, id, code) }
