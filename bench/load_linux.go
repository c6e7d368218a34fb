package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// maxIdlePoll caps the idle time one empty poll may account for: an empty
// epoll_wait(0) costs a µs or two, and a longer one means the thread was
// preempted or interrupted, which is not idle CPU.
const maxIdlePoll = int64(20 * time.Microsecond)

// pending is one request in flight on a connection.
type pending struct {
	seq uint64
	t   int64 // ns since the run's base: intended (open) or actual (closed) send time
}

// loadConn is one client connection, owned by one client thread.
type loadConn struct {
	fd   int
	id   uint32
	seq  uint64
	rbuf []byte
	// wbuf[woff:] is queued for the socket; wbuf[:woff] is written, and
	// is reclaimed (the rest moved down) when a request is added and it
	// is at least as long as the rest, so that each byte written is moved
	// at most once.
	wbuf  []byte
	woff  int
	queue []pending // FIFO: replies come back in request order
	head  int
	out   bool // EPOLLOUT armed
	dirty bool // wbuf gained data since the last flush
	// Open loop: the window's requests not yet wholly written, each with
	// the stream offset of its last byte, for their send lag.
	unwritten []unwritten
	written   uint64 // bytes ever written; the stream offset of wbuf[woff]
	moved     uint64 // bytes moved within wbuf to reclaim its written prefix
	rmoved    uint64 // bytes moved within rbuf to reclaim its verified replies
	// tls is the connection's TLS with LoadConfig.TLS: wbuf and rbuf hold
	// plaintext, and the socket carries its records. Nil for plain TCP.
	tls *loadTLS
}

// maxQueuedBytes caps, in open loop, a connection's requests not yet
// written to its socket: a connection at the cap takes no new request
// until its socket takes some, so a server that stops reading costs the
// client at most this (and the written prefix of wbuf not yet reclaimed,
// at most as much again) per connection, and the requests due meanwhile
// wait like those beyond MaxOutstanding.
const maxQueuedBytes = 1 << 20

// queued is the number of bytes on c not yet written to its socket.
func (c *loadConn) queued() int { return len(c.wbuf) - c.woff }

// unwritten is a request whose send lag is recorded when the write that
// carries its last byte (stream offset end) completes.
type unwritten struct {
	end uint64
	ts  int64 // intended send time
}

func (c *loadConn) inflight() int { return len(c.queue) - c.head }

func (c *loadConn) push(p pending) {
	if c.head > 0 && c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	} else if c.head > 1024 && c.head*2 > len(c.queue) {
		n := copy(c.queue, c.queue[c.head:])
		c.queue, c.head = c.queue[:n], 0
	}
	c.queue = append(c.queue, p)
}

// loadThread is one client thread's state. Only that thread touches it.
type loadThread struct {
	cfg        LoadConfig
	framing    loadFraming
	base       time.Time
	conns      []*loadConn
	ep, timer  int
	hist       *Histogram
	scratch    []byte
	winStart   int64
	winEnd     int64
	replies    uint64   // replies received inside the window, to any request
	perMS      []uint64 // replies received in each millisecond from t0 on (replyTimes)
	t0         int64
	answered   uint64 // requests of the window answered (by the drain's end)
	sent       uint64
	scheduled  uint64
	peak       int // open loop: the most requests in flight on one connection, once one of the window's was sent
	unanswered uint64
	cpuStart   unix.Rusage
	cpuEnd     unix.Rusage
	cpuMarked  bool
	idle       int64 // ns in polls that found nothing, inside the window
	yielded    int64 // when wait last yielded (runtime.Gosched), t.now's clock
	lag        *Histogram
	cpuDone    bool
	stop       *atomic.Bool
	phase      int64 // open loop: this thread's schedule offset, so threads interleave
}

func (t *loadThread) now() int64 { return int64(time.Since(t.base)) }

