package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
)

// Access log formats (AccessLogConfig.Format).
const (
	// AccessLogJSON writes a JSON object a line.
	AccessLogJSON = "json"
	// AccessLogText writes space-separated fields a line, in a fixed
	// order (see the package doc), strings quoted and escaped as in JSON.
	AccessLogText = "text"
)

// AccessLogConfig configures a listener's access log: a line for each
// HTTP exchange (mode http) or each client connection (mode tcp). The
// loops never wait for the log: each formats its lines into a buffer of
// its own that a writer goroutine writes out (every 100ms, or when 64 KiB
// are ready), and a loop whose writer has fallen 4 MiB behind drops lines
// and counts them (spindle_proxy_access_log_dropped_total), rather than
// hold more. Run writes out what is buffered before it returns (waiting 5s
// at most for a writer that cannot write). Proxy.ReopenLogs opens the
// files again (`spindle proxy` on SIGUSR1), for logrotate.
type AccessLogConfig struct {
	// Path is the file lines are appended to (opened by New with
	// O_APPEND|O_CREATE, mode 0640), or "-" for standard error. Required.
	Path string `yaml:"path" json:"path"`
	// Format is AccessLogJSON (the default) or AccessLogText.
	Format string `yaml:"format" json:"format"`
}

// validate checks an access log's config (nil: none); the error begins
// with the field's name.
func (a *AccessLogConfig) validate() error {
	if a == nil {
		return nil
	}
	if a.Path == "" {
		return errors.New("path: missing (a file, or \"-\" for standard error)")
	}
	if a.Format != AccessLogJSON && a.Format != AccessLogText {
		return fmt.Errorf("format: unknown %q (want %q or %q)", a.Format, AccessLogJSON, AccessLogText)
	}
	return nil
}

// DefaultRouteName names a listener's own pool in per-route metrics and
// the access log: the requests no route matches.
const DefaultRouteName = "default"

// nameRoutes gives each route without a name its default: host and path
// prefix, else (taken by another route, or longer than maxRouteName,
// which validRouteNames refuses) "route<index>", else that with a "~n"
// suffix.
func nameRoutes(rs []RouteConfig) {
	taken := map[string]bool{DefaultRouteName: true}
	for _, r := range rs {
		if r.Name != "" {
			taken[r.Name] = true
		}
	}
	for i := range rs {
		if rs[i].Name != "" {
			continue
		}
		name := rs[i].Host + rs[i].PathPrefix
		for n := 1; taken[name] || len(name) > maxRouteName; n++ {
			name = "route" + strconv.Itoa(i)
			if n > 1 {
				name += "~" + strconv.Itoa(n)
			}
		}
		rs[i].Name = name
		taken[name] = true
	}
}

// validRouteNames checks that a listener's route names (defaults filled
// in) are unique, not DefaultRouteName, and free of control bytes.
func validRouteNames(rs []RouteConfig) error {
	seen := map[string]int{}
	for i, r := range rs {
		where := fmt.Sprintf("routes[%d].name", i)
		switch {
		case r.Name == "":
			return fmt.Errorf("%s: missing", where)
		case r.Name == DefaultRouteName:
			return fmt.Errorf("%s: %q names the listener's pool (requests no route matches)", where, r.Name)
		case len(r.Name) > maxRouteName:
			return fmt.Errorf("%s: %q longer than %d bytes", where, r.Name, maxRouteName)
		}
		for _, c := range []byte(r.Name) {
			if c < ' ' || c == 0x7f {
				return fmt.Errorf("%s: %q has a control byte", where, r.Name)
			}
		}
		if j, ok := seen[r.Name]; ok {
			return fmt.Errorf("%s: %q is routes[%d]'s name too", where, r.Name, j)
		}
		seen[r.Name] = i
	}
	return nil
}

