package uring

import (
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

func TestAcceptMultishot(t *testing.T) {
	needFeatures(t, FeatMultishotAccept, "IORING_RSRC_REGISTER_SPARSE")
	for _, direct := range []bool{false, true} {
		name := "fds"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			r := newRing(t, &Config{Entries: 64, CQEntries: 256})
			const conns = 100
			flags := unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
			if direct {
				if err := r.RegisterFiles(conns + 8); err != nil {
					t.Fatal(err)
				}
				flags = unix.SOCK_NONBLOCK // SOCK_CLOEXEC is refused for direct descriptors
			}
			lfd, ap := listenTCP(t)
			sqe(t, r).PrepAcceptMultishot(lfd, flags, direct, 1)
			if _, err := r.Submit(); err != nil {
				t.Fatal(err)
			}
			clients := make([]int, conns)
			for i := range clients {
				clients[i] = dialTCP(t, ap)
			}
			got := reap(t, r, conns)
			seen := make(map[int32]bool)
			for i, c := range got {
				if c.UserData != 1 || c.Err() != nil || !c.More() {
					t.Fatalf("completion %d: %+v (err %v), want accepted connection with F_MORE", i, c, c.Err())
				}
				if seen[c.Res] {
					t.Fatalf("fd/slot %d reported twice", c.Res)
				}
				seen[c.Res] = true
				if direct && (c.Res < 0 || c.Res >= conns+8) {
					t.Fatalf("direct slot %d out of table", c.Res)
				}
			}
			// Every accepted fd or slot is the server end of a distinct
			// client: one byte sent on each reaches each client once.
			one := offHeap(t, 1)
			one[0] = 'a'
			for fd := range seen {
				s := r.GetSQE()
				if s == nil {
					if _, err := r.Submit(); err != nil {
						t.Fatal(err)
					}
					s = sqe(t, r)
				}
				s.PrepSend(int(fd), one, 0, 3)
				if direct {
					s.SetFlags(FlagFixedFile)
				}
			}
			for _, c := range reap(t, r, conns) {
				if c.UserData != 3 || c.Res != 1 {
					t.Fatalf("send on accepted connection: %+v (%v)", c, c.Err())
				}
			}
			for i, cfd := range clients {
				var b [2]byte
				tv := unix.Timeval{Sec: 2} // a client that got nothing fails instead of hanging
				if err := unix.SetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
					t.Fatal(err)
				}
				if n, err := unix.Read(cfd, b[:]); n != 1 || err != nil {
					t.Fatalf("client %d read %d bytes, %v; want the one byte sent to it", i, n, err)
				}
			}
			if !direct {
				for fd := range seen {
					unix.Close(int(fd))
				}
			}
			// Cancel the multishot accept: it ends with -ECANCELED and no F_MORE.
			sqe(t, r).PrepCancel(1, 0, 2)
			expectRemoved(t, r, 1, 2)
		})
	}
}

// streamWriter writes total pattern bytes to fd from a goroutine, then shuts
// down the write side. wait returns its error.
func streamWriter(t *testing.T, fd int, total int) (wait func() error) {
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for off := 0; off < total; {
			n := min(len(buf), total-off)
			for i := range n {
				buf[i] = pattern(off + i)
			}
			w, err := unix.Write(fd, buf[:n])
			if err != nil {
				werr = err
				return
			}
			off += w
		}
		werr = unix.Shutdown(fd, unix.SHUT_WR)
	}()
	return func() error { wg.Wait(); return werr }
}

// recvAll receives the stream on fd through a multishot recv on b, checking
// content, recycling every buffer and re-arming on ENOBUFS or when the
// multishot ends. It returns the bytes received and the number of ENOBUFS
// terminations seen.
func recvAll(t *testing.T, r *Ring, b *BufRing, fd int, bundle bool, hold int) (int, int) {
	n, e, _ := recvStream(t, r, b, fd, bundle, hold)
	return n, e
}

