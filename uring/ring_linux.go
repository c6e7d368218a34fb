package uring

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// Ring is one io_uring instance: its submission and completion queues live in
// memory shared with the kernel. A Ring has one owner goroutine (see the
// package documentation); only the methods documented "Any goroutine" (Fd,
// EnterCount, InterruptCount, the setup and feature queries, the queue sizes)
// may be called from other goroutines, and another goroutine's New may
// attach to it (Config.AttachWQ).
type Ring struct {
	fd         int
	fdPub      atomic.Int32 // fd for Fd, -1 after Close
	enterFd    int          // fd, or the registered ring index
	enterFlags uint32       // IORING_ENTER_REGISTERED_RING when enterFd is an index
	regIndex   int          // registered ring index, -1 if none
	ownerTid   int          // thread New ran on: SINGLE_ISSUER's submitter, and the table holding regIndex
	setup      uint32       // IORING_SETUP_* in effect
	features   uint32       // IORING_FEAT_* reported by the kernel
	// fdMu is held for reading while another ring's setup attaches to fd
	// (Config.AttachWQ), and for writing while Close closes it: so the
	// attach uses this ring's fd, never a number Close has freed and some
	// other file has taken since.
	fdMu sync.RWMutex

	mem      *sys.RingMem
	sqSize   uint32 // SQ entries, fixed at setup
	cqSize   uint32 // CQ entries, fixed at setup
	sqes     []sys.SQE
	sqMask   uint32
	sqTail   uint32 // next SQE to hand out; published to the kernel by flush
	cqes     []sys.CQE
	cqMask   uint32
	tsNext   uint32 // next Timespec slot
	enters   atomic.Uint64
	eintr    atomic.Uint64 // io_uring_enter calls interrupted by a signal and retried (read by tests from other goroutines)
	closed   bool
	bufRings map[uint16]*BufRing

	// tsAfter holds, per Timespec slot, the SQ position (head value) at
	// which the kernel has consumed the SQEs taken just before and just
	// after the slot was handed out: one of them is the SQE using it.
	tsAfter [sys.TimespecSlots]uint32

	napiStatic bool // NAPI registered with static tracking: AddNAPIID may be called

	// cancelHook, when set (by tests), replaces the result of the cancel
	// Close starts with.
	cancelHook func(res int32) int32
	// syncCancelHook, when set (by tests), replaces the result of each
	// IORING_REGISTER_SYNC_CANCEL Close makes.
	syncCancelHook func(err error) error
	// testCloseWait, when set (by tests), replaces the closeWait and
	// sqExitWait constants.
	testCloseWait time.Duration
	// ops has bit op set for every opcode flush has handed to the kernel:
	// the opcodes a request in flight may have, which Close's waitRunning
	// asks about. sqFlushed is the SQ tail flush last published.
	ops       [4]uint64
	sqFlushed uint32
	// sqThread is the id of the SQ thread of an SQPoll ring (0 if
	// unknown), counted in sqThreads while the ring is open.
	sqThread int
}

// closeWait bounds how long Close waits for the kernel to confirm that no
// request is left in flight: for the cancel to complete, then for the
// requests it reached while they ran in io-wq to end. It is wall time, in
// which Close's thread may not run at all on a loaded host (2.7s in one
// cancel, at a load of about 14 on 2 CPUs), so Close asks once more after
// it before it gives up.
const closeWait = time.Second

// sqExitWait bounds how long Close of an SQPoll ring waits, once it has
// closed the ring fd, for the SQ thread to exit. The kernel (6.18) tears
// the ring down only then, on a workqueue (io_ring_exit_work): it waits for
// every request of the ring to end, then for each thread that used the ring
// (its creator among them) to run a task work, frees the ring, and only
// then stops the SQ thread (io_put_sq_data), which cancels what is left in
// its io-wq and waits for its workers to exit. Each step waits for a thread
// to be scheduled; on a host with a load of 7 to 26 on 2 CPUs the whole took
// longer than a second. A request stuck in the SQ thread's io-wq and a
// teardown still waiting its turn look alike from here (the SQ thread
// idles and the teardown's worker runs in both), so this bound is all that
// ends the wait of a Close the kernel will not confirm.
const sqExitWait = 10 * time.Second

// leftBytes counts the bytes of provided buffers Close left mapped because
// the kernel did not confirm its cancel (BufRing.abandon).
var leftBytes atomic.Int64

// LeftMappedBytes returns how many bytes of provided buffer memory Ring.Close
// has left mapped in this process because the kernel did not confirm the
// cancel of the requests in flight (see Close). Any goroutine.
func LeftMappedBytes() int64 { return leftBytes.Load() }

