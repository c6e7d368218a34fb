package engine

import (
	"errors"
	"math"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	stateConnecting uint8 = iota
	stateOpen
	stateClosing // Close called: sending the rest of the queue, then close
	stateClosed
)

// Reasons reading is paused (bits of Conn.paused).
const (
	pauseUser uint8 = 1 << iota
	pauseHWM
	pauseEOF
	pauseClosing
	pauseTLS // a TLS handshake holds WriteHighWater of input: until it ends
	// pauseStarved: a TLS connection's pump found no send-slab chunk for
	// its plaintext, the slab unable to grow; it is listed in
	// Loop.tlsStarved until Loop.resumeStarved pumps it again.
	pauseStarved
)

// Bits of Conn.bits: bools packed, so that a Conn keeps to 256 bytes
// (TestConnSize).
const (
	// bitHeldEOF: the peer's FIN arrived while data was held.
	bitHeldEOF uint8 = 1 << iota
	// bitOverMark: the queue reached the high-water mark and reading
	// went on (Config.ReadPastHighWater); OnWritable is owed once it
	// drains below half. Without the option pauseHWM says it.
	bitOverMark
	// bitSendLate (uring): a SEND of the connection completed after the
	// enter that submitted it, or a quiet one was cut (the socket's
	// buffer was full): its sends are not quiet until one completes
	// inside its enter (uringBackend.quietSends).
	bitSendLate
	// bitSendQuiet (uring): the SENDs in flight went quiet (MSG_DONTWAIT,
	// uringBackend.quietSends): only those can be cut.
	bitSendQuiet
	// bitSendCounted (uring): the quiet SENDs in flight are counted in
	// uringBackend.quiet, for the wait of epoch k.sendEpoch (flush).
	bitSendCounted
	// bitSendSkip (uring): the SEND in flight is a lone quiet one that
	// posts no completion if it sends all (uringBackend.skipped), until
	// it is settled or its completion comes.
	bitSendSkip
	// bitSendBehind (uring): the connection was written to, or closed or
	// shut down, behind its bitSendSkip SEND: the loop's waits must not
	// sleep until that SEND is settled (uringBackend.behind).
	bitSendBehind
	// bitSendFailed: a write met the peer's reset, or a receive did
	// while data was held (Conn.peerReset):
	// nothing more is sent, and the connection ends with that error
	// (Conn.err) once reading has delivered what came before the reset,
	// when its handler closes it, or CloseTimeout after the failure.
	bitSendFailed
)

// seg is a part of a write queue: bytes [off, end) of a slab chunk (ref >=
// 0) or of receive buffer -ref-1 (from WriteBuffer).
type seg struct {
	ref      int32
	off, end int32
}

// Conn is a TCP or Unix stream connection owned by one loop. Its methods may
// be called only on that loop's goroutine (use Loop().Post from elsewhere);
// a *Conn stays valid (as a closed connection) after OnClose.
type Conn struct {
	l      *Loop
	fd     int
	slot   int32
	gen    uint32
	state  uint8
	paused uint8

	gotEOF, dirty, wantShutWr, shutWr bool
	unixPeer                          bool
	bits                              uint8 // bitHeldEOF, bitOverMark, bitSendLate

	err           error
	local, remote netip.AddrPort
	ctx           any
	timer         timerRef // the engine's timer for c (dial, handshake, CloseTimeout, linger)
	tls           *tlsConn // accepted on a listener with ListenConfig.TLS

	held []heldBuf // received while paused, delivered on resume

	wq []seg
	// wqHead and ringSegs (the segments of wq that hold a receive
	// buffer, MaxQueuedReadBuffers) are int32 to share a word: a Conn
	// keeps to 256 bytes (TestConnSize).
	wqHead, ringSegs int32
	queued           int // bytes to send
	qmem             int // buffer memory the queue holds, in whole buffers: what WriteHighWater caps

	k kstate // backend-specific

	// CloseLinger: what the peer sends is dropped while lingering, and c
	// closes when more than lingerLeft bytes came, at the peer's FIN, or
	// tmo (a time.Duration) after c's own FIN. Once Close is called
	// (stateClosing), which no linger timer follows, tmo is the nanotime
	// of the Close instead, for CloseTimeout. Here, and the bools above
	// packed, a Conn keeps to the 256-byte size class (TestConnSize).
	tmo        int64
	lingerLeft int32
	lingering  bool
	// stall counts the loop's sweeps that found c's queue not empty since
	// a send last took some of it (WriteTimeout); sent clears it.
	stall uint8

	lnSlot uint16 // accepted: 1 + the index of its socket in Loop.lns; 0 dialed
}

type heldBuf struct{ id, n int32 }

