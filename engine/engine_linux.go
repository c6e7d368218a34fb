package engine

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/internal/tunestate"
	"github.com/spindlenet/spindle/uring"
)

// New makes an engine with one loop per CPU of cfg.CPUs (nil cfg: defaults).
// The loops start with Run. Any goroutine.
func New(cfg *Config, h Handler) (*Engine, error) {
	if h == nil {
		return nil, errors.New("engine: nil Handler")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.ReadBufferSize > 1<<20 {
		return nil, fmt.Errorf("engine: ReadBufferSize %d above 1 MiB", c.ReadBufferSize)
	}
	allowed, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(c.CPUs) == 0 {
		c.CPUs = defaultCPUs(&c, allowed)
	}
	seen := map[int]bool{}
	for _, cpu := range c.CPUs {
		if !slices.Contains(allowed, cpu) {
			return nil, fmt.Errorf("engine: CPU %d is not in the process's affinity mask", cpu)
		}
		if seen[cpu] {
			return nil, fmt.Errorf("engine: CPU %d listed twice", cpu)
		}
		seen[cpu] = true
	}
	if err := checkSQPollCPU(&c); err != nil {
		return nil, err
	}
	e := &Engine{
		stall:    stopStall,
		cfg:      c,
		backend:  c.Backend,
		h:        h,
		stopping: make(chan struct{}),
		exited:   make(chan struct{}),
		allowed:  allowed,
	}
	e.backend = chooseBackend(&e.cfg)
	for i, cpu := range c.CPUs {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			e.closeWakeFds()
			return nil, os.NewSyscallError("eventfd", err)
		}
		l := &Loop{e: e, id: i, cpu: cpu, h: h, hwm: c.WriteHighWater, readPast: c.ReadPastHighWater, wakeFd: fd, left: make(chan struct{})}
		l.setTimeouts(c.WriteTimeout, c.CloseTimeout)
		l.ringFd.Store(-1)
		l.be = newBackend(e.backend, &e.cfg)
		e.loops = append(e.loops, l)
	}
	return e, nil
}

func (e *Engine) closeWakeFds() {
	for _, l := range e.loops {
		l.closeWakeFd()
	}
}

// closeWakeFd closes the loop's eventfd, once the loop has exited or will
// never run, and drops the functions posted to it: none will run, and Post
// queues no more. Any goroutine, once the loop thread is not using it.
func (l *Loop) closeWakeFd() {
	l.mu.Lock()
	if l.wakeFd >= 0 {
		unix.Close(l.wakeFd)
		l.wakeFd = -1
		close(l.left)
	}
	l.posted, l.spare = nil, nil
	l.mu.Unlock()
}

// defaultCPUs returns the loop CPUs when Config.CPUs is empty: those an
// applied `spindle tune` plan set aside (Config.TuneState) that the process
// may run on, else every CPU it may run on. Any goroutine.
func defaultCPUs(c *Config, allowed []int) []int {
	path := c.TuneState
	if path == "-" {
		return slices.Clone(allowed)
	}
	if path == "" {
		path = tunestate.DefaultPath
	}
	tuned, err := tunestate.LoopCPUs(path)
	if err != nil {
		c.Logf("engine: ignoring the spindle tune state (%v); loops on every allowed CPU", err)
		return slices.Clone(allowed)
	}
	if len(tuned) == 0 {
		return slices.Clone(allowed)
	}
	var cpus []int
	for _, cpu := range tuned {
		if slices.Contains(allowed, cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) == 0 {
		c.Logf("engine: none of the loop CPUs %v that spindle tune set aside (%s) is in the process's affinity mask %v; loops on every allowed CPU", tuned, path, allowed)
		return slices.Clone(allowed)
	}
	c.Logf("engine: loops on CPUs %v, set aside by spindle tune (%s)", cpus, path)
	return cpus
}

// checkSQPollCPU refuses, for uring-sqpoll, a CPU Config.SQPoll names
// that the kernel would refuse for the SQPOLL thread (uring.SQThreadCPUError:
// it does not exist, is offline, or is outside the process's cpuset), or
// that runs a loop, where the thread would spin beside that loop. Without
// the check the first loop's ring setup failed with EINVAL and the engine
// ran without SQPOLL, saying only "offline, or outside the cpuset", and a
// loop CPU was taken. A CPU outside the process's affinity but in its
// cpuset is taken: a process confined to its loops' CPUs may still pin the
// thread beside them. Any goroutine.
func checkSQPollCPU(c *Config) error {
	cpu, ok := c.SQPoll.CPU()
	if !ok || c.Backend != BackendURingSQPoll {
		return nil
	}
	if slices.Contains(c.CPUs, cpu) {
		return fmt.Errorf("engine: Config.SQPoll: SQ thread CPU %d runs a loop (loop CPUs %v); the SQPOLL thread must run outside the loops' CPUs", cpu, c.CPUs)
	}
	if err := uring.SQThreadCPUError(cpu); err != nil {
		return fmt.Errorf("engine: Config.SQPoll: %w", err)
	}
	return nil
}

// allowedCPUs lists the CPUs the calling thread may run on, ascending.
func allowedCPUs() ([]int, error) { return sys.AllowedCPUs() }

// chooseBackend returns the backend to run, falling back to epoll when the
// requested one cannot work here: uring-napi, which busy polls, to
// epoll-busypoll (the same BusyPoll and PreferBusyPoll) where that works,
// the other uring backends and epoll-busypoll to plain epoll. New calls it
// once, so each engine says so once, to its own Logf.
func chooseBackend(c *Config) Backend {
	b := c.Backend
	switch {
	case b.isURing():
		err := uringUsable()
		if err == nil {
			break
		}
		eb, busyErr := epollFor(b)
		if busyErr != nil {
			c.Logf("engine: io_uring unavailable (%v), epoll busy polling too (%v); running on epoll", err, busyErr)
		} else {
			c.Logf("engine: io_uring unavailable (%v); running on %s", err, eb)
		}
		return eb
	case b == BackendEpollBusyPoll:
		if err := sys.EpollBusyPollUsable(); err != nil {
			c.Logf("engine: epoll busy polling unavailable (%v); running on plain epoll", err)
			return BackendEpoll
		}
	}
	return b
}

// epollFor returns the epoll backend that stands in for uring backend b:
// for uring-napi, which busy polls, epoll-busypoll (the same BusyPoll and
// PreferBusyPoll) where that works, else plain epoll with the reason
// (busyErr); plain epoll for the others.
func epollFor(b Backend) (eb Backend, busyErr error) {
	if b != BackendURingNAPI {
		return BackendEpoll, nil
	}
	if err := sys.EpollBusyPollUsable(); err != nil {
		return BackendEpoll, err
	}
	return BackendEpollBusyPoll, nil
}

// ringRefused reports whether err, a uring loop's failed start, is the
// kernel refusing the loop io_uring rather than its configuration: ENOMEM,
// where the ring and its buffer ring are charged to RLIMIT_MEMLOCK (a
// thread without CAP_IPC_LOCK; the count is the user's, so New's probe
// ring may fit and a loop's ring not) or memory is short; EPERM, io_uring
// refused since New probed it (kernel.io_uring_disabled raised).
func ringRefused(err error) bool {
	return errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM)
}

