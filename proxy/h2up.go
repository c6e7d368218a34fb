package proxy

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// HTTP/2 to the servers of an h2c pool (PoolConfig.Protocol). Each loop
// keeps, per server, up to the pool's h2_max_connections multiplexed
// connections (upH2: an internal/h2 Client on an engine.Conn dialed from
// the loop), in the server's srvLoop (h2Share), so that they follow the
// server over reloads as its idle HTTP/1.1 connections do; nothing is
// shared between loops and no lock is taken. A request (an upUser: an
// HTTP/2 client's stream, h2stream) picks a server by the pool's balance
// (least-conn counts the streams in flight), then the first connection to
// it with room (the lower of the server's SETTINGS_MAX_CONCURRENT_STREAMS
// and h2_max_concurrent_streams), else dials another (up to the bound),
// else waits in the server's queue for a stream to end, within
// response_timeout, which runs on as it goes to the server
// (h2stream.waitDeadline). A connection opens streams only once the server's
// SETTINGS arrived. Flow control is the backpressure both ways: a side's
// DATA is Consumed (its window returned) only once the other side took it.

// upUser is a request on an h2c pool's connection: the events of its
// upstream stream, and of the queue it waits in.
type upUser interface {
	// onStart: u has room: open the stream on it now.
	onStart(u *upH2)
	// onFailover: the server the user waits for failed to connect (no
	// connection to it is left): try the next server.
	onFailover()
	onResponse(u *upH2, r *h2.Response, end bool)
	onData(u *upH2, p []byte, end bool)
	onTrailers(u *upH2, fields []hpack.Field)
	// onReset: the stream ended before its end, cause says why (the
	// server's reset; unprocessed: REFUSED_STREAM or a GOAWAY above it,
	// so it may be sent again; a response in error; the connection's
	// end). A user still waiting gets it where the engine's stop cut the
	// connection it waited for (failWaiters).
	onReset(u *upH2, code h2.ErrCode, cause h2.ResetCause)
	// onWritable: the stream's send window has room for the request body.
	onWritable(u *upH2)
	// onQueue: u's write queue went below the high-water mark.
	onQueue(u *upH2)
}

// h2Share is a server's HTTP/2 connections on one loop and the requests
// waiting for room on them. Its loop only.
type h2Share struct {
	conns []*upH2
	wait  []upUser
}

// upStream is one stream of an upH2 and its user.
type upStream struct {
	id uint32
	u  upUser
	// answered: its response sent a DATA byte or ended, so that a reset
	// of it is no longer early (upH2MaxEarlyResets); fine: its final
	// status is below 400; ended: its response ended.
	answered, fine, ended bool
}

// upH2MaxEarlyResets bounds the early resets the proxy sends on one
// upstream connection: resets of streams whose response had sent no DATA
// and not ended, less one for each stream that ended both ways without
// one, as internal/h2's Server counts a client's against its
// MaxEarlyResets (rapid reset, CVE-2023-44487). Each client's resets are
// bounded by the proxy's own Server, but the streams of many clients
// share a connection, and a server with such a bound would end it
// (GOAWAY ENHANCE_YOUR_CALM) with every other client's stream on it
// (TestH2UpClientsResetsShareNoConnection). A connection that reaches
// this bound, half internal/h2's default (200) for a server counting a
// little otherwise, is retired: its streams finish there, new ones go to
// another connection. A response of status 400 or above gives nothing
// back: the server may have answered it itself at no cost, as a spindle
// proxy's own answers (h2.Server.Local) give it nothing back, and a
// client putting such requests between its resets would keep the count
// level here while the server's rose (TestH2UpErrorAnswersGiveNoResetBack).
const upH2MaxEarlyResets = h2.DefaultMaxEarlyResets / 2

