package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/uring"
)

// Backend names a kernel interface a loop waits on.
type Backend string

// SQPollPlacement says where the SQPOLL thread of uring-sqpoll runs
// (Config.SQPoll). Its zero value is SQPollAuto.
type SQPollPlacement struct {
	cpu int // 0: auto; -1: unpinned; c+1: CPU c; below -1: invalid
}

var (
	// SQPollAuto puts the SQPOLL thread on the first allowed CPU outside
	// the loops' CPUs, one on the first loop's NUMA node if there is one,
	// or leaves it unpinned (and says so) when there is none.
	SQPollAuto = SQPollPlacement{}
	// SQPollUnpinned leaves the SQPOLL thread wherever the scheduler puts
	// it.
	SQPollUnpinned = SQPollPlacement{cpu: -1}
)

// SQPollOnCPU pins the SQPOLL thread to cpu (CPU 0 included); New fails
// for a negative cpu, and on uring-sqpoll for one that runs a loop, does
// not exist, is offline or is outside the process's cpuset. Any goroutine.
func SQPollOnCPU(cpu int) SQPollPlacement {
	if cpu < 0 {
		return SQPollPlacement{cpu: -2}
	}
	return SQPollPlacement{cpu: cpu + 1}
}

// CPU returns the CPU the placement pins the thread to, and false for
// SQPollAuto and SQPollUnpinned. Any goroutine.
func (p SQPollPlacement) CPU() (int, bool) {
	if p.cpu > 0 {
		return p.cpu - 1, true
	}
	return -1, false
}

// String is "auto", "unpinned" or "CPU n". Any goroutine.
func (p SQPollPlacement) String() string {
	switch {
	case p.cpu == 0:
		return "auto"
	case p.cpu == -1:
		return "unpinned"
	case p.cpu > 0:
		return fmt.Sprintf("CPU %d", p.cpu-1)
	}
	return "invalid"
}

// The backends. All of them run on the engine's own pinned loop threads; none
// uses Go's netpoller.
const (
	// BackendURing is io_uring with SINGLE_ISSUER|DEFER_TASKRUN, multishot
	// accept, multishot recv on a provided buffer ring and batched sends,
	// one io_uring_enter per loop iteration. The default.
	//
	// Its requests are poll-driven; one the kernel punts to an io-wq worker
	// thread (iou-wrk-<loop thread id>) anyway runs on the loop's CPU
	// (IORING_REGISTER_IOWQ_AFF), with at most 2 workers of each kind
	// (IORING_REGISTER_IOWQ_MAX_WORKERS) instead of the kernel's 4 per CPU
	// and RLIMIT_NPROC (uring-napi likewise). The start-up report says so;
	// a kernel that refuses is said once through Logf. The workers belong
	// to the loop's thread and stay pinned after the loop: that thread
	// exits with the loop rather than go back to the Go scheduler.
	BackendURing Backend = "uring"
	// BackendURingSQPoll adds an SQPOLL kernel thread pinned to a CPU
	// outside the loop set (Config.SQPoll), shared by the engine's rings.
	// Its multishot receives are limited to the room below WriteHighWater
	// (6.17); on older kernels it receives with single-shot recvs,
	// re-armed after each completion, so that pausing a slow reader takes
	// effect at once (see armRecv). It sends one SEND at a time per
	// connection. The requests the SQPOLL thread punts to io-wq run on
	// that thread's workers (iou-wrk-<its id>), which the engine keeps on
	// the SQPOLL thread's CPU, off the loops' CPUs as the thread itself
	// (left unpinned where the thread is), at most 2 of each kind for the
	// engine.
	BackendURingSQPoll Backend = "uring-sqpoll"
	// BackendURingNAPI adds IORING_REGISTER_NAPI busy polling
	// (Config.BusyPoll, Config.PreferBusyPoll, 6.9) with the NAPI ids of
	// accepted sockets added statically (6.13); where the kernel refuses
	// static tracking, with dynamic tracking (the kernel learns the ids
	// from the sockets its requests poll). Logf says which.
	BackendURingNAPI Backend = "uring-napi"
	// BackendEpoll is level-triggered epoll with read/write system calls.
	BackendEpoll Backend = "epoll"
	// BackendEpollBusyPoll is epoll with per-instance busy polling set by
	// the EPIOCSPARAMS ioctl (Linux 6.9).
	BackendEpollBusyPoll Backend = "epoll-busypoll"
)

// Backends lists every backend, default first.
var Backends = []Backend{BackendURing, BackendURingSQPoll, BackendURingNAPI, BackendEpoll, BackendEpollBusyPoll}

func (b Backend) isURing() bool {
	return b == BackendURing || b == BackendURingSQPoll || b == BackendURingNAPI
}