// runEpollInstead moves loop l, whose uring backend could not start (err,
// ringRefused), to the epoll backend New picks without io_uring
// (epollFor), and says so once per engine, with the locked-memory limit
// and what the engine's uring loops take from it where that explains err.
// The other loops keep their rings: the count is the user's, shared with
// the user's other processes, so some loops' rings may fit where others'
// do not, and a loop on epoll serves as well as the engine on epoll would.
// Backend says each loop's. Loop goroutine, from run.
func (l *Loop) runEpollInstead(err error) error {
	l.be.close()
	l.st.ring.Store(nil)
	eb, busyErr := epollFor(l.e.cfg.Backend)
	busy := ""
	if busyErr != nil {
		busy = fmt.Sprintf(", epoll busy polling unavailable (%v)", busyErr)
	}
	l.e.degraded(degradeRing, "engine: loop %d (CPU %d): io_uring refused (%v)%s%s; running %s on it, and on any other loop whose ring is refused (Backend says each loop's)",
		l.id, l.cpu, err, memlockNote(&l.e.cfg, len(l.e.loops), err), busy, eb)
	l.be = newBackend(eb, &l.e.cfg)
	return l.be.init(l)
}

// memlockNote explains a ring refused with ENOMEM (err) to a thread
// without CAP_IPC_LOCK under a finite RLIMIT_MEMLOCK: the limit, and what
// the engine's loops take from it (LockedMemory). "" where the limit does
// not apply. Loop goroutine (capabilities are the thread's).
func memlockNote(c *Config, loops int, err error) string {
	var lim unix.Rlimit
	if !errors.Is(err, unix.ENOMEM) || unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil || lim.Cur == unix.RLIM_INFINITY || capIPCLock() {
		return ""
	}
	need, nerr := LockedMemory(c, loops)
	if nerr != nil {
		return ""
	}
	return fmt.Sprintf(": RLIMIT_MEMLOCK is %d KiB without CAP_IPC_LOCK, and %d uring loop(s) take about %d KiB of it (engine.LockedMemory), counted with the user's other processes running io_uring", lim.Cur>>10, loops, need>>10)
}

// capIPCLock reports whether the calling thread has CAP_IPC_LOCK in its
// effective set, which exempts its rings from RLIMIT_MEMLOCK.
func capIPCLock() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData // version 3: 64 bits in two halves
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[unix.CAP_IPC_LOCK/32].Effective&(1<<(unix.CAP_IPC_LOCK%32)) != 0
}

func newBackend(b Backend, c *Config) backend {
	switch b {
	case BackendEpoll:
		return &epollBackend{epfd: -1}
	case BackendEpollBusyPoll:
		return &epollBackend{epfd: -1, busy: true, busyPoll: c.BusyPoll, prefer: c.PreferBusyPoll}
	default:
		return newURingBackend(b, c)
	}
}

var one = [8]byte{1}

// wakeLocked writes the loop's eventfd. Any goroutine, holding l.mu (so the
// fd cannot be closed and reused meanwhile).
func (l *Loop) wakeLocked() {
	if l.wakeFd >= 0 {
		unix.Write(l.wakeFd, one[:])
	}
}

// loopThreads holds the thread ids of the loop goroutines serving now, of
// every engine in the process: Listener.Close and Shutdown must not wait
// on any of them, another engine's loop included (two whose handlers
// closed each other's listeners, or shut each other down, would wait for
// each other).
var loopThreads sync.Map // int32 -> struct{}

// onAnyLoop reports whether the caller runs on a loop goroutine of any
// engine. Any goroutine.
func onAnyLoop() bool {
	_, ok := loopThreads.Load(int32(unix.Gettid()))
	return ok
}

// readWake consumes the eventfd counter. Loop goroutine.
func (l *Loop) readWake() {
	var b [8]byte
	unix.Read(l.wakeFd, b[:])
	l.st.wakeups.Add(1)
}

// run is the loop goroutine: it pins its thread, sets up the backend,
// reports the result on errc and then serves until the engine stops.
func (l *Loop) run(errc chan<- error) {
	runtime.LockOSThread()
	// Not the process's main thread: the runtime parks it for good
	// instead of ending it, and /proc/self shows its affinity for the
	// whole process. A loop whose thread must exit with it (keepThread)
	// would leave it pinned: serve from another.
	if sys.OffMainThread(func() { l.run(errc) }) {
		return
	}
	l.tid.Store(int32(unix.Gettid()))
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		errc <- os.NewSyscallError("sched_getaffinity", err)
		l.cleanup()
		return
	}
	var set unix.CPUSet
	set.Set(l.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		errc <- os.NewSyscallError("sched_setaffinity", err)
		l.cleanup()
		return
	}
	loopThreads.Store(l.tid.Load(), struct{}{})
	defer func() {
		loopThreads.Delete(l.tid.Load())
		// A thread whose affinity (or io-wq: keepThread) cannot be
		// restored must not go back to the scheduler: returning while
		// locked makes it exit.
		if !l.keepThread && unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		}
	}()
	node := cpuNode(l.cpu)
	l.chunks.init(l.e.cfg.ReadBufferSize, !l.e.cfg.NoHugePages, func(n int, huge bool) ([]byte, string, error) {
		b, kind, err := mapMem(n, huge)
		if err == nil {
			sys.Mbind(b, node) // NUMA-local; best effort
		}
		return b, kind, err
	}, unmapMem)
	err := l.chunks.grow()
	if err == nil {
		err = l.be.init(l)
		if _, ok := l.be.(*uringBackend); ok && err != nil && ringRefused(err) {
			err = l.runEpollInstead(err)
		}
	}
	if err != nil {
		errc <- fmt.Errorf("engine: loop %d (CPU %d): %w", l.id, l.cpu, err)
		l.be.close()
		l.cleanup()
		return
	}
	l.e.mu.Lock()
	l.backend = l.be.runs()
	l.batchWait = l.be.minWait()
	l.pages = l.chunks.kind
	if l.pagesRecv != "" {
		l.pages = l.pagesRecv + " (receive ring), " + l.chunks.kind + " (send slab)"
	}
	l.e.mu.Unlock()
	errc <- nil
	l.serve()
	l.be.close()
	l.cleanup()
}