// Bounds of what a log line takes of each field (longer values are cut),
// so that a line always fits in maxLogLine: a field escaped may grow six
// times (\u0000).
const (
	maxRouteName = 128
	logMethodMax = 32
	logHostMax   = 256
	logTargetMax = 1024
	logNameMax   = 128
	logAddrMax   = 128 // an address with its zone
	maxLogLine   = 6*(logMethodMax+logHostMax+logTargetMax+maxRouteName+logNameMax+2*logAddrMax) + 512
)

// The writer's pace and bounds; variables so that tests can shrink them.
var (
	logChunk      = 64 << 10               // a loop's buffer goes to the writer when this full
	logMaxChunks  = 64                     // buffers a loop may fill before it drops lines: 4 MiB
	logFlushEvery = 100 * time.Millisecond // a buffer not full goes after this, if the writer is idle
	logCloseWait  = 5 * time.Second        // Run's wait for the writer to write what is left
)

// accessLog is one listener's access log: its file, the loops' buffers
// and the writer goroutine. A listener keeps it across reloads while its
// path stays (observe): the format and the route names are the
// listener's (each generation's own). One that no listener in force has
// any more (a reload changed its path or removed its listener) is
// retired: once no client or stream is left on a loop that could write
// to it (logBuf.users), the loop hands its last lines over, and once
// every loop has, the writer writes them out, closes the file and
// returns (retire), rather than wait for Run's end.
type accessLog struct {
	name  string // the listener's
	path  string
	f     atomic.Pointer[os.File] // swapped by reopen
	own   bool                    // f is the log's to close (not standard error)
	mu    sync.Mutex              // reopen and closeFile
	shut  bool                    // closeFile has run: no reopen
	full  chan logChunkMsg
	done  chan struct{} // closed when the writer returns
	loops []*logBuf     // by loop ID
	lost  counter       // lines in buffers the writer failed to write (writer goroutine)
	logf  func(string, ...any)

	retired  atomic.Bool  // no listener in force has it (retire)
	ended    atomic.Int32 // loops whose buffers are handed over for good (logBuf.endIfUnused)
	fullOnce sync.Once    // full closed once: by the last loop to end, or by stop
}

// logChunkMsg is a filled buffer on its way to the writer.
type logChunkMsg struct {
	b    []byte
	from *logBuf
}

// logBuf is one loop's buffer for one access log. Only its loop touches
// it but for inflight and free, which the writer uses to give buffers
// back.
type logBuf struct {
	a        *accessLog
	el       *engine.Loop
	cur      []byte      // lines not yet handed to the writer; nil: none
	free     chan []byte // buffers the writer has written out
	made     int         // buffers allocated
	inflight atomic.Int32
	timer    engine.Timer
	timerFn  func()
	armed    bool
	dropped  counter // lines dropped: the writer was logMaxChunks behind
	// users are the clients and HTTP/2 streams on the loop whose
	// listener has the log (moveLog): those that may write a line to it.
	users int
	ended bool // the log is retired and the loop has no user left: nothing more comes
}

// openAccessLog opens a listener's access log, if it has one, with a
// buffer for each loop. Any goroutine (New).
func openAccessLog(lc *ListenerConfig, loops []*engine.Loop, logf func(string, ...any)) (*accessLog, error) {
	cfg := lc.AccessLog
	if cfg == nil {
		return nil, nil
	}
	a := &accessLog{name: lc.Name, path: cfg.Path, logf: logf,
		full: make(chan logChunkMsg, len(loops)*logMaxChunks), done: make(chan struct{})}
	a.f.Store(os.Stderr)
	if cfg.Path != "-" {
		f, err := openLogFile(cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("access_log: %w", err)
		}
		a.f.Store(f)
		a.own = true
	}
	for _, el := range loops {
		b := &logBuf{a: a, el: el, free: make(chan []byte, logMaxChunks)}
		b.timerFn = b.onTimer
		a.loops = append(a.loops, b)
	}
	return a, nil
}

// start starts the writer. Any goroutine (Run).
func (a *accessLog) start() { go a.write() }

