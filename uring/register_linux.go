package uring

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// open returns os.ErrClosed after Close: the ring fd number may belong to
// another file by then, and must not be registered on.
func (r *Ring) open() error {
	if r.closed {
		return os.ErrClosed
	}
	return nil
}

func regErr(feature, min string, err error) error {
	serr := os.NewSyscallError("io_uring_register", err)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return unsupported(feature, min, serr)
	}
	return serr
}

// RegisterBuffers registers bufs as fixed buffers 0..len(bufs)-1 for
// PrepReadFixed, PrepWriteFixed and PrepSendZC. Each buffer must lie inside
// one live mapping from MapAnon (or an Arena): anything else fails with
// ErrNotOffHeap before the kernel sees it. The kernel pins the pages until
// UnregisterBuffers or Close (RLIMIT_MEMLOCK applies without CAP_IPC_LOCK);
// unmap the memory only after that. Owner goroutine.
func (r *Ring) RegisterBuffers(bufs [][]byte) error {
	if err := r.open(); err != nil {
		return err
	}
	iovs := make([]sys.Iovec, len(bufs))
	for i, b := range bufs {
		if len(b) == 0 {
			return fmt.Errorf("uring: fixed buffer %d is empty: %w", i, unix.EINVAL)
		}
		if !sys.OffHeapBytes(b) {
			return fmt.Errorf("fixed buffer %d: %w", i, ErrNotOffHeap)
		}
		iovs[i] = sys.Iovec{Base: sys.SliceAddr(b), Len: uint64(len(b))}
	}
	if err := sys.RegisterBuffers(r.fd, iovs); err != nil {
		return os.NewSyscallError("io_uring_register", err)
	}
	return nil
}

// UnregisterBuffers drops the fixed buffers. Owner goroutine.
func (r *Ring) UnregisterBuffers() error {
	if err := r.open(); err != nil {
		return err
	}
	if err := sys.RegisterNoArg(r.fd, sys.IORING_UNREGISTER_BUFFERS); err != nil {
		return os.NewSyscallError("io_uring_register", err)
	}
	return nil
}

// RegisterFiles registers an empty (sparse) fixed-file table of n slots
// (5.19), for direct accept/socket (PrepAcceptMultishot with direct) and
// FlagFixedFile. An n of 0 or less, or above 2^32-1 (the kernel's count is
// 32-bit), is refused with EINVAL before the kernel sees it. Owner
// goroutine.
func (r *Ring) RegisterFiles(n int) error {
	if err := r.open(); err != nil {
		return err
	}
	// The kernel's count is 32-bit: a larger n must not reach it cut to
	// its low bits (1<<32 + 4 registered 4 slots).
	if n <= 0 || n > math.MaxUint32 {
		return fmt.Errorf("uring: %d fixed files: %w", n, unix.EINVAL)
	}
	if err := sys.RegisterFilesSparse(r.fd, uint32(n)); err != nil {
		return regErr("IORING_RSRC_REGISTER_SPARSE", "5.19", err)
	}
	return nil
}

// UpdateFiles installs fds into fixed-file slots off, off+1, ... (-1 clears a
// slot). It returns the number of slots updated: all of them, or those
// before the first fd the kernel refused, with the kernel's error for that
// one (EBADF for an fd that is not open). A negative off, slots past
// 2^32-1 (EINVAL) or an fd outside int32 (EBADF) update none. The slots
// hold their own reference: the caller may close its fds afterwards. Owner
// goroutine.
func (r *Ring) UpdateFiles(off int, fds []int) (int, error) {
	if err := r.open(); err != nil {
		return 0, err
	}
	// The kernel's offset is 32-bit and its fds int32: values beyond must
	// not reach it cut to their low bits, which name another slot or fd.
	if off < 0 || uint64(off)+uint64(len(fds)) > math.MaxUint32 {
		return 0, fmt.Errorf("uring: fixed-file slots %d..%d: %w", off, off+len(fds)-1, unix.EINVAL)
	}
	f32 := make([]int32, len(fds))
	for i, fd := range fds {
		if fd < math.MinInt32 || fd > math.MaxInt32 {
			return 0, fmt.Errorf("uring: fd %d: %w", fd, unix.EBADF)
		}
		f32[i] = int32(fd)
	}
	// The kernel stops at the first fd it cannot install and, when it
	// installed some before it, reports only their number: ask again from
	// that fd to get its error.
	done := 0
	for done < len(f32) {
		n, err := sys.UpdateFiles(r.fd, uint32(off+done), f32[done:])
		if err != nil {
			return done, os.NewSyscallError("io_uring_register", err)
		}
		if n <= 0 {
			return done, fmt.Errorf("uring: fixed files: the kernel updated none of %d", len(f32)-done)
		}
		done += n
	}
	return done, nil
}