// upH2 is one HTTP/2 connection to a server of an h2c pool: the Context of
// its engine.Conn and the h2.ClientHandler of its Client. Loop goroutine.
type upH2 struct {
	p       *Proxy
	ls      *loopState
	sl      *srvLoop
	pl      *pool // the pool it was dialed for (its bounds and passive health)
	srv     int   // its server in pl
	conn    *engine.Conn
	cl      *h2.Client
	writev  func([][]byte) (int, error) // conn.Writev, counted in the server's bytes out
	out     [1][]byte                   // flush's Pending, for writev
	in      []byte                      // the frame a read ended in (FeedTail)
	open    bool                        // connected (TCP, and TLS over TLS)
	ready   bool                        // the server's SETTINGS arrived: the connect succeeded
	noH2    bool                        // over TLS, the server chose no h2 by ALPN: a failed connect
	listed  bool                        // in sl.h2.conns
	retired bool                        // takes no new stream: closed once the last ends
	feeding bool                        // inside cl.FeedTail: flush waits for its end
	used    bool                        // a stream was opened on it: the next ones are on a reused connection
	// endTerm is the term of the streams its end cuts (closed, by the
	// OnClose's error: sideTerm): SD, ST where write_timeout reset it,
	// KD where the engine's stop cut it; termNone before.
	endTerm uint8
	streams []upStream
	idleAt  int64         // Proxy.now since when no stream is open
	recvAt  int64         // Proxy.now of its last bytes from the server (h2_ping_interval)
	pingAt  int64         // Proxy.now our PING went out, -1 for none awaiting its ACK
	setupBy int64         // Proxy.now by which the server's SETTINGS are due: its dial's plus the connect timeout
	ping    [8]byte       // that PING's data: pingAt, big-endian
	timeout time.Duration // its connect timeout (its first stream's listener's), for another dialed in its place

	// heads are the clients a response head was written to inside
	// cl.FeedTail, flushed at its end.
	heads laterFlush[*h2conn]

	// earlyResets counts the early resets sent, less the streams that
	// ended both ways without one (upH2MaxEarlyResets).
	earlyResets int
}

// upH2Config is the Client's config for an upstream connection: each
// stream's receive window (what a response may have on its way that its
// client has not taken, held by the proxy) 64 KiB, the connection's set by
// upH2Conf. The control-frame budget is internal/h2's default: a server's
// WINDOW_UPDATEs returning window an upload used cost nothing from it
// (TestH2UpLargeUpload).
//
// The connection's receive window is each stream's times the streams a
// connection of the pool carries (h2_max_concurrent_streams), up to
// 2^31-1, at least 1 MiB (upH2Conf): a stream's DATA is Consumed, the
// connection's window with the stream's, only once its client took it,
// so under a smaller one a few clients not reading (16 of 64 KiB held
// each against 1 MiB) stalled every other stream on the connection
// (TestH2UpSlowClientsNoHOL). What the proxy holds stays bounded by the
// stream windows.
var upH2Config = h2.Config{InitialWindowSize: upH2Window}

// upH2Window is a stream's receive window on an h2c pool's connection:
// what its server may send that the proxy has not passed on.
const upH2Window = 64 << 10

// upH2Conf returns the Client config for a connection of pl.
func upH2Conf(pl *pool) *h2.Config {
	cfg := upH2Config
	w := int64(cfg.InitialWindowSize) * int64(pl.h2Streams)
	cfg.ConnWindowSize = uint32(min(max(w, h2.DefaultConnWindowSize), h2.MaxWindow))
	return &cfg
}

// scheme returns the :scheme of the requests u carries: https over TLS
// (protocol h2), http for h2c. It is the scheme of the URI the proxy asks
// the server for (RFC 9113 8.3.1), as Go's http2.Transport derives it
// from the URL it dials and nginx's grpc_pass from grpc:// or grpcs://,
// and as an HTTP/1.1 server reconstructs it from its own connection (RFC
// 9112 3.3), so that a server gets the same scheme over HTTP/1.1 and
// HTTP/2 whatever the client's connection was: the client's scheme
// travels in X-Forwarded-Proto.
func (u *upH2) scheme() []byte {
	if u.pl.tls != nil {
		return schemeHTTPS
	}
	return schemeHTTPVal
}

// room returns how many more streams u takes now.
func (u *upH2) room() int {
	if u.retired || !u.open || !u.cl.SettingsSeen() {
		return 0
	}
	return min(u.cl.Available(), u.pl.h2Streams-len(u.streams))
}

// nextUp returns the next server of pl in d's walk that is up and that no
// reload removed (each once), marking d dialed; false when none is left.
// Loop goroutine.
func (d *dialing) nextUp(ls *loopState, pl *pool) (int, bool) {
	var tot poolLoads
	for {
		i, ok := d.step(pl)
		if !ok {
			break
		}
		if pl.servers[i].up() && !ls.share(pl, i).idle.gone {
			if pl.overloaded(i, &tot) {
				d.over |= 1 << i
				continue
			}
			d.dialed = true
			return i, true
		}
	}
	return d.overTaken(ls, pl)
}

// exhausted counts a walk that found no server for exchange x of a client
// of l, and returns the status to answer: 502 where servers were tried
// and failed to connect, 503 where none was up. Loop goroutine.
func (d *dialing) exhausted(ls *loopState, l *listener, x *exchange) int {
	if d.dialed {
		l.stats[ls.id].failed.inc()
		x.term = termConnect
		return 502
	}
	l.stats[ls.id].noServer.inc()
	return 503
}

