package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/uring"
)

// user_data layout: op (8 bits) | generation (24 bits) | slot (32 bits). It
// carries integer handles only, never pointers.
const (
	opWake uint64 = iota + 1
	opAccept
	opRecv
	opSend
	opConnect
	opCancel
	opMsg     // a MSG_RING wake-up arriving from another loop
	opMsgSent // our MSG_RING to another loop completed
	opSendZC  // SEND_ZC: the gen field carries the slab chunk id
	opCancelFd
	opWakeAt       // wakeAt's timeout: the gen field carries its sequence number
	opSendZCLinked // a SEND_ZC linked to the SEND before it: as opSendZC
	opQuietEnd     // the NOP ending a chain of quiet SENDs: completes only if the chain was cut
)

const bufGroup = 1

func udata(op uint64, slot int32, gen uint32) uint64 {
	return op<<56 | uint64(gen&0xffffff)<<32 | uint64(uint32(slot))
}

func udSplit(ud uint64) (op uint64, slot int32, gen uint32) {
	return ud >> 56, int32(uint32(ud)), uint32(ud>>32) & 0xffffff
}

// uringUsable reports whether this process may create io_uring rings.
func uringUsable() error {
	r, err := uring.New(&uring.Config{Entries: 8})
	if err != nil {
		return err
	}
	return r.Close()
}

// uringBackend runs a loop on its own ring: SINGLE_ISSUER|DEFER_TASKRUN (or
// SQPOLL), multishot accept, multishot recv on a provided buffer ring, sends
// from the slab linked in order, one io_uring_enter per iteration.
type uringBackend struct {
	l        *Loop
	kind     Backend
	cfg      *Config
	r        *uring.Ring
	br       *uring.BufRing
	cqes     []uring.CQE
	inflight int // SQEs whose final CQE has not arrived (excluding the wake poll and SEND_ZC notifications)
	dirty    bool
	// starved are connections whose recv ended with ENOBUFS, re-armed
	// once a receive buffer has gone back to the ring (dirty). retry are
	// those whose ENOBUFS may predate buffers given back since the
	// receive was armed (commits moved past c.k.events, the count at
	// arming): the receive ran at some moment between its arming and its
	// completion (with SQPOLL, on the SQ thread, which may be preempted
	// between finding the ring empty and posting the CQE), so it may have
	// found the ring empty before a refill; they are re-armed at the next
	// iteration whatever it gives back. Only a commit moves commits, so a
	// connection is retried at most once per refill: no spinning on an
	// empty ring.
	starved, retry []*Conn
	commits        uint32
	napi           bool // NAPI busy polling registered
	napiStatic     bool // with static tracking: napiAdd adds the ids
	sqpoll         bool // the ring has an SQPOLL thread (after any fallback)
	// recvLimit: receives are limited to the connection's recvBudget
	// (uring.HasRecvLimit, with a high-water mark), and to issueBytes,
	// what one issue of a multishot receive takes (recvIssueBuffers).
	recvLimit  bool
	issueBytes int
	// probe lists the connections whose receive rearmRecv armed without
	// the limit where the peer may have reset them meanwhile; poll looks
	// at their sockets once it has submitted those receives (probeReset).
	probe    []*Conn
	napiIDs  map[uint32]bool
	lnArmed  []bool
	maxChain int   // linked SENDs per flush
	zcMin    int   // SEND_ZC threshold, 0 = off
	zcChunks int32 // chunk ids below this lie in the registered region
	// zcUnsent counts, per chunk, the SEND_ZC requests that sent nothing
	// (failed, or cancelled) and whose notification is to come: it
	// reports a copy (uring.CQE.ZCCopied), which Stats.ZCCopied leaves
	// out.
	zcUnsent []uint16
	// batchWait is Config.BatchWait where the kernel has min_wait (0:
	// off); lastCQEs counts the completions the previous poll handled.
	// out counts the receive buffers the loop has from the ring and has
	// not given back (Recycle), committed or not.
	batchWait time.Duration
	lastCQEs  int
	out       int
	// aside holds completions sqe took off a CQ to let the kernel accept
	// submissions; poll handles them before the CQ's. broken is set when a
	// full SQ cannot be submitted; sqe then hands out spare.
	aside  []uring.CQE
	broken error
	spare  uring.SQE
	// quiet counts the SENDs of chains prepared since the last enter whose
	// completions the next wait need not wake for (quietSends; a chain of
	// them cut short ends the wait all the same: flush); quietOK says the
	// ring posts them inside that enter (DEFER_TASKRUN, no SQ thread) and
	// the kernel posts the result of a lone quiet SEND cut short
	// (shortSendSkipCleared); quietChains that a chain of two or more may
	// be quiet, the kernel failing the link of a SEND cut short
	// (shortSendLinkCut). epoch counts the waits, for kstate.sendEpoch.
	quiet       uint32
	quietOK     bool
	quietChains bool
	// skipped lists from skipHead on, in SQ order, the lone quiet SENDs
	// in flight, which post no completion when they send all (flush);
	// settle completes those, taking them off the front by moving
	// skipHead. One whose completion came stays in the list, unlisted in
	// place: its connection's bitSendSkip cleared, or its position no
	// longer the one skipPos, per slot, holds for the connection's listed
	// SEND (skipLive); settle drops it as it walks past. behind counts
	// the listed SENDs of connections with bitSendBehind, whose settle
	// something waits for, and overflowed says that settle found
	// completions held in the kernel's overflow list: with either the
	// loop does not sleep.
	skipped    []skipSend
	skipHead   int
	skipPos    []uint32
	behind     int
	overflowed bool
	// dropped is the ring's count of completions the kernel dropped
	// (cqDropped) at init: settle completes no listed SEND once it has
	// moved.
	dropped uint32
	// monoOffset and monoAbs are monoClock's, for wakeAt.
	monoOffset int64
	monoAbs    bool
	epoch      uint8
	// wakeArmed is when (nanotime) the kernel timeout wakeAt armed
	// expires, 0 once it has fired; wakeSeq numbers the timeouts, so that
	// a late completion of an older one leaves it.
	wakeArmed int64
	wakeSeq   uint32
	// msgOut counts, per destination loop (by id), the MSG_RING wake-ups
	// this ring has prepared whose completions it has not handled: each
	// is also in the destination's Loop.msgIn until then.
	msgOut []int32
	// iowq says where placeIOWQ put the ring's io-wq workers, for Run's
	// start-up report once init has succeeded ("" for a ring attached
	// to another's SQPOLL thread: that loop's says).
	iowq string
}

// skipSend is a lone quiet SEND in flight that posts no completion if it
// sends all: c's slot and generation, the position of its SQE in the SQ
// (uring.Ring.SQTail) and the bytes it sends.
type skipSend struct {
	slot int32
	gen  uint32
	pos  uint32
	n    int32
}

// recvLimitUsable reports whether receives can be limited (the kernel's
// multishot receive byte limit); tests replace it to run the paths of
// kernels without it.
var recvLimitUsable = uring.HasRecvLimit

// shortSendLinkCut and shortSendSkipCleared report whether the kernel fails
// a MSG_DONTWAIT|MSG_WAITALL SEND cut short: its link, and its
// FlagCQESkipSuccess, which quiet SENDs rest on (init); tests replace them
// to run the paths of kernels that do not.
var (
	shortSendLinkCut     = uring.HasShortSendLinkCut
	shortSendSkipCleared = uring.HasShortSendSkipCleared
)

// cqDropped is the ring's count of completions the kernel dropped
// (uring.Ring.CQOverflow); tests replace it, as the kernel cannot be made
// to drop one at will.
var cqDropped = (*uring.Ring).CQOverflow

// batchFrom is how many completions one iteration must have handled for the
// next wait to batch (Config.BatchWait): two requests' receive and send.
const batchFrom = 4

// batchWant is how many completions a batched wait asks for, after an
// iteration that handled last of them (0: do not batch): twice last, at most
// room (the CQE array), and no more receives than the ring has buffers
// (free): a receive finding the ring empty ends with ENOBUFS and must be
// armed again. The buffers the loop holds go back only after the wait, and
// a wait asking for more completions than there are buffers (plus the
// quiet SENDs', which come within the enter without one) ran the ring dry
// at 1,000 connections (docs/BENCHMARKS.md, "BatchWait's length").
func batchWant(last, room, free, quiet int) int {
	n := min(2*last, room, free+quiet)
	if last < batchFrom || n-quiet < batchFrom {
		return 0
	}
	return n
}

func newURingBackend(b Backend, c *Config) backend {
	return &uringBackend{kind: b, cfg: c}
}

