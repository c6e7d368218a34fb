package uring

import (
	"errors"
	"math"
	"time"

	"github.com/spindlenet/spindle/internal/sys"
)

// ErrNotOffHeap is the panic value of a Prep method given memory that does
// not lie inside one live mapping from MapAnon (directly, or through Arena or
// BufRing). The kernel may use an SQE's memory after Submit returns: Go heap
// memory could be freed by then and a goroutine stack could have moved, so
// the binding refuses them instead of corrupting memory later. Memory pinned
// with runtime.Pinner is refused too, because the binding cannot see when it
// is unpinned. The check runs before the SQE is written: an SQE fresh from
// GetSQE stays zeroed, a NOP if it is submitted anyway.
var ErrNotOffHeap = errors.New("uring: memory for the kernel is not from MapAnon, Arena or BufRing")

// kbuf returns the address of b for an SQE after checking that b is off the
// Go heap (len 0 passes: the kernel touches nothing).
func kbuf(b []byte) uint64 {
	a := sys.SliceAddr(b)
	if !sys.OffHeap(a, uint64(len(b))) {
		panic(ErrNotOffHeap)
	}
	return a
}

// kptr is kbuf for one value the kernel reads by address (timespec, msghdr).
func kptr[T any](p *T) uint64 {
	a := sys.Addr(p)
	if !sys.OffHeap(a, uint64(sys.SizeOf[T]())) {
		panic(ErrNotOffHeap)
	}
	return a
}

// SQE is a submission queue entry: the 64-byte kernel struct io_uring_sqe in
// the ring's shared memory, handed out zeroed by Ring.GetSQE. Fill it with one
// Prep method and optionally SetFlags/SetBufGroup, then Submit. The fields are
// the raw ABI for ops without a Prep method (addresses set by hand skip the
// off-heap check described below). An SQE must not be used after
// the next Submit. Its methods are called from the owner goroutine of the
// ring it came from, and do not allocate.
//
// Every buffer, socket address, msghdr and timespec a Prep method takes must
// lie in memory from MapAnon, Arena or BufRing, and stay there, unchanged
// where the kernel reads it, until the operation's last CQE: the kernel may
// read it after Submit returns (always with SQPoll, and for data buffers in
// any mode). Prep methods panic with ErrNotOffHeap otherwise.
type SQE sys.SQE

// SQE flags for SetFlags (IOSQE_*).
const (
	FlagFixedFile      = sys.IOSQE_FIXED_FILE       // Fd is a fixed-file slot
	FlagIODrain        = sys.IOSQE_IO_DRAIN         // start after all earlier SQEs complete
	FlagIOLink         = sys.IOSQE_IO_LINK          // the next SQE starts after this one succeeds
	FlagIOHardlink     = sys.IOSQE_IO_HARDLINK      // like FlagIOLink, also after failure
	FlagAsync          = sys.IOSQE_ASYNC            // punt to io-wq without a non-blocking try
	FlagBufferSelect   = sys.IOSQE_BUFFER_SELECT    // pick a provided buffer from the SQE's group
	FlagCQESkipSuccess = sys.IOSQE_CQE_SKIP_SUCCESS // post no CQE on success (5.17); one that fails (a SEND cut short) posts its result, one cancelled with its chain ECANCELED
)

// Timeout flags for PrepTimeout and PrepLinkTimeout.
const (
	TimeoutAbs          = sys.IORING_TIMEOUT_ABS           // ts is an absolute time on the timeout's clock (CLOCK_MONOTONIC unless one below)
	TimeoutBoottime     = sys.IORING_TIMEOUT_BOOTTIME      // use CLOCK_BOOTTIME
	TimeoutRealtime     = sys.IORING_TIMEOUT_REALTIME      // use CLOCK_REALTIME
	TimeoutETimeSuccess = sys.IORING_TIMEOUT_ETIME_SUCCESS // expiry is a success, not -ETIME, for links
	TimeoutMultishot    = sys.IORING_TIMEOUT_MULTISHOT     // fire every ts, count times (0 = forever) (6.4)
)