// RunLoad connects to cfg.Addr and drives load at it in cfg.Protocol:
// closed loop when cfg.Rate is 0, otherwise open loop at cfg.Rate. Every
// reply is verified; a mismatch or a connection error fails the run. It may
// be called from any goroutine; it starts cfg.Threads locked OS threads and
// returns when they are done.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if !cfg.PinProcess {
		return runLoad(ctx, cfg)
	}
	// Before the load threads start: each narrows the mask it inherits to
	// its one CPU.
	unpin, err := pinHarness(cfg.CPUs)
	if err != nil {
		return nil, err
	}
	res, err := runLoad(ctx, cfg)
	if uerr := unpin(); uerr != nil {
		return nil, errors.Join(err, uerr)
	}
	return res, err
}

// runLoad is RunLoad after its defaults (and its pin).
func runLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	ta, err := net.ResolveTCPAddr("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("bench: load: %w", err)
	}
	var stop atomic.Bool
	ctxDone := context.AfterFunc(ctx, func() { stop.Store(true) })
	defer ctxDone()

	base := time.Now()
	threads := make([]*loadThread, cfg.Threads)
	ready := make(chan error, cfg.Threads)
	start := make(chan int64)
	var wg sync.WaitGroup
	errs := make([]error, cfg.Threads)
	for i := range threads {
		conns := cfg.Conns / cfg.Threads
		if i < cfg.Conns%cfg.Threads {
			conns++
		}
		t := &loadThread{cfg: cfg, framing: newLoadFraming(cfg), base: base, hist: NewHistogram(), lag: NewHistogram(), stop: &stop, ep: -1, timer: -1}
		threads[i] = t
		if cfg.Rate > 0 {
			// Each thread runs every Threads-th slot of the whole schedule.
			t.cfg.Rate = cfg.Rate / float64(cfg.Threads)
			t.phase = int64(float64(i) * float64(time.Second) / cfg.Rate)
		}
		wg.Go(func() {
			// The thread's affinity and network namespace are changed and not
			// restored: never unlock, so the runtime retires the thread.
			sys.LockedThread(func() { errs[i] = t.work(i, conns, ta, ready, start) })
		})
	}
	var setupErr error
	for range threads {
		if err := <-ready; err != nil && setupErr == nil {
			setupErr = err
		}
	}
	if setupErr != nil {
		close(start)
		wg.Wait()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, setupErr
	}
	t0 := int64(time.Since(base)) + int64(time.Millisecond)
	if cfg.Window != nil {
		ws := base.Add(time.Duration(t0) + cfg.Warmup)
		cfg.Window(ws, ws.Add(cfg.Duration))
	}
	for range threads {
		start <- t0
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &LoadResult{Hist: NewHistogram(), Window: cfg.Duration, Rate: cfg.Rate, Drain: cfg.Drain, Threads: cfg.Threads, CPUs: clientCPUCount(cfg.Threads, cfg.CPUs)}
	res.times.origin = base.Add(time.Duration(t0))
	if cfg.Rate > 0 {
		res.SendLag = NewHistogram()
	}
	for _, t := range threads {
		res.Hist.Merge(t.hist)
		if res.SendLag != nil {
			res.SendLag.Merge(t.lag)
		}
		res.Replies += t.replies
		if res.times.perMS == nil {
			res.times.perMS = make([]uint64, len(t.perMS))
		}
		for i, n := range t.perMS {
			res.times.perMS[i] += n
		}
		res.Answered += t.answered
		res.Sent += t.sent
		res.Scheduled += t.scheduled
		res.PeakInFlight = max(res.PeakInFlight, t.peak)
		res.Unanswered += t.unanswered
		res.ClientUser += time.Duration(unix.TimevalToNsec(t.cpuEnd.Utime) - unix.TimevalToNsec(t.cpuStart.Utime))
		res.ClientSys += time.Duration(unix.TimevalToNsec(t.cpuEnd.Stime) - unix.TimevalToNsec(t.cpuStart.Stime))
		res.ClientIdle += time.Duration(t.idle)
	}
	if cfg.TLS != nil {
		res.TLS = tlsAgreed(threads)
	}
	return res, nil
}

