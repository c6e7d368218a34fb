package engine

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// defaultHandshakeTimeout is ListenConfig.HandshakeTimeout's default.
const defaultHandshakeTimeout = 10 * time.Second

// defaultMaxHandshakes is ListenConfig.MaxHandshakes's default, per loop.
const defaultMaxHandshakes = 1024

// tlsConn is the TLS side of a connection accepted on a listener with
// ListenConfig.TLS (crypto/tls's server) or dialed with Loop.DialTLS (its
// client): the two differ only in who speaks first and in what a dial
// allows before OnOpen (early, later). crypto/tls does all of TLS over tr, a transport the
// engine owns: the loop feeds it what the socket received and queues on the
// socket what crypto/tls writes to it. The handshake runs on a goroutine of
// its own, whose reads block until the loop has fed enough; once it is done
// the loop alone reads and writes through conn, and a read that finds
// nothing fed returns errWouldBlock, a temporary net.Error that crypto/tls
// does not keep (readRecordOrCCS makes only other errors sticky).
type tlsConn struct {
	conn  *tls.Conn
	tr    tlsTransport
	state *tls.ConnectionState // once established
	// established: the handshake succeeded and OnOpen was called; from
	// then on everything runs on the loop. ended: crypto/tls read the end
	// of the stream (the peer's close_notify, or its FIN at a record
	// boundary), which the loop has passed on as the connection's EOF.
	established, ended bool
	// cancel: the handshake's context's; nil before the handshake starts
	// and once it has ended, the context then released.
	cancel context.CancelFunc
	// ln: the listener that accepted the connection, whose place the
	// handshake holds (ListenConfig.MaxHandshakes); nil dialed.
	ln *Listener
	// dialed: crypto/tls's client (Loop.DialTLS). Until OnOpen its
	// handler may already use the Conn, as a plain dial's: early holds
	// what it wrote (plaintext, encrypted once the handshake is done),
	// shutLater its CloseWrite, pauseLater its PauseRead, each applied
	// then, before OnOpen; the handshake itself writes and reads
	// meanwhile.
	dialed, shutLater, pauseLater bool
	early                         []byte
}

// tlsTransport is the net.Conn crypto/tls reads and writes. Before the
// handshake is done its Read runs on the handshake goroutine, under mu,
// and its Write posts the bytes to the loop; after, both run on the loop
// (onLoop), without the lock: the handshake goroutine has posted its
// result and returned by then, and the loop's run of that post orders its
// last use before the loop's.
type tlsTransport struct {
	c      *Conn
	local  net.Addr
	remote net.Addr
	// cur is the receive buffer the loop is decrypting (onLoop), read
	// after in; what is left of it when the loop stops reading (paused,
	// closed) is appended to in.
	cur []byte
	// Read gives crypto/tls one record at most (see readRecord): hdr
	// holds hdrGot bytes of the current record's header, and recLeft is
	// what is left to give of its body once hdrGot is 5.
	hdr     [5]byte
	hdrGot  int
	recLeft int

	mu  sync.Mutex
	in  []byte // ciphertext fed, not yet read, from off on
	off int
	eof bool // the socket's FIN came
	// gaveEOF: Read returned the socket's FIN to crypto/tls, which ends
	// the stream so (at a record boundary) without the peer's
	// close_notify; after close_notify it reads no more.
	gaveEOF bool
	closed  bool // the connection closed
	onLoop  bool // the handshake is done: see the type's doc
	// stopped: in reached the mark and the loop stopped reading
	// (pauseTLS); a handshake that has read it all and waits for more
	// has the loop read again.
	stopped bool
	ready   chan struct{} // handshake: in, eof or closed changed
}

