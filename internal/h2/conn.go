package h2

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/spindlenet/spindle/internal/hpack"
)

// conn is what the two sides of a connection share: the output buffer,
// the streams and their flow control both ways, SETTINGS, PING and
// WINDOW_UPDATE handling, header block assembly, the abuse bounds, and the
// frame loop of Feed. Server and Client embed it and handle what differs
// (stream opening, header sections, GOAWAY, RST_STREAM) through events.
type conn struct {
	ev     events
	client bool // the client side: our GOAWAY names stream 0, DATA needs a final response first
	cfg    Config
	dec    *hpack.Decoder
	enc    *hpack.Encoder
	out    []byte
	err    *Error // the connection error, once one happened
	// sent is the output dropped from out (Written) since the start:
	// out[0] is the sent-th byte of output. connWU is where the last
	// connection-level WINDOW_UPDATE we made begins in the output (from
	// the start), +1 (0: none).
	sent, connWU int64

	settingsSeen bool // the peer's first SETTINGS seen
	acked        bool // our SETTINGS acknowledged

	streams []stream // in id order (id | was); live ones have id != 0
	dead    int      // entries of streams with id 0
	waking  bool     // wake walks streams by index: compact waits
	lastID  uint32   // highest stream id opened (or tried): by the peer on a Server, by us on a Client
	// Every odd stream up to lastID not in streams is closed (RFC 9113 5.1.1:
	// opening one closes the idle ones below it). reset holds those the
	// peer may still have frames in flight on, which are ignored; closed
	// only picks the code of a HEADERS on a closed stream.
	reset  quiet
	closed ring // streams closed lately: HEADERS on them is STREAM_CLOSED, else PROTOCOL_ERROR

	// Receive flow control, connection level.
	connRecv    int64 // what the peer may still send
	connPending int64 // consumed, not yet returned by WINDOW_UPDATE
	// Send flow control.
	connSend       int64
	connOwed       int64 // DATA bytes sent the peer has not credited back (see credit)
	goneOwed       int64 // the same, of the streams that ended
	peerInitial    int64
	peerMaxFrame   uint32
	peerMaxStreams uint32 // the peer's SETTINGS_MAX_CONCURRENT_STREAMS
	streamInitial  int64  // our INITIAL_WINDOW_SIZE once acked (65535 before, if smaller: the peer may use it until then)

	goAwaySent  bool // our final GOAWAY: no new streams
	goAwayRecv  bool
	goAwayLast  uint32 // the last stream id our final GOAWAY named
	goAwayFirst bool   // a Server's Shutdown sent GOAWAY(2^31-1) and its PING: the final GOAWAY waits for the ACK

	ctrlBudget  int
	earlyResets int
	pings       int // PINGs of ours not yet acknowledged (a Client's Ping, a Server's Shutdown)

	// Header block assembly.
	hstream    uint32 // the stream whose CONTINUATIONs are due, 0 if none
	hend       bool   // END_STREAM of the block's HEADERS
	hbuf       []byte
	hcont      int    // CONTINUATIONs of the block so far
	hreset     *Error // the stream error of the block's HEADERS (self-dependency)
	blockLimit int

	// Decoding.
	emitFn  func(hpack.Field) error // the side's emit
	mode    uint8                   // decodeRequest (decodeResponse), decodeTrailers or decodeDiscard
	bad     bool                    // a field broke a rule
	regular bool                    // a regular field was seen
	tfields []hpack.Field           // a trailer section's fields

	fbuf  []byte         // decoded fields' bytes
	spans []span         // the regular fields' places in fbuf
	list  *[]hpack.Field // the side's list of a header section's fields
	blk   []byte         // an encoded block we send
	hdrs  []byte         // WriteDataTo's frame headers
	vec   [][]byte       // WriteDataTo's slices
	f     Frame          // the frame being processed (a local would escape to the heap through events)
}

// events are what a side does that the other does not.
type events interface {
	// frame processes a frame conn.frame leaves to the side.
	frame(f *Frame) *Error
	// block handles a complete header block of stream id (END_STREAM in
	// hend).
	block(id uint32, block []byte) *Error
	// deliver hands received DATA to the handler.
	deliver(id uint32, p []byte, end bool)
	// writable tells the handler stream id may send again.
	writable(id uint32)
	// gone tells the handler stream id ended before its end with code.
	gone(id uint32, code ErrCode)
	// clear resets the side's decoding state before a header block.
	clear()
}

// stream is one open or half-closed stream.
type stream struct {
	id        uint32
	recvOpen  bool // the peer may still send (not half-closed remote)
	sendOpen  bool // we may still send (not half-closed local)
	announced bool // the handler knows the stream (OnRequest was called; a Client's always)
	responded bool // our final HEADERS was sent (a Client's request: always)
	local     bool // a Server's: the handler ends it for the request's fault (Server.Local)
	dataSent  bool // a DATA byte of ours was sent (a reset after it is not early)
	final     bool // a Client's: the final response's HEADERS arrived
	noBody    bool // a Client's: a response to HEAD, which has no content whatever its content-length
	connect   bool // a Client's: a CONNECT, whose 2xx response's content-length is ignored
	blocked   bool // WriteData was short of window: OnWritable is due
	sendWin   int64
	owed      int64 // DATA bytes sent the peer has not credited back (see credit)
	recvWin   int64 // what the peer may still send
	pending   int64 // consumed, not yet returned by WINDOW_UPDATE
	held      int64 // delivered by OnData, not yet Consumed
	cl        int64 // content-length or -1
	received  int64
	wu        int64 // where its last WINDOW_UPDATE begins in the output, +1 (see conn.connWU)
	// was is a removed entry's id (id is 0): streams stays in id order
	// for find.
	was uint32
}