// Config configures an Engine. A nil *Config means all defaults; a zero field
// means that field's default.
type Config struct {
	// Backend selects the kernel interface. Default BackendURing (needs
	// Linux 6.1 for DEFER_TASKRUN); when io_uring cannot be used the engine
	// falls back to BackendEpoll (BackendURingNAPI to BackendEpollBusyPoll
	// where that works) and says so once, at New, through Logf. A
	// uring-sqpoll loop whose SQPOLL ring, or a uring-napi loop whose NAPI
	// registration, the kernel refuses at Run runs uring; a loop whose
	// ring the kernel refuses at Run (ENOMEM: without CAP_IPC_LOCK, its
	// rings are charged to RLIMIT_MEMLOCK, see LockedMemory) runs epoll
	// (uring-napi epoll-busypoll where that works), the other loops
	// keeping theirs. Each is said once through Logf; Engine.Backend says
	// what the loops run once they have started.
	Backend Backend
	// CPUs are the CPUs that get one loop each. Default: the CPUs the plan
	// `spindle tune plan --apply` applied set aside for loops (read from
	// TuneState), those the process may run on; otherwise every CPU the
	// process may run on. New says through Logf which it chose.
	CPUs []int
	// TuneState is the state file of an applied `spindle tune` plan, read
	// for the default CPUs. Default /run/spindle/tune-state.json (where
	// `spindle tune plan --apply` saves it); "-": do not look. A missing
	// file means no plan is applied; an unreadable one is reported through
	// Logf and ignored.
	TuneState string
	// ReadBufferSize is the size of one receive buffer. Default 16 KiB,
	// minimum 512.
	ReadBufferSize int
	// ReadBuffers is the number of receive buffers per loop (the size of
	// the io_uring provided buffer ring, rounded up to a power of two).
	// Default 512.
	ReadBuffers int
	// WriteHighWater is the per-connection write-queue high-water mark in
	// bytes of buffer memory: each queued buffer counts whole (a 1-byte
	// reply in a 4 KiB buffer counts 4 KiB). Above it the loop stops reading
	// from that connection until the queue's memory drains below half of
	// it (unless ReadPastHighWater). Writes are never refused, so the
	// queue stays below WriteHighWater plus the write that crossed it: one
	// buffer for WriteBuffer, and for a handler that writes what it reads.
	// The uring backends arm each receive limited to the room left below
	// the mark (the multishot receive byte limit, Linux 6.17): what arrives
	// after reading pauses is at most what was left of that limit. For a
	// handler whose queue grows only by what it reads (an echo, a proxy)
	// that ends at the mark plus one buffer (TestSlowReaderMemoryCap: 52-64
	// KiB at a 64 KiB mark, where unlimited receives held 216-372 KiB,
	// 572-612 KiB with BatchWait); when other writes filled the queue (a
	// reply larger than its request, another connection forwarding into
	// it), the receive may have most of its limit left when reading pauses.
	// On older kernels a multishot receive fills buffers until its cancel
	// takes effect. What arrives after a pause is held for the connection
	// and delivered when reading resumes, in the receive ring, or copied to
	// the send slab when paused connections hold half the ring
	// (MaxQueuedReadBuffers).
	// Default 256 KiB; the limit ends a receive, costing one re-arm, per
	// WriteHighWater of data.
	WriteHighWater int
	// ReadPastHighWater keeps reading a connection whose own write queue
	// holds WriteHighWater: the mark then only makes OnWritable come once
	// that queue drains below half of it, and the handler bounds memory
	// itself by pausing (Conn.PauseRead) whatever feeds the queue, as a
	// proxy pauses the side it forwards from (Conn.QueuedMemory). A proxy
	// needs it: the side whose queue is full may still have something to
	// say, such as an HTTP server's early 413 to an upload it stopped
	// reading, which a paused connection would hold until its peer read
	// (the client got 504). The uring backends still limit each receive,
	// to WriteHighWater less what a paused connection holds, without
	// counting its write queue. Without it (the default) a connection
	// that writes what it reads (an echo) needs nothing more to keep a
	// peer that does not read from growing its queue.
	ReadPastHighWater bool
	// BusyPoll is the busy-poll time for the uring-napi and epoll-busypoll
	// backends. Default 50µs.
	BusyPoll time.Duration
	// PreferBusyPoll sets prefer_busy_poll for uring-napi and
	// epoll-busypoll. Default false.
	PreferBusyPoll bool
	// SQPoll places the SQPOLL thread of uring-sqpoll (one thread, shared
	// by the engine's rings through IORING_SETUP_ATTACH_WQ): SQPollAuto
	// (the zero value, default) picks the first allowed CPU outside CPUs
	// (on the first loop's NUMA node if one is),
	// and when every CPU runs a loop leaves the thread unpinned and says so
	// through Logf; SQPollUnpinned leaves it unpinned; SQPollOnCPU(c) pins
	// it to CPU c, which must be online, outside CPUs and in the process's
	// cpuset, though it may be outside the process's affinity (New fails
	// otherwise, naming the reason).
	SQPoll SQPollPlacement
	// SendZCThreshold, when > 0, makes the uring backends send queued
	// segments of at least this many bytes with IORING_OP_SEND_ZC from the
	// first 2 MiB region of the loop's send slab, registered with the ring
	// as a fixed buffer (the only way to send from fixed buffers in 6.18).
	// A queue segment is at most ReadBufferSize bytes. Default 0 (off): on
	// loopback and veth the kernel copies anyway and adds a notification
	// CQE per send, and on this project's test VM a 1 MB loopback echo
	// took 10-40x longer with it (stalls of hundreds of ms). Where the
	// kernel refuses it (before 6.2) or the registration fails, the loops
	// send without it and the engine says so once.
	SendZCThreshold int
	// MaxQueuedReadBuffers bounds how many receive buffers one
	// connection's write queue may hold (Conn.WriteBuffer with a buffer
	// from the uring backends' receive ring, which every connection of the
	// loop shares). Beyond it, whenever the connection's reading is paused
	// by WriteHighWater, and whenever write queues and paused connections
	// hold half the ring, WriteBuffer copies the bytes into the loop's send
	// slab and gives the receive buffer back at once; in that last case
	// data the kernel delivers to a paused connection is copied there too
	// (memory beyond WriteHighWater on kernels older than 6.17, bounded by
	// how much a multishot receive delivers before its cancel takes
	// effect). So
	// connections whose peers do not read cannot take the ring from the
	// others: without it, 16 such connections echoing with WriteBuffer held
	// every buffer of a 64-buffer ring and a 17th connection never received
	// again (TestSlowReadersDoNotStarveOthers). Default 4; -1: none of this
	// (a receive buffer is queued or held as it is). The epoll backends
	// read into the slab already and never copy.
	MaxQueuedReadBuffers int
	// NoHugePages disables the attempt to put buffers on huge pages
	// (MAP_HUGETLB, else MADV_HUGEPAGE). Default false: huge pages where
	// they can be had, the kind used reported by Engine.BufferPages:
	// hugetlb pages where the pool has them free and they can be faulted
	// in when mapped (MADV_POPULATE_WRITE, 5.14; a hugetlb cgroup limit,
	// 0 in a Kubernetes pod that asks for none, refuses them there), else
	// transparent huge pages where the process may have them, else base
	// pages.
	// The send slab grows by 2 MiB regions (or one ReadBufferSize buffer
	// if larger), which stay on base pages where a huge page is bigger
	// (arm64 with 16 or 64 KiB base pages).
	NoHugePages bool
	// BatchWait lets a busy uring loop (one whose last iteration handled
	// two requests or more) gather more completions per wake-up: its next
	// wait asks the kernel for twice as many as that iteration handled
	// (no more receives than the receive ring has buffers free), but
	// returns as soon as BatchWait has passed and one is there
	// (min_wait_usec, Linux 6.12; on older kernels the loops wait without
	// it, said once through Logf, and Engine.BatchWait reports 0). It trades up to BatchWait of latency, under load
	// only, for fewer io_uring_enter calls and wake-ups per request; fewer
	// enters need not mean less CPU (docs/BENCHMARKS.md, "Minimum waits"
	// and "BatchWait with the ring cap": 1.00-1.19x the default's at 50 µs
	// in spindle bench on a 2-vCPU VM). On kernels older than 6.17,
	// without the multishot receive byte limit, it loosens WriteHighWater's
	// bound on memory: a connection whose peer does not read can receive
	// what arrives during one batched wait before its reading pauses, all
	// of it held (measured: 572 KiB over a 64 KiB mark on loopback with
	// 100 µs). Not for uring-sqpoll. Default 0: off.
	BatchWait time.Duration
	// WriteTimeout, when > 0, resets a connection whose write queue is
	// not empty and has had no byte of it taken by the kernel for that
	// long, open or closing: the peer gets a reset (RST) and the queue is
	// dropped, as with Conn.Reset, and OnClose gets a *net.OpError (Op
	// "write") wrapping os.ErrDeadlineExceeded. A peer that stops reading
	// holds its queue (up to WriteHighWater of buffers) and its
	// connection for that long, not for good; a peer that reads, however
	// slowly, keeps it while the queue moves. Progress is a send
	// completing: on the uring backends a send of one queue segment (up
	// to ReadBufferSize bytes) completes once the kernel has taken all of
	// it, so there a peer must take a segment's worth per WriteTimeout.
	// Bytes in the socket's send buffer are the kernel's: taking them was
	// progress. The kernel takes more only as the peer's receive window
	// opens, which a peer's TCP announces in steps of up to half its
	// receive buffer (megabytes, autotuned): a peer reading that much more
	// slowly than once per WriteTimeout looks stuck, and is reset, so set
	// it well above that (a peer reading 16 KiB every 10 ms through 128
	// KiB buffers each way keeps a 300 ms WriteTimeout,
	// TestWriteTimeoutSlowReader; one reading 32 KiB every 10 ms through
	// loopback's default buffers was reset at 0.4 s). Default 0: no
	// bound while the connection is open, as Go's net without a deadline
	// (CloseTimeout still bounds a Close).
	//
	// It costs next to nothing per write: a send completion clears a
	// per-connection count, and the loop keeps a list of its connections
	// with a queue (joined at the end-of-iteration flush of a queue, left
	// when the queue empties or the connection closes). Each loop sweeps
	// the connections on that list, not all of its connections, every
	// quarter of the shorter of WriteTimeout and CloseTimeout (no more
	// often than every millisecond, at least every hour), only while the
	// list is not empty: the sweep is armed by the end-of-iteration flush
	// of a non-empty queue and armed again by a sweep that left one. It
	// counts, per connection with a queue, the ticks since the last
	// progress: a tick is a sweep, or every so many sweeps as span a
	// 200th of WriteTimeout where that is longer (a WriteTimeout over 50
	// times CloseTimeout). A reset comes between WriteTimeout and
	// WriteTimeout plus two ticks (1.5 times WriteTimeout when it is the
	// shorter, 1% more when it is over 50 times CloseTimeout) after the
	// last progress. Any duration up to math.MaxInt64 works for either.
	WriteTimeout time.Duration
	// CloseTimeout bounds a Close: a connection whose write queue has not
	// drained into the socket CloseTimeout after Close is reset as by
	// WriteTimeout (RST, queue dropped), and its OnClose gets the same
	// *net.OpError wrapping os.ErrDeadlineExceeded instead of Close's nil,
	// since the peer did not get everything. It counts from the Close
	// whether the queue moves or not: a slow reader is cut at it.
	// WriteTimeout applies to a closing connection too: when it is
	// shorter, a Close whose queue stops moving ends sooner. Checked by
	// WriteTimeout's sweep: the reset comes within one sweep period after
	// the timeout. It bounds CloseLinger's drain before its FIN the same
	// way (with a timer of its own); CloseLinger's timeout for the
	// read-and-drop phase after the FIN stays its own, but is extended,
	// up to CloseTimeout after the FIN, while the socket's send buffer
	// still holds unacknowledged bytes that shrink (see CloseLinger).
	// Default 30s, so that a default engine never waits on a peer forever;
	// negative: no bound (a Close to a peer that never reads waits for as
	// long as the engine runs, as before; Conn.Reset still ends it).
	CloseTimeout time.Duration
	// KeepGOMAXPROCS leaves GOMAXPROCS as it is. By default Run raises it,
	// when it is not above the number of event loops running in the
	// process, to one more than that, says so through Logf, and puts it
	// back when they stop. A loop spends most of its time asleep in
	// io_uring_enter or epoll_wait; while a P is idle the Go scheduler
	// leaves a sleeping loop its P, and while none is, it takes the P away
	// from every sleep longer than 20 µs, at a cost measured up to 2.6
	// times the loop's own CPU per request at low load (docs/BENCHMARKS.md,
	// "The scheduler and the loops"). The extra P costs nothing while the
	// loops sleep; Go code then has one more thread to run on.
	KeepGOMAXPROCS bool
	// Logf receives the engine's few messages: at start-up (the loops'
	// backend and pages, fallbacks, huge pages, NAPI warnings), and at a
	// stop that takes long (a loop still stopping, loops that have not
	// exited, a ring whose Close could not confirm its requests' end),
	// at most once each, possibly from several loop goroutines at once.
	// Default log.Printf. Hot paths never log.
	Logf func(format string, args ...any)
}