func (b *uringBackend) init(l *Loop) (err error) {
	b.l = l
	rc := &uring.Config{
		Entries:      uringSQEntries,
		CQEntries:    uringCQEntries,
		SingleIssuer: true,
		DeferTaskrun: true,
		// The loop reaps only what its waits bring (poll): it never
		// looks at IORING_SQ_TASKRUN, which the kernel would otherwise
		// set and clear with an atomic operation each round.
		NoTaskrunFlag:  true,
		RegisterRingFD: true,
	}
	if b.kind == BackendURingSQPoll {
		rc.DeferTaskrun, rc.NoTaskrunFlag = false, false
		rc.SQPoll = true
		rc.SQThreadIdle = 10 * time.Millisecond
		if cpu := sqpollCPU(l.e); cpu >= 0 {
			rc.SQAffinity, rc.SQThreadCPU = true, cpu
		}
		sh := &l.e.sqpoll
		sh.mu.Lock()
		if sh.ring != nil {
			rc.AttachWQ = sh.ring
			sh.mu.Unlock()
		} else {
			// This loop makes the ring the others attach to, once it
			// has kept it.
			defer func() {
				if err == nil && b.sqpoll {
					sh.ring = b.r
				}
				sh.mu.Unlock()
			}()
		}
	}
	r, err := newRing(rc)
	if err != nil && rc.SQPoll {
		sqErr := err
		rc.SQPoll, rc.SQThreadIdle, rc.SQAffinity = false, 0, false
		rc.DeferTaskrun, rc.NoTaskrunFlag, rc.AttachWQ = true, true, nil
		// Said only when the loop does run uring: a ring refused
		// without SQPOLL too fails the loop, or runs it on epoll.
		if r, err = newRing(rc); err == nil {
			l.e.degraded(degradeSQPoll, "engine: SQPOLL ring failed (%v); running uring without SQPOLL", sqErr)
		} else {
			err = fmt.Errorf("%w (with SQPOLL: %v)", err, sqErr)
		}
	}
	if err != nil {
		return err
	}
	b.r = r
	b.dropped = cqDropped(r)
	l.st.ring.Store(r)
	b.sqpoll = rc.SQPoll
	sqCPU := -1
	if rc.SQAffinity {
		sqCPU = rc.SQThreadCPU
	}
	b.placeIOWQ(sqCPU, rc.AttachWQ != nil)
	b.recvLimit = l.hwm > 0 && recvLimitUsable()
	b.issueBytes = min(recvIssueBuffers*b.cfg.ReadBufferSize, math.MaxInt32)
	b.maxChain = 16
	if b.sqpoll {
		b.maxChain = 1
	}
	b.cqes = make([]uring.CQE, 512)
	b.skipped = make([]skipSend, 0, 64)
	b.br, err = setupBufRing(r, bufGroup, b.cfg.ReadBuffers, b.cfg.ReadBufferSize, !b.cfg.NoHugePages)
	if err != nil {
		return err
	}
	b.br.Mbind(cpuNode(l.cpu))
	l.owned = make(ownSet, b.cfg.ReadBuffers) // no growing on the hot path
	l.pagesRecv = b.br.PageKind().String()
	if b.cfg.MaxQueuedReadBuffers > 0 {
		l.ringLimit, l.ringShare = b.cfg.MaxQueuedReadBuffers, b.cfg.ReadBuffers/2
	}
	if b.kind == BackendURingNAPI {
		b.registerNAPI()
	}
	if b.cfg.SendZCThreshold > 0 {
		// The slab's first region (mapped before init) is fixed buffer 0.
		if err := sendZCUsable(); errors.Is(err, uring.ErrNotSupported) {
			l.e.degraded(degradeSendZC, "engine: the kernel refuses SEND_ZC (%v); sending without SEND_ZC", err)
		} else if err != nil {
			l.e.degraded(degradeSendZC, "engine: could not ask the kernel whether SEND_ZC works (%v)%s; sending without SEND_ZC", err, memlockNote(&l.e.cfg, len(l.e.loops), err))
		} else if err = r.RegisterBuffers([][]byte{l.chunks.regions[0]}); err != nil {
			l.e.degraded(degradeSendZC, "engine: registering the send slab failed (%v)%s; sending without SEND_ZC", err, memlockNote(&l.e.cfg, len(l.e.loops), err))
		} else {
			b.zcMin = b.cfg.SendZCThreshold
			b.zcChunks = int32(l.chunks.perRegion)
			b.zcUnsent = make([]uint16, b.zcChunks)
		}
	}
	if rc.DeferTaskrun && !rc.SQPoll {
		b.quietSetup()
	}
	b.monoOffset, b.monoAbs = monoClock()
	if b.cfg.BatchWait > 0 && !rc.SQPoll {
		if hasMinWait(r) {
			b.batchWait = b.cfg.BatchWait
		} else {
			l.e.degraded(degradeBatchWait, "engine: the kernel has no IORING_FEAT_MIN_TIMEOUT (6.12); waiting without Config.BatchWait")
		}
	}
	b.armWake()
	l.ringFd.Store(int32(r.Fd()))
	if b.iowq != "" {
		// Only now: a loop whose buffer ring the kernel refuses closes
		// its ring and may run epoll (runEpollInstead).
		l.e.reportIOWQ(b.iowq)
	}
	return nil
}

func (b *uringBackend) minWait() time.Duration { return b.batchWait }

// quietSetup says which quiet SENDs flush may send, by what the kernel does
// with a MSG_DONTWAIT|MSG_WAITALL SEND cut short. A lone one, with
// FlagCQESkipSuccess, posts its result only where the kernel fails it (it
// clears the skip then): elsewhere it would post nothing, and settle would
// take its bytes as sent. A chain's next SEND and the NOP that ends it are
// cancelled only where the kernel fails the link: elsewhere that SEND would
// go after bytes the last did not send, and the NOP would post nothing, the
// wait sleeping past the cut. A queue of two segments or more then goes as
// a chain without MSG_DONTWAIT, whose SENDs each wait in the kernel until
// they have sent all. The start-up report says so where either is missing.
func (b *uringBackend) quietSetup() {
	switch {
	case !shortSendSkipCleared():
		b.l.e.reportQuiet("no quiet SENDs (a SEND cut short posts no result with IOSQE_CQE_SKIP_SUCCESS, or the probe could not tell: spindle doctor says which)")
	case !shortSendLinkCut():
		b.quietOK = true
		b.l.e.reportQuiet("quiet SENDs for one-segment replies only (a SEND cut short does not fail its link, or the probe could not tell: spindle doctor says which)")
	default:
		b.quietOK, b.quietChains = true, true
	}
}

func (b *uringBackend) runs() Backend {
	if (b.kind == BackendURingSQPoll && !b.sqpoll) || (b.kind == BackendURingNAPI && !b.napi) {
		return BackendURing
	}
	return b.kind
}

// registerNAPI turns on NAPI busy polling for the ring: with static
// tracking (6.13), where the ring polls the ids napiAdd gives it, else with
// dynamic tracking (6.9), where the kernel adds the id of each socket a
// request polls. The engine's first loop says which is in effect.
func (b *uringBackend) registerNAPI() {
	l := b.l
	c := uring.NAPIConfig{BusyPollTimeout: b.cfg.BusyPoll, PreferBusyPoll: b.cfg.PreferBusyPoll, Static: true}
	_, serr := registerNAPI(b.r, c)
	err := serr
	if serr != nil {
		c.Static = false
		_, err = registerNAPI(b.r, c)
	}
	if err != nil {
		l.e.degraded(degradeNAPI, "engine: IORING_REGISTER_NAPI failed (%v); running uring without busy polling", err)
		return
	}
	b.napi, b.napiStatic = true, c.Static
	b.napiIDs = map[uint32]bool{}
	l.e.napiLogOnce.Do(func() {
		if c.Static {
			l.e.cfg.Logf("engine: NAPI busy polling (%v) with static tracking of the accepted sockets' NAPI ids", c.BusyPollTimeout)
		} else {
			l.e.cfg.Logf("engine: NAPI busy polling (%v) with dynamic tracking (static tracking refused: %v)", c.BusyPollTimeout, serr)
		}
	})
}

// iowqMaxWorkers bounds the io-wq workers of each kind (bounded: file I/O
// and requests forced there; unbounded: sockets and pipes) that may run a
// loop's punted requests, where the kernel's defaults are 4 per CPU and
// RLIMIT_NPROC. The engine's own requests are poll-driven (multishot
// accept and receive, sends the kernel retries on poll, MSG_RING, cancels)
// and should not need io-wq at all: a worker is an exception, which this
// bound keeps from becoming a crowd of threads on the loop's CPU. Two, not
// one, so that a request blocked in a worker does not hold up the next.
const iowqMaxWorkers = 2

// placeIOWQ confines the io-wq workers that run the ring's punted requests
// to the loop's CPU and bounds them (iowqMaxWorkers). io-wq belongs to the
// submitting thread: without SQPOLL the loop's, which then keeps workers
// pinned to its CPU that nothing can move back, so it exits with the loop
// (Loop.keepThread) rather than go back to the Go scheduler. With SQPOLL
// it is the SQ thread's, shared by the rings attached to it (attached:
// placed by the loop that made it), and its workers go to the SQ thread's
// CPU (sqCPU), off the loops' CPUs as the SQ thread is; an unpinned SQ
// thread (sqCPU < 0) leaves them unpinned too, bounded. A kernel that
// refuses is said once; the loop goes on. Loop goroutine, from init.
func (b *uringBackend) placeIOWQ(sqCPU int, attached bool) {
	l := b.l
	if b.sqpoll && attached {
		return
	}
	where, cpus, whose := "each loop's CPU", []int{l.cpu}, "per loop"
	switch {
	case !b.sqpoll:
		l.keepThread = true // whatever the kernel takes of what follows
	case sqCPU >= 0:
		where, cpus, whose = fmt.Sprintf("the SQPOLL thread's CPU %d", sqCPU), []int{sqCPU}, "for the SQPOLL thread"
	default:
		where, cpus, whose = "any CPU (the SQPOLL thread is unpinned)", nil, "for the SQPOLL thread"
	}
	if cpus != nil {
		if err := registerIOWQAffinity(b.r, cpus); err != nil {
			l.e.degraded(degradeIOWQAff, "engine: pinning the rings' io-wq workers failed (%v); they may run on any CPU", err)
			where = "any CPU (pinning them failed)"
		}
	}
	bound := fmt.Sprintf("at most %d bounded and %d unbounded %s", iowqMaxWorkers, iowqMaxWorkers, whose)
	if _, _, err := b.r.RegisterIOWQMaxWorkers(iowqMaxWorkers, iowqMaxWorkers); err != nil {
		l.e.degraded(degradeIOWQMax, "engine: bounding the rings' io-wq workers failed (%v); the kernel may start as many as it likes", err)
		bound = "as many as the kernel starts (bounding them failed)"
	}
	b.iowq = "io-wq workers on " + where + ", " + bound
}