// Cancel flags for PrepCancel.
const (
	CancelAll      = sys.IORING_ASYNC_CANCEL_ALL      // cancel every match, not only the first
	CancelAny      = sys.IORING_ASYNC_CANCEL_ANY      // match every request
	CancelFdFixed  = sys.IORING_ASYNC_CANCEL_FD_FIXED // the fd of PrepCancelFd is a fixed-file slot
	CancelUserData = sys.IORING_ASYNC_CANCEL_USERDATA // match on user_data (the default key)
)

// CloseUserData is the user_data of the cancel request Ring.Close submits;
// do not use it for your own requests.
const CloseUserData = ^uint64(0)

// MsgRingCQESkip posts no CQE on the target ring (only with MSG_RING fd passing).
const MsgRingCQESkip = sys.IORING_MSG_RING_CQE_SKIP

// SetFlags ORs IOSQE_* flags (Flag*) into the SQE.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) SetFlags(flags uint8) { s.Flags |= flags }

// SetBufGroup selects provided-buffer group g and sets FlagBufferSelect.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) SetBufGroup(g uint16) {
	s.BufIndex = g
	s.Flags |= sys.IOSQE_BUFFER_SELECT
}

func (s *SQE) prep(op uint8, fd int, addr uint64, length uint32, off uint64, userData uint64) {
	s.Opcode = op
	s.Fd = int32(fd)
	s.Addr = addr
	s.Len = length
	s.Off = off
	s.UserData = userData
}

// PrepNop prepares IORING_OP_NOP, which completes with Res 0.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepNop(userData uint64) {
	s.prep(sys.IORING_OP_NOP, -1, 0, 0, 0, userData)
}

// PrepAccept prepares a single accept on listening socket fd. flags are
// accept4 flags (unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC). Res is the new fd.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepAccept(fd int, flags int, userData uint64) {
	s.prep(sys.IORING_OP_ACCEPT, fd, 0, 0, 0, userData)
	s.OpFlags = uint32(flags)
}

// PrepAcceptMultishot prepares a multishot accept (5.19): one CQE per
// accepted connection while CQE.More holds. With direct, each connection is
// installed in a free fixed-file slot picked by the kernel (Res is the slot;
// needs RegisterFiles) and flags must not contain SOCK_CLOEXEC.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepAcceptMultishot(fd int, flags int, direct bool, userData uint64) {
	s.PrepAccept(fd, flags, userData)
	s.Ioprio |= sys.IORING_ACCEPT_MULTISHOT
	if direct {
		s.FileIndex = sys.IORING_FILE_INDEX_ALLOC
	}
}

// PrepConnect prepares a connect of fd to the encoded socket address sa (see
// EncodeSockaddr, Arena.Sockaddr). The kernel copies sa when it prepares the
// request: during Submit, or later in the SQPOLL thread, so keep sa until the
// CQE.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepConnect(fd int, sa []byte, userData uint64) {
	s.prep(sys.IORING_OP_CONNECT, fd, kbuf(sa), 0, uint64(len(sa)), userData)
}

// PrepRecv prepares a receive into buf with recv(2) flags.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepRecv(fd int, buf []byte, flags int, userData uint64) {
	s.prep(sys.IORING_OP_RECV, fd, kbuf(buf), uint32(len(buf)), 0, userData)
	s.OpFlags = uint32(flags)
}

// PrepRecvBufSelect prepares one receive into a buffer picked from provided
// buffer group (CQE.BufferID says which).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepRecvBufSelect(fd int, group uint16, flags int, userData uint64) {
	s.prep(sys.IORING_OP_RECV, fd, 0, 0, 0, userData)
	s.OpFlags = uint32(flags)
	s.SetBufGroup(group)
}

// PrepRecvMultishot prepares a multishot receive (6.0) into buffers of
// provided buffer group: one CQE per received chunk while CQE.More holds.
// It ends with -ENOBUFS when the group has no buffer, and with Res 0 at EOF.
// With bundle (6.10) one CQE may cover several consecutive buffers (see
// BufRing.BundleIDs).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepRecvMultishot(fd int, group uint16, bundle bool, flags int, userData uint64) {
	s.PrepRecvBufSelect(fd, group, flags, userData)
	s.Ioprio |= sys.IORING_RECV_MULTISHOT
	if bundle {
		s.Ioprio |= sys.IORING_RECVSEND_BUNDLE
	}
}