// work is a client thread's life on its locked thread: set up, report to
// ready, wait for the start time, run. The error is the run's; a setup
// error goes to ready.
func (t *loadThread) work(i, conns int, ta *net.TCPAddr, ready chan<- error, start <-chan int64) error {
	if testClientThread != nil {
		testClientThread()
	}
	defer t.close()
	if err := t.setup(i, conns, ta); err != nil {
		ready <- err
		return nil
	}
	ready <- nil
	t0, ok := <-start
	if !ok {
		return nil
	}
	return t.run(t0)
}

// testClientThread, set by tests only, is called on each client thread
// (RunLoad's, and runHandshakes' slots) before it changes anything.
var testClientThread func()

func (t *loadThread) close() {
	for _, c := range t.conns {
		unix.Close(c.fd)
	}
	if t.ep >= 0 {
		unix.Close(t.ep)
	}
	if t.timer >= 0 {
		unix.Close(t.timer)
	}
}

// setup runs on the locked thread: enter the namespace, pin, connect.
func (t *loadThread) setup(idx, nconns int, ta *net.TCPAddr) error {
	if err := joinNetNS(t.cfg.NetNS); err != nil {
		return fmt.Errorf("bench: load: %w", err)
	}
	if len(t.cfg.CPUs) > 0 {
		if err := pinThread([]int{t.cfg.CPUs[idx%len(t.cfg.CPUs)]}); err != nil {
			return fmt.Errorf("bench: load: %w", err)
		}
	}
	var err error
	if t.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	if t.cfg.Rate > 0 && t.cfg.Block {
		if t.timer, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
			return os.NewSyscallError("timerfd_create", err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: -1}
		if err := unix.EpollCtl(t.ep, unix.EPOLL_CTL_ADD, t.timer, &ev); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
	}
	var sa unix.Sockaddr
	family := unix.AF_INET
	if ip4 := ta.IP.To4(); ip4 != nil {
		sa = &unix.SockaddrInet4{Port: ta.Port, Addr: [4]byte(ip4)}
	} else {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: ta.Port, Addr: [16]byte(ta.IP.To16())}
	}
	for i := range nconns {
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		c := &loadConn{fd: fd, id: uint32(idx<<16 | i), rbuf: make([]byte, 0, 64<<10)}
		t.conns = append(t.conns, c)
		if err := unix.SetNonblock(fd, true); err != nil {
			return os.NewSyscallError("fcntl", err)
		}
		if err := t.connect(fd, sa); err != nil {
			return fmt.Errorf("bench: load: connect %s: %w", ta, err)
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
		if t.cfg.TLS != nil {
			if c.tls, err = handshakeTLS(fd, t.cfg.TLS, t.stop); err != nil {
				return fmt.Errorf("bench: load: TLS handshake with %s: %w", ta, err)
			}
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
		if err := unix.EpollCtl(t.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
	}
	return nil
}

// errStopped ends a connect when the run's context is done.
var errStopped = errors.New("run stopped")

// connect connects the non-blocking socket fd to sa, waiting for it in
// polls of at most 100 ms so that a done context stops the wait: a
// connect the kernel retries (SYNs dropped by a full accept queue) takes
// about two minutes to fail.
func (t *loadThread) connect(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	if err != unix.EINPROGRESS {
		return os.NewSyscallError("connect", err) // nil on success
	}
	for !t.stop.Load() {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, 100)
		if err == unix.EINTR || err == nil && n == 0 {
			continue
		}
		if err != nil {
			return os.NewSyscallError("poll", err)
		}
		soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return os.NewSyscallError("getsockopt", err)
		}
		if soerr != 0 {
			return os.NewSyscallError("connect", unix.Errno(soerr))
		}
		return nil
	}
	return errStopped
}

