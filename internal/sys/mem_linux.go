package sys

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// thpEnabledPath is the sysfs switch for transparent huge pages.
const thpEnabledPath = "/sys/kernel/mm/transparent_hugepage/enabled"

// thpSizeEnabledPath is the switch for transparent huge pages of
// HugePageSize (6.8+: always, madvise, never, or inherit thpEnabledPath's).
func thpSizeEnabledPath() string {
	return fmt.Sprintf("/sys/kernel/mm/transparent_hugepage/hugepages-%dkB/enabled", HugePageSize()>>10)
}

// hugetlbFlags is MAP_HUGETLB asking for pages of size (a power of two):
// log2(size) in the MAP_HUGE_SHIFT bits, MAP_HUGE_2MB for 2 MiB.
func hugetlbFlags(size int) int {
	return unix.MAP_HUGETLB | bits.TrailingZeros(uint(size))<<unix.MAP_HUGE_SHIFT
}

// MapAnon returns length bytes of anonymous, zeroed, page-aligned, read-write
// memory off the Go heap, so the garbage collector neither moves nor frees it
// and the kernel may keep using it after a system call returns.
//
// With huge=false the mapping uses base pages. With huge=true the length is
// rounded up to HugePageSize() and MapAnon tries, in order, MAP_HUGETLB with
// pages of that size (needs pages in its hugetlb pool,
// /sys/kernel/mm/hugepages/hugepages-<size in kB>kB, room under the
// process's hugetlb cgroup limit, and MADV_POPULATE_WRITE, 5.14), a
// mapping aligned to it with MADV_HUGEPAGE (transparent huge pages not
// disabled), then base pages; the PageKind result says which it got.
// Hugetlb pages are faulted in by MapAnon, on the NUMA node the calling
// thread's policy gives (its own by default; Mbind moves them); the others
// at their first touch.
//
// The returned slice has len == length and cap == the mapped size. Release it
// with Unmap, passing this slice or a reslice that keeps its start and cap.
// The mapping is recorded for OffHeap until Unmap. Safe for concurrent use.
func MapAnon(length int, huge bool) ([]byte, PageKind, error) {
	if length <= 0 {
		return nil, PageSmall, fmt.Errorf("sys: map %d bytes: %w", length, unix.EINVAL)
	}
	if !huge {
		size := roundUp(length, os.Getpagesize())
		p, err := mmapAnon(size, 0)
		if err != nil {
			return nil, PageSmall, err
		}
		addSpan(uintptr(p), uintptr(size))
		return unsafe.Slice((*byte)(p), size)[:length], PageSmall, nil
	}
	hps := HugePageSize()
	size := roundUp(length, hps)
	// The size in the flags: bare MAP_HUGETLB takes the host's default
	// huge page size, which may be 1 GiB (default_hugepagesz=1G), and then
	// the mapping is not the size recorded here and Unmap cannot release it.
	if p, err := mmapAnon(size, hugetlbFlags(hps)); err == nil {
		b := unsafe.Slice((*byte)(p), size)
		// The mmap reserved the pages from the pool, but a hugetlb
		// cgroup (hugetlb.<size>.max; Kubernetes sets it for every
		// pod, 0 unless the pod asks for huge pages) is charged at the
		// fault, and a fault past its limit is a SIGBUS, which kills a
		// Go process. Faulting the pages in now turns that into an
		// error (EFAULT) and MapAnon goes on to the next kind of pages.
		if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err == nil {
			addSpan(uintptr(p), uintptr(size))
			return b[:length], PageHuge, nil
		}
		if err := unix.MunmapPtr(p, uintptr(size)); err != nil {
			return nil, PageSmall, os.NewSyscallError("munmap", err)
		}
	}
	p, err := mmapAligned(size, hps)
	if err != nil {
		return nil, PageSmall, err
	}
	addSpan(uintptr(p), uintptr(size))
	b := unsafe.Slice((*byte)(p), size)
	kind := PageSmall
	if thpAvailable() && unix.Madvise(b, unix.MADV_HUGEPAGE) == nil {
		kind = PageTHP
	}
	return b[:length], kind, nil
}