// recvStream is recvAll that also returns the most buffers one CQE covered.
func recvStream(t *testing.T, r *Ring, b *BufRing, fd int, bundle bool, hold int) (int, int, int) {
	t.Helper()
	arm := func() { sqe(t, r).PrepRecvMultishot(fd, b.Group(), bundle, 0, 7) }
	arm()
	off, enobufs, maxIDs := 0, 0, 0
	var held []uint16
	cqes := make([]CQE, 64)
	var ids []uint16
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("stream stuck at %d bytes", off)
		}
		if _, err := r.SubmitAndWait(1, time.Second); err != nil && !errors.Is(err, unix.ETIME) {
			t.Fatal(err)
		}
		n := r.PeekCQEs(cqes)
		for _, c := range cqes[:n] {
			if c.UserData != 7 {
				t.Fatalf("unexpected completion %+v", c)
			}
			if err := c.Err(); err != nil {
				if !errors.Is(err, unix.ENOBUFS) {
					t.Fatalf("recv: %v", err)
				}
				enobufs++
				// Recovery: give every held buffer back, then re-arm.
				for _, id := range held {
					b.Recycle(id)
				}
				held = held[:0]
				b.Commit()
				arm()
				continue
			}
			if c.Res == 0 {
				for _, id := range held {
					b.Recycle(id)
				}
				b.Commit()
				return off, enobufs, maxIDs
			}
			var err error
			ids, err = b.BundleIDs(c, ids[:0])
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) == 0 {
				t.Fatalf("data completion without buffer: %+v", c)
			}
			maxIDs = max(maxIDs, len(ids))
			left := int(c.Res)
			for _, id := range ids {
				data := b.Buf(id)[:min(left, b.BufSize())]
				for i, v := range data {
					if v != pattern(off+i) {
						t.Fatalf("byte %d = %#x, want %#x (buffer %d)", off+i, v, pattern(off+i), id)
					}
				}
				off += len(data)
				left -= len(data)
				if hold > 0 {
					held = append(held, id)
				} else {
					b.Recycle(id)
				}
			}
			if hold > 0 && len(held) < hold {
				continue
			}
			for _, id := range held {
				b.Recycle(id)
			}
			held = held[:0]
			b.Commit()
			if !c.More() {
				arm()
			}
		}
		b.Commit()
	}
}

func TestRecvMultishot10MB(t *testing.T) {
	needFeatures(t, FeatMultishotRecv, "IORING_REGISTER_PBUF_STATUS")
	for _, bundle := range []bool{false, true} {
		name := "plain"
		if bundle {
			name = "bundle"
		}
		t.Run(name, func(t *testing.T) {
			if bundle {
				needFeatures(t, FeatRecvBundle)
			}
			r := newRing(t, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true})
			b, err := r.SetupBufRing(3, 256, 16<<10)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			c, s := tcpPair(t)
			const total = 10 << 20
			wait := streamWriter(t, c, total)
			got, _, maxIDs := recvStream(t, r, b, s, bundle, 0)
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			if bundle && maxIDs < 2 {
				t.Errorf("no bundle CQE covered more than one buffer")
			}
			if !bundle && maxIDs != 1 {
				t.Errorf("plain multishot CQE covered %d buffers", maxIDs)
			}
			if got != total {
				t.Fatalf("received %d bytes, want %d", got, total)
			}
			if h, err := b.Head(); err != nil {
				t.Fatal(err)
			} else if avail, _ := b.Available(); avail != b.Entries() {
				t.Errorf("after the stream %d of %d buffers available (head %d)", avail, b.Entries(), h)
			}
		})
	}
}

// TestBufRingTailWraps streams more buffers through a buffer ring than its
// 16-bit tail counts (80,000 buffers of 64 bytes through 64 entries), plain
// and as bundles: the tail wraps past 65535 (the kernel's head with it), and
// every byte still arrives once, in order, every buffer back in the ring at
// the end.
func TestBufRingTailWraps(t *testing.T) {
	needFeatures(t, FeatMultishotRecv, "IORING_REGISTER_PBUF_STATUS")
	for _, bundle := range []bool{false, true} {
		name := "plain"
		if bundle {
			name = "bundle"
		}
		t.Run(name, func(t *testing.T) {
			if bundle {
				needFeatures(t, FeatRecvBundle)
			}
			r := newRing(t, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true})
			const entries, bufSize, bufs = 64, 64, 80000
			b, err := r.SetupBufRing(3, entries, bufSize)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			c, s := tcpPair(t)
			wait := streamWriter(t, c, bufs*bufSize)
			got, _ := recvAll(t, r, b, s, bundle, 0)
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			// A buffer holds bufSize bytes at most: bufs of them went
			// through, and the tail round past 65535.
			if got != bufs*bufSize {
				t.Fatalf("received %d bytes, want %d", got, bufs*bufSize)
			}
			if avail, err := b.Available(); err != nil || avail != entries {
				t.Errorf("after the stream %d of %d buffers available (%v)", avail, entries, err)
			}
		})
	}
}

