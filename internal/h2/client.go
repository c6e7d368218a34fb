package h2

import (
	"errors"
	"strconv"

	"github.com/spindlenet/spindle/internal/hpack"
)

// Response is a response's header section, decoded and validated (RFC
// 9113 8.3.2). Its slices are valid only during the ClientHandler call
// that gets it.
type Response struct {
	// Status is :status, 100..999 (101 is malformed in HTTP/2, 8.6).
	// 1xx is an interim response: the final one follows.
	Status int
	// Fields are the regular fields in order, names lowercase.
	Fields []hpack.Field
	// ContentLength is the content-length field's value, or -1.
	ContentLength int64
	// NeverIndexed has PseudoStatus where :status was sent as a
	// never-indexed literal (RFC 7541 6.2.3): the Client sets it, and
	// Server.WriteResponse sends it so, as an intermediary must pass it
	// on.
	NeverIndexed Pseudo
}

// ClientHandler receives a client connection's events. Its methods are
// called from Feed (OnReset also from Close and from a failed WriteDataTo),
// on the connection's goroutine; they may call the Client's Request,
// Write*, Reset, Consumed, Ping and Shutdown methods, not Feed.
type ClientHandler interface {
	// OnResponse: the response header section of stream id. An interim
	// response (r.Status 1xx) may come before the final one; end (no body,
	// END_STREAM) is only ever set on the final one.
	OnResponse(c *Client, id uint32, r *Response, end bool)
	// OnData: response body bytes p of stream id, a slice of Feed's input
	// valid during the call; end marks the body's end (p may be empty).
	// The handler returns the bytes with Consumed when it is done with
	// them, as a Server's does.
	OnData(c *Client, id uint32, p []byte, end bool)
	// OnTrailers: the response's trailer section, which ends it. fields
	// is valid during the call.
	OnTrailers(c *Client, id uint32, fields []hpack.Field)
	// OnReset: stream id is gone before its end; cause says why, with
	// code: the server's RST_STREAM (ResetByServer, its code),
	// REFUSED_STREAM or GOAWAY's last stream id below it
	// (ResetUnprocessed: REFUSED_STREAM or GOAWAY's code; safe to send
	// again, on another connection), a stream error we found in its
	// response (ResetStreamError, the code we sent), or the connection
	// ending (ResetConnection: Feed's error's code, Abort's, CANCEL from
	// Close, INTERNAL_ERROR from a lost write of WriteDataTo). A
	// RST_STREAM(NO_ERROR) after the whole response asks us to stop
	// sending the request (8.1). Not called for a stream the handler
	// resets itself.
	OnReset(c *Client, id uint32, code ErrCode, cause ResetCause)
	// OnWritable: the send window of stream id, which WriteData left
	// short, has room again.
	OnWritable(c *Client, id uint32)
	// OnGoAway: the server sent GOAWAY: no new requests on this
	// connection (Request fails, CanOpen is false). Streams up to last go
	// on; those above it get OnReset(ResetUnprocessed) right after this call.
	// A server may send a second GOAWAY with a lower last (a graceful
	// shutdown in two steps): it is told too. Done reports when the last
	// stream has ended.
	OnGoAway(c *Client, code ErrCode, last uint32, debug []byte)
	// OnPingAck: the server acknowledged a PING carrying data (ours from
	// Ping, or any it chose to ack): the caller measures round trips and
	// finds a dead upstream with it.
	OnPingAck(c *Client, data [8]byte)
}

// ResetCause is why a Client's stream ended before its end (OnReset):
// whether the server ended it on purpose, did not process it, sent a
// response in error, or the connection is gone.
type ResetCause uint8

const (
	// ResetByServer: the server's RST_STREAM, other than REFUSED_STREAM
	// (a gRPC server's at a deadline is CANCEL).
	ResetByServer ResetCause = iota
	// ResetUnprocessed: the server did not process the request:
	// RST_STREAM(REFUSED_STREAM), or a stream above the last stream id
	// of its GOAWAY (RFC 9113 8.7, 6.8).
	ResetUnprocessed
	// ResetStreamError: a stream error we found in the response
	// (malformed, content-length wrong, header list too large): we sent
	// RST_STREAM with the code.
	ResetStreamError
	// ResetConnection: the connection ended under the stream: Close, a
	// connection error (Feed's, Abort's), a lost write of WriteDataTo.
	ResetConnection
)

var resetCauses = [...]string{"server", "unprocessed", "stream error", "connection"}