// registerIOWQAffinity is the ring's; tests replace it to run the path of
// kernels that refuse it.
var registerIOWQAffinity = (*uring.Ring).RegisterIOWQAffinity

// newRing and setupBufRing are uring's; tests replace them to order the
// loops' starts and to run the path of a buffer ring the kernel refuses.
var (
	newRing      = uring.New
	setupBufRing = (*uring.Ring).SetupBufRingPages
)

// closeRing is the ring's Close, or its CloseOnto(onto) unless onto is
// negative; tests replace it to run the paths of a Close that fails.
var closeRing = func(r *uring.Ring, onto int) error {
	if onto < 0 {
		return r.Close()
	}
	return r.CloseOnto(onto)
}

// hasMinWait is the ring's; tests replace it to run the path of kernels
// without IORING_FEAT_MIN_TIMEOUT (before 6.12).
var hasMinWait = (*uring.Ring).HasMinWait

// registerNAPI and addNAPIID are the ring's; tests replace them to run the
// path of kernels without static NAPI tracking (6.9 to 6.12) and to count
// the ids added.
var (
	registerNAPI = (*uring.Ring).RegisterNAPI
	addNAPIID    = (*uring.Ring).AddNAPIID
)

// sendZCUsable is uring.ProbeSendZC; tests replace it to run the paths of
// kernels that refuse PrepSendZC's sends (6.0 and 6.1) and of a probe that
// could not ask.
var sendZCUsable = uring.ProbeSendZC

func (b *uringBackend) msgRing(dst *Loop, ringFd int) bool {
	q := b.sqe()
	if b.broken != nil {
		// q is the spare, which never reaches the kernel: the caller
		// wakes dst through its eventfd.
		return false
	}
	// The completion names dst, to wake it another way if the message
	// fails.
	q.PrepMsgRing(ringFd, 0, udata(opMsg, 0, 0), 0, udata(opMsgSent, int32(dst.id), 0))
	b.l.st.msgRings.Add(1)
	b.inflight++
	if b.msgOut == nil {
		b.msgOut = make([]int32, len(b.l.e.loops))
	}
	b.msgOut[dst.id]++
	dst.msgIn.Add(1) // under dst.mu, as its close takes ringFd away
	return true
}

// msgDone gives back n of the wake-ups msgOut counts for loop id: the
// kernel has looked their ring fd up, or never will. Loop goroutine.
func (b *uringBackend) msgDone(id int32, n int32) {
	b.msgOut[id] -= n
	b.l.e.loops[id].msgGone(-n)
}

// msgHeld is added to Loop.msgIn as the loop's ring closes with wake-ups for
// it counted there: its fd number is held (Loop.heldFd) until they are
// given back.
const msgHeld = 1 << 30

// msgGone adds n to msgIn: -n wake-ups given back, or msgHeld as the ring
// closes onto its eventfd. Whichever leaves msgIn at msgHeld alone, the last
// wake-up given back or the close when none was left, closes the held
// number: only once the ring has closed, and none is left that names it.
// Any loop goroutine.
func (l *Loop) msgGone(n int32) {
	if l.msgIn.Add(n) == msgHeld {
		unix.Close(int(l.heldFd.Load()))
	}
}

// monoClock returns CLOCK_MONOTONIC's reading less nanotime's, for wakeAt's
// absolute timeouts, and whether they may be used: measured once, by the
// first uring loop to start (a program that runs none reads no clock and no
// /proc file for it), and kept by each (uringBackend.init). nanotime is the
// Go runtime's monotonic clock, which on Linux is CLOCK_MONOTONIC, since
// startTime: the two differ by a constant, read once here between two
// clock_gettime calls, the closest pair of three, and off by at most half
// the time between those calls (under a microsecond unless the thread was
// preempted three times), a hundredth of a timer's resolution of a
// millisecond. In a time namespace that moves CLOCK_MONOTONIC the process's
// readings are not the kernel timer's (io_uring takes an absolute timeout
// as the host's time, in the io_uring/timeout.c read for this), so there
// wakeAt keeps relative timeouts.
var monoClock = sync.OnceValues(monotonicOffset)

func monotonicOffset() (int64, bool) {
	best, off := int64(math.MaxInt64), int64(0)
	for range 3 {
		var a, b unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &a) != nil {
			return 0, false
		}
		n := nanotime()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &b) != nil {
			return 0, false
		}
		if w := b.Nano() - a.Nano(); w < best {
			best, off = w, a.Nano()+w/2-n
		}
	}
	return off, timensMonotonicZero(procTimensOffsets)
}

// procTimensOffsets lists the offsets of the process's time namespace.
const procTimensOffsets = "/proc/self/timens_offsets"

// timensMonotonicZero reports whether the time namespace whose offsets
// file is path leaves CLOCK_MONOTONIC as the host's: its monotonic line
// says 0 0, or there is no such file (a kernel without time namespaces,
// before 5.6).
func timensMonotonicZero(path string) bool {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "monotonic" {
			return f[1] == "0" && f[2] == "0"
		}
	}
	return false
}

// wakeAt has one IORING_OP_TIMEOUT end the loop's waits at at (nanotime),
// the loop's next deadline (its first timer's, or the sweep's), and
// reports whether it did: false when at has passed, the ring is broken, or
// the kernel has yet to read the timespec slot next in turn, and the loop
// bounds its wait itself (not at all for a due timer; for a
// sweep that came due since the last wake-up, what was left of its period
// then). A wait with a timeout costs,
// every time, a clock read, the timeout's argument and an hrtimer armed and
// cancelled in the kernel, which the C server does not pay; under load a
// loop nearly always has a deadline (Config.CloseTimeout's sweep, on by
// default, whenever a write queue is listed; a service's idle timers).
// Here the kernel timer moves only when the deadline comes earlier than it
// (IORING_TIMEOUT_UPDATE, no completion when it succeeds) or after it has
// fired: one that fires before the loop's deadline, which moved later,
// ends a wait for nothing, and the loop arms it again. At most maxWait
// ahead, as a timed wait. The timeout is absolute (IORING_TIMEOUT_ABS, on
// CLOCK_MONOTONIC, monoClock): the kernel starts a relative one when it
// takes the SQE, with SQPOLL when the SQ thread gets to it, and one taken
// late fired that much after at; an absolute one taken after at fires at
// once. Not in inflight: the ring's close ends it. Loop goroutine.
func (b *uringBackend) wakeAt(at int64) bool {
	if b.wakeArmed != 0 && b.wakeArmed <= at {
		return true
	}
	now := nanotime()
	if at <= now || b.broken != nil {
		return false
	}
	d := time.Duration(min(at-now, int64(maxWait)))
	// The kernel reads the timespec when it takes the SQE: with SQPOLL,
	// when the SQ thread gets to it, which a thread kept off its CPU
	// may not do for many iterations of the loop. A slot it has not read
	// is not handed out again (nil), and the loop times its wait itself
	// until it has.
	tv, flags := d, uint32(0)
	if b.monoAbs {
		tv, flags = time.Duration(now+int64(d)+b.monoOffset), uring.TimeoutAbs
	}
	ts := b.r.Timespec(tv)
	if ts == nil {
		return false
	}
	q := b.sqe()
	if b.broken != nil {
		return false // q is the spare
	}
	if b.wakeArmed != 0 {
		// A failed update (the timeout fired meanwhile) completes
		// under the timeout's own user_data but for the slot: either
		// completion clears wakeArmed, and the loop arms anew.
		q.PrepTimeoutUpdate(udata(opWakeAt, 0, b.wakeSeq), ts, flags, udata(opWakeAt, 1, b.wakeSeq))
		q.SetFlags(uring.FlagCQESkipSuccess)
	} else {
		b.wakeSeq++
		q.PrepTimeout(ts, 0, flags, udata(opWakeAt, 0, b.wakeSeq))
	}
	b.wakeArmed = now + int64(d)
	return true
}

// sqpollCPU picks the SQPOLL thread's CPU: the one Config.SQPoll names,
// none for SQPollUnpinned, else the first CPU the process was allowed
// outside the loop set on the first loop's NUMA node (the thread touches
// the rings and buffers, which are on the loops' nodes), else the first
// outside it on any node, else none (-1, said once). It runs on a loop
// thread, whose own affinity is its one CPU by then: hence Engine.allowed.
func sqpollCPU(e *Engine) int {
	if c, ok := e.cfg.SQPoll.CPU(); ok {
		return c
	}
	if e.cfg.SQPoll == SQPollUnpinned {
		return -1
	}
	first := -1
	for _, c := range e.allowed {
		if slices.Contains(e.cfg.CPUs, c) {
			continue
		}
		if len(e.cfg.CPUs) == 0 || nodeOfCPU(c) == nodeOfCPU(e.cfg.CPUs[0]) {
			return c
		}
		if first < 0 {
			first = c
		}
	}
	if first >= 0 {
		return first
	}
	e.degraded(degradeSQPollAny, "engine: every CPU runs a loop; the SQPOLL thread is not pinned and competes with the loops")
	return -1
}

