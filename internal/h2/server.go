package h2

import (
	"errors"
	"strconv"

	"github.com/spindlenet/spindle/internal/hpack"
)

// ClientPreface is what a client sends first, before its SETTINGS (RFC 9113 3.4).
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Config is a server connection's settings and abuse bounds. A nil *Config
// or a zero field means its default.
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
	// HeaderTableSize is SETTINGS_HEADER_TABLE_SIZE, the HPACK dynamic
	// table our decoder keeps (default 4096).
	HeaderTableSize uint32
	// MaxOutput bounds the unsent output (Pending) past which a PING is not
	// answered and a SETTINGS or a stream error, which need an answer, end
	// the connection with ENHANCE_YOUR_CALM: a peer that sends and does not
	// read (default 1 MiB).
	MaxOutput int
	// MaxControlFrames is the budget of frames that carry no request:
	// SETTINGS, PING, PRIORITY, WINDOW_UPDATE, RST_STREAM, empty DATA
	// without END_STREAM and empty CONTINUATION. Each costs 1; each
	// request opened and each non-empty DATA frame we send gives 1 back,
	// up to the budget. Spent: GOAWAY ENHANCE_YOUR_CALM (default 1000).
	MaxControlFrames int
	// MaxEarlyResets bounds the streams the peer resets before we sent
	// their response's header (rapid reset, CVE-2023-44487), together with
	// the streams we refuse or reset for a stream error; each stream
	// answered in full gives one back. Past it: GOAWAY ENHANCE_YOUR_CALM
	// (default 200).
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

// initialWindow is the RFC's flow-control window before SETTINGS change it.
const initialWindow = 65535

// recentResets is how many streams we reset are remembered so that frames
// the peer sent before it saw our RST_STREAM are ignored (RFC 9113 5.1),
// and how many closed streams are told from never-opened ones.
const recentResets = 32

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
	if d.HeaderTableSize == 0 {
		d.HeaderTableSize = DefaultHeaderTableSize
	}
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
	// A CONNECT request (RFC 9113 8.5) has Authority only; other requests
	// have Method, Scheme and a non-empty Path, and Authority if sent.
	Method, Scheme, Authority, Path []byte
	// Fields are the regular fields in order, names lowercase. Cookie
	// crumbs (RFC 9113 8.2.3) are left as separate fields.
	Fields []hpack.Field
	// ContentLength is the content-length field's value, or -1.
	ContentLength int64
}

// Handler receives a connection's events. Its methods are called from Feed
// (OnReset also from Close), on the connection's goroutine; they may call
// the Server's Write*, Reset, Consumed and Shutdown methods, not Feed.
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