// DefaultWriteHighWater is Config.WriteHighWater's default: 256 KiB of
// buffer memory per connection's write queue.
const DefaultWriteHighWater = 256 << 10

const (
	defaultReadBufferSize = 16 << 10
	defaultReadBuffers    = 512

	defaultMaxQueuedReadBuffers = 4
	defaultBusyPoll             = 50 * time.Microsecond
)

// defaultCloseTimeout is Config.CloseTimeout's default.
const defaultCloseTimeout = 30 * time.Second

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
		out.CPUs = append([]int(nil), c.CPUs...)
	}
	if out.Backend == "" {
		out.Backend = BackendURing
	}
	known := false
	for _, b := range Backends {
		known = known || b == out.Backend
	}
	if !known {
		return out, fmt.Errorf("engine: unknown backend %q", out.Backend)
	}
	if out.ReadBufferSize == 0 {
		out.ReadBufferSize = defaultReadBufferSize
	}
	if out.ReadBufferSize < 512 {
		return out, fmt.Errorf("engine: ReadBufferSize %d below 512", out.ReadBufferSize)
	}
	if out.ReadBuffers == 0 {
		out.ReadBuffers = defaultReadBuffers
	}
	if out.ReadBuffers < 0 {
		return out, fmt.Errorf("engine: negative ReadBuffers %d", out.ReadBuffers)
	}
	if out.ReadBuffers > 1<<15 {
		// Before rounding up: past 1<<62 the doubling below overflows.
		return out, fmt.Errorf("engine: ReadBuffers %d above 32768", out.ReadBuffers)
	}
	n := 1
	for n < out.ReadBuffers {
		n <<= 1
	}
	out.ReadBuffers = n
	if out.WriteHighWater == 0 {
		out.WriteHighWater = DefaultWriteHighWater
	}
	if out.WriteHighWater < 0 {
		return out, errors.New("engine: negative WriteHighWater")
	}
	if out.MaxQueuedReadBuffers == 0 {
		out.MaxQueuedReadBuffers = defaultMaxQueuedReadBuffers
	}
	if out.MaxQueuedReadBuffers < -1 {
		return out, fmt.Errorf("engine: MaxQueuedReadBuffers %d (want > 0, or -1 for no bound)", out.MaxQueuedReadBuffers)
	}
	if out.SQPoll.cpu < -1 {
		return out, errors.New("engine: SQPollOnCPU with a negative CPU")
	}
	if out.BusyPoll == 0 {
		out.BusyPoll = defaultBusyPoll
	}
	if out.BusyPoll < 0 {
		return out, fmt.Errorf("engine: negative BusyPoll %v", out.BusyPoll)
	}
	if out.WriteTimeout < 0 {
		return out, fmt.Errorf("engine: negative WriteTimeout %v", out.WriteTimeout)
	}
	if out.CloseTimeout == 0 {
		out.CloseTimeout = defaultCloseTimeout
	}
	if out.Logf == nil {
		out.Logf = log.Printf
	}
	return out, nil
}