func (b *uringBackend) close() {
	// Under mu, which PostTo holds as it prepares a wake-up with the fd:
	// from here on none is prepared, and those that were are in msgIn.
	b.l.mu.Lock()
	b.l.ringFd.Store(-1)
	b.l.mu.Unlock()
	// A loop leaves with connections still open only when its ring broke
	// (serve). They are closed, and their OnClose called, while the
	// receive ring is still mapped (closing the ring closes it): a buffer
	// a handler kept stays valid until its OnClose returns, as on a normal
	// close. The kernel may still complete the ring's requests on their
	// sockets until the ring closes, but only into buffers it was given,
	// never into those the handler holds. Their write queues' send-slab
	// chunks go back to the slab here, sends in flight or not: no one can
	// take a chunk before cleanup unmaps the slab, since serve's abortAll
	// has made every connection closing (Write refuses) and the loop is
	// stopping (Dial refuses, nothing is accepted)
	// (TestOnCloseCannotWriteOnBrokenLoop).
	for _, c := range b.l.conns {
		if c != nil && c.state != stateClosed {
			b.finish(c)
		}
	}
	b.l.runCloses()
	// Closing the ring closes its receive ring too, after it: only once
	// the kernel has confirmed the cancel of the ring's requests, and
	// otherwise leaving the buffers mapped, as a request that already took
	// one may still write into it (uring.Ring.Close). Closed first, the
	// receive ring was unmapped under such a request
	// (TestReceiveBuffersMappedUntilRingRequestsEnd). b.br is kept:
	// recycling into it does nothing once closed. The send slab likewise:
	// a SEND still in flight copies from a chunk's address, which once
	// unmapped any new mapping may take, its bytes then sent to the peer
	// (TestSendSlabMappedAfterUnconfirmedRingClose); cleanup leaves it
	// mapped (keepSlab). Buffers left mapped stay so for the life of the
	// process: the engine says so, once, with the ring's error, which says
	// how many bytes of receive buffers it left, and the slab's size.
	if b.r != nil {
		// The ring's fd number is free for any file once closed: a
		// MSG_RING another loop had prepared with it and submitted
		// after (at its next wait, which a handler may hold up for any
		// time, or with its ring's Close) would post its completion
		// into whatever ring took the number (another engine's, or one
		// of the process's own uring.Rings). With any counted in msgIn
		// the ring closes onto the loop's eventfd instead: the number
		// names that, not a ring, and their MSG_RING fails (its loop
		// wakes this one's eventfd, a no-op once it has exited) until
		// the last of them is given back, whose loop closes the number
		// (msgGone). None is counted from here on (ringFd is -1), and
		// the loop does not wait for them. Those this ring sent itself
		// are given back first: whether submitted or not, the kernel
		// looks them up no later than the ring's Close.
		if b.l.id < len(b.msgOut) && b.msgOut[b.l.id] > 0 {
			b.msgDone(int32(b.l.id), b.msgOut[b.l.id])
		}
		onto, fd := -1, b.r.Fd()
		if b.l.msgIn.Load() > 0 {
			onto = b.l.wakeFd
		}
		err := closeRing(b.r, onto)
		if onto >= 0 {
			b.l.heldFd.Store(int32(fd))
			b.l.msgGone(msgHeld)
		}
		if errors.Is(err, uring.ErrCancelUnconfirmed) {
			b.l.keepSlab = true
			b.l.e.degraded(degradeRingLeft, "engine: loop %d: closing its io_uring ring: %v; its send slab (%d bytes) left mapped too, as a send may still read it",
				b.l.id, err, b.l.chunks.bytes())
		} else if err != nil {
			b.l.e.degraded(degradeRingClose, "engine: loop %d: closing its io_uring ring: %v", b.l.id, err)
		}
		b.r = nil
	}
	// Wake-ups whose completions the loop has not handled (the ring
	// broke): the kernel may have delivered them, or failed them (their
	// completions, which would have woken their loops another way
	// (opMsgSent), reaped unseen by the Close), or never had them (the
	// Close's submissions refused too: a dead SQPOLL thread). Each loop
	// with one left is woken through its eventfd, as on a failed one: its
	// wake-up pending, nothing else posted to it wakes it
	// (TestPostToWakeUpLostWithBrokenRing). One more is a spurious wake-up;
	// one less left its posted functions waiting, for good on an idle
	// loop.
	for id, n := range b.msgOut {
		if n > 0 {
			b.msgDone(int32(id), n)
			b.l.e.loops[id].wake()
		}
	}
	// The requests that referred to the listener sockets went with the
	// ring, so they can be closed now (before, a multishot accept could
	// still take a connection no loop would see). A listener socket left
	// open would keep taking connections no loop accepts.
	for i, armed := range b.lnArmed {
		if armed {
			b.lnArmed[i] = false
			b.l.lns[i].ln.closeSock(b.l.id)
		}
	}
}

func (b *uringBackend) idle() bool { return b.inflight == 0 }

// inFlight says which of the ring's requests have not ended: those of
// connections (receives, sends, and the rest: cancels, connects), the
// accepts, and the loop's own (cancels, ring messages). Loop goroutine.
func (b *uringBackend) inFlight() string {
	var conns, onConns, recvs, sends int
	first := ""
	for _, c := range b.l.conns {
		if c == nil || c.k.inflight == 0 {
			continue
		}
		if conns++; first == "" {
			first = fmt.Sprintf(" (the first: fd %d, peer %v, %d sends, closing %v)", c.fd, c.remote, c.k.sends, c.k.closing)
		}
		onConns += int(c.k.inflight)
		sends += int(c.k.sends)
		if c.k.recv != 0 {
			recvs++
		}
	}
	accepts := 0
	for _, armed := range b.lnArmed {
		if armed {
			accepts++
		}
	}
	return fmt.Sprintf("%d io_uring requests in flight: %d of %d connections%s (%d receives, %d sends, %d others), %d accepts, %d cancels or ring messages",
		b.inflight, onConns, conns, first, recvs, sends, onConns-recvs-sends, accepts, b.inflight-onConns-accepts)
}

// sqe returns a free SQE, submitting when the SQ is full.
//
// A submission that fails leaves the SQ full. EAGAIN and EBUSY say that the
// kernel cannot take more before completions are reaped (EBUSY: a CQ
// overflow, on kernels older than this engine needs) or requests freed
// (6.18: none could be allocated; with DEFER_TASKRUN, the completions that
// free them run only when the loop enters the kernel for them): sqe sets
// the CQ's completions aside, for poll to handle first, entering the kernel
// for those it holds back, and submits again, sqeRetries times at most. Any other error (the
// SQPOLL thread gone: EOWNERDEAD) will not pass. Then the ring is broken:
// sqe returns a spare SQE that never reaches the kernel, and the next poll
// returns the error, which ends the loop. It spun on Submit forever.
func (b *uringBackend) sqe() *uring.SQE {
	for failed := 0; ; {
		if s := b.r.GetSQE(); s != nil {
			b.l.st.sqes.Add(1)
			return s
		}
		if b.broken != nil {
			b.spare = uring.SQE{}
			return &b.spare
		}
		b.l.st.submits.Add(1)
		_, err := submitSQ(b.r)
		switch {
		case err == nil:
			// The kernel consumed at least one (or, with SQPOLL, waited
			// for the SQ thread to).
			failed = 0
		case (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY)) && failed < sqeRetries:
			failed++
			b.setAside()
		default:
			b.broken = fmt.Errorf("io_uring_enter with a full SQ (%d submissions failed): %w", failed+1, err)
		}
	}
}

// sqeRetries bounds the submissions sqe retries after EAGAIN or EBUSY.
const sqeRetries = 8

// submitSQ is the ring's Submit; tests replace it to make submissions fail.
var submitSQ = (*uring.Ring).Submit

// setAside moves the completions in the CQ, and those the kernel holds
// back (PeekCQEs enters the kernel for them: overflowed ones, deferred task
// work), to aside, where poll handles them before the CQ's. Handling them
// here, in sqe's caller, which may be in the middle of changing what they
// refer to, would not be safe.
func (b *uringBackend) setAside() {
	for {
		b.aside = slices.Grow(b.aside, len(b.cqes))
		got := b.r.PeekCQEs(b.aside[len(b.aside):cap(b.aside)])
		b.aside = b.aside[:len(b.aside)+got]
		if got == 0 {
			return
		}
	}
}

func (b *uringBackend) armWake() {
	b.sqe().PrepPollAdd(b.l.wakeFd, unix.POLLIN, true, udata(opWake, 0, 0))
}

func (b *uringBackend) addListener(s *lnSock) {
	for len(b.lnArmed) <= int(s.index) {
		b.lnArmed = append(b.lnArmed, false)
	}
	b.armAccept(s)
}

func (b *uringBackend) armAccept(s *lnSock) {
	b.sqe().PrepAcceptMultishot(s.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, false, udata(opAccept, s.index, 0))
	b.lnArmed[s.index] = true
	b.inflight++
}

func (b *uringBackend) removeListener(s *lnSock) {
	if !b.lnArmed[s.index] {
		b.l.closeListener(s)
		return
	}
	b.cancel(udata(opAccept, s.index, 0))
}

