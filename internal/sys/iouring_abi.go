package sys

import (
	"encoding/binary"
	"math/bits"
)

// The io_uring ABI of Linux 6.18. Every struct and constant here mirrors
// include/uapi/linux/io_uring.h (torvalds/linux, v6.18); the kernel version
// that introduced each group is noted where it matters for feature probing.
// Layouts assume a 64-bit Linux target (amd64, arm64): pointers travel as
// uint64. Struct fields carry the C field names in CamelCase and mean what
// the header says. Sizes and offsets are checked by iouring_abi_test.go.

// SQE is struct io_uring_sqe (64 bytes). The unions of the C struct appear
// under their most common name; the comments list the aliases.
type SQE struct {
	Opcode   uint8  // opcode: IORING_OP_*
	Flags    uint8  // flags: IOSQE_*
	Ioprio   uint16 // ioprio; recv/send/accept flags (IORING_RECVSEND_*, IORING_ACCEPT_*)
	Fd       int32  // fd
	Off      uint64 // off, addr2, cmd_op
	Addr     uint64 // addr, splice_off_in, level/optname
	Len      uint32 // len
	OpFlags  uint32 // rw_flags, msg_flags, poll32_events, timeout_flags, accept_flags, cancel_flags, msg_ring_flags, nop_flags, ...
	UserData uint64 // user_data
	BufIndex uint16 // buf_index, buf_group
	// Personality is personality.
	Personality uint16
	FileIndex   uint32 // splice_fd_in, file_index, zcrx_ifq_idx, optlen, addr_len (low 16 bits)
	Addr3       uint64 // addr3, optval
	Pad2        uint64 // __pad2[1]
}

// CQE is struct io_uring_cqe without the CQE32 extension (16 bytes).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// SQRingOffsets is struct io_sqring_offsets.
type SQRingOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Flags       uint32
	Dropped     uint32
	Array       uint32
	Resv1       uint32
	UserAddr    uint64
}

// CQRingOffsets is struct io_cqring_offsets.
type CQRingOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Overflow    uint32
	CQEs        uint32
	Flags       uint32
	Resv1       uint32
	UserAddr    uint64
}

// Params is struct io_uring_params (120 bytes).
type Params struct {
	SQEntries    uint32
	CQEntries    uint32
	Flags        uint32
	SQThreadCPU  uint32
	SQThreadIdle uint32
	Features     uint32
	WQFd         uint32
	Resv         [3]uint32
	SQOff        SQRingOffsets
	CQOff        CQRingOffsets
}

// Timespec is struct __kernel_timespec.
type Timespec struct {
	Sec  int64
	Nsec int64
}

// GeteventsArg is struct io_uring_getevents_arg, the IORING_ENTER_EXT_ARG
// argument (5.11; min_wait_usec 6.12).
type GeteventsArg struct {
	Sigmask     uint64
	SigmaskSz   uint32
	MinWaitUsec uint32
	Ts          uint64
}

// BufEntry is struct io_uring_buf, one entry of a provided buffer ring. The
// ring's tail overlays the Resv field of entry 0 (struct io_uring_buf_ring).
type BufEntry struct {
	Addr uint64
	Len  uint32
	Bid  uint16
	Resv uint16
}

// BufReg is struct io_uring_buf_reg, the IORING_REGISTER_PBUF_RING argument
// (5.19).
type BufReg struct {
	RingAddr    uint64
	RingEntries uint32
	Bgid        uint16
	Flags       uint16
	Resv        [3]uint64
}

// BufStatus is struct io_uring_buf_status (IORING_REGISTER_PBUF_STATUS, 6.8).
type BufStatus struct {
	BufGroup uint32
	Head     uint32
	Resv     [8]uint32
}

// NAPI is struct io_uring_napi (IORING_REGISTER_NAPI, 6.9; opcode and
// op_param for static tracking, 6.13).
type NAPI struct {
	BusyPollTo     uint32
	PreferBusyPoll uint8
	Opcode         uint8
	Pad            [2]uint8
	OpParam        uint32
	Resv           uint32
}

// ProbeOp is struct io_uring_probe_op.
type ProbeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