// New creates a ring. A nil cfg means defaults. The goroutine calling New
// becomes the owner (see the package documentation). Invalid configurations
// fail Validate; setup flags this kernel lacks give an
// *UnsupportedFeatureError.
func New(cfg *Config) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	var p sys.Params
	// SUBMIT_ALL (5.18): an SQE that fails early does not stop the rest of
	// the batch; it just completes with its error.
	p.Flags = sys.IORING_SETUP_CQSIZE | sys.IORING_SETUP_CLAMP | sys.IORING_SETUP_SUBMIT_ALL
	p.CQEntries = c.CQEntries
	if c.SingleIssuer {
		p.Flags |= sys.IORING_SETUP_SINGLE_ISSUER
	}
	if c.DeferTaskrun {
		p.Flags |= sys.IORING_SETUP_DEFER_TASKRUN
	}
	if c.CoopTaskrun {
		p.Flags |= sys.IORING_SETUP_COOP_TASKRUN
	}
	if (c.DeferTaskrun || c.CoopTaskrun) && !c.NoTaskrunFlag {
		p.Flags |= sys.IORING_SETUP_TASKRUN_FLAG
	}
	if c.SQPoll {
		p.Flags |= sys.IORING_SETUP_SQPOLL
		if c.SQAffinity {
			p.Flags |= sys.IORING_SETUP_SQ_AFF
			p.SQThreadCPU = uint32(c.SQThreadCPU)
		}
		// Whole milliseconds, rounded up: 0 would be the kernel's 1 s.
		p.SQThreadIdle = sys.CeilUnits(c.SQThreadIdle, time.Millisecond, math.MaxUint32)
	}
	fd, err := setup(c.Entries, &p, c.AttachWQ)
	if errors.Is(err, os.ErrClosed) {
		return nil, err
	}
	if err == unix.EINVAL {
		p2 := p
		p2.Flags &^= sys.IORING_SETUP_SUBMIT_ALL
		if fd, err = setup(c.Entries, &p2, c.AttachWQ); err == nil {
			p = p2
		}
	}
	if err != nil {
		return nil, setupError(p.Flags, p.SQThreadCPU, err)
	}
	r := &Ring{fd: fd, enterFd: fd, regIndex: -1, ownerTid: unix.Gettid(), setup: p.Flags, features: p.Features}
	r.fdPub.Store(int32(fd))
	if r.mem, err = sys.MapRing(fd, &p); err != nil {
		unix.Close(fd)
		return nil, err
	}
	r.sqes, r.sqMask, r.sqSize = r.mem.SQEs, r.mem.SQMask, r.mem.SQEntries
	r.cqes, r.cqMask, r.cqSize = r.mem.CQEs, r.mem.CQMask, r.mem.CQEntries
	if p.Flags&sys.IORING_SETUP_SQPOLL != 0 {
		// For Close, which waits for the SQ thread to exit. Unknown (0),
		// Close cannot confirm.
		if tid, err := sqThreadOf(fd); err == nil {
			r.sqThread = tid
			sqThreads.add(tid)
		}
	}
	// Identity SQ index array, written once: SQE slot i is always array
	// entry i, so submission only moves the tail.
	for i := range r.mem.SQArray {
		r.mem.SQArray[i] = uint32(i)
	}
	if c.RegisterRingFD {
		idx, err := sys.RegisterRingFd(fd)
		if err != nil {
			r.Close()
			// EINVAL: no such opcode (before 5.18). EBUSY: the thread
			// has 16 rings registered already.
			return nil, regErr("IORING_REGISTER_RING_FDS", "5.18", err)
		}
		r.regIndex, r.enterFd, r.enterFlags = idx, idx, sys.IORING_ENTER_REGISTERED_RING
	}
	return r, nil
}

// setupError explains a failed io_uring_setup of flags with the SQ thread on
// sqCPU (SQ_AFF). For EINVAL it retries each requested flag alone (with the
// flags it needs), SQ_AFF with the thread on a CPU the caller may run on
// (the kernel refuses one outside its cpuset, as CPU 0 in a container
// pinned to others): a flag that fails alone is unsupported by this kernel
// (*UnsupportedFeatureError); if each works alone the combination, or the
// SQ thread's CPU, is invalid, and SQThreadCPUError says what is wrong
// with the CPU where it can.
func setupError(flags, sqCPU uint32, err error) error {
	serr := os.NewSyscallError("io_uring_setup", err)
	if errors.Is(err, unix.ENOSYS) {
		return unsupported("io_uring", "5.1", serr)
	}
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("io_uring disabled (kernel.io_uring_disabled or seccomp): %w", serr)
	}
	if !errors.Is(err, unix.EINVAL) {
		return serr
	}
	for i := len(setupFlags) - 1; i >= 0; i-- {
		f := setupFlags[i]
		if flags&f.flag == 0 {
			continue
		}
		if f.flag == sys.IORING_SETUP_ATTACH_WQ {
			continue // needs a valid wq_fd; judged by the other flags
		}
		p := sys.Params{Flags: f.flag | f.needs, CQEntries: 8}
		if f.flag == sys.IORING_SETUP_SQ_AFF {
			if cpus, err := sys.AllowedCPUs(); err == nil && len(cpus) > 0 {
				p.SQThreadCPU = uint32(cpus[0])
			}
		}
		fd, e := sys.Setup(4, &p)
		if e == nil {
			unix.Close(fd)
			continue
		}
		if e == unix.EINVAL {
			return unsupported(f.name, f.min, serr)
		}
	}
	if flags&sys.IORING_SETUP_SQ_AFF != 0 {
		if err := SQThreadCPUError(int(sqCPU)); err != nil {
			return fmt.Errorf("%v: %w", err, serr)
		}
		return fmt.Errorf("invalid io_uring setup flag combination %#x, or SQ thread CPU %d (offline, or outside the cpuset): %w", flags, sqCPU, serr)
	}
	return fmt.Errorf("invalid io_uring setup flag combination %#x: %w", flags, serr)
}

func unsupported(feature, min string, err error) error {
	return &UnsupportedFeatureError{Feature: feature, MinKernel: min, Err: err}
}

// Close cancels the requests still in flight, waits for those already
// running to end, closes the ring fd and unmaps the rings, then closes the
// provided buffer rings still open. Completions not yet reaped are
// discarded. Cancelling first keeps an armed multishot receive from picking
// a buffer Close is about to unmap; waiting keeps a request that has picked
// one from writing into it once unmapped.
//
// Close first cancels every request (IORING_OP_ASYNC_CANCEL, CancelAny |
// CancelAll). A request already running in an io-wq worker (a blocking file
// read forced there with FlagAsync, say) can only be asked to stop, and the
// kernel (6.18) counts it as cancelled all the same. So Close then asks,
// for every opcode the ring has submitted, IORING_REGISTER_SYNC_CANCEL keyed
// on the opcode (6.6), which waits in the kernel while a request with it is still
// running, until none is left. Both steps together wait at most a second;
// past it Close still looks for the cancel's completion and asks about each
// opcode once more without waiting, as the second may have passed while
// its thread did not run (on a loaded host), and only the kernel's answers
// say that a request is still in flight.
//
// Before 6.6 (no sync cancel keyed on an opcode) Close cannot wait for a
// request running in io-wq and takes the cancel's count as confirmation:
// reap such requests before Close there.
//
// A request linked behind one running in io-wq starts in the same worker
// as that one ends, and between the two the kernel shows neither running
// (6.18, io_worker_handle_work): a sync cancel landing there finds none,
// and so may Close's last look. A head that Close's cancel ends fails and
// cancels a FlagIOLink successor, but one that ends on its own just then,
// or a FlagIOHardlink, starts the next. Do not link a buffer-selecting
// request behind one forced into io-wq, or reap such chains before Close.
//
// With SQPoll the requests run in the io-wq of the SQ thread, which neither
// sync cancel nor a cancel SQE sees (6.18: -ENOENT while one runs). So
// Close of an SQPoll ring with buffer rings waits, after closing the ring
// fd, until the SQ thread has exited (/proc/self/task), which it does once
// every request of the ring has ended and its io-wq workers with them.
// That wait has a bound of its own, ten seconds from the close of the fd:
// the kernel tears the ring down only after the close, and on a loaded host
// takes longer than a second to get to the SQ thread (see sqExitWait). The
// SQ thread of rings attached to one another (AttachWQ) exits only with
// the last of them: Close of the others cannot wait for their io-wq
// requests and, as before 6.6, takes the cancel's count as confirmation;
// reap such requests before Close there.
//
// If the kernel does not confirm (the cancel could not be submitted or did
// not complete, or failed: -EALREADY, or -EINVAL from a kernel without
// IORING_ASYNC_CANCEL_ANY; a request was still running after the second;
// the sync cancel failed; the SQ thread was still there after its ten
// seconds), a request may still
// pick or hold a provided buffer after Close and write into its address;
// unmapped, that address could be taken by a new mapping and the write land
// in unrelated memory. Close then leaves the buffers of its buffer rings
// mapped for the life of the process (counted by LeftMappedBytes), closes
// everything else, and returns an error that wraps ErrCancelUnconfirmed and
// says why and how many bytes it left. Requests the kernel can neither
// cancel nor sees running in io-wq are not waited for.
//
// With SingleIssuer or RegisterRingFD, Close must run on the thread that
// called New: on another it returns an error (EEXIST) and closes nothing,
// the ring staying usable from its owner. With SingleIssuer the kernel
// refuses the cancel from any other thread, so the requests would stay armed
// on buffers Close unmaps; with RegisterRingFD the owner thread's table
// holds the ring (and would keep it alive, requests armed). Calling Close
// twice returns os.ErrClosed.
//
// Owner goroutine.
func (r *Ring) Close() error { return r.close(-1) }