// stream is one open or half-closed stream.
type stream struct {
	id        uint32
	recvOpen  bool // the peer may still send (not half-closed remote)
	sendOpen  bool // we may still send (not half-closed local)
	announced bool // OnRequest was called
	responded bool // a final response's HEADERS was sent
	blocked   bool // WriteData was short of window: OnWritable is due
	sendWin   int64
	recvWin   int64 // what the peer may still send
	pending   int64 // consumed, not yet returned by WINDOW_UPDATE
	held      int64 // delivered by OnData, not yet Consumed
	cl        int64 // content-length or -1
	received  int64
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
	h   Handler
	cfg Config
	dec *hpack.Decoder
	enc *hpack.Encoder
	out []byte
	err *Error // the connection error, once one happened

	prefaceDone  bool // ClientPreface seen
	settingsSeen bool // the client's first SETTINGS seen
	acked        bool // our SETTINGS acknowledged

	streams []stream // live ones have id != 0
	dead    int      // entries of streams with id 0
	lastID  uint32   // highest stream id the peer opened (or tried to)
	reset   ring     // streams we reset lately: their frames are ignored
	closed  ring     // streams closed lately: HEADERS on them is STREAM_CLOSED

	// Receive flow control, connection level.
	connRecv    int64 // what the peer may still send
	connPending int64 // consumed, not yet returned by WINDOW_UPDATE
	// Send flow control.
	connSend      int64
	peerInitial   int64
	peerMaxFrame  uint32
	streamInitial int64 // our INITIAL_WINDOW_SIZE once acked (65535 before if smaller)

	goAwaySent bool // new streams are ignored
	goAwayRecv bool

	ctrlBudget  int
	earlyResets int

	// Header block assembly.
	hstream    uint32 // the stream whose CONTINUATIONs are due, 0 if none
	hend       bool   // END_STREAM of the block's HEADERS
	hbuf       []byte
	hcont      int    // CONTINUATIONs of the block so far
	hreset     *Error // the stream error of the block's HEADERS (self-dependency)
	blockLimit int

	// Decoding.
	emitFn   func(hpack.Field) error
	mode     uint8 // decodeRequest, decodeTrailers or decodeDiscard
	bad      bool  // a field broke a rule
	regular  bool  // a regular field was seen
	fbuf     []byte
	spans    []span
	req      Request
	pseudo   [4]span // method, scheme, authority, path
	havePs   uint8
	host     span
	haveHost bool
	blk      []byte // an encoded block we send
	status   []byte // its :status digits
	hdr      [FrameHeaderLen]byte
}

type span struct {
	n0, n1, v0, v1 int32
	sensitive      bool
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
	s := &Server{
		h:             h,
		cfg:           cfg,
		dec:           hpack.NewDecoder(max(cfg.HeaderTableSize, DefaultHeaderTableSize), cfg.MaxHeaderListSize),
		enc:           hpack.NewEncoder(),
		connRecv:      initialWindow,
		connSend:      initialWindow,
		peerInitial:   initialWindow,
		peerMaxFrame:  MinMaxFrameSize,
		streamInitial: int64(min(cfg.InitialWindowSize, initialWindow)),
		ctrlBudget:    cfg.MaxControlFrames,
		blockLimit:    int(cfg.MaxHeaderListSize) + int(cfg.MaxFrameSize),
		req:           Request{ContentLength: -1},
	}
	if cfg.InitialWindowSize >= initialWindow {
		s.streamInitial = int64(cfg.InitialWindowSize)
	}
	s.emitFn = s.emit
	s.out = AppendSettings(s.out, []Setting{
		{SettingHeaderTableSize, cfg.HeaderTableSize},
		{SettingMaxConcurrentStreams, cfg.MaxConcurrentStreams},
		{SettingInitialWindowSize, cfg.InitialWindowSize},
		{SettingMaxFrameSize, cfg.MaxFrameSize},
		{SettingMaxHeaderListSize, cfg.MaxHeaderListSize},
	})
	if inc := cfg.ConnWindowSize - initialWindow; inc > 0 {
		s.out = AppendWindowUpdate(s.out, 0, inc)
		s.connRecv += int64(inc)
	}
	return s
}

// Pending returns the bytes waiting to be sent, valid until the next call
// of a Server method. Connection goroutine.
func (s *Server) Pending() []byte { return s.out }

// Written drops the first n bytes of Pending, which the caller has sent.
// Connection goroutine.
func (s *Server) Written(n int) {
	if n >= len(s.out) {
		s.out = s.out[:0]
		return
	}
	s.out = s.out[:copy(s.out, s.out[n:])]
}

// Err returns the connection error that ended the connection, or nil.
func (s *Server) Err() error {
	if s.err == nil {
		return nil
	}
	return s.err
}