// Handler receives a connection's events. Every callback runs on the loop
// goroutine that owns the connection and must not block.
type Handler interface {
	// OnOpen is called once when an accepted connection is ready (on a
	// TLS listener, once its handshake has succeeded) or a dialed one has
	// connected (with Loop.DialTLS, once its handshake has succeeded).
	OnOpen(c *Conn)
	// OnData delivers received bytes in b. If OnData returns false the
	// engine reuses b's memory after the call returns, so b.Bytes() must
	// not be used later. If it returns true the handler keeps b and must
	// call b.Release (or hand it to Conn.WriteBuffer) later, on this loop.
	OnData(c *Conn, b Buffer) (keep bool)
	// OnEOF is called when the peer has shut down its sending side. The
	// connection may still write; it stays open until Close.
	OnEOF(c *Conn)
	// OnWritable is called when a write queue that had reached
	// Config.WriteHighWater has drained below half of it.
	OnWritable(c *Conn)
	// OnClose is called once when the connection is closed and its
	// resources released: err is nil after Close, otherwise the error that
	// ended it (a *net.OpError, or ErrClosed at engine shutdown). One kept
	// after its write met the peer's reset (see Conn.PauseRead) gets that
	// write's error whatever closes it then, a Close, CloseTimeout or the
	// shutdown (the peer went first), and nil after Reset. A dial
	// that fails, and a TLS handshake that does, gets OnClose without
	// OnOpen. It never runs inside another
	// callback (or timer function, or posted function) of the loop: a
	// connection closed from one, by Reset say, or by an error found
	// there, is closed when the call returns (c.Closed() reports true
	// already), but its OnClose comes after the callback has returned, in
	// the same loop iteration on epoll, once the kernel has let go of the
	// socket on uring. So a handler may go on using its state for c after
	// Reset, even if its OnClose frees it.
	OnClose(c *Conn, err error)
}

// Drainer is implemented by a Handler that ends its connections politely
// when the engine shuts down gracefully: Shutdown, once its listeners are
// closed, calls OnDrain once for each connection open at that moment (past
// OnOpen, not yet closing: neither Close nor CloseLinger called), on the
// connection's loop goroutine, and then waits for the connections to
// close. A handler might send an HTTP/2 GOAWAY, close an idle keep-alive
// connection at once and a busy one after its response, or do nothing for
// a connection that will end by itself. There is no drain, and no
// OnDrain, when Shutdown's context is done already at the call, nor on a
// loop that the engine's stop reaches first (Run's context done, the
// drain's context done before the loop got to it): the connections are
// closed at once, and what OnDrain would queue could not be sent.
// Without Drainer, Shutdown waits until the connections close of their own
// accord or its context is done.
type Drainer interface {
	OnDrain(c *Conn)
}

// BaseHandler implements Handler with no-ops, except OnEOF which closes the
// connection once its queued writes are sent. Embed it to implement only
// some callbacks.
type BaseHandler struct{}

// OnOpen does nothing. Loop goroutine.
func (BaseHandler) OnOpen(*Conn) {}

// OnData drops the data. Loop goroutine.
func (BaseHandler) OnData(*Conn, Buffer) bool { return false }

// OnEOF closes c after its queued writes. Loop goroutine.
func (BaseHandler) OnEOF(c *Conn) { c.Close() }

// OnWritable does nothing. Loop goroutine.
func (BaseHandler) OnWritable(*Conn) {}

// OnClose does nothing. Loop goroutine.
func (BaseHandler) OnClose(*Conn, error) {}

// ErrClosed is the error given to OnClose for connections the engine closed
// at shutdown, and returned by operations on a closed engine.
var ErrClosed = net.ErrClosed

// ErrNotSupported is returned on systems without the kernel interfaces the
// engine needs.
var ErrNotSupported = errors.New("engine: not supported on this system")

// Engine is a set of loops, one per CPU. Its methods may be called from any
// goroutine.
type Engine struct {
	cfg     Config
	backend Backend // after fallback
	h       Handler
	loops   []*Loop

	mu        sync.Mutex
	listeners []*Listener
	// made is every Listener Listen made, closed ones too: a loop that
	// exits closes the sockets of theirs it never took (a Listen or Close
	// whose work was posted after the loop stopped). Guarded by mu.
	made  []*Listener
	state int // 0 new, 1 running, 2 done

	sqpoll sqpollShare // rings sharing one SQPOLL thread
	// allowed is the CPUs the process could run on when New ran, before
	// the loop threads pinned themselves to one CPU each.
	allowed []int

	stopOnce sync.Once
	stopping chan struct{} // closed when loops must stop
	// slowExit: awaitExit has said which loops have not exited (Run and
	// Shutdown both wait).
	slowExit sync.Once
	// stall is stopStall at New: a stopping engine's loops and Shutdown
	// read it, not the package's, which tests set while the goroutines of
	// an earlier test's engine may still be stopping.
	stall time.Duration
	// handshakes counts the TLS handshake goroutines: the engine has
	// exited once they have too.
	handshakes sync.WaitGroup
	stopped    atomic.Bool   // set just before stopping closes; what the loops check
	exited     chan struct{} // closed when every loop has returned
	draining   atomic.Bool
	// drainOnce: the first Shutdown that finds the loops running tells a
	// Drainer about the open connections; another, meanwhile, only waits.
	drainOnce sync.Once
	// cut counts the connections loops closed with ErrClosed as they
	// stopped (abortAll), for Shutdown: a drain cut short by another stop
	// (Run's context, the loops' rings failing) is not a complete one.
	cut atomic.Int64

	zones zoneCache // IPv6 zone names and interface indexes
	// napiLogOnce: the first uring-napi loop says which NAPI tracking is
	// in effect.
	napiLogOnce sync.Once
	// degradeOnce: the first loop to go without a feature says so, once
	// per engine and feature.
	degradeOnce [nDegrades]sync.Once
	// iowq says where the uring loops' io-wq workers run, for Run's
	// start-up report (the first loop's word; "" on epoll). Guarded by mu.
	iowq string
	// quiet says how the uring loops send without waiting where the
	// kernel limits it (reportQuiet), for Run's start-up report; "" where
	// it does not. Guarded by mu.
	quiet string
}

// A degrade is a feature of the configuration that a loop went without
// because the kernel refused it, or that does nothing on this host, or
// something a stopping loop could not clean up.
type degrade int

const (
	degradeSQPoll degrade = iota
	degradeNAPI
	degradeSendZC
	degradeBatchWait
	degradeNAPIID    // sockets without a NAPI id: busy polling does nothing for them
	degradeSQPollAny // the SQPOLL thread unpinned, every CPU running a loop
	degradeIOWQAff   // io-wq workers not pinned
	degradeIOWQMax   // io-wq workers not bounded
	degradeRingLeft  // a ring's Close could not confirm its requests ended: its receive buffers and send slab stay mapped
	degradeRingClose // a ring's Close failed otherwise
	degradeRing      // a loop's ring refused at Run (ENOMEM, EPERM): the loop runs epoll
	nDegrades
)