// ProbeOps is the number of entries Probe has room for.
const ProbeOps = 256

// Probe is struct io_uring_probe followed by room for ProbeOps entries
// (IORING_REGISTER_PROBE, 5.6).
type Probe struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
	Ops    [ProbeOps]ProbeOp
}

// RsrcRegister is struct io_uring_rsrc_register (IORING_REGISTER_FILES2 and
// BUFFERS2, 5.13).
type RsrcRegister struct {
	Nr    uint32
	Flags uint32
	Resv2 uint64
	Data  uint64
	Tags  uint64
}

// RsrcUpdate is struct io_uring_rsrc_update (IORING_REGISTER_RING_FDS).
type RsrcUpdate struct {
	Offset uint32
	Resv   uint32
	Data   uint64
}

// RsrcUpdate2 is struct io_uring_rsrc_update2 (IORING_REGISTER_FILES_UPDATE2).
type RsrcUpdate2 struct {
	Offset uint32
	Resv   uint32
	Data   uint64
	Tags   uint64
	Nr     uint32
	Resv2  uint32
}

// SyncCancelReg is struct io_uring_sync_cancel_reg, the
// IORING_REGISTER_SYNC_CANCEL argument (6.0; opcode, with
// IORING_ASYNC_CANCEL_OP, 6.6, taken from the padding). Addr is the user_data
// to match; Timeout is relative, and -1/-1 waits without a limit.
type SyncCancelReg struct {
	Addr    uint64
	Fd      int32
	Flags   uint32
	Timeout Timespec
	Opcode  uint8
	Pad     [7]uint8
	Pad2    [3]uint64
}

// FileIndexRange is struct io_uring_file_index_range
// (IORING_REGISTER_FILE_ALLOC_RANGE, 6.0).
type FileIndexRange struct {
	Off  uint32
	Len  uint32
	Resv uint64
}

// Iovec is struct iovec on 64-bit Linux.
type Iovec struct {
	Base uint64
	Len  uint64
}

// Msghdr is struct msghdr (user ABI) on 64-bit Linux.
type Msghdr struct {
	Name       uint64
	Namelen    uint32
	_          uint32
	Iov        uint64
	Iovlen     uint64
	Control    uint64
	Controllen uint64
	Flags      int32
	_          uint32
}

// RecvmsgOut is struct io_uring_recvmsg_out (multishot recvmsg).
type RecvmsgOut struct {
	Namelen    uint32
	Controllen uint32
	Payloadlen uint32
	Flags      uint32
}