// deliverHeld hands held buffers to the handler until it pauses again; it
// reports whether all were delivered. Each leaves c.held before OnData
// sees it: OnData may pause and resume c, which calls deliverHeld again for
// the rest, or close c, which releases what is still held.
func (c *Conn) deliverHeld() bool {
	if c.tls != nil {
		c.tls.pump(c) // what the transport kept while paused
	}
	for len(c.held) > 0 && c.paused == 0 && c.state == stateOpen {
		h := c.held[0]
		c.held = c.held[:copy(c.held, c.held[1:])]
		if h.id >= 0 {
			c.l.ringHeld--
		}
		c.l.deliverNow(c, h.id, int(h.n))
	}
	if len(c.held) > 0 {
		return false
	}
	if c.bits&bitHeldEOF != 0 && c.state == stateOpen {
		c.bits &^= bitHeldEOF
		c.l.eof(c)
	}
	return c.paused == 0
}

// kstate is the per-connection state of the backends.
type kstate struct {
	// epoll: registered interest. uring: the buffer ring's commits when
	// the receive was armed (uringBackend.commits). One field for both:
	// a loop runs one backend, and Conn stays in its 256-byte size class.
	events   uint32
	sends    int32 // uring: SENDs in flight
	inflight int32 // uring: SQEs in flight that refer to fd
	recv     uint8 // uring: 0 idle, 1 armed, 2 cancel sent; epoll: 1 starved (epollBackend.starve)
	closing  bool  // uring: close in progress
	napiSeen bool  // busy-poll backends: NAPI id looked up
	// uring: the loop's epoch (uringBackend.epoch) when the last SENDs
	// were prepared.
	sendEpoch uint8
}

// Loop returns the loop that owns c. Any goroutine.
func (c *Conn) Loop() *Loop { return c.l }

// Listener returns the listener that accepted c, closed since or not, until
// c's OnClose has returned (nil after), or nil for a dialed connection (and
// past a loop's 65,535th open listener): a server with several listeners
// tells its connections apart by it. Loop goroutine.
func (c *Conn) Listener() *Listener {
	if c.lnSlot == 0 {
		return nil
	}
	return c.l.lns[c.lnSlot-1].ln
}

// Fd is the connection's socket, for getsockopt and the like. Do not close
// it or read from it. It is -1 once the socket is closed, in OnClose and
// after: the number may name another file by then. Loop goroutine.
func (c *Conn) Fd() int { return c.fd }

// LocalAddr is the local address of a TCP connection (zero for Unix). Loop
// goroutine.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// RemoteAddr is the peer address of a TCP connection (zero for Unix). Loop
// goroutine.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// Context returns the value set by SetContext. Loop goroutine.
func (c *Conn) Context() any { return c.ctx }

// SetContext attaches a value to c for the handler's use. Loop goroutine.
func (c *Conn) SetContext(v any) { c.ctx = v }

// Buffered is the number of bytes queued for sending. Loop goroutine.
func (c *Conn) Buffered() int { return c.queued }

// QueuedMemory is the buffer memory c's write queue holds, in whole
// buffers: what Config.WriteHighWater caps, and what reaches it first when
// the queue holds many small writes or received buffers (Buffered counts
// their bytes). A proxy pausing the side that feeds c compares this with
// the mark, as the engine does. Loop goroutine.
func (c *Conn) QueuedMemory() int { return c.qmem }

// Closed reports whether OnClose has been called for c. Loop goroutine.
func (c *Conn) Closed() bool { return c.state == stateClosed }

// writable: open, or dialing (the queue is sent once connected).
func (c *Conn) writable() bool {
	return (c.state == stateOpen || c.state == stateConnecting) && !c.wantShutWr && c.bits&bitSendFailed == 0
}

// Write copies p into c's write queue; the queue is sent at the end of the
// loop iteration, batched with other writes (on a dialed connection before
// OnOpen: once connected; on one DialTLS made, once the handshake is done).
// It returns net.ErrClosed after Close or
// CloseWrite, and once a write has met the peer's reset (see PauseRead).
// Writes are never refused for size: the high-water
// mark pauses reading instead (see Config.WriteHighWater), or with
// Config.ReadPastHighWater leaves the handler to pause what feeds c until
// OnWritable. Where the loop's send slab is full and cannot grow (the
// mapping of a new region fails: out of memory), it queues what fits and
// returns that count with the error (on a TLS connection, whose stream a
// part of a record breaks, it resets the connection with the error). On
// a TLS connection p is encrypted, and the records queued
// (what Buffered, QueuedMemory and the mark count); the plaintext may be
// reused at once. Loop goroutine.
func (c *Conn) Write(p []byte) (int, error) {
	if c.tls != nil {
		return c.tls.write(c, p)
	}
	return c.write(p)
}