// errWouldBlock is what the transport's Read returns on the loop when it has
// nothing: crypto/tls returns it from Read without keeping it.
var errWouldBlock net.Error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "engine: no TLS input received yet" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// Read gives crypto/tls what the loop has fed: on the handshake goroutine it
// waits for some, on the loop it returns errWouldBlock when there is none.
func (t *tlsTransport) Read(p []byte) (int, error) {
	if t.onLoop {
		switch {
		case t.buffered():
			return t.readRecord(p), nil
		case t.closed:
			return 0, net.ErrClosed
		case t.eof:
			t.gaveEOF = true
			return 0, io.EOF
		}
		return 0, errWouldBlock
	}
	for {
		t.mu.Lock()
		switch {
		case t.closed:
			t.mu.Unlock()
			return 0, net.ErrClosed
		case t.off < len(t.in):
			n := t.readRecord(p)
			t.mu.Unlock()
			return n, nil
		case t.eof:
			t.gaveEOF = true
			t.mu.Unlock()
			return 0, io.EOF
		}
		resume := t.stopped
		t.stopped = false
		t.mu.Unlock()
		if resume {
			c := t.c
			c.l.post(func() {
				if !c.tls.established {
					c.resume(pauseTLS)
				}
			})
		}
		<-t.ready
	}
}

// buffered reports whether the transport holds bytes not read yet; mu
// held, or on the loop once onLoop.
func (t *tlsTransport) buffered() bool { return t.off < len(t.in) || len(t.cur) > 0 }

// readRecord copies into p what the transport holds, up to the end of the
// record it is in: crypto/tls, which reads as much as its buffer takes,
// then holds no record beyond the one it returns, so that the loop knows
// whether another is there (buffered) without a Read to find out; such a
// Read, finding nothing, would cost an allocation (readFromUntil's
// atLeastReader). mu held, or on the loop once onLoop.
func (t *tlsTransport) readRecord(p []byte) int {
	n := 0
	for n < len(p) {
		src := t.cur
		if t.off < len(t.in) {
			src = t.in[t.off:]
		}
		if len(src) == 0 {
			break
		}
		lim := t.recLeft
		if t.hdrGot < len(t.hdr) {
			lim = len(t.hdr) - t.hdrGot
		}
		m := copy(p[n:], src[:min(lim, len(src))])
		if t.hdrGot < len(t.hdr) {
			copy(t.hdr[t.hdrGot:], src[:m])
			if t.hdrGot += m; t.hdrGot == len(t.hdr) {
				t.recLeft = int(t.hdr[3])<<8 | int(t.hdr[4])
			}
		} else {
			t.recLeft -= m
		}
		if t.off < len(t.in) {
			if t.off += m; t.off == len(t.in) {
				// Drained: the array goes, not kept for the connection's
				// life at the size of what filled it (a ClientHello, a
				// burst while paused). Streaming does not come here: a
				// receive is read from cur, all of it (crypto/tls keeps
				// a record's start) unless the handler pauses.
				t.in, t.off = nil, 0
			}
		} else {
			t.cur = t.cur[m:]
		}
		n += m
		if t.hdrGot == len(t.hdr) && t.recLeft == 0 {
			t.hdrGot = 0 // the record is given
			break
		}
	}
	return n
}

// feed appends received ciphertext to in and wakes the handshake; it
// reports whether in now holds mark bytes or more, and is then stopped:
// set with the append, under the same lock, so that a handshake that
// reads it all after sees stopped and has the loop read again (set after,
// it could come once the handshake had found in empty and waited, and
// neither would go on).
func (t *tlsTransport) feed(b []byte, mark int) bool {
	t.mu.Lock()
	t.in = append(t.in, b...)
	full := len(t.in)-t.off >= mark
	if full {
		t.stopped = true
	}
	t.mu.Unlock()
	t.signal()
	return full
}

func (t *tlsTransport) signal() {
	select {
	case t.ready <- struct{}{}:
	default:
	}
}