// CloseOnto is Close, except that the ring's fd number is not freed: it is
// made to name fd's file instead (dup3, close-on-exec), fd being another
// open file that is not a ring (an eventfd, say), and stays the caller's to
// close. Closed, the number may be taken by any new file of the process, so
// a MSG_RING another ring prepared with it (PrepMsgRing with Fd's value),
// which the kernel looks the number up for only as it is submitted, would
// post its completion into whatever ring took it; onto fd's file it fails
// with -EBADFD instead. Close the number, Fd's value before the call, once
// no such SQE is left. fd itself stays open.
//
// Should dup3 fail, the number stays the ring's own, and with it the ring
// (its requests cancelled, its memory unmapped) and its SQ thread, until
// the caller closes it: CloseOnto says so in its error, and with SQPoll and
// buffer rings leaves the buffers mapped (ErrCancelUnconfirmed), as it
// cannot wait for the SQ thread's exit.
//
// Owner goroutine.
func (r *Ring) CloseOnto(fd int) error { return r.close(fd) }

// close is Close, with the fd number made to name onto's file (CloseOnto)
// unless onto is negative.
func (r *Ring) close(onto int) error {
	if r.closed {
		return os.ErrClosed
	}
	if tid := unix.Gettid(); tid != r.ownerTid {
		if r.regIndex >= 0 {
			return fmt.Errorf("uring: Close on thread %d, but the ring is registered with thread %d (RegisterRingFD): %w", tid, r.ownerTid, unix.EEXIST)
		}
		if r.setup&sys.IORING_SETUP_SINGLE_ISSUER != 0 {
			return fmt.Errorf("uring: Close on thread %d, but thread %d is the ring's single issuer (SingleIssuer): %w", tid, r.ownerTid, unix.EEXIST)
		}
	}
	wait := closeWait
	if r.testCloseWait > 0 {
		wait = r.testCloseWait
	}
	deadline := time.Now().Add(wait)
	res := r.cancelAll(deadline)
	if r.cancelHook != nil {
		res = r.cancelHook(res)
	}
	var why string // why the kernel did not confirm; "" if it did
	if res >= 0 || res == -int32(unix.ENOENT) {
		why = r.waitRunning(deadline, wait)
	} else {
		why = cancelResult(res, wait)
	}
	// With SQPoll, the exit of the SQ thread says that no request runs in
	// its io-wq, unless another open ring shares it.
	waitSQ := false
	if r.setup&sys.IORING_SETUP_SQPOLL != 0 {
		shared := r.sqThread != 0 && sqThreads.release(r.sqThread)
		waitSQ = !shared && why == "" && len(r.bufRings) > 0
		if waitSQ && r.sqThread == 0 {
			waitSQ, why = false, "the SQ thread to wait for is unknown: no SqThread in the ring's fdinfo at New"
		}
	}
	r.closed = true
	var first error
	if r.regIndex >= 0 {
		if err := sys.UnregisterRingFd(r.fd, r.regIndex); err != nil {
			first = os.NewSyscallError("io_uring_register", err)
		}
	}
	if r.mem != nil {
		if err := r.mem.Unmap(); err != nil && first == nil {
			first = err
		}
	}
	// The fd number may be reused by any file once closed: every path to
	// r.fd checks r.closed first, Fd reports -1, and a ring being set up
	// to attach to this one holds fdMu. Made to name onto's file, the
	// number drops the ring's file as a close does.
	r.fdMu.Lock()
	var err error
	if onto < 0 {
		err = os.NewSyscallError("close", unix.Close(r.fd))
	} else if err = unix.Dup3(onto, r.fd, unix.O_CLOEXEC); err != nil {
		err = fmt.Errorf("the ring's fd stays open, and the ring with it, until the caller closes it: %w", os.NewSyscallError("dup3", err))
		if waitSQ {
			waitSQ, why = false, "the SQ thread stays while the ring's fd is open (dup3 failed)"
		}
	}
	r.fdPub.Store(-1)
	r.fdMu.Unlock()
	if err != nil && first == nil {
		first = err
	}
	if waitSQ {
		exitWait := sqExitWait
		if r.testCloseWait > 0 {
			exitWait = r.testCloseWait
		}
		why = waitExit(r.sqThread, exitWait)
	}
	confirmed := why == ""
	// Last: no request of this ring can select from them any more, unless
	// the cancel did not reach it.
	var kept int64
	for _, b := range r.bufRings {
		if !confirmed {
			kept += b.abandon()
			continue
		}
		if err := b.Close(); err != nil && first == nil {
			first = err
		}
	}
	if !confirmed {
		err := fmt.Errorf("uring: Close: %w (%s): %d bytes of provided buffers left mapped, as a request may still write into them",
			ErrCancelUnconfirmed, why, kept)
		return errors.Join(err, first)
	}
	return first
}