// Unmap releases memory returned by MapAnon. The slice must start where
// MapAnon's did and keep its cap: anything else (a part of a mapping, one
// unmapped already, memory MapAnon did not map) is refused with EINVAL and
// nothing is unmapped, since OffHeap would go on vouching for a range whose
// pages are gone, or forget pages still mapped. Unmapping memory the kernel
// still uses (registered buffers, a registered buffer ring, in-flight I/O)
// is a bug in the caller; unregister first. Safe for concurrent use.
func Unmap(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b[:1]))
	// Forget the span first: from here on OffHeap refuses the range.
	if !removeSpan(uintptr(p), uintptr(cap(b))) {
		return fmt.Errorf("sys: unmap %d bytes at %p: not a whole mapping from MapAnon: %w", cap(b), p, unix.EINVAL)
	}
	return munmap(b)
}

// munmap unmaps the cap(b) bytes at the start of b, which must be a whole
// mapping (MapAnon's, once its span is removed, or a ring's).
func munmap(b []byte) error {
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b[:1])), uintptr(cap(b))); err != nil {
		return os.NewSyscallError("munmap", err)
	}
	return nil
}

// Mbind sets the NUMA policy of the pages b lies on, to the end of its
// capacity (a slice of MapAnon memory: the rest of its mapping), to
// MPOL_PREFERRED for node,
// moving pages already faulted in (MPOL_MF_MOVE). On a one-node host binding
// to node 0 succeeds and changes nothing. Safe for concurrent use.
func Mbind(b []byte, node int) error {
	return MbindPolicy(b, MPolPreferred, node)
}

// maxNodes is the number of NUMA node bits the masks passed to the kernel
// carry (16 words: 1024 nodes, the distributions' CONFIG_NODES_SHIFT=10).
const maxNodes = 1024

// nodeMask is a NUMA node bitmap as the kernel reads it (unsigned long[]).
type nodeMask [maxNodes / 64]uint64

// MbindPolicy is Mbind with an explicit policy mode. MPolDefault ignores node.
func MbindPolicy(b []byte, mode MemPolicy, node int) error {
	if len(b) == 0 {
		return nil
	}
	var mask nodeMask
	maskp, maxnode, err := mask.set(mode, node)
	if err != nil {
		return err
	}
	const mpolMFMove = 1 << 1 // MPOL_MF_MOVE, include/uapi/linux/mempolicy.h
	// mbind takes whole pages: from the page b starts on to the end of
	// its capacity (the end of a MapAnon mapping, page-aligned, and
	// huge-page-aligned for a hugetlb one). A hugetlb mapping also needs
	// a huge-page-aligned start: tried second, and only where that range
	// lies inside one MapAnon mapping (never over others' pages).
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(cap(b))
	var e unix.Errno
	for i, align := range []uintptr{uintptr(os.Getpagesize()), uintptr(HugePageSize())} {
		from := start &^ (align - 1)
		to := (end + align - 1) &^ (align - 1)
		if i > 0 && !OffHeap(uint64(from), uint64(to-from)) {
			break
		}
		// mbind only changes page tables and may migrate pages: it can
		// sleep, so it goes through Syscall6, not RawSyscall6.
		_, _, e = unix.Syscall6(unix.SYS_MBIND, from, to-from, uintptr(mode), uintptr(maskp), maxnode, mpolMFMove)
		if e != unix.EINVAL {
			break
		}
	}
	if e != 0 {
		return os.NewSyscallError("mbind", e)
	}
	return nil
}

// set fills the mask for node and returns the pointer and maxnode arguments
// for mbind/set_mempolicy (maxnode counts one more bit than the mask holds,
// as the kernel subtracts one).
func (m *nodeMask) set(mode MemPolicy, node int) (unsafe.Pointer, uintptr, error) {
	if mode == MPolDefault {
		return nil, 0, nil
	}
	if node < 0 || node >= maxNodes {
		return nil, 0, fmt.Errorf("sys: NUMA node %d out of range [0,%d): %w", node, maxNodes, unix.EINVAL)
	}
	m[node/64] |= 1 << (node % 64)
	return unsafe.Pointer(m), maxNodes + 1, nil
}

// SetMempolicy sets the NUMA memory policy of the calling OS thread (call it
// from a goroutine locked with runtime.LockOSThread; other threads are not
// affected). MPolDefault restores the default and ignores node.
func SetMempolicy(mode MemPolicy, node int) error {
	var mask nodeMask
	maskp, maxnode, err := mask.set(mode, node)
	if err != nil {
		return err
	}
	// set_mempolicy allocates the new policy (GFP_KERNEL), which can sleep
	// under memory pressure: Syscall, not RawSyscall (STYLE.md rule 4).
	_, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(mode), uintptr(maskp), maxnode)
	if e != 0 {
		return os.NewSyscallError("set_mempolicy", e)
	}
	return nil
}