// SetRecvLimit makes a multishot receive (PrepRecvMultishot) end once it
// has received limit bytes in all (sqe->optlen, 6.17): its last CQE then
// comes without More, and the caller arms a new receive when it wants more.
// A plain receive that crosses the limit is not cut short: it fills its
// buffer, so the total stays below limit plus one buffer (TestRecvLimit); a
// bundle receive stops at the limit. Kernels
// without it fail the receive with -EINVAL (Probe's FeatRecvLimit,
// HasRecvLimit). 0 means no limit.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) SetRecvLimit(limit uint32) { s.FileIndex = limit }

// PrepSend prepares a send of buf with send(2) flags. buf must stay valid
// until the CQE.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepSend(fd int, buf []byte, flags int, userData uint64) {
	s.prep(sys.IORING_OP_SEND, fd, kbuf(buf), uint32(len(buf)), 0, userData)
	s.OpFlags = uint32(flags)
}

// PrepSendZC prepares a zero-copy send (the opcode is 6.0; the usage report it
// asks for, IORING_SEND_ZC_REPORT_USAGE, is 6.2, and a 6.0 or 6.1 kernel
// refuses the SQE with EINVAL: Probe's IORING_OP_SEND_ZC, 6.2, is this
// SQE working). It posts two CQEs with the same
// user_data: the send result (CQE.More set), then a notification (CQE.Notif)
// when the kernel no longer references buf; buf may be reused only after the
// notification. A send that fails once the kernel has taken the SQE (an fd
// not open, a broken pipe) posts both as well, its error in the result,
// which still has CQE.More (6.18: io_send_zc, io_sendrecv_fail). A result
// without More does not always mean that none follows. For an SQE no link
// leads to (first of its chain, or in none) it does: the kernel could not
// allocate the notification (ENOMEM). For an SQE linked to the one before
// (FlagIOLink) every failure ends without More (io_req_tw_fail_links sets
// no flag): cancelled with its chain (ECANCELED), the notification follows
// (io_send_zc_cleanup posts it); refused when prepared, it follows or not
// as the kernel had allocated it. fixedBuf >= 0 is the index
// of a registered buffer containing buf (the only way to send from a fixed
// buffer in 6.18); -1 means none. The notification's CQE.ZCCopied reports
// whether the kernel had to copy; see there for a send that failed.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepSendZC(fd int, buf []byte, flags int, fixedBuf int, userData uint64) {
	s.prep(sys.IORING_OP_SEND_ZC, fd, kbuf(buf), uint32(len(buf)), 0, userData)
	s.OpFlags = uint32(flags)
	s.Ioprio = sys.IORING_SEND_ZC_REPORT_USAGE
	if fixedBuf >= 0 {
		s.Ioprio |= sys.IORING_RECVSEND_FIXED_BUF
		s.BufIndex = uint16(fixedBuf)
	}
}

// PrepSendmsg prepares sendmsg(2) with msg, which must be off the Go heap
// (Arena.Msghdr) together with its iovecs and name; the data buffers must stay
// valid until the CQE.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepSendmsg(fd int, msg *Msghdr, flags int, userData uint64) {
	s.prep(sys.IORING_OP_SENDMSG, fd, kptr((*sys.Msghdr)(msg)), 1, 0, userData)
	s.OpFlags = uint32(flags)
}

// PrepRead prepares a read into buf at file offset off (-1: current position).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepRead(fd int, buf []byte, off int64, userData uint64) {
	s.prep(sys.IORING_OP_READ, fd, kbuf(buf), uint32(len(buf)), uint64(off), userData)
}

// PrepWrite prepares a write of buf at file offset off (-1: current position).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepWrite(fd int, buf []byte, off int64, userData uint64) {
	s.prep(sys.IORING_OP_WRITE, fd, kbuf(buf), uint32(len(buf)), uint64(off), userData)
}

// PrepReadFixed prepares a read into buf, which must lie inside registered
// buffer bufIndex (Ring.RegisterBuffers).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepReadFixed(fd int, buf []byte, off int64, bufIndex int, userData uint64) {
	s.prep(sys.IORING_OP_READ_FIXED, fd, kbuf(buf), uint32(len(buf)), uint64(off), userData)
	s.BufIndex = uint16(bufIndex)
}

// PrepWriteFixed prepares a write of buf, which must lie inside registered
// buffer bufIndex.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepWriteFixed(fd int, buf []byte, off int64, bufIndex int, userData uint64) {
	s.prep(sys.IORING_OP_WRITE_FIXED, fd, kbuf(buf), uint32(len(buf)), uint64(off), userData)
	s.BufIndex = uint16(bufIndex)
}