// h2Acquire finds stream user x a connection to server i of pl: one
// with room (started at once), else it waits in the server's queue, a
// connection dialed for it unless enough are on their way or the bound
// is reached. It returns nil where x started or waits; h2Dial's error
// where the dial failed before it started (the caller tries the next
// server), or where the loop is stopping (engine.ErrClosed: no server
// failed, and the stop cuts x's client next). Loop goroutine.
func (ls *loopState) h2Acquire(p *Proxy, x upUser, pl *pool, i int, client *engine.Conn, timeout time.Duration) error {
	sh := &ls.share(pl, i).h2
	for _, u := range sh.conns {
		if u.room() > 0 {
			x.onStart(u)
			return nil
		}
	}
	if sh.short(pl, 1) {
		if err := ls.h2Dial(p, pl, i, client.Loop(), timeout); err != nil {
			return err
		}
	}
	sh.wait = append(sh.wait, x)
	return nil
}

// short reports whether sh's waiters and n more are more than its
// connections on their way take (each up to pl's h2_max_concurrent_streams;
// the open ones have none left), with fewer than pl's h2_max_connections
// in service: another connection is to be dialed. Loop goroutine.
func (sh *h2Share) short(pl *pool, n int) bool {
	live, coming := 0, 0
	for _, u := range sh.conns {
		if !u.retired {
			live++
			if !u.open || !u.cl.SettingsSeen() {
				coming++
			}
		}
	}
	return live < pl.h2Conns && len(sh.wait)+n > coming*pl.h2Streams
}

// errNotDialed is h2Dial's error where it dialed nothing for a reason
// other than the loop's stop: the dial failed at once (counted), or the
// pool's latest generation cannot take the server.
var errNotDialed = errors.New("no HTTP/2 connection dialed")

// h2Dial dials a new connection to server i of pl from loop l, with
// connect timeout timeout. It returns errNotDialed where the dial failed
// at once (counted), and engine.ErrClosed where the loop is stopping: it
// refuses dials, and no connect failed (as dialing.next). For a pool a
// reload replaced (a request begun before, its retry, a replace), it
// dials under the pool's latest generation where that is HTTP/2 and has
// the server: the connection joins the server's, which that pool's
// requests take (TestTLSReloadH2RetryDial). Not only where the
// replacement was secured otherwise (poolLoop.stale): a connection's
// pool may be a generation before the one a reload found stale, its
// connections having carried that one's requests since, and dialed
// under it the connection went out with the settings the reload left
// (TestH2UpTLSReloadServesWaitingRequest/after_another_reload). Where
// the latest cannot take the server, a stale pool dials nothing
// (errNotDialed). Loop goroutine.
func (ls *loopState) h2Dial(p *Proxy, pl *pool, i int, l *engine.Loop, timeout time.Duration) error {
	if np := pl.queue().pool.Load(); np != nil && np != pl {
		if j := slices.Index(np.servers, pl.servers[i]); np.h2 && j >= 0 {
			pl, i = np, j
		} else if pl.loops[ls.id].stale {
			return errNotDialed
		}
	}
	srv := pl.servers[i]
	st := ls.stats(pl, i)
	c, err := pl.dial(l, i, timeout, "")
	if errors.Is(err, engine.ErrClosed) {
		return err
	}
	if err != nil || c.Closed() {
		st.failures.inc()
		srv.connectFailed(pl)
		return errNotDialed
	}
	sl := ls.share(pl, i)
	u := &upH2{p: p, ls: ls, sl: sl, pl: pl, srv: i, conn: c, listed: true, idleAt: -1, pingAt: -1, timeout: timeout,
		setupBy: deadline(p.now(), timeout)}
	u.cl = h2.NewClient(u, upH2Conf(pl))
	u.writev = func(vec [][]byte) (int, error) {
		n, err := c.Writev(vec)
		u.sl.stats.bytesOut.addInt(n)
		return n, err
	}
	c.SetContext(u)
	sl.h2.conns = append(sl.h2.conns, u)
	return nil
}

// unwait takes x out of server i's queue of pl, if it is there.
func (ls *loopState) unwait(x upUser, sl *srvLoop) {
	w := sl.h2.wait
	for k, y := range w {
		if y == x {
			copy(w[k:], w[k+1:])
			w[len(w)-1] = nil
			sl.h2.wait = w[:len(w)-1]
			return
		}
	}
}

