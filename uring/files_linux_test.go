package uring

import (
	"errors"
	"testing"
	"time"

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

// TestCloseDirectSlotOutOfRange prepares PrepCloseDirect with slots no
// fixed-file table has. The kernel takes slot+1 in a 32-bit field, where 0
// means "close the fd in sqe->fd", which PrepCloseDirect sets to 0: slot -1
// and 2^32-1 closed fd 0 (here a pipe put there for the test), and 2^32+4
// closed slot 4. Each must complete with -EINVAL and close nothing.
func TestCloseDirectSlotOutOfRange(t *testing.T) {
	needFeatures(t, "IORING_RSRC_REGISTER_SPARSE")
	r := newRing(t, nil)
	if err := r.RegisterFiles(8); err != nil {
		t.Fatal(err)
	}
	c, _ := tcpPair(t)
	if n, err := r.UpdateFiles(4, []int{c}); n != 1 || err != nil {
		t.Fatalf("UpdateFiles(4, [%d]) = %d, %v", c, n, err)
	}
	// fd 0 becomes a pipe's read end for the test, then is given back.
	rfd, _ := pipe(t)
	saved, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(rfd, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Dup3(saved, 0, 0)
		unix.Close(saved)
	})
	var want unix.Stat_t
	if err := unix.Fstat(rfd, &want); err != nil {
		t.Fatal(err)
	}
	for i, slot := range []int{-1, 1<<32 - 1, 1<<32 + 4} {
		sqe(t, r).PrepCloseDirect(slot, uint64(i))
		if cq := reap(t, r, 1)[0]; !errors.Is(cq.Err(), unix.EINVAL) {
			t.Errorf("PrepCloseDirect(%d): %v, want EINVAL", slot, cq.Err())
		}
		var st unix.Stat_t
		if err := unix.Fstat(0, &st); err != nil || st.Ino != want.Ino {
			t.Fatalf("after PrepCloseDirect(%d), fd 0 is no longer the pipe: %v", slot, err)
		}
	}
	// Slot 4 still holds the socket: a send through it works.
	buf := offHeap(t, 8)
	w := sqe(t, r)
	w.PrepSend(4, buf[:5], 0, 9)
	w.SetFlags(FlagFixedFile)
	if cq := reap(t, r, 1)[0]; cq.Res != 5 {
		t.Errorf("send through slot 4: res %d (%v), want 5", cq.Res, cq.Err())
	}
}

// TestMsgRingFdSlotOutOfRange passes PrepMsgRingFd slots that no file table
// has. The kernel reads the source slot from the low 32 bits of addr3 and
// the destination as slot+1 in a 32-bit field, where 2^32-1 asks for a
// free slot: cut to those bits, source 2^32 sent slot 0, destination
// 2^32+3 replaced the target's slot 3 and 2^32-2 took a free one. Each must
// fail on the sending ring and install nothing on the target (which would
// post a completion there).
func TestMsgRingFdSlotOutOfRange(t *testing.T) {
	needFeatures(t, "IORING_OP_MSG_RING", "IORING_RSRC_REGISTER_SPARSE")
	needKernel(t, "IORING_MSG_SEND_FD", "6.0")
	a, b, _ := msgRingFdRings(t)
	tests := []struct {
		src, dst int
		want     unix.Errno
	}{
		{1 << 32, 2, unix.EBADF},
		{-2, 2, unix.EBADF},
		{0, 1<<32 + 3, unix.EINVAL},
		{0, 1<<32 - 2, unix.EINVAL},
		{0, 1<<32 - 1, unix.EINVAL},
	}
	for i, tt := range tests {
		sqe(t, a).PrepMsgRingFd(b.Fd(), tt.src, tt.dst, 0xabc, 0, uint64(i))
		if cq := reap(t, a, 1)[0]; !errors.Is(cq.Err(), tt.want) {
			t.Errorf("PrepMsgRingFd(src %d, dst %d): res %d (%v), want %v", tt.src, tt.dst, cq.Res, cq.Err(), tt.want)
		}
	}
	expectNone(t, b, 50*time.Millisecond)
}