// joinNetNS moves the calling locked thread into the network namespace
// file path; "" leaves it where it is.
func joinNetNS(path string) error {
	if path == "" {
		return nil
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("setns %s: %w", path, os.NewSyscallError("setns", err))
	}
	return nil
}

func pinThread(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPUs %v: %w", cpus, os.NewSyscallError("sched_setaffinity", err))
	}
	return nil
}

// markCPU records the thread's rusage at the start and end of the window.
func (t *loadThread) markCPU(start bool) {
	if start {
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &t.cpuStart)
		t.cpuMarked = true
	} else {
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &t.cpuEnd)
		t.cpuDone = true
	}
}

// send queues one request on c, stamped with ts.
func (t *loadThread) send(c *loadConn, ts int64) {
	if c.woff > 0 && c.woff >= c.queued() {
		n := copy(c.wbuf, c.wbuf[c.woff:])
		c.moved += uint64(n)
		c.wbuf, c.woff = c.wbuf[:n], 0
	}
	c.wbuf = t.framing.appendRequest(c.wbuf, c.id, c.seq)
	c.push(pending{seq: c.seq, t: ts})
	c.seq++
	c.dirty = true
	if ts >= t.winStart && ts < t.winEnd {
		t.sent++
		if t.cfg.Rate > 0 {
			c.unwritten = append(c.unwritten, unwritten{end: c.written + uint64(c.queued()), ts: ts})
		}
	}
}

// recordLag records, in open loop, the send lag of the window's requests
// on c whose last byte has been written by now: from each one's intended
// send time to now, the end of the write that carried it. A request that
// waited in the client's buffer (the socket full, its server not reading)
// lags by that wait.
func (t *loadThread) recordLag(c *loadConn, now int64) {
	k := 0
	for k < len(c.unwritten) && c.unwritten[k].end <= c.written {
		t.lag.Record(time.Duration(now - c.unwritten[k].ts))
		k++
	}
	if k == len(c.unwritten) {
		// All written, the common case: keep the array, so that the next
		// request's entry does not allocate a new one.
		c.unwritten = c.unwritten[:0]
		return
	}
	c.unwritten = c.unwritten[k:]
}

// writeAvail writes b to the non-blocking socket fd until it is all
// written or the socket takes no more (EAGAIN), and returns how many bytes
// went.
func writeAvail(fd int, b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(fd, b[done:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			return done, os.NewSyscallError("write", err)
		}
		done += n
	}
	return done, nil
}

// flush writes c's pending bytes (with TLS, encrypted first: loadTLS's
// flush); a short write arms EPOLLOUT.
func (t *loadThread) flush(c *loadConn) error {
	c.dirty = false
	if c.tls != nil {
		if err := c.tls.flush(c); err != nil {
			return fmt.Errorf("bench: load: conn %d: %w", c.id, err)
		}
	} else {
		n, err := writeAvail(c.fd, c.wbuf[c.woff:])
		c.woff += n
		c.written += uint64(n)
		if err != nil {
			return fmt.Errorf("bench: load: conn %d: %w", c.id, err)
		}
	}
	if c.queued() == 0 {
		c.wbuf, c.woff = c.wbuf[:0], 0
	}
	if len(c.unwritten) > 0 {
		t.recordLag(c, t.now())
	}
	want := c.queued() > 0 || c.tls != nil && len(c.tls.tr.out) > 0
	if want != c.out {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(t.index(c))}
		if want {
			ev.Events |= unix.EPOLLOUT
		}
		if err := unix.EpollCtl(t.ep, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
		c.out = want
	}
	return nil
}

func (t *loadThread) index(c *loadConn) int {
	return int(c.id & 0xffff)
}

