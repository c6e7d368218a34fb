package uring

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// Arena is a bump allocator over off-heap memory (MapAnon) for arguments the
// kernel reads by address: socket addresses, msghdrs, iovecs, timespecs,
// small send buffers. It never frees individual items; Reset reuses the whole
// arena and Close unmaps it. An Arena belongs to one goroutine.
type Arena struct {
	mem []byte
	off int
}

// NewArena maps an arena of at least size bytes. Any goroutine.
func NewArena(size int) (*Arena, error) {
	mem, _, err := sys.MapAnon(size, false)
	if err != nil {
		return nil, err
	}
	return &Arena{mem: mem[:cap(mem)]}, nil
}

// Bytes returns n zeroed bytes aligned to 8, or nil when the arena is full.
//
// The arena's goroutine.
func (a *Arena) Bytes(n int) []byte {
	start := (a.off + 7) &^ 7
	if n < 0 || start+n > len(a.mem) {
		return nil
	}
	a.off = start + n
	b := a.mem[start : start+n : start+n]
	clear(b)
	return b
}

// Timespec returns a zeroed Timespec, or nil when the arena is full.
//
// The arena's goroutine.
func (a *Arena) Timespec() *Timespec {
	b := a.Bytes(sys.SizeOf[sys.Timespec]())
	if b == nil {
		return nil
	}
	return (*Timespec)(sys.As[sys.Timespec](b))
}

// Msghdr returns a msghdr for PrepSendmsg describing bufs and optional
// encoded destination address name, or nil when the arena is full. name and
// bufs must come from MapAnon, an Arena or a BufRing (it panics with
// ErrNotOffHeap otherwise), since the kernel reads them after Submit.
//
// The arena's goroutine.
func (a *Arena) Msghdr(name []byte, bufs ...[]byte) *Msghdr {
	kbuf(name)
	for _, b := range bufs {
		kbuf(b)
	}
	mb := a.Bytes(sys.SizeOf[sys.Msghdr]())
	ib := a.Bytes(sys.SizeOf[sys.Iovec]() * len(bufs))
	if mb == nil || (len(bufs) > 0 && ib == nil) {
		return nil
	}
	m := sys.As[sys.Msghdr](mb)
	iovs := sys.AsSlice[sys.Iovec](ib, len(bufs))
	for i, b := range bufs {
		iovs[i] = sys.Iovec{Base: sys.SliceAddr(b), Len: uint64(len(b))}
	}
	if len(bufs) > 0 {
		m.Iov = sys.SliceAddr(ib)
		m.Iovlen = uint64(len(bufs))
	}
	if len(name) > 0 {
		m.Name = sys.SliceAddr(name)
		m.Namelen = uint32(len(name))
	}
	return (*Msghdr)(m)
}

// Sockaddr returns ap encoded as a socket address in arena memory, for
// PrepConnect and Msghdr, or an error when the arena is full.
//
// The arena's goroutine.
func (a *Arena) Sockaddr(ap netip.AddrPort) ([]byte, error) {
	b := a.Bytes(SockaddrMax)
	if b == nil {
		return nil, fmt.Errorf("uring: arena full: %w", unix.ENOMEM)
	}
	n, err := EncodeSockaddr(b, ap)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

// Reset makes the whole arena available again; everything handed out before
// must no longer be in use by the kernel.
//
// The arena's goroutine.
func (a *Arena) Reset() { a.off = 0 }

// Close unmaps the arena.
//
// The arena's goroutine.
func (a *Arena) Close() error {
	err := sys.Unmap(a.mem)
	a.mem, a.off = nil, 0
	return err
}

// SockaddrMax is the largest encoding EncodeSockaddr produces
// (struct sockaddr_in6).
const SockaddrMax = 28

// EncodeSockaddr writes ap as struct sockaddr_in (16 bytes) or sockaddr_in6
// (28 bytes; IPv6 zones are refused) into dst and returns the length. It
// does not allocate. Any goroutine.
func EncodeSockaddr(dst []byte, ap netip.AddrPort) (int, error) {
	addr := ap.Addr()
	switch {
	case addr.Is4():
		if len(dst) < 16 {
			return 0, fmt.Errorf("uring: sockaddr buffer %d bytes: %w", len(dst), unix.EINVAL)
		}
		clear(dst[:16])
		binary.NativeEndian.PutUint16(dst[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(dst[2:], ap.Port())
		a4 := addr.As4()
		copy(dst[4:8], a4[:])
		return 16, nil
	case addr.Is6():
		if len(dst) < 28 {
			return 0, fmt.Errorf("uring: sockaddr buffer %d bytes: %w", len(dst), unix.EINVAL)
		}
		if addr.Zone() != "" {
			return 0, fmt.Errorf("uring: IPv6 zones not supported: %w", unix.EINVAL)
		}
		clear(dst[:28])
		binary.NativeEndian.PutUint16(dst[0:], unix.AF_INET6)
		binary.BigEndian.PutUint16(dst[2:], ap.Port())
		a16 := addr.As16()
		copy(dst[8:24], a16[:])
		return 28, nil
	}
	return 0, fmt.Errorf("uring: invalid address %v: %w", ap, unix.EINVAL)
}