func (l *Loop) cleanup() {
	if l.keepSlab {
		l.chunks.abandon()
	} else {
		l.chunks.close()
	}
	l.closeWakeFd()
	// Listeners whose add never ran on this loop, closed or not.
	l.e.mu.Lock()
	for _, ln := range l.e.made {
		ln.closePending(l.id)
	}
	l.e.mu.Unlock()
}

// serve is the loop: timers, posted functions, flush writes, wait.
func (l *Loop) serve() {
	for {
		if !l.stopping && l.e.stopped.Load() {
			l.stopping = true
			l.runPosts()
			l.abortAll()
			l.runCloses()
		}
		if l.timers.pending() {
			// Timers that became due while the loop was not waiting
			// (in handlers, or descheduled) come after what arrived in
			// the meantime, which only the next wait would reap
			// (DEFER_TASKRUN posts completions inside io_uring_enter,
			// epoll_wait reports readiness): reap all of it first,
			// without waiting (reapAll). A timer due by the time the
			// last wait returned needs none: that wait reaped what
			// came before it. So a loop pays the extra enter only when
			// a timer fires that its handlers outlasted.
			now := nanotime()
			if l.timers.dueAfter(l.woke, now) && l.reapAll() {
				return
			}
			l.timers.runExpired(now)
			l.runCloses()
		}
		if l.sweepAt != 0 && l.woke >= l.sweepAt {
			l.sweep()
			l.runCloses()
		}
		if l.wakePending.Load() {
			l.runPosts()
			l.runCloses()
		}
		l.flushDirty()
		l.runCloses()
		retry := l.resumeStarved()
		l.runCloses()
		if l.drained() {
			return
		}
		if l.stopping {
			l.sayStall()
		}
		// Before the wait's timeout is worked out: the Go scheduler may
		// take its time to give the thread back, and a timeout read off
		// the clock before the yield would count from its end, a timer
		// due meanwhile running that much late (TestTimerAfterSlowYield).
		l.yield()
		timeout := time.Duration(-1)
		if at, ok := l.deadline(); ok && !l.be.wakeAt(at) {
			if l.timers.pending() {
				timeout = l.timers.next(nanotime())
			}
			if l.sweepAt != 0 {
				// From the last wake-up: the sweep may come a little late.
				if d := time.Duration(max(l.sweepAt-l.woke, 0)); timeout < 0 || d < timeout {
					timeout = d
				}
			}
		}
		if retry >= 0 && (timeout < 0 || retry < timeout) {
			timeout = retry
		}
		if l.wakePending.Load() || len(l.dirty) > 0 {
			timeout = 0
		}
		if l.stopping && (timeout < 0 || timeout > 10*time.Millisecond) {
			timeout = 10 * time.Millisecond
		}
		if l.poll(timeout) {
			return
		}
	}
}

// reapAll is poll(0) reaping every completion that has arrived, for the
// timers that came due while the loop was not waiting: they run after it
// (AfterFunc). Loop goroutine.
func (l *Loop) reapAll() bool {
	l.reaping = true
	defer func() { l.reaping = false }()
	return l.poll(0)
}

// poll waits up to timeout (0: not at all) for the backend's completions
// and dispatches them. It reports whether the loop must leave at once: its
// kernel queue broke with work still in flight. Loop goroutine.
func (l *Loop) poll(timeout time.Duration) bool {
	err := l.be.poll(timeout)
	l.runCloses()
	if err == nil {
		return false
	}
	// The kernel queue is broken: close everything and leave.
	if !l.stopping {
		l.failed = fmt.Errorf("engine: loop %d (CPU %d): %w", l.id, l.cpu, err)
		l.e.cfg.Logf("%v; closing its connections and stopping", l.failed)
	}
	l.stopping = true
	l.abortAll()
	l.runCloses()
	return !l.be.idle()
}

// napiSocket looks up the NAPI id of c's socket on a busy-poll backend, once
// per connection, when it has received data (the id is known from then
// on). It says once per engine when there is none: busy polling does
// nothing for such a socket, under the loop's backend (a uring-napi loop
// whose ring was refused runs epoll-busypoll). Loop goroutine.
func (l *Loop) napiSocket(c *Conn) (uint32, bool) {
	c.k.napiSeen = true
	id, err := napiID(c.fd)
	if err != nil {
		// Not through degraded: its arguments would be boxed for every
		// connection, said or not.
		l.e.degradeOnce[degradeNAPIID].Do(func() {
			l.e.cfg.Logf("engine: accepted sockets have no NAPI id (%v); %s busy polling does nothing for them", err, l.backend)
		})
		return 0, false
	}
	return id, true
}

// napiID returns the NAPI id of a socket that has received data, or an
// error saying why it has none.
func napiID(fd int) (uint32, error) {
	id, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	switch {
	case err != nil:
		return 0, os.NewSyscallError("getsockopt SO_INCOMING_NAPI_ID", err)
	case id < 257: // 0 when none is recorded; real ids start above NR_CPUS (MIN_NAPI_ID)
		return 0, noNAPIID(id)
	}
	return uint32(id), nil
}

// noNAPIID is napiID's error for a socket without a NAPI id: what the kernel
// reported. Not built with fmt.Errorf: napiID runs for every connection of
// a busy-poll backend, and on loopback every one of them has none (an int
// below 256 in an interface does not allocate).
type noNAPIID int