// write writes out the buffers the loops hand over, and gives each back
// to its loop, until stop closes full. Writer goroutine.
func (a *accessLog) write() {
	defer close(a.done)
	failed := false
	for m := range a.full {
		f := a.f.Load()
		_, err := f.Write(m.b)
		if errors.Is(err, os.ErrClosed) && a.f.Load() != f {
			_, err = a.f.Load().Write(m.b) // reopened meanwhile
		}
		if err != nil {
			for _, c := range m.b {
				if c == '\n' {
					a.lost.inc()
				}
			}
			if !failed {
				failed = true
				a.logf("proxy: listener %s: access log: %v (lines are dropped and counted)", a.name, err)
			}
		}
		select {
		case m.from.free <- m.b[:0]:
		default: // cannot happen: a loop makes logMaxChunks at most
		}
		m.from.inflight.Add(-1)
	}
	a.closeFile() // (a retired log's last lines are written: it is done with)
}

// closeFull tells the writer that no buffer comes after those sent. Any
// goroutine.
func (a *accessLog) closeFull() { a.fullOnce.Do(func() { close(a.full) }) }

// retire marks the log as no listener in force's, and has each loop end
// its part where no client or stream of the loop may write to it
// (endIfUnused; else at the last one's end: moveLog). A loop that left
// early (its kernel queue failed) has its part ended here: its clients
// were closed as it left, and it runs nothing more. Reload's goroutine,
// p.mu held, once every loop applied the generation without it (no
// client accepted from then on takes it).
func (a *accessLog) retire(loops []*engine.Loop) {
	a.retired.Store(true)
	for k, el := range loops {
		select {
		case <-el.Left():
			a.loops[k].end()
		default:
			el.Post(a.loops[k].endIfUnused)
		}
	}
}

// written reports whether the writer has returned (the file closed).
// Any goroutine.
func (a *accessLog) written() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// moveLog moves a client's or stream's place among the users of the
// access log of from's (nil: none, a new one) to that of to's (nil: it
// ended), where the two differ: a retired log whose last user on the
// loop goes ends there (endIfUnused). Loop goroutine.
func (ls *loopState) moveLog(from, to *listener) {
	var a, b *accessLog
	if from != nil {
		a = from.alog
	}
	if to != nil {
		b = to.alog
	}
	if a == b {
		return
	}
	if b != nil {
		b.loops[ls.id].users++
	}
	if a != nil {
		lb := a.loops[ls.id]
		lb.users--
		lb.endIfUnused()
	}
}

// endIfUnused, where b's log is retired and nothing on the loop may
// write to it any more, hands the lines left over to the writer, the
// last loop to do so closing its channel. Loop goroutine.
func (b *logBuf) endIfUnused() {
	if b.ended || b.users > 0 || !b.a.retired.Load() {
		return
	}
	if b.armed {
		b.armed = false
		b.timer.Stop()
	}
	b.end()
}

// end hands b's lines left over to the writer for good, the last loop to
// do so closing its channel. Loop goroutine, or any once the loop left.
func (b *logBuf) end() {
	b.ended = true
	b.handoff()
	if int(b.a.ended.Add(1)) == len(b.a.loops) {
		b.a.closeFull()
	}
}

// stop hands the writer what the loops left (they have exited; a loop
// that ended its part left nothing), waits up to logCloseWait for it to
// be written, and closes the file. Any goroutine, once the loops are
// done.
func (a *accessLog) stop(started bool) {
	if !started {
		a.closeFile()
		return
	}
	for _, b := range a.loops {
		b.handoff()
	}
	a.closeFull()
	select {
	case <-a.done:
		a.closeFile()
	case <-time.After(logCloseWait):
		a.logf("proxy: listener %s: access log not written out after %v: its last lines are lost", a.name, logCloseWait)
		if a.own {
			a.closeFile() // wakes a writer stalled on a pipe
			<-a.done
		}
		// (A stalled standard error keeps its writer.)
	}
}

func (a *accessLog) closeFile() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.own && !a.shut {
		a.f.Load().Close()
	}
	a.shut = true
}

// openLogFile opens an access log's file for appending.
func openLogFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