// degraded logs, once per engine and feature d, that a loop runs without
// d. Any goroutine.
func (e *Engine) degraded(d degrade, format string, args ...any) {
	e.degradeOnce[d].Do(func() { e.cfg.Logf(format, args...) })
}

// reportIOWQ records where the loops' io-wq workers run, for Run's start-up
// report; the first loop to say counts. Loop goroutine.
func (e *Engine) reportIOWQ(s string) {
	e.mu.Lock()
	if e.iowq == "" {
		e.iowq = s
	}
	e.mu.Unlock()
}

// reportQuiet records how the uring loops send quiet SENDs where the kernel
// limits them, for Run's start-up report; the first loop to say counts.
// Loop goroutine.
func (e *Engine) reportQuiet(s string) {
	e.mu.Lock()
	if e.quiet == "" {
		e.quiet = s
	}
	e.mu.Unlock()
}

// Backend reports the backend the engine's loops run, after any fallback:
// New's, where io_uring cannot be used (Config.Backend), known at New; and
// the loops' own, known once Run has started the loops (BufferPages is ""
// until then): a uring-sqpoll loop whose SQPOLL ring the kernel refused,
// or a uring-napi loop whose NAPI registration it refused, runs uring
// (said once through Logf), and a loop whose ring the kernel refuses at
// Run (RLIMIT_MEMLOCK) runs epoll. Where the loops differ it says each
// loop's ("loop 0: uring-sqpoll; loop 1: uring"), which is none of
// Backends. Any goroutine.
func (e *Engine) Backend() Backend {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.backendLocked()
}

// backendLocked is Backend: the loops' once every one has said its own,
// else New's choice. e.mu held.
func (e *Engine) backendLocked() Backend {
	if b := e.perLoopLocked(func(l *Loop) string { return string(l.backend) }); b != "" {
		return Backend(b)
	}
	return e.backend
}

// BatchWait reports the minimum wait the loops' waits use after any
// fallback, known once Run has started the loops (BufferPages is "" until
// then): Config.BatchWait, or 0 where a loop waits without one, its kernel
// lacking IORING_FEAT_MIN_TIMEOUT (6.12, said once through Logf) or the
// loop running uring-sqpoll or epoll. Any goroutine.
func (e *Engine) BatchWait() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pagesLocked() == "" {
		return 0
	}
	w := e.loops[0].batchWait
	for _, l := range e.loops {
		w = min(w, l.batchWait)
	}
	return w
}

// batchWaitLocked is the start-up report's word for the loops' minimum
// waits: ", batch wait" and each loop's where they differ, "none" for a
// loop that waits without one; "" without Config.BatchWait. e.mu held.
func (e *Engine) batchWaitLocked() string {
	if e.cfg.BatchWait <= 0 {
		return ""
	}
	return ", batch wait " + e.perLoopLocked(func(l *Loop) string {
		if l.batchWait == 0 {
			return "none"
		}
		return l.batchWait.String()
	})
}

// BufferPages reports the kind of pages behind the loops' buffers ("hugetlb",
// "thp" or "4k"), known once Run has started the loops: each loop's
// ("loop 0: hugetlb; loop 1: thp") where they differ, as when a hugetlb
// pool or cgroup limit had pages for some loops only. Any goroutine.
func (e *Engine) BufferPages() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == 0 || len(e.loops) == 0 {
		return ""
	}
	return e.pagesLocked()
}

// pagesLocked is BufferPages once Run has started: "" until every loop has
// said its pages. e.mu held.
func (e *Engine) pagesLocked() string {
	return e.perLoopLocked(func(l *Loop) string { return l.pages })
}

// perLoopLocked is what the loops said at start (f: a loop's word, "" while
// it has not started): "" until every loop has, the word where they all
// agree, else each loop's ("loop 0: x; loop 1: y"). e.mu held.
func (e *Engine) perLoopLocked(f func(*Loop) string) string {
	if len(e.loops) == 0 {
		return ""
	}
	first := f(e.loops[0])
	same := true
	for _, l := range e.loops {
		if f(l) == "" {
			return ""
		}
		same = same && f(l) == first
	}
	if same {
		return first
	}
	var b strings.Builder
	for i, l := range e.loops {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "loop %d: %s", l.id, f(l))
	}
	return b.String()
}

// Loops returns the engine's loops, one per CPU in Config.CPUs order. Any
// goroutine.
func (e *Engine) Loops() []*Loop { return e.loops }

// Stats sums the counters of every loop. Any goroutine.
func (e *Engine) Stats() Stats {
	var s Stats
	for _, l := range e.loops {
		s.add(l.Stats())
	}
	return s
}

// Run starts the loops and blocks until ctx is done, Shutdown has finished
// or every loop has left; it then closes every connection (reset as at
// the end of Shutdown's drain) and listener and returns once all loop
// threads have exited (what they may leave mapped: see Shutdown). It
// returns an error if a loop cannot start, and the errors of loops that
// left early because their kernel queue failed (the other loops serve on
// until ctx is done or Shutdown; each failure is also logged when it
// happens). Call it once, from any goroutine.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.state != 0 {
		e.mu.Unlock()
		return errors.New("engine: Run called twice or after Shutdown")
	}
	e.state = 1
	e.mu.Unlock()
	if !e.cfg.KeepGOMAXPROCS {
		if msg := reserveP(len(e.loops)); msg != "" {
			e.cfg.Logf("%s", msg)
		}
		defer releaseP(len(e.loops))
	}
	errc := make(chan error, len(e.loops))
	var wg sync.WaitGroup
	for _, l := range e.loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(errc)
		}()
	}
	var firstErr error
	for range e.loops {
		if err := <-errc; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		e.stop()
	} else {
		e.mu.Lock()
		iowq, quiet, pages, backend, batch := e.iowq, e.quiet, e.pagesLocked(), e.backendLocked(), e.batchWaitLocked()
		e.mu.Unlock()
		if iowq != "" {
			iowq = ", " + iowq
		}
		if quiet != "" {
			quiet = ", " + quiet
		}
		e.cfg.Logf("engine: %d loops on CPUs %v, backend %s%s, buffers on %s pages%s%s", len(e.loops), e.cfg.CPUs, backend, batch, pages, iowq, quiet)
	}
	go func() {
		wg.Wait()
		// Every connection is closed: a handshake still running has
		// been told, and returns.
		e.handshakes.Wait()
		e.mu.Lock()
		e.state = 2
		e.mu.Unlock()
		close(e.exited)
	}()
	select {
	case <-ctx.Done():
		e.stop()
	case <-e.stopping:
	case <-e.exited:
		// Every loop left, their kernel queues failed: nothing serves.
		e.stop()
	}
	e.awaitExit()
	// Stopped through ctx, or by a loop that could not start: close the
	// listeners as Shutdown does, so that Unix socket files go with them.
	e.closeListeners()
	errs := []error{firstErr}
	for _, l := range e.loops {
		errs = append(errs, l.failed)
	}
	return errors.Join(errs...)
}