type span struct {
	n0, n1, v0, v1 int32
	sensitive      bool
}

// newConn sets up the state both sides start with.
func newConn(ev events, cfg Config, client bool) conn {
	c := conn{
		ev:             ev,
		client:         client,
		cfg:            cfg,
		dec:            hpack.NewDecoder(DefaultHeaderTableSize, cfg.MaxHeaderListSize),
		enc:            hpack.NewEncoder(),
		connRecv:       initialWindow,
		connSend:       initialWindow,
		peerInitial:    initialWindow,
		peerMaxFrame:   MinMaxFrameSize,
		peerMaxStreams: DefaultMaxConcurrentStreams,
		streamInitial:  int64(max(cfg.InitialWindowSize, initialWindow)),
		ctrlBudget:     cfg.MaxControlFrames,
		blockLimit:     int(cfg.MaxHeaderListSize) + int(cfg.MaxFrameSize),
	}
	return c
}

// appendWindowUpdate raises the connection's receive window to
// ConnWindowSize, after our SETTINGS.
func (c *conn) appendWindowUpdate() {
	if inc := c.cfg.ConnWindowSize - initialWindow; inc > 0 {
		c.out = AppendWindowUpdate(c.out, 0, inc)
		c.connRecv += int64(inc)
	}
}

// Pending returns the bytes waiting to be sent, valid until the next call
// of a method of the connection (past MaxOutput a WINDOW_UPDATE in it
// may be raised in place: the caller calls Written for what it sent
// before it calls another method). Connection goroutine.
func (c *conn) Pending() []byte { return c.out }

// Written drops the first n bytes of Pending, which the caller has sent.
// Connection goroutine.
func (c *conn) Written(n int) {
	if n >= len(c.out) {
		c.sent += int64(len(c.out))
		c.out = c.out[:0]
		return
	}
	c.sent += int64(n)
	c.out = c.out[:copy(c.out, c.out[n:])]
}

// Err returns the connection error that ended the connection, or nil.
func (c *conn) Err() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

// Done reports whether the connection is finished: it failed, or a GOAWAY
// was sent or received and no stream is left. The caller closes it once
// Pending is sent. Connection goroutine.
func (c *conn) Done() bool {
	return c.err != nil || (c.goAwaySent || c.goAwayRecv) && c.live() == 0
}

// frames processes the complete frames of in[n:] (see Feed).
func (c *conn) frames(in []byte, n int) (int, error) {
	for c.err == nil {
		var k int
		var perr error
		c.f, k, perr = ParseFrame(in[n:], c.cfg.MaxFrameSize)
		f := &c.f
		if perr == nil && k == 0 {
			break
		}
		if perr != nil && k == 0 { // the header alone showed the error
			return n, c.fail(perr.(*Error))
		}
		n += k
		if !c.settingsSeen {
			if f.Type != FrameSettings || f.Flags.Has(FlagAck) {
				return n, c.fail(errFirstFrame)
			}
			c.settingsSeen = true
		}
		var e *Error
		if perr != nil {
			e = perr.(*Error)
			switch {
			case e.Stream && c.hstream != 0:
				e = errContExpected
			case e.Stream && f.Type == FrameHeaders: // decode its block all the same
				c.hreset = e
				e = c.frame(f)
			case e.Stream && c.idle(f.StreamID) && f.Type != FramePriority:
				e = errIdleFrame
			}
		} else {
			e = c.frame(f)
		}
		if e == nil && c.earlyResets > c.cfg.MaxEarlyResets {
			e = errRapidReset // the handler's Reset of a Local stream (Reset)
		}
		if e == nil {
			continue
		}
		if !e.Stream {
			return n, c.fail(e)
		}
		if e = c.streamError(f, e); e != nil {
			return n, c.fail(e)
		}
	}
	if c.err != nil {
		return n, c.err
	}
	c.trim()
	return n, nil
}

// The header buffers a connection keeps between Feeds, in bytes and in
// fields: a section beyond them (up to MaxHeaderListSize, which some 2 KB
// of HPACK indexing the dynamic table decode to) is decoded into buffers
// dropped when its Feed returns, so that a connection does not hold the
// largest it was sent (some 300 KB) for as long as it is open.
const (
	keepBuf    = 4 << 10
	keepFields = 64
)

// trim drops the header buffers grown past keepBuf or keepFields, whose
// contents the handler's calls of a Feed alone see; hbuf not while it
// gathers a block.
func (c *conn) trim() {
	if cap(c.hbuf) > keepBuf && c.hstream == 0 {
		c.hbuf = nil
	}
	if cap(c.fbuf) > keepBuf {
		c.fbuf = nil
	}
	if cap(c.spans) > keepFields {
		c.spans = nil
	}
	if cap(c.tfields) > keepFields {
		c.tfields = nil
	}
	if cap(*c.list) > keepFields {
		*c.list = nil
	}
}