// Write queues what crypto/tls writes on the connection: on the loop at
// once, from the handshake goroutine through Post (crypto/tls reuses p).
func (t *tlsTransport) Write(p []byte) (int, error) {
	if t.onLoop {
		return t.c.writeRecord(p)
	}
	b := bytes.Clone(p)
	c := t.c
	if !c.l.post(func() { c.writeRecord(b) }) {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

// writeRecord queues ciphertext crypto/tls wrote. Where the send slab
// could not take it all (a new region's mapping failed: out of memory),
// the stream is broken mid-record and crypto/tls refuses every write
// after: c is reset with the error, its peer not left waiting for the
// rest of a record. Loop goroutine.
func (c *Conn) writeRecord(p []byte) (int, error) {
	n, err := c.write(p)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.reset(err)
	}
	return n, err
}

// Close wakes a handshake waiting in Read; crypto/tls calls it when the
// handshake's context ends. The connection itself is the loop's to close.
func (t *tlsTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.signal()
	return nil
}

func (t *tlsTransport) LocalAddr() net.Addr              { return t.local }
func (t *tlsTransport) RemoteAddr() net.Addr             { return t.remote }
func (t *tlsTransport) SetDeadline(time.Time) error      { return nil }
func (t *tlsTransport) SetReadDeadline(time.Time) error  { return nil }
func (t *tlsTransport) SetWriteDeadline(time.Time) error { return nil }

// HandshakePanicError is the error OnClose gets, inside the "tls handshake"
// *net.OpError, for a TLS handshake that a callback of its tls.Config
// (GetCertificate, GetConfigForClient, VerifyPeerCertificate,
// VerifyConnection, ...) panicked in: the handshake's goroutine recovers
// the panic, which would otherwise end the process, and the connection
// closes as for a failed handshake, counted in Stats.TLSHandshakePanics.
// Panics in the Handler's callbacks, which run on the loop, are not
// recovered. A callback that calls runtime.Goexit (t.FailNow) fails its
// handshake too, with an error of its own, not counted.
type HandshakePanicError struct {
	// Value is what was passed to panic: for panic(nil), a
	// *runtime.PanicNilError, or nil under GODEBUG panicnil=1.
	Value any
	Stack []byte // the handshake goroutine's stack at the panic (runtime/debug.Stack)
	// at is the stack's summary: the function that panicked, with its
	// file and line, and its callers up to crypto/tls's.
	at string
}

func (e *HandshakePanicError) Error() string {
	return fmt.Sprintf("engine: panic in a TLS handshake: %v [%s]", e.Value, e.at)
}

// Unwrap returns the value passed to panic if it is an error.
func (e *HandshakePanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errHandshakeGoexit is the error of a TLS handshake whose goroutine a
// callback of its tls.Config ended with runtime.Goexit (a t.FailNow in a
// test's callback, say).
var errHandshakeGoexit = errors.New("engine: a callback of the TLS config called runtime.Goexit in the handshake")

// handshakePanic describes the panic v, recovered by the deferred function
// that calls it; it returns nil, building nothing, when that function runs
// for runtime.Goexit (v nil), whose goroutine ends with no error to return.
// Handshake goroutine.
func handshakePanic(v any) *HandshakePanicError {
	pcs := make([]uintptr, 32)
	// Skipped: Callers, handshakePanic and the deferred function; then
	// runtime's frames (gopanic, sigpanic and the like, or Goexit).
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var sum []string
	for len(sum) < 4 {
		f, more := frames.Next()
		if len(sum) == 0 && v == nil && f.Function == "runtime.Goexit" {
			return nil
		}
		if len(sum) > 0 || !strings.HasPrefix(f.Function, "runtime.") {
			sum = append(sum, fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line))
			if strings.HasPrefix(f.Function, "crypto/tls.") {
				break
			}
		}
		if !more {
			break
		}
	}
	return &HandshakePanicError{Value: v, Stack: debug.Stack(), at: strings.Join(sum, " < ")}
}

// handshake runs the handshake; a panic in it (in a callback of the
// config) is its error. Not returning is what tells a panic: recover gives
// nil for panic(nil) under GODEBUG panicnil=1 (and for runtime.Goexit,
// which it does not stop: the goroutine then ends, and startTLS's deferred
// function sees that; handshakePanic tells it by its caller). Handshake
// goroutine.
func (t *tlsConn) handshake(ctx context.Context) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if e := handshakePanic(recover()); e != nil {
			err = e
		}
	}()
	err = t.conn.HandshakeContext(ctx)
	returned = true
	return err
}