// String returns the cause in words ("server", "unprocessed", "stream
// error", "connection").
func (r ResetCause) String() string {
	if int(r) < len(resetCauses) {
		return resetCauses[r]
	}
	return "ResetCause(" + strconv.Itoa(int(r)) + ")"
}

// Client is the client side of one HTTP/2 connection (h2c with prior
// knowledge, or a TLS connection that negotiated "h2"), sans-IO like
// Server: NewClient puts the preface and our SETTINGS in Pending; Feed
// takes the server's bytes and calls the ClientHandler; Request opens a
// stream; the Write methods, Pending/Written, flow control and the abuse
// bounds are the Server's. A Client is used by one goroutine at a time.
//
// The caller owns time: it times out our SETTINGS' acknowledgement
// (SettingsPending) and PINGs (Ping, OnPingAck), and ends a connection that
// failed them with Abort(SettingsTimeout) or Close. It owns pooling too:
// CanOpen and Available say when a connection takes no more requests
// (MAX_CONCURRENT_STREAMS reached, GOAWAY received or sent, stream ids
// used up, failed), so that the caller queues or opens another.
type Client struct {
	conn
	h      ClientHandler
	nextID uint32 // the next stream id we open; past MaxWindow, none is left

	// Decoding.
	haveStatus bool
	resp       Response
}

const decodeResponse = decodeRequest

// Errors of Request.
var (
	// ErrNoStream: the connection takes no new stream: GOAWAY was
	// received or sent, or it failed. Open another connection.
	ErrNoStream = errors.New("h2: connection takes no new streams")
	// ErrStreamIDs: the client's stream ids (up to 2^31-1) are used up;
	// open another connection (this one finishes its streams).
	ErrStreamIDs = errors.New("h2: stream ids used up")
	// ErrMaxStreams: the server's SETTINGS_MAX_CONCURRENT_STREAMS streams
	// are open; wait for one to end (CanOpen) or open another connection.
	ErrMaxStreams = errors.New("h2: server's MAX_CONCURRENT_STREAMS reached")
)

var (
	errRespMalformed = streamErr(ProtocolError, "malformed response header or trailer section")
	errRespTooLarge  = streamErr(Cancel, "response header list larger than MaxHeaderListSize")
	errServerStream  = connErr(ProtocolError, "HEADERS on a stream the client did not open")
	errPushRecv      = connErr(ProtocolError, "PUSH_PROMISE with push disabled")
)

// NewClient returns a client connection calling h, with the client
// preface, our SETTINGS (SETTINGS_ENABLE_PUSH 0; cfg's window, frame and
// header sizes; cfg.MaxConcurrentStreams is not sent, as no stream is
// opened by the server) and the connection WINDOW_UPDATE already in
// Pending. Until the server's SETTINGS arrive, at most
// DefaultMaxConcurrentStreams streams are opened.
func NewClient(h ClientHandler, cfg *Config) *Client {
	c := &Client{h: h, nextID: 1}
	c.conn = newConn(c, cfg.withDefaults(), true)
	c.emitFn, c.list = c.emit, &c.resp.Fields
	c.resp.ContentLength = -1
	c.out = append(c.out, ClientPreface...)
	c.out = AppendSettings(c.out, []Setting{
		{SettingHeaderTableSize, c.cfg.HeaderTableSize},
		{SettingEnablePush, 0},
		{SettingInitialWindowSize, c.cfg.InitialWindowSize},
		{SettingMaxFrameSize, c.cfg.MaxFrameSize},
		{SettingMaxHeaderListSize, c.cfg.MaxHeaderListSize},
	})
	c.appendWindowUpdate()
	return c
}

// Feed processes the complete frames at the start of in (the server's
// SETTINGS first) and returns how many bytes it consumed, as Server.Feed
// does. A connection error is returned as *Error after GOAWAY was
// appended to Pending and every open stream got OnReset; Feed then
// consumes nothing more. Connection goroutine.
func (c *Client) Feed(in []byte) (n int, err error) {
	if c.err != nil {
		return 0, c.err
	}
	c.compact()
	return c.frames(in, 0)
}

// SettingsPending reports whether our SETTINGS still await the server's
// acknowledgement; the caller that sees it true too long ends the
// connection with Abort(SettingsTimeout) (RFC 9113 6.5.3).
func (c *Client) SettingsPending() bool { return !c.acked && c.err == nil }

// SettingsSeen reports whether the server's first SETTINGS arrived: until
// then Available counts DefaultMaxConcurrentStreams, which the server's
// SETTINGS may lower (streams past its bound are refused), so a caller
// that must respect a server's bound opens streams only once this is
// true. Connection goroutine.
func (c *Client) SettingsSeen() bool { return c.settingsSeen && c.err == nil }