// receive reads from c and verifies every complete reply. Closed loop sends
// the next request on the connection for each reply. A plain connection is
// read once (the level-triggered epoll reports what is left); a TLS one
// until its socket has nothing more, for crypto/tls may hold decrypted
// bytes that no event would report.
func (t *loadThread) receive(c *loadConn, closed bool) error {
	for {
		more, err := t.receiveOnce(c, closed)
		if !more || err != nil || c.tls == nil {
			return err
		}
	}
}

// receiveOnce is one read of receive's, reporting whether it read
// anything.
func (t *loadThread) receiveOnce(c *loadConn, closed bool) (bool, error) {
	if len(c.rbuf) == cap(c.rbuf) {
		c.rbuf = append(c.rbuf, make([]byte, cap(c.rbuf))...)[:len(c.rbuf)]
	}
	var n int
	var err error
	if c.tls != nil {
		n, err = c.tls.read(c.rbuf[len(c.rbuf):cap(c.rbuf)])
	} else {
		n, err = unix.Read(c.fd, c.rbuf[len(c.rbuf):cap(c.rbuf)])
	}
	now := t.now()
	if err == unix.EAGAIN || err == unix.EINTR {
		return false, nil
	}
	if err != nil {
		if c.tls != nil {
			return false, fmt.Errorf("bench: load: conn %d: %w", c.id, err)
		}
		return false, fmt.Errorf("bench: load: conn %d: %w", c.id, os.NewSyscallError("read", err))
	}
	if n == 0 {
		return false, fmt.Errorf("bench: load: conn %d: server closed the connection with %d requests in flight", c.id, c.inflight())
	}
	c.rbuf = c.rbuf[:len(c.rbuf)+n]
	off := 0
	for {
		fl, err := t.framing.replyLen(c.rbuf[off:])
		if err != nil {
			return false, fmt.Errorf("bench: load: conn %d: %w", c.id, err)
		}
		if fl == 0 || len(c.rbuf)-off < fl {
			break
		}
		if c.inflight() == 0 {
			return false, fmt.Errorf("%w: conn %d: reply without a request", ErrMismatch, c.id)
		}
		p := c.queue[c.head]
		c.head++
		if t.scratch, err = t.framing.verify(c.rbuf[off:off+fl], c.id, p.seq, t.scratch); err != nil {
			return false, err
		}
		off += fl
		// Throughput counts what the server answered inside the window;
		// latency covers the window's requests, answered then or later.
		if now >= t.winStart && now < t.winEnd {
			t.replies++
		}
		t.countReply(now)
		if p.t >= t.winStart && p.t < t.winEnd {
			t.hist.Record(time.Duration(now - p.t))
			t.answered++
		}
		if closed && now < t.winEnd {
			t.send(c, t.now())
		}
	}
	// A partial reply stays where it is until the replies before it are
	// done with (copy has no shortcut for moving bytes onto themselves):
	// each received byte is moved at most once.
	if off > 0 {
		c.rmoved += uint64(len(c.rbuf) - off)
		c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[off:])]
	}
	return true, nil
}

// countReply counts a reply received at now in its millisecond of
// t.perMS; a reply after the last is counted in it.
func (t *loadThread) countReply(now int64) {
	if n := int64(len(t.perMS)); n > 0 {
		t.perMS[min(max(now-t.t0, 0)/int64(time.Millisecond), n-1)]++
	}
}

// run is the thread's event loop, from the shared start time t0.
func (t *loadThread) run(t0 int64) error {
	t.t0 = t0
	t.winStart = t0 + int64(t.cfg.Warmup)
	t.winEnd = t.winStart + int64(t.cfg.Duration)
	// A millisecond for each of the run's, and one for a reply of its
	// last iteration, which can come just after the drain's end.
	t.perMS = make([]uint64, (t.cfg.Warmup+t.cfg.Duration+t.cfg.Drain)/time.Millisecond+2)
	for t.now() < t0 {
	}
	if t.cfg.Rate > 0 {
		return t.runOpen(t0)
	}
	return t.runClosed(t0)
}