// serve starts the waiters of u's server while u has room. Those left
// over get another connection where h2Acquire would dial one for them:
// they queued counting on h2_max_concurrent_streams per connection on its
// way, which the server's SETTINGS may lower (MAX_CONCURRENT_STREAMS 1),
// at the first or later; else they waited for u's streams one at a time,
// a connection dialed only for a request coming after them
// (TestH2UpGrowPastServerBound). In a drain too, which is to finish them
// within its time, as h2Acquire dials for the requests it lets in: they
// ran one at a time, each response's time added to the drain's; the
// connections close once idle (settle) (TestH2UpDrainGrowPastServerBound).
// Loop goroutine.
func (u *upH2) serve() {
	sh := &u.sl.h2
	for len(sh.wait) > 0 && u.room() > 0 {
		x := sh.wait[0]
		copy(sh.wait, sh.wait[1:])
		sh.wait[len(sh.wait)-1] = nil
		sh.wait = sh.wait[:len(sh.wait)-1]
		x.onStart(u)
	}
	if len(sh.wait) > 0 && sh.short(u.pl, 0) {
		u.ls.h2Dial(u.p, u.pl, u.srv, u.conn.Loop(), u.timeout) // (one failing at once: they wait on)
	}
	u.flush()
}

// add records stream id of x. The first is the connect's success for
// passive health (tookNone).
func (u *upH2) add(id uint32, x upUser) {
	u.streams = append(u.streams, upStream{id: id, u: x})
	if !u.used {
		u.pl.servers[u.srv].connected(u.pl)
	}
	u.used = true
	u.idleAt = -1 // (idle again from its last stream's end: settle)
	u.sl.stats.h2Streams.inc()
}

// user returns stream id's user, nil for none.
func (u *upH2) user(id uint32) upUser {
	if s := u.stream(id); s != nil {
		return s.u
	}
	return nil
}

// stream returns stream id, nil for none.
func (u *upH2) stream(id uint32) *upStream {
	for k := range u.streams {
		if u.streams[k].id == id {
			return &u.streams[k]
		}
	}
	return nil
}

// letGo: stream id's user lets go of it, resetting it (CANCEL) where
// reset. An early reset is counted, and one whose count reaches
// upH2MaxEarlyResets retires u (before the stream is removed, so that
// its end dials another connection for the waiters: settle); a stream
// that ended both ways, its status below 400, gives one back. Loop
// goroutine.
func (u *upH2) letGo(id uint32, reset bool) {
	if s := u.stream(id); s != nil {
		switch {
		case reset && !s.answered:
			if u.earlyResets++; u.earlyResets >= upH2MaxEarlyResets && !u.retired {
				u.retired = true
				u.sl.stats.h2Retires.inc()
			}
		case !reset && s.ended && s.fine && u.earlyResets > 0:
			u.earlyResets--
		}
	}
	if reset {
		u.cl.Reset(id, h2.Cancel)
	}
	u.remove(id)
	u.flush()
}

// remove forgets stream id (its user let go of it, or it was reset); the
// connection's room goes to the waiters, or it idles, or (retired) closes.
func (u *upH2) remove(id uint32) {
	for k, s := range u.streams {
		if s.id == id {
			last := len(u.streams) - 1
			u.streams[k] = u.streams[last]
			u.streams[last] = upStream{}
			u.streams = u.streams[:last]
			break
		}
	}
	if u.feeding {
		return // (after Feed: fed)
	}
	u.settle()
}

// settle acts on u's state after a change: waiters served, an idle
// connection timed, a retired or finished one closed. Loop goroutine.
func (u *upH2) settle() {
	if !u.listed {
		return
	}
	if !u.tookNone() {
		u.replace()
	}
	if len(u.streams) == 0 && (u.retired || u.cl.Done() || !u.cl.CanOpen() && u.cl.SettingsSeen()) {
		// (A server allowing no stream, MAX_CONCURRENT_STREAMS 0, fails
		// its waiters over where no other connection takes them: they
		// waited for response_timeout, TestH2UpZeroStreams.)
		u.shutdown()
		u.failWaiters()
		return
	}
	u.serve()
	if len(u.streams) == 0 && u.ls.draining && u.room() > 0 {
		// A drain keeps no idle connection: this one has carried its
		// streams and the requests that waited for it (serve took them
		// all while it had room), or was dialed in the drain for a
		// request since ended. Left open it would hold the drain up to
		// idle_timeout.
		u.shutdown()
		return
	}
	if len(u.streams) == 0 && u.idleAt < 0 {
		now := u.p.now()
		u.idleAt = now
		u.ls.armSweep(u.conn.Loop(), now, deadline(now, u.pl.idleTimeout))
	} else if len(u.streams) > 0 {
		u.idleAt = -1
	}
}