func (e noNAPIID) Error() string {
	return fmt.Sprintf("SO_INCOMING_NAPI_ID is %d: loopback, or a device without NAPI (a veth has NAPI with GRO on and TSO off)", int(e))
}

// accepted turns a new socket into a Conn. Loop goroutine.
func (l *Loop) accepted(fd int, s *lnSock) {
	// A closed listener's too: its removal is posted, and a Unix
	// socket, which Close does not shut down, still hands out what
	// waits in its backlog meanwhile (a TCP one's was reset).
	if l.stopping || l.e.draining.Load() || s.ln.closed.Load() {
		unix.Close(fd)
		return
	}
	if s.ln.tls != nil && !l.admitHandshake(fd, s.ln) {
		return
	}
	c := &Conn{l: l, fd: fd, unixPeer: s.ln.network == "unix"}
	if s.index < math.MaxUint16 {
		// s keeps its place in lns while c names it (Conn.Listener).
		c.lnSlot = uint16(s.index + 1)
		s.conns++
	}
	if !c.unixPeer {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	l.addConn(c)
	l.st.accepted.Add(1)
	l.open(c, s.ln)
}

// open starts receiving on c, now connected, and hands it to the handler;
// for a TLS listener ln, or a TLS dial, once the handshake has succeeded.
func (l *Loop) open(c *Conn, ln *Listener) {
	c.state = stateOpen
	if !c.unixPeer {
		c.fillAddrs()
	}
	l.be.startConn(c)
	if ln != nil && ln.tls != nil {
		if c.state != stateOpen {
			ln.handshakes.Add(-1) // admitted by accepted, not begun
			return
		}
		newTLS(c, ln.tls, ln)
		l.startTLS(c, ln.handshakeTimeout) // OnOpen once done
		return
	}
	if c.tls != nil && c.state == stateOpen {
		l.startTLS(c, 0) // DialTLS: the dial's timer bounds it
		return
	}
	// A backend that cannot arm the connection aborts it: its handler
	// then sees OnClose alone, as for a failed dial, never OnOpen after it.
	if c.state == stateOpen {
		if c.queued > 0 || c.wantShutWr {
			// Written before OnOpen, while dialing: flushDirty skipped it.
			l.markDirty(c)
		}
		l.h.OnOpen(c)
	}
}

func (c *Conn) fillAddrs() {
	if sa, err := unix.Getsockname(c.fd); err == nil {
		c.local = addrPort(sa, &c.l.e.zones)
	}
	if sa, err := unix.Getpeername(c.fd); err == nil {
		c.remote = addrPort(sa, &c.l.e.zones)
	}
}

// addrPort converts sa, naming a link-local address's zone through zones.
func addrPort(sa unix.Sockaddr, zones *zoneCache) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		ip := netip.AddrFrom16(a.Addr)
		if a.ZoneId != 0 {
			ip = ip.WithZone(zones.name(a.ZoneId))
		}
		return netip.AddrPortFrom(ip, uint16(a.Port))
	}
	return netip.AddrPort{}
}

// connected finishes a dial once the socket is writable. Loop goroutine.
func (l *Loop) connected(c *Conn) {
	if c.state != stateConnecting {
		return
	}
	soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soerr != 0 {
		err = unix.Errno(soerr)
	}
	if err != nil {
		c.abort(c.opError("dial", "connect", err))
		return
	}
	if c.tls == nil {
		// A TLS dial's goes on: it bounds the handshake too.
		c.stopTimer()
	}
	l.st.dialed.Add(1)
	l.open(c, nil)
}

// Dial starts connecting to address: for "tcp", "tcp4" and "tcp6" a
// host:port whose port is a number and whose host is an IP address (a
// link-local IPv6 one with its zone, as in [fe80::1%eth0]), "localhost"
// or empty (both 127.0.0.1, or ::1 for tcp6); for "unix" a path. Dial
// does not resolve names: any other host, or a port by service name,
// fails at once saying so (resolve them off the loop, with a
// net.Resolver, and Dial the address). It returns the Conn at once; OnOpen
// follows when connected, or OnClose with the error (also when timeout, if
// > 0, passes first; and, once the callback that called Dial has
// returned, if the backend cannot watch the socket at all, as when
// epoll_ctl fails). While Shutdown drains it dials as before (what is
// being drained may need a connection to finish; the drain's OnDrain is
// not told of it); once the loop stops it returns ErrClosed. Loop
// goroutine.
func (l *Loop) Dial(network, address string, timeout time.Duration) (*Conn, error) {
	return l.dial(network, address, timeout, false, nil)
}

// DialTLS is Dial for a TLS client connection, the client side of
// ListenConfig.TLS (a sidecar's or proxy's TLS or mTLS to its upstreams):
// crypto/tls runs the handshake on a goroutine of its own and then the
// record layer on the loop, as for an accepted TLS connection, with
// tls.Client in place of tls.Server. OnOpen comes once the handshake has
// succeeded (Conn.TLS then says what was agreed, the server's
// certificates among it); a connect or handshake that fails, the server's
// certificate refused by cfg's verification among them, gets OnClose
// alone with the error (the handshake's as a *net.OpError with Op "tls
// handshake" wrapping crypto/tls's error, a
// *tls.CertificateVerificationError for a certificate refused), as a
// failed Dial does. timeout, if > 0, bounds the connect and the handshake
// together: past it OnClose gets an error wrapping
// os.ErrDeadlineExceeded. cfg is cloned (nil: the defaults, the system's
// roots); where its ServerName is empty it becomes the address's host, as
// with tls.Dial: a name is sent as SNI and verified against the
// certificate's DNS names, an IP address is verified against its IP
// addresses and not sent. An address without a host (a Unix socket, or an
// empty host) needs ServerName or InsecureSkipVerify, or DialTLS fails at
// once. A ClientSessionCache is shared by the clones: dials with one
// config resume its sessions. TLS 1.2 renegotiation is not supported:
// cfg.Renegotiation is taken as tls.RenegotiateNever, and a server's
// request to renegotiate ends the connection (OnClose with the error).
//
// Before OnOpen the Conn may be used as a plain dial's: Write (and
// Writev, WriteBuffer) keeps the plaintext (on the Go heap, outside
// Buffered and the mark) and encrypts it once the handshake is done,
// CloseWrite sends close_notify and FIN after it, PauseRead takes effect
// then (the handshake reads regardless), and Close or CloseLinger
// abandons the dial (OnClose with nil). A dial whose handshake ends
// while Shutdown drains opens, as a plain dial connecting then does; the
// drain's OnDrain is not told of it. Loop goroutine.
func (l *Loop) DialTLS(network, address string, timeout time.Duration, cfg *tls.Config) (*Conn, error) {
	return l.dial(network, address, timeout, true, cfg)
}