// closeListeners closes the listeners still open, without waiting for the
// loops to close their sockets. Any goroutine.
func (e *Engine) closeListeners() {
	e.mu.Lock()
	lns := append([]*Listener(nil), e.listeners...)
	e.mu.Unlock()
	for _, ln := range lns {
		ln.close(false)
	}
}

// Shutdown closes the listeners, tells a Drainer handler about each open
// connection, and waits until the open connections have closed or ctx is
// done. Then it closes the remaining connections (OnClose gets
// ErrClosed, or the peer's reset where a write had met it and the
// connection was kept for what the peer sent before it: see
// Handler.OnClose), with a reset (RST) where the handler had not ended what it
// sends (open, neither CloseWrite nor CloseLinger called) or its queue is
// dropped: a FIN would tell the peer that the stream was whole where it
// was cut (TCP; a Unix socket has no reset, its peer reads the end). Then
// it waits for the loops to exit: a loop exits once the
// kernel has ended every request that refers to its memory, however long
// that takes; one stopping for longer than 5 s says through Config.Logf
// what it still waits for, and a second later the engine says which loops
// have not exited. Before it exits, a uring loop closes its ring, whose
// Close waits up to a second for requests the kernel could only ask to
// stop, and with uring-sqpoll up to ten seconds more for the ring's SQ
// thread to exit (uring.Ring.Close); if the kernel does not confirm that they ended,
// the loop's receive buffers stay mapped for the life of the process, as
// such a request may still write into them (uring.LeftMappedBytes counts
// them), and so does its send slab, which a send may still read
// (LeftMappedBytes counts it); the engine says so, once, through
// Config.Logf. A ctx done
// already at the call skips the drain: no OnDrain, every connection closed
// at once. It returns nil after a complete drain, ctx.Err() when connections had to
// be closed, and ErrClosed when the engine stopped otherwise meanwhile (Run's
// context done, or its loops failing) and closed those still open. Any
// goroutine; on a loop goroutine of any engine (in a Handler callback, a
// timer or a posted function), which cannot wait for its own loop to exit
// and must not hold its loop for another engine's drain, it does all this
// in a new goroutine and returns nil at once: Run returns once it is done
// (an engine never run is closed, Run failing, before it returns, as
// anywhere). There ctx's deadline bounds the drain, but a cancel after the
// call does not end it (the cancel of a context.WithTimeout deferred in
// the callback would close every connection at once); a ctx already done
// closes them at once.
func (e *Engine) Shutdown(ctx context.Context) error {
	cut := e.cut.Load()    // before the drain: any cut from now on shortens it
	e.draining.Store(true) // accepts refuse from now on (dials go on)
	// Under mu, before the loop goroutine's case: a Run called after
	// Shutdown returns fails, wherever Shutdown ran.
	e.mu.Lock()
	started := e.state != 0
	if !started {
		// Never run: release what New made; Run now fails.
		e.state = 2
		for _, l := range e.loops {
			l.closeWakeFd()
		}
		close(e.exited)
	}
	e.mu.Unlock()
	if started && onAnyLoop() {
		cancel := context.CancelFunc(func() {})
		if ctx.Err() == nil {
			d, ok := ctx.Deadline()
			ctx = context.WithoutCancel(ctx)
			if ok {
				ctx, cancel = context.WithDeadline(ctx, d)
			}
		}
		go func() {
			defer cancel()
			e.Shutdown(ctx)
		}()
		return nil
	}
	e.closeListeners()
	var err error
	if started {
		if ctx.Err() == nil {
			e.drainOnce.Do(e.drainConns)
		}
		t := time.NewTicker(5 * time.Millisecond)
	wait:
		for e.Stats().Open > 0 {
			select {
			case <-ctx.Done():
				err = ctx.Err()
				break wait
			case <-e.exited:
				break wait
			case <-t.C:
			}
		}
		t.Stop()
		if err == nil && e.cut.Load() != cut {
			// Run's context, or the loops' failing, stopped the engine
			// during the drain and closed what was still open.
			err = ErrClosed
		}
	}
	e.stop()
	if started {
		e.awaitExit()
	}
	return err
}

// awaitExit waits for the loops to exit after stop. When that takes
// longer than a loop's own report of what it waits for (stall), it
// says, once per engine, which loops have not exited: one of them that
// said nothing is not going round its loop (asleep, or stuck in a
// callback). Any goroutine but a loop's.
func (e *Engine) awaitExit() {
	wait := e.stall + time.Second
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-e.exited:
		return
	case <-t.C:
	}
	e.slowExit.Do(func() {
		var left []int
		for _, l := range e.loops {
			l.mu.Lock()
			if l.wakeFd >= 0 {
				left = append(left, l.id)
			}
			l.mu.Unlock()
		}
		e.cfg.Logf("engine: loops %v have not exited %v after the engine stopped", left, wait)
	})
	<-e.exited
}

// drainConns has each loop call a Drainer handler's OnDrain for its open
// connections, unless the engine stops first (a loop that stops runs what
// was posted before closing every connection: OnDrain would be told of a
// drain that does not come). Any goroutine but a loop's.
func (e *Engine) drainConns() {
	for _, l := range e.loops {
		d, ok := l.h.(Drainer)
		if !ok {
			return
		}
		l.Post(func() {
			if l.stopping {
				return
			}
			// By index: OnDrain may close connections (their slots go nil)
			// but opens none (accepts refuse while draining; a dial it
			// makes is not open yet).
			for i := 0; i < len(l.conns); i++ {
				if c := l.conns[i]; c != nil && c.state == stateOpen && !c.lingering && !c.handshaking() {
					d.OnDrain(c)
				}
			}
		})
	}
}

func (e *Engine) stop() {
	e.stopOnce.Do(func() {
		e.stopped.Store(true)
		close(e.stopping)
		for _, l := range e.loops {
			l.wake()
		}
	})
}

// sqpollShare lets the rings of an engine share one SQPOLL thread. The
// first loop to get there makes its ring with an SQ thread of its own,
// holding mu until its init ends; the others wait for it and attach to the
// ring it has kept. A loop that does not keep its ring (the kernel refused
// the SQPOLL ring, or its buffer ring: the loop runs uring without SQPOLL,
// or epoll) leaves ring nil, and the next loop makes one: attached to a
// ring that has closed again, the others would lose SQPOLL.
type sqpollShare struct {
	mu   sync.Mutex
	ring *uring.Ring // guarded by mu
}

// Listener is a listening address served by every loop of an engine. Its
// methods may be called from any goroutine.
type Listener struct {
	e       *Engine
	network string
	addr    net.Addr
	fds     []int // per loop, -1 where a loop does not accept
	closed  atomic.Bool
	unlink  string // Unix socket path to remove on Close
	// tls (ListenConfig.TLS, cloned) makes its connections TLS, their
	// handshakes bounded by handshakeTimeout.
	tls              *tls.Config
	handshakeTimeout time.Duration
	// maxHandshakes caps handshakes, the handshakes in progress
	// (ListenConfig.MaxHandshakes; < 0: no cap); refused counts the
	// connections reset for it. A TLS listener's: a plain one's accepts
	// do not touch them (accepted admits only for ln.tls).
	maxHandshakes int64
	handshakes    atomic.Int64
	refused       atomic.Uint64

	mu    sync.Mutex
	added []uint8 // per loop: 0 not yet taken, 1 taken by the loop, 2 closed unused
	// open counts the sockets of fds not yet closed; gone is closed when
	// it reaches 0 (Close waits for it).
	open int
	gone chan struct{}
}