// PrepPollAdd prepares a poll for events (unix.POLLIN, ...) on fd. Res is the
// returned event mask. A multishot poll (5.13) posts a CQE per readiness
// while CQE.More holds.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepPollAdd(fd int, events uint32, multishot bool, userData uint64) {
	var mode uint32
	if multishot {
		mode = sys.IORING_POLL_ADD_MULTI
	}
	s.prep(sys.IORING_OP_POLL_ADD, fd, 0, mode, 0, userData)
	s.OpFlags = sys.Poll32Events(events)
}

// PrepPollRemove removes the poll whose user_data is target.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepPollRemove(target uint64, userData uint64) {
	s.prep(sys.IORING_OP_POLL_REMOVE, -1, target, 0, 0, userData)
}

// PrepTimeout prepares a timeout that completes with -ETIME after ts (with
// TimeoutAbs in flags: at ts, on its clock), or with Res 0 once count other
// completions were posted (0: time only). ts comes from Ring.Timespec or
// Arena.Timespec; the kernel reads it when it prepares the request (during
// Submit, or later in the SQPOLL thread).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepTimeout(ts *Timespec, count uint32, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_TIMEOUT, -1, kptr((*sys.Timespec)(ts)), 1, uint64(count), userData)
	s.OpFlags = flags
}

// PrepTimeoutRemove cancels the timeout whose user_data is target.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepTimeoutRemove(target uint64, userData uint64) {
	s.prep(sys.IORING_OP_TIMEOUT_REMOVE, -1, target, 0, 0, userData)
}

// PrepTimeoutUpdate moves the pending timeout whose user_data is target to
// expire after ts, as from now (flags: TimeoutAbs for at ts), on the clock
// it was armed with: the kernel keeps that clock and refuses a clock flag in
// an update with -EINVAL (6.18, io_timeout_remove_prep), so TimeoutBoottime
// and TimeoutRealtime in flags are dropped. The timeout keeps its user_data
// and posts its one completion when it expires. This completes with Res 0,
// -ENOENT when target is no longer pending (it expired, or was removed), or
// -EALREADY when it is expiring at that moment (its completion follows). ts
// as for PrepTimeout.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepTimeoutUpdate(target uint64, ts *Timespec, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_TIMEOUT_REMOVE, -1, target, 0, kptr((*sys.Timespec)(ts)), userData)
	s.OpFlags = flags&^(sys.IORING_TIMEOUT_BOOTTIME|sys.IORING_TIMEOUT_REALTIME) | sys.IORING_TIMEOUT_UPDATE
}

// PrepLinkTimeout prepares a timeout for the previous SQE, which must carry
// FlagIOLink: if it has not completed after ts (with TimeoutAbs in flags: by
// ts, on its clock) it is cancelled (-ECANCELED) and this completes with
// -ETIME; otherwise this completes with -ECANCELED.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepLinkTimeout(ts *Timespec, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_LINK_TIMEOUT, -1, kptr((*sys.Timespec)(ts)), 1, 0, userData)
	s.OpFlags = flags
}

// PrepCancel cancels the request whose user_data is target (with CancelAll,
// every such request; with CancelAny, every request). Res is 0 or the number
// cancelled with CancelAll, -ENOENT when none matched, -EALREADY when the
// target was already running.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepCancel(target uint64, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_ASYNC_CANCEL, -1, target, 0, 0, userData)
	s.OpFlags = flags
}

// PrepCancelFd cancels requests on fd (5.19); flags may add CancelAll and
// CancelFdFixed.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepCancelFd(fd int, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_ASYNC_CANCEL, fd, 0, 0, 0, userData)
	s.OpFlags = flags | sys.IORING_ASYNC_CANCEL_FD
}

// PrepClose prepares close(2) of fd. Close an fd only when no in-flight SQE
// refers to it.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepClose(fd int, userData uint64) {
	s.prep(sys.IORING_OP_CLOSE, fd, 0, 0, 0, userData)
}