// Done reports whether the connection is finished: it failed, or a GOAWAY
// was sent or received and no stream is left. The caller closes it once
// Pending is sent. Connection goroutine.
func (s *Server) Done() bool {
	return s.err != nil || (s.goAwaySent || s.goAwayRecv) && len(s.streams) == s.dead
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
	for s.err == nil {
		f, k, perr := ParseFrame(in[n:], s.cfg.MaxFrameSize)
		if perr == nil && k == 0 {
			break
		}
		if perr != nil && k == 0 { // the header alone showed the error
			return n, s.fail(perr.(*Error))
		}
		n += k
		if !s.settingsSeen {
			if f.Type != FrameSettings || f.Flags.Has(FlagAck) {
				return n, s.fail(errFirstFrame)
			}
			s.settingsSeen = true
		}
		var e *Error
		if perr != nil {
			e = perr.(*Error)
			switch {
			case e.Stream && s.hstream != 0:
				e = errContExpected
			case e.Stream && f.Type == FrameHeaders: // decode its block all the same
				s.hreset = e
				e = s.frame(&f)
			case e.Stream && f.StreamID > s.lastID && f.Type != FramePriority:
				e = errIdleFrame
			}
		} else {
			e = s.frame(&f)
		}
		if e == nil {
			continue
		}
		if !e.Stream {
			return n, s.fail(e)
		}
		if e = s.streamError(f.StreamID, e); e != nil {
			return n, s.fail(e)
		}
	}
	if s.err != nil {
		return n, s.err
	}
	return n, nil
}

// Close ends the connection from our side (the transport closed): every
// stream the handler knew gets OnReset(CANCEL). Connection goroutine.
func (s *Server) Close() {
	if s.err == nil {
		s.err = connErr(Cancel, "closed")
		s.resetAll(Cancel)
	}
}

// fail ends the connection with GOAWAY for e.
func (s *Server) fail(e *Error) *Error {
	if s.err != nil {
		return s.err
	}
	s.err = e
	s.out = AppendGoAway(s.out, s.lastID, e.Code, []byte(e.Reason))
	s.resetAll(e.Code)
	return e
}

func (s *Server) resetAll(code ErrCode) {
	for i := 0; i < len(s.streams); i++ {
		st := &s.streams[i]
		if st.id == 0 {
			continue
		}
		id, ann := st.id, st.announced
		s.remove(st)
		if ann {
			s.h.OnReset(s, id, code)
		}
	}
}

// streamError resets stream id for e; it returns a connection error when
// the answer cannot be sent.
func (s *Server) streamError(id uint32, e *Error) *Error {
	if len(s.out) > s.cfg.MaxOutput {
		return errOutput
	}
	if e != errRefused { // counted in block
		if s.earlyResets++; s.earlyResets > s.cfg.MaxEarlyResets {
			return errRapidReset
		}
	}
	s.out = AppendRSTStream(s.out, id, e.Code)
	s.reset.put(id)
	if st := s.find(id); st != nil {
		ann := st.announced
		s.remove(st)
		if ann {
			s.h.OnReset(s, id, e.Code)
		}
	}
	return nil
}

// ring remembers the last recentResets stream ids put in it.
type ring struct {
	ids [recentResets]uint32
	n   int
}

func (r *ring) put(id uint32) {
	r.ids[r.n%recentResets] = id
	r.n++
}

func (r *ring) has(id uint32) bool {
	for _, x := range r.ids {
		if x == id && id != 0 {
			return true
		}
	}
	return false
}

func (s *Server) find(id uint32) *stream {
	if id == 0 {
		return nil
	}
	for i := range s.streams {
		if s.streams[i].id == id {
			return &s.streams[i]
		}
	}
	return nil
}

// compact drops dead entries; only where no loop over streams is running.
func (s *Server) compact() {
	if s.dead == 0 {
		return
	}
	k := 0
	for _, st := range s.streams {
		if st.id != 0 {
			s.streams[k] = st
			k++
		}
	}
	s.streams = s.streams[:k]
	s.dead = 0
}

// remove ends st, returning to the connection window what the handler
// still held of its data.
func (s *Server) remove(st *stream) {
	s.creditConn(st.held)
	s.closed.put(st.id)
	*st = stream{}
	s.dead++
}