func (b *uringBackend) cancel(target uint64) {
	b.sqe().PrepCancel(target, 0, udata(opCancel, 0, 0))
	b.inflight++
}

// recvIssueBuffers bounds the buffers one limited multishot receive takes
// (armRecv): at most what one issue of it takes, the first receive and
// MULTISHOT_MAX_RETRY (32) more, less one. A multishot receive armed after
// the peer's reset, on a socket holding more than one issue takes, posts
// the data and never the end on Linux 6.18 (docs/KERNEL-QUIRKS.md); one
// whose limit its first issue reaches ends there, and the next one, armed
// again (handle), takes the rest the same way, the last one finding the
// end. With the default 16 KiB buffers the high-water mark (256 KiB)
// limits receives to 16 buffers already.
const recvIssueBuffers = 32

// armRecv starts receiving on c: a multishot recv on the buffer ring,
// limited where the kernel can (6.17) to what c may still take below the
// high-water mark (recvBudget), so that however late the cancel that
// pauses c is processed, c receives no more than that limit (for an echo:
// nothing past the mark), and to recvIssueBuffers buffers. The limit ends
// the receive (its last CQE without More) and handle arms the next one.
//
// Without the limit, SQPOLL receives single-shot, re-armed after each
// completion: the SQ thread processes the cancel whenever it next runs,
// and until then a multishot recv would keep draining the socket into the
// ring, which copyOffRing keeps refilling (measured: 1 MiB held over a
// 64 KiB high-water mark). Without SQPOLL the cancel is submitted in the
// loop's own enter, before the task work that would post more receives, and
// at most what was already posted arrives after a pause (Config.BatchWait
// widens that to one batched wait).
func (b *uringBackend) armRecv(c *Conn) {
	q := b.sqe()
	if b.sqpoll && !b.recvLimit || c.bits&bitSendFailed != 0 {
		q.PrepRecvBufSelect(c.fd, bufGroup, 0, udata(opRecv, c.slot, c.gen))
	} else {
		q.PrepRecvMultishot(c.fd, bufGroup, false, 0, udata(opRecv, c.slot, c.gen))
		if b.recvLimit {
			q.SetRecvLimit(uint32(min(c.recvBudget(), b.issueBytes)))
		}
	}
	c.k.recv = 1
	c.k.events = b.commits
	c.k.inflight++
	b.inflight++
}

// recvOnce makes c, whose write met the peer's reset (Conn.peerReset),
// receive single-shot from now on: its armed receive is cancelled, and
// re-armed single-shot as it ends (armRecv). A multishot receive may never
// report the end of a reset socket (Linux 6.18, docs/KERNEL-QUIRKS.md,
// uring's TestMultishotRecvAfterReset): one armed after the reset came (as
// a pause cancels c's receive and a resume arms it again) on a socket
// holding more than one issue takes (33 receives) takes the rest in its
// poll's task work, and the receive that empties the socket finds the
// inquiry hint 0 (tcp_inq_hint counts a FIN, not a reset): it waits for
// a wake-up the reset gave before it was armed, so c would wait for
// CloseTimeout (TestPeerReset without the receive limit: "timed out
// waiting for OnClose for reset connections"). One armed when the reset
// comes ends on 6.18.44; which of the two is armed here is not known, so
// it is cancelled either way. A single-shot receive tries the socket at
// each issue and finds its end. One paused by its handler is not re-armed:
// the cancel's completion ends c where nothing is left to deliver
// (handle). Loop goroutine.
func (b *uringBackend) recvOnce(c *Conn) {
	if c.k.recv == 1 && !c.k.closing {
		b.cancel(udata(opRecv, c.slot, c.gen))
		c.k.recv = 2
	}
}

// rearmRecv arms c's receive again (armRecv) where the peer may have reset
// c since its last receive ended: at ResumeRead, at the WriteHighWater
// pause's end, after ENOBUFS (rearm), after a receive cancelled or ended
// by the kernel (handle). Without the limit (before 6.17; SQPOLL receives
// single-shot then) a multishot receive armed after the reset on a socket
// holding more than one issue takes never ends (recvIssueBuffers): c is
// listed for probeReset, which looks at its socket once the receive is
// issued. Loop goroutine.
func (b *uringBackend) rearmRecv(c *Conn) {
	b.armRecv(c)
	if !b.recvLimit && !b.sqpoll && c.bits&bitSendFailed == 0 && !c.unixPeer {
		b.probe = append(b.probe, c)
	}
}

// probeReset submits the receives rearmRecv listed and makes those of
// connections whose peer has reset them (the socket in TCP_CLOSE: the
// reset came before the receive was issued, which then may never end, or
// after, which does no harm) receive single-shot, as after a write's
// failure: c is kept to deliver what its socket holds, then ends with the
// socket's error (Conn.peerReset, recvOnce). Looked at after the issue, a
// reset that comes between the look and the issue cannot be missed. One
// submission per poll that has any, and a getsockopt per such re-arm (not
// per receive). Loop goroutine.
func (b *uringBackend) probeReset() {
	submitSQ(b.r)
	for i, c := range b.probe {
		b.probe[i] = nil
		if c.state != stateOpen || c.k.closing || c.k.recv != 1 || c.bits&bitSendFailed != 0 || !tcpClosed(c.fd) {
			continue
		}
		err := unix.ECONNRESET
		if n, e := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); e == nil && n != 0 {
			err = unix.Errno(n)
		}
		if c.peerReset(c.opError("read", "recv", err)) {
			b.recvOnce(c)
		}
	}
	b.probe = b.probe[:0]
}

func (b *uringBackend) startConn(c *Conn) {
	if c.paused == 0 {
		b.armRecv(c)
	}
}

func (b *uringBackend) dial(c *Conn) {
	b.sqe().PrepPollAdd(c.fd, unix.POLLOUT, false, udata(opConnect, c.slot, c.gen))
	c.k.inflight++
	b.inflight++
}

func (b *uringBackend) setRead(c *Conn, on bool) {
	if c.k.closing {
		return
	}
	// A pause is applied lazily: the armed receive stays, and the first
	// completion that comes while c is paused cancels it (opRecv), its data
	// held until reading resumes (Loop.deliver). So a pause undone before
	// the peer sends anything (an HTTP proxy's client while its response
	// is outstanding, paused and resumed per request) costs no cancel and
	// re-arm, and a paused connection still learns of a reset.
	if on && c.k.recv == 0 {
		b.rearmRecv(c)
	}
	// on with recv == 2: re-armed when the cancelled recv ends.
}