// reopen opens the log's path again and writes to it from then on,
// closing the file it wrote to (for logrotate: the file was moved away).
// Standard error is left as it is. Any goroutine.
func (a *accessLog) reopen() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.own || a.shut {
		return nil
	}
	f, err := openLogFile(a.path)
	if err != nil {
		return fmt.Errorf("listener %s: access log: %w", a.name, err)
	}
	a.f.Swap(f).Close() // (a write on it in progress ends first)
	return nil
}

// dropped is the lines the log dropped: the loops' and the writer's. Any
// goroutine.
func (a *accessLog) dropped() uint64 {
	n := a.lost.load()
	for _, b := range a.loops {
		n += b.dropped.load()
	}
	return n
}

// line returns the loop's buffer with room for a line (maxLogLine) at its
// end, nil (the line dropped and counted) where the writer is
// logMaxChunks buffers behind. The caller appends the line and passes the
// result to commit. Loop goroutine.
func (b *logBuf) line() []byte {
	if b.ended {
		// Cannot happen: a retired log's part on a loop ends with the
		// loop's last user of it (moveLog). A line after is dropped and
		// counted: its writer may have returned.
		b.dropped.inc()
		return nil
	}
	if b.cur != nil && cap(b.cur)-len(b.cur) < maxLogLine {
		if b.handoff(); b.cur != nil {
			b.dropped.inc() // (cannot happen: handoff always has room)
			return nil
		}
	}
	if b.cur == nil {
		select {
		case c := <-b.free:
			b.cur = c
		default:
			if b.made >= logMaxChunks {
				b.dropped.inc()
				return nil
			}
			b.made++
			b.cur = make([]byte, 0, max(logChunk, maxLogLine))
		}
	}
	return b.cur
}

// commit takes the buffer line returned with a line appended, and arms
// the flush timer. Loop goroutine.
func (b *logBuf) commit(o []byte) {
	b.cur = o
	if !b.armed {
		b.armed = true
		b.timer = b.el.AfterFunc(logFlushEvery, b.timerFn)
	}
}

// handoff passes the buffer, if it holds lines, to the writer. Loop
// goroutine (or Run's, the loops done).
func (b *logBuf) handoff() {
	if len(b.cur) == 0 {
		return
	}
	select {
	case b.a.full <- logChunkMsg{b.cur, b}:
		b.inflight.Add(1)
		b.cur = nil
	default: // cannot happen: full has room for every loop's buffers
	}
}

// onTimer hands the buffer over when the writer is idle; while it is
// busy, lines gather until a buffer is full (or the writer idle at a next
// tick), so that a writer behind gets full buffers. Loop goroutine.
func (b *logBuf) onTimer() {
	b.armed = false
	if len(b.cur) == 0 {
		return
	}
	if b.inflight.Load() == 0 {
		b.handoff()
		return
	}
	b.armed = true
	b.timer = b.el.AfterFunc(logFlushEvery, b.timerFn)
}

// Termination codes: how an exchange (mode http) or a connection (mode
// tcp) ended, after HAProxy's termination states and Envoy's response
// flags. See the package doc.
const (
	termNone        uint8 = iota // "-": ended normally
	termClient                   // "CD": the client closed or reset the connection before the end
	termClientTO                 // "CT": the client timed out: its request head did not arrive in request_timeout (408), or it took nothing of its queue for write_timeout
	termServer                   // "SD": the server closed or reset its connection before the end
	termServerTO                 // "ST": the server timed out: it did not answer in response_timeout (504, or a reset), or took nothing of its queue for write_timeout
	termConnect                  // "SC": every server tried failed to connect (502)
	termNoServer                 // "NS": no server of the pool was up (503)
	termRequest                  // "PR": the proxy refused the request (400, 413, 501, ...)
	termResponse                 // "PH": the proxy refused the server's response (502, or a reset)
	termIdle                     // "IT": idle_timeout (mode tcp) closed the connection
	termServerReset              // "SR": the server reset the stream (HTTP/2 RST_STREAM), its connection going on
	termQueue                    // "SQ": queue_timeout ran out in the pool's queue for a slot (503)
	termQueueFull                // "UO": the pool's queue was full (max_queue): refused at once (503)
	termRateLimit                // "RL": a rate_limit refused the request (429)
	termKilled                   // "KD": the proxy's drain ran out (or Proxy.Abort) with it under way: both sides reset
)