// MempolicyOf returns the policy mode and the lowest node of the policy that
// governs the first page of b (get_mempolicy with MPOL_F_ADDR). For
// MPolDefault the node is -1.
func MempolicyOf(b []byte) (MemPolicy, int, error) {
	if len(b) == 0 {
		return MPolDefault, -1, fmt.Errorf("sys: get_mempolicy of empty slice: %w", unix.EINVAL)
	}
	const mpolFAddr = 1 << 1 // MPOL_F_ADDR
	var mode int32
	var mask nodeMask
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)),
		uintptr(unsafe.Pointer(&mask)), maxNodes+1, uintptr(unsafe.Pointer(unsafe.SliceData(b))), mpolFAddr, 0)
	if e != 0 {
		return MPolDefault, -1, os.NewSyscallError("get_mempolicy", e)
	}
	for i, w := range mask {
		for bit := 0; bit < 64; bit++ {
			if w&(1<<bit) != 0 {
				return MemPolicy(mode), i*64 + bit, nil
			}
		}
	}
	return MemPolicy(mode), -1, nil
}

// mmapAnon maps size bytes of private anonymous memory with extra flags.
func mmapAnon(size int, extra int) (unsafe.Pointer, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|extra)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return p, nil
}

// mmapAligned maps size bytes whose start is aligned to align, by mapping
// size+align and trimming both ends. A trim can fail: munmap of a part of
// a mapping splits it, which fails with ENOMEM once the process has
// vm.max_map_count mappings, and the new mapping may have merged with a
// neighbour, so that trimming its end is such a split. mmapAligned then
// unmaps what is left of its own mapping, whole, before returning the error.
func mmapAligned(size, align int) (unsafe.Pointer, error) {
	p, err := mmapAnon(size+align, 0)
	if err != nil {
		return nil, err
	}
	start := uintptr(p)
	aligned := (start + uintptr(align) - 1) &^ (uintptr(align) - 1)
	head := aligned - start
	if head > 0 {
		if err := unix.MunmapPtr(p, head); err != nil {
			return nil, trimFailed(err, p, uintptr(size+align))
		}
	}
	ap := unsafe.Add(p, head)
	tail := uintptr(align) - head // > 0: head < align
	if err := unix.MunmapPtr(unsafe.Add(ap, size), tail); err != nil {
		return nil, trimFailed(err, ap, uintptr(size)+tail)
	}
	return ap, nil
}

// trimFailed unmaps the n bytes at p that mmapAligned still holds after a
// trim failed with err, and returns err, with the second failure if that
// unmap failed too (unmapping a mapping's start or end needs no new split,
// so it does not fail for want of mappings).
func trimFailed(err error, p unsafe.Pointer, n uintptr) error {
	err = os.NewSyscallError("munmap", err)
	if uerr := unix.MunmapPtr(p, n); uerr != nil {
		return errors.Join(err, fmt.Errorf("sys: %d bytes at %p left mapped: %w", n, p, os.NewSyscallError("munmap", uerr)))
	}
	return err
}

// thpAvailable reports whether transparent huge pages honour MADV_HUGEPAGE
// (the sysfs mode is "always" or "madvise", not "never", and the process
// is not denied them).
func thpAvailable() bool {
	// prctl(PR_SET_THP_DISABLE), inherited across fork and execve, denies
	// the process THP whatever the switches say, while madvise still
	// succeeds. PR_GET_THP_DISABLE says 1 then; 6.18's
	// PR_THP_DISABLE_EXCEPT_ADVISED (1|2) leaves MADV_HUGEPAGE honoured.
	if v, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0); err == nil && v == 1 {
		return false
	}
	// Since 6.8 each size has its own switch, which wins unless it says
	// inherit (found in review: top level madvise with 2 MiB never was
	// reported as THP and got none).
	if b, err := os.ReadFile(thpSizeEnabledPath()); err == nil && !bytes.Contains(b, []byte("[inherit]")) {
		return !bytes.Contains(b, []byte("[never]"))
	}
	b, err := os.ReadFile(thpEnabledPath)
	if err != nil {
		return false
	}
	return !bytes.Contains(b, []byte("[never]"))
}

func roundUp(n, to int) int {
	return (n + to - 1) / to * to
}
