package sys

import "unsafe"

// Addr returns the address of *p as the integer an SQE carries. p must point
// off the Go heap, or be pinned until the kernel is done with it.
func Addr[T any](p *T) uint64 {
	return uint64(uintptr(unsafe.Pointer(p)))
}

// SliceAddr returns the address of b's first element, or of where it would
// be for a slice of length 0 with capacity (0 only when cap(b) is 0). The
// same rule as Addr applies to the memory.
func SliceAddr(b []byte) uint64 {
	if cap(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// As returns b's first bytes as a *T, for carving typed arguments (msghdr,
// iovec arrays, timespecs) out of off-heap memory from MapAnon. It panics if
// b is too short or misaligned for T.
func As[T any](b []byte) *T {
	var zero T
	if uintptr(len(b)) < unsafe.Sizeof(zero) {
		panic("sys.As: slice shorter than the type")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		panic("sys.As: misaligned slice")
	}
	return (*T)(p)
}

// AsSlice returns b as a []T of n elements, with the same rules as As.
func AsSlice[T any](b []byte, n int) []T {
	var zero T
	if n == 0 {
		return nil
	}
	if uintptr(len(b)) < unsafe.Sizeof(zero)*uintptr(n) {
		panic("sys.AsSlice: slice too short")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		panic("sys.AsSlice: misaligned slice")
	}
	return unsafe.Slice((*T)(p), n)
}

// SizeOf returns the size in bytes of T.
func SizeOf[T any]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}