var termCodes = [...]string{"-", "CD", "CT", "SD", "ST", "SC", "NS", "PR", "PH", "IT", "SR", "SQ", "UO", "RL", "KD"}

// sideTerm returns the term of a side (the client or the server) whose
// connection ended in err, the error its OnClose got (a write refused
// with net.ErrClosed only says the connection is closing: its OnClose
// says why, writeFailed): termKilled where the engine cut it
// as it stopped (net.ErrClosed: the drain ran out, whichever side it
// closed first), timedOut where it reset it for write_timeout or
// close_timeout (the side took nothing of what was queued for it:
// HAProxy's cD and sD), else closed (the side closed or reset its
// connection).
func sideTerm(err error, closed, timedOut uint8) uint8 {
	switch {
	case errors.Is(err, net.ErrClosed):
		return termKilled
	case errors.Is(err, os.ErrDeadlineExceeded):
		return timedOut
	}
	return closed
}

// exchange is what an hsession keeps of its current exchange for the
// access log and the per-route counters.
type exchange struct {
	open   bool  // begun and not yet ended
	parsed bool  // the request head parsed: meta holds its fields
	start  int64 // Proxy.now when the head was received
	route  int   // 1 + the route's index (len(routes) for the listener's pool), 0: none
	minor  int
	meta   []byte // method, host and target (bounded), copied from the head
	mlen   int    // method's length in meta
	hlen   int    // host's length in meta
	srv    *server
	reused bool
	term   uint8
	h2     bool  // the request came on HTTP/2
	queued int64 // ns waited in the pool's queue for a slot (max_conns)

	retries uint8 // times the request was sent again (retry)
}

// begin starts an exchange at its head (parsed, or nil for one refused
// unparsed). Loop goroutine.
func (s *hsession) begin(r *h1.Request) {
	x := &s.x
	*x = exchange{open: true, meta: x.meta[:0]}
	if s.ln.alog == nil {
		return
	}
	x.start = s.p.now()
	if r == nil {
		return
	}
	x.parsed, x.minor = true, r.Minor
	x.meta = append(x.meta, r.Method[:min(len(r.Method), logMethodMax)]...)
	x.mlen = len(x.meta)
	host, path := logHostPath(r.Target, r.Host)
	x.meta = append(x.meta, host[:min(len(host), logHostMax)]...)
	x.hlen = len(x.meta) - x.mlen
	x.meta = append(x.meta, path[:min(len(path), logTargetMax)]...)
}

// logHostPath returns a request's host (an absolute-form target's
// authority, else the Host field) and its target's path and query.
func logHostPath(target, hostHdr []byte) (host, path []byte) {
	if a, p := h1.SplitTarget(target); a != nil {
		return a, p
	}
	return hostHdr, target
}

// routeFor returns the pool for a request: its target and Host header.
func (l *listener) routeFor(target, hostHdr []byte) *pool {
	if i := l.routeIndex(target, hostHdr); i < len(l.routes) {
		return l.routes[i].pool
	}
	return l.pool
}

// route routes the current request, counting it by route. Loop goroutine.
func (s *hsession) route(target, hostHdr []byte) *pool {
	return s.ln.routeExchange(s.ls, &s.x, target, hostHdr)
}

// routeExchange routes exchange x's request on loop ls, counting it by
// route. Loop goroutine.
func (l *listener) routeExchange(ls *loopState, x *exchange, target, hostHdr []byte) *pool {
	i := l.routeIndex(target, hostHdr)
	x.route = i + 1
	l.rstats[ls.id][i].requests.inc()
	if i < len(l.routes) {
		return l.routes[i].pool
	}
	return l.pool
}