// Opcodes, enum io_uring_op. All 63 (0..62) exist in 6.18.
const (
	IORING_OP_NOP              = 0  // 5.1
	IORING_OP_READV            = 1  // 5.1
	IORING_OP_WRITEV           = 2  // 5.1
	IORING_OP_FSYNC            = 3  // 5.1
	IORING_OP_READ_FIXED       = 4  // 5.1
	IORING_OP_WRITE_FIXED      = 5  // 5.1
	IORING_OP_POLL_ADD         = 6  // 5.1
	IORING_OP_POLL_REMOVE      = 7  // 5.1
	IORING_OP_SYNC_FILE_RANGE  = 8  // 5.2
	IORING_OP_SENDMSG          = 9  // 5.3
	IORING_OP_RECVMSG          = 10 // 5.3
	IORING_OP_TIMEOUT          = 11 // 5.4
	IORING_OP_TIMEOUT_REMOVE   = 12 // 5.5
	IORING_OP_ACCEPT           = 13 // 5.5
	IORING_OP_ASYNC_CANCEL     = 14 // 5.5
	IORING_OP_LINK_TIMEOUT     = 15 // 5.5
	IORING_OP_CONNECT          = 16 // 5.5
	IORING_OP_FALLOCATE        = 17 // 5.6
	IORING_OP_OPENAT           = 18 // 5.6
	IORING_OP_CLOSE            = 19 // 5.6
	IORING_OP_FILES_UPDATE     = 20 // 5.6
	IORING_OP_STATX            = 21 // 5.6
	IORING_OP_READ             = 22 // 5.6
	IORING_OP_WRITE            = 23 // 5.6
	IORING_OP_FADVISE          = 24 // 5.6
	IORING_OP_MADVISE          = 25 // 5.6
	IORING_OP_SEND             = 26 // 5.6
	IORING_OP_RECV             = 27 // 5.6
	IORING_OP_OPENAT2          = 28 // 5.6
	IORING_OP_EPOLL_CTL        = 29 // 5.6
	IORING_OP_SPLICE           = 30 // 5.7
	IORING_OP_PROVIDE_BUFFERS  = 31 // 5.7
	IORING_OP_REMOVE_BUFFERS   = 32 // 5.7
	IORING_OP_TEE              = 33 // 5.8
	IORING_OP_SHUTDOWN         = 34 // 5.11
	IORING_OP_RENAMEAT         = 35 // 5.11
	IORING_OP_UNLINKAT         = 36 // 5.11
	IORING_OP_MKDIRAT          = 37 // 5.15
	IORING_OP_SYMLINKAT        = 38 // 5.15
	IORING_OP_LINKAT           = 39 // 5.15
	IORING_OP_MSG_RING         = 40 // 5.18
	IORING_OP_FSETXATTR        = 41 // 5.19
	IORING_OP_SETXATTR         = 42 // 5.19
	IORING_OP_FGETXATTR        = 43 // 5.19
	IORING_OP_GETXATTR         = 44 // 5.19
	IORING_OP_SOCKET           = 45 // 5.19
	IORING_OP_URING_CMD        = 46 // 5.19
	IORING_OP_SEND_ZC          = 47 // 6.0
	IORING_OP_SENDMSG_ZC       = 48 // 6.1
	IORING_OP_READ_MULTISHOT   = 49 // 6.7
	IORING_OP_WAITID           = 50 // 6.7
	IORING_OP_FUTEX_WAIT       = 51 // 6.7
	IORING_OP_FUTEX_WAKE       = 52 // 6.7
	IORING_OP_FUTEX_WAITV      = 53 // 6.7
	IORING_OP_FIXED_FD_INSTALL = 54 // 6.8
	IORING_OP_FTRUNCATE        = 55 // 6.9
	IORING_OP_BIND             = 56 // 6.11
	IORING_OP_LISTEN           = 57 // 6.11
	IORING_OP_RECV_ZC          = 58 // 6.15
	IORING_OP_EPOLL_WAIT       = 59 // 6.15
	IORING_OP_READV_FIXED      = 60 // 6.15
	IORING_OP_WRITEV_FIXED     = 61 // 6.15
	IORING_OP_PIPE             = 62 // 6.16
	IORING_OP_LAST             = 63
)

// sqe->flags (enum io_uring_sqe_flags_bit).
const (
	IOSQE_FIXED_FILE       = 1 << 0
	IOSQE_IO_DRAIN         = 1 << 1
	IOSQE_IO_LINK          = 1 << 2
	IOSQE_IO_HARDLINK      = 1 << 3
	IOSQE_ASYNC            = 1 << 4
	IOSQE_BUFFER_SELECT    = 1 << 5
	IOSQE_CQE_SKIP_SUCCESS = 1 << 6
)

// IORING_FILE_INDEX_ALLOC in sqe->file_index lets the kernel pick a free
// direct descriptor slot (5.19).
const IORING_FILE_INDEX_ALLOC = ^uint32(0)

// io_uring_setup() flags.
const (
	IORING_SETUP_IOPOLL             = 1 << 0
	IORING_SETUP_SQPOLL             = 1 << 1
	IORING_SETUP_SQ_AFF             = 1 << 2
	IORING_SETUP_CQSIZE             = 1 << 3  // 5.5
	IORING_SETUP_CLAMP              = 1 << 4  // 5.6
	IORING_SETUP_ATTACH_WQ          = 1 << 5  // 5.6
	IORING_SETUP_R_DISABLED         = 1 << 6  // 5.10
	IORING_SETUP_SUBMIT_ALL         = 1 << 7  // 5.18
	IORING_SETUP_COOP_TASKRUN       = 1 << 8  // 5.19
	IORING_SETUP_TASKRUN_FLAG       = 1 << 9  // 5.19
	IORING_SETUP_SQE128             = 1 << 10 // 5.19
	IORING_SETUP_CQE32              = 1 << 11 // 5.19
	IORING_SETUP_SINGLE_ISSUER      = 1 << 12 // 6.0
	IORING_SETUP_DEFER_TASKRUN      = 1 << 13 // 6.1
	IORING_SETUP_NO_MMAP            = 1 << 14 // 6.5
	IORING_SETUP_REGISTERED_FD_ONLY = 1 << 15 // 6.5
	IORING_SETUP_NO_SQARRAY         = 1 << 16 // 6.6
	IORING_SETUP_HYBRID_IOPOLL      = 1 << 17 // 6.13
	IORING_SETUP_CQE_MIXED          = 1 << 18 // 6.18
)