// UnregisterFiles drops the fixed-file table. Owner goroutine.
func (r *Ring) UnregisterFiles() error {
	if err := r.open(); err != nil {
		return err
	}
	if err := sys.RegisterNoArg(r.fd, sys.IORING_UNREGISTER_FILES); err != nil {
		return os.NewSyscallError("io_uring_register", err)
	}
	return nil
}

// RegisterNAPI enables NAPI busy polling with c and returns the previous
// settings (6.9; Static needs 6.13). Busy polling burns CPU while waiting, and
// does nothing for sockets without NAPI ids (loopback). Owner goroutine.
func (r *Ring) RegisterNAPI(c NAPIConfig) (prev NAPIConfig, err error) {
	if err := r.open(); err != nil {
		return prev, err
	}
	// Whole microseconds, rounded up: truncated, a timeout below 1µs would
	// be 0, no busy polling. Negative is 0.
	n := sys.NAPI{
		BusyPollTo: sys.CeilUnits(c.BusyPollTimeout, time.Microsecond, math.MaxUint32),
		Opcode:     sys.IO_URING_NAPI_REGISTER_OP,
		OpParam:    sys.IO_URING_NAPI_TRACKING_DYNAMIC,
	}
	if c.PreferBusyPoll {
		n.PreferBusyPoll = 1
	}
	if c.Static {
		n.OpParam = sys.IO_URING_NAPI_TRACKING_STATIC
	}
	if err := sys.RegisterNAPI(r.fd, &n); err != nil {
		if c.Static && errors.Is(err, unix.EINVAL) {
			return prev, unsupported("IORING_REGISTER_NAPI static tracking", "6.13", os.NewSyscallError("io_uring_register", err))
		}
		return prev, regErr("IORING_REGISTER_NAPI", "6.9", err)
	}
	r.napiStatic = c.Static
	// The kernel wrote the previous settings back into n.
	prev.BusyPollTimeout = time.Duration(n.BusyPollTo) * time.Microsecond
	prev.PreferBusyPoll = n.PreferBusyPoll != 0
	prev.Static = n.OpParam == sys.IO_URING_NAPI_TRACKING_STATIC
	return prev, nil
}

// UnregisterNAPI disables busy polling. Owner goroutine.
func (r *Ring) UnregisterNAPI() error {
	if err := r.open(); err != nil {
		return err
	}
	var n sys.NAPI
	if err := sys.UnregisterNAPI(r.fd, &n); err != nil {
		return regErr("IORING_UNREGISTER_NAPI", "6.9", err)
	}
	r.napiStatic = false
	return nil
}

// napiID adds or removes (op) a static NAPI id. Only a ring registered with
// static tracking takes ids; that registration succeeded, so the kernel has
// static tracking, and its EINVAL is an invalid id, not a missing feature.
func (r *Ring) napiID(op uint8, id uint32) error {
	if err := r.open(); err != nil {
		return err
	}
	if !r.napiStatic {
		return fmt.Errorf("uring: NAPI ids need RegisterNAPI with NAPIConfig.Static: %w", unix.EINVAL)
	}
	n := sys.NAPI{Opcode: op, OpParam: id}
	if err := sys.RegisterNAPI(r.fd, &n); err != nil {
		return os.NewSyscallError("io_uring_register", err)
	}
	return nil
}

// AddNAPIID adds a NAPI id (from SO_INCOMING_NAPI_ID, >= 257) to a ring
// registered with NAPIConfig.Static (6.13). A ring not registered so, or
// an id outside the NAPI range, gives EINVAL (RegisterNAPI reports a
// kernel without static tracking). Owner goroutine.
func (r *Ring) AddNAPIID(id uint32) error {
	return r.napiID(sys.IO_URING_NAPI_STATIC_ADD_ID, id)
}

// RemoveNAPIID removes a NAPI id added with AddNAPIID (ENOENT if it was
// not; EINVAL as for AddNAPIID). Owner goroutine.
func (r *Ring) RemoveNAPIID(id uint32) error {
	return r.napiID(sys.IO_URING_NAPI_STATIC_DEL_ID, id)
}