// sent records the server the request went to. Loop goroutine.
func (s *hsession) sent() {
	s.x.srv, s.x.reused = s.pool.servers[s.srv], s.reused
}

// end ends the exchange, if one is open: it counts the response by route
// and logs the exchange. status is the response's (0: none was sent),
// local whether the proxy made it. Loop goroutine.
func (s *hsession) end(status int, local bool) {
	if s.rt.pol != nil {
		s.retryEnd()
	}
	reqBody, respBody := s.bodies(local)
	s.ln.endExchange(s.ls, &s.x, s.client.RemoteAddr(), status, local, reqBody, respBody, s.p.now())
}

// bodies returns the bodies' data so far (chunked framing aside): their
// readers are this exchange's once it is routed, the response's once its
// head went out. Loop goroutine.
func (s *hsession) bodies(local bool) (reqBody, respBody int64) {
	if s.x.route > 0 {
		reqBody = s.reqBody.Data()
		if s.respHead && !local {
			respBody = s.respBody.Data()
			if s.h2 != nil && s.h2.on {
				respBody = s.h2.respN
			}
		}
	}
	return reqBody, respBody
}

// upgraded ends the exchange whose 101 made s's connections the tunnel t:
// the response is counted by route now, and the line is left to the
// tunnel's end (session.logConn), with the bytes each way through the
// tunnel and its whole life, as HAProxy, nginx and Envoy log an upgraded
// connection: written at the 101, it told nothing of the tunnel. Loop
// goroutine.
func (s *hsession) upgraded(t *session) {
	if s.rt.pol != nil {
		s.retryEnd()
	}
	if !s.ln.countExchange(s.ls, &s.x, 101, false) || s.ln.alog == nil {
		return
	}
	req, _ := s.bodies(false)
	t.hx = &tunnelLog{x: s.x, reqBody: req}
}

// tunnelLog is what the tunnel an HTTP upgrade made keeps of the
// exchange whose 101 made it, for the exchange's line at the tunnel's end.
type tunnelLog struct {
	x       exchange
	reqBody int64 // the request's body data before the 101
}

// endExchange ends exchange x of a client at addr on loop ls, if it is
// open: it counts the response by route and logs the exchange with the
// bodies' data so far, now being Proxy.now. Loop goroutine.
func (l *listener) endExchange(ls *loopState, x *exchange, addr netip.AddrPort, status int, local bool, reqBody, respBody, now int64) {
	if l.countExchange(ls, x, status, local) {
		l.logExchange(ls, x, addr, status, local, reqBody, respBody, now)
	}
}

// countExchange ends exchange x on loop ls, if it is open, counting its
// response by route; it reports whether x was open. Loop goroutine.
func (l *listener) countExchange(ls *loopState, x *exchange, status int, local bool) bool {
	if !x.open {
		return false
	}
	x.open = false
	if x.route > 0 && status > 0 {
		rs := l.rstats[ls.id][x.route-1]
		k := min(max(status/100, 1), 5) - 1
		if local {
			rs.respLocal[k].inc()
		} else {
			rs.respUp[k].inc()
		}
	}
	return true
}

// logExchange logs exchange x, ended, of a client at addr on loop ls
// (endExchange). Loop goroutine.
func (l *listener) logExchange(ls *loopState, x *exchange, addr netip.AddrPort, status int, local bool, reqBody, respBody, now int64) {
	a := l.alog
	if a == nil {
		return
	}
	if x.term == termNone && local {
		switch {
		case status == 408:
			x.term = termClientTO
		case status == 429:
			x.term = termRateLimit
		case status == 503:
			x.term = termNoServer
		case status == 504:
			x.term = termServerTO
		case status == 502:
			x.term = termServer
		default:
			x.term = termRequest
		}
	}
	b := a.loops[ls.id]
	o := b.line()
	if o == nil {
		return
	}
	b.commit(l.appendExchange(o, x, addr, status, local, reqBody, respBody, (now-x.start)/1e3, time.Now()))
}

