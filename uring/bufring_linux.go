package uring

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// BufRing is a provided buffer ring (IORING_REGISTER_PBUF_RING, 5.19): a
// group of equal-sized buffers in off-heap memory from which the kernel picks
// one per receive (FlagBufferSelect, PrepRecvMultishot). Buffer ids are
// 0..Entries()-1. After handling a buffer, give it back with Recycle and
// publish with Commit. Owner goroutine of its Ring.
type BufRing struct {
	r       *Ring
	group   uint16
	mem     *sys.BufRingMem
	slab    []byte
	kind    PageKind
	bufSize int
	mask    uint16
	tail    uint16 // local tail, published by Commit
	ack     uint16 // ring position of the oldest buffer not yet reported by BundleIDs
}

// SetupBufRing creates and registers buffer group group with entries buffers
// (a power of two, at most 32768) of bufSize bytes each, all initially given
// to the kernel. The buffers are off-heap, on huge pages when the slab is at
// least a huge page (sys.HugePageSize, 2 MiB on amd64) and they can be had
// (as MapAnon). Owner goroutine.
func (r *Ring) SetupBufRing(group uint16, entries int, bufSize int) (*BufRing, error) {
	return r.SetupBufRingPages(group, entries, bufSize, true)
}

// SetupBufRingPages is SetupBufRing with huge false keeping the buffers on
// base pages (for a caller told not to use huge pages). Owner goroutine.
func (r *Ring) SetupBufRingPages(group uint16, entries int, bufSize int, huge bool) (*BufRing, error) {
	if err := r.open(); err != nil {
		return nil, err
	}
	if bufSize <= 0 || uint64(bufSize) > 1<<31 {
		return nil, fmt.Errorf("uring: buffer size %d: %w", bufSize, unix.EINVAL)
	}
	if _, dup := r.bufRings[group]; dup {
		return nil, fmt.Errorf("uring: buffer group %d already set up: %w", group, unix.EEXIST)
	}
	mem, err := sys.NewBufRingMem(entries)
	if err != nil {
		return nil, err
	}
	slab, kind, err := sys.MapAnon(entries*bufSize, huge && entries*bufSize >= sys.HugePageSize())
	if err != nil {
		mem.Unmap()
		return nil, err
	}
	b := &BufRing{r: r, group: group, mem: mem, slab: slab, kind: kind, bufSize: bufSize, mask: uint16(entries - 1)}
	for i := range entries {
		b.Recycle(uint16(i))
	}
	b.Commit()
	reg := sys.BufReg{RingAddr: mem.Addr(), RingEntries: uint32(entries), Bgid: group}
	if err := sys.RegisterPbufRing(r.fd, &reg); err != nil {
		sys.Unmap(slab)
		mem.Unmap()
		if err == unix.EINVAL {
			return nil, unsupported("IORING_REGISTER_PBUF_RING", "5.19", os.NewSyscallError("io_uring_register", err))
		}
		return nil, os.NewSyscallError("io_uring_register", err)
	}
	if r.bufRings == nil {
		r.bufRings = make(map[uint16]*BufRing)
	}
	r.bufRings[group] = b
	return b, nil
}

// Group returns the buffer group id.
//
// Any goroutine.
func (b *BufRing) Group() uint16 { return b.group }

// Entries returns the number of buffers.
//
// Any goroutine.
func (b *BufRing) Entries() int { return int(b.mask) + 1 }

// BufSize returns the size of each buffer.
//
// Any goroutine.
func (b *BufRing) BufSize() int { return b.bufSize }

// PageKind says which pages back the buffers.
//
// Any goroutine.
func (b *BufRing) PageKind() PageKind { return b.kind }

// Mbind binds the buffer memory to NUMA node (MPOL_PREFERRED); os.ErrClosed
// after Close.
//
// Any goroutine until Close of the BufRing or its Ring (see Buf).
func (b *BufRing) Mbind(node int) error {
	if b.slab == nil {
		return os.ErrClosed
	}
	return sys.Mbind(b.slab, node)
}

// Buf returns buffer id (full size; slice it to the CQE's Res), nil after
// Close. It does not allocate.
//
// Any goroutine until Close of the BufRing or its Ring: Close unmaps the
// buffers and clears the BufRing without synchronisation, so another
// goroutine must be done calling Buf, and with the slices it returned,
// before the owner closes.
func (b *BufRing) Buf(id uint16) []byte {
	if b.slab == nil {
		return nil
	}
	off := int(id&b.mask) * b.bufSize
	return b.slab[off : off+b.bufSize : off+b.bufSize]
}