// write is Write without TLS: p goes on the queue as it is. Loop goroutine.
func (c *Conn) write(p []byte) (int, error) {
	if !c.writable() {
		return 0, net.ErrClosed
	}
	n := len(p)
	var err error
	for len(p) > 0 {
		if k := len(c.wq); k > int(c.wqHead) {
			last := &c.wq[k-1]
			if last.ref >= 0 && int(last.end) < c.l.chunks.size {
				m := copy(c.l.chunks.buf(last.ref)[last.end:], p)
				last.end += int32(m)
				p = p[m:]
				continue
			}
		}
		var id int32
		if id, err = c.l.chunks.get(); err != nil {
			// What was queued stays, counted, and the mark holds for
			// it as for any write.
			n -= len(p)
			break
		}
		m := copy(c.l.chunks.buf(id), p)
		c.wq = append(c.wq, seg{ref: id, end: int32(m)})
		c.qmem += c.l.chunks.size
		p = p[m:]
	}
	c.queued += n
	c.l.markDirty(c)
	c.checkHWM()
	return n, err
}

// Writev queues every slice of bufs, as Write; it returns net.ErrClosed
// after Close or CloseWrite, with no slices too. On a TLS connection the
// slices are gathered: those that fit in a record together are encrypted
// as one (Write makes a record of each). Loop goroutine.
func (c *Conn) Writev(bufs [][]byte) (int, error) {
	if c.tls != nil {
		return c.tls.writev(c, bufs)
	}
	if !c.writable() {
		return 0, net.ErrClosed
	}
	total := 0
	for _, b := range bufs {
		n, err := c.Write(b)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// WriteBuffer queues a received buffer (from any connection of this loop)
// for sending without copying it, and releases it once sent. (Up to 2 KiB
// that fit in the room of the queue's last chunk, written there by Write,
// are copied there instead and b released at once: one send, not two.) The caller
// gives up b, also when WriteBuffer fails: a buffer of another loop is
// given back to that loop (through Post) with an error. Loop goroutine.
func (c *Conn) WriteBuffer(b Buffer) error { return c.WriteBufferFrom(b, 0) }

// WriteBufferFrom is WriteBuffer for the bytes of b from off on: b's first
// off bytes are not sent (an HTTP proxy sends the body that follows a head
// it rewrote without copying it). The caller gives up b, also when
// WriteBufferFrom fails; an off outside [0, b.Len()] is an error (b is
// released), and off == b.Len() releases b and queues nothing. A buffer
// released already (or given to WriteBuffer already) panics, as a second
// Release does. Loop goroutine.
func (c *Conn) WriteBufferFrom(b Buffer, off int) error {
	if b.l != c.l {
		b.l.Post(b.Release)
		if off < 0 || off > int(b.n) {
			return errOffset
		}
		return errors.New("engine: WriteBuffer with a buffer of another loop")
	}
	// The queue (or the ring, below) has b from here on: a Release
	// after this, or this after a Release, panics.
	c.l.disown(b.id, b.gen)
	switch {
	case off < 0 || off > int(b.n):
		c.l.freeBuf(b.id)
		return errOffset
	case !c.writable():
		c.l.freeBuf(b.id)
		return net.ErrClosed
	case c.tls != nil:
		// Encrypted into the queue: b is not needed after.
		_, err := c.tls.write(c, b.Bytes()[off:])
		c.l.freeBuf(b.id)
		return err
	case off == int(b.n) || c.joinLast(b.Bytes()[off:]):
		c.l.freeBuf(b.id)
		return nil
	}
	id := b.id
	if l := c.l; id >= 0 && l.ringLimit > 0 && (c.atMark() || int(c.ringSegs) >= l.ringLimit || l.ringHeld >= l.ringShare) {
		// Keep the shared receive ring for the connections that read:
		// this queue is long or its peer is slow.
		id = l.copyOffRing(id, int(b.n))
	}
	// A segment's ref is a slab chunk (>= 0) or a receive buffer r as
	// -r-1: the mirror of the buffer id's encoding.
	c.wq = append(c.wq, seg{ref: -id - 1, off: int32(off), end: b.n})
	if id < 0 {
		c.qmem += c.l.chunks.size
	} else {
		c.qmem += len(c.l.be.recvBuf(id))
		c.ringSegs++
		c.l.ringHeld++
	}
	c.queued += int(b.n) - off
	c.l.markDirty(c)
	c.checkHWM()
	return nil
}

var errOffset = errors.New("engine: WriteBufferFrom offset outside the buffer")

// joinMax is the most WriteBufferFrom copies into the last chunk of the
// queue rather than queue a buffer of its own.
const joinMax = 2 << 10

// joinLast copies p into the last chunk of c's queue when p is small
// (joinMax) and fits in the chunk's room, and reports whether it did: a copy
// of a few hundred bytes costs less than a send of its own (an HTTP proxy's
// body after the head it rewrote goes in one send or write, not two). The
// chunk may be in flight: a send covers the bytes queued when it was
// made, and the next takes the rest. Loop goroutine.
func (c *Conn) joinLast(p []byte) bool {
	k := len(c.wq)
	if len(p) > joinMax || k == int(c.wqHead) {
		return false
	}
	last := &c.wq[k-1]
	if last.ref < 0 || c.l.chunks.size-int(last.end) < len(p) {
		return false
	}
	copy(c.l.chunks.buf(last.ref)[last.end:], p)
	last.end += int32(len(p))
	c.queued += len(p)
	c.l.markDirty(c)
	return true
}

// recvBudget is how many bytes c may still receive before the buffers its
// write queue and held data take reach the high-water mark, at least 1: a
// receive limited to it (uring's armRecv) ends, having filled at most one
// buffer past it, at the mark if nothing else adds to the queue meanwhile.
// With Config.ReadPastHighWater c's own queue does not count: reading goes
// on past the mark, where it would end each receive at its first buffer
// (a re-arm per buffer); what c holds while paused (PauseRead) still
// does. Loop goroutine.
func (c *Conn) recvBudget() int {
	if c.lingering {
		// Nothing received is kept; past lingerLeft c closes.
		return int(c.lingerLeft) + 1
	}
	own := c.qmem
	if c.l.readPast {
		own = 0
	}
	return max(c.l.hwm-own-len(c.held)*c.l.chunks.size, 1)
}

// atMark reports whether c's queue has reached the high-water mark and not
// yet drained below half of it. Loop goroutine.
func (c *Conn) atMark() bool { return c.paused&pauseHWM != 0 || c.bits&bitOverMark != 0 }

func (c *Conn) checkHWM() {
	// The mark caps memory, not payload: a queue of partly filled buffers
	// (small reads, small writes) holds whole buffers.
	if c.l.hwm == 0 || c.qmem < c.l.hwm || c.atMark() {
		return
	}
	c.l.st.pausedReads.Add(1)
	if c.l.readPast {
		c.bits |= bitOverMark
		return
	}
	c.pause(pauseHWM)
}

// PauseRead stops delivering data from c (for backpressure across
// connections, as a proxy needs); ResumeRead starts it again.
//
// A write that fails because the peer reset the connection (ECONNRESET or
// EPIPE: an HTTP server that answered an upload early and closed with the
// upload unread) does not end c while what the peer sent before the reset
// is still to be delivered: from the failure on nothing more is sent (the
// queue is dropped: Buffered and QueuedMemory are 0) and writes are
// refused (net.ErrClosed), reading goes on (a pause for
// WriteHighWater ends: the queue will not drain), and c ends, OnClose
// getting the write's error, once OnData has had what the socket held. A
// c paused with PauseRead keeps it until ResumeRead, and then ends so,
// where it holds some of it (received while paused, or unread in its
// socket; one with nothing left ends at once with the write's error); a
// Close (or CloseLinger) meanwhile ends it at once with the write's error,
// sending nothing, and a Reset with nil. A handler that does neither has
// c ended with the write's error CloseTimeout after the failure (after the
// handshake, for a TLS connection whose handshake the failure met; with no
// CloseTimeout, it keeps c until it resumes or closes it). Without a
// write, a connection paused with nothing received since learns of the
// peer's reset and ends with its error; one paused with data unread
// delivers that data once it resumes, and then ends with the reset's
// error (the loop may learn of the reset first, from its receive or the
// socket's error: c is then kept as after a write's). Loop goroutine.
func (c *Conn) PauseRead() {
	if c.handshaking() {
		c.tls.pauseLater = true // DialTLS: from OnOpen on
		return
	}
	c.pause(pauseUser)
}

// ResumeRead undoes PauseRead. Data the kernel had already received while
// paused may be delivered (OnData) before ResumeRead returns. Loop goroutine.
func (c *Conn) ResumeRead() {
	if c.handshaking() {
		c.tls.pauseLater = false
		return
	}
	c.resume(pauseUser)
}

// CloseWrite sends FIN after the queued data; c can still receive. On a
// TLS connection a close_notify alert goes before the FIN. Loop goroutine.
func (c *Conn) CloseWrite() error {
	if c.state != stateOpen && c.state != stateConnecting {
		return net.ErrClosed
	}
	if !c.wantShutWr {
		if c.handshaking() {
			c.tls.shutLater = true // DialTLS: once the handshake is done
			return nil
		}
		if c.tls != nil {
			c.tls.closeNotify(c)
		}
		c.wantShutWr = true
		c.l.markDirty(c)
	}
	return nil
}

// CloseLinger ends c the way a server ends a connection whose peer may
// still be sending (an HTTP server after a response with Connection: close
// or an error, RFC 9112 section 9.6): it sends what is queued and then FIN,
// as CloseWrite, and from now on reads and drops what the peer sends
// instead of calling OnData, until the peer's FIN, more than maxBytes
// dropped, or timeout after c's FIN was sent, whichever comes first; then
// it closes c as Close does (OnClose gets nil; OnEOF is not called; an
// error meanwhile, such as the peer's reset, reaches OnClose as after
// Close). A plain Close with unread data in the socket makes the kernel
// answer with a reset, which can destroy the end of the response before
// the peer has read it. The timeout starts once the queue has drained into
// the socket (at the call if CloseWrite had sent the FIN before): what the
// socket's send buffer still holds then reaches a slow peer later, and
// would be lost if the peer were still sending when the timeout closes c.
// So at the timeout, while the socket still holds unacknowledged bytes,
// fewer than at the FIN or the last check (SIOCOUTQ: the peer is taking
// them), the timeout starts again, up to Config.CloseTimeout after the FIN
// (TestCloseLingerSlowReader). A peer that reads nothing keeps c until
// Config.CloseTimeout after the call, or WriteTimeout without progress,
// and c is then reset as a Close would be. Reading resumes if it was
// paused (PauseRead, the high-water mark) and data held while paused is
// dropped. Before a dialed connection's OnOpen it is Close. It returns
// net.ErrClosed after Close. Loop goroutine.
func (c *Conn) CloseLinger(timeout time.Duration, maxBytes int) error {
	switch {
	case c.state == stateConnecting || c.handshaking():
		return c.Close()
	case c.state != stateOpen:
		return net.ErrClosed
	case c.lingering:
		return nil
	case c.bits&bitSendFailed != 0:
		// Nothing more is sent, and nothing is read after: there is
		// nothing to linger for (peerReset).
		return c.Close()
	}
	c.CloseWrite()
	c.lingering = true
	left := min(max(maxBytes, 0), math.MaxInt32)
	c.tmo = int64(timeout)
	for _, h := range c.held {
		left -= int(h.n)
		c.l.releaseHeld(h.id)
	}
	c.held = c.held[:0]
	c.lingerLeft = int32(max(left, -1))
	// A TLS connection's socket FIN may have come while paused, with
	// records before it that a lingering c no longer reads.
	if c.gotEOF || c.bits&bitHeldEOF != 0 || c.lingerLeft < 0 || c.tls != nil && c.tls.tr.eof {
		return c.Close()
	}
	if c.shutWr {
		c.lingerTimer() // FIN went out already (CloseWrite before)
	} else if c.queued > 0 && c.l.cto > 0 {
		// CloseTimeout bounds the drain before the FIN as it bounds a
		// Close's; lingerTimer stops this at the FIN.
		c.timer = c.l.afterFunc(c.l.cto, c.expire)
	}
	// Nothing is held any more: resume only clears the bits and starts
	// reading once neither is left.
	c.bits &^= bitOverMark // no OnWritable: nothing more is written
	c.resume(pauseUser)
	c.resume(pauseHWM)
	return nil
}

// lingerTimer closes a lingering c at its timeout, counted from its FIN,
// unless the socket's send buffer still holds unacknowledged bytes, fewer
// than at the FIN or the last check: a slow peer still taking the reply,
// whose tail a close now would destroy were the peer still sending (the
// reset that answers data for a closed socket). Then it checks again
// after the same timeout, up to CloseTimeout after the FIN. One ioctl at
// the FIN and one per expiry.
func (c *Conn) lingerTimer() {
	c.stopTimer() // CloseTimeout's, set by CloseLinger before the FIN
	d, fin, left := time.Duration(c.tmo), nanotime(), c.Unacked()
	var f func()
	f = func() {
		if n := c.Unacked(); c.state == stateOpen && n > 0 && n < left {
			wait, now := d, nanotime()
			if cto := int64(c.l.cto); cto > 0 {
				wait = min(wait, time.Duration(fin+cto-now))
			}
			if wait > 0 {
				left = n
				c.timer = c.l.afterFunc(wait, f)
				return
			}
		}
		c.Close()
	}
	c.timer = c.l.afterFunc(d, f)
}

// stopTimer cancels c's timer, if it is pending. Loop goroutine.
func (c *Conn) stopTimer() {
	c.l.timers.remove(c.timer)
	c.timer = timerRef{}
}

// Close stops reading, sends what is queued, closes the socket and then
// calls OnClose(c, nil); before a dialed connection's OnOpen it abandons
// the dial and what was queued. A queue the peer has not taken by
// Config.CloseTimeout (or that stops moving for WriteTimeout) is dropped
// with a reset, and OnClose gets an error wrapping os.ErrDeadlineExceeded
// instead. A TLS connection that has not sent close_notify (CloseWrite)
// sends it after the queue. Loop goroutine.
func (c *Conn) Close() error {
	switch c.state {
	case stateClosing, stateClosed:
		return net.ErrClosed
	case stateConnecting:
		c.abort(nil)
		return nil
	}
	if c.tls != nil {
		c.tls.closeNotify(c)
	}
	c.state = stateClosing
	if c.l.cto > 0 {
		c.tmo = nanotime() // CloseTimeout counts from here (Loop.sweep)
	}
	c.pause(pauseClosing)
	c.l.markDirty(c)
	return nil
}

// Reset closes c at once, dropping what is queued, and makes a TCP peer see
// a reset (RST, ECONNRESET) instead of an orderly end: for a proxy passing
// on a reset it received, or a server giving up on a peer. Where Close
// (or CloseLinger) is under way it cuts that short. OnClose gets nil, as
// after Close (also where a write had met the peer's reset and c was
// kept for what the peer sent before it, see PauseRead), after the
// callback that called Reset has returned (never inside it; see
// Handler.OnClose). A Unix connection's peer sees an end of stream. Before a
// dialed connection's OnOpen it is Close. It returns net.ErrClosed once the
// socket is being closed. Loop goroutine.
func (c *Conn) Reset() error {
	switch {
	case c.state == stateConnecting || c.handshaking():
		// A DialTLS connection in its handshake is a dial still: as
		// CloseLinger, Close abandons it.
		return c.Close()
	case c.state == stateClosed || c.k.closing:
		return net.ErrClosed
	}
	// A write that failed (peerReset) kept its error for the end: the
	// handler gives up on c, and OnClose gets nil as after any Reset.
	// An error the engine closes c for (a TLS record that fails, whose
	// alert is queued) says why c ends, and stays
	// (TestTLSResetAfterRecordFailure).
	if c.bits&bitSendFailed != 0 {
		c.err = nil
	}
	c.reset(nil)
	return nil
}

// reset is Reset on an open or closing c, OnClose getting err.
func (c *Conn) reset(err error) {
	if c.state == stateClosed || c.k.closing {
		return
	}
	if !c.unixPeer {
		// With a zero linger time close(2) sends RST and drops the
		// socket's unsent data (tcp_close, tcp_disconnect).
		unix.SetsockoptLinger(c.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	}
	c.abort(err)
}

// peerReset handles the peer's reset (err: ECONNRESET, EPIPE) met by a
// write of c, or by a receive (or epoll's socket error) while c is
// paused with data held or unread. Where c is
// open, it is kept to deliver what the peer sent before the reset (an
// HTTP server's early 413 to an upload it closed unread, which its
// proxy's client must get rather than a 502): nothing more is sent
// (writable, the backends' flush), reading goes on unless the handler
// paused it (PauseRead), a pause for the high-water mark ending since the
// queue will not drain, and the socket's end (the read that finds it ends
// with 0: the write took the socket's error) ends c with err (Loop.eof),
// after the data held while paused; a c paused by its handler with
// nothing to deliver (none held, none unread in its socket, no receive
// armed that may bring some) ends now; a Close ends it at once (the
// backends' flush), and CloseTimeout after the reset ends it if nothing
// else has. Any other error, or a c closing, ends c now with err. It
// reports whether c is kept. Loop goroutine.
func (c *Conn) peerReset(err error) bool {
	if !errors.Is(err, unix.ECONNRESET) && !errors.Is(err, unix.EPIPE) || c.state != stateOpen || c.k.closing ||
		c.paused&^(pauseUser|pauseHWM) != 0 || c.bits&bitSendFailed != 0 {
		c.abort(err)
		return false
	}
	if c.pausedEmpty() {
		// Paused with nothing received to deliver: a resume would find
		// only the socket's end. Kept, c waited for its handler, which
		// paused it for its own reasons (a proxy's client while its
		// response is outstanding, which the reset ends), until
		// CloseTimeout (TestWriteFailurePausedNothingLeft). A receive
		// armed (uring's lazy pause; epoll's starved read) may still
		// bring data: its end decides (Loop.eof).
		c.abort(err)
		return false
	}
	c.err = err
	c.bits |= bitSendFailed
	if c.k.sends == 0 {
		// Nothing will send it: its memory goes back now (uring's
		// sendDone drops it once the SENDs in flight have ended), and
		// WriteTimeout's sweep no longer sees a stalled queue.
		c.dropWrites()
	}
	c.boundKept()
	c.bits &^= bitOverMark // no OnWritable: nothing more is written
	c.resume(pauseHWM)
	return c.state == stateOpen
}

// sendFailedFlush is the backends' flush of c, whose write met the peer's
// reset (bitSendFailed, tested by the caller: the hot path's one bit
// test): nothing is sent, and a c closing (Close, CloseLinger) ends now
// with the write's error (peerReset). Loop goroutine.
func (c *Conn) sendFailedFlush() {
	if c.state == stateClosing {
		c.abort(c.err)
	}
}

// boundKept has CloseTimeout end c, kept after a write met the peer's
// reset (peerReset), with the write's error, unless a timer of c runs
// already: a handshake's, which ends it too (its failure closes c, the
// backends' flush then ending it with the write's error) and which
// handshakeDone replaces with this bound where the handshake succeeds;
// a lingering close's, which closes it. Loop goroutine.
func (c *Conn) boundKept() {
	if c.timer == (timerRef{}) && c.l.cto > 0 {
		c.timer = c.l.afterFunc(c.l.cto, func() { c.abort(c.err) })
	}
}

// pausedEmpty reports whether c, paused by its handler, has nothing it
// could deliver on resume: nothing held, no receive armed that may bring
// some (uring's lazy pause; epoll's starved read), nothing unread in its
// socket. Ended so after the peer's reset (peerReset, and uring's handle
// at the end of the receive recvOnce cancelled), c would wait for a
// resume that brings only the socket's end. Loop goroutine.
func (c *Conn) pausedEmpty() bool {
	return c.paused&pauseUser != 0 && !c.holding() && c.k.recv == 0 && c.unread() == 0
}

// holding reports whether c holds received data it has not delivered:
// buffers held while paused, or, on a TLS connection paused, ciphertext
// its transport kept (not a record cut short by the end of an unpaused
// one's input: nothing would deliver it). Loop goroutine.
func (c *Conn) holding() bool {
	return len(c.held) > 0 || c.tls != nil && c.paused&(pauseUser|pauseHWM|pauseStarved) != 0 && c.tls.tr.buffered()
}

// expire resets c, whose queue WriteTimeout or CloseTimeout gave up on.
func (c *Conn) expire() {
	if c.state == stateClosed || c.k.closing {
		// Being closed already (a Reset whose cancel is still in flight
		// on uring): not a timeout, and not counted as one.
		return
	}
	c.l.st.timedOut.Add(1)
	c.reset(c.netError("write", os.ErrDeadlineExceeded))
}

// netError describes err as package net would for op ("read", "write",
// "dial"...) on c: its network ("tcp" or "unix") and, for TCP, its
// addresses, so that a handler's OnClose reads the same on every backend.
func (c *Conn) netError(op string, err error) error {
	e := &net.OpError{Op: op, Net: "tcp", Err: err}
	if c.unixPeer {
		e.Net = "unix"
	}
	if c.local.IsValid() {
		e.Source = net.TCPAddrFromAddrPort(c.local)
	}
	if c.remote.IsValid() {
		e.Addr = net.TCPAddrFromAddrPort(c.remote)
	}
	return e
}

// abort closes c now, dropping its queue; OnClose gets err.
func (c *Conn) abort(err error) {
	if c.state == stateClosed || c.k.closing {
		return
	}
	if c.err == nil {
		c.err = err
	}
	c.state = stateClosing
	c.paused |= pauseClosing
	if c.k.sends == 0 {
		// With sends in flight the kernel may still read the queue's
		// chunks: they are released by finishClose, once nothing refers
		// to them, so no other connection's data can reach this peer.
		c.dropQueue()
	}
	c.l.be.closeConn(c)
}

func (c *Conn) pause(bit uint8) {
	was := c.paused
	c.paused |= bit
	if was == 0 && c.state != stateClosed && c.state != stateConnecting {
		c.l.be.setRead(c, false)
	}
}

func (c *Conn) resume(bit uint8) {
	if c.paused&bit == 0 {
		return
	}
	c.paused &^= bit
	// pauseEOF alone: a TLS connection may hold what came before the
	// socket's FIN (deliverHeld, which then reports false).
	if c.paused&^pauseEOF == 0 && c.state == stateOpen && c.deliverHeld() && c.state == stateOpen {
		c.l.be.setRead(c, true)
	}
}

// segBytes returns the unsent bytes of s.
func (c *Conn) segBytes(s seg) []byte {
	var b []byte
	if s.ref >= 0 {
		b = c.l.chunks.buf(s.ref)
	} else {
		b = c.l.be.recvBuf(-s.ref - 1)
	}
	return b[s.off:s.end]
}

// sent advances the write queue by n bytes.
func (c *Conn) sent(n int) {
	c.stall = 0 // progress, for WriteTimeout
	c.l.st.bytesWritten.Add(uint64(n))
	c.queued -= n
	for n > 0 {
		s := &c.wq[c.wqHead]
		m := int(s.end - s.off)
		if n < m {
			s.off += int32(n)
			break
		}
		n -= m
		c.releaseSeg(*s)
		c.wqHead++
	}
	if int(c.wqHead) == len(c.wq) {
		c.wq = c.wq[:0]
		c.wqHead = 0
	}
	if c.queued == 0 {
		c.l.unlistQueue(c) // nothing for the sweep
	}
	if c.atMark() && c.qmem <= c.l.hwm/2 {
		c.bits &^= bitOverMark
		c.resume(pauseHWM)
		// Data held while paused, delivered by the resume, may have
		// filled the queue to the mark again (a reply larger than its
		// request): OnWritable then waits for the next drain. A TLS
		// handshake's own writes (its flight above a small mark) owe the
		// handler nothing: it has not been given c yet (OnOpen).
		if c.state == stateOpen && !c.atMark() && !c.handshaking() {
			c.l.h.OnWritable(c)
		}
	}
}

func (c *Conn) releaseSeg(s seg) {
	if s.ref >= 0 {
		c.qmem -= c.l.chunks.size
		c.l.chunks.put(s.ref)
	} else {
		c.qmem -= len(c.l.be.recvBuf(-s.ref - 1))
		c.l.be.releaseRecv(-s.ref - 1)
		c.ringSegs--
		c.l.ringHeld--
	}
}

func (c *Conn) dropQueue() {
	for _, h := range c.held {
		c.l.releaseHeld(h.id)
	}
	c.held = c.held[:0]
	c.dropWrites()
}

// dropWrites releases c's write queue: closing, or nothing will send it
// (a write met the peer's reset, peerReset), its sends all ended.
func (c *Conn) dropWrites() {
	for i := int(c.wqHead); i < len(c.wq); i++ {
		c.releaseSeg(c.wq[i])
	}
	c.wq = c.wq[:0]
	c.wqHead = 0
	c.queued = 0 // releaseSeg has brought qmem to 0
	c.l.unlistQueue(c)
}

// afterDrain runs when the write queue is empty.
func (c *Conn) afterDrain() {
	if c.wantShutWr && !c.shutWr && c.state == stateOpen {
		c.shutWr = true
		unix.Shutdown(c.fd, unix.SHUT_WR) // the same for every backend
		if c.lingering {
			c.lingerTimer()
		}
	}
	if c.state == stateClosing && !c.k.closing {
		c.l.be.closeConn(c)
	}
}

// liveMappings counts the engine's off-heap mappings, for leak tests.
var liveMappings atomic.Int64

// slab hands out fixed-size chunks of off-heap memory, growing by regions.
type slab struct {
	size      int
	perRegion int
	huge      bool
	regions   [][]byte
	free      []int32
	pins      []uint16 // per chunk: SEND_ZC in flight, | pinFreed once put
	kind      string   // page kind of the first region
	mapf      func(n int, huge bool) ([]byte, string, error)
	unmapf    func([]byte) error
}

const regionSize = 2 << 20

func (s *slab) init(size int, huge bool, mapf func(int, bool) ([]byte, string, error), unmapf func([]byte) error) {
	s.size = size
	s.perRegion = regionSize / size
	if s.perRegion < 1 {
		s.perRegion = 1
	}
	s.huge = huge
	s.mapf = mapf
	s.unmapf = unmapf
}

func (s *slab) grow() error {
	b, kind, err := s.mapf(s.perRegion*s.size, s.huge)
	if err != nil {
		return err
	}
	liveMappings.Add(1)
	if s.kind == "" {
		s.kind = kind
	}
	base := int32(len(s.regions) * s.perRegion)
	s.regions = append(s.regions, b)
	for i := s.perRegion - 1; i >= 0; i-- {
		s.free = append(s.free, base+int32(i))
	}
	return nil
}

func (s *slab) get() (int32, error) {
	if len(s.free) == 0 {
		if err := s.grow(); err != nil {
			return -1, err
		}
	}
	id := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return id, nil
}

func (s *slab) buf(id int32) []byte {
	r := s.regions[int(id)/s.perRegion]
	off := (int(id) % s.perRegion) * s.size
	return r[off : off+s.size : off+s.size]
}

// put frees chunk id, or marks it to be freed by unpin if the kernel still
// reads it (SEND_ZC before its notification).
func (s *slab) put(id int32) {
	if int(id) < len(s.pins) && s.pins[id] > 0 {
		s.pins[id] |= pinFreed
		return
	}
	s.free = append(s.free, id)
}

const pinFreed = 1 << 15

// pin marks chunk id as read by the kernel until unpin.
func (s *slab) pin(id int32) {
	for len(s.pins) <= int(id) {
		s.pins = append(s.pins, 0)
	}
	s.pins[id]++
}

func (s *slab) unpin(id int32) {
	s.pins[id]--
	if s.pins[id] == pinFreed {
		s.pins[id] = 0
		s.free = append(s.free, id)
	}
}

func (s *slab) close() {
	for _, r := range s.regions {
		if s.unmapf(r) == nil {
			liveMappings.Add(-1)
		}
	}
	s.regions = nil
	s.free = nil
}

// bytes returns how many bytes the slab has mapped.
func (s *slab) bytes() int64 {
	n := int64(0)
	for _, r := range s.regions {
		n += int64(len(r))
	}
	return n
}

// abandon leaves the slab's regions mapped for the life of the process
// (counted by LeftMappedBytes, and still by liveMappings) instead of
// closing them: a request the kernel may still run reads them, and an
// unmapped address may be taken by any new mapping whose bytes it would
// send.
func (s *slab) abandon() {
	leftBytes.Add(s.bytes())
	s.regions = nil
	s.free = nil
}

// leftBytes counts the bytes of the send slabs abandon left mapped.
var leftBytes atomic.Int64

// LeftMappedBytes returns how many bytes of send slabs stopped loops have
// left mapped in this process because their ring's Close could not confirm
// that the ring's requests had ended (uring.ErrCancelUnconfirmed), as a
// send may still read them; uring.LeftMappedBytes counts the receive
// buffers left so. Any goroutine.
func LeftMappedBytes() int64 { return leftBytes.Load() }