// sqe->uring_cmd_flags.
const IORING_URING_CMD_FIXED = 1 << 0

// sqe->fsync_flags.
const IORING_FSYNC_DATASYNC = 1 << 0

// sqe->timeout_flags.
const (
	IORING_TIMEOUT_ABS           = 1 << 0
	IORING_TIMEOUT_UPDATE        = 1 << 1
	IORING_TIMEOUT_BOOTTIME      = 1 << 2
	IORING_TIMEOUT_REALTIME      = 1 << 3
	IORING_LINK_TIMEOUT_UPDATE   = 1 << 4
	IORING_TIMEOUT_ETIME_SUCCESS = 1 << 5
	IORING_TIMEOUT_MULTISHOT     = 1 << 6 // 6.4
)

// Poll32Events returns a poll mask (POLLIN, ...) as sqe->poll32_events is
// to hold it. The field was 16 bits once (poll_events), and on a big-endian
// machine the kernel swaps the 16-bit halves of the 32-bit one after reading
// it (io_poll_parse_events, 6.18: swahw32), so they are swapped here first,
// as liburing's io_uring_prep_poll_add does; on a little-endian machine the
// mask is the field.
func Poll32Events(events uint32) uint32 {
	if nativeLittle {
		return events
	}
	return bits.RotateLeft32(events, 16)
}

// nativeLittle reports whether this machine stores a word's low byte first:
// the ABI's fields that overlay others, or were widened, depend on it.
var nativeLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// POLL_ADD command flags (in sqe->len).
const (
	IORING_POLL_ADD_MULTI        = 1 << 0 // 5.13
	IORING_POLL_UPDATE_EVENTS    = 1 << 1
	IORING_POLL_UPDATE_USER_DATA = 1 << 2
	IORING_POLL_ADD_LEVEL        = 1 << 3
)

// ASYNC_CANCEL flags (sqe->cancel_flags).
const (
	IORING_ASYNC_CANCEL_ALL      = 1 << 0 // 5.19
	IORING_ASYNC_CANCEL_FD       = 1 << 1 // 5.19
	IORING_ASYNC_CANCEL_ANY      = 1 << 2 // 5.19
	IORING_ASYNC_CANCEL_FD_FIXED = 1 << 3 // 6.0
	IORING_ASYNC_CANCEL_USERDATA = 1 << 4 // 6.6
	IORING_ASYNC_CANCEL_OP       = 1 << 5 // 6.6
)

// send/recv flags (sqe->ioprio).
const (
	IORING_RECVSEND_POLL_FIRST  = 1 << 0 // 5.19
	IORING_RECV_MULTISHOT       = 1 << 1 // 6.0
	IORING_RECVSEND_FIXED_BUF   = 1 << 2 // 6.0
	IORING_SEND_ZC_REPORT_USAGE = 1 << 3 // 6.2
	IORING_RECVSEND_BUNDLE      = 1 << 4 // 6.10
	IORING_SEND_VECTORIZED      = 1 << 5 // 6.17
)

// IORING_NOTIF_USAGE_ZC_COPIED is set in a SEND_ZC notification's res when
// the data was copied (IORING_SEND_ZC_REPORT_USAGE).
const IORING_NOTIF_USAGE_ZC_COPIED = 1 << 31

// accept flags (sqe->ioprio).
const (
	IORING_ACCEPT_MULTISHOT  = 1 << 0 // 5.19
	IORING_ACCEPT_DONTWAIT   = 1 << 1 // 6.10
	IORING_ACCEPT_POLL_FIRST = 1 << 2 // 6.10
)