// dial is Dial, and DialTLS with isTLS set and cfg its configuration.
// Loop goroutine.
func (l *Loop) dial(network, address string, timeout time.Duration, isTLS bool, cfg *tls.Config) (*Conn, error) {
	// Not refused while Shutdown drains: a connection being drained may
	// need one to finish (a proxy's request in flight, its pooled
	// upstream connections closed by the drain).
	if l.stopping {
		return nil, ErrClosed
	}
	sa, family, err := sockaddr(&l.e.zones, network, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	c := &Conn{l: l, fd: -1, state: stateConnecting, unixPeer: family == unix.AF_UNIX}
	if !c.unixPeer {
		// The address dialed, for the dial's errors (opError) until
		// open has the one connected to.
		c.remote = addrPort(sa, &l.e.zones)
	}
	if isTLS {
		if cfg, err = clientConfig(network, address, cfg); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Addr: c.dialAddr(address), Err: err}
		}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: c.dialAddr(address), Err: os.NewSyscallError("socket", err)}
	}
	c.fd = fd
	if !c.unixPeer {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	// EINPROGRESS only: a Unix socket's EAGAIN (the listener's backlog is
	// full) abandons the connect, leaving a socket that polls writable
	// without being connected.
	err = unix.Connect(fd, sa)
	if err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: network, Addr: c.dialAddr(address), Err: os.NewSyscallError("connect", err)}
	}
	if isTLS {
		newTLS(c, cfg, nil) // the handshake starts once connected (open)
	}
	l.addConn(c)
	l.be.dial(c)
	if timeout > 0 && c.state == stateConnecting {
		c.timer = l.afterFunc(timeout, func() {
			switch {
			case c.state == stateConnecting:
				c.abort(&net.OpError{Op: "dial", Net: network, Addr: c.dialAddr(address), Err: os.ErrDeadlineExceeded})
			case c.tls != nil:
				c.tls.timedOut(c)
			}
		})
	}
	return c, nil
}

// dialAddr is the address c dials, for its errors. Loop goroutine.
func (c *Conn) dialAddr(address string) net.Addr {
	if c.unixPeer {
		return &net.UnixAddr{Name: address, Net: "unix"}
	}
	return net.TCPAddrFromAddrPort(c.remote)
}

// sockaddr resolves a numeric address. An empty host means loopback for a
// dial and the wildcard for a listen ("::" dual-stack for tcp and tcp6,
// 0.0.0.0 for tcp4, and for tcp where the kernel has no IPv6), as in
// package net; "localhost" means loopback for both. Any other name is an
// error saying names are not resolved. A link-local IPv6 address's zone
// is looked up in zones.
func sockaddr(zones *zoneCache, network, address string) (unix.Sockaddr, int, error) {
	return resolve(zones, network, address, false)
}

func resolve(zones *zoneCache, network, address string, listen bool) (unix.Sockaddr, int, error) {
	switch network {
	case "unix":
		return &unix.SockaddrUnix{Name: address}, unix.AF_UNIX, nil
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, 0, net.UnknownNetworkError(network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, port, err2 := net.SplitHostPort(address)
		if err2 != nil {
			return nil, 0, err
		}
		switch {
		case host == "" && listen && (network == "tcp4" || network == "tcp" && !ipv6Sockets()):
			host = "0.0.0.0"
		case host == "" && listen:
			host = "::"
		case host == "" || host == "localhost":
			host = "127.0.0.1"
			if network == "tcp6" {
				host = "::1"
			}
		}
		a, err3 := netip.ParseAddr(host)
		p, err4 := strconv.ParseUint(port, 10, 16)
		switch {
		case err3 != nil:
			return nil, 0, noNames(listen, fmt.Sprintf("host %q is not an IP address", host))
		case err4 != nil && strings.Trim(port, "0123456789") != "":
			return nil, 0, noNames(listen, fmt.Sprintf("port %q is not a number", port))
		case err4 != nil:
			return nil, 0, err
		}
		ap = netip.AddrPortFrom(a, uint16(p))
	}
	a := ap.Addr()
	// An IPv4-mapped address is IPv4 for tcp4 and tcp6 (refused there, as
	// in package net), and for a tcp dial, as in package net: an IPv6
	// socket reaches it only if dual-stack, which new ones are not where
	// net.ipv6.bindv6only is set. A tcp listen binds it on a dual-stack
	// socket.
	if a.Is4() || a.Is4In6() && (network != "tcp" || !listen) {
		if network == "tcp6" {
			return nil, 0, errors.New("IPv4 address for tcp6")
		}
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.Unmap().As4()}, unix.AF_INET, nil
	}
	if network == "tcp4" {
		return nil, 0, errors.New("IPv6 address for tcp4")
	}
	sa := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	if z := a.Zone(); z != "" {
		// The kernel takes a link-local address only with its
		// interface's index (the scope id).
		id, err := zones.index(z)
		if err != nil {
			return nil, 0, err
		}
		sa.ZoneId = id
	}
	return sa, unix.AF_INET6, nil
}

// noNames is resolve's error for an address with a name in it (what
// says why), which package net would have looked up: a loop cannot wait
// for DNS.
func noNames(listen bool, what string) error {
	if listen {
		return errors.New("engine: Listen does not resolve names: " + what)
	}
	return errors.New("engine: Dial does not resolve names: " + what)
}

// ipv6Sockets reports whether the kernel makes IPv6 sockets: not one booted
// with ipv6.disable=1, where socket(AF_INET6) fails with EAFNOSUPPORT.
// Probed once, as package net does.
var ipv6Sockets = sync.OnceValue(func() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err != unix.EAFNOSUPPORT
})