// TestRecvENOBUFSRecovery exhausts a small buffer ring on purpose: the
// multishot recv ends with -ENOBUFS, and recycling plus re-arming resumes the
// stream without losing or reordering bytes.
func TestRecvENOBUFSRecovery(t *testing.T) {
	needFeatures(t, FeatMultishotRecv)
	r := newRing(t, &Config{Entries: 16, SingleIssuer: true, DeferTaskrun: true})
	b, err := r.SetupBufRing(1, 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, s := tcpPair(t)
	const total = 256 << 10
	wait := streamWriter(t, c, total)
	got, enobufs := recvAll(t, r, b, s, false, b.Entries())
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got != total {
		t.Fatalf("received %d bytes, want %d", got, total)
	}
	if enobufs == 0 {
		t.Fatal("holding every buffer never exhausted the ring (no -ENOBUFS)")
	}
	t.Logf("%d ENOBUFS recoveries", enobufs)
}

func TestSendRecv(t *testing.T) {
	r := newRing(t, nil)
	c, s := tcpPair(t)
	out := offHeap(t, 4096)
	in := offHeap(t, 4096)
	for i := range out {
		out[i] = pattern(i)
	}
	sqe(t, r).PrepSend(c, out[:1000], 0, 1)
	sqe(t, r).PrepRecv(s, in, 0, 2)
	got := 0
	for _, cq := range reap(t, r, 2) {
		switch cq.UserData {
		case 1:
			if cq.Res != 1000 {
				t.Errorf("send: res %d (%v)", cq.Res, cq.Err())
			}
		case 2:
			if cq.Res <= 0 {
				t.Fatalf("recv: res %d (%v)", cq.Res, cq.Err())
			}
			got = int(cq.Res)
		}
	}
	for i := range got {
		if in[i] != pattern(i) {
			t.Fatalf("byte %d differs", i)
		}
	}
}

func TestClose(t *testing.T) {
	r := newRing(t, nil)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sqe(t, r).PrepClose(fd, 1)
	if c := reap(t, r, 1)[0]; c.Res != 0 {
		t.Fatalf("close: %v", c.Err())
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("fd still open after ring close: fcntl = %v", err)
	}
	sqe(t, r).PrepClose(fd, 2)
	if c := reap(t, r, 1)[0]; !errors.Is(c.Err(), unix.EBADF) {
		t.Errorf("second close: %v, want EBADF", c.Err())
	}
}

func TestCancel(t *testing.T) {
	needKernel(t, "IORING_ASYNC_CANCEL_FD, _ALL and _ANY", "5.19")
	tests := []struct {
		name    string
		cancel  func(s *SQE, fd int)
		pending int // recvs to queue
		wantRes int32
	}{
		{"user data", func(s *SQE, fd int) { s.PrepCancel(100, 0, 1) }, 1, 0},
		{"fd", func(s *SQE, fd int) { s.PrepCancelFd(fd, 0, 1) }, 1, 0},
		{"fd all", func(s *SQE, fd int) { s.PrepCancelFd(fd, CancelAll, 1) }, 3, 3},
		{"any", func(s *SQE, fd int) { s.PrepCancel(0, CancelAny, 1) }, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(t, nil)
			_, s := tcpPair(t)
			buf := offHeap(t, 4096)
			for i := range tt.pending {
				sqe(t, r).PrepRecv(s, buf, 0, 100)
				_ = i
			}
			if _, err := r.Submit(); err != nil {
				t.Fatal(err)
			}
			expectNone(t, r, 5*time.Millisecond) // the recvs are parked
			tt.cancel(sqe(t, r), s)
			got := reap(t, r, tt.pending+1)
			for _, c := range got {
				switch c.UserData {
				case 100:
					if !errors.Is(c.Err(), unix.ECANCELED) {
						t.Errorf("recv: %v, want ECANCELED", c.Err())
					}
				case 1:
					if c.Res != tt.wantRes {
						t.Errorf("cancel res %d (%v), want %d", c.Res, c.Err(), tt.wantRes)
					}
				}
			}
		})
	}
	t.Run("no match", func(t *testing.T) {
		r := newRing(t, nil)
		sqe(t, r).PrepCancel(12345, 0, 1)
		if c := reap(t, r, 1)[0]; !errors.Is(c.Err(), unix.ENOENT) {
			t.Errorf("cancel of nothing: %v, want ENOENT", c.Err())
		}
	})
}