// TLS returns the state of the TLS session of a connection accepted on a
// listener with ListenConfig.TLS or dialed with DialTLS (version, cipher
// suite, the server name the client asked for, the protocol ALPN chose,
// whether the session was resumed, the peer's certificates), once OnOpen
// has been called; nil for a plain connection and before OnOpen. Loop
// goroutine.
func (c *Conn) TLS() *tls.ConnectionState {
	if c.tls == nil {
		return nil
	}
	return c.tls.state
}

// TLSTruncated reports whether the peer of a TLS connection ended its
// stream, once OnEOF has come, with its FIN alone, at a record boundary,
// without close_notify. crypto/tls takes that end as close_notify's (many
// servers end so), but anyone on the path can cut a stream so: where the
// end of the stream is what frames the data (an HTTP/1.1 response without
// a length) the data may be cut short (a truncation attack, RFC 8446
// 6.1). False for a plain connection, before OnEOF, and after
// close_notify. Loop goroutine.
func (c *Conn) TLSTruncated() bool {
	return c.tls != nil && c.tls.ended && c.tls.tr.gaveEOF
}

// handshaking reports whether c is a TLS connection whose handshake is not
// done: its handler does not know it yet.
func (c *Conn) handshaking() bool { return c.tls != nil && !c.tls.established }

// newTLS makes c a TLS connection with cfg, which crypto/tls then owns: the
// server of listener ln, whose place for a handshake it holds
// (admitHandshake), or the client (ln nil: dialed). Its handshake begins
// with startTLS once c is connected. Loop goroutine.
func newTLS(c *Conn, cfg *tls.Config, ln *Listener) {
	t := &tlsConn{dialed: ln == nil, ln: ln}
	c.tls = t
	t.tr.c = c
	t.tr.ready = make(chan struct{}, 1)
	if t.dialed {
		t.conn = tls.Client(&t.tr, cfg)
	} else {
		t.conn = tls.Server(&t.tr, cfg)
	}
}

// clientConfig returns the configuration DialTLS dials address with: cfg
// cloned (nil: the defaults), its ServerName the address's host where it
// has none, as tls.Dial does: a name is sent as SNI and checked against
// the certificate's DNS names, an IP address (its zone dropped) is not
// sent (crypto/tls leaves IP literals out of SNI) and is checked against
// the certificate's IP addresses. Without a host (a Unix socket's path,
// ":port") ServerName or InsecureSkipVerify must be set, as crypto/tls
// requires. Any goroutine.
func clientConfig(network, address string, cfg *tls.Config) (*tls.Config, error) {
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.ServerName == "" && network != "unix" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			if a, err := netip.ParseAddr(host); err == nil {
				host = a.WithZone("").String()
			}
			cfg.ServerName = host
		}
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		return nil, errors.New("engine: DialTLS to an address without a host needs tls.Config.ServerName or InsecureSkipVerify")
	}
	// A renegotiation is a handshake crypto/tls runs inside Read, on the
	// loop, where the transport cannot wait for the server's reply: it
	// would fail with errWouldBlock, which crypto/tls keeps as the
	// handshake's error, wedging the connection (reads deliver nothing,
	// writes fail, no OnClose). Refused instead, as by default: the
	// server's HelloRequest ends the connection with an error.
	cfg.Renegotiation = tls.RenegotiateNever
	return cfg, nil
}