// Listen opens address on every loop: "tcp", "tcp4", "tcp6" (a host that
// is an IP address, "localhost" for 127.0.0.1, ::1 for tcp6, or empty for
// every address, dual-stack for tcp, tcp6 serving IPv6 alone; a numeric
// port; Listen does not resolve names, and fails saying so) get one
// SO_REUSEPORT socket per loop with the CPU steering; "unix" gets one
// socket accepted on by every loop. It may be called before or after Run,
// from any goroutine.
func (e *Engine) Listen(network, address string, lc *ListenConfig) (*Listener, error) {
	var opt ListenConfig
	if lc != nil {
		opt = *lc
	}
	if opt.Backlog == 0 {
		opt.Backlog = 4096
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// Once stopping, a loop may have exited: it would never take the new
	// sockets. (A loop exiting now closes them in cleanup, which waits
	// for mu; one that left early, its ring broken, has them closed
	// below.)
	if e.state == 2 || e.draining.Load() || e.stopped.Load() {
		return nil, ErrClosed
	}
	ln := &Listener{e: e, network: network, handshakeTimeout: opt.HandshakeTimeout}
	if opt.TLS != nil {
		ln.tls = opt.TLS.Clone()
		if ln.handshakeTimeout == 0 {
			ln.handshakeTimeout = defaultHandshakeTimeout
		}
		switch ln.maxHandshakes = int64(opt.MaxHandshakes); {
		case ln.maxHandshakes == 0:
			ln.maxHandshakes = defaultMaxHandshakes * int64(len(e.loops))
		case ln.maxHandshakes < 0:
			ln.maxHandshakes = -1
		}
	}
	ln.fds = make([]int, len(e.loops))
	ln.added = make([]uint8, len(e.loops))
	for i := range ln.fds {
		ln.fds[i] = -1
	}
	// addr is the address a failure names, as package net's do: the
	// one asked for, with the port the kernel chose once known.
	var addr net.Addr
	fail := func(op string, err error) (*Listener, error) {
		for i, fd := range ln.fds {
			if fd >= 0 {
				unix.Close(fd)
				ln.fds[i] = -1
			}
		}
		if ln.unlink != "" {
			// The socket file bind created: a later Listen would find
			// the path taken.
			os.Remove(ln.unlink)
		}
		return nil, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: os.NewSyscallError(op, err)}
	}
	if network == "unix" {
		if address != "" {
			addr = &net.UnixAddr{Name: address, Net: "unix"}
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail("socket", err)
		}
		ln.fds[0] = fd
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: address}); err != nil {
			return fail("bind", err)
		}
		if address != "" && !strings.HasPrefix(address, "@") {
			// A path, not an abstract name: Close (or a failure below)
			// removes the file bind created.
			ln.unlink = address
		}
		if err := unix.Listen(fd, opt.Backlog); err != nil {
			return fail("listen", err)
		}
		if address == "" {
			// Bound to a free abstract name the kernel chose.
			got, err := unix.Getsockname(fd)
			if err != nil {
				return fail("getsockname", err)
			}
			if sa, ok := got.(*unix.SockaddrUnix); ok {
				address = sa.Name
			}
		}
		ln.addr = &net.UnixAddr{Name: address, Net: "unix"}
		// Every loop accepts on its own duplicate of the one socket.
		for i := 1; i < len(e.loops); i++ {
			d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return fail("fcntl F_DUPFD_CLOEXEC", err)
			}
			ln.fds[i] = d
		}
	} else {
		sa, family, err := resolve(&e.zones, network, address, true)
		if err != nil {
			return nil, &net.OpError{Op: "listen", Net: network, Err: err}
		}
		addr = net.TCPAddrFromAddrPort(addrPort(sa, &e.zones))
		steer := !opt.NoSteering && len(e.loops) > 1
		var prog []unix.SockFilter
		if steer && !incomingCPUSteering {
			// Built first: a steering the kernel cannot run fails
			// before any socket joins the address's group.
			if prog, err = steeringProgram(e.cfg.CPUs); err != nil {
				return nil, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: err}
			}
		}
		for i := range e.loops {
			fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fail("socket", err)
			}
			ln.fds[i] = fd
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
				return fail("setsockopt SO_REUSEPORT", err)
			}
			if family == unix.AF_INET6 {
				// Dual-stack for "tcp" only: "tcp6" serves IPv6 alone,
				// as in package net.
				v6only := 0
				if network == "tcp6" {
					v6only = 1
				}
				if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only); err != nil {
					return fail("setsockopt IPV6_V6ONLY", err)
				}
			}
			if err := unix.Bind(fd, sa); err != nil {
				return fail("bind", err)
			}
			if i == 0 {
				// Port 0: the others join the port the kernel chose.
				got, err := unix.Getsockname(fd)
				if err != nil {
					return fail("getsockname", err)
				}
				ap := addrPort(got, &e.zones)
				switch s := sa.(type) {
				case *unix.SockaddrInet4:
					s.Port = int(ap.Port())
				case *unix.SockaddrInet6:
					s.Port = int(ap.Port())
				}
				ln.addr = net.TCPAddrFromAddrPort(ap)
				addr = ln.addr
			}
			if steer && incomingCPUSteering {
				// The kernel prefers, among the group's sockets, the one
				// whose SO_INCOMING_CPU is the CPU processing the SYN.
				if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU, e.loops[i].cpu); err != nil {
					return fail("setsockopt SO_INCOMING_CPU", err)
				}
			}
			// Sockets join the reuseport group in listen() order, so the
			// group index of loop i's socket is i, unless the group had
			// sockets already (another process's on this address).
			if err := unix.Listen(fd, opt.Backlog); err != nil {
				return fail("listen", err)
			}
		}
		if !steer || incomingCPUSteering {
			// A program attached to the group before (an older build's
			// steering, in the process this one replaces) would go on
			// choosing sockets by their places in the group, which its
			// sockets' leaving reorders: the group's steering is this
			// Listen's from now on, SO_INCOMING_CPU or, without
			// steering, the kernel's hash. None attached: ENOENT; a
			// kernel before 5.3, which cannot detach one: ENOPROTOOPT.
			if err := unix.SetsockoptInt(ln.fds[0], unix.SOL_SOCKET, unix.SO_DETACH_REUSEPORT_BPF, 0); err != nil && err != unix.ENOENT && err != unix.ENOPROTOOPT {
				return fail("setsockopt SO_DETACH_REUSEPORT_BPF", err)
			}
		} else {
			fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
			if err := unix.SetsockoptSockFprog(ln.fds[0], unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fp); err != nil {
				return fail("setsockopt SO_ATTACH_REUSEPORT_CBPF", err)
			}
		}
	}
	for _, fd := range ln.fds {
		if fd >= 0 {
			ln.open++
		}
	}
	ln.gone = make(chan struct{})
	e.listeners = append(e.listeners, ln)
	// Those whose sockets are all closed have nothing left for a loop's
	// cleanup: a process that listens and closes again and again does
	// not grow the list.
	e.made = slices.DeleteFunc(e.made, (*Listener).socketsClosed)
	e.made = append(e.made, ln)
	for i, l := range e.loops {
		if ln.fds[i] < 0 {
			continue
		}
		i, l := i, l
		if !l.post(func() { ln.add(l, i) }) {
			// The loop left before the engine stopped (its ring
			// broke), its cleanup done: no one would accept on the
			// socket, which takes its share of the connections. Closed,
			// it leaves the SO_REUSEPORT group, and those go to the
			// other loops.
			ln.closePending(i)
		}
	}
	return ln, nil
}

