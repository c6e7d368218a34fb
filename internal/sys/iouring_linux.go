package sys

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup calls io_uring_setup(2). p is read and written back by the kernel.
// It goes through Syscall6: setup allocates memory and may start an SQPOLL
// thread, so it can sleep.
func Setup(entries uint32, p *Params) (int, error) {
	fd, _, e := unix.Syscall6(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0, 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// Enter calls io_uring_enter(2). arg, when not nil, is the EXT_ARG argument
// and must be off the Go heap (see Scratch) because it holds the address of a
// timespec; the caller sets IORING_ENTER_EXT_ARG in flags. It returns the raw
// errno (EINTR, EAGAIN, EBUSY, ...) for the caller to act on. Enter always
// uses Syscall6: with GETEVENTS it blocks, and even a pure submission may
// sleep on kernel locks or memory, so the Go scheduler must know.
func Enter(fd int, toSubmit, minComplete, flags uint32, arg *GeteventsArg) (int, error) {
	var size uintptr
	if arg != nil {
		size = unsafe.Sizeof(*arg)
	}
	n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete),
		uintptr(flags), uintptr(unsafe.Pointer(arg)), size)
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

// register calls io_uring_register(2) with a pointer argument. Registration
// pins pages and allocates, so it can sleep: Syscall6.
func register(fd int, op uint32, arg unsafe.Pointer, nr uint32) (int, error) {
	r, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(op), uintptr(arg), uintptr(nr), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// RegisterNoArg performs a register opcode that takes no argument
// (UNREGISTER_BUFFERS, UNREGISTER_FILES, UNREGISTER_EVENTFD, ...).
func RegisterNoArg(fd int, op uint32) error {
	_, err := register(fd, op, nil, 0)
	return err
}

// RegisterBuffers registers iovs as fixed buffers (IORING_REGISTER_BUFFERS).
// The iovecs must describe memory off the Go heap; the kernel pins it until
// IORING_UNREGISTER_BUFFERS or ring close.
func RegisterBuffers(fd int, iovs []Iovec) error {
	if len(iovs) == 0 {
		return unix.EINVAL
	}
	_, err := register(fd, IORING_REGISTER_BUFFERS, unsafe.Pointer(&iovs[0]), uint32(len(iovs)))
	runtime.KeepAlive(iovs)
	return err
}

// RegisterFilesSparse registers an empty fixed-file table of n slots
// (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE, 5.19).
func RegisterFilesSparse(fd int, n uint32) error {
	r := RsrcRegister{Nr: n, Flags: IORING_RSRC_REGISTER_SPARSE}
	_, err := register(fd, IORING_REGISTER_FILES2, unsafe.Pointer(&r), uint32(unsafe.Sizeof(r)))
	return err
}

// UpdateFiles installs fds into fixed-file slots starting at off
// (IORING_REGISTER_FILES_UPDATE2); -1 clears a slot and
// IORING_REGISTER_FILES_SKIP leaves it. It returns the number updated.
func UpdateFiles(fd int, off uint32, fds []int32) (int, error) {
	if len(fds) == 0 {
		return 0, nil
	}
	// The update struct carries the address of fds, a Go pointer hidden in
	// an integer: pin the array for the duration of the call.
	var pin runtime.Pinner
	pin.Pin(&fds[0])
	defer pin.Unpin()
	u := &RsrcUpdate2{Offset: off, Data: uint64(uintptr(unsafe.Pointer(&fds[0]))), Nr: uint32(len(fds))}
	return register(fd, IORING_REGISTER_FILES_UPDATE2, unsafe.Pointer(u), uint32(unsafe.Sizeof(*u)))
}

// RegisterRingFd registers the ring's own fd in its task's registered-ring
// table (IORING_REGISTER_RING_FDS, 5.18) and returns the index to pass to
// Enter with IORING_ENTER_REGISTERED_RING. The index is valid only on the
// thread (task) that registered it.
func RegisterRingFd(fd int) (int, error) {
	u := RsrcUpdate{Offset: ^uint32(0), Data: uint64(fd)}
	n, err := register(fd, IORING_REGISTER_RING_FDS, unsafe.Pointer(&u), 1)
	if err != nil {
		return -1, err
	}
	if n != 1 {
		return -1, unix.EINVAL
	}
	return int(u.Offset), nil
}

// UnregisterRingFd removes a registered ring index.
func UnregisterRingFd(fd int, index int) error {
	u := RsrcUpdate{Offset: uint32(index)}
	_, err := register(fd, IORING_UNREGISTER_RING_FDS, unsafe.Pointer(&u), 1)
	return err
}

// RegisterPbufRing registers a provided buffer ring (IORING_REGISTER_PBUF_RING).
func RegisterPbufRing(fd int, reg *BufReg) error {
	_, err := register(fd, IORING_REGISTER_PBUF_RING, unsafe.Pointer(reg), 1)
	return err
}

// UnregisterPbufRing unregisters the provided buffer ring of group bgid.
func UnregisterPbufRing(fd int, bgid uint16) error {
	reg := BufReg{Bgid: bgid}
	_, err := register(fd, IORING_UNREGISTER_PBUF_RING, unsafe.Pointer(&reg), 1)
	return err
}

// PbufStatus returns the kernel's head of the buffer ring of group bgid
// (IORING_REGISTER_PBUF_STATUS, 6.8).
func PbufStatus(fd int, bgid uint16) (uint32, error) {
	st := BufStatus{BufGroup: uint32(bgid)}
	if _, err := register(fd, IORING_REGISTER_PBUF_STATUS, unsafe.Pointer(&st), 1); err != nil {
		return 0, err
	}
	return st.Head, nil
}

// RegisterNAPI performs IORING_REGISTER_NAPI with n; the kernel writes the
// previous settings back into n for the register opcode.
func RegisterNAPI(fd int, n *NAPI) error {
	_, err := register(fd, IORING_REGISTER_NAPI, unsafe.Pointer(n), 1)
	return err
}

// UnregisterNAPI performs IORING_UNREGISTER_NAPI; the kernel writes the
// settings it cleared into n when n is not nil.
func UnregisterNAPI(fd int, n *NAPI) error {
	_, err := register(fd, IORING_UNREGISTER_NAPI, unsafe.Pointer(n), 1)
	return err
}

// RegisterIOWQAff sets the CPUs of the io-wq workers (IORING_REGISTER_IOWQ_AFF,
// 5.14) that serve the ring's requests: those of the calling thread's
// io_uring context, or of the SQ thread for an SQPOLL ring. The kernel
// copies set during the call; it refuses (EINVAL) CPUs outside the cpuset
// of the thread whose workers they are, and a calling thread that has no
// io-wq yet (one that never created or submitted to a ring).
func RegisterIOWQAff(fd int, set *unix.CPUSet) error {
	_, err := register(fd, IORING_REGISTER_IOWQ_AFF, unsafe.Pointer(set), uint32(unsafe.Sizeof(*set)))
	return err
}

// RegisterIOWQMaxWorkers performs IORING_REGISTER_IOWQ_MAX_WORKERS (5.15):
// counts holds the most bounded and unbounded io-wq workers (0 leaves one
// as it is), and the kernel writes the previous limits back into it.
func RegisterIOWQMaxWorkers(fd int, counts *[2]uint32) error {
	_, err := register(fd, IORING_REGISTER_IOWQ_MAX_WORKERS, unsafe.Pointer(counts), uint32(len(counts)))
	return err
}

// SyncCancel performs IORING_REGISTER_SYNC_CANCEL (6.0): it cancels the
// requests reg matches and, while one of them is running in an io-wq worker
// (the kernel's -EALREADY), waits for it to end, up to reg.Timeout. It
// returns the raw errno: ENOENT (nothing matched), ETIME (one still
// running at the timeout), EINTR (a signal), EINVAL (flags this kernel
// lacks, or no such opcode before 6.0).
func SyncCancel(fd int, reg *SyncCancelReg) error {
	_, err := register(fd, IORING_REGISTER_SYNC_CANCEL, unsafe.Pointer(reg), 1)
	return err
}

// RegisterProbe fills p with the opcodes this kernel supports.
func RegisterProbe(fd int, p *Probe) error {
	_, err := register(fd, IORING_REGISTER_PROBE, unsafe.Pointer(p), ProbeOps)
	return err
}

// RingMem is the shared memory of one ring: the SQ and CQ rings mapped from
// the ring fd, the SQE array, and a Scratch page of off-heap arguments.
// Fields that the kernel updates concurrently are *atomic.Uint32 pointing
// into the mapping; the rest are fixed after setup.
type RingMem struct {
	SQHead    *atomic.Uint32 // written by the kernel (store-release), read with Load (acquire)
	SQTail    *atomic.Uint32 // written by us (Store: release), read by the kernel (acquire)
	SQFlags   *atomic.Uint32 // IORING_SQ_*; written by the kernel
	SQDropped *atomic.Uint32 // invalid SQEs the kernel skipped
	SQMask    uint32
	SQEntries uint32
	SQArray   []uint32 // nil with IORING_SETUP_NO_SQARRAY
	SQEs      []SQE

	CQHead     *atomic.Uint32 // written by us (release), read by the kernel
	CQTail     *atomic.Uint32 // written by the kernel (release), read with Load (acquire)
	CQOverflow *atomic.Uint32 // CQEs dropped (only without IORING_FEAT_NODROP)
	CQFlags    *atomic.Uint32 // IORING_CQ_*; written by us
	CQMask     uint32
	CQEntries  uint32
	CQEs       []CQE

	Scratch *Scratch // off-heap page for EXT_ARG and small op arguments

	sqRing, cqRing, sqes, scratch []byte
}

// TimespecSlots is the number of Timespec slots in a Scratch page.
const TimespecSlots = 200

// Scratch is one off-heap page holding small arguments the kernel reads by
// address: the EXT_ARG struct and its timespec, and a pool of timespecs for
// TIMEOUT and LINK_TIMEOUT SQEs.
type Scratch struct {
	Wait   GeteventsArg
	WaitTS Timespec
	TS     [TimespecSlots]Timespec
}

// MapRing maps the rings of the io_uring fd described by p (as returned by
// Setup) and a Scratch page. RingMem has 64-byte SQEs and 16-byte CQEs: a
// ring set up with IORING_SETUP_SQE128, CQE32 or CQE_MIXED is refused
// (EINVAL).
func MapRing(fd int, p *Params) (*RingMem, error) {
	if wide := p.Flags & (IORING_SETUP_SQE128 | IORING_SETUP_CQE32 | IORING_SETUP_CQE_MIXED); wide != 0 {
		return nil, fmt.Errorf("sys: map ring with setup flags %#x (128-byte SQEs or 32-byte CQEs): %w", wide, unix.EINVAL)
	}
	m := &RingMem{}
	var err error
	mapped := false
	defer func() {
		// The error returns hand back nil: unmap what was mapped through m.
		if !mapped {
			m.Unmap()
		}
	}()
	sqSize := uintptr(p.SQOff.Array) + uintptr(p.SQEntries)*4
	if p.Flags&IORING_SETUP_NO_SQARRAY != 0 {
		sqSize = uintptr(p.SQOff.Flags) + 64 // head..flags area; the array is absent
	}
	cqSize := uintptr(p.CQOff.CQEs) + uintptr(p.CQEntries)*unsafe.Sizeof(CQE{})
	single := p.Features&IORING_FEAT_SINGLE_MMAP != 0
	if single {
		sqSize = max(sqSize, cqSize)
		cqSize = sqSize
	}
	if m.sqRing, err = mmapRing(fd, IORING_OFF_SQ_RING, sqSize); err != nil {
		return nil, err
	}
	m.cqRing = m.sqRing
	if !single {
		if m.cqRing, err = mmapRing(fd, IORING_OFF_CQ_RING, cqSize); err != nil {
			return nil, err
		}
	}
	if m.sqes, err = mmapRing(fd, IORING_OFF_SQES, uintptr(p.SQEntries)*unsafe.Sizeof(SQE{})); err != nil {
		return nil, err
	}
	sq := unsafe.Pointer(&m.sqRing[0])
	cq := unsafe.Pointer(&m.cqRing[0])
	u32 := func(base unsafe.Pointer, off uint32) *atomic.Uint32 {
		return (*atomic.Uint32)(unsafe.Add(base, off))
	}
	m.SQHead = u32(sq, p.SQOff.Head)
	m.SQTail = u32(sq, p.SQOff.Tail)
	m.SQFlags = u32(sq, p.SQOff.Flags)
	m.SQDropped = u32(sq, p.SQOff.Dropped)
	m.SQMask = *(*uint32)(unsafe.Add(sq, p.SQOff.RingMask))
	m.SQEntries = *(*uint32)(unsafe.Add(sq, p.SQOff.RingEntries))
	if p.Flags&IORING_SETUP_NO_SQARRAY == 0 {
		m.SQArray = unsafe.Slice((*uint32)(unsafe.Add(sq, p.SQOff.Array)), p.SQEntries)
	}
	m.SQEs = unsafe.Slice((*SQE)(unsafe.Pointer(&m.sqes[0])), p.SQEntries)

	m.CQHead = u32(cq, p.CQOff.Head)
	m.CQTail = u32(cq, p.CQOff.Tail)
	m.CQOverflow = u32(cq, p.CQOff.Overflow)
	m.CQFlags = u32(cq, p.CQOff.Flags)
	m.CQMask = *(*uint32)(unsafe.Add(cq, p.CQOff.RingMask))
	m.CQEntries = *(*uint32)(unsafe.Add(cq, p.CQOff.RingEntries))
	m.CQEs = unsafe.Slice((*CQE)(unsafe.Add(cq, p.CQOff.CQEs)), p.CQEntries)

	if m.scratch, _, err = MapAnon(int(unsafe.Sizeof(Scratch{})), false); err != nil {
		return nil, err
	}
	m.Scratch = (*Scratch)(unsafe.Pointer(&m.scratch[0]))
	m.Scratch.Wait.Ts = uint64(uintptr(unsafe.Pointer(&m.Scratch.WaitTS)))
	mapped = true
	return m, nil
}

// Unmap releases the mappings. The ring fd may be closed before or after.
//
// Owner goroutine of the ring.
func (m *RingMem) Unmap() error {
	var first error
	// The rings are mappings of the ring fd, the scratch page MapAnon's.
	unmap := func(b []byte, release func([]byte) error) {
		if b == nil {
			return
		}
		if err := release(b); err != nil && first == nil {
			first = err
		}
	}
	unmap(m.sqes, munmap)
	if m.cqRing != nil && (m.sqRing == nil || &m.cqRing[0] != &m.sqRing[0]) {
		unmap(m.cqRing, munmap)
	}
	unmap(m.sqRing, munmap)
	unmap(m.scratch, Unmap)
	*m = RingMem{}
	return first
}

func mmapRing(fd int, off int64, size uintptr) ([]byte, error) {
	p, err := unix.MmapPtr(fd, off, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return unsafe.Slice((*byte)(p), size), nil
}

// BufRingMem is the off-heap memory of a provided buffer ring: entries
// shared with the kernel, and the tail overlaid on entry 0.
type BufRingMem struct {
	Entries []BufEntry
	mem     []byte
	// tailWord is the 32-bit word at byte 12 of entry 0: entry 0's bid and
	// the ring tail (struct io_uring_buf_ring). Go has no 16-bit atomic
	// store, so the tail is published with a 32-bit store that rewrites
	// bid 0 with its current value.
	tailWord *atomic.Uint32
}

// NewBufRingMem maps a buffer ring of n entries (a power of two, at most
// 32768).
func NewBufRingMem(n int) (*BufRingMem, error) {
	if n <= 0 || n > 1<<15 || n&(n-1) != 0 {
		return nil, fmt.Errorf("sys: buffer ring entries %d: %w", n, unix.EINVAL)
	}
	mem, _, err := MapAnon(n*int(unsafe.Sizeof(BufEntry{})), false)
	if err != nil {
		return nil, err
	}
	b := &BufRingMem{mem: mem}
	b.Entries = unsafe.Slice((*BufEntry)(unsafe.Pointer(&mem[0])), n)
	b.tailWord = (*atomic.Uint32)(unsafe.Pointer(&mem[12]))
	return b, nil
}

// Addr is the ring address for BufReg.RingAddr.
//
// Any goroutine until Unmap, which clears b without synchronisation.
func (b *BufRingMem) Addr() uint64 { return SliceAddr(b.mem) }

// PublishTail makes entries up to tail visible to the kernel. The atomic
// store is a release that pairs with the kernel's smp_load_acquire of
// br->tail in io_ring_buffer_select: entry writes before it are seen by the
// kernel once it sees the new tail.
//
// Owner goroutine of the buffer ring.
func (b *BufRingMem) PublishTail(tail uint16) {
	bid0 := uint32(b.Entries[0].Bid)
	if nativeLittle {
		b.tailWord.Store(uint32(tail)<<16 | bid0)
	} else {
		b.tailWord.Store(bid0<<16 | uint32(tail))
	}
}

// Tail reads the published tail.
//
// Owner goroutine of the buffer ring.
func (b *BufRingMem) Tail() uint16 {
	w := b.tailWord.Load()
	if nativeLittle {
		return uint16(w >> 16)
	}
	return uint16(w)
}

// Unmap releases the ring memory; unregister it from the ring first.
//
// Owner goroutine of the buffer ring.
func (b *BufRingMem) Unmap() error {
	err := Unmap(b.mem)
	*b = BufRingMem{}
	return err
}