// startTLS begins the handshake of c, now connected and receiving: OnOpen
// comes once it succeeds, OnClose alone if it fails or takes longer than
// timeout (<= 0: no bound here; a dial's timer, started by Dial, goes on
// to bound it). Loop goroutine.
func (l *Loop) startTLS(c *Conn, timeout time.Duration) {
	t := c.tls
	if c.unixPeer {
		t.tr.local, t.tr.remote = &net.UnixAddr{Net: "unix"}, &net.UnixAddr{Net: "unix"}
	} else {
		t.tr.local, t.tr.remote = net.TCPAddrFromAddrPort(c.local), net.TCPAddrFromAddrPort(c.remote)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	if timeout > 0 {
		c.timer = l.afterFunc(timeout, func() { t.timedOut(c) })
	}
	l.e.handshakes.Add(1)
	l.st.tlsHandshakes.Add(1)
	go func() {
		// Deferred: a callback of the config that calls runtime.Goexit
		// ends the goroutine without handshake returning, err left as
		// it was set here.
		err := errHandshakeGoexit
		defer func() {
			if _, ok := err.(*HandshakePanicError); ok {
				l.st.tlsPanics.Add(1)
			}
			// The place, and then the count in Stats, first: the post
			// orders them before handshakeDone, so that OnOpen, and an
			// accept after it, finds the place free and the handshake
			// no longer counted. The count, taken after the place, is
			// given back after it: one who waits for the count to fall
			// finds the place free.
			if t.ln != nil {
				t.ln.handshakes.Add(-1)
			}
			l.st.tlsHandshakes.Add(-1)
			// Dropped if the loop has exited: c was closed then.
			l.post(func() { t.handshakeDone(c, err) })
			l.e.handshakes.Done()
		}()
		err = t.handshake(ctx)
	}()
}

// admitHandshake gives a connection fd that listener ln, a TLS one, has just
// accepted a place for its handshake (takePlace), which the handshake's
// goroutine gives back as it ends, before it posts its result; when ln
// holds ListenConfig.MaxHandshakes already it resets fd instead, and
// reports false. Loop goroutine.
func (l *Loop) admitHandshake(fd int, ln *Listener) bool {
	if takePlace(&ln.handshakes, ln.maxHandshakes, nil) {
		return true
	}
	ln.refused.Add(1)
	l.st.tlsRefused.Add(1)
	// A zero linger time: close(2) sends RST (a Unix peer sees the end
	// of the stream).
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
	return false
}

// takePlace takes a place for a handshake in held, the places a listener's
// handshakes hold, if it holds fewer than most (ListenConfig.MaxHandshakes;
// < 0: no cap), and reports whether it did. A load, then a compare and swap
// that takes the place only if held is still what was loaded, tried again
// if another loop changed it: a refusal leaves held as it found it, so that
// a loop refuses only when every place is held. An add undone past the cap
// would make held read above the cap meanwhile, and another loop then
// refuse a client with a place free. loaded, nil but in TestTakePlace, is
// called after each load. Any goroutine.
func takePlace(held *atomic.Int64, most int64, loaded func()) bool {
	for {
		n := held.Load()
		if loaded != nil {
			loaded()
		}
		if most >= 0 && n >= most {
			return false
		}
		if held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// timedOut ends c's handshake with os.ErrDeadlineExceeded if it has not
// ended: its timeout (a dial's: the connect's and the handshake's) has
// passed. Loop goroutine.
func (t *tlsConn) timedOut(c *Conn) {
	if c.state == stateOpen && !t.established {
		t.fail(c, c.netError("tls handshake", os.ErrDeadlineExceeded))
	}
}

// handshakeDone opens c after a handshake that succeeded, or closes it with
// the handshake's error. Loop goroutine.
func (t *tlsConn) handshakeDone(c *Conn, err error) {
	t.cancel()
	t.cancel = nil
	if c.state != stateOpen {
		return // closed meanwhile (timeout, shutdown, the peer's reset)
	}
	l := c.l
	c.stopTimer()
	switch {
	case err != nil:
		t.fail(c, c.netError("tls handshake", err))
		return
	case l.stopping || l.e.draining.Load() && !t.dialed:
		// As an accept refused while draining. A dial goes on, as a
		// plain one connecting then does: a drain may need it.
		t.fail(c, ErrClosed)
		return
	}
	t.established = true
	t.tr.onLoop = true
	st := t.conn.ConnectionState()
	t.state = &st
	if len(t.early) > 0 {
		t.conn.Write(t.early) // queued: errors only once closed
		t.early = nil
	}
	if t.shutLater {
		c.CloseWrite()
	}
	if t.pauseLater {
		c.pause(pauseUser)
	}
	if c.bits&bitSendFailed != 0 {
		// A write met the peer's reset during the handshake, which
		// then had what it needed (Conn.peerReset): c is kept for what
		// came before the reset, and CloseTimeout bounds it now that
		// the handshake's timer is stopped (kept with no bound, a c
		// its handler paused in OnOpen was never ended:
		// TestTLSWriteFailureInHandshakeBounded).
		c.boundKept()
	}
	l.h.OnOpen(c)
	// What the client sent with or after its Finished; reading resumes
	// if the handshake's input had stopped it.
	t.pump(c)
	c.resume(pauseTLS)
}

// fail closes c, sending what crypto/tls queued (an alert), with OnClose
// getting err. Loop goroutine.
func (t *tlsConn) fail(c *Conn, err error) {
	if c.err == nil {
		c.err = err
	}
	c.Close()
}

// received takes n bytes of ciphertext in buffer id, which it releases: fed
// to the handshake, decrypted and delivered, or kept in the transport
// while reading is paused. Loop goroutine, from deliver.
func (t *tlsConn) received(c *Conn, id int32, n int) {
	l := c.l
	b := l.be.recvBuf(id)[:n]
	switch {
	case t.ended:
	case !t.established:
		if t.tr.feed(b, l.hwm) {
			// The handshake is not taking it (a GetCertificate that
			// waits, say): the client's bytes stay in the socket until
			// it has read these.
			c.pause(pauseTLS)
		}
	case c.paused&(pauseUser|pauseHWM|pauseStarved) != 0:
		t.tr.in = append(t.tr.in, b...)
	default:
		// Read from b itself, unless the transport still holds bytes
		// that came before it (no path is known to leave any with c
		// not paused: resume pumps; this keeps their order if one does).
		if t.tr.buffered() {
			t.tr.in = append(t.tr.in, b...)
		} else {
			t.tr.cur = b
		}
		t.pump(c)
		if len(t.tr.cur) > 0 {
			t.tr.in = append(t.tr.in, t.tr.cur...)
		}
		t.tr.cur = nil
	}
	l.be.releaseRecv(id)
}

// pump decrypts what the transport holds into send-slab chunks and hands
// each to OnData, until there is nothing more, the handler pauses or
// closes c, the stream ends (OnEOF) or fails (OnClose with the error), or
// no chunk is free (starve).
// What crypto/tls answers meanwhile (a KeyUpdate) is queued by the
// transport. Loop goroutine.
func (t *tlsConn) pump(c *Conn) {
	l := c.l
	for t.established && c.state == stateOpen && c.paused&(pauseUser|pauseHWM|pauseClosing|pauseStarved) == 0 && !c.lingering && !t.ended {
		id, err := l.chunks.get()
		if err != nil {
			t.starve(c)
			return
		}
		n, err := t.conn.Read(l.chunks.buf(id))
		if n > 0 {
			l.deliverNow(c, -id-1, n)
		} else {
			l.chunks.put(id)
		}
		switch {
		case err == nil && (n == l.chunks.size || t.tr.buffered() || t.tr.eof):
			// More of this record in crypto/tls, another record, or
			// the end of the stream to find.
			continue
		case err == nil, err == errWouldBlock:
		case err == io.EOF:
			t.ended = true
			l.eof(c)
		case c.state == stateOpen:
			t.fail(c, c.netError("read", err))
		}
		return
	}
}

// starve parks c, whose pump found no chunk free and the slab unable to
// grow (out of memory), as a plain connection's receive that finds no
// buffer is parked: reading stops (pauseStarved; what the kernel had
// received already is kept in the transport), what is not decrypted yet
// stays in crypto/tls and the transport, and c is listed for
// resumeStarved to pump again once chunks are free. A reset would end it
// for a shortage that a slow peer's queue can make and that passes as
// that peer reads. Loop goroutine.
func (t *tlsConn) starve(c *Conn) {
	l := c.l
	l.st.noBufs.Add(1)
	if len(l.tlsStarved) == 0 {
		l.starvedTry.listed()
	}
	l.tlsStarved = append(l.tlsStarved, c)
	c.pause(pauseStarved)
}

// sockEOF handles the socket's FIN: the end of the ciphertext. Reading
// stops (pauseEOF); crypto/tls then reads the end of the stream, or fails
// on a record cut short. Loop goroutine.
func (t *tlsConn) sockEOF(c *Conn) {
	if t.tr.eof {
		return
	}
	c.pause(pauseEOF)
	if !t.established {
		t.tr.mu.Lock()
		t.tr.eof = true
		t.tr.mu.Unlock()
		t.tr.signal()
		return
	}
	t.tr.eof = true
	t.pump(c)
}

// write encrypts p onto c's write queue; a dial's p before its handshake
// is done is kept until then. Loop goroutine.
func (t *tlsConn) write(c *Conn, p []byte) (int, error) {
	if err := t.writing(c); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !t.established {
		t.early = append(t.early, p...)
		return len(p), nil
	}
	return t.conn.Write(p)
}

// tlsGather is what Writev gathers at most into one crypto/tls Write: a
// record's plaintext at most (TLS's limit, 2^14 bytes).
const tlsGather = 16 << 10

// writev encrypts bufs onto c's write queue as write would each, but as
// few records as it can: slices that fit together in tlsGather are copied
// into the loop's scratch and encrypted with one Write (an HTTP/2
// response's HEADERS frame, DATA frame header and body: one record, not
// three), and a slice that does not fit after what was gathered and is
// tlsGather or more is encrypted on its own, not copied. Loop goroutine.
func (t *tlsConn) writev(c *Conn, bufs [][]byte) (int, error) {
	if err := t.writing(c); err != nil {
		return 0, err
	}
	n := 0
	if !t.established {
		for _, b := range bufs {
			t.early = append(t.early, b...)
			n += len(b)
		}
		return n, nil
	}
	s := c.l.tlsScratch[:0]
	var err error
	for _, b := range bufs {
		if len(s)+len(b) > tlsGather {
			if n, err = t.put(n, s); err != nil {
				break
			}
			s = s[:0]
			if len(b) >= tlsGather {
				if n, err = t.put(n, b); err != nil {
					break
				}
				continue
			}
		}
		s = append(s, b...)
	}
	if err == nil {
		n, err = t.put(n, s)
	}
	c.l.tlsScratch = s[:0]
	return n, err
}

// put encrypts p for writev, which has encrypted n bytes: it returns n
// with what p added.
func (t *tlsConn) put(n int, p []byte) (int, error) {
	if len(p) == 0 {
		return n, nil
	}
	k, err := t.conn.Write(p)
	return n + k, err
}

// writing says whether c may be written to: ErrClosed after Close or
// CloseWrite (a dial's included, before its handshake is done), and on a
// server's connection before its handshake is. Loop goroutine.
func (t *tlsConn) writing(c *Conn) error {
	if !c.writable() || t.shutLater || !t.established && !t.dialed {
		return net.ErrClosed
	}
	return nil
}

// closeNotify queues a close_notify alert, once, on an established c that
// can still write. Loop goroutine.
func (t *tlsConn) closeNotify(c *Conn) {
	if t.established && c.writable() {
		t.conn.CloseWrite()
	}
}

// closed wakes a handshake waiting for input: c has closed. Loop goroutine.
func (t *tlsConn) closed() {
	t.tr.Close()
	if t.cancel != nil {
		t.cancel()
	}
}