// Available returns how many more streams Request may open now: 0 once
// the server's MAX_CONCURRENT_STREAMS are open, after GOAWAY either way,
// when the stream ids are used up or the connection failed.
func (c *Client) Available() int {
	if c.err != nil || c.goAwayRecv || c.goAwaySent || c.nextID > MaxWindow {
		return 0
	}
	n := int64(c.peerMaxStreams) - int64(c.live())
	left := (int64(MaxWindow)-int64(c.nextID))/2 + 1
	return int(max(0, min(n, left)))
}

// CanOpen reports whether Request may open a stream now (Available > 0).
func (c *Client) CanOpen() bool { return c.Available() > 0 }

// Request opens a stream with request r's header section and returns its
// id (odd, increasing). r's pseudo-header fields are sent as given, those
// empty left out (a CONNECT has Method and Authority only), never-indexed
// those in r.NeverIndexed; its Fields
// follow, names lowercase and no connection-specific ones (the caller's:
// they are not checked); r.ContentLength is not used (put content-length
// in Fields). end: no body (END_STREAM). The body follows with WriteData
// or WriteDataTo, then maybe WriteTrailers. Errors: ErrMaxStreams (wait
// or open another connection), ErrNoStream and ErrStreamIDs (open another
// connection). Connection goroutine.
func (c *Client) Request(r *Request, end bool) (id uint32, err error) {
	switch {
	case c.err != nil || c.goAwayRecv || c.goAwaySent:
		return 0, ErrNoStream
	case c.nextID > MaxWindow:
		return 0, ErrStreamIDs
	case c.live() >= int(c.peerMaxStreams):
		return 0, ErrMaxStreams
	}
	id = c.nextID
	c.nextID += 2
	c.lastID = id
	pseudo := [4]hpack.Field{
		{Name: methodName, Value: r.Method}, {Name: schemeName, Value: r.Scheme},
		{Name: authorityName, Value: r.Authority}, {Name: pathName, Value: r.Path},
	}
	b := c.startBlock()
	for i, f := range pseudo { // in the order of Pseudo's members
		if len(f.Value) > 0 {
			f.Sensitive = r.NeverIndexed&(1<<i) != 0
			b = c.enc.AppendField(b, f)
		}
	}
	c.sendBlock(id, b, r.Fields, end)
	c.refill()
	c.compact()
	c.streams = append(c.streams, stream{
		id: id, recvOpen: true, sendOpen: !end, announced: true, responded: true,
		noBody: string(r.Method) == "HEAD", connect: string(r.Method) == "CONNECT",
		sendWin: c.peerInitial, recvWin: c.streamInitial, cl: -1,
	})
	return id, nil
}

var (
	methodName    = []byte(":method")
	schemeName    = []byte(":scheme")
	authorityName = []byte(":authority")
	pathName      = []byte(":path")
)

// Ping sends a PING carrying data; OnPingAck reports the server's answer.
// Connection goroutine.
func (c *Client) Ping(data [8]byte) {
	if c.err != nil {
		return
	}
	c.pings++
	c.out = AppendPing(c.out, data, false)
}

// Abort ends the connection with GOAWAY(code) (SettingsTimeout when the
// server did not acknowledge our SETTINGS in time, say): every open
// stream gets OnReset(code). Connection goroutine.
func (c *Client) Abort(code ErrCode) {
	c.fail(&Error{Code: code, Reason: "aborted"})
}

// frame processes a frame conn.frame leaves to the side.
func (c *Client) frame(f *Frame) *Error {
	switch f.Type {
	case FrameHeaders:
		if f.StreamID%2 == 0 || f.StreamID > c.lastID {
			return errServerStream
		}
		return c.headerBlock(f)
	case FrameRSTStream:
		return c.rstStream(f)
	case FramePushPromise:
		return errPushRecv
	case FramePing: // an ACK (conn.frame charged it unless it answers ours)
		c.h.OnPingAck(c, [8]byte(f.Data))
	case FrameGoAway:
		// A GOAWAY costs a control frame, as on the Server: else a server
		// could send them without end, each a call to OnGoAway.
		if e := c.control(); e != nil {
			return e
		}
		c.goAway(f)
	}
	return nil
}