// Close ends the connection from our side (the transport closed): every
// stream the handler knew gets OnReset(CANCEL). Connection goroutine.
func (c *conn) Close() {
	if c.err == nil {
		c.err = connErr(Cancel, "closed")
		c.resetAll(Cancel)
	}
}

// fail ends the connection with GOAWAY for e.
func (c *conn) fail(e *Error) *Error {
	if c.err != nil {
		return c.err
	}
	c.err = e
	c.out = AppendGoAway(c.out, c.goAwayID(), e.Code, []byte(e.Reason))
	c.resetAll(e.Code)
	return e
}

func (c *conn) resetAll(code ErrCode) {
	for i := 0; i < len(c.streams); i++ {
		st := &c.streams[i]
		if st.id == 0 {
			continue
		}
		id, ann := st.id, st.announced
		c.remove(st)
		if ann {
			c.ev.gone(id, code)
		}
	}
}

// streamError resets stream id for e, found in frame f; it returns a
// connection error when the answer cannot be sent.
func (c *conn) streamError(f *Frame, e *Error) *Error {
	if len(c.out) > c.cfg.MaxOutput {
		return errOutput
	}
	if e != errRefused { // counted in block
		if c.earlyResets++; c.earlyResets > c.cfg.MaxEarlyResets {
			return errRapidReset
		}
	}
	id := f.StreamID
	c.out = AppendRSTStream(c.out, id, e.Code)
	st := c.find(id)
	// The peer may go on sending until it sees the RST_STREAM: on a
	// stream open its way, or one whose opening header block we refused
	// or found in error without END_STREAM.
	if st != nil && st.recvOpen || st == nil && (f.Type == FrameHeaders || f.Type == FrameContinuation) && !c.hend {
		c.quieten(id)
	}
	if st != nil {
		ann := st.announced
		c.remove(st)
		if ann {
			c.ev.gone(id, e.Code)
		}
	}
	return nil
}

// quiet is the streams we reset while the peer could still send on them:
// frames it sent before it saw our RST_STREAM are ignored (RFC 9113 5.1).
// A ring of up to the limit quieten gives, the oldest overwritten once
// full.
type quiet struct {
	ids  []uint32
	next int // where the next id goes once the ring is full
	// floor is the highest id overwritten: on a Client, whose own resets
	// are not bounded per round trip, a closed stream at or below it may
	// be one we reset (frames on it are ignored, see ignored).
	floor uint32
}

func (q *quiet) put(id uint32, limit int) {
	if q.ids == nil { // once per connection, at its first reset
		q.ids = make([]uint32, 0, limit)
	}
	if len(q.ids) < limit && q.next == 0 {
		q.ids = append(q.ids, id)
		return
	}
	q.floor = max(q.floor, q.ids[q.next])
	q.ids[q.next] = id
	q.next = (q.next + 1) % len(q.ids)
}

func (q *quiet) has(id uint32) bool {
	for _, x := range q.ids {
		if x == id {
			return true
		}
	}
	return false
}

// maxQuiet bounds quiet's limit for large configured limits.
const maxQuiet = 4096

// quieten remembers stream id, which we reset while the peer could still
// send on it. A peer keeping to MaxConcurrentStreams has frames in flight
// only on streams it thinks open, so on at most that many we reset (a
// Client: the server's limit), and on the streams refused past it before
// it had our SETTINGS, each an early reset: the limit is their sum, so a
// stream falls out of reset only when such a peer can send on it no more
// (the peer that does is answered as on any closed stream). One
// allocation per connection that resets a stream, none per request.
func (c *conn) quieten(id uint32) {
	n := uint64(c.cfg.MaxConcurrentStreams)
	if c.client {
		n = max(n, uint64(c.peerMaxStreams))
	}
	c.reset.put(id, int(min(n+uint64(c.cfg.MaxEarlyResets), maxQuiet)))
}

// ring remembers the last recentClosed stream ids put in it.
type ring struct {
	ids [recentClosed]uint32
	n   int
}

