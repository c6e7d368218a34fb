package uring_test

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/uring"
)

// A NOP round trip: get an SQE, prepare it, submit and wait, then copy the
// completion out without a system call.
func ExampleRing() {
	r, err := uring.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	r.GetSQE().PrepNop(42)
	if _, err := r.SubmitAndWait(1, 0); err != nil {
		fmt.Println(err)
		return
	}
	cqes := make([]uring.CQE, 8)
	n := r.PeekCQEs(cqes)
	fmt.Println(n, cqes[0].UserData, cqes[0].Err())
	// Output: 1 42 <nil>
}

// A provided buffer ring feeding a multishot receive: the kernel picks a
// buffer per chunk, the CQE names it, and the buffer goes back to the ring
// after use.
func ExampleRing_SetupBufRing() {
	r, err := uring.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	br, err := r.SetupBufRing(1, 64, 2048)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer br.Close()
	fmt.Println(br.Entries(), br.BufSize())
	// With a socket fd:
	//   r.GetSQE().PrepRecvMultishot(fd, br.Group(), false, 0, userData)
	// and for each CQE c:
	//   id, _ := c.BufferID(); data := br.Buf(id)[:c.Res]; ...; br.Recycle(id); br.Commit()

	// Output: 64 2048
}

// Memory the kernel reads after Submit comes from an Arena (or MapAnon, or a
// BufRing). A Go slice would be refused with a panic(ErrNotOffHeap) before
// it could reach the kernel.
func ExampleArena() {
	r, err := uring.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	arena, err := uring.NewArena(4096)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer arena.Close()

	msg := arena.Bytes(5)
	copy(msg, "hello")
	r.GetSQE().PrepSend(fds[0], msg, 0, 1)
	if _, err := r.SubmitAndWait(1, 0); err != nil {
		fmt.Println(err)
		return
	}
	cqes := make([]uring.CQE, 1)
	r.PeekCQEs(cqes)
	fmt.Println("sent", cqes[0].Res)

	func() {
		defer func() { fmt.Println("Go slice:", recover() == uring.ErrNotOffHeap) }()
		r.GetSQE().PrepSend(fds[0], []byte("hello"), 0, 2)
	}()
	// Output:
	// sent 5
	// Go slice: true
}