// goAway: streams above the server's last stream id were not processed
// (RFC 9113 6.8).
func (c *Client) goAway(f *Frame) {
	c.goAwayRecv = true
	c.h.OnGoAway(c, f.Code, f.LastStream, f.Data)
	for i := 0; i < len(c.streams) && c.err == nil; i++ {
		st := &c.streams[i]
		if st.id == 0 || st.id <= f.LastStream {
			continue
		}
		id := st.id
		c.remove(st)
		c.h.OnReset(c, id, f.Code, ResetUnprocessed)
	}
}

func (c *Client) rstStream(f *Frame) *Error {
	if e := c.control(); e != nil {
		return e
	}
	if c.idle(f.StreamID) {
		return errIdleFrame
	}
	st := c.find(f.StreamID)
	if st == nil {
		return nil
	}
	c.remove(st)
	cause := ResetByServer
	if f.Code == RefusedStream {
		cause = ResetUnprocessed
	}
	c.h.OnReset(c, f.StreamID, f.Code, cause)
	return nil
}

// block handles a complete header block of stream id: a response's
// header section, interim or final, or its trailers.
func (c *Client) block(id uint32, block []byte) *Error {
	end := c.hend
	st := c.find(id)
	if e := c.hreset; e != nil || st == nil || !st.recvOpen {
		c.hreset = nil
		if _, ce := c.decode(block, decodeDiscard); ce != nil {
			return ce
		}
		switch {
		case e != nil:
			return e
		case st != nil:
			return errHalfClosed
		case c.ignored(id):
			return nil
		}
		return errClosedHeaders
	}
	if st.final {
		if e := c.trailers(st, block, end, errRespMalformed); e != nil {
			return e
		}
		c.h.OnTrailers(c, id, c.tfields)
		c.closeIfDone(id)
		return nil
	}
	tooLarge, e := c.decode(block, decodeResponse)
	switch {
	case e != nil:
		return e
	case tooLarge:
		return errRespTooLarge
	case c.bad || !c.haveStatus || c.resp.Status == 101 || c.resp.Status < 200 && end:
		return errRespMalformed
	}
	r := &c.resp
	r.Fields = c.fields(r.Fields)
	if r.Status >= 200 {
		st.final = true
		st.cl = r.ContentLength
		switch {
		case st.connect && r.Status < 300:
			st.cl = -1 // a tunnel's bytes (RFC 9110 9.3.6: ignored)
		case st.noBody || r.Status == 204 || r.Status == 304:
			// No content (RFC 9110 6.4.1), whatever content-length says
			// (RFC 9113 8.1.1): a DATA byte is malformed.
			st.cl = 0
		}
		if end && st.cl > 0 {
			return errCLMismatch
		}
		if end {
			st.recvOpen = false
		}
	}
	c.h.OnResponse(c, id, r, end)
	if end {
		c.closeIfDone(id)
	}
	return nil
}

func (c *Client) clear() {
	c.haveStatus = false
	c.resp.Status, c.resp.ContentLength, c.resp.NeverIndexed = 0, -1, 0
}

// emit checks a response's field (RFC 9113 8.2, 8.3.2) and keeps it.
func (c *Client) emit(f hpack.Field) error {
	if c.mode == decodeDiscard {
		return errBadField
	}
	name := f.Name
	if len(name) > 0 && name[0] == ':' {
		if c.mode == decodeTrailers || c.regular || c.haveStatus || string(name) != ":status" {
			c.bad = true
			return errBadField
		}
		v := f.Value
		if len(v) != 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9' {
			c.bad = true
			return errBadField
		}
		c.resp.Status = int(v[0]-'0')*100 + int(v[1]-'0')*10 + int(v[2]-'0')
		if f.Sensitive {
			c.resp.NeverIndexed = PseudoStatus
		}
		c.haveStatus = true
		return nil
	}
	c.regular = true
	if !validName(name) || !validValue(f.Value) || connSpecific(name, f.Value) {
		c.bad = true
		return errBadField
	}
	if string(name) == "content-length" {
		v, ok := parseCL(f.Value)
		if !ok || c.resp.ContentLength >= 0 && c.resp.ContentLength != v {
			c.bad = true
			return errBadField
		}
		c.resp.ContentLength = v
	}
	c.spans = append(c.spans, c.store(f))
	return nil
}

func (c *Client) deliver(id uint32, p []byte, end bool) { c.h.OnData(c, id, p, end) }
func (c *Client) writable(id uint32)                    { c.h.OnWritable(c, id) }

// gone: a stream error (the connection goes on) or the connection's end
// (c.err set first: Close, fail, a lost write).
func (c *Client) gone(id uint32, code ErrCode) {
	cause := ResetStreamError
	if c.err != nil {
		cause = ResetConnection
	}
	c.h.OnReset(c, id, code, cause)
}