func (r *ring) put(id uint32) {
	r.ids[r.n%recentClosed] = id
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

// idle reports whether stream id is idle (RFC 9113 5.1): above lastID,
// or even, a stream a server opens (with push, which neither side does),
// which the client's streams do not close (5.1.1).
func (c *conn) idle(id uint32) bool { return id > c.lastID || id%2 == 0 }

// ignored reports whether frames on stream id, closed (not open, at most
// lastID), are ignored: we reset it while the peer could still send on
// it, or (on a Server) the peer opened it after our GOAWAY's last stream
// id (RFC 9113 6.8). Their DATA still counts toward the connection
// window (6.9). On a Client, whose own resets are not bounded per round
// trip (Reset frees the stream's slot at once), a closed stream at or
// below the highest id the ring let go may be one we reset and is ignored
// too. Frames on other closed streams are the peer's error,
// except WINDOW_UPDATE, RST_STREAM and PRIORITY, ignored on any (5.1).
func (c *conn) ignored(id uint32) bool {
	return c.reset.has(id) || c.client && id <= c.reset.floor || !c.client && c.goAwaySent && id > c.goAwayLast
}

// find returns live stream id or nil, by a binary search: with many
// streams open, a linear scan per frame was most of a small frame's cost.
func (c *conn) find(id uint32) *stream {
	lo, hi := 0, len(c.streams)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if st := &c.streams[m]; st.id|st.was < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if id != 0 && lo < len(c.streams) && c.streams[lo].id == id {
		return &c.streams[lo]
	}
	return nil
}

// compact drops dead entries; only where no loop over streams is running
// (wake's calls OnWritable, which may call a Client's Request).
func (c *conn) compact() {
	if c.dead == 0 || c.waking {
		return
	}
	k := 0
	for _, st := range c.streams {
		if st.id != 0 {
			c.streams[k] = st
			k++
		}
	}
	c.streams = c.streams[:k]
	c.dead = 0
}

// remove ends st, returning to the connection window what the handler
// still held of its data; what the peer owes of its window goes to
// goneOwed, for the updates that cross its end.
func (c *conn) remove(st *stream) {
	c.creditConn(st.held)
	c.goneOwed += st.owed
	c.closed.put(st.id)
	*st = stream{was: st.id | st.was}
	c.dead++
}

// maybeClose ends st once both sides are closed. A stream the handler
// answered in full gives an early reset back; one the Server answered
// itself (a 431), or the handler did (Server.Local), does not, or a
// client could pay for each rapid reset with a cheap oversized or
// malformed request.
func (c *conn) maybeClose(st *stream) {
	if !st.recvOpen && !st.sendOpen {
		if st.responded && st.announced && !st.local && c.earlyResets > 0 {
			c.earlyResets--
		}
		c.remove(st)
	}
}

func (c *conn) live() int { return len(c.streams) - c.dead }

// control charges one frame to the control budget.
func (c *conn) control() *Error {
	if c.ctrlBudget--; c.ctrlBudget < 0 {
		return errCtrlFlood
	}
	return nil
}

func (c *conn) refill() {
	if c.ctrlBudget < c.cfg.MaxControlFrames {
		c.ctrlBudget++
	}
}

// frame processes one well-formed frame: those both sides handle alike
// here, the others (HEADERS, RST_STREAM, PUSH_PROMISE, GOAWAY, PING ACKs,
// unknown types) in the side's frame.
func (c *conn) frame(f *Frame) *Error {
	if c.hstream != 0 && (f.Type != FrameContinuation || f.StreamID != c.hstream) {
		return errContExpected
	}
	switch f.Type {
	case FrameData:
		return c.data(f)
	case FrameContinuation:
		return c.continuation(f)
	case FramePriority:
		return c.control()
	case FrameSettings:
		return c.settings(f)
	case FrameWindowUpdate:
		return c.windowUpdate(f)
	case FramePing:
		if f.Flags.Has(FlagAck) && c.pings > 0 {
			// The answer to a PING of ours (a Client's) costs nothing,
			// also once the peer's frames spent the budget: our liveness
			// check must not be what ends the connection.
			c.pings--
		} else if e := c.control(); e != nil {
			return e
		}
		if !f.Flags.Has(FlagAck) {
			if len(c.out) <= c.cfg.MaxOutput {
				c.out = AppendPing(c.out, [8]byte(f.Data), true)
			}
			return nil
		}
	}
	return c.ev.frame(f)
}

func (c *conn) settings(f *Frame) *Error {
	if e := c.control(); e != nil {
		return e
	}
	if f.Flags.Has(FlagAck) {
		if !c.acked { // our INITIAL_WINDOW_SIZE holds from now on (6.9.2)
			c.acked = true
			delta := int64(c.cfg.InitialWindowSize) - c.streamInitial
			c.streamInitial += delta
			for j := range c.streams {
				c.streams[j].recvWin += delta
			}
			// Our HEADER_TABLE_SIZE binds the peer's encoder from now
			// on (RFC 9113 6.5.3); until now it could only use the
			// RFC's 4096 bytes (RFC 7541 4.2), which the decoder started
			// with. A lower value needs a size update in the next block;
			// a higher one the peer may reach with one, or never.
			if c.cfg.HeaderTableSize != DefaultHeaderTableSize {
				c.dec.SetMaxTableSize(c.cfg.HeaderTableSize)
			}
		}
		return nil
	}
	if len(c.out) > c.cfg.MaxOutput {
		return errOutput
	}
	// INITIAL_WINDOW_SIZE moves every stream's window by the same amount
	// at each value (6.9.2), so one pass over the streams with the highest
	// value and the last does what a pass for each value would, which a
	// frame of 2730 of them made cost 2730 passes.
	initial, highest := c.peerInitial, int64(-1)
	for i := range f.NumSettings() {
		st := f.Setting(i)
		switch st.ID {
		case SettingHeaderTableSize:
			c.enc.SetMaxTableSize(st.Val)
		case SettingInitialWindowSize:
			c.peerInitial = int64(st.Val)
			highest = max(highest, c.peerInitial)
		case SettingMaxFrameSize:
			c.peerMaxFrame = st.Val
		case SettingMaxConcurrentStreams:
			c.peerMaxStreams = st.Val
		case SettingEnablePush:
			if c.client && st.Val != 0 { // RFC 9113 6.5.2
				return errServerPush
			}
		}
	}
	if highest >= 0 {
		for j := range c.streams {
			x := &c.streams[j]
			if x.id == 0 {
				continue
			}
			if x.sendWin+highest-initial > MaxWindow {
				return errInitWindow
			}
			x.sendWin += c.peerInitial - initial
		}
	}
	c.out = AppendSettingsAck(c.out)
	if c.peerInitial > initial {
		c.wake()
	}
	return nil
}

// minCredit is the least increment a WINDOW_UPDATE returning window our
// DATA used goes free of the control budget with, unless it returns all
// that is owed (see credit).
const minCredit = 1024

// credit reports whether a WINDOW_UPDATE of inc returns window our DATA
// used, owed at its level (the connection, a stream, or the streams that
// ended, pooled): inc no more than owed, and at least minCredit of it or
// all of it. It takes inc off owed.
//
// Such an update is traffic in proportion to our own DATA and is not
// charged to the control budget: a peer with small receive windows
// credits the stream and the connection every few frames (Go's net/http
// at every read of 4 KiB or more), two updates per DATA frame or more,
// which charged one each against the one a DATA frame gives back ended
// long transfers with ENHANCE_YOUR_CALM. The free updates at a level are
// at most one per minCredit bytes we sent plus one per DATA frame (one of
// less than minCredit must return all that is owed, which is then 0 until
// we send again): 13 bytes of WINDOW_UPDATE per KiB of our DATA, and one
// per DATA frame, at each level. Any other update is charged: credit for
// nothing sent or beyond it (a flood with no data in flight), increments
// below minCredit while more is owed (1 byte at a time while data flows),
// updates on streams that ended beyond what they were owed (the pool is
// for a peer that reads a response's last window after its END_STREAM and
// credits the stream as it reads). Go's x/net/http2 and nghttp2 do not
// count WINDOW_UPDATE at all (they bound the frames they queue in answer,
// as MaxOutput does here); Envoy allows so many per DATA frame sent.
func credit(owed *int64, inc int64) bool {
	free := inc <= *owed && inc >= min(*owed, minCredit)
	*owed = max(0, *owed-inc)
	return free
}

func (c *conn) windowUpdate(f *Frame) *Error {
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if !credit(&c.connOwed, inc) {
			if e := c.control(); e != nil {
				return e
			}
		}
		if c.connSend += inc; c.connSend > MaxWindow {
			return errConnWindow
		}
		c.wake()
		return nil
	}
	st := c.find(f.StreamID)
	owed := &c.goneOwed
	if st != nil {
		owed = &st.owed
	}
	if !credit(owed, inc) {
		if e := c.control(); e != nil {
			return e
		}
	}
	if c.idle(f.StreamID) {
		return errIdleFrame
	}
	if st == nil {
		return nil // closed: a WINDOW_UPDATE may cross our END_STREAM or RST
	}
	if st.sendWin += inc; st.sendWin > MaxWindow {
		return errStreamWindow
	}
	c.wakeStream(st)
	return nil
}