// flush sends the write queue as a chain of linked SENDs, one per segment.
// MSG_WAITALL makes a short send retry inside the kernel, so a link is never
// followed while its segment is incomplete. With SQPOLL the chain is one
// SEND: an SQ thread shared by several rings submits at most 8 SQEs of a ring
// at a time (IORING_SQPOLL_CAP_ENTRIES_VALUE), which would split chains.
func (b *uringBackend) flush(c *Conn) {
	if c.k.sends > 0 && c.bits&bitSendCounted != 0 {
		// Written to, or closing or shutting down, after its queue went
		// out as quiet SENDs that the next wait counts: what is queued
		// now goes only once they have completed, and nothing else may
		// end the wait (the peer waiting for the rest). That wait must
		// end at their completions: they are counted no more.
		c.bits &^= bitSendCounted
		if c.k.sendEpoch == b.epoch {
			b.quiet -= min(b.quiet, uint32(c.k.sends))
		}
	}
	if c.k.sends > 0 && c.bits&(bitSendSkip|bitSendBehind) == bitSendSkip {
		// Written to, or closing or shutting down, behind a lone quiet
		// SEND, which posts no completion if it sends all: what is
		// queued now goes once it is settled, which the loop learns only
		// by looking after an enter (settle). It must not sleep before:
		// the peer may wait for the rest, and nothing else wake it.
		c.bits |= bitSendBehind
		b.behind++
	}
	if c.bits&bitSendFailed != 0 {
		// Sent again, the queue failed with EPIPE and a closing c
		// waited for its receive's end, or, paused, for CloseTimeout.
		c.sendFailedFlush()
		return
	}
	if c.k.sends > 0 || c.k.closing || c.queued == 0 {
		return
	}
	end := min(len(c.wq), int(c.wqHead)+b.maxChain)
	// A chain must reach the kernel in one submission: a split chain is two
	// chains, and their sends could run out of order. Without room for it,
	// and the NOP that ends a quiet one of two SENDs or more, the SQ is
	// submitted first; where that leaves too little (it failed: EAGAIN or
	// EBUSY, which sqe's next submission retries; or the SQ thread has not
	// taken it all yet) the chain is cut to the room there is, one SEND at
	// least (it cannot be split), and the rest goes once it has completed.
	room := uint32(end - int(c.wqHead))
	if b.quietChains && room > 1 {
		room++ // the NOP
	}
	free := b.r.SQEntries() - b.r.SQReady()
	if free < room {
		b.l.st.submits.Add(1)
		submitSQ(b.r)
		free = b.r.SQEntries() - b.r.SQReady()
		end = min(end, int(c.wqHead)+max(int(free), 1))
	}
	flags := unix.MSG_NOSIGNAL | unix.MSG_WAITALL
	c.bits &^= bitSendQuiet | bitSendCounted
	n := end - int(c.wqHead)
	// A chain is quiet only with room for its NOP in the same submission:
	// one the SQ's submission parted from the chain would not be cancelled
	// with it. A lone SEND needs none: it posts no completion if it sends
	// all (FlagCQESkipSuccess), and one if not (the kernel clears the flag
	// of a request it fails: a SEND cut short, its result the bytes sent,
	// or EAGAIN), which, the wait not counting it, ends the wait; settle
	// completes it once the kernel has taken it and every completion
	// posted by then has been handled. That saves the NOP, and the
	// completion and its handling, of each quiet SEND sent whole.
	quiet := (n == 1 || b.quietChains && free > uint32(n)) && b.quietSends(c, int(c.wqHead), end)
	lone := quiet && n == 1
	if quiet {
		flags |= unix.MSG_DONTWAIT
		c.bits |= bitSendQuiet
		if !lone {
			b.quiet += uint32(n)
			c.bits |= bitSendCounted
		}
	}
	for i := int(c.wqHead); i < end; i++ {
		s := c.wq[i]
		buf := c.segBytes(s)
		q := b.sqe()
		if b.zeroCopy(s) {
			// Two CQEs: the result (More), then the notification after
			// which the chunk may be reused. Whether the SEND_ZC is
			// linked to the SEND before it says what a result without
			// More means (handle).
			op := opSendZC
			if i > int(c.wqHead) {
				op = opSendZCLinked
			}
			q.PrepSendZC(c.fd, buf, unix.MSG_NOSIGNAL|unix.MSG_WAITALL, 0, udata(op, c.slot, uint32(s.ref)))
			b.l.chunks.pin(s.ref)
			b.l.st.zcSends.Add(1)
			// Not in inflight: the loop may exit before the
			// notification, which comes when the kernel frees the
			// data and so may wait for a peer that does not read.
			// The kernel keeps the pages (the registered buffer)
			// until then.
		} else {
			q.PrepSend(c.fd, buf, flags, udata(opSend, c.slot, c.gen))
		}
		if lone {
			q.SetFlags(uring.FlagCQESkipSuccess)
			b.listSkip(c, b.r.SQTail()-1, int32(len(buf)))
		}
		if i < end-1 || quiet && !lone {
			q.SetFlags(uring.FlagIOLink)
		}
		c.k.sends++
		c.k.inflight++
		b.inflight++
	}
	if quiet && !lone {
		// The wait counts the quiet SENDs' completions and goes on
		// sleeping past them. A chain cut short (the socket's buffer
		// full: MSG_WAITALL makes a short send fail its link,
		// which quietChains says the kernel does) must end
		// it, or the rest would go only when something else woke the
		// loop: the peer, waiting for the rest, may send nothing more.
		// A NOP linked last posts nothing when every SEND sent all
		// (FlagCQESkipSuccess), and is cancelled with the rest of a
		// cut chain, its completion posted with theirs inside the
		// enter: one more than the wait counts, which ends it. Not in
		// inflight, since it may post nothing.
		q := b.sqe()
		q.PrepNop(udata(opQuietEnd, 0, 0))
		q.SetFlags(uring.FlagCQESkipSuccess)
	}
	c.k.sendEpoch = b.epoch
}

// quietSends reports whether flush may send c's queue, segments from..end,
// as quiet SENDs: MSG_DONTWAIT, so that each completes inside the enter
// that submits it (the kernel does not arm a poll for one that would block:
// it ends with what it sent, or EAGAIN, and the rest of its chain is
// cancelled), and the wait in that enter need not wake for their
// completions (uringBackend.quiet). Only for a queue sent whole, without
// SEND_ZC, when no more than freeing its segments waits for the
// completions: not while a close, a shutdown or the high-water mark waits
// for the queue to drain, not on a connection whose last send was late
// (it would most likely fail, and cost an enter), and not while write
// queues hold more than a quarter of the receive ring: a quiet SEND's
// segments go back only at the loop's next wake-up, and the receives that
// come in the meantime need buffers (with the ring empty they end with
// ENOBUFS, and are armed again). Nor while receives wait for a buffer
// (starved): the buffers these SENDs give back may be the only ones to
// come, and a wait that does not end at their completions would leave
// those receives unarmed until something else woke the loop, if ever
// (those flushed while the loop reaps, before a receive found the ring
// empty, poll does not sleep past).
func (b *uringBackend) quietSends(c *Conn, from, end int) bool {
	if !b.quietOK || c.bits&bitSendLate != 0 || end != len(c.wq) || c.state != stateOpen || c.wantShutWr || c.atMark() || b.l.stopping ||
		b.l.ringHeld > b.cfg.ReadBuffers/4 || len(b.starved) > 0 {
		return false
	}
	return b.zcMin == 0 || !slices.ContainsFunc(c.wq[from:end], b.zeroCopy)
}

// zeroCopy reports whether flush sends segment s with SEND_ZC: SendZCThreshold
// bytes or more of a slab chunk in the registered region.
func (b *uringBackend) zeroCopy(s seg) bool {
	return b.zcMin > 0 && s.ref >= 0 && s.ref < b.zcChunks && int(s.end-s.off) >= b.zcMin
}

// closeConn cancels what refers to c's fd and closes it once nothing does.
func (b *uringBackend) closeConn(c *Conn) {
	if c.k.closing {
		return
	}
	c.k.closing = true
	if c.k.inflight > 0 {
		b.cancelFd(c)
		if c.k.recv == 1 {
			c.k.recv = 2
		}
		return
	}
	b.finish(c)
}

// cancelFd cancels every request on c's fd. The cancel is one of c's
// requests in flight, so that the fd is closed only after the kernel has
// run it: closed before (the requests it was to end completing in the
// meantime), the cancel found no file, or another connection's that had
// been given the number.
//
// A cancel finds the requests armed or running when it runs, not a linked
// SEND whose predecessor has just completed and which the kernel has yet
// to issue (deferred task work): issued after, it waits for a peer that may
// never read again, and c, and a stopping loop, with it. So while sends are
// in flight when the cancel completes, handle cancels again (those it did
// end may still have their completions to come: then the next finds
// nothing).
func (b *uringBackend) cancelFd(c *Conn) {
	b.sqe().PrepCancelFd(c.fd, uring.CancelAll, udata(opCancelFd, c.slot, c.gen))
	c.k.inflight++
	b.inflight++
}

func (b *uringBackend) finish(c *Conn) {
	unix.Close(c.fd)
	b.l.finishClose(c)
}

// done is called when an SQE of c completed for good.
func (b *uringBackend) done(c *Conn) {
	c.k.inflight--
	b.inflight--
	if c.k.closing && c.k.inflight == 0 {
		b.finish(c)
	}
}

func (b *uringBackend) recvBuf(id int32) []byte { return b.br.Buf(uint16(id)) }

func (b *uringBackend) releaseRecv(id int32) {
	b.br.Recycle(uint16(id))
	b.out--
	b.dirty = true
}