// PrepCloseDirect closes fixed-file slot. A slot no file table has
// (negative, or 2^32-1 and above) completes with -EINVAL (-ENXIO without
// a table).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepCloseDirect(slot int, userData uint64) {
	s.prep(sys.IORING_OP_CLOSE, 0, 0, 0, 0, userData)
	// The kernel reads slot+1 from a 32-bit field, 0 meaning no slot:
	// close the fd in sqe->fd, 0 here. Slot 2^32-2 is beyond the largest
	// table (2^20 slots), so the kernel refuses it; cut to 32 bits, -1
	// and 2^32-1 closed fd 0, and 2^32+n slot n.
	if slot < 0 || slot >= math.MaxUint32 {
		slot = math.MaxUint32 - 1
	}
	s.FileIndex = uint32(slot) + 1
}

// PrepShutdown prepares shutdown(2) of fd with how (unix.SHUT_WR, ...).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepShutdown(fd int, how int, userData uint64) {
	s.prep(sys.IORING_OP_SHUTDOWN, fd, 0, uint32(how), 0, userData)
}

// PrepMsgRing posts a CQE with Res res and user_data targetData on the ring
// whose fd is targetRingFd (5.18); this SQE's own CQE says whether it was
// delivered. flags may be 0.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepMsgRing(targetRingFd int, res int32, targetData uint64, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_MSG_RING, targetRingFd, sys.IORING_MSG_DATA, uint32(res), targetData, userData)
	s.OpFlags = flags
}

// PrepMsgRingFd installs this ring's fixed-file slot srcSlot into fixed-file
// slot dstSlot of the ring targetRingFd (IORING_MSG_SEND_FD; a negative
// dstSlot, -1 say, lets the target pick a free slot). The target gets a CQE
// with targetData unless MsgRingCQESkip is in flags. A srcSlot no table has
// fails with -EBADF, negative ones and those past the kernel's 32 bits
// included, a dstSlot of 2^32-2 or above with -EINVAL.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepMsgRingFd(targetRingFd int, srcSlot, dstSlot int, targetData uint64, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_MSG_RING, targetRingFd, sys.IORING_MSG_SEND_FD, 0, targetData, userData)
	// The kernel reads the source slot from addr3's low 32 bits and the
	// destination as slot+1 in a 32-bit field, 2^32-1 asking for a free
	// slot. Slots beyond, cut to those bits, named another slot (or asked
	// for a free one): they become slots no table has (at most 2^20).
	if srcSlot < 0 || srcSlot > math.MaxUint32 {
		srcSlot = math.MaxUint32
	}
	s.Addr3 = uint64(srcSlot)
	switch {
	case dstSlot < 0:
		s.FileIndex = sys.IORING_FILE_INDEX_ALLOC
	case dstSlot >= math.MaxUint32-1:
		s.FileIndex = math.MaxUint32 - 1
	default:
		s.FileIndex = uint32(dstSlot) + 1
	}
	s.OpFlags = flags
}

// PrepSocket prepares socket(2) (5.19); Res is the new fd. flags are reserved
// and must be 0.
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepSocket(domain, typ, proto int, flags uint32, userData uint64) {
	s.prep(sys.IORING_OP_SOCKET, domain, 0, uint32(proto), uint64(typ), userData)
	s.OpFlags = flags
}

// PrepSocketDirect is PrepSocket into a free fixed-file slot picked by the
// kernel (Res is the slot).
//
// Owner goroutine of the ring the SQE came from.
func (s *SQE) PrepSocketDirect(domain, typ, proto int, flags uint32, userData uint64) {
	s.PrepSocket(domain, typ, proto, flags, userData)
	s.FileIndex = sys.IORING_FILE_INDEX_ALLOC
}

// Timespec is struct __kernel_timespec, for timeouts. Use one from
// Ring.Timespec or Arena.Timespec: the kernel reads it by address.
type Timespec sys.Timespec

// Set stores d (negative counts as 0).
//
// Owner goroutine of the Ring or Arena it came from.
func (t *Timespec) Set(d time.Duration) {
	if d < 0 {
		d = 0
	}
	t.Sec = int64(d / time.Second)
	t.Nsec = int64(d % time.Second)
}

// Msghdr is struct msghdr for PrepSendmsg; get one from Arena.Msghdr, which
// checks that its name and iovecs are off-heap. Filling the fields by hand
// bypasses that check: the addresses must then come from MapAnon too.
type Msghdr sys.Msghdr