// Classic BPF opcodes and the ancillary offset of the current CPU
// (include/uapi/linux/filter.h).
const (
	skfAdOff = 0xfffff000 // SKF_AD_OFF (-0x1000)
	skfAdCPU = 36         // SKF_AD_CPU
)

// incomingCPUSteering says the kernel's reuseport selection prefers the
// socket whose SO_INCOMING_CPU is the CPU processing the SYN (6.2). Listen
// then steers with SO_INCOMING_CPU rather than the classic-BPF program,
// whose socket indices are positions in the reuseport group: a group that
// had sockets before Listen (another process's on the address, as in an
// upgrade that starts the new process before stopping the old) shifts
// them, and when those leave, the kernel moves the last socket into each
// place freed, inverting the steering for good.
var incomingCPUSteering = kver.AtLeast(kver.Release(), "6.2")

// maxSteeredLoops is the most loops steeringProgram steers: its program
// takes two instructions per loop and three more, and the kernel takes
// no classic-BPF program longer than BPF_MAXINSNS (4096) instructions.
const maxSteeredLoops = (unix.BPF_MAXINSNS - 3) / 2

// steeringProgram returns a reuseport program that selects socket i when the
// packet is processed on cpus[i], and cpu % len(cpus) otherwise. More than
// maxSteeredLoops CPUs are an error: the kernel would refuse the program.
func steeringProgram(cpus []int) ([]unix.SockFilter, error) {
	if len(cpus) > maxSteeredLoops {
		return nil, fmt.Errorf("engine: steering %d loops by CPU before Linux 6.2 takes a classic-BPF program of %d instructions, past the kernel's %d: at most %d loops (ListenConfig.NoSteering leaves the choice of loop to the kernel's hash)", len(cpus), 2*len(cpus)+3, unix.BPF_MAXINSNS, maxSteeredLoops)
	}
	p := []unix.SockFilter{{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdOff + skfAdCPU}}
	for i, cpu := range cpus {
		p = append(p,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(cpu)},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: uint32(i)})
	}
	return append(p,
		unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(len(cpus))},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_A}), nil
}

// add hands loop i's socket to the loop. Loop goroutine of l.
func (ln *Listener) add(l *Loop, i int) {
	ln.mu.Lock()
	if ln.added[i] != 0 || ln.fds[i] < 0 {
		ln.mu.Unlock()
		return
	}
	ln.added[i] = 1
	fd := ln.fds[i]
	ln.mu.Unlock()
	s := &lnSock{ln: ln, fd: fd}
	if l.stopping {
		s.done = true
		ln.closeSock(i)
		return
	}
	if n := len(l.lnFree); n > 0 {
		s.index = l.lnFree[n-1]
		l.lnFree = l.lnFree[:n-1]
		l.lns[s.index] = s
	} else {
		s.index = int32(len(l.lns))
		l.lns = append(l.lns, s)
	}
	l.be.addListener(s)
}

// closeListener closes s's socket, which the loop no longer accepts on
// (s.done, nothing in flight refers to it), and frees its place in lns
// unless a connection still names it. Loop goroutine.
func (l *Loop) closeListener(s *lnSock) {
	s.ln.closeSock(l.id)
	s.fd = -1
	l.freeListener(s)
}

// closeSock closes loop i's socket, once nothing of the loop's refers to
// it. Every close of a listener socket after Listen goes through here (or
// closePending), under mu: Close may shut the socket down from another
// goroutine meanwhile, and must not reach a number closed and reused. Any
// goroutine.
func (ln *Listener) closeSock(i int) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.closeLocked(i)
}

// closeLocked closes loop i's socket if it is still open. ln.mu held.
func (ln *Listener) closeLocked(i int) {
	if ln.fds[i] >= 0 {
		unix.Close(ln.fds[i])
		ln.fds[i] = -1
		if ln.open--; ln.open == 0 {
			close(ln.gone)
		}
	}
}

// socketsClosed reports whether every loop's socket of ln is closed. Any
// goroutine.
func (ln *Listener) socketsClosed() bool {
	select {
	case <-ln.gone:
		return true
	default:
		return false
	}
}

// closePending closes loop i's socket if the loop never took it.
func (ln *Listener) closePending(i int) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.added[i] == 0 && ln.fds[i] >= 0 {
		ln.added[i] = 2
		ln.closeLocked(i)
	}
}

// Close stops accepting; connections already accepted stay open. It
// returns once every loop has closed its socket, so that the address is
// free for a Listen again (an abstract Unix name stays bound while a
// socket is open), or once the engine has stopped. On a loop goroutine
// (of any engine), which cannot wait for the loops, it returns at once,
// and the sockets close as the loops get to it (on uring, once each
// loop's accept is cancelled). Any goroutine.
func (ln *Listener) Close() error { return ln.close(true) }