// maybeClose ends st once both sides are closed.
func (s *Server) maybeClose(st *stream) {
	if !st.recvOpen && !st.sendOpen {
		if st.responded && s.earlyResets > 0 {
			s.earlyResets--
		}
		s.remove(st)
	}
}

func (s *Server) live() int { return len(s.streams) - s.dead }

// control charges one frame to the control budget.
func (s *Server) control() *Error {
	if s.ctrlBudget--; s.ctrlBudget < 0 {
		return errCtrlFlood
	}
	return nil
}

func (s *Server) refill() {
	if s.ctrlBudget < s.cfg.MaxControlFrames {
		s.ctrlBudget++
	}
}

// frame processes one well-formed frame.
func (s *Server) frame(f *Frame) *Error {
	if s.hstream != 0 && (f.Type != FrameContinuation || f.StreamID != s.hstream) {
		return errContExpected
	}
	switch f.Type {
	case FrameData:
		return s.data(f)
	case FrameHeaders:
		return s.headers(f)
	case FrameContinuation:
		return s.continuation(f)
	case FramePriority:
		return s.control()
	case FrameRSTStream:
		return s.rstStream(f)
	case FrameSettings:
		return s.settings(f)
	case FramePushPromise:
		return errPushPromise
	case FramePing:
		if e := s.control(); e != nil {
			return e
		}
		if !f.Flags.Has(FlagAck) && len(s.out) <= s.cfg.MaxOutput {
			s.out = AppendPing(s.out, [8]byte(f.Data), true)
		}
	case FrameGoAway:
		s.goAwayRecv = true
		s.h.OnGoAway(s, f.Code, f.Data)
	case FrameWindowUpdate:
		return s.windowUpdate(f)
	}
	return nil
}

func (s *Server) settings(f *Frame) *Error {
	if e := s.control(); e != nil {
		return e
	}
	if f.Flags.Has(FlagAck) {
		if !s.acked { // our INITIAL_WINDOW_SIZE holds from now on (6.9.2)
			s.acked = true
			delta := int64(s.cfg.InitialWindowSize) - s.streamInitial
			s.streamInitial += delta
			for j := range s.streams {
				s.streams[j].recvWin += delta
			}
			// The peer's encoder may use the RFC's 4096 until now.
			if s.cfg.HeaderTableSize < DefaultHeaderTableSize {
				s.dec.SetMaxTableSize(s.cfg.HeaderTableSize)
			}
		}
		return nil
	}
	if len(s.out) > s.cfg.MaxOutput {
		return errOutput
	}
	grew := false
	for i := range f.NumSettings() {
		st := f.Setting(i)
		switch st.ID {
		case SettingHeaderTableSize:
			s.enc.SetMaxTableSize(st.Val)
		case SettingInitialWindowSize:
			delta := int64(st.Val) - s.peerInitial
			s.peerInitial = int64(st.Val)
			for j := range s.streams {
				x := &s.streams[j]
				if x.id == 0 {
					continue
				}
				if x.sendWin += delta; x.sendWin > MaxWindow {
					return errInitWindow
				}
			}
			grew = grew || delta > 0
		case SettingMaxFrameSize:
			s.peerMaxFrame = st.Val
		}
	}
	s.out = AppendSettingsAck(s.out)
	if grew {
		s.wake(0)
	}
	return nil
}

func (s *Server) windowUpdate(f *Frame) *Error {
	if e := s.control(); e != nil {
		return e
	}
	if f.StreamID == 0 {
		if s.connSend += int64(f.Increment); s.connSend > MaxWindow {
			return errConnWindow
		}
		s.wake(0)
		return nil
	}
	if f.StreamID > s.lastID {
		return errIdleFrame
	}
	st := s.find(f.StreamID)
	if st == nil {
		return nil // closed: a WINDOW_UPDATE may cross our END_STREAM or RST
	}
	if st.sendWin += int64(f.Increment); st.sendWin > MaxWindow {
		return errStreamWindow
	}
	s.wake(f.StreamID)
	return nil
}

