package uring_test

import (
	"fmt"

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
