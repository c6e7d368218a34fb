package uring

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestSendDontWaitSkipSuccess pins the kernel behaviour that a send
// without a CQE on success relies on (the engine's fast-send experiment,
// commit 7cfa617, docs/BENCHMARKS.md): without SQPOLL, a SEND with
// MSG_DONTWAIT is issued while io_uring_enter consumes it and cannot wait
// for the socket, so once SQConsumed has passed it, it has completed. With
// FlagCQESkipSuccess a complete send posts nothing; a partial one posts the
// bytes it sent and an empty one -EAGAIN, both before that enter returns.
func TestSendDontWaitSkipSuccess(t *testing.T) {
	r := newRing(t, &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
	c, s := tcpPair(t)
	const flags = unix.MSG_DONTWAIT | unix.MSG_WAITALL | unix.MSG_NOSIGNAL
	buf := offHeap(t, 4<<20)
	for i := range buf {
		buf[i] = byte(i)
	}

	// A send that fits: no CQE, and the peer has the bytes.
	pos := r.SQPosition()
	q := sqe(t, r)
	q.PrepSend(c, buf[:64], flags, 1)
	q.SetFlags(FlagCQESkipSuccess)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if int32(r.SQConsumed()-pos) <= 0 {
		t.Fatalf("SQConsumed %d has not passed the send at %d after Submit", r.SQConsumed(), pos)
	}
	if n := r.CQReady(); n != 0 || r.CQOverflowed() {
		t.Fatalf("%d CQEs (overflow %v) for a send that fit, want none", n, r.CQOverflowed())
	}
	got := make([]byte, 128)
	if n, err := unix.Read(s, got); err != nil || n != 64 || got[63] != 63 {
		t.Fatalf("peer read %d bytes (%v), want the 64 sent", n, err)
	}

	// A send larger than the socket takes: its CQE is there as soon as
	// Submit returns, with the bytes that went out.
	if err := unix.SetsockoptInt(c, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	q = sqe(t, r)
	q.PrepSend(c, buf, flags, 2)
	q.SetFlags(FlagCQESkipSuccess)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	cq := make([]CQE, 4)
	if n := r.PeekCQEs(cq); n != 1 || cq[0].UserData != 2 || cq[0].Res <= 0 || cq[0].Res >= int32(len(buf)) {
		t.Fatalf("after a 4 MiB send to a full socket: %d CQEs %+v, want one with a partial count", n, cq[:n])
	}
	sent := cq[0].Res

	// Once the peer's receive buffer is full as well, nothing goes out:
	// -EAGAIN. Until then each send posts the bytes it got out.
	for try := 0; ; try++ {
		if try == 1000 {
			t.Fatalf("no -EAGAIN after %d sends to a peer that does not read (%d bytes out)", try, sent)
		}
		q = sqe(t, r)
		q.PrepSend(c, buf[sent:], flags, 3)
		q.SetFlags(FlagCQESkipSuccess)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		n := r.PeekCQEs(cq)
		if n != 1 || cq[0].UserData != 3 || (cq[0].Res <= 0 && cq[0].Res != -int32(unix.EAGAIN)) || cq[0].Res >= int32(len(buf))-sent {
			t.Fatalf("send to a full socket: %d CQEs %+v, want one with a partial count or -EAGAIN", n, cq[:n])
		}
		if cq[0].Res == -int32(unix.EAGAIN) {
			break
		}
		sent += cq[0].Res
	}
}