// appendExchange appends exchange x's log line; durUS is its duration in
// µs. Loop goroutine.
func (l *listener) appendExchange(o []byte, x *exchange, addr netip.AddrPort, status int, local bool, reqBody, respBody, durUS int64, now time.Time) []byte {
	var method, host, target []byte
	if x.parsed {
		method, host, target = x.meta[:x.mlen], x.meta[x.mlen:x.mlen+x.hlen], x.meta[x.mlen+x.hlen:]
	}
	json := l.logJSON
	f := logFields{o: o, json: json}
	f.begin(now, l.name, addr)
	f.str("method", method)
	f.str("host", host)
	f.str("target", target)
	switch {
	case !x.parsed:
		f.raw("proto", "-")
	case x.h2:
		f.raw("proto", "HTTP/2.0")
	case x.minor == 0:
		f.raw("proto", "HTTP/1.0")
	default:
		f.raw("proto", "HTTP/1.1")
	}
	f.num("status", int64(status))
	f.num("req_bytes", reqBody)
	f.num("resp_bytes", respBody)
	var route []byte
	if x.route > 0 {
		route = l.logRoutes[x.route-1]
	}
	f.str("route", route)
	f.server(x.srv)
	switch {
	case status == 0:
		f.raw("source", "-")
	case local:
		f.raw("source", "proxy")
	default:
		f.raw("source", "upstream")
	}
	f.num("duration_us", durUS)
	switch {
	case x.srv == nil && json:
		f.lit("reused", "null")
	case x.srv == nil:
		f.raw("reused", "-")
	case json:
		f.lit("reused", strconv.FormatBool(x.reused))
	case x.reused:
		f.raw("reused", "reused")
	default:
		f.raw("reused", "new")
	}
	f.raw("term", termCodes[x.term])
	f.num("queue_us", x.queued/1e3)
	f.num("retries", int64(x.retries))
	return f.end()
}

// connLog is what a session (mode tcp) keeps for the access log.
type connLog struct {
	start      int64 // Proxy.now at the accept
	fromClient int64 // bytes received from the client
	fromServer int64 // bytes received from the server
	term       uint8
	queued     int64 // ns waited in the pool's queue for a slot (max_conns)
}

// logConn logs a tcp session as its client closes with err: a
// connection of a mode tcp listener, or (hx) the exchange whose 101 made
// the session a tunnel. Loop goroutine.
func (s *session) logConn(err error) {
	a := s.ln.alog
	if a == nil || s.ln.http && s.hx == nil {
		return
	}
	if s.x.term == termNone && err != nil {
		s.x.term = sideTerm(err, termClient, termClientTO)
	}
	if h := s.hx; h != nil {
		h.x.term = s.x.term
		s.ln.logExchange(s.ls, &h.x, s.client.RemoteAddr(), 101, false, h.reqBody+s.x.fromClient, s.x.fromServer, s.p.now())
		return
	}
	b := a.loops[s.client.Loop().ID()]
	o := b.line()
	if o == nil {
		return
	}
	f := logFields{o: o, json: s.ln.logJSON}
	f.begin(time.Now(), s.ln.name, s.client.RemoteAddr())
	var srv *server
	if s.upOpen {
		srv = s.pool.servers[s.srv]
	}
	f.server(srv)
	f.num("client_bytes", s.x.fromClient)
	f.num("server_bytes", s.x.fromServer)
	f.num("duration_us", (s.p.now()-s.x.start)/1e3)
	f.raw("term", termCodes[s.x.term])
	f.num("queue_us", s.x.queued/1e3)
	b.commit(f.end())
}

// logFields appends a line's fields: a JSON object, or text fields
// separated by spaces (strings quoted as in JSON, "-" for none).
type logFields struct {
	o    []byte
	json bool
	n    int
}

func (f *logFields) key(k string) {
	switch {
	case f.json && f.n == 0:
		f.o = append(f.o, '{', '"')
	case f.json:
		f.o = append(f.o, ',', '"')
	case f.n > 0:
		f.o = append(f.o, ' ')
	}
	f.n++
	if f.json {
		f.o = append(f.o, k...)
		f.o = append(f.o, '"', ':')
	}
}