// cancelResult describes a result of cancelAll that does not confirm the
// cancel (-1 is its own, or -EPERM).
func cancelResult(res int32, wait time.Duration) string {
	if res == -1 {
		return fmt.Sprintf("cancel not submitted, or no completion within %v", wait)
	}
	return fmt.Sprintf("cancel res %d: %v", res, unix.Errno(-res))
}

// syncCancelSlice bounds each IORING_REGISTER_SYNC_CANCEL of waitRunning.
// With DeferTaskrun the end of a request running in io-wq is posted as task
// work for the owner, which does not wake a sync cancel waiting for it (Linux
// 6.18): the call waits out its timeout, and the next one finds the request
// gone.
const syncCancelSlice = 10 * time.Millisecond

// waitRunning waits, up to deadline, until no request of the ring is
// running in an io-wq worker, and returns "" then, or why it could not
// tell. The cancel of every request completes with a count even while such
// a request still runs (see TestCancelAnyMissesRunningRequest), and so does
// IORING_REGISTER_SYNC_CANCEL with CancelAny; keyed on an opcode instead
// (IORING_ASYNC_CANCEL_OP, 6.6), it finds a running request with that
// opcode (-EALREADY in the kernel) and waits until it ends. waitRunning asks
// for each opcode the ring has submitted (r.ops: a request with another one
// cannot be in flight) until none is left (-ENOENT), and asks them all again
// when it found one: a request that ends may start the one linked after it.
func (r *Ring) waitRunning(deadline time.Time, wait time.Duration) string {
	for {
		found := false
		for op := 0; op < 256; op++ {
			if r.ops[op>>6]&(1<<(op&63)) == 0 {
				continue
			}
			for {
				// Past the deadline the kernel is asked once more, without
				// waiting: the deadline may have passed while this thread
				// did not run, and only its answer says a request runs.
				left := max(time.Until(deadline), 0)
				reg := sys.SyncCancelReg{Flags: sys.IORING_ASYNC_CANCEL_OP, Opcode: uint8(op)}
				(*Timespec)(&reg.Timeout).Set(min(left, syncCancelSlice))
				err := sys.SyncCancel(r.fd, &reg)
				if r.syncCancelHook != nil {
					err = r.syncCancelHook(err)
				}
				if err == unix.ENOENT {
					// None left with op. It may have been running: the
					// kernel asks it to stop, then looks again (6.18), and
					// if it ended in between says ENOENT. It has ended
					// either way.
					break
				}
				switch err {
				case nil, unix.ETIME, unix.EINTR:
					// nil: cancelled one not yet running, or the running
					// one ended; ETIME: still running; EINTR: a signal.
					// Look again, unless the deadline has passed.
					found = true
					if left == 0 {
						return fmt.Sprintf("a request with opcode %d still running in io-wq after %v", op, wait)
					}
				case unix.EINVAL:
					// No sync cancel keyed on an opcode (before 6.6):
					// nothing to wait with. The cancel's count stands, as
					// it does for requests the kernel neither cancels nor
					// runs in io-wq; refusing it would leave the buffers
					// of every Close mapped on these kernels, for the one
					// case of a buffer-selecting request forced into
					// io-wq.
					return ""
				default:
					return fmt.Sprintf("IORING_REGISTER_SYNC_CANCEL of opcode %d: %v", op, err)
				}
			}
		}
		if !found {
			return ""
		}
	}
}

// sqThreadOf returns the id of the SQ thread of the SQPoll ring fd, from
// its fdinfo ("SqThread:"). Until the thread has started, that field holds
// the id of the thread that created the ring (6.18, io_sq_thread), so
// sqThreadOf waits until it names a thread called "iou-sqp-...": for
// microseconds as a rule, but on a host whose CPUs are all busy the new
// thread may wait its turn to run for longer than 100ms (seen under a
// loaded CI run), so for up to a second.
func sqThreadOf(fd int) (int, error) {
	info := fmt.Sprintf("/proc/self/fdinfo/%d", fd)
	for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Microsecond) {
		b, err := os.ReadFile(info)
		if err != nil {
			return 0, fmt.Errorf("the SQ thread to wait for: %v", err)
		}
		id := 0
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "SqThread:"); ok {
				id, _ = strconv.Atoi(strings.TrimSpace(v))
				break
			}
		}
		if id > 0 && isSQThread(id) {
			return id, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no SQ thread in the ring's fdinfo (SqThread %d)", id)
		}
	}
}

// isSQThread reports whether thread tid of this process is an SQ thread.
func isSQThread(tid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/comm", tid))
	return err == nil && strings.HasPrefix(string(b), "iou-sqp-")
}

// sqThreadUsers counts the open SQPoll rings of each SQ thread: rings
// attached to another's (AttachWQ) share its SQ thread, which exits only
// once they are all closed.
type sqThreadUsers struct {
	mu    sync.Mutex
	users map[int]int
}

var sqThreads = sqThreadUsers{users: map[int]int{}}

// add counts an open ring of SQ thread tid.
func (u *sqThreadUsers) add(tid int) {
	u.mu.Lock()
	u.users[tid]++
	u.mu.Unlock()
}

// release uncounts a closed ring of SQ thread tid and reports whether
// other open rings still share it.
func (u *sqThreadUsers) release(tid int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.users[tid]--; u.users[tid] > 0 {
		return true
	}
	delete(u.users, tid)
	return false
}

// waitExit waits, up to wait, until the SQ thread tid of this process has
// exited (its id gone, or taken by another thread), and returns "" then, or
// why not. It looks every millisecond at first, then less often, up to every
// 10ms: a long wait is one on a loaded host, where reading /proc takes CPU
// time the exit needs.
func waitExit(tid int, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; isSQThread(tid); pause = min(2*pause, 10*time.Millisecond) {
		if !time.Now().Before(deadline) {
			return fmt.Sprintf("the SQ thread %d (whose io-wq may run a request) still there %v after the ring fd was closed", tid, wait)
		}
		time.Sleep(pause)
	}
	return ""
}

