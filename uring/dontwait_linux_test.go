package uring

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fillSocket sets fd non-blocking with a small send buffer and writes until
// the kernel refuses more (EAGAIN): the peer has not read anything.
func fillSocket(t *testing.T, fd int) {
	t.Helper()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	for {
		if _, err := unix.Write(fd, junk); err == unix.EAGAIN {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSendDontwaitCompletesInline pins down what the engine's quiet sends
// stand on (engine/uring_linux.go, quietSends): on a DEFER_TASKRUN ring a
// SEND with MSG_DONTWAIT that finds the socket's buffer full completes
// inside the io_uring_enter that submits it, with EAGAIN (the kernel
// arms no poll for it), and cancels the SENDs linked after it there too;
// the same SEND without MSG_DONTWAIT stays in flight until the peer reads.
func TestSendDontwaitCompletesInline(t *testing.T) {
	r := newRing(t, &Config{SingleIssuer: true, DeferTaskrun: true})
	c, s := tcpPair(t)
	fillSocket(t, c)
	out := offHeap(t, 1000)

	sqe(t, r).PrepSend(c, out, unix.MSG_DONTWAIT|unix.MSG_WAITALL|unix.MSG_NOSIGNAL, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	var cq [4]CQE
	if n := r.PeekCQEs(cq[:]); n != 1 || cq[0].UserData != 1 || cq[0].Res != -int32(unix.EAGAIN) {
		t.Fatalf("MSG_DONTWAIT SEND on a full socket, right after the submitting enter: %d completions %+v, want one with EAGAIN", n, cq[:n])
	}

	// A chain: the first fails at once, the second is cancelled, both in
	// the enter that waits for them (the cancellation is task work there).
	q := sqe(t, r)
	q.PrepSend(c, out, unix.MSG_DONTWAIT|unix.MSG_WAITALL|unix.MSG_NOSIGNAL, 2)
	q.SetFlags(FlagIOLink)
	sqe(t, r).PrepSend(c, out, unix.MSG_DONTWAIT|unix.MSG_WAITALL|unix.MSG_NOSIGNAL, 3)
	if _, err := r.SubmitAndWait(2, 5*time.Second); err != nil {
		t.Fatalf("waiting for the chain's two completions: %v", err)
	}
	n := r.PeekCQEs(cq[:])
	if n != 2 || cq[0].UserData != 2 || cq[0].Res != -int32(unix.EAGAIN) || cq[1].UserData != 3 || cq[1].Res != -int32(unix.ECANCELED) {
		t.Fatalf("linked MSG_DONTWAIT SENDs on a full socket: %d completions %+v, want EAGAIN then ECANCELED", n, cq[:n])
	}

	sqe(t, r).PrepSend(c, out, unix.MSG_WAITALL|unix.MSG_NOSIGNAL, 4)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if n := r.PeekCQEs(cq[:]); n != 0 {
		t.Fatalf("SEND without MSG_DONTWAIT on a full socket completed at once: %+v", cq[:n])
	}
	// The peer reads: the SEND goes out.
	drain := make([]byte, 64<<10)
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the SEND did not complete once the peer read")
		}
		if _, err := unix.Read(s, drain); err != nil {
			t.Fatal(err)
		}
		if _, err := r.SubmitAndWait(1, 10*time.Millisecond); err != nil && err != unix.ETIME {
			t.Fatal(err)
		}
		if got = r.PeekCQEs(cq[:]); got == 1 && (cq[0].UserData != 4 || cq[0].Res != 1000) {
			t.Fatalf("SEND after the peer read: %+v, want 1000 bytes", cq[0])
		}
	}
}