// begin appends the fields every line starts with: time, listener and
// client.
func (f *logFields) begin(now time.Time, listener string, client netip.AddrPort) {
	f.key("time")
	if f.json {
		f.o = append(f.o, '"')
	}
	f.o = now.UTC().AppendFormat(f.o, "2006-01-02T15:04:05.000000Z07:00")
	if f.json {
		f.o = append(f.o, '"')
	}
	f.key("listener")
	f.o = appendQuoted(f.o, listener, logNameMax)
	f.key("client")
	f.quote()
	mark := len(f.o)
	f.o = netip.AddrPortFrom(client.Addr().Unmap(), client.Port()).AppendTo(f.o)
	f.addrEnd(mark)
}

// addrEnd ends an address field begun (quoted in JSON) and written from
// f.o[mark:]: an address none of whose bytes needs escaping stays as it
// is (bare in text); one that does, or is longer than logAddrMax (an IPv6
// zone: an interface's name, which may hold '"' or '\\'), is written
// again quoted and escaped as a string (in text too), cut to logAddrMax.
func (f *logFields) addrEnd(mark int) {
	a := f.o[mark:]
	plain := len(a) <= logAddrMax
	for _, c := range a {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		f.quote()
		return
	}
	s := string(a) // (allocates: a zone)
	f.o = f.o[:mark]
	if f.json {
		f.o = f.o[:mark-1] // the quote begun
	}
	f.o = appendQuoted(f.o, s, logAddrMax)
}

func (f *logFields) quote() {
	if f.json {
		f.o = append(f.o, '"')
	}
}

// str appends a string field; nil (none) is null, or "-" in text.
func (f *logFields) str(k string, v []byte) {
	f.key(k)
	switch {
	case v == nil && f.json:
		f.o = append(f.o, "null"...)
		return
	case v == nil:
		f.o = append(f.o, '-')
		return
	}
	f.o = appendQuoted(f.o, v, len(v))
}

// raw appends a string field that needs no escaping, unquoted in text.
func (f *logFields) raw(k, v string) {
	f.key(k)
	f.quote()
	f.o = append(f.o, v...)
	f.quote()
}

// lit appends a JSON literal (a number, true, false, null) as it is.
func (f *logFields) lit(k, v string) {
	f.key(k)
	f.o = append(f.o, v...)
}

func (f *logFields) num(k string, v int64) {
	f.key(k)
	f.o = strconv.AppendInt(f.o, v, 10)
}

// server appends the server's address, "-" for none.
func (f *logFields) server(srv *server) {
	if srv == nil {
		f.raw("server", "-")
		return
	}
	f.key("server")
	f.quote()
	mark := len(f.o)
	f.o = append(f.o, srv.addr...)
	f.addrEnd(mark)
}

func (f *logFields) end() []byte {
	if f.json {
		f.o = append(f.o, '}')
	}
	return append(f.o, '\n')
}

// appendQuoted appends s's first limit bytes as a JSON string: quoted,
// with '"', '\\' and control bytes escaped, and each byte that is not
// part of valid UTF-8 written as U+FFFD (as encoding/json does).
func appendQuoted[T []byte | string](o []byte, s T, limit int) []byte {
	s = s[:min(len(s), limit)]
	o = append(o, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r == utf8.RuneError && n == 1 {
				o = append(o, `\ufffd`...)
			} else {
				o = append(o, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
		switch {
		case c == '"' || c == '\\':
			o = append(o, '\\', c)
		case c == '\n':
			o = append(o, '\\', 'n')
		case c == '\r':
			o = append(o, '\\', 'r')
		case c == '\t':
			o = append(o, '\\', 't')
		case c < ' ':
			o = append(o, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&15])
		default:
			o = append(o, c)
		}
	}
	return append(o, '"')
}

const hexDigit = "0123456789abcdef"