// setup calls io_uring_setup, attached to other's SQPOLL thread and io-wq
// when other is not nil (IORING_SETUP_ATTACH_WQ). It holds other's fd open
// meanwhile: other may be closed by its own goroutine at the same time, and
// is then reported closed (os.ErrClosed) instead of its freed fd number
// being used.
func setup(entries uint32, p *sys.Params, other *Ring) (int, error) {
	if other == nil {
		return sys.Setup(entries, p)
	}
	other.fdMu.RLock()
	defer other.fdMu.RUnlock()
	wq := other.fdPub.Load()
	if wq < 0 {
		return -1, fmt.Errorf("uring: Config.AttachWQ: %w", os.ErrClosed)
	}
	p.Flags |= sys.IORING_SETUP_ATTACH_WQ
	p.WQFd = uint32(wq)
	return sys.Setup(entries, p)
}

// cancelAll cancels every request in flight and waits up to deadline for
// the cancel's completion, discarding the completions it reaps. It returns
// the cancel's result: the number of requests cancelled, or a negative errno
// (-1 when the cancel could not be submitted or did not complete).
func (r *Ring) cancelAll(deadline time.Time) int32 {
	s := r.GetSQE()
	for s == nil {
		// SQ full: submit to make room, and again until there is some.
		// With SQPoll, Submit waits for the SQ thread to free a slot
		// (IORING_ENTER_SQ_WAIT), but a signal ends that wait early, the
		// SQ still full, and the kernel reports no EINTR for it.
		_, err := r.Submit()
		switch {
		case err == unix.EAGAIN || err == unix.EBUSY:
			r.ForEachCQE(func(CQE) bool { return true }) // make room
		case err != nil:
			return -1
		}
		if s = r.GetSQE(); s == nil && !time.Now().Before(deadline) {
			return -1
		}
	}
	s.PrepCancel(0, CancelAny|CancelAll, CloseUserData)
	// The cancel is submitted and its completion looked for at least once
	// after the deadline too: the deadline may have passed while this
	// thread did not run (for seconds on a loaded host), and the kernel
	// completes the cancel as it is submitted.
	res := int32(-1)
	for done := false; !done; {
		left := time.Until(deadline)
		if _, err := r.SubmitAndWait(1, min(max(left, time.Nanosecond), 50*time.Millisecond)); err != nil && err != unix.ETIME {
			return -1
		}
		r.ForEachCQE(func(c CQE) bool {
			if c.UserData == CloseUserData {
				res, done = c.Res, true
			}
			return true
		})
		if left <= 0 {
			break
		}
	}
	return res
}

// Fd returns the ring's file descriptor, for PrepMsgRing from another ring or
// for Config.AttachWQ; -1 once Close has closed it. Any goroutine (a
// goroutine racing with Close may still get the old number).
func (r *Ring) Fd() int { return int(r.fdPub.Load()) }

// SetupFlags returns the IORING_SETUP_* flags in effect. Any goroutine.
func (r *Ring) SetupFlags() uint32 { return r.setup }

// KernelFeatures returns the IORING_FEAT_* flags reported by setup. Any
// goroutine.
func (r *Ring) KernelFeatures() uint32 { return r.features }

// EnterCount returns the number of io_uring_enter calls made. Any goroutine.
func (r *Ring) EnterCount() uint64 { return r.enters.Load() }

// InterruptCount returns the number of io_uring_enter calls a signal
// interrupted (EINTR; the ring retried them). For a Go program these are
// mostly the runtime's preemption requests. Any goroutine.
func (r *Ring) InterruptCount() uint64 { return r.eintr.Load() }

// SQEntries returns the SQ size.
//
// Any goroutine.
func (r *Ring) SQEntries() uint32 { return r.sqSize }

// CQEntries returns the CQ size.
//
// Any goroutine.
func (r *Ring) CQEntries() uint32 { return r.cqSize }

// GetSQE returns the next free SQE, zeroed, or nil when the SQ is full (then
// Submit and retry) or the ring is closed. Owner goroutine; does not
// allocate.
func (r *Ring) GetSQE() *SQE {
	if r.closed {
		return nil
	}
	head := r.sqHead()
	if r.sqTail-head >= r.sqSize {
		return nil
	}
	s := &r.sqes[r.sqTail&r.sqMask]
	*s = sys.SQE{}
	r.sqTail++
	return (*SQE)(s)
}

// SQReady returns the number of SQEs prepared but not yet consumed by the
// kernel (0 after Close). Owner goroutine.
func (r *Ring) SQReady() uint32 {
	if r.closed {
		return 0
	}
	return r.sqTail - r.sqHead()
}

// SQTail returns the SQ position the next SQE GetSQE hands out takes: the
// one it handed out last is at SQTail()-1. With SQConsumed it tells when
// the kernel has taken a given SQE. Owner goroutine.
func (r *Ring) SQTail() uint32 { return r.sqTail }

// SQConsumed reports whether the kernel has consumed the SQE at position
// pos (SQTail): the SQ head has passed it. Without SQPoll the kernel
// consumes SQEs only inside this ring's io_uring_enter calls, and issues
// each there; it moves the head after the completions of the requests
// that completed at once are posted (io_submit_sqes, 6.18: its
// io_submit_state_end, then io_commit_sqring), so once the head has passed
// an SQE whose request completed at once, its completion is in the CQ, or
// in the overflow list (CQOverflowPending), or was not posted at all
// (FlagCQESkipSuccess). A position more than 2^31 SQEs behind the head
// reads as not consumed. Owner goroutine.
func (r *Ring) SQConsumed(pos uint32) bool {
	if r.closed {
		return false
	}
	return int32(r.sqHead()-pos) > 0
}

// CQOverflowPending reports whether the kernel holds completions that found
// the CQ full (IORING_SQ_CQ_OVERFLOW): they reach the CQ at the next enter
// that reaps (PeekCQEs, a wait) with room for them. Owner goroutine.
func (r *Ring) CQOverflowPending() bool {
	if r.closed {
		return false
	}
	return r.mem.SQFlags.Load()&sys.IORING_SQ_CQ_OVERFLOW != 0
}

// The four accessors below are the only places that touch the shared ring
// indexes. Go's sync/atomic loads and stores are sequentially consistent,
// hence at least acquire and release; each comment names the kernel side
// (io_uring/io_uring.c, 6.18) it pairs with.