// wakeStream calls OnWritable for st if it is blocked and has send window
// again (due): after its WINDOW_UPDATE, whose stream is at hand (find:
// walking every stream open for it, as wake does, made each such frame
// cost in proportion to the streams open), and for each stream wake
// walks.
func (c *conn) wakeStream(st *stream) {
	if st.due(c) {
		st.blocked = false
		c.ev.writable(st.id)
	}
}

// wake calls OnWritable for the blocked streams that have send window
// again. An OnWritable may use up the connection's window or fail it:
// the streams after it are then not due.
func (c *conn) wake() {
	c.waking = true
	for i := 0; i < len(c.streams); i++ {
		if st := &c.streams[i]; st.id != 0 {
			c.wakeStream(st)
		}
	}
	c.waking = false
}

// due reports whether OnWritable is due for st, a stream of c: WriteData
// was short of window for it, and it and the connection have send window
// again, the connection not failed.
func (st *stream) due(c *conn) bool {
	return st.blocked && st.sendWin > 0 && c.connSend > 0 && c.err == nil
}

func (c *conn) data(f *Frame) *Error {
	size := int64(f.Length)
	if size > c.connRecv {
		return errConnFlow
	}
	c.connRecv -= size
	if c.idle(f.StreamID) {
		return errIdleFrame
	}
	st := c.find(f.StreamID)
	if st == nil || !st.recvOpen {
		c.creditConn(size)
		if st == nil && c.ignored(f.StreamID) {
			if size == 0 && !f.Flags.Has(FlagEndStream) {
				return c.control() // as on an open stream
			}
			return nil
		}
		return errHalfClosed
	}
	if size > st.recvWin {
		c.creditConn(size)
		return errStreamFlow
	}
	st.recvWin -= size
	p := f.Data
	end := f.Flags.Has(FlagEndStream)
	if pad := size - int64(len(p)); pad > 0 { // padding is not the handler's
		c.creditConn(pad)
		c.creditStream(st, pad)
	}
	if c.client && !st.final { // RFC 9113 8.1: DATA before the final response
		c.creditConn(int64(len(p)))
		return errDataFirst
	}
	if len(p) == 0 && !end {
		if e := c.control(); e != nil {
			return e
		}
	}
	st.received += int64(len(p))
	if st.cl >= 0 && (st.received > st.cl || end && st.received != st.cl) {
		c.creditConn(int64(len(p)))
		return errCLMismatch
	}
	st.held += int64(len(p))
	if c.client && len(p) > 0 {
		// A response's bytes are what a Client's connection is for, as
		// a Server's DATA is: a long download or stream that sends
		// nothing of ours must not end at the server's keepalive PINGs.
		c.refill()
	}
	if end {
		st.recvOpen = false
	}
	id := st.id
	c.ev.deliver(id, p, end)
	if end {
		c.closeIfDone(id)
	}
	return nil
}