func (b *uringBackend) poll(timeout time.Duration) error {
	l := b.l
	if b.broken != nil {
		return b.broken
	}
	if b.dirty {
		b.br.Commit()
		b.commits++
		b.dirty = false
		b.starved = b.rearm(b.starved)
	}
	b.retry = b.rearm(b.retry)
	if len(b.probe) > 0 {
		b.probeReset()
	}
	// Completions set aside are handled after the enter: it must not
	// wait for others. Looked at after the re-arms, whose submissions
	// from a full SQ may set some aside (and with them any quiet SENDs'
	// completions the wait would count). Nor while a connection was
	// written to behind a lone quiet SEND not yet settled (bitSendBehind),
	// or while a completion may wait in the kernel's overflow list. Nor
	// when it submits quiet SENDs while TLS connections wait for a
	// send-slab chunk (Loop.tlsStarved): sleeping past the SENDs, the loop
	// would give their chunks back, and pump those connections
	// (resumeStarved), only at its next wake-up, up to starveRetry later.
	// Likewise while receives wait for a buffer (starved) and write
	// queues may hold receive buffers (WriteBuffer; Loop.ringHeld counts
	// them, and those paused connections hold): quietSends refuses quiet
	// SENDs then, but not those flushed while the loop reaped before a
	// receive found the ring empty (a SEND's completion, or settle, sends
	// the rest of a queue), whose buffers may be the only ones to come
	// back. Not sleeping, it settles them, or handles their completions,
	// first.
	if len(b.aside) > 0 || b.behind > 0 || b.overflowed ||
		(len(l.tlsStarved) > 0 || len(b.starved) > 0 && l.ringHeld > 0) && (b.quiet > 0 || b.skipUnsubmitted()) {
		timeout = 0
	}
	var err error
	want := 0
	if b.batchWait > 0 {
		want = batchWant(b.lastCQEs, len(b.cqes), b.br.Entries()-b.out, int(b.quiet))
	}
	var entered uint64 // for Stats.TimedWaits: a wait the CQ satisfied makes no enter
	if timeout > 0 {
		entered = b.r.EnterCount()
	}
	t0 := l.waitStart()
	switch {
	case timeout == 0 && l.reaping && !b.sqpoll:
		// Every completion that has arrived: an enter that waits for
		// none runs at most 20 items of DEFER_TASKRUN's task work
		// (IO_LOCAL_TW_DEFAULT_MAX, io_cqring_wait, 6.18), one that
		// waits for n runs up to n of them. A timeout passed already:
		// it does not wait for them. (The SQ thread runs the task
		// work of an SQPOLL ring as it comes.)
		_, err = b.r.SubmitAndWait(b.r.CQEntries(), -1)
	case timeout == 0:
		_, err = b.r.SubmitAndWait(0, 0)
	case want > 0:
		// Busy: ask for twice as many as last time, but return once
		// batchWait has passed and one is there.
		_, err = b.r.SubmitAndWaitMin(uint32(want), b.batchWait, max(timeout, 0))
		l.st.batchedWaits.Add(1)
	default:
		// The quiet SENDs' completions, all posted inside this enter,
		// do not end the wait: the next completion does (that of the
		// NOP a cut chain cancels, or of a lone SEND cut, flush), and
		// a lone SEND sent whole posts none. The C server
		// (and this loop before) entered twice per request under light
		// load: once to submit the reply and reap its completion at
		// once, once to sleep.
		if b.quiet > 0 || b.skipUnsubmitted() {
			l.st.quietWaits.Add(1)
		}
		_, err = b.r.SubmitAndWait(1+b.quiet, max(timeout, 0))
	}
	b.quiet = 0
	b.lastCQEs = 0
	l.waited(t0)
	reaping := b.r.EnterCount()
	if timeout > 0 && b.r.EnterCount() != entered {
		l.st.timedWaits.Add(1)
	}
	b.epoch++
	switch {
	case err == nil, errors.Is(err, unix.ETIME), errors.Is(err, unix.EINTR),
		errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EBUSY):
	default:
		return err
	}
	// Reap only what the CQ already holds. Peeking for more would enter
	// the kernel again whenever task work is pending (IORING_SQ_TASKRUN);
	// that work runs instead in the next iteration's enter, together with
	// the sends this iteration queues: one enter per iteration. Those sqe
	// set aside come first: the CQ's came after them. Handling them may set
	// more aside, after them.
	for i := 0; i < len(b.aside); i++ {
		l.st.cqes.Add(1)
		b.lastCQEs++
		b.handle(b.aside[i])
	}
	clear(b.aside)
	b.aside = b.aside[:0]
	for {
		ready := int(min(b.r.CQReady(), uint32(len(b.cqes))))
		if ready == 0 && len(b.aside) == 0 && b.settle(nil) {
			// What settling them flushed may have entered the kernel
			// (a full SQ), and completions come with that.
			continue
		}
		if ready == 0 || len(b.aside) > 0 {
			// Those set aside meanwhile go first, in the next poll.
			if b.r.EnterCount() != reaping {
				// The kernel was entered while the completions were
				// handled (a full SQ submitted, set aside): the quiet
				// SENDs handle prepared before may have completed
				// then and been reaped here already. The next wait
				// must not wait for them: it would not end on one
				// completion (a Post, a timer, Shutdown's wake-up).
				// Those prepared after, not counted, end it early.
				b.quiet = 0
			}
			return nil
		}
		n := b.r.PeekCQEs(b.cqes[:ready])
		l.st.cqes.Add(uint64(n))
		b.lastCQEs += n
		if b.r.CQReady() == 0 {
			b.settle(b.cqes[:n])
		}
		for i := 0; i < n; i++ {
			b.handle(b.cqes[i])
		}
	}
}

// settle completes the lone quiet SENDs the kernel has taken without
// posting a completion: those that sent all. poll calls it once every
// completion posted so far has been handled or is in batch, about to be
// (the CQ empty, none set aside). A lone quiet SEND completes inside the
// enter that takes it (MSG_DONTWAIT), and the kernel posts the completions
// of the requests that did before it moves the SQ head past them
// (uring.Ring.SQConsumed): one cut short posted its completion by then,
// and is in batch or was handled (either takes it off the list), unless
// the CQ was full and its completion waits in the kernel's overflow list.
// Then none is settled, and the next wait does not sleep (overflowed), so
// that it comes; nor once the kernel has dropped a completion, which may
// have been one of theirs (dropCut). Settled before batch is handled, they
// end in the order they did: a receive that came after a reply went is
// handled after it (its handler sees the reply's bytes gone from the
// queue, and its write is sent at once). It reports whether it settled any. Loop goroutine.
func (b *uringBackend) settle(batch []uring.CQE) bool {
	if len(b.skipped) == b.skipHead {
		b.overflowed = false
		return false
	}
	for _, q := range batch {
		if op, slot, gen := udSplit(q.UserData); op == opSend {
			if c := b.l.conn(slot, gen); c != nil && c.bits&bitSendSkip != 0 {
				b.clearSkip(c)
			}
		}
	}
	h, k := b.skipHead, b.skipHead
	for k < len(b.skipped) && b.r.SQConsumed(b.skipped[k].pos) {
		k++
	}
	if k > h && cqDropped(b.r) != b.dropped {
		b.dropCut(b.skipped[h:k])
		return false
	}
	b.overflowed = k > h && b.r.CQOverflowPending()
	if k == h || b.overflowed {
		return false
	}
	// Completing them flushes the queues written behind them, which may
	// list more: after these, which go once all of them are done.
	for i := h; i < k; i++ {
		c := b.skipLive(b.skipped[i])
		if c == nil {
			continue // unlisted: its completion came
		}
		s := b.skipped[i]
		// Sent whole: not cut, though its segment may have grown
		// since (Write fills its chunk) and read as short.
		b.clearSkip(c)
		c.bits &^= bitSendQuiet
		b.l.st.quietSkipped.Add(1)
		b.sendDone(c, s.n, false)
	}
	// Those left move to the front only once the taken make half the
	// list, so that each entry moved stands for one taken: a shift of
	// them at every settle, with a thousand listed and the kernel taking
	// a few per enter, was quadratic.
	b.skipHead = k
	switch {
	case k == len(b.skipped):
		b.skipped, b.skipHead = b.skipped[:0], 0
	case 2*k >= len(b.skipped):
		b.skipped, b.skipHead = b.skipped[:copy(b.skipped, b.skipped[k:])], 0
	}
	return true
}

// dropCut ends the loop for completions the kernel dropped: those it could
// not post, the CQ full, nor keep until it had room (no memory for its
// overflow list); it counts them in the ring's CQ overflow counter, and
// posts nothing. A lone quiet SEND cut short among them is not to be told
// from one sent whole, which posts nothing either: settled as whole, the
// rest of its queue would go after a hole in the stream, to a peer that
// could not tell. So none of those listed the kernel has taken (taken) is
// settled: their connections are reset (RST: the peer sees the
// stream broken, not ended) with an error saying why. Nor can the loop go
// on: the completion of any of its requests may be the one lost (a
// receive's, a cancel's, which it would wait for for ever), and the kernel
// fails its next wait that sleeps (EBADR) for that reason. The ring is
// broken: the next poll returns the error, and the loop closes its other
// connections and stops, saying it. Loop goroutine.
func (b *uringBackend) dropCut(taken []skipSend) {
	n := cqDropped(b.r) - b.dropped
	err := fmt.Errorf("the kernel dropped %d completions (the CQ full, and no memory to keep them): a quiet SEND's among them cannot be told from one sent whole", n)
	for _, s := range taken {
		if c := b.skipLive(s); c != nil {
			c.reset(c.netError("write", err))
		}
	}
	b.broken = err
}

// listSkip lists c's lone quiet SEND of n bytes, its SQE at position pos
// of the SQ, for settle. Loop goroutine; allocates only when the list, or
// skipPos for a slot not seen before, grows.
func (b *uringBackend) listSkip(c *Conn, pos uint32, n int32) {
	if int(c.slot) >= len(b.skipPos) {
		b.skipPos = slices.Grow(b.skipPos, int(c.slot)+1-len(b.skipPos))[:c.slot+1]
	}
	b.skipPos[c.slot] = pos
	b.skipped = append(b.skipped, skipSend{c.slot, c.gen, pos, n})
	c.bits |= bitSendSkip
}

// skipLive returns the connection whose listed SEND s is, nil if s was
// unlisted: its connection closed, its SEND no longer listed, or another
// SEND of it listed since (a cut one's rest went, and a later lone one:
// the position tells them apart). Loop goroutine.
func (b *uringBackend) skipLive(s skipSend) *Conn {
	c := b.l.conn(s.slot, s.gen)
	if c == nil || c.bits&bitSendSkip == 0 || b.skipPos[s.slot] != s.pos {
		return nil
	}
	return c
}

// skipUnsubmitted reports whether a lone quiet SEND waits in the SQ for the
// next enter, for poll: the SQ's state, not a count of those
// prepared since the last enter, which an enter made while the loop reaps
// (a full SQ submitted) would have to clear. The list is in SQ order, and
// an entry whose completion came (unlisted) was taken. Loop goroutine.
func (b *uringBackend) skipUnsubmitted() bool {
	n := len(b.skipped)
	return n > b.skipHead && !b.r.SQConsumed(b.skipped[n-1].pos)
}

// clearSkip says c's lone quiet SEND is no longer in flight: settled, or
// its completion came (cut short, or failed) and it is not to be settled.
// Its entry in skipped is left where it is, which settle drops as it walks
// past it (skipLive): with a thousand listed and many cut, a search and a
// shift for each were quadratic. Loop goroutine.
func (b *uringBackend) clearSkip(c *Conn) {
	if c.bits&bitSendBehind != 0 {
		b.behind--
	}
	c.bits &^= bitSendSkip | bitSendBehind
}

// rearm arms a receive on the connections of list that still want one
// and returns list emptied.
func (b *uringBackend) rearm(list []*Conn) []*Conn {
	for i, c := range list {
		list[i] = nil
		if c.state == stateOpen && c.paused == 0 && c.k.recv == 0 && !c.k.closing {
			b.rearmRecv(c)
		}
	}
	return list[:0]
}