// replace dials a connection in u's place for the waiters of its server
// where none of its connections takes streams any more (a GOAWAY retired
// u): nobody else would; a dial that fails at once fails them over. In a
// drain too: the requests waiting are the drain's to finish, and without
// a connection they failed over at u's last stream's end, with a pool of
// one server to 502 SC; the new one closes once they are served (settle)
// (TestH2UpGoAwayServesWaitingRequest/drain).
func (u *upH2) replace() {
	sh := &u.sl.h2
	if !u.retired || len(sh.wait) == 0 || u.ls.h2Alive(sh) {
		return
	}
	if u.ls.h2Dial(u.p, u.pl, u.srv, u.conn.Loop(), u.timeout) != nil {
		u.failWaiters() // (where the loop is stopping their walks end KD: h2Acquire)
	}
}

// flush writes the Client's output to the server. A write not all
// queued (the engine's Write failed) cuts the stream of frames, which
// nothing sent after it can mend: the connection takes no new stream and
// is reset, its streams ending at its close (closed), as internal/h2
// ends the connection at a lost write of WriteDataTo. Loop goroutine.
func (u *upH2) flush() {
	if u.feeding || !u.open || !u.listed && u.conn.Closed() {
		return
	}
	if out := u.cl.Pending(); len(out) > 0 {
		u.out[0] = out
		n, err := u.writev(u.out[:])
		u.out[0] = nil
		u.cl.Written(len(out))
		if err != nil || n < len(out) {
			u.retired = true
			u.conn.Reset()
		}
	}
}

// unlist takes u out of its server's connections.
func (u *upH2) unlist() {
	if !u.listed {
		return
	}
	u.listed = false
	cs := u.sl.h2.conns
	for k, x := range cs {
		if x == u {
			copy(cs[k:], cs[k+1:])
			cs[len(cs)-1] = nil
			u.sl.h2.conns = cs[:len(cs)-1]
			break
		}
	}
	if u.ready {
		u.sl.stats.h2Conns.dec()
	}
}

// shutdown closes u, idle or finished: GOAWAY, then the close.
func (u *upH2) shutdown() {
	u.unlist()
	u.retired = true
	if u.open {
		u.cl.Shutdown()
		u.flush()
	}
	u.conn.SetContext(nil)
	u.conn.Close()
}

// retire takes u out of service: no new stream; closed once its last ends.
func (u *upH2) retire() {
	u.retired = true
	if len(u.streams) == 0 {
		u.shutdown()
	}
}

// opened: the dial succeeded; the preface and SETTINGS go out. Over TLS
// the server must have chosen h2 by ALPN (RFC 9113 3.2): one that did not
// (a server without HTTP/2, which would take the preface for a bad
// request) is a failed connect, closed before a byte is sent. The
// connect succeeds only once the server's SETTINGS arrive (setUp), which
// are due within the connect timeout of the dial, as the TLS handshake
// is: the loop's sweep closes the connection at setupBy (h2Share.sweep).
// Loop goroutine.
func (u *upH2) opened() {
	if st := u.conn.TLS(); st != nil && st.NegotiatedProtocol != "h2" {
		u.noH2 = true
		u.conn.Close() // (closed counts it)
		return
	}
	u.open = true
	u.flush()
	u.ls.armSweep(u.conn.Loop(), u.p.now(), u.setupBy)
	if d := u.pl.pingEvery; d > 0 {
		now := u.p.now()
		u.recvAt = now
		u.ls.armSweep(u.conn.Loop(), now, deadline(now, d))
	}
}

// data feeds the server's bytes to the Client. Loop goroutine.
func (u *upH2) data(b engine.Buffer) {
	u.sl.stats.bytesIn.addInt(b.Len())
	if u.pl.pingEvery > 0 {
		u.recvAt = u.p.now()
	}
	u.feeding = true
	err := u.cl.FeedTail(&u.in, b.Bytes())
	b.Release()
	u.feeding = false
	if !u.ready && u.cl.SettingsSeen() {
		u.setUp()
	}
	u.heads.flushAll()
	u.flush()
	if err != nil || u.cl.Done() {
		if err == nil && u.cl.Err() == nil && !u.tookNone() {
			// The server's GOAWAY and its last stream's end, read at once:
			// the requests waiting get a connection in u's place, as where
			// the end came later (settle), rather than failing over, with
			// a pool of one server to 502 SC
			// (TestH2UpGoAwayServesWaitingRequest).
			u.replace()
		}
		u.closeNow()
		return
	}
	u.settle()
}