// closeIfDone ends stream id, if the handler's call left it, once both
// sides are closed.
func (c *conn) closeIfDone(id uint32) {
	if st := c.find(id); st != nil {
		c.maybeClose(st)
	}
}

// Consumed returns n bytes of stream id's data, delivered by OnData, to the
// peer's flow-control windows: WINDOW_UPDATEs go out once half a window
// is due. Bytes of a stream that ended are returned when it ends, so
// Consumed after that is ignored. Connection goroutine.
func (c *conn) Consumed(id uint32, n int) {
	st := c.find(id)
	if st == nil || n <= 0 || c.err != nil {
		return
	}
	k := min(int64(n), st.held)
	st.held -= k
	c.creditConn(k)
	c.creditStream(st, k)
}

func (c *conn) creditConn(k int64) {
	if k <= 0 || c.err != nil {
		return
	}
	c.connPending += k
	if c.connPending >= int64(c.cfg.ConnWindowSize)/2 {
		c.sendCredit(0, c.connPending, &c.connWU)
		c.connRecv += c.connPending
		c.connPending = 0
	}
}

func (c *conn) creditStream(st *stream, k int64) {
	if k <= 0 || !st.recvOpen {
		return
	}
	st.pending += k
	if st.pending >= c.streamInitial/2 {
		c.sendCredit(st.id, st.pending, &st.wu)
		st.recvWin += st.pending
		st.pending = 0
	}
}

// sendCredit credits stream id (0: the connection) with inc: a
// WINDOW_UPDATE appended to the output, whose place goes to *at; or,
// past MaxOutput, inc added to the increment of id's last one, where
// that is still wholly unsent (not even in part: Written), so that a
// peer that sends within the windows it is owed and does not read makes
// us hold one WINDOW_UPDATE per level at most beyond MaxOutput, not one
// per half window it sends. The sum stays a window's, at most
// MaxWindow: the credit the peer has not seen.
func (c *conn) sendCredit(id uint32, inc int64, at *int64) {
	if len(c.out) > c.cfg.MaxOutput && *at > 0 {
		if i := *at - 1 - c.sent; i >= 0 && i+FrameHeaderLen+4 <= int64(len(c.out)) {
			p := c.out[i+FrameHeaderLen : i+FrameHeaderLen+4]
			binary.BigEndian.PutUint32(p, binary.BigEndian.Uint32(p)&MaxWindow+uint32(inc))
			return
		}
	}
	*at = c.sent + int64(len(c.out)) + 1
	c.out = AppendWindowUpdate(c.out, id, uint32(inc))
}

// headerBlock starts a header block with HEADERS f: handled at once with
// END_HEADERS, else gathered until its last CONTINUATION.
func (c *conn) headerBlock(f *Frame) *Error {
	c.hend = f.Flags.Has(FlagEndStream)
	if f.Flags.Has(FlagEndHeaders) {
		return c.ev.block(f.StreamID, f.Data)
	}
	if len(f.Data) > c.blockLimit {
		return errBlockLarge
	}
	c.hstream, c.hcont = f.StreamID, 0
	c.hbuf = append(c.hbuf[:0], f.Data...)
	return nil
}

func (c *conn) continuation(f *Frame) *Error {
	if c.hstream == 0 {
		return errContStray
	}
	if c.hcont++; c.hcont > c.blockLimit/1024+16 {
		return errContFlood
	}
	if len(f.Data) == 0 && !f.Flags.Has(FlagEndHeaders) {
		if e := c.control(); e != nil {
			return e
		}
	}
	if len(c.hbuf)+len(f.Data) > c.blockLimit {
		return errBlockLarge
	}
	c.hbuf = append(c.hbuf, f.Data...)
	if !f.Flags.Has(FlagEndHeaders) {
		return nil
	}
	id := c.hstream
	c.hstream = 0
	return c.ev.block(id, c.hbuf)
}

// decode decodes block in mode, passing each field to the side's emit; it
// returns the HPACK error (a connection error) and whether the list was
// too large.
func (c *conn) decode(block []byte, mode uint8) (tooLarge bool, e *Error) {
	c.mode, c.bad, c.regular = mode, false, false
	c.fbuf, c.spans = c.fbuf[:0], c.spans[:0]
	c.ev.clear()
	err := c.dec.Decode(block, c.emitFn)
	switch {
	case err == nil || err == errBadField:
	case errors.Is(err, hpack.ErrListTooLarge):
		return true, nil
	default:
		return false, errCompression
	}
	return false, nil
}

