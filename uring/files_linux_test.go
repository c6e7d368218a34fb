package uring

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFixedFileArgumentsBeyondUint32 gives RegisterFiles a slot count,
// and UpdateFiles an offset and an fd, that do not fit the kernel's 32-bit
// fields. Cut to their low 32 bits they named 4 slots, slot 3 and an open
// fd, which the kernel took (and 1<<32 slots, 0 to the kernel, came back as
// a kernel without sparse file tables): each must be refused, EINVAL for
// the slots (not ErrNotSupported) and EBADF for the fd, the ring left as it
// was.
func TestFixedFileArgumentsBeyondUint32(t *testing.T) {
	needFeatures(t, "IORING_RSRC_REGISTER_SPARSE")
	r := newRing(t, nil)
	for _, n := range []int{1<<32 + 4, 1 << 32} {
		err := r.RegisterFiles(n)
		if !errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNotSupported) {
			t.Errorf("RegisterFiles(%d) = %v, want EINVAL", n, err)
		}
	}
	if err := r.RegisterFiles(8); err != nil {
		t.Fatalf("RegisterFiles(8) after the refused ones: %v", err)
	}
	c, _ := tcpPair(t)
	for _, off := range []int{1<<32 + 3, -1, -5} {
		if n, err := r.UpdateFiles(off, []int{c}); n != 0 || !errors.Is(err, unix.EINVAL) {
			t.Errorf("UpdateFiles(%d, [%d]) = %d, %v; want 0, EINVAL", off, c, n, err)
		}
	}
	if n, err := r.UpdateFiles(2, []int{1<<32 + c}); n != 0 || !errors.Is(err, unix.EBADF) {
		t.Errorf("UpdateFiles(2, [1<<32 + %d]) = %d, %v; want 0, EBADF", c, n, err)
	}
	// Slots 2 and 3 are still empty: a send through either fails.
	buf := offHeap(t, 8)
	for slot := 2; slot <= 3; slot++ {
		w := sqe(t, r)
		w.PrepSend(slot, buf[:5], 0, uint64(slot))
		w.SetFlags(FlagFixedFile)
		if cq := reap(t, r, 1)[0]; !errors.Is(cq.Err(), unix.EBADF) {
			t.Errorf("send through slot %d: %v, want EBADF (the slot empty)", slot, cq.Err())
		}
	}
}