// MSG_RING commands (sqe->addr) and flags (sqe->msg_ring_flags).
const (
	IORING_MSG_DATA            = 0
	IORING_MSG_SEND_FD         = 1
	IORING_MSG_RING_CQE_SKIP   = 1 << 0
	IORING_MSG_RING_FLAGS_PASS = 1 << 1
)

// IORING_FIXED_FD_NO_CLOEXEC is the FIXED_FD_INSTALL flag.
const IORING_FIXED_FD_NO_CLOEXEC = 1 << 0

// NOP flags (sqe->nop_flags).
const (
	IORING_NOP_INJECT_RESULT = 1 << 0 // 6.12
	IORING_NOP_FILE          = 1 << 1
	IORING_NOP_FIXED_FILE    = 1 << 2
	IORING_NOP_FIXED_BUFFER  = 1 << 3
)

// cqe->flags.
const (
	IORING_CQE_F_BUFFER        = 1 << 0
	IORING_CQE_F_MORE          = 1 << 1
	IORING_CQE_F_SOCK_NONEMPTY = 1 << 2
	IORING_CQE_F_NOTIF         = 1 << 3
	IORING_CQE_F_BUF_MORE      = 1 << 4
	IORING_CQE_F_SKIP          = 1 << 5 // 6.18, CQE_MIXED padding
	IORING_CQE_F_32            = 1 << 15
	IORING_CQE_BUFFER_SHIFT    = 16
)

// mmap offsets.
const (
	IORING_OFF_SQ_RING    = 0
	IORING_OFF_CQ_RING    = 0x8000000
	IORING_OFF_SQES       = 0x10000000
	IORING_OFF_PBUF_RING  = 0x80000000
	IORING_OFF_PBUF_SHIFT = 16
	IORING_OFF_MMAP_MASK  = 0xf8000000
)

// sq_ring->flags.
const (
	IORING_SQ_NEED_WAKEUP = 1 << 0
	IORING_SQ_CQ_OVERFLOW = 1 << 1
	IORING_SQ_TASKRUN     = 1 << 2
)

// cq_ring->flags.
const IORING_CQ_EVENTFD_DISABLED = 1 << 0

// io_uring_enter() flags.
const (
	IORING_ENTER_GETEVENTS       = 1 << 0
	IORING_ENTER_SQ_WAKEUP       = 1 << 1
	IORING_ENTER_SQ_WAIT         = 1 << 2
	IORING_ENTER_EXT_ARG         = 1 << 3 // 5.11
	IORING_ENTER_REGISTERED_RING = 1 << 4 // 5.18
	IORING_ENTER_ABS_TIMER       = 1 << 5 // 6.12
	IORING_ENTER_EXT_ARG_REG     = 1 << 6 // 6.13
	IORING_ENTER_NO_IOWAIT       = 1 << 7 // 6.15
)

// io_uring_params->features.
const (
	IORING_FEAT_SINGLE_MMAP     = 1 << 0
	IORING_FEAT_NODROP          = 1 << 1
	IORING_FEAT_SUBMIT_STABLE   = 1 << 2
	IORING_FEAT_RW_CUR_POS      = 1 << 3
	IORING_FEAT_CUR_PERSONALITY = 1 << 4
	IORING_FEAT_FAST_POLL       = 1 << 5
	IORING_FEAT_POLL_32BITS     = 1 << 6
	IORING_FEAT_SQPOLL_NONFIXED = 1 << 7
	IORING_FEAT_EXT_ARG         = 1 << 8
	IORING_FEAT_NATIVE_WORKERS  = 1 << 9
	IORING_FEAT_RSRC_TAGS       = 1 << 10
	IORING_FEAT_CQE_SKIP        = 1 << 11
	IORING_FEAT_LINKED_FILE     = 1 << 12
	IORING_FEAT_REG_REG_RING    = 1 << 13
	IORING_FEAT_RECVSEND_BUNDLE = 1 << 14
	IORING_FEAT_MIN_TIMEOUT     = 1 << 15
	IORING_FEAT_RW_ATTR         = 1 << 16
	IORING_FEAT_NO_IOWAIT       = 1 << 17
)