// sqHead loads the SQ head the kernel advances. Acquire: pairs with the
// kernel's smp_store_release of sq.head in io_commit_sqring, so a slot below
// it is no longer read by the kernel and may be reused.
func (r *Ring) sqHead() uint32 { return r.mem.SQHead.Load() }

// publishSQTail stores the SQ tail. Release: pairs with the kernel's
// smp_load_acquire of sq.tail in io_sqring_entries, so the SQE contents
// written before are visible to the kernel once it sees the tail. Being
// sequentially consistent, it is also the smp_mb the SQPOLL protocol needs
// between this store and reading IORING_SQ_NEED_WAKEUP: it pairs with the
// smp_mb__after_atomic in io_sq_thread (io_uring/sqpoll.c) between setting
// the flag and its last look at the SQ tail, so either the thread sees our
// tail or we see the flag and wake it.
func (r *Ring) publishSQTail() { r.mem.SQTail.Store(r.sqTail) }

// cqTail loads the CQ tail the kernel advances. Acquire: pairs with the
// kernel's smp_store_release of cq.tail in io_commit_cqring, so the CQE
// contents up to it are visible.
func (r *Ring) cqTail() uint32 { return r.mem.CQTail.Load() }

// cqHead loads the CQ head, which only this ring's owner writes.
func (r *Ring) cqHead() uint32 { return r.mem.CQHead.Load() }

// releaseCQ stores the CQ head. Release: our reads of the CQEs below head
// happen before the store; the kernel reads cq.head with READ_ONCE when it
// computes free CQ space (__io_cqring_events) and, through the control
// dependency, writes a slot only after seeing it released.
func (r *Ring) releaseCQ(head uint32) { r.mem.CQHead.Store(head) }

// flush records the opcodes of the prepared SQEs in r.ops, publishes them
// and returns how many the kernel has not consumed yet.
func (r *Ring) flush() uint32 {
	for t := r.sqFlushed; t != r.sqTail; t++ {
		op := r.sqes[t&r.sqMask].Opcode
		r.ops[op>>6] |= 1 << (op & 63)
	}
	r.sqFlushed = r.sqTail
	r.publishSQTail()
	return r.sqTail - r.sqHead()
}

// cqNeedsEnter reports that completions may be held in the kernel:
// overflowed CQEs waiting for room, or (COOP/DEFER_TASKRUN) task work to
// run, which without TASKRUN_FLAG (Config.NoTaskrunFlag) the kernel does not
// flag.
func (r *Ring) cqNeedsEnter() bool {
	const taskrun = sys.IORING_SETUP_COOP_TASKRUN | sys.IORING_SETUP_DEFER_TASKRUN
	if r.setup&taskrun != 0 && r.setup&sys.IORING_SETUP_TASKRUN_FLAG == 0 {
		return true
	}
	return r.mem.SQFlags.Load()&(sys.IORING_SQ_CQ_OVERFLOW|sys.IORING_SQ_TASKRUN) != 0
}

// Submit hands prepared SQEs to the kernel and returns how many it consumed
// (with SQPoll: how many it handed to the SQ thread, which consumes them
// later).
// It makes no system call when there is nothing to submit and no completion
// work is pending (with SQPoll: unless the SQ thread sleeps; with
// NoTaskrunFlag the ring cannot tell, and enters). EINTR is
// retried. EBUSY/EAGAIN (the kernel cannot accept more before completions are
// reaped) are returned as unix.Errno; reap with PeekCQEs and submit again.
// Linux 6.18 returns neither for a CQ overflow, however long the overflow
// list (TestCQOverflow queues 64k): they remain for older kernels and for
// request allocation failures. Owner goroutine; does not allocate.
func (r *Ring) Submit() (int, error) {
	return r.enter(0, 0, 0, false)
}

// SubmitAndWait submits and waits until at least waitNr completions are
// ready (a waitNr above CQEntries: until the CQ is full) or timeout passes
// (0: no timeout; negative: passed already, so it only submits and
// collects; EXT_ARG timeouts, 5.11). When the timeout passes first it
// returns unix.ETIME. A wait interrupted by a signal
// is resumed for what is left of the timeout. It returns the number of SQEs
// consumed, as Submit does. Where the kernel refuses the SQEs (EAGAIN,
// EBUSY) with no completion ready, it waits for one only, leaving them
// queued: those waitNr counts of theirs cannot come. Owner goroutine; does
// not allocate.
func (r *Ring) SubmitAndWait(waitNr uint32, timeout time.Duration) (int, error) {
	return r.enter(waitNr, timeout, 0, true)
}

// HasMinWait reports whether the kernel takes SubmitAndWaitMin's minimum
// wait (IORING_FEAT_MIN_TIMEOUT). Any goroutine.
func (r *Ring) HasMinWait() bool { return r.features&sys.IORING_FEAT_MIN_TIMEOUT != 0 }

// SubmitAndWaitMin is SubmitAndWait with a minimum wait (min_wait_usec,
// IORING_FEAT_MIN_TIMEOUT, 6.12): the kernel waits for waitNr completions,
// but once minWait (whole microseconds, at least one) has passed it returns
// as soon as at least one completion is there (one already in the CQ
// counts); with none there it waits on for the first, until timeout (0: no
// timeout). The kernel takes a minimum wait of at most 2^32-1 µs (about
// 71.6 minutes): a longer one is cut to that. A timeout shorter than
// minWait, or negative, makes it a plain SubmitAndWait with that timeout. A busy event loop uses it to take more
// completions per wake-up without ever sleeping longer than minWait while
// one waits. It returns
// ErrNotSupported where the kernel lacks the feature. Owner goroutine;
// does not allocate.
func (r *Ring) SubmitAndWaitMin(waitNr uint32, minWait, timeout time.Duration) (int, error) {
	if !r.HasMinWait() {
		return 0, ErrNotSupported
	}
	minWait = max(minWait, time.Microsecond)
	if timeout != 0 && timeout < minWait {
		// The kernel looks at the overall timeout only once minWait has
		// passed: the wait would last minWait.
		return r.enter(waitNr, timeout, 0, true)
	}
	if timeout == 0 || timeout > minWaitForever {
		// Without an overall timeout the kernel ends the wait at minWait
		// with -ETIME, completion or not (io_cqring_min_timer_wakeup, 6.18:
		// "no general timeout ... we are done"); with one longer than
		// minWait it waits on for the first completion. Give it one that
		// never comes, and one it does not clamp to KTIME_MAX, its "none".
		timeout = minWaitForever
	}
	return r.enter(waitNr, timeout, minWait, true)
}