// wake calls OnWritable for the blocked streams (only id if id != 0)
// that have send window again.
func (s *Server) wake(id uint32) {
	for i := 0; i < len(s.streams) && s.connSend > 0 && s.err == nil; i++ {
		st := &s.streams[i]
		if st.id == 0 || !st.blocked || st.sendWin <= 0 || (id != 0 && st.id != id) {
			continue
		}
		st.blocked = false
		s.h.OnWritable(s, st.id)
	}
}

func (s *Server) rstStream(f *Frame) *Error {
	if e := s.control(); e != nil {
		return e
	}
	if f.StreamID > s.lastID {
		return errIdleFrame
	}
	st := s.find(f.StreamID)
	if st == nil {
		return nil
	}
	if !st.responded {
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

func (s *Server) data(f *Frame) *Error {
	size := int64(f.Length)
	if size > s.connRecv {
		return errConnFlow
	}
	s.connRecv -= size
	if f.StreamID > s.lastID {
		return errIdleFrame
	}
	st := s.find(f.StreamID)
	if st == nil || !st.recvOpen {
		s.creditConn(size)
		if st == nil && s.reset.has(f.StreamID) {
			return nil
		}
		return errHalfClosed
	}
	if size > st.recvWin {
		s.creditConn(size)
		return errStreamFlow
	}
	st.recvWin -= size
	p := f.Data
	end := f.Flags.Has(FlagEndStream)
	if pad := size - int64(len(p)); pad > 0 { // padding is not the handler's
		s.creditConn(pad)
		s.creditStream(st, pad)
	}
	if len(p) == 0 && !end {
		if e := s.control(); e != nil {
			return e
		}
	}
	st.received += int64(len(p))
	if st.cl >= 0 && (st.received > st.cl || end && st.received != st.cl) {
		s.creditConn(int64(len(p)))
		return errCLMismatch
	}
	st.held += int64(len(p))
	if end {
		st.recvOpen = false
	}
	id := st.id
	s.h.OnData(s, id, p, end)
	if end {
		if st = s.find(id); st != nil {
			s.maybeClose(st)
		}
	}
	return nil
}

// Consumed returns n bytes of stream id's data, delivered by OnData, to the
// peer's flow-control windows: WINDOW_UPDATEs go out once half a window
// is due. Bytes of a stream that ended are returned when it ends, so
// Consumed after that is ignored. Connection goroutine.
func (s *Server) Consumed(id uint32, n int) {
	st := s.find(id)
	if st == nil || n <= 0 || s.err != nil {
		return
	}
	k := min(int64(n), st.held)
	st.held -= k
	s.creditConn(k)
	s.creditStream(st, k)
}

func (s *Server) creditConn(k int64) {
	if k <= 0 || s.err != nil {
		return
	}
	s.connPending += k
	if s.connPending >= int64(s.cfg.ConnWindowSize)/2 {
		s.out = AppendWindowUpdate(s.out, 0, uint32(s.connPending))
		s.connRecv += s.connPending
		s.connPending = 0
	}
}

func (s *Server) creditStream(st *stream, k int64) {
	if !st.recvOpen {
		return
	}
	st.pending += k
	if st.pending >= s.streamInitial/2 {
		s.out = AppendWindowUpdate(s.out, st.id, uint32(st.pending))
		st.recvWin += st.pending
		st.pending = 0
	}
}

func (s *Server) headers(f *Frame) *Error {
	if f.StreamID%2 == 0 {
		return errEvenStream
	}
	s.hend = f.Flags.Has(FlagEndStream)
	if f.Flags.Has(FlagEndHeaders) {
		return s.block(f.StreamID, f.Data)
	}
	if len(f.Data) > s.blockLimit {
		return errBlockLarge
	}
	s.hstream, s.hcont = f.StreamID, 0
	s.hbuf = append(s.hbuf[:0], f.Data...)
	return nil
}

func (s *Server) continuation(f *Frame) *Error {
	if s.hstream == 0 {
		return errContStray
	}
	if s.hcont++; s.hcont > s.blockLimit/1024+16 {
		return errContFlood
	}
	if len(f.Data) == 0 && !f.Flags.Has(FlagEndHeaders) {
		if e := s.control(); e != nil {
			return e
		}
	}
	if len(s.hbuf)+len(f.Data) > s.blockLimit {
		return errBlockLarge
	}
	s.hbuf = append(s.hbuf, f.Data...)
	if !f.Flags.Has(FlagEndHeaders) {
		return nil
	}
	id := s.hstream
	s.hstream = 0
	return s.block(id, s.hbuf)
}

// decode decodes block in mode; it returns the HPACK error (a connection
// error) and whether the list was too large.
func (s *Server) decode(block []byte, mode uint8) (tooLarge bool, e *Error) {
	s.mode, s.bad, s.regular = mode, false, false
	s.fbuf, s.spans = s.fbuf[:0], s.spans[:0]
	s.havePs, s.haveHost = 0, false
	s.req.ContentLength = -1
	err := s.dec.Decode(block, s.emitFn)
	switch {
	case err == nil || err == errBadField:
	case errors.Is(err, hpack.ErrListTooLarge):
		return true, nil
	default:
		return false, errCompression
	}
	return false, nil
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
		tooLarge, e := s.decode(block, decodeTrailers)
		switch {
		case e != nil:
			return e
		case !end:
			return errTrailersEnd
		case tooLarge || s.bad:
			return errMalformed
		case st.cl >= 0 && st.received != st.cl:
			return errCLMismatch
		}
		s.fields()
		st.recvOpen = false
		s.h.OnTrailers(s, id, s.req.Fields)
		if st = s.find(id); st != nil {
			s.maybeClose(st)
		}
		return nil
	}
	if id <= s.lastID {
		if _, e := s.decode(block, decodeDiscard); e != nil {
			return e
		}
		switch {
		case s.reset.has(id):
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
	s.writeBlock(st.id, status, nil, true)
	st.sendOpen = false
	if st.recvOpen {
		s.out = AppendRSTStream(s.out, st.id, NoError)
		s.reset.put(st.id)
		st.recvOpen = false
	}
	s.maybeClose(st)
}

// sendable returns the open stream id we may send on, or an error.
func (s *Server) sendable(id uint32) (*stream, error) {
	if s.err != nil {
		return nil, ErrConnFailed
	}
	st := s.find(id)
	if st == nil || !st.sendOpen {
		return nil, ErrStreamGone
	}
	return st, nil
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
	s.writeBlock(id, status, fields, end)
	if end {
		st.sendOpen = false
		s.maybeClose(st)
	}
	return nil
}

// WriteTrailers sends a trailer section, which ends stream id. Connection
// goroutine.
func (s *Server) WriteTrailers(id uint32, fields []hpack.Field) error {
	st, err := s.sendable(id)
	if err != nil {
		return err
	}
	if !st.responded {
		return ErrNoHeaders
	}
	s.writeBlock(id, 0, fields, true)
	st.sendOpen = false
	s.maybeClose(st)
	return nil
}

func (s *Server) writeBlock(id uint32, status int, fields []hpack.Field, end bool) {
	b := s.enc.StartBlock(s.blk[:0])
	if status != 0 {
		s.status = strconv.AppendInt(s.status[:0], int64(status), 10)
		b = s.enc.AppendField(b, hpack.Field{Name: statusName, Value: s.status})
	}
	for _, f := range fields {
		b = s.enc.AppendField(b, f)
	}
	s.out = AppendHeaders(s.out, id, b, end, s.peerMaxFrame)
	s.blk = b[:0]
}

var statusName = []byte(":status")

// WriteData sends the first n bytes of p on stream id that the connection
// and stream send windows allow, in DATA frames of at most the peer's
// SETTINGS_MAX_FRAME_SIZE; end ends the stream if all of p was sent. When
// n < len(p) the caller keeps p[n:] and OnWritable tells when to try again.
// p is copied into Pending. Connection goroutine.
func (s *Server) WriteData(id uint32, p []byte, end bool) (n int, err error) {
	return s.writeData(id, p, end, nil)
}

// WriteDataTo is WriteData for a transport that copies what it is given
// (engine.Conn.Write, the method value, fits): it hands write what was
// pending, then each DATA frame's header and its part of p, so the payload
// is copied once, by write, and not into Pending first. write must take
// all it is given: an error, or a short count, ends the connection (Err)
// and is returned, as the peer would see a frame cut short.
// Connection goroutine.
func (s *Server) WriteDataTo(id uint32, p []byte, end bool, write func([]byte) (int, error)) (n int, err error) {
	return s.writeData(id, p, end, write)
}

func (s *Server) writeData(id uint32, p []byte, end bool, write func([]byte) (int, error)) (int, error) {
	st, err := s.sendable(id)
	if err != nil {
		return 0, err
	}
	if !st.responded {
		return 0, ErrNoHeaders
	}
	w := max(0, min(int64(len(p)), s.connSend, st.sendWin))
	all := w == int64(len(p))
	if write != nil && len(s.out) > 0 && (w > 0 || all && end) {
		if err := s.put(write, s.out); err != nil {
			return 0, err
		}
		s.out = s.out[:0]
	}
	for sent := int64(0); ; {
		k := min(w-sent, int64(s.peerMaxFrame))
		last := sent+k == w
		if k == 0 && !(all && end) {
			break
		}
		chunk, fin := p[sent:sent+k], all && end && last
		if write == nil {
			s.out = AppendData(s.out, id, chunk, fin)
		} else {
			var fl Flags
			if fin {
				fl = FlagEndStream
			}
			hdr := AppendFrameHeader(s.hdr[:0], FrameHeader{Length: uint32(k), Type: FrameData, Flags: fl, StreamID: id})
			if err := s.put(write, hdr); err != nil {
				return int(sent), err
			}
			if err := s.put(write, chunk); err != nil {
				return int(sent), err
			}
		}
		if k > 0 {
			s.refill()
		}
		if sent += k; last {
			break
		}
	}
	s.connSend -= w
	st.sendWin -= w
	if !all {
		st.blocked = true
		return int(w), nil
	}
	if end {
		st.sendOpen = false
		s.maybeClose(st)
	}
	return len(p), nil
}

// put hands b to write for WriteDataTo; a lost write fails the connection
// (no GOAWAY: the stream of frames is broken).
func (s *Server) put(write func([]byte) (int, error), b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := write(b)
	if err == nil && n < len(b) {
		err = errShortWrite
	}
	if err != nil {
		s.err = errWriteLost
		s.resetAll(InternalError)
		return err
	}
	return nil
}

// Reset ends stream id with RST_STREAM(code); the handler gets no OnReset
// for it. Connection goroutine.
func (s *Server) Reset(id uint32, code ErrCode) {
	st := s.find(id)
	if st == nil || s.err != nil {
		return
	}
	s.out = AppendRSTStream(s.out, id, code)
	s.reset.put(id)
	s.remove(st)
}

// Shutdown starts a graceful shutdown: GOAWAY(NO_ERROR) naming the last
// stream the peer opened; later streams are ignored, open ones go on, and
// Done reports when they have ended. Connection goroutine.
func (s *Server) Shutdown() {
	if s.goAwaySent || s.err != nil {
		return
	}
	s.goAwaySent = true
	s.out = AppendGoAway(s.out, s.lastID, NoError, nil)
}