// Addr is the bound address (with the port chosen when the requested port
// was 0). Any goroutine.
func (ln *Listener) Addr() net.Addr { return ln.addr }

// TLSHandshakesRefused returns the number of connections the listener has
// reset at the accept, its ListenConfig.MaxHandshakes reached: its share
// of Stats.TLSHandshakesRefused, over every loop (0 for a listener
// without TLS). Any goroutine.
func (ln *Listener) TLSHandshakesRefused() uint64 { return ln.refused.Load() }

// ListenConfig holds per-listener options. A nil *ListenConfig means the
// defaults.
type ListenConfig struct {
	// Backlog is the listen(2) backlog of each socket. Default 4096.
	// The kernel caps it at net.core.somaxconn (4096 by default since
	// 5.4; a sysctl of the network namespace), the default included.
	// Negative: no bound of the listener's own, somaxconn, as listen(2)
	// takes a negative backlog (compared unsigned).
	Backlog int
	// NoSteering disables the reuseport CPU steering (SO_INCOMING_CPU, or
	// the program before 6.2); connections are then spread by the
	// kernel's 4-tuple hash. Before 6.2 an engine of more than 2046
	// loops needs it: the program cannot steer so many, and Listen fails
	// saying so.
	NoSteering bool
	// TLS, when set, makes the listener's connections TLS servers with
	// this configuration (cloned by Listen): crypto/tls runs the
	// handshake on a goroutine of its own and then, on the loop, the
	// record layer (TLS 1.2 and 1.3, KeyUpdate, alerts, session tickets),
	// in user space. The handler sees only plaintext: OnOpen once the
	// handshake has succeeded (Conn.TLS says what was agreed), OnClose
	// alone, with the error, when it fails or times out, as for a failed
	// dial. OnData's buffers hold decrypted bytes (send-slab chunks, one
	// TLS record's worth at most); Write, Writev and WriteBuffer encrypt,
	// and the write queue, Buffered, QueuedMemory and the high-water mark
	// count the records queued. CloseWrite and Close send close_notify
	// (Reset does not); the peer's close_notify, or its FIN at a record
	// boundary, is OnEOF (Conn.TLSTruncated tells the second, which anyone
	// on the path can forge); a FIN inside a record or a record that does not
	// decrypt closes the connection with the error. Ciphertext received
	// while reading is paused is kept for the connection, on the Go heap
	// (and not counted by the mark): what the receive in flight at the
	// pause took, about WriteHighWater at most with the kernel's receive
	// limit (6.17; before it, a multishot receive's burst), after which
	// nothing more is received until reading resumes
	// (TestTLSPausedInputCapped); a handshake holds up to
	// WriteHighWater of the client's input, beyond which reading waits
	// for it to take what it holds. Drainer's OnDrain skips connections
	// still in their handshake; one that succeeds once Shutdown has begun
	// is closed (OnClose gets ErrClosed). Run returns once every
	// handshake has: a callback of the config (GetCertificate, say) that
	// blocks holds it. Loop.DialTLS is the client side: the same, on
	// dialed connections.
	TLS *tls.Config
	// HandshakeTimeout bounds a TLS handshake, from the accept. Default
	// 10 s; negative: no bound. Without TLS it does nothing.
	HandshakeTimeout time.Duration
	// MaxHandshakes caps the TLS handshakes in progress on the listener,
	// across the engine's loops: a connection accepted while it holds that
	// many is reset at once (RST: the client reads ECONNRESET, and no
	// TIME_WAIT is left behind; a Unix socket's client that has sent
	// nothing reads the end of the stream), without a handshake, a Conn or
	// a word to the handler, and counted in Stats.TLSHandshakesRefused
	// and the listener's TLSHandshakesRefused. A handshake
	// holds its place from its accept until its goroutine has returned
	// (succeeded, failed, timed out, or its connection closed), so that
	// clients that connect and say nothing, or a callback that blocks,
	// hold a bounded number of goroutines and transports. Default (0):
	// 1024 per loop of the engine: some 8 MiB a loop when every place is
	// held by a client that sends nothing (about 8 KiB each, goroutine
	// stack included: TestTLSMaxHandshakesDefault logs it; one that sends
	// part of a flight adds what it sent, up to Config.WriteHighWater),
	// and, with the default 10 s HandshakeTimeout, still room for 100 new
	// handshakes a second a loop while they are held; far more than a
	// loop's CPU completes in honest handshakes, which take a round trip
	// or two. Negative: no cap. Without TLS it does nothing.
	MaxHandshakes int
}