// setUp: the server's SETTINGS arrived: the connect succeeded (counted;
// for passive health at its first stream: tookNone), and the connection
// counts as open in the server's h2Conns until it is unlisted, so that
// the gauge holds only connections whose connect was counted, never one
// that failed before its SETTINGS. Loop goroutine.
func (u *upH2) setUp() {
	u.ready = true
	u.sl.stats.connects.inc()
	u.sl.stats.h2Conns.inc()
}

// tookNone reports whether u, set up, has taken no stream while
// requests wait for room at its server: at its end (the server's GOAWAY,
// close or reset) or where its SETTINGS allow none
// (MAX_CONCURRENT_STREAMS 0), its server failed to take them. No
// connection is dialed in its place for them (replace): a server that
// ends each connection so (a GOAWAY with last stream 0 with its
// SETTINGS, as one shutting down that still accepts) was dialed again at
// once, again and again until their response_timeout (thousands of
// connections to a 504). They go on to the next server, else get 502,
// as from a server whose connect failed, and it counts as one
// (failWaiters): for passive health a connection's success is its
// first stream, so that such a server is ejected after fails, the
// cooldown its back-off, as one refusing connections is
// (TestH2UpNoStreamServerNotRedialed). Loop goroutine.
func (u *upH2) tookNone() bool {
	return u.ready && !u.used && len(u.sl.h2.wait) > 0
}

// closeNow ends u at once (an error, the server's FIN): its streams are
// reset (Close: OnReset to each), it is closed. Before the server's
// SETTINGS that is a failed connect, counted before its waiters fail
// over. Loop goroutine.
func (u *upH2) closeNow() {
	if !u.ready {
		u.p.dialFailed(u.pl, u.srv, &u.sl.stats, nil)
	}
	u.unlist()
	u.retired = true
	u.conn.SetContext(nil)
	u.cl.Close()
	u.streams = u.streams[:0]
	u.conn.Close()
	u.failWaiters()
}

// ended: the server closed u (its FIN). Where u was set up, the
// requests waiting for room on it get a connection dialed in its place,
// as at its GOAWAY (replace), before its streams end (closeNow): none of
// them was sent, and a server closing a connection it set up (a
// restart, a limit of its own) has not failed to connect. Failed over,
// they were counted as failed at it, and with a pool of one server got
// 502 SC (TestH2UpServerCloseServesWaitingRequest). They fail over where
// that dial fails at once. Loop goroutine.
func (u *upH2) ended() {
	if u.ready && u.listed && !u.tookNone() {
		u.retired = true
		u.replace()
	}
	u.closeNow()
}

// failWaiters fails the waiters of u's server over to the next server
// when no connection to it is left. Where the engine's stop cut u
// (endTerm KD) they end there, as its streams do (onReset): the stop
// cuts their clients too, and the walk would only find connections it
// cuts and dials the stopping loop refuses (ended KD there too:
// h2Acquire). Loop goroutine.
func (u *upH2) failWaiters() {
	sh := &u.sl.h2
	if len(sh.wait) == 0 || u.ls.h2Alive(sh) {
		return
	}
	if u.ready && !u.used && u.endTerm != termKilled {
		u.p.dialFailed(u.pl, u.srv, &u.sl.stats, nil) // (tookNone)
	}
	w := sh.wait
	sh.wait = nil
	for _, x := range w {
		if u.endTerm == termKilled {
			x.onReset(u, h2.Cancel, h2.ResetConnection)
		} else {
			x.onFailover()
		}
	}
}

// closed: the connection ended (a failed dial, the server's close or
// reset, an error: err, the engine's OnClose's). One that ended before
// the server's SETTINGS failed to connect, and fails over the server's
// waiters when no other connection to it is left. One the server reset
// after it was set up gets a connection dialed in its place for them
// first, as one it closed (ended). One the engine's stop cut
// (net.ErrClosed) failed no connect, and its streams end there
// (endTerm). Loop goroutine.
func (u *upH2) closed(err error) {
	wasListed := u.listed
	u.retired = true
	u.endTerm = sideTerm(err, termServer, termServerTO)
	if wasListed && u.ready && u.endTerm == termServer && !u.tookNone() {
		u.replace()
	}
	u.unlist()
	u.conn.SetContext(nil)
	if !u.ready && u.endTerm != termKilled {
		if u.noH2 {
			err = errNoH2
		}
		u.p.dialFailed(u.pl, u.srv, &u.sl.stats, err)
	}
	u.cl.Close()
	u.streams = u.streams[:0]
	if wasListed {
		u.failWaiters()
	}
}