// monoBase is monotonic's origin.
var monoBase = time.Now()

// monotonic is the time since monoBase, the clock of a timed wait's
// deadline: one clock read, where time.Now reads two (the wall clock and the
// monotonic one), and Duration arithmetic rather than Time.Add's.
func monotonic() time.Duration { return time.Since(monoBase) }

// addSat is t+d for d >= 0, at most the largest Duration.
func addSat(t, d time.Duration) time.Duration {
	if d > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + d
}

// minWaitForever is the overall timeout of a minimum wait without one:
// about 146 years, far below the kernel's KTIME_MAX (292 years) even when
// added to the time since boot.
const minWaitForever = time.Duration(1 << 62)

func (r *Ring) enter(waitNr uint32, timeout, minWait time.Duration, wait bool) (int, error) {
	if r.closed {
		return 0, os.ErrClosed
	}
	toSubmit := r.flush()
	submitted := 0
	// The kernel waits for at most a CQ full of completions and cuts a
	// larger count to that, but only after reading it as an int: one near
	// 2^32 is negative and it returns at once (io_cqring_wait, 6.18), so
	// the wait spun through io_uring_enter.
	waitNr = min(waitNr, r.cqSize)
	if wait && timeout < 0 {
		// Passed already: the shortest timeout the kernel takes, not none.
		timeout = time.Nanosecond
	}
	var deadline, minDeadline time.Duration // of a timed wait, of its minimum wait (monotonic)
	if wait && timeout > 0 {
		now := monotonic()
		deadline, minDeadline = addSat(now, timeout), addSat(now, minWait)
	}
	for retry := false; ; retry = true {
		flags := r.enterFlags
		var arg *sys.GeteventsArg
		if wait || r.cqNeedsEnter() {
			flags |= sys.IORING_ENTER_GETEVENTS
		}
		if wait && timeout > 0 {
			if retry {
				now := monotonic()
				if timeout = deadline - now; timeout <= 0 {
					return submitted, unix.ETIME
				}
				// The kernel counts minWait from the start of each
				// call: what is left of it, and at least 1 µs, so that
				// once it has passed the first completion still ends
				// the wait (0 would wait for waitNr). It waits out
				// minWait before it looks at the timeout: no longer
				// than what is left of that.
				if minWait > 0 {
					minWait = min(max(minDeadline-now, time.Microsecond), timeout)
				}
			}
			ts := &r.mem.Scratch.WaitTS
			ts.Sec, ts.Nsec = int64(timeout/time.Second), int64(timeout%time.Second)
			flags |= sys.IORING_ENTER_EXT_ARG
			arg = &r.mem.Scratch.Wait
			// A minimum wait always comes with a timeout here:
			// SubmitAndWaitMin gives one (minWaitForever for none).
			// The field is 32-bit: at most about 71.6 minutes.
			arg.MinWaitUsec = uint32(min(minWait/time.Microsecond, math.MaxUint32))
		}
		if r.setup&sys.IORING_SETUP_SQPOLL != 0 {
			// The SQ thread consumes the SQ; enter only to wake it or to wait.
			if toSubmit > 0 && r.mem.SQFlags.Load()&sys.IORING_SQ_NEED_WAKEUP != 0 {
				flags |= sys.IORING_ENTER_SQ_WAKEUP
			}
			if toSubmit >= r.sqSize {
				// SQ full: sleep until the SQ thread frees a slot instead of
				// letting the caller spin on GetSQE.
				flags |= sys.IORING_ENTER_SQ_WAIT
			}
			if flags&(sys.IORING_ENTER_GETEVENTS|sys.IORING_ENTER_SQ_WAKEUP|sys.IORING_ENTER_SQ_WAIT) == 0 {
				return int(toSubmit), nil
			}
		} else if toSubmit == 0 && flags&sys.IORING_ENTER_GETEVENTS == 0 {
			return submitted, nil
		}
		if wait && waitNr > 0 && toSubmit == 0 && r.CQReady() >= waitNr {
			return submitted, nil
		}
		n, err := r.sysEnter(toSubmit, waitNr, flags, arg)
		if err == nil {
			sqpoll := r.setup&sys.IORING_SETUP_SQPOLL != 0
			if sqpoll {
				n = int(toSubmit)
			}
			submitted += n
			// Success does not say how the wait ended: with SQEs to
			// submit, io_uring_enter returns how many it took, and
			// without, 0 whenever the CQ is not empty, also for a wait
			// a signal or the timeout cut short (io_cqring_wait, 6.18).
			// Wait again for what is missing (with a minimum wait, one
			// completion is enough), for what is left of the timeout:
			// ETIME once it has passed.
			need := waitNr
			if minWait > 0 {
				need = min(waitNr, 1)
			}
			if !wait || r.CQReady() >= need {
				return submitted, nil
			}
			if toSubmit = r.sqTail - r.sqHead(); sqpoll {
				toSubmit = 0 // the SQ thread, woken already, submits
			}
			continue
		}
		switch err {
		case unix.EINTR:
			r.eintr.Add(1)
			// Interrupted before anything was submitted or while waiting:
			// retry what is left, and a timed wait for what is left of
			// its timeout, so that a wait interrupted over and over still
			// ends on time.
			toSubmit = r.sqTail - r.sqHead()
			if wait && r.CQReady() >= max(waitNr, 1) {
				return submitted, nil
			}
			continue
		case unix.ETIME:
			return submitted, unix.ETIME
		case unix.EAGAIN, unix.EBUSY:
			// No room for more completions (or for request allocation):
			// nothing was submitted. If completions are waiting, let the
			// caller reap them; otherwise stop submitting and wait for
			// one, which frees what the kernel lacked. Not for waitNr:
			// a caller counts in it the completions of the SQEs it
			// submits (engine's quiet SENDs), and these cannot come.
			if r.CQReady() > 0 || !wait || toSubmit == 0 {
				return submitted, err.(unix.Errno)
			}
			toSubmit = 0
			waitNr = min(waitNr, 1)
			continue
		}
		return submitted, os.NewSyscallError("io_uring_enter", err)
	}
}