// io_uring_register() opcodes (enum io_uring_register_op).
const (
	IORING_REGISTER_BUFFERS             = 0
	IORING_UNREGISTER_BUFFERS           = 1
	IORING_REGISTER_FILES               = 2
	IORING_UNREGISTER_FILES             = 3
	IORING_REGISTER_EVENTFD             = 4
	IORING_UNREGISTER_EVENTFD           = 5
	IORING_REGISTER_FILES_UPDATE        = 6
	IORING_REGISTER_EVENTFD_ASYNC       = 7
	IORING_REGISTER_PROBE               = 8
	IORING_REGISTER_PERSONALITY         = 9
	IORING_UNREGISTER_PERSONALITY       = 10
	IORING_REGISTER_RESTRICTIONS        = 11
	IORING_REGISTER_ENABLE_RINGS        = 12
	IORING_REGISTER_FILES2              = 13
	IORING_REGISTER_FILES_UPDATE2       = 14
	IORING_REGISTER_BUFFERS2            = 15
	IORING_REGISTER_BUFFERS_UPDATE      = 16
	IORING_REGISTER_IOWQ_AFF            = 17 // 5.14
	IORING_UNREGISTER_IOWQ_AFF          = 18 // 5.14
	IORING_REGISTER_IOWQ_MAX_WORKERS    = 19 // 5.15
	IORING_REGISTER_RING_FDS            = 20 // 5.18
	IORING_UNREGISTER_RING_FDS          = 21
	IORING_REGISTER_PBUF_RING           = 22 // 5.19
	IORING_UNREGISTER_PBUF_RING         = 23
	IORING_REGISTER_SYNC_CANCEL         = 24 // 6.0
	IORING_REGISTER_FILE_ALLOC_RANGE    = 25 // 6.0
	IORING_REGISTER_PBUF_STATUS         = 26 // 6.8
	IORING_REGISTER_NAPI                = 27 // 6.9
	IORING_UNREGISTER_NAPI              = 28 // 6.9
	IORING_REGISTER_CLOCK               = 29 // 6.12
	IORING_REGISTER_CLONE_BUFFERS       = 30 // 6.12
	IORING_REGISTER_SEND_MSG_RING       = 31 // 6.13
	IORING_REGISTER_ZCRX_IFQ            = 32 // 6.15
	IORING_REGISTER_RESIZE_RINGS        = 33 // 6.13
	IORING_REGISTER_MEM_REGION          = 34 // 6.13
	IORING_REGISTER_QUERY               = 35 // 6.18
	IORING_REGISTER_USE_REGISTERED_RING = 1 << 31
)

// IORING_RSRC_REGISTER_SPARSE registers an all-empty file table (5.19).
const IORING_RSRC_REGISTER_SPARSE = 1 << 0

// IORING_REGISTER_FILES_SKIP leaves a slot unchanged in a files update.
const IORING_REGISTER_FILES_SKIP = -2

// IO_URING_OP_SUPPORTED is set in io_uring_probe_op.flags.
const IO_URING_OP_SUPPORTED = 1 << 0

// Provided buffer ring registration flags.
const (
	IOU_PBUF_RING_MMAP = 1 // 6.4
	IOU_PBUF_RING_INC  = 2 // 6.12
)

// NAPI registration opcodes and tracking strategies (6.13).
const (
	IO_URING_NAPI_REGISTER_OP   = 0
	IO_URING_NAPI_STATIC_ADD_ID = 1
	IO_URING_NAPI_STATIC_DEL_ID = 2

	IO_URING_NAPI_TRACKING_DYNAMIC  = 0
	IO_URING_NAPI_TRACKING_STATIC   = 1
	IO_URING_NAPI_TRACKING_INACTIVE = 255
)

// URING_CMD socket operations (enum io_uring_socket_op).
const (
	SOCKET_URING_OP_SIOCINQ    = 0
	SOCKET_URING_OP_SIOCOUTQ   = 1
	SOCKET_URING_OP_GETSOCKOPT = 2
	SOCKET_URING_OP_SETSOCKOPT = 3
)