// connTerm is the term of a stream the connection's end cut: endTerm,
// SD where it ended otherwise (closeNow, its client closed).
func (u *upH2) connTerm() uint8 {
	if u.endTerm != termNone {
		return u.endTerm
	}
	return termServer
}

// h2Alive reports whether a connection of sh may still take its waiters.
func (ls *loopState) h2Alive(sh *h2Share) bool {
	for _, u := range sh.conns {
		if !u.retired {
			return true
		}
	}
	return false
}

// writable: u's write queue went below the mark: the request bodies it
// held back are returned to their clients' windows.
func (u *upH2) writable() {
	for k := 0; k < len(u.streams); k++ {
		u.streams[k].u.onQueue(u)
	}
	u.flush()
}

// OnResponse passes a response head to its user.
func (u *upH2) OnResponse(c *h2.Client, id uint32, r *h2.Response, end bool) {
	if s := u.stream(id); s != nil {
		if r.Status >= 200 {
			s.fine = r.Status < 400
		}
		s.answered, s.ended = s.answered || end, end
		s.u.onResponse(u, r, end)
	}
}

// OnData passes response body bytes to their user.
func (u *upH2) OnData(c *h2.Client, id uint32, p []byte, end bool) {
	if s := u.stream(id); s != nil {
		s.answered, s.ended = s.answered || len(p) > 0 || end, end
		s.u.onData(u, p, end)
		return
	}
	c.Consumed(id, len(p))
}

// OnTrailers passes a response's trailers to their user.
func (u *upH2) OnTrailers(c *h2.Client, id uint32, fields []hpack.Field) {
	if s := u.stream(id); s != nil {
		s.answered, s.ended = true, true
		s.u.onTrailers(u, fields)
	}
}

// OnReset tells a stream's user that it ended before its end.
func (u *upH2) OnReset(c *h2.Client, id uint32, code h2.ErrCode, cause h2.ResetCause) {
	x := u.user(id)
	if x == nil {
		return
	}
	u.remove(id)
	if cause == h2.ResetUnprocessed {
		u.sl.stats.h2Refused.inc()
	}
	x.onReset(u, code, cause)
}

// OnWritable tells a stream's user that its send window has room.
func (u *upH2) OnWritable(c *h2.Client, id uint32) {
	if x := u.user(id); x != nil {
		x.onWritable(u)
	}
}

// OnGoAway: the server takes no new stream here; those open go on (the
// ones above last are reset unprocessed next, and retried).
func (u *upH2) OnGoAway(c *h2.Client, code h2.ErrCode, last uint32, debug []byte) {
	u.sl.stats.h2GoAways.inc()
	u.retired = true // (out of h2_max_connections' count: another may be dialed)
}

// OnPingAck: the ACK of our PING (its data matches) gives its round
// trip, and the next PING is due an interval from now (the sweep, armed
// for the ACK's deadline, is armed for it); others are ignored.
func (u *upH2) OnPingAck(c *h2.Client, data [8]byte) {
	if u.pingAt < 0 || data != u.ping {
		return
	}
	now := u.p.now()
	rtt := &u.sl.stats.h2PingRTT
	rtt.add(now - u.pingAt - rtt.load())
	u.pingAt = -1
	u.ls.armSweep(u.conn.Loop(), now, deadline(now, u.pl.pingEvery))
}

// pingCheck sends u a PING where it received nothing for pl's
// h2_ping_interval, and closes it where the last one's ACK is later than
// h2_ping_timeout: the server or the path to it is gone, and what the
// connection carries would wait for response_timeout (the streams in
// flight) or be handed new streams that then wait (idle). Its streams go
// as a dying connection's do (closeNow). It returns when u is due again,
// -1 for never. The bounds are those of the pool u was dialed for (a
// reload that changes them makes another pool). Loop goroutine (the
// loop's sweep).
func (u *upH2) pingCheck(now int64) int64 {
	pl := u.pl
	if pl.pingEvery <= 0 || !u.open || !u.listed {
		return -1
	}
	if u.pingAt >= 0 {
		if at := u.pingAt + int64(pl.pingWait); now < at {
			return at
		}
		u.sl.stats.h2PingTOs.inc()
		u.closeNow()
		return -1
	}
	if at := u.recvAt + int64(pl.pingEvery); now < at {
		return at
	}
	u.pingAt = now
	binary.BigEndian.PutUint64(u.ping[:], uint64(now))
	u.cl.Ping(u.ping)
	u.flush()
	u.sl.stats.h2Pings.inc()
	return now + int64(pl.pingWait)
}