// trailers decodes the trailer section block of st into c.tfields and
// checks it (RFC 9113 8.1: END_STREAM, no pseudo-header, content-length
// met); malformed is the side's stream error. The stream is half-closed
// (remote) after; the caller tells the handler, then closeIfDone.
func (c *conn) trailers(st *stream, block []byte, end bool, malformed *Error) *Error {
	tooLarge, e := c.decode(block, decodeTrailers)
	switch {
	case e != nil:
		return e
	case !end:
		return errTrailersEnd
	case tooLarge || c.bad:
		return malformed
	case st.cl >= 0 && st.received != st.cl:
		return errCLMismatch
	}
	c.tfields = c.fields(c.tfields)
	st.recvOpen = false
	return nil
}

func (c *conn) store(f hpack.Field) span {
	n0 := len(c.fbuf)
	c.fbuf = append(c.fbuf, f.Name...)
	v0 := len(c.fbuf)
	c.fbuf = append(c.fbuf, f.Value...)
	return span{int32(n0), int32(v0), int32(v0), int32(len(c.fbuf)), f.Sensitive}
}

func (c *conn) bytes(sp span, value bool) []byte {
	if value {
		return c.fbuf[sp.v0:sp.v1:sp.v1]
	}
	return c.fbuf[sp.n0:sp.n1:sp.n1]
}

// fields appends the decoded regular fields to fs[:0].
func (c *conn) fields(fs []hpack.Field) []hpack.Field {
	fs = fs[:0]
	for _, sp := range c.spans {
		fs = append(fs, hpack.Field{Name: c.bytes(sp, false), Value: c.bytes(sp, true), Sensitive: sp.sensitive})
	}
	return fs
}

// startBlock starts encoding a header block we send.
func (c *conn) startBlock() []byte { return c.enc.StartBlock(c.blk[:0]) }

// sendBlock appends fields to b and sends it on stream id.
func (c *conn) sendBlock(id uint32, b []byte, fields []hpack.Field, end bool) {
	for _, f := range fields {
		b = c.enc.AppendField(b, f)
	}
	c.out = AppendHeaders(c.out, id, b, end, c.peerMaxFrame)
	c.blk = b[:0]
	if cap(b) > keepBuf { // as trim does
		c.blk = nil
	}
}

// sendable returns the open stream id we may send on, or an error.
func (c *conn) sendable(id uint32) (*stream, error) {
	if c.err != nil {
		return nil, ErrConnFailed
	}
	st := c.find(id)
	if st == nil || !st.sendOpen {
		return nil, ErrStreamGone
	}
	return st, nil
}

// WriteData sends the first n bytes of p on stream id that the connection
// and stream send windows allow, in DATA frames of at most the peer's
// SETTINGS_MAX_FRAME_SIZE; end ends the stream if all of p was sent. When
// n < len(p) the caller keeps p[n:] and OnWritable tells when to try again.
// p is copied into Pending. Connection goroutine.
func (c *conn) WriteData(id uint32, p []byte, end bool) (n int, err error) {
	return c.writeData(id, p, end, nil)
}

// WriteDataTo is WriteData for a transport that copies what it is given
// (engine.Conn.Writev, the method value, fits): it hands writev, in one
// call, what was pending, then each DATA frame's header and its part of p,
// so the payload is copied once, by writev, and not into Pending first, and
// a transport that gathers (a TLS engine.Conn encrypts slices that fit in a
// record as one) sends a response's HEADERS and DATA together. writev must
// take all it is given: an error, or a short count, ends the connection
// (Err) and is returned (with n 0), as the peer would see a frame cut
// short. The slices are writev's only for the call. Connection goroutine.
func (c *conn) WriteDataTo(id uint32, p []byte, end bool, writev func([][]byte) (int, error)) (n int, err error) {
	return c.writeData(id, p, end, writev)
}

func (c *conn) writeData(id uint32, p []byte, end bool, writev func([][]byte) (int, error)) (int, error) {
	st, err := c.sendable(id)
	if err != nil {
		return 0, err
	}
	if !st.responded {
		return 0, ErrNoHeaders
	}
	w := max(0, min(int64(len(p)), c.connSend, st.sendWin))
	all := w == int64(len(p))
	if w == 0 && !(all && end) {
		// Nothing to send: no window, or nothing and not the end. A
		// stream a short write left blocked stays so (OnWritable due).
		st.blocked = st.blocked || !all
		return 0, nil
	}
	var vec [][]byte
	if writev != nil {
		// Every frame's header is in hdrs, grown first: the slices of it
		// in vec stay valid.
		frames := max(1, (w+int64(c.peerMaxFrame)-1)/int64(c.peerMaxFrame))
		c.hdrs = slices.Grow(c.hdrs[:0], int(frames)*FrameHeaderLen)
		vec = c.vec[:0]
		if len(c.out) > 0 {
			vec = append(vec, c.out)
		}
	}
	for sent := int64(0); ; {
		k := min(w-sent, int64(c.peerMaxFrame))
		last := sent+k == w
		chunk, fin := p[sent:sent+k], all && end && last
		if writev == nil {
			c.out = AppendData(c.out, id, chunk, fin)
		} else {
			var fl Flags
			if fin {
				fl = FlagEndStream
			}
			h := len(c.hdrs)
			c.hdrs = AppendFrameHeader(c.hdrs, FrameHeader{Length: uint32(k), Type: FrameData, Flags: fl, StreamID: id})
			vec = append(vec, c.hdrs[h:])
			if k > 0 {
				vec = append(vec, chunk)
			}
		}
		if k > 0 {
			c.refill()
		}
		if sent += k; last {
			break
		}
	}
	if writev != nil {
		err := c.put(writev, vec)
		clear(vec) // not to keep p, nor the output, alive
		c.vec = vec[:0]
		if err != nil {
			return 0, err
		}
		c.Written(len(c.out))
	}
	c.connSend -= w
	st.sendWin -= w
	c.connOwed += w
	st.owed += w
	st.dataSent = st.dataSent || w > 0
	if !all {
		st.blocked = true
		return int(w), nil
	}
	if end {
		st.sendOpen = false
		c.maybeClose(st)
	}
	return len(p), nil
}