func (b *uringBackend) handle(q uring.CQE) {
	l := b.l
	op, slot, gen := udSplit(q.UserData)
	switch op {
	case opWake:
		l.readWake()
		if !q.More() && l.wakeFd >= 0 {
			b.armWake()
		}
		return
	case opCancel:
		b.inflight--
		return
	case opWakeAt:
		if gen == b.wakeSeq&0xffffff {
			b.wakeArmed = 0
		}
		return
	case opMsg:
		l.st.wakeups.Add(1) // the posted functions run at the top of the loop
		return
	case opQuietEnd:
		// A chain of quiet SENDs was cut: its arrival ended the wait,
		// and the cut SEND's completion, handled too, sends the rest.
		return
	case opMsgSent:
		b.inflight--
		b.msgDone(slot, 1)
		if q.Res < 0 {
			// The wake-up did not arrive (the target ring closed, or its
			// fd now names another file): its posted functions must not
			// wait for the next one, so wake it through its eventfd (a
			// no-op once it has exited).
			l.st.msgRingErrors.Add(1)
			l.e.loops[slot].wake()
		}
		return
	case opAccept:
		s := l.lns[slot]
		if q.Res >= 0 {
			s.backoff, s.failed = 0, false
			l.accepted(int(q.Res), s)
		}
		if !q.More() {
			b.inflight--
			b.lnArmed[slot] = false
			switch {
			case s.done:
				l.closeListener(s)
			case s.ln.closed.Load():
				// Listener.Close shut the socket down; its removal is
				// posted.
			case q.Res < 0 && l.acceptBackoff(s, unix.Errno(-q.Res), func() { b.armAccept(s) }):
				// Out of descriptors, or an error that repeats:
				// accepting again at once would fail again at once.
			default:
				b.armAccept(s)
			}
		}
		return
	}
	if op == opSendZC || op == opSendZCLinked {
		id := int32(gen)
		if q.Notif() {
			if q.ZCCopied() {
				if b.zcUnsent[id] > 0 {
					b.zcUnsent[id]--
				} else {
					l.st.zcCopied.Add(1)
				}
			}
			l.chunks.unpin(id)
			return
		}
		switch {
		case op == opSendZC && !q.More():
			// No notification follows: the kernel could not allocate
			// one (uring.PrepSendZC), and nothing else would give the
			// chunk back.
			l.chunks.unpin(id)
			l.st.zcNoNotif.Add(1)
		case q.Res <= 0:
			// Its notification reports a copy though nothing was sent.
			// A linked SEND_ZC ends without More whenever it fails:
			// cancelled with its chain (ECANCELED), the notification
			// follows; refused when the kernel prepared it (ENOMEM),
			// it may not, which the result does not tell, and the
			// chunk stays pinned rather than risk being given back
			// twice.
			b.zcUnsent[id]++
		}
		op = opSend
		gen = l.slotGen[slot] & 0xffffff
	}
	c := l.conn(slot, gen)
	if c == nil {
		// Cannot happen: a slot is freed only when nothing refers to it.
		return
	}
	switch op {
	case opRecv:
		final := !q.More()
		// Data for a connection already paused (setRead's lazy pause) is
		// held (or dropped, closing), and the receive stopped; a pause its
		// handler makes now is left lazy.
		heldPaused := c.paused != 0
		if final {
			c.k.recv = 0
		}
		switch {
		case q.Res > 0:
			if b.napi && !c.k.napiSeen {
				// A socket's NAPI id is known once data has arrived.
				b.napiAdd(c)
			}
			id, _ := q.BufferID()
			b.out++
			l.deliver(c, int32(id), int(q.Res))
		case c.bits&bitSendFailed != 0 && final && q.Res != -int32(unix.ENOBUFS) && q.Res != -int32(unix.ECANCELED):
			// The socket's end (0: the SEND took its error): after
			// what came before the reset, the SEND's error ends c
			// (Loop.eof). A receive that found the ring empty waits
			// for a buffer, and one cancelled for a pause for
			// ResumeRead, as any other (Conn.peerReset).
			l.eof(c)
		case q.Res == 0:
			l.eof(c)
		case q.Res == -int32(unix.ENOBUFS):
			l.st.noBufs.Add(1)
			switch {
			case c.k.closing:
			case c.k.events != b.commits:
				b.retry = append(b.retry, c)
			default:
				b.starved = append(b.starved, c)
			}
		case q.Res == -int32(unix.ECANCELED):
			if c.bits&bitSendFailed != 0 && c.pausedEmpty() {
				// recvOnce's cancel ended the receive of a c its handler
				// paused, with nothing left to deliver: it ends now, as
				// peerReset ends one with no receive armed, where it
				// waited for ResumeRead or CloseTimeout (a proxy's
				// client, paused while its response is outstanding).
				c.abort(c.err)
			}
		case c.k.closing:
		case c.holding():
			// The peer's reset, met while c is paused with what came
			// before it held (a pause is lazy: the receive went on until
			// its cancel; a TLS connection's transport keeps it):
			// delivered once reading resumes, and the reset's error ends
			// c after it (Conn.peerReset). Ended now, c dropped it
			// (TestPausedResetDeliversHeld).
			if c.peerReset(c.opError("read", "recv", unix.Errno(-q.Res))) {
				l.eof(c)
			}
		default:
			c.abort(c.opError("read", "recv", unix.Errno(-q.Res)))
		}
		if heldPaused && !final && c.k.recv == 1 && !c.k.closing {
			b.cancel(udata(opRecv, c.slot, c.gen))
			c.k.recv = 2
		}
		if final {
			if c.k.recv == 0 && c.state == stateOpen && c.paused == 0 && !c.k.closing && q.Res != -int32(unix.ENOBUFS) {
				b.rearmRecv(c)
			}
			b.done(c)
		}
	case opSend:
		if c.bits&bitSendSkip != 0 {
			b.clearSkip(c)
		}
		b.sendDone(c, q.Res, b.epoch != c.k.sendEpoch+1)
	case opConnect:
		if !c.k.closing {
			l.connected(c)
		}
		b.done(c)
	case opCancelFd:
		// A lone quiet SEND never waits in the kernel: taken before
		// the cancel, it has completed, and its settle or its
		// completion ends it.
		if c.k.sends > 0 && c.bits&bitSendSkip == 0 {
			b.cancelFd(c)
		}
		b.done(c)
	}
}

// sendDone ends a SEND of c that sent res bytes or failed (res < 0), as
// its completion says or, for a lone quiet SEND that sent all, settle;
// late says it did not complete inside the enter that submitted it.
// Loop goroutine.
func (b *uringBackend) sendDone(c *Conn, res int32, late bool) {
	l := b.l
	c.k.sends--
	// Late: not reaped right after the enter that submitted it, or a
	// quiet SEND that could not send it all (EAGAIN, or short, its
	// chain cancelled: flush sends the rest without MSG_DONTWAIT).
	if res != -int32(unix.ECANCELED) {
		// A SEND without MSG_DONTWAIT waits for all of its
		// segment (MSG_WAITALL); the segment may have grown since
		// (Write fills its chunk), which makes no cut.
		cut := c.bits&bitSendQuiet != 0 && (res == -int32(unix.EAGAIN) || res > 0 && sendShort(c, int(res)))
		if cut {
			l.st.quietCut.Add(1)
		}
		if cut || late {
			c.bits |= bitSendLate
		} else {
			c.bits &^= bitSendLate
		}
	}
	l.st.writes.Add(1)
	if res > 0 && c.state != stateClosed {
		c.sent(int(res))
	} else if res < 0 && res != -int32(unix.ECANCELED) && res != -int32(unix.EAGAIN) && !c.k.closing && c.bits&bitSendFailed == 0 {
		// A SEND that met the peer's reset completes within the enter
		// that submits it, before the receive's completion of the same
		// wait: c is kept to deliver what came before the reset
		// (TestWriteFailureDeliversWhatCameBefore), and the receive's
		// end ends it (Conn.peerReset).
		if c.peerReset(c.opError("write", "send", unix.Errno(-res))) {
			b.recvOnce(c)
		}
	}
	if c.k.sends == 0 && c.bits&bitSendFailed != 0 && c.state == stateOpen && c.queued > 0 {
		c.dropWrites() // the chain's last SEND has ended (peerReset)
	}
	if c.k.sends == 0 && !c.k.closing && c.bits&bitSendFailed == 0 {
		if c.queued > 0 {
			b.flush(c)
		} else {
			c.afterDrain()
		}
	}
	b.done(c)
}

// sendShort reports whether a SEND of c's first queued segment sent less
// than the segment (a quiet one that found the socket's buffer full).
func sendShort(c *Conn, n int) bool {
	return int(c.wqHead) < len(c.wq) && n < int(c.wq[c.wqHead].end-c.wq[c.wqHead].off)
}

// napiAdd adds the NAPI id of a socket that has received data to the
// ring's static list. With dynamic tracking the kernel has added it itself
// when the receive polled the socket: it is only counted.
func (b *uringBackend) napiAdd(c *Conn) {
	id, ok := b.l.napiSocket(c)
	if ok && !b.napiIDs[id] {
		if !b.napiStatic || addNAPIID(b.r, id) == nil {
			b.napiIDs[id] = true
			b.l.st.napiIDs.Add(1)
			b.l.waitCPU = true
		}
	}
}