// armSweep arms the loop's sweep of idle connections for at, unless it
// fires before. Loop goroutine.
func (ls *loopState) armSweep(l *engine.Loop, now, at int64) {
	if ls.sweeping && ls.sweepAt <= at {
		return
	}
	ls.sweep.Stop()
	ls.sweeping, ls.sweepAt = true, at
	ls.sweep = l.AfterFunc(time.Duration(at-now), ls.sweepFn)
}

// sweep closes sh's connections idle since before now less pl's
// idle_timeout and those whose server's SETTINGS are past due (failed
// connects), sends PINGs and closes the connections whose PING went
// unanswered (pingCheck, by their own pool's bounds), and returns when the next one would be due, -1
// for none. pl is the pool in force sh's server is of, nil for a server
// a reload removed: its connections are retired, closed at their last
// stream's end (settle), never idle. Loop goroutine.
func (sh *h2Share) sweep(now int64, pl *pool) int64 {
	next := int64(-1)
	for k := len(sh.conns) - 1; k >= 0; k-- {
		if k >= len(sh.conns) {
			continue
		}
		u := sh.conns[k]
		if u.open && !u.ready {
			// Its server's SETTINGS are past due: a server that accepts
			// the connection but never speaks HTTP/2 (hung, or an
			// HTTP/1.1 server waiting for the rest of a request in the
			// preface) has failed to connect, as one whose TLS handshake
			// timed out: it is counted (passive health), and the
			// requests waiting for it go to the next server (closeNow).
			// Left open, they waited for their response_timeout (504),
			// the connection stayed (it has no idle time before the
			// SETTINGS), the server was never ejected, and a drain
			// waited for it to its end (TestH2UpNoSettingsFailsConnect).
			// No stream or PING is due before the SETTINGS.
			if now >= u.setupBy {
				u.closeNow()
			} else if next < 0 || u.setupBy < next {
				next = u.setupBy
			}
			continue
		}
		at := int64(-1)
		if len(u.streams) == 0 && u.idleAt >= 0 && pl != nil {
			if at = deadline(u.idleAt, pl.idleTimeout); now >= at {
				u.shutdown()
				continue
			}
		}
		if p := u.pingCheck(now); p >= 0 && (at < 0 || p < at) {
			at = p
		}
		if at >= 0 && (next < 0 || at < next) {
			next = at
		}
	}
	return next
}

// empty reports whether sh has no connection left.
func (sh *h2Share) empty() bool { return len(sh.conns) == 0 }

// drain starts a drain of sh's connections: those with no stream close
// now, unless requests wait (for one on its way); the others stay in
// service for the requests waiting and those the drain lets in, and
// close once they carry none (settle). They are not retired: a retired
// connection takes no new stream, so the requests waiting would fail
// over to the next server, and with a pool of one server get 502 at
// once (TestH2UpDrainServesWaitingRequest).
func (sh *h2Share) drain() {
	if len(sh.wait) > 0 {
		return // (its connections without a stream are those on their way to the waiters)
	}
	for k := len(sh.conns) - 1; k >= 0; k-- {
		if k < len(sh.conns) && len(sh.conns[k].streams) == 0 {
			sh.conns[k].shutdown()
		}
	}
}

// retire retires every HTTP/2 connection of sh (the server removed, its
// pool no longer h2c, or its connections secured otherwise): their
// streams finish, no new one opens on them. The waiters fail over where
// the server is gone; else (redial) they get a connection dialed in
// their place, as at a GOAWAY (replace: under the pool's latest
// generation where the connections are secured otherwise, h2Dial), and
// fail over only where that dial fails. Failed over, they were counted
// as failed at a server that had not failed, with a pool of one server
// 502 (TestH2UpTLSReloadServesWaitingRequest).
func (sh *h2Share) retire(redial bool) {
	var first *upH2
	if len(sh.conns) > 0 {
		first = sh.conns[0]
	}
	for k := len(sh.conns) - 1; k >= 0; k-- {
		if k < len(sh.conns) {
			sh.conns[k].retire()
		}
	}
	if redial && first != nil {
		first.replace()
		return
	}
	w := sh.wait
	sh.wait = nil
	for _, x := range w {
		x.onFailover()
	}
}