// put hands vec to writev for WriteDataTo; a lost write fails the
// connection (every stream gone), as the peer sees a frame cut short.
func (c *conn) put(writev func([][]byte) (int, error), vec [][]byte) error {
	total := 0
	for _, b := range vec {
		total += len(b)
	}
	n, err := writev(vec)
	if err == nil && n < total {
		err = errShortWrite
	}
	if err != nil {
		c.err = errWriteLost
		c.resetAll(InternalError)
		return err
	}
	return nil
}

// Reset ends stream id with RST_STREAM(code); the handler gets no OnReset
// for it. A Server's stream the handler marked Local, reset before its
// response ended or sent DATA, counts as an early reset, as the peer's
// reset would: past MaxEarlyResets the connection ends once the frame
// being fed is done (or at the next one). Connection goroutine.
func (c *conn) Reset(id uint32, code ErrCode) {
	st := c.find(id)
	if st == nil || c.err != nil {
		return
	}
	if st.local && st.sendOpen && !st.dataSent {
		c.earlyResets++
	}
	c.out = AppendRSTStream(c.out, id, code)
	if st.recvOpen {
		c.quieten(id)
	}
	c.remove(st)
}

// WriteTrailers sends a trailer section, which ends stream id. Connection
// goroutine.
func (c *conn) WriteTrailers(id uint32, fields []hpack.Field) error {
	st, err := c.sendable(id)
	if err != nil {
		return err
	}
	if !st.responded {
		return ErrNoHeaders
	}
	c.sendBlock(id, c.startBlock(), fields, true)
	st.sendOpen = false
	c.maybeClose(st)
	return nil
}

// Shutdown starts a graceful shutdown. A Client sends GOAWAY(NO_ERROR)
// naming stream 0 (the server opens none). A Server sends it in two
// phases (RFC 9113 6.8): first GOAWAY(NO_ERROR) naming 2^31-1 and a PING,
// then, once the PING's ACK shows the client has seen the GOAWAY (a
// round trip), the final GOAWAY naming the last stream the client
// opened. The requests that crossed the first GOAWAY are served, as any
// before it, where a single GOAWAY naming the last stream seen left them
// unprocessed, for the client to send again elsewhere or fail. The
// caller bounds the wait for a client that does not answer the PING with
// ShutdownNow. No stream is opened after the final GOAWAY; those open go
// on, and Done reports when they have ended. Connection goroutine.
func (c *conn) Shutdown() {
	if c.goAwaySent || c.goAwayFirst || c.err != nil {
		return
	}
	if c.client {
		c.ShutdownNow()
		return
	}
	c.goAwayFirst = true
	c.out = AppendGoAway(c.out, MaxWindow, NoError, nil)
	c.pings++ // the ACK costs the control budget nothing, as a Client's Ping's
	c.out = AppendPing(c.out, shutdownPing, false)
}

// shutdownPing is the data of a Server's Shutdown PING, which its ACK
// carries back.
var shutdownPing = [8]byte{'s', 'h', 'u', 't', 'd', 'o', 'w', 'n'}

// ShutdownNow sends the final GOAWAY(NO_ERROR) at once, naming the last
// stream the peer opened (a Client's: 0): a shutdown in one phase, or the
// end of the first phase of Shutdown when the peer did not answer its
// PING within the caller's bound. No stream is opened after it; those
// open go on, and Done reports when they have ended. Connection
// goroutine.
func (c *conn) ShutdownNow() {
	if c.goAwaySent || c.err != nil {
		return
	}
	c.goAwaySent, c.goAwayLast = true, c.goAwayID()
	c.out = AppendGoAway(c.out, c.goAwayLast, NoError, nil)
}

// goAwayID is the last stream id our GOAWAY names: the peer's last on a
// Server, 0 on a Client (the server opens no streams: no push). After
// the final GOAWAY (ShutdownNow) it is the one that GOAWAY named: the
// streams opened since were ignored, and the id may not rise (RFC 9113
// 6.8), as the peer may have sent their requests again elsewhere.
func (c *conn) goAwayID() uint32 {
	switch {
	case c.client:
		return 0
	case c.goAwaySent:
		return c.goAwayLast
	}
	return c.lastID
}

// Errors a Client finds in a server's frames.
var (
	errServerPush = connErr(ProtocolError, "server set SETTINGS_ENABLE_PUSH")
	errDataFirst  = streamErr(ProtocolError, "DATA before the final response header")
)