func (t *loadThread) runClosed(t0 int64) error {
	now := t.now()
	for _, c := range t.conns {
		for range t.cfg.InFlight {
			t.send(c, now)
		}
		if err := t.flush(c); err != nil {
			return err
		}
	}
	events := make([]unix.EpollEvent, 256)
	drainEnd := t.winEnd + int64(t.cfg.Drain)
	for !t.stop.Load() {
		now := t.now()
		if !t.cpuMarked && now >= t.winStart {
			t.markCPU(true)
		}
		wait := t.winEnd - now
		if now >= t.winEnd {
			// No new requests; wait for the window's last replies, so that
			// a slow one at the end is not dropped from the tail.
			if !t.cpuDone {
				t.markCPU(false)
			}
			if !t.windowInFlight() || now >= drainEnd {
				break
			}
			wait = drainEnd - now
		}
		if !t.cpuMarked {
			wait = t.winStart - now
		}
		ms := min(int(wait/int64(time.Millisecond))+1, 100)
		if !t.cfg.Block {
			ms = 0
		}
		n, err := t.wait(events, ms, now, t.cpuMarked && !t.cpuDone)
		if err != nil {
			return err
		}
		for _, ev := range events[:n] {
			if err := t.handle(ev, true); err != nil {
				return err
			}
		}
	}
	t.recordUnanswered()
	return nil
}

// windowInFlight reports whether a request of the window awaits its reply.
func (t *loadThread) windowInFlight() bool {
	for _, c := range t.conns {
		for _, p := range c.queue[c.head:] {
			if p.t >= t.winStart && p.t < t.winEnd {
				return true
			}
		}
	}
	return false
}

// recordUnanswered counts the window's requests still unanswered at the
// end of the drain and records each at the time it has waited so far: a
// lower bound on its latency.
func (t *loadThread) recordUnanswered() {
	end := t.now()
	for _, c := range t.conns {
		for _, p := range c.queue[c.head:] {
			if p.t >= t.winStart && p.t < t.winEnd {
				t.unanswered++
				t.hist.Record(time.Duration(end - p.t))
			}
		}
	}
}

// loadYieldEvery is how often a load thread yields its P.
const loadYieldEvery = 5 * time.Millisecond

// wait is one epoll_wait with timeout ms, after a runtime.Gosched when
// loadYieldEvery has passed since the last (the thread is locked and never
// blocks: without it sysmon preempts it every 10 ms and stays on its
// 20 µs tick). When it finds nothing without sleeping and idle is set, the
// iteration that began at start counts as idle polling. EINTR is 0 events.
func (t *loadThread) wait(events []unix.EpollEvent, ms int, start int64, idle bool) (int, error) {
	if start-t.yielded >= int64(loadYieldEvery) {
		runtime.Gosched()
		t.yielded = start
	}
	n, err := unix.EpollWait(t.ep, events, ms)
	if err == unix.EINTR {
		return 0, nil
	}
	if err != nil {
		return 0, os.NewSyscallError("epoll_wait", err)
	}
	if n == 0 && ms == 0 && idle {
		t.idle += min(t.now()-start, maxIdlePoll)
	}
	return n, nil
}

// handle serves one connection event: read and verify replies (in closed
// loop sending the next requests), then write what is pending.
func (t *loadThread) handle(ev unix.EpollEvent, closed bool) error {
	c := t.conns[ev.Fd]
	if ev.Events&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		if err := t.receive(c, closed); err != nil {
			return err
		}
	}
	if c.dirty || ev.Events&unix.EPOLLOUT != 0 || c.tls != nil && len(c.tls.tr.out) > 0 {
		return t.flush(c)
	}
	return nil
}