// Recycle queues buffer id to be given back to the kernel; Commit publishes.
// Each id must be recycled once per use. After Close (also the ring's) it
// does nothing. Does not allocate.
//
// Owner goroutine.
func (b *BufRing) Recycle(id uint16) {
	if b.mem == nil {
		return
	}
	e := &b.mem.Entries[b.tail&b.mask]
	e.Addr = sys.SliceAddr(b.Buf(id))
	e.Len = uint32(b.bufSize)
	e.Bid = id & b.mask
	b.tail++
}

// Commit publishes recycled buffers to the kernel with one atomic store;
// after Close it does nothing.
//
// Owner goroutine.
func (b *BufRing) Commit() {
	if b.mem == nil {
		return
	}
	b.mem.PublishTail(b.tail)
}

// Head returns the kernel's consumption head of the ring
// (IORING_REGISTER_PBUF_STATUS, 6.8): buffers between Head and the committed
// tail are available to the kernel.
//
// Owner goroutine.
func (b *BufRing) Head() (uint16, error) {
	if b.mem == nil || b.r.closed {
		return 0, os.ErrClosed
	}
	h, err := sys.PbufStatus(b.r.fd, b.group)
	if err != nil {
		if err == unix.EINVAL {
			return 0, unsupported("IORING_REGISTER_PBUF_STATUS", "6.8", os.NewSyscallError("io_uring_register", err))
		}
		return 0, os.NewSyscallError("io_uring_register", err)
	}
	return uint16(h), nil
}

// Available returns the number of buffers the kernel can still pick (one
// system call).
//
// Owner goroutine.
func (b *BufRing) Available() (int, error) {
	h, err := b.Head()
	if err != nil {
		return 0, err
	}
	return int(b.mem.Tail() - h), nil
}

// BundleIDs appends to dst the ids of the buffers a receive CQE of this group
// consumed and returns dst: one id for a plain receive, ceil(Res/BufSize)
// consecutive ring entries for a bundle. The kernel consumes ring entries in
// order, so BundleIDs must see every buffer-carrying CQE of this group, in
// completion order, and ids must be recycled only after BundleIDs reported
// them. It returns an error if the CQE does not match the ring position,
// and os.ErrClosed after Close.
//
// Owner goroutine.
func (b *BufRing) BundleIDs(c CQE, dst []uint16) ([]uint16, error) {
	if b.mem == nil {
		return dst, os.ErrClosed
	}
	id, ok := c.BufferID()
	if !ok {
		return dst, nil
	}
	if got := b.mem.Entries[b.ack&b.mask].Bid; got != id {
		return dst, fmt.Errorf("uring: buffer ring %d out of step: CQE buffer %d, ring entry %d", b.group, id, got)
	}
	n := 1
	if c.Res > 0 {
		n = (int(c.Res) + b.bufSize - 1) / b.bufSize
	}
	for i := 0; i < n; i++ {
		dst = append(dst, b.mem.Entries[(b.ack+uint16(i))&b.mask].Bid)
	}
	b.ack += uint16(n)
	return dst, nil
}

// abandon ends b after its ring has closed without the kernel confirming
// the cancel of the requests in flight (Ring.Close): the buffers, which such
// a request may still pick and write into by address, stay mapped for the
// life of the process (counted by LeftMappedBytes). The ring
// of entries is unmapped: the kernel pinned its pages when it was registered
// and reads it through its own mapping of them (io_uring/kbuf.c,
// io_register_pbuf_ring), never through this address, and writes it only
// for incremental consumption (IOU_PBUF_RING_INC), which is not used. It
// returns the bytes left mapped.
//
// Owner goroutine.
func (b *BufRing) abandon() int64 {
	delete(b.r.bufRings, b.group)
	b.mem.Unmap()
	n := int64(cap(b.slab))
	leftBytes.Add(n)
	b.mem, b.slab = nil, nil
	return n
}

// Close unregisters the group and frees its memory. No request may still
// select from it. If the kernel refuses to unregister it (EEXIST from a
// thread other than a SingleIssuer ring's owner), the group stays
// registered and its memory mapped, and Close may be called again.
//
// Owner goroutine.
func (b *BufRing) Close() error {
	if b.mem == nil {
		return os.ErrClosed
	}
	var first error
	if !b.r.closed {
		if err := sys.UnregisterPbufRing(b.r.fd, b.group); err != nil {
			// Still registered: the kernel may pick these buffers, so
			// their memory must not be freed (or reused by a mapping).
			return os.NewSyscallError("io_uring_register", err)
		}
	}
	delete(b.r.bufRings, b.group)
	if err := b.mem.Unmap(); err != nil && first == nil {
		first = err
	}
	if err := sys.Unmap(b.slab); err != nil && first == nil {
		first = err
	}
	b.mem, b.slab = nil, nil
	return first
}