// close is Close, waiting for the loops only if wait is set: Shutdown,
// whose ctx bounds its drain, waits for the loops to exit instead. Any
// goroutine.
func (ln *Listener) close(wait bool) error {
	if ln.closed.Swap(true) {
		return net.ErrClosed
	}
	e := ln.e
	e.mu.Lock()
	for i, x := range e.listeners {
		if x == ln {
			e.listeners = append(e.listeners[:i], e.listeners[i+1:]...)
			break
		}
	}
	running := e.state == 1
	e.mu.Unlock()
	for i, l := range e.loops {
		ln.mu.Lock()
		fd, pending := ln.fds[i], ln.added[i] == 0
		switch {
		case fd < 0:
		case pending && !running:
			ln.added[i] = 2
			ln.closeLocked(i)
		case ln.network != "unix":
			// Leave the SO_REUSEPORT group now, not when the loop gets to
			// close the socket: a Listen on this address in between
			// would join the old group, whose socket indices the new
			// steering program does not know (connections went to the
			// other CPU's loop). The loop's accept then fails and waits
			// for the removal posted below.
			unix.Shutdown(fd, unix.SHUT_RD)
		}
		ln.mu.Unlock()
		if fd < 0 || pending && !running {
			continue
		}
		l.Post(func() {
			ln.add(l, i) // no-op if added; else adds so that removal below closes it
			for _, s := range l.lns {
				if s != nil && s.ln == ln && !s.done {
					s.done = true
					l.be.removeListener(s)
				}
			}
		})
	}
	if ln.unlink != "" {
		os.Remove(ln.unlink)
	}
	if wait && running && !onAnyLoop() {
		select {
		case <-ln.gone:
		case <-e.exited:
		}
	}
	return nil
}

// hugePageSize is sys.HugePageSize; tests replace it to run the path of
// hosts whose huge pages are bigger (arm64 with 16 or 64 KiB base pages).
var hugePageSize = sys.HugePageSize

// mapMem maps n bytes of anonymous memory off the Go heap, on huge pages
// when huge is set and n is more than half a huge page (a slab region of
// buffers whose size does not divide 2 MiB is a little less), and reports
// the page kind. A smaller mapping stays on base pages: MapAnon would round
// it up to a whole huge page, 32 MiB on arm64 with 16 KiB base pages and
// 512 MiB with 64 KiB, all of it backed at the first touch where
// transparent huge pages are on.
func mapMem(n int, huge bool) ([]byte, string, error) {
	b, kind, err := sys.MapAnon(n, huge && 2*n > hugePageSize())
	if err != nil {
		return nil, "", err
	}
	return b, kind.String(), nil
}

func unmapMem(b []byte) error { return sys.Unmap(b) }

// nodeOfCPU is cpuNode; tests replace it to place CPUs on NUMA nodes.
var nodeOfCPU = cpuNode

// cpuNode returns the NUMA node of cpu (0 when sysfs does not say).
func cpuNode(cpu int) int {
	ents, _ := os.ReadDir("/sys/devices/system/cpu/cpu" + strconv.Itoa(cpu))
	for _, e := range ents {
		if n, ok := strings.CutPrefix(e.Name(), "node"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return v
			}
		}
	}
	return 0
}

// opError describes err, returned by syscall, as package net would for
// op on c (netError). Loop goroutine.
func (c *Conn) opError(op, syscall string, err error) error {
	return c.netError(op, os.NewSyscallError(syscall, err))
}

// Unacked is what c's socket holds that its peer has not acknowledged yet
// (SIOCOUTQ: sent or not), 0 if unknown or closed: with Buffered, what the
// peer has yet to receive of what was written (a peer reading slowly drains
// megabytes of socket buffer before the write queue moves). One system call.
// Loop goroutine.
func (c *Conn) Unacked() int { return c.sockQueue(unix.SIOCOUTQ) }

// unread is what c's socket has received that has not been read
// (SIOCINQ), 0 if unknown or closed. One system call, on the error paths
// (Conn.peerReset). Loop goroutine.
func (c *Conn) unread() int { return c.sockQueue(unix.SIOCINQ) }

// tcpClosed reports whether the TCP socket fd is in TCP_CLOSE (the peer's
// reset came, or the connection timed out): TCP_INFO's tcpi_state.
func tcpClosed(fd int) bool {
	ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && ti.State == unix.BPF_TCP_CLOSE
}

// sockQueue is ioctl req (SIOCINQ, SIOCOUTQ) on c's socket, 0 where it
// fails (closed, not a socket).
func (c *Conn) sockQueue(req uint) int {
	n, err := unix.IoctlGetInt(c.fd, req)
	if err != nil {
		return 0
	}
	return n
}

// threadCPU is the calling thread's CPU time in nanoseconds. Loop goroutine.
func threadCPU() int64 { return sys.ThreadCPUTime() }

// acceptBackoff handles an accept error on s and reports whether the loop
// stops accepting on s for a pause, after which it calls rearm: 5 ms
// doubling to 1 s while the errors go on (as net/http's Server does),
// said once at the start. A shortage (descriptors, memory) pauses at
// once: accepting again at once would only repeat it. Any other error
// pauses once it repeats, no accept having succeeded between: epoll
// reports the socket ready again at once and uring's accept is re-armed
// at once, so an error that does not clear (EPERM from an LSM that denies
// accept before the connection leaves the queue, EINVAL from a socket
// no longer listening) would spin the loop, while one error alone may
// have been the connection's being accepted (accept(2): "Linux accept()
// passes already-pending network errors on the new socket"). Three are
// retried at once, repeated or not: EAGAIN (the queue is empty: epoll
// waits for the next connection, uring's accept waits in the kernel),
// EINTR (a signal), and ECONNABORTED (the connection left the queue and
// was dropped, so the next accept takes the next one). Loop goroutine.
func (l *Loop) acceptBackoff(s *lnSock, err unix.Errno, rearm func()) bool {
	switch err {
	case unix.EAGAIN, unix.EINTR, unix.ECONNABORTED:
		return false
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
	default:
		if !s.failed {
			s.failed = true
			return false
		}
	}
	if s.backoff == 0 {
		l.e.cfg.Logf("engine: loop %d: accept on %v: %v; accepting again in %v, backing off while it lasts", l.id, s.ln.Addr(), err, 5*time.Millisecond)
	}
	l.pauseAccept(s, rearm)
	return true
}

// pauseAccept calls rearm after the next pause of s's back-off: 5 ms,
// doubling to 1 s. Loop goroutine.
func (l *Loop) pauseAccept(s *lnSock, rearm func()) {
	s.backoff = min(max(2*s.backoff, 5*time.Millisecond), time.Second)
	l.st.acceptBackoffs.Add(1)
	l.AfterFunc(s.backoff, func() {
		if !s.done && !l.stopping {
			rearm()
		}
	})
}