func (t *loadThread) runOpen(t0 int64) error {
	interval := float64(time.Second) / t.cfg.Rate
	var issued uint64
	rr := 0
	armed := int64(-1)
	events := make([]unix.EpollEvent, 256)
	drainEnd := t.winEnd + int64(t.cfg.Drain)
	for !t.stop.Load() {
		now := t.now()
		if !t.cpuMarked && now >= t.winStart {
			t.markCPU(true)
		}
		if now >= t.winEnd && !t.cpuDone {
			t.markCPU(false)
		}
		// The run ends with the drain whatever is left: requests still in
		// flight, or still waiting for a connection below MaxOutstanding
		// and maxQueuedBytes (a server that stopped answering or reading
		// blocks every connection).
		if now >= drainEnd {
			break
		}
		// Issue every request whose intended time has come (and that falls
		// before the window's end), each stamped with its intended time.
		blocked := false
		batch := issued // the first request of this batch
		for {
			ts := t0 + t.phase + int64(float64(issued)*interval)
			if ts > now || ts >= t.winEnd {
				break
			}
			var c *loadConn
			for range t.conns {
				cand := t.conns[rr]
				rr = (rr + 1) % len(t.conns)
				if cand.inflight() < t.cfg.MaxOutstanding && cand.queued() < maxQueuedBytes {
					c = cand
					break
				}
			}
			if c == nil {
				blocked = true
				break
			}
			t.send(c, ts)
			if ts >= t.winStart {
				t.scheduled++
				t.peak = max(t.peak, c.inflight())
			}
			issued++
		}
		for _, c := range t.conns {
			if c.dirty {
				if err := t.flush(c); err != nil {
					return err
				}
			}
		}
		next := t0 + t.phase + int64(float64(issued)*interval)
		if next >= t.winEnd {
			inflight := 0
			for _, c := range t.conns {
				inflight += c.inflight()
			}
			if inflight == 0 || now >= drainEnd {
				break
			}
			next = drainEnd
		}
		timeout := -1
		switch {
		case !t.cfg.Block:
			timeout = 0
		case blocked:
			timeout = 1
		case next <= now:
			timeout = 0
		case next != armed:
			// Absolute times would need CLOCK_MONOTONIC readings; a relative
			// timer from a fresh reading is as precise at these scales.
			d := next - t.now()
			if d <= 0 {
				timeout = 0
				break
			}
			spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d)}
			if err := unix.TimerfdSettime(t.timer, 0, &spec, nil); err != nil {
				return os.NewSyscallError("timerfd_settime", err)
			}
			armed = next
		}
		// An iteration that sent nothing and finds nothing is idle polling.
		n, err := t.wait(events, timeout, now, issued == batch && t.cpuMarked && !t.cpuDone)
		if err != nil {
			return err
		}
		for _, ev := range events[:n] {
			if ev.Fd < 0 {
				armed = -1 // the timer fired
				continue
			}
			if err := t.handle(ev, false); err != nil {
				return err
			}
		}
	}
	if !t.cpuMarked {
		t.markCPU(true)
	}
	if !t.cpuDone {
		t.markCPU(false)
	}
	t.recordUnanswered()
	// Requests still (partly) in the client's buffer lag by the time they
	// waited so far, a lower bound.
	now := t.now()
	for _, c := range t.conns {
		c.written += uint64(c.queued())
		t.recordLag(c, now)
	}
	// Requests due in the window that never went out (every connection
	// was at MaxOutstanding or maxQueuedBytes to the end) were offered and
	// not answered: recorded like the unanswered ones, at the time waited
	// so far, and in the send lag as late by then, as those still in the
	// client's buffer are: left out, the requests furthest behind their
	// schedule would be missing from the lag the latencies are read with.
	end := t.now()
	for k := issued; ; k++ {
		ts := t0 + t.phase + int64(float64(k)*interval)
		if ts >= t.winEnd || ts > end {
			break
		}
		if ts >= t.winStart {
			t.scheduled++
			t.unanswered++
			t.hist.Record(time.Duration(end - ts))
			t.lag.Record(time.Duration(end - ts))
		}
	}
	return nil
}