// Stats are counters of one loop (or their sum over an engine). They are
// updated atomically by the loop and may be read at any time.
type Stats struct {
	Waits          uint64 // system calls that wait: every io_uring_enter, or epoll_wait
	WaitNanos      uint64 // wall time inside those calls (for io_uring: also the sends and receives they run); busy polling spins here
	WaitCPUNanos   uint64 // busy-poll backends (uring-napi, epoll-busypoll) only, once a socket with a NAPI id has received data (before that the waits cannot poll): CPU time the loop's thread spent inside its waits, busy polling and the packet and socket work it runs there
	Interrupted    uint64 // waits a signal interrupted (EINTR), mostly the Go runtime asking the loop goroutine to yield
	Yields         uint64 // times the loop passed through the Go scheduler on its own (every 8 ms when busy, see yieldEvery)
	BatchedWaits   uint64 // waits with a minimum wait (Config.BatchWait)
	TimedWaits     uint64 // waits given a timeout, for a deadline (a timer; the sweep of Config.WriteTimeout and CloseTimeout): epoll, every wait while one is pending; uring, whose deadlines are one kernel timeout, only a wait whose deadline came due while the loop ran its handlers; and on both, a stopping loop's waits (at most 10 ms each)
	QuietWaits     uint64 // uring: waits not ended by the completions of the SENDs they submitted (MSG_DONTWAIT, so those complete inside the wait's enter): an enter saved each
	QuietCut       uint64 // uring: such SENDs that found the socket's buffer full (EAGAIN, or sent short): the rest went again without MSG_DONTWAIT
	QuietSkipped   uint64 // uring: such SENDs flushed alone (a queue of one segment), which post no completion when they send all (IOSQE_CQE_SKIP_SUCCESS), that did: each settled once the kernel had taken it and every completion posted by then was handled
	Submits        uint64 // io_uring_enter calls made only to flush a full SQ
	SQEs           uint64 // submission queue entries prepared
	CQEs           uint64 // completions (or epoll events) handled
	BytesRead      uint64 // bytes received from the kernel, those dropped too (a connection closing, or lingering: CloseLinger)
	BytesWritten   uint64 // bytes the kernel took from write queues
	Reads          uint64 // OnData calls: receives delivered to the handler (one a receive, after any hold while reading was paused), not those dropped while closing or lingering
	Writes         uint64 // send/write system calls or SEND completions (a quiet SEND's, see QuietWaits, at the loop's next wake-up, with its BytesWritten)
	Accepted       uint64
	Dialed         uint64
	Closed         uint64
	NoBufs         uint64 // receives that found no free buffer (ENOBUFS), and TLS decryptions no send-slab chunk
	Wakeups        uint64 // cross-goroutine wake-ups received
	PausedReads    uint64 // times a write queue reached the high-water mark: its connection's reading paused, or with Config.ReadPastHighWater the handler is to pause what feeds the queue
	RingCopies     uint64 // receive buffers copied to the send slab to give them back to the ring (MaxQueuedReadBuffers)
	NAPIIDs        uint64 // NAPI ids of the rings' sockets (uring-napi): added to their static lists, or with dynamic tracking seen on sockets whose receives the kernel polls
	ZCSends        uint64 // SEND_ZC requests (SendZCThreshold)
	ZCCopied       uint64 // SEND_ZC requests that sent data and whose notification said the kernel copied it rather than sending it zero-copy (the kernel says so too for a send that sent nothing, failed or cancelled, which is not counted)
	ZCNoNotif      uint64 // SEND_ZC results no notification followed (the kernel could not allocate one): their chunk given back at the result
	MsgRings       uint64 // loop-to-loop wake-ups sent over MSG_RING
	MsgRingErrs    uint64 // MSG_RING wake-ups that failed (the target had closed), sent again through the target's eventfd
	AcceptBackoffs uint64 // pauses in accepting after running out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) or after an accept error that repeats, and on epoll where epoll refused to watch the socket (at the listener's add, or again after a pause)
	TimedOut       uint64 // connections reset by Config.WriteTimeout or Config.CloseTimeout
	Open           int64  // connections open now

	TLSHandshakes        int64  // TLS handshakes in progress, accepted and dialed: each until it ends, when an accepted one gives its ListenConfig.MaxHandshakes place back, before OnOpen or the OnClose of its failure (a connection closed meanwhile, by the handshake timeout say, has its OnClose first); its goroutine returns just after, and Run and Shutdown wait for it
	TLSHandshakesRefused uint64 // connections TLS listeners reset at the accept, their ListenConfig.MaxHandshakes reached
	TLSHandshakePanics   uint64 // TLS handshakes a callback of their tls.Config panicked in (HandshakePanicError)
}

func (s *Stats) add(o Stats) {
	s.Waits += o.Waits
	s.WaitNanos += o.WaitNanos
	s.WaitCPUNanos += o.WaitCPUNanos
	s.Interrupted += o.Interrupted
	s.Yields += o.Yields
	s.BatchedWaits += o.BatchedWaits
	s.TimedWaits += o.TimedWaits
	s.QuietWaits += o.QuietWaits
	s.QuietCut += o.QuietCut
	s.QuietSkipped += o.QuietSkipped
	s.Submits += o.Submits
	s.SQEs += o.SQEs
	s.CQEs += o.CQEs
	s.BytesRead += o.BytesRead
	s.BytesWritten += o.BytesWritten
	s.Reads += o.Reads
	s.Writes += o.Writes
	s.Accepted += o.Accepted
	s.Dialed += o.Dialed
	s.Closed += o.Closed
	s.NoBufs += o.NoBufs
	s.Wakeups += o.Wakeups
	s.PausedReads += o.PausedReads
	s.RingCopies += o.RingCopies
	s.NAPIIDs += o.NAPIIDs
	s.MsgRings += o.MsgRings
	s.ZCSends += o.ZCSends
	s.ZCCopied += o.ZCCopied
	s.ZCNoNotif += o.ZCNoNotif
	s.MsgRingErrs += o.MsgRingErrs
	s.AcceptBackoffs += o.AcceptBackoffs
	s.TimedOut += o.TimedOut
	s.TLSHandshakes += o.TLSHandshakes
	s.TLSHandshakesRefused += o.TLSHandshakesRefused
	s.TLSHandshakePanics += o.TLSHandshakePanics
	s.Open += o.Open
}

type counters struct {
	interrupted, yields, batchedWaits, quietWaits, quietCut, quietSkipped         atomic.Uint64
	waitCPUNanos                                                                  atomic.Uint64
	waits, waitNanos, submits, sqes, cqes, bytesRead, bytesWritten, reads, writes atomic.Uint64
	accepted, dialed, closed, noBufs, wakeups, pausedReads, napiIDs               atomic.Uint64
	msgRings, msgRingErrors, zcSends, zcCopied, zcNoNotif, ringCopies             atomic.Uint64
	acceptBackoffs                                                                atomic.Uint64
	timedOut, tlsRefused, tlsPanics, timedWaits                                   atomic.Uint64
	open, tlsHandshakes                                                           atomic.Int64
	// ring is the loop's io_uring (uring backends): its own counters are
	// the loop's waits and interrupted waits, read here rather than copied
	// by the loop after every wait.
	ring atomic.Pointer[uring.Ring]
}

func (c *counters) snapshot() Stats {
	s := c.load()
	if r := c.ring.Load(); r != nil {
		s.Waits, s.Interrupted = r.EnterCount(), r.InterruptCount()
	}
	return s
}

func (c *counters) load() Stats {
	return Stats{
		Waits: c.waits.Load(), WaitNanos: c.waitNanos.Load(), WaitCPUNanos: c.waitCPUNanos.Load(), Interrupted: c.interrupted.Load(), Yields: c.yields.Load(), BatchedWaits: c.batchedWaits.Load(), TimedWaits: c.timedWaits.Load(), QuietWaits: c.quietWaits.Load(), QuietCut: c.quietCut.Load(), QuietSkipped: c.quietSkipped.Load(), Submits: c.submits.Load(), SQEs: c.sqes.Load(), CQEs: c.cqes.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(),
		Reads: c.reads.Load(), Writes: c.writes.Load(),
		Accepted: c.accepted.Load(), Dialed: c.dialed.Load(), Closed: c.closed.Load(),
		NoBufs: c.noBufs.Load(), Wakeups: c.wakeups.Load(), PausedReads: c.pausedReads.Load(),
		NAPIIDs: c.napiIDs.Load(), MsgRings: c.msgRings.Load(), MsgRingErrs: c.msgRingErrors.Load(), AcceptBackoffs: c.acceptBackoffs.Load(),
		ZCSends: c.zcSends.Load(), ZCCopied: c.zcCopied.Load(), ZCNoNotif: c.zcNoNotif.Load(), RingCopies: c.ringCopies.Load(),
		TimedOut: c.timedOut.Load(), Open: c.open.Load(),
		TLSHandshakes: c.tlsHandshakes.Load(), TLSHandshakesRefused: c.tlsRefused.Load(), TLSHandshakePanics: c.tlsPanics.Load(),
	}
}