func TestMsgRing(t *testing.T) {
	needFeatures(t, "IORING_OP_MSG_RING")
	a := newRing(t, nil)
	b := newRing(t, &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
	sqe(t, a).PrepMsgRing(b.Fd(), 42, 0xfeed, 0, 1)
	if c := reap(t, a, 1)[0]; c.Res != 0 {
		t.Fatalf("msg_ring: %v", c.Err())
	}
	c := reap(t, b, 1)[0]
	if c.UserData != 0xfeed || c.Res != 42 {
		t.Errorf("target got %+v, want user_data 0xfeed res 42", c)
	}
}

func TestTimeout(t *testing.T) {
	r := newRing(t, nil)
	start := time.Now()
	sqe(t, r).PrepTimeout(r.Timespec(15*time.Millisecond), 0, 0, 1)
	if c := reap(t, r, 1)[0]; !errors.Is(c.Err(), unix.ETIME) {
		t.Errorf("timeout: %v, want ETIME", c.Err())
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Errorf("timeout fired after %v", el)
	}
	// A count-based timeout completes with 0 once count CQEs were posted.
	sqe(t, r).PrepTimeout(r.Timespec(10*time.Second), 1, 0, 2)
	sqe(t, r).PrepNop(3)
	for _, c := range reap(t, r, 2) {
		if c.Res != 0 {
			t.Errorf("%d: %v", c.UserData, c.Err())
		}
	}
	// TimeoutRemove cancels a pending timeout.
	sqe(t, r).PrepTimeout(r.Timespec(10*time.Second), 0, 0, 4)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	sqe(t, r).PrepTimeoutRemove(4, 5)
	expectRemoved(t, r, 4, 5)
}

// TestTimeoutUpdate: a pending 10 s timeout moved to 20 ms expires then,
// under its own user_data, after the update's completion (Res 0); a second
// update of it, no longer pending, completes with ENOENT.
func TestTimeoutUpdate(t *testing.T) {
	r := newRing(t, nil)
	sqe(t, r).PrepTimeout(r.Timespec(10*time.Second), 0, 0, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sqe(t, r).PrepTimeoutUpdate(1, r.Timespec(20*time.Millisecond), 0, 2)
	got := reap(t, r, 2)
	el := time.Since(start)
	if got[0].UserData != 2 || got[0].Res != 0 {
		t.Errorf("update: %+v (%v), want user_data 2, Res 0, first", got[0], got[0].Err())
	}
	if got[1].UserData != 1 || !errors.Is(got[1].Err(), unix.ETIME) {
		t.Errorf("timeout: %+v (%v), want user_data 1, ETIME", got[1], got[1].Err())
	}
	if el < 20*time.Millisecond || el > 5*time.Second {
		t.Errorf("the updated timeout fired after %v, want 20 ms (not 10 s)", el)
	}
	sqe(t, r).PrepTimeoutUpdate(1, r.Timespec(time.Second), 0, 3)
	if c := reap(t, r, 1)[0]; c.UserData != 3 || !errors.Is(c.Err(), unix.ENOENT) {
		t.Errorf("update of an expired timeout: %+v (%v), want ENOENT", c, c.Err())
	}
}

func TestLinkTimeout(t *testing.T) {
	r := newRing(t, nil)
	_, s := tcpPair(t)
	buf := offHeap(t, 64)
	rs := sqe(t, r)
	rs.PrepRecv(s, buf, 0, 1)
	rs.SetFlags(FlagIOLink)
	sqe(t, r).PrepLinkTimeout(r.Timespec(10*time.Millisecond), 0, 2)
	for _, c := range reap(t, r, 2) {
		switch c.UserData {
		case 1:
			if !errors.Is(c.Err(), unix.ECANCELED) {
				t.Errorf("linked recv: %v, want ECANCELED", c.Err())
			}
		case 2:
			if !errors.Is(c.Err(), unix.ETIME) {
				t.Errorf("link timeout: %v, want ETIME", c.Err())
			}
		}
	}
	// An operation that completes in time ends its link timeout with
	// -ECANCELED instead.
	ns := sqe(t, r)
	ns.PrepNop(3)
	ns.SetFlags(FlagIOLink)
	sqe(t, r).PrepLinkTimeout(r.Timespec(10*time.Second), 0, 4)
	for _, c := range reap(t, r, 2) {
		switch c.UserData {
		case 3:
			if c.Res != 0 {
				t.Errorf("linked nop: %v", c.Err())
			}
		case 4:
			if !errors.Is(c.Err(), unix.ECANCELED) {
				t.Errorf("link timeout after the nop completed: %v, want ECANCELED", c.Err())
			}
		}
	}
}

// TestAcceptSingle accepts one connection with a single-shot accept: one CQE
// carrying a connected fd, without F_MORE.
func TestAcceptSingle(t *testing.T) {
	r := newRing(t, nil)
	lfd, ap := listenTCP(t)
	sqe(t, r).PrepAccept(lfd, unix.SOCK_CLOEXEC, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	expectNone(t, r, 5*time.Millisecond) // parked until a client connects
	cfd := dialTCP(t, ap)
	c := reap(t, r, 1)[0]
	if c.UserData != 1 || c.Res < 0 || c.More() {
		t.Fatalf("accept: %+v (%v), want an fd without F_MORE", c, c.Err())
	}
	fd := int(c.Res)
	closeFd(t, fd)
	// The accepted fd is the server end of cfd: bytes cross.
	if _, err := unix.Write(cfd, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	if n, err := unix.Read(fd, b[:]); err != nil || string(b[:n]) != "hi" {
		t.Errorf("read on accepted fd: %q, %v", b[:n], err)
	}
	expectNone(t, r, 5*time.Millisecond) // single shot: nothing more
}

// TestRecvBufSelect receives twice with single-shot buffer selection: each
// CQE names a distinct buffer of the group holding the bytes, and a recycled
// buffer is picked again.
func TestRecvBufSelect(t *testing.T) {
	needFeatures(t, "IORING_REGISTER_PBUF_RING")
	r := newRing(t, nil)
	b, err := r.SetupBufRing(5, 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, s := tcpPair(t)
	seen := map[uint16]bool{}
	for i, msg := range []string{"first", "second", "third"} {
		if _, err := unix.Write(c, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		sqe(t, r).PrepRecvBufSelect(s, 5, 0, uint64(i))
		cq := reap(t, r, 1)[0]
		id, ok := cq.BufferID()
		if !ok || cq.Res != int32(len(msg)) || cq.More() {
			t.Fatalf("recv %d: %+v (%v)", i, cq, cq.Err())
		}
		if got := string(b.Buf(id)[:cq.Res]); got != msg {
			t.Errorf("buffer %d holds %q, want %q", id, got, msg)
		}
		if i < 2 && seen[id] {
			t.Errorf("buffer %d picked twice before recycling", id)
		}
		seen[id] = true
		if i == 1 {
			// Both buffers are out: recycle them for the third receive.
			for id := range seen {
				b.Recycle(id)
			}
			b.Commit()
		}
	}
}

// TestSendmsgTo sends one UDP datagram with sendmsg to an address carried
// in the msghdr (msg_name), from arena memory.
func TestSendmsgTo(t *testing.T) {
	r := newRing(t, nil)
	rfd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, rfd)
	if err := unix.Bind(rfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(rfd)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port))
	wfd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, wfd)
	arena, name := arenaSockaddr(t, dst)
	data := arena.Bytes(8)
	copy(data, "datagram")
	sqe(t, r).PrepSendmsg(wfd, arena.Msghdr(name, data), 0, 1)
	if c := reap(t, r, 1)[0]; c.Res != 8 {
		t.Fatalf("sendmsg to %v: res %d (%v)", dst, c.Res, c.Err())
	}
	got := make([]byte, 16)
	n, _, err := unix.Recvfrom(rfd, got, 0)
	if err != nil || string(got[:n]) != "datagram" {
		t.Errorf("received %q, %v", got[:n], err)
	}
}

// TestRecvLimit pins SetRecvLimit's contract on a TCP stream with 8 KiB
// waiting: a multishot receive limited to 2,500 bytes with 1 KiB buffers
// ends (no More) once it has that many, below limit plus one buffer; new
// ones receive the rest, the last staying armed for more.
func TestRecvLimit(t *testing.T) {
	if !HasRecvLimit() {
		if k := kver.Release(); kver.AtLeast(k, "6.17") {
			t.Fatalf("no multishot recv byte limit on %s (>= 6.17): %v", k, probeRecv(false, 2))
		}
		t.Skipf("multishot recv byte limit not supported (requires >= 6.17, have %s)", kver.Release())
	}
	r := newRing(t, &Config{Entries: 16, SingleIssuer: true, DeferTaskrun: true})
	const bufSize, limit, total = 1024, 2500, 8 << 10
	b, err := r.SetupBufRing(3, 16, bufSize)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, s := tcpPair(t)
	if n, err := unix.Write(c, make([]byte, total)); err != nil || n != total {
		t.Fatalf("write: %d, %v", n, err)
	}
	got := 0
	for arm := 0; got < total; arm++ {
		if arm == total/limit+2 {
			t.Fatalf("%d receives armed for %d bytes", arm, total)
		}
		q := sqe(t, r)
		q.PrepRecvMultishot(s, 3, false, 0, uint64(arm))
		q.SetRecvLimit(limit)
		this := 0
		for done := false; !done && got+this < total; {
			for _, cqe := range reap(t, r, 1) {
				if cqe.Res <= 0 {
					t.Fatalf("receive %d: res %d after %d bytes", arm, cqe.Res, this)
				}
				this += int(cqe.Res)
				id, _ := cqe.BufferID()
				b.Recycle(id)
				b.Commit()
				done = !cqe.More()
				if done && this < min(limit, total-got) {
					t.Fatalf("receive %d ended after %d bytes, limit %d", arm, this, limit)
				}
			}
		}
		if this >= limit+bufSize {
			t.Errorf("receive %d got %d bytes; limit %d, buffers of %d", arm, this, limit, bufSize)
		}
		t.Logf("receive %d: %d bytes", arm, this)
		got += this
	}
	if got != total {
		t.Errorf("received %d bytes of %d", got, total)
	}
}

// TestBufRingCloseRefused closes a buffer ring of a SINGLE_ISSUER ring from
// another thread, which the kernel refuses (io_uring_register: EEXIST): the
// group stays registered, so its memory must stay mapped (the kernel would
// otherwise receive into freed addresses) and Close on the owner thread
// must still unregister it, after which the group can be set up again.
func TestBufRingCloseRefused(t *testing.T) {
	needFeatures(t, "IORING_REGISTER_PBUF_RING")
	r := newRing(t, &Config{Entries: 4, SingleIssuer: true, DeferTaskrun: true})
	b, err := r.SetupBufRing(1, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // a thread other than the owner's
		defer runtime.UnlockOSThread()
		done <- b.Close()
	}()
	if err := <-done; !errors.Is(err, unix.EEXIST) {
		t.Fatalf("Close from another thread: %v, want EEXIST", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close on the owner thread after a refused one: %v", err)
	}
	b2, err := r.SetupBufRing(1, 4, 64)
	if err != nil {
		t.Fatalf("group 1 again after Close: %v", err)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseRefusedOffThread closes a SINGLE_ISSUER ring (no registered ring
// fd) from a thread other than the one that created it. The kernel refuses
// that thread's cancel (io_uring_enter: EEXIST), so Close must refuse too and
// leave the ring as it was: its multishot receive stays armed on the buffer
// ring, whose memory stays mapped, and data sent after the refused Close
// still arrives in one of its buffers.
func TestCloseRefusedOffThread(t *testing.T) {
	needFeatures(t, FeatMultishotRecv)
	c, s := tcpPair(t)
	r := newRing(t, &Config{Entries: 4, SingleIssuer: true}) // closed before the sockets
	b, err := r.SetupBufRing(1, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	sqe(t, r).PrepRecvMultishot(s, 1, false, 0, 7)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // a thread other than the owner's
		defer runtime.UnlockOSThread()
		done <- r.Close()
	}()
	if err := <-done; !errors.Is(err, unix.EEXIST) {
		t.Fatalf("Close from another thread: %v, want EEXIST", err)
	}
	if _, err := unix.Write(c, []byte("after")); err != nil {
		t.Fatal(err)
	}
	got := reap(t, r, 1)[0]
	id, ok := got.BufferID()
	if got.UserData != 7 || got.Res != 5 || !ok || string(b.Buf(id)[:5]) != "after" || !got.More() {
		t.Fatalf("receive after the refused Close: %+v", got)
	}
}

// TestSockNonEmptyAtEOF checks what CQE.SockNonEmpty promises on TCP: set
// when a receive leaves data queued, and also when it leaves only the
// peer's FIN (the kernel's queued-bytes hint, tcp_inq_hint, counts an
// unread end of stream as one byte), and still on the receive that returns
// 0: "set" means a further receive returns at once, with data or 0, not
// that data is queued.
func TestSockNonEmptyAtEOF(t *testing.T) {
	c, s := tcpPair(t)
	r := newRing(t, &Config{Entries: 4})
	buf := offHeap(t, 64)
	if _, err := unix.Write(c, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Shutdown(c, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	// Wait until the FIN is in: the socket reports the peer's shutdown.
	pfd := []unix.PollFd{{Fd: int32(s), Events: unix.POLLRDHUP}}
	for pfd[0].Revents&unix.POLLRDHUP == 0 {
		if _, err := unix.Poll(pfd, 10_000); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		n        int
		wantRes  int32
		nonEmpty bool
		queued   string
	}{
		{1, 1, true, "\"bc\" and the FIN"},
		{2, 2, true, "only the FIN"},
		{64, 0, true, "nothing: the end of stream is read"},
	} {
		sqe(t, r).PrepRecv(s, buf[:tc.n], 0, 1)
		got := reap(t, r, 1)[0]
		t.Logf("recv of %d leaving %s: res %d, SockNonEmpty %v", tc.n, tc.queued, got.Res, got.SockNonEmpty())
		if got.Res != tc.wantRes || got.SockNonEmpty() != tc.nonEmpty {
			t.Errorf("recv of %d leaving %s: res %d, SockNonEmpty %v; want %d, %v", tc.n, tc.queued, got.Res, got.SockNonEmpty(), tc.wantRes, tc.nonEmpty)
		}
	}
}

// TestTimeoutUpdateClockFlag: PrepTimeoutUpdate's flags may name the
// timeout's clock (its documentation listed "TimeoutAbs, a clock flag"; the timeout's own clock is the one an update runs on): an
// update of a CLOCK_BOOTTIME timeout given TimeoutBoottime moves it like
// any other (Res 0, then the timeout at 20 ms), where the kernel refuses a
// clock flag in an update (-EINVAL) and the timeout stayed at 10 s.
func TestTimeoutUpdateClockFlag(t *testing.T) {
	r := newRing(t, nil)
	sqe(t, r).PrepTimeout(r.Timespec(10*time.Second), 0, TimeoutBoottime, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sqe(t, r).PrepTimeoutUpdate(1, r.Timespec(20*time.Millisecond), TimeoutBoottime, 2)
	got := reap(t, r, 1)
	if got[0].UserData != 2 || got[0].Res != 0 {
		sqe(t, r).PrepTimeoutRemove(1, 3)
		reap(t, r, 2)
		t.Fatalf("update with TimeoutBoottime: %+v (%v), want user_data 2, Res 0", got[0], got[0].Err())
	}
	c := reap(t, r, 1)[0]
	if el := time.Since(start); c.UserData != 1 || !errors.Is(c.Err(), unix.ETIME) || el > 5*time.Second {
		t.Errorf("timeout after the update: %+v (%v) after %v, want user_data 1, ETIME, at 20 ms", c, c.Err(), el)
	}
}