// sysEnter makes one io_uring_enter call and counts it.
func (r *Ring) sysEnter(toSubmit, minComplete, flags uint32, arg *sys.GeteventsArg) (int, error) {
	r.enters.Add(1)
	return sys.Enter(r.enterFd, toSubmit, minComplete, flags, arg)
}

// CQReady returns the number of completions ready to be peeked (0 after
// Close). Owner goroutine.
func (r *Ring) CQReady() uint32 {
	if r.closed {
		return 0
	}
	return r.cqTail() - r.cqHead()
}

// PeekCQEs copies up to len(dst) ready completions into dst, releases their
// ring slots, and returns how many it copied. It makes no system call unless
// dst still has room and the kernel holds completions back: overflowed
// completions (IORING_SQ_CQ_OVERFLOW), or, with CoopTaskrun or DeferTaskrun,
// completion work that only runs when the owner enters the kernel
// (IORING_SQ_TASKRUN). Then it enters once (GETEVENTS, no wait) and copies
// again, so neither an overflowed completion is lost nor a loop that only
// peeks stalls. Owner goroutine; does not allocate.
func (r *Ring) PeekCQEs(dst []CQE) int {
	if r.closed {
		return 0
	}
	n := r.copyCQEs(dst)
	if n < len(dst) && r.cqNeedsEnter() {
		r.sysEnter(0, 0, r.enterFlags|sys.IORING_ENTER_GETEVENTS, nil)
		n += r.copyCQEs(dst[n:])
	}
	return n
}

// ForEachCQE calls fn for each ready completion, in order, without copying
// them into a slice, until fn returns false or the CQ is empty; it returns
// how many it consumed (the CQE on which fn returned false counts as
// consumed). fn may prepare and submit SQEs, reap (PeekCQEs, ForEachCQE),
// wait, or Close the ring (which ends the walk). Completions the kernel holds
// back (overflow, pending task work) are fetched as in PeekCQEs. Owner
// goroutine; does not allocate when fn does not.
func (r *Ring) ForEachCQE(fn func(CQE) bool) int {
	if r.closed {
		return 0
	}
	total := 0
	for flushed := false; ; {
		// The head is read again after every fn: fn may reap, wait or
		// close the ring.
		for !r.closed {
			head := r.cqHead()
			if head == r.cqTail() {
				break
			}
			c := CQE(r.cqes[head&r.cqMask])
			// Release the slot before calling fn, so fn may reap or wait.
			r.releaseCQ(head + 1)
			total++
			if !fn(c) {
				return total
			}
		}
		if r.closed || flushed || !r.cqNeedsEnter() {
			return total
		}
		r.sysEnter(0, 0, r.enterFlags|sys.IORING_ENTER_GETEVENTS, nil)
		flushed = true
	}
}

func (r *Ring) copyCQEs(dst []CQE) int {
	head := r.cqHead()
	avail := r.cqTail() - head
	n := min(int(avail), len(dst))
	for i := range n {
		dst[i] = CQE(r.cqes[(head+uint32(i))&r.cqMask])
	}
	if n > 0 {
		r.releaseCQ(head + uint32(n))
	}
	return n
}

// SQDropped returns the number of invalid SQEs the kernel skipped (0 after
// Close).
//
// Owner goroutine: the counter lives in memory Close unmaps.
func (r *Ring) SQDropped() uint32 {
	if r.closed {
		return 0
	}
	return r.mem.SQDropped.Load()
}

// CQOverflow returns the number of completions the kernel dropped (0 after
// Close): on kernels without IORING_FEAT_NODROP those that found the CQ
// full; with it (5.5 on) only those it could not allocate memory to hold
// until the CQ had room (io_cqring_add_overflow, 6.18), after which the
// next wait that sleeps fails once with EBADR.
//
// Owner goroutine: the counter lives in memory Close unmaps.
func (r *Ring) CQOverflow() uint32 {
	if r.closed {
		return 0
	}
	return r.mem.CQOverflow.Load()
}

// Timespec returns a timespec holding d (as Timespec.Set: a negative d holds
// 0), from a pool of off-heap slots owned by the ring, for PrepTimeout,
// PrepTimeoutUpdate and PrepLinkTimeout; use it in the SQE taken just before
// or just after it. Without TimeoutAbs in that request's flags, d is a
// timeout counted from when the kernel takes the request; with it, d is a
// time on the request's clock (CLOCK_MONOTONIC unless TimeoutBoottime or
// TimeoutRealtime) counted from that clock's zero, as clock_gettime reads
// it outside a time namespace (io_uring does not apply a namespace's
// offsets; not a time.Time's zero either, nor Go's monotonic reading since
// the process started), and one already passed fires at once. The kernel
// reads it
// when it prepares that SQE: during Submit, or with SQPoll when the SQ
// thread gets to it, which may be long after Submit if the thread does not
// run. A slot is reused after 200 more calls, and only once the kernel has
// consumed the SQEs around it: until then Timespec returns nil (with SQPoll,
// 200 timespecs taken since the SQ thread last consumed the SQ; without,
// 200 taken since the last Submit), and the caller waits for the kernel to
// consume the SQ (SQReady) or uses Arena.Timespec. nil after Close. Owner
// goroutine; does not allocate.
func (r *Ring) Timespec(d time.Duration) *Timespec {
	if r.closed {
		return nil
	}
	// The slot index wraps at TimespecSlots, not at 2^32, which is no
	// multiple of it: there slot 95 was followed by slot 0.
	i := r.tsNext % sys.TimespecSlots
	// The kernel reads a timespec once, when it prepares the SQE, before
	// it moves the SQ head past it (io_submit_sqes, then
	// io_commit_sqring). A slot whose position the head has not reached
	// may still be read: rewritten, it would give that SQE this d. The
	// distance to the position is at most the SQEs the ring has handed
	// out beyond the head, plus one; farther, the position is from an
	// earlier round of the 32-bit counters, long consumed. (One 2^32
	// behind the head, within that distance, looks ahead: a call is
	// refused that need not be, once in 2^32 SQEs at most.)
	head := r.sqHead()
	if ahead := r.tsAfter[i] - head; ahead != 0 && ahead <= r.sqTail+1-head {
		return nil
	}
	r.tsAfter[i] = r.sqTail + 1
	r.tsNext = (i + 1) % sys.TimespecSlots
	ts := (*Timespec)(&r.mem.Scratch.TS[i])
	ts.Set(d)
	return ts
}
