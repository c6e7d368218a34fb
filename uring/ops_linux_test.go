package uring

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/hugetlb"
	"github.com/spindlenet/spindle/internal/sys"
)

func TestConnectSocketShutdown(t *testing.T) {
	needFeatures(t, "IORING_OP_SOCKET", "IORING_OP_SHUTDOWN")
	r := newRing(t, nil)
	lfd, ap := listenTCP(t)
	_, sa := arenaSockaddr(t, ap)
	// socket(2) through the ring, then connect, linked.
	sqe(t, r).PrepSocket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0, 0, 1)
	c := reap(t, r, 1)[0]
	if c.Res < 0 {
		t.Fatalf("socket: %v", c.Err())
	}
	fd := int(c.Res)
	closeFd(t, fd)
	sqe(t, r).PrepConnect(fd, sa, 2)
	if c := reap(t, r, 1)[0]; c.Res != 0 {
		t.Fatalf("connect: %v", c.Err())
	}
	nfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(nfd)
	sqe(t, r).PrepShutdown(fd, unix.SHUT_WR, 3)
	if c := reap(t, r, 1)[0]; c.Res != 0 {
		t.Fatalf("shutdown: %v", c.Err())
	}
	// The peer sees EOF after the shutdown.
	var b [8]byte
	if n, err := unix.Read(nfd, b[:]); n != 0 || err != nil {
		t.Errorf("peer read after shutdown = %d, %v; want EOF", n, err)
	}
	// Connecting to a closed port fails with ECONNREFUSED as a CQE result.
	// The listener stops listening by shutdown, not close: listenTCP's
	// cleanup closes lfd, and a close here would make that a second close
	// of a number the next socket (or any file of a test beside) may hold.
	if err := unix.Shutdown(lfd, unix.SHUT_RDWR); err != nil {
		t.Fatal(err)
	}
	sqe(t, r).PrepSocket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0, 0, 4)
	c = reap(t, r, 1)[0]
	if c.Res < 0 {
		t.Fatal(c.Err())
	}
	closeFd(t, int(c.Res))
	sqe(t, r).PrepConnect(int(c.Res), sa, 5)
	if c := reap(t, r, 1)[0]; !errors.Is(c.Err(), unix.ECONNREFUSED) {
		t.Errorf("connect to closed port: %v, want ECONNREFUSED", c.Err())
	}
}

func TestSocketDirect(t *testing.T) {
	needFeatures(t, "IORING_OP_SOCKET", "IORING_RSRC_REGISTER_SPARSE")
	r := newRing(t, nil)
	if err := r.RegisterFiles(4); err != nil {
		t.Fatal(err)
	}
	sqe(t, r).PrepSocketDirect(unix.AF_INET, unix.SOCK_STREAM, 0, 0, 1)
	c := reap(t, r, 1)[0]
	if c.Res < 0 || c.Res >= 4 {
		t.Fatalf("direct socket: res %d (%v)", c.Res, c.Err())
	}
	sqe(t, r).PrepCloseDirect(int(c.Res), 2)
	if c := reap(t, r, 1)[0]; c.Res != 0 {
		t.Errorf("close direct: %v", c.Err())
	}
}

func TestSendmsg(t *testing.T) {
	r := newRing(t, nil)
	c, s := tcpPair(t)
	arena := newArena(t)
	a, b := arena.Bytes(5), arena.Bytes(6)
	copy(a, "hello")
	copy(b, " world")
	msg := arena.Msghdr(nil, a, b)
	sqe(t, r).PrepSendmsg(c, msg, 0, 1)
	if cq := reap(t, r, 1)[0]; cq.Res != 11 {
		t.Fatalf("sendmsg: res %d (%v)", cq.Res, cq.Err())
	}
	got := make([]byte, 32)
	n, err := unix.Read(s, got)
	if err != nil || string(got[:n]) != "hello world" {
		t.Errorf("peer read %q, %v", got[:n], err)
	}
}

func TestReadWrite(t *testing.T) {
	r := newRing(t, nil)
	rfd, wfd := pipe(t)
	out, in := offHeap(t, 4096), offHeap(t, 4096)
	copy(out, "through the pipe")
	w := sqe(t, r)
	w.PrepWrite(wfd, out[:16], -1, 1)
	w.SetFlags(FlagIOLink)
	sqe(t, r).PrepRead(rfd, in, -1, 2)
	for _, c := range reap(t, r, 2) {
		if c.Res != 16 {
			t.Errorf("op %d: res %d (%v)", c.UserData, c.Res, c.Err())
		}
	}
	if string(in[:16]) != "through the pipe" {
		t.Errorf("read %q", in[:16])
	}
}

func TestReadWriteFixed(t *testing.T) {
	for _, mode := range []string{"4k", "thp or hugetlb", "hugetlb"} {
		t.Run(mode, func(t *testing.T) {
			r := newRing(t, nil)
			size, huge := 64<<10, mode != "4k"
			if huge {
				size = 2 << 20
			}
			var buf []byte
			var kind PageKind
			mapBuf := func() bool {
				var err error
				buf, kind, err = MapAnon(size, huge)
				if err != nil {
					t.Fatal(err)
				}
				if mode == "hugetlb" && kind != PageHuge {
					// Another process took the page (Take runs this again).
					t.Logf("buffer on %v pages with a hugetlb page free", kind)
					Unmap(buf)
					return false
				}
				return true
			}
			if mode == "hugetlb" {
				hugetlb.Grow(t, sys.HugePageSize(), 1).Take(mapBuf)
			} else {
				mapBuf()
			}
			defer Unmap(buf)
			t.Logf("fixed buffer on %v pages", kind)
			if err := r.RegisterBuffers([][]byte{buf}); err != nil {
				t.Fatal(err)
			}
			f, err := os.Create(filepath.Join(t.TempDir(), "data"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fd := int(f.Fd())
			for i := range 8192 {
				buf[i] = pattern(i)
			}
			sqe(t, r).PrepWriteFixed(fd, buf[:8192], 0, 0, 1)
			if c := reap(t, r, 1)[0]; c.Res != 8192 {
				t.Fatalf("write_fixed: res %d (%v)", c.Res, c.Err())
			}
			clear(buf[:8192])
			dst := buf[4096 : 4096+8192] // any slice inside the registered buffer
			sqe(t, r).PrepReadFixed(fd, dst, 0, 0, 2)
			if c := reap(t, r, 1)[0]; c.Res != 8192 {
				t.Fatalf("read_fixed: res %d (%v)", c.Res, c.Err())
			}
			for i, v := range dst {
				if v != pattern(i) {
					t.Fatalf("byte %d differs", i)
				}
			}
			// A slice outside every registered buffer is refused.
			other := offHeap(t, 4096)
			sqe(t, r).PrepReadFixed(fd, other, 0, 0, 3)
			if c := reap(t, r, 1)[0]; !errors.Is(c.Err(), unix.EFAULT) {
				t.Errorf("read_fixed outside the buffer: %v, want EFAULT", c.Err())
			}
			if err := r.UnregisterBuffers(); err != nil {
				t.Fatal(err)
			}
			sqe(t, r).PrepReadFixed(fd, dst, 0, 0, 4)
			if c := reap(t, r, 1)[0]; c.Err() == nil {
				t.Error("read_fixed after UnregisterBuffers succeeded")
			}
		})
	}
}

func TestPollAddMultishot(t *testing.T) {
	needKernel(t, "IORING_POLL_ADD_MULTI", "5.13")
	r := newRing(t, nil)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	closeFd(t, p[0])
	closeFd(t, p[1])
	sqe(t, r).PrepPollAdd(p[0], unix.POLLIN, true, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	expectNone(t, r, 5*time.Millisecond)
	var b [16]byte
	for i := range 3 {
		unix.Write(p[1], []byte{'x'})
		c := reap(t, r, 1)[0]
		if c.UserData != 1 || c.Res&unix.POLLIN == 0 || !c.More() {
			t.Fatalf("poll event %d: %+v", i, c)
		}
		unix.Read(p[0], b[:])
	}
	sqe(t, r).PrepPollRemove(1, 2)
	expectRemoved(t, r, 1, 2)
	// A single-shot poll completes once, without F_MORE.
	sqe(t, r).PrepPollAdd(p[1], unix.POLLOUT, false, 3)
	if c := reap(t, r, 1)[0]; c.Res&unix.POLLOUT == 0 || c.More() {
		t.Errorf("one-shot poll: %+v", c)
	}
}

// TestSendZCNotification checks the SEND_ZC protocol: per send, first the
// result CQE with F_MORE, then the notification CQE (F_NOTIF, no F_MORE) with
// the same user_data, and the notification never comes first. Loopback
// copies, which the notification reports.
func TestSendZCNotification(t *testing.T) {
	needFeatures(t, "IORING_OP_SEND_ZC") // 6.2: with the usage report PrepSendZC sets
	for _, fixed := range []bool{false, true} {
		name := "plain"
		if fixed {
			name = "fixed buffer"
		}
		t.Run(name, func(t *testing.T) {
			r := newRing(t, &Config{Entries: 32, SingleIssuer: true, DeferTaskrun: true})
			c, s := tcpPair(t)
			buf := offHeap(t, 64<<10)
			for i := range buf {
				buf[i] = pattern(i)
			}
			idx := -1
			if fixed {
				if err := r.RegisterBuffers([][]byte{buf}); err != nil {
					t.Fatal(err)
				}
				idx = 0
			}
			const sends = 8
			const size = 4096
			for i := range sends {
				sqe(t, r).PrepSendZC(c, buf[i*size:(i+1)*size], 0, idx, uint64(10+i))
			}
			done := make(chan error, 1)
			go func() {
				got := make([]byte, sends*size)
				for off := 0; off < len(got); {
					n, err := unix.Read(s, got[off:])
					if err != nil {
						done <- err
						return
					}
					off += n
				}
				for i, v := range got {
					if v != pattern(i) {
						done <- errors.New("received bytes differ")
						return
					}
				}
				done <- nil
			}()
			state := make(map[uint64]int) // 1 = result seen, 2 = notification seen
			for _, cq := range reap(t, r, 2*sends) {
				switch {
				case cq.Notif():
					if state[cq.UserData] != 1 {
						t.Errorf("send %d: notification before its result", cq.UserData)
					}
					if cq.More() {
						t.Errorf("send %d: notification with F_MORE", cq.UserData)
					}
					// Loopback delivers by copying into the receiver's
					// socket, so the kernel must report the copy.
					if !cq.ZCCopied() {
						t.Errorf("send %d: notification res %#x lacks IORING_NOTIF_USAGE_ZC_COPIED on loopback", cq.UserData, uint32(cq.Res))
					}
					state[cq.UserData] = 2
				default:
					if cq.Res != size || !cq.More() {
						t.Errorf("send %d: %+v (%v), want %d bytes with F_MORE", cq.UserData, cq, cq.Err(), size)
					}
					if state[cq.UserData] != 0 {
						t.Errorf("send %d: second result", cq.UserData)
					}
					state[cq.UserData] = 1
				}
			}
			for i := range sends {
				if state[uint64(10+i)] != 2 {
					t.Errorf("send %d: state %d at the end", 10+i, state[uint64(10+i)])
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSendZCFailureNotifies checks what the engine's send-slab accounting
// and PrepSendZC's documentation rely on: a SEND_ZC that fails once the
// kernel has taken it (a broken pipe, no such fd) still posts its
// notification after the result, the result carrying the error and F_MORE,
// and that notification reports a copy (IORING_NOTIF_USAGE_ZC_COPIED) though
// nothing was sent.
func TestSendZCFailureNotifies(t *testing.T) {
	needFeatures(t, "IORING_OP_SEND_ZC") // 6.2: with the usage report PrepSendZC sets
	r := newRing(t, &Config{Entries: 8}) // used from the subtests' goroutines
	c, _ := tcpPair(t)
	if err := unix.Shutdown(c, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	buf := offHeap(t, 100)
	for _, tc := range []struct {
		name string
		fd   int
		want unix.Errno
	}{
		{"broken pipe", c, unix.EPIPE},
		{"no such fd", -1, unix.EBADF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sqe(t, r).PrepSendZC(tc.fd, buf, unix.MSG_NOSIGNAL, -1, 1)
			got := reap(t, r, 2)
			if res := got[0]; res.Notif() || res.Err() != tc.want || !res.More() {
				t.Errorf("result %+v (%v): want %v with F_MORE", res, res.Err(), tc.want)
			}
			if n := got[1]; !n.Notif() || n.UserData != 1 || n.More() || !n.ZCCopied() {
				t.Errorf("second completion %+v: want the notification, reporting a copy", n)
			}
		})
	}
}

// TestSendZCLinkCancelledNotifies checks a case CQE.More alone does not
// tell: a SEND_ZC cancelled because the request it was linked to failed
// posts its result (-ECANCELED) without F_MORE, and still a notification
// after it, as its preparation had taken one (6.18: io_req_tw_fail_links
// sets no flag; io_send_zc_cleanup flushes the notification). A user that
// took a result without F_MORE for the last completion of the send would
// reuse the buffer twice over.
func TestSendZCLinkCancelledNotifies(t *testing.T) {
	needFeatures(t, "IORING_OP_SEND_ZC")
	r := newRing(t, &Config{Entries: 8}) // used from the subtests' goroutines
	c, _ := tcpPair(t)
	if err := unix.Shutdown(c, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	buf := offHeap(t, 100)
	for _, tc := range []struct {
		name string
		zc   bool // the failing head is a SEND_ZC too
	}{
		{"after a SEND", false},
		{"after a SEND_ZC", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := sqe(t, r)
			if tc.zc {
				head.PrepSendZC(c, buf, unix.MSG_NOSIGNAL, -1, 1)
			} else {
				head.PrepSend(c, buf, unix.MSG_NOSIGNAL, 1)
			}
			head.SetFlags(FlagIOLink)
			sqe(t, r).PrepSendZC(c, buf, unix.MSG_NOSIGNAL, -1, 2)
			n := 3
			if tc.zc {
				n = 4
			}
			var res, notif []CQE
			for _, q := range reap(t, r, n) {
				if q.UserData != 2 {
					continue
				}
				if q.Notif() {
					notif = append(notif, q)
				} else {
					res = append(res, q)
				}
			}
			if len(res) != 1 || res[0].Err() != unix.ECANCELED || res[0].More() {
				t.Errorf("results of the linked SEND_ZC %+v: want one, ECANCELED without F_MORE", res)
			}
			if len(notif) != 1 {
				t.Errorf("notifications of the linked SEND_ZC %+v: want one", notif)
			}
			expectNone(t, r, 50*time.Millisecond)
		})
	}
}

// TestSkipSuccessNopEndsCutChain pins the kernel behaviour the engine's
// quiet SENDs rely on (a test of the kernel only): on a DEFER_TASKRUN ring,
// a chain of MSG_DONTWAIT|MSG_WAITALL SENDs ending in a NOP with
// FlagCQESkipSuccess posts nothing for the NOP when every SEND sent all;
// when the socket's full buffer cuts the first short, the SEND fails its
// link (short, or EAGAIN), and the rest of the chain, the NOP with it,
// posts ECANCELED, all inside the enter that submitted the chain: a wait
// for one completion more than the SENDs ends there.
func TestSkipSuccessNopEndsCutChain(t *testing.T) {
	r := newRing(t, &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
	_, s := tcpPair(t)
	if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	const big = 4 << 20 // more than the peer, which does not read, takes
	buf := offHeap(t, big)
	const flags = unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT | unix.MSG_WAITALL
	chain := func(sizes ...int) {
		for i, n := range sizes {
			q := sqe(t, r)
			q.PrepSend(s, buf[:n], flags, uint64(i+1))
			q.SetFlags(FlagIOLink)
		}
		q := sqe(t, r)
		q.PrepNop(99)
		q.SetFlags(FlagCQESkipSuccess)
	}

	chain(100)
	got := reap(t, r, 1)
	if got[0].UserData != 1 || got[0].Res != 100 {
		t.Errorf("sent whole: %+v, want the SEND's, 100 bytes", got[0])
	}
	expectNone(t, r, 50*time.Millisecond) // the NOP's

	chain(big, 100)
	if _, err := r.SubmitAndWait(3, 2*time.Second); err != nil {
		t.Fatalf("a wait for the cut chain's 3 completions: %v (posted %d)", err, r.CQReady())
	}
	cqes := make([]CQE, 3)
	if n := r.PeekCQEs(cqes); n != 3 {
		t.Fatalf("%d completions, want 3", n)
	}
	if q := cqes[0]; q.UserData != 1 || !(q.Res > 0 && q.Res < big || q.Err() == unix.EAGAIN) {
		t.Errorf("cut SEND: %+v, want short or EAGAIN", q)
	}
	for i, ud := range []uint64{2, 99} {
		if q := cqes[i+1]; q.UserData != ud || q.Err() != unix.ECANCELED {
			t.Errorf("completion %d: %+v, want user_data %d, ECANCELED", i+1, q, ud)
		}
	}
	expectNone(t, r, 50*time.Millisecond)
}

// TestSkipSuccessSendPostsOnlyCut pins what the engine's lone quiet SENDs
// rely on, on a DEFER_TASKRUN ring: a MSG_DONTWAIT|MSG_WAITALL SEND with
// FlagCQESkipSuccess that sends all posts nothing, and once the SQ head has
// passed it (SQConsumed) with the CQ empty and nothing overflowed it has
// completed; one a full socket buffer cuts posts its result (short, or
// EAGAIN) inside the enter that submits it, the kernel having cleared the
// skip as it failed the request (req_set_fail); with the CQ full that
// result waits in the overflow list (CQOverflowPending) and comes after the
// CQ's. A test of the kernel and of SQConsumed and CQOverflowPending.
func TestSkipSuccessSendPostsOnlyCut(t *testing.T) {
	r := newRing(t, &Config{Entries: 8, CQEntries: 16, SingleIssuer: true, DeferTaskrun: true})
	_, s := tcpPair(t)
	if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	const big = 4 << 20 // more than the peer, which does not read, takes
	buf := offHeap(t, big)
	send := func(n int, ud uint64) uint32 {
		pos := r.SQTail()
		q := sqe(t, r)
		q.PrepSend(s, buf[:n], unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT|unix.MSG_WAITALL, ud)
		q.SetFlags(FlagCQESkipSuccess)
		if r.SQConsumed(pos) {
			t.Fatalf("SEND %d consumed before it was submitted", ud)
		}
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		if !r.SQConsumed(pos) {
			t.Fatalf("SEND %d not consumed by the enter that submitted it", ud)
		}
		return pos
	}

	send(100, 1)
	if n, o := r.CQReady(), r.CQOverflowPending(); n != 0 || o {
		t.Fatalf("sent whole: %d completions, overflow %v; want none", n, o)
	}
	expectNone(t, r, 50*time.Millisecond)

	fillNops(t, r, int(r.CQEntries()))
	send(100, 2)
	if n, o := r.CQReady(), r.CQOverflowPending(); n != r.CQEntries() || o {
		t.Fatalf("sent whole with the CQ full: %d completions, overflow %v; want the NOPs' %d and none", n, o, r.CQEntries())
	}
	send(big, 3)
	if n, o := r.CQReady(), r.CQOverflowPending(); n != r.CQEntries() || !o {
		t.Fatalf("cut with the CQ full: %d completions, overflow %v; want the NOPs' %d and an overflow", n, o, r.CQEntries())
	}
	cqes := make([]CQE, r.CQEntries()+1)
	if n := r.PeekCQEs(cqes); n != len(cqes) {
		t.Fatalf("%d completions after the overflow, want %d", n, len(cqes))
	}
	if q := cqes[len(cqes)-1]; q.UserData != 3 || !(q.Res > 0 && q.Res < big || q.Err() == unix.EAGAIN) {
		t.Errorf("cut SEND: %+v, want user_data 3, short or EAGAIN", q)
	}
	if r.CQOverflowPending() {
		t.Error("overflow still pending once reaped")
	}

	send(big, 4)
	if n := r.CQReady(); n != 1 {
		t.Fatalf("cut: %d completions after the submitting enter, want 1", n)
	}
	var c [1]CQE
	r.PeekCQEs(c[:])
	if q := c[0]; q.UserData != 4 || !(q.Res > 0 && q.Res < big || q.Err() == unix.EAGAIN) {
		t.Errorf("cut SEND: %+v, want user_data 4, short or EAGAIN", q)
	}
	expectNone(t, r, 50*time.Millisecond)
}

// fillNops prepares and submits total NOPs with user_data 0..total-1 without
// reaping any completion; Submit must never fail, however far the CQ
// overflows.
func fillNops(t *testing.T, r *Ring, total int) {
	t.Helper()
	for i := range total {
		s := r.GetSQE()
		if s == nil {
			if _, err := r.Submit(); err != nil {
				t.Fatalf("Submit with %d completions overflowed: %v", i-int(r.CQEntries()), err)
			}
			s = sqe(t, r)
		}
		s.PrepNop(uint64(i))
	}
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
}

// TestCQOverflow posts far more completions than the CQ holds without
// reaping, then checks that every one of them arrives, once and in order,
// through PeekCQEs alone (which must flush the kernel's overflow list itself).
//
// The large case is the io_uring_enter EBUSY question: with
// IORING_FEAT_NODROP, old kernels refused submissions with EBUSY while the
// overflow list could not be flushed. Linux 6.18 never does: it keeps
// queueing overflowed CQEs in kernel memory (64k here), so the test asserts
// that Submit keeps succeeding. The EBUSY/EAGAIN branch of Ring.enter is for
// older kernels and for request allocation failures, which cannot be
// provoked here.
func TestCQOverflow(t *testing.T) {
	tests := []struct {
		name  string
		cfg   *Config
		total int
	}{
		{"3x the CQ", &Config{Entries: 8, CQEntries: 16}, 48},
		{"3x the CQ, defer taskrun", &Config{Entries: 8, CQEntries: 16, SingleIssuer: true, DeferTaskrun: true}, 48},
		{"64k overflowed", &Config{Entries: 64, CQEntries: 64}, 64<<10 + 64},
		{"64k overflowed, defer taskrun", &Config{Entries: 64, CQEntries: 64, SingleIssuer: true, DeferTaskrun: true}, 64<<10 + 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(t, tt.cfg)
			fillNops(t, r, tt.total)
			if r.CQReady() != r.CQEntries() {
				t.Fatalf("CQ holds %d of %d before reaping; the test did not overflow it", r.CQReady(), r.CQEntries())
			}
			buf := make([]CQE, 5)
			next := 0
			for tries := 0; next < tt.total && tries < tt.total; tries++ {
				n := r.PeekCQEs(buf)
				for _, c := range buf[:n] {
					if c.UserData != uint64(next) || c.Res != 0 {
						t.Fatalf("completion %+v, want NOP %d", c, next)
					}
					next++
				}
			}
			if next != tt.total {
				t.Fatalf("PeekCQEs returned %d of %d completions", next, tt.total)
			}
			if n := r.PeekCQEs(buf); n != 0 || r.CQOverflow() != 0 {
				t.Errorf("after the last: %d more completions, %d dropped by the kernel", n, r.CQOverflow())
			}
		})
	}
}

func TestRegisterFilesUpdate(t *testing.T) {
	needFeatures(t, "IORING_RSRC_REGISTER_SPARSE")
	r := newRing(t, nil)
	if err := r.RegisterFiles(8); err != nil {
		t.Fatal(err)
	}
	c, s := tcpPair(t)
	if n, err := r.UpdateFiles(3, []int{c}); n != 1 || err != nil {
		t.Fatalf("UpdateFiles = %d, %v", n, err)
	}
	sendFixed(t, r, 3, s, "fixed", 1)
	if _, err := r.UpdateFiles(3, []int{-1}); err != nil {
		t.Fatal(err)
	}
	buf := offHeap(t, 8)
	w := sqe(t, r)
	w.PrepSend(3, buf[:5], 0, 2)
	w.SetFlags(FlagFixedFile)
	if cq := reap(t, r, 1)[0]; !errors.Is(cq.Err(), unix.EBADF) {
		t.Errorf("send on cleared slot: %v, want EBADF", cq.Err())
	}
	if err := r.UnregisterFiles(); err != nil {
		t.Fatal(err)
	}
}

// TestForEachCQE drains an overflowed CQ through ForEachCQE, stops early when
// asked, and allocates nothing.
func TestForEachCQE(t *testing.T) {
	r := newRing(t, &Config{Entries: 8, CQEntries: 16})
	const total = 40
	fillNops(t, r, total)
	next := uint64(0)
	stopAt := uint64(5)
	fn := func(c CQE) bool {
		if c.UserData != next {
			t.Errorf("completion %d, want %d", c.UserData, next)
		}
		next++
		return c.UserData != stopAt
	}
	if n := r.ForEachCQE(fn); n != 6 {
		t.Fatalf("stopped after %d, want 6", n)
	}
	stopAt = total + 1
	for tries := 0; next < total && tries < 100; tries++ {
		r.ForEachCQE(fn)
	}
	if next != total {
		t.Fatalf("consumed %d of %d", next, total)
	}
	allocs := testing.AllocsPerRun(50, func() {
		r.GetSQE().PrepNop(next)
		r.SubmitAndWait(1, 0)
		r.ForEachCQE(fn)
	})
	if allocs != 0 {
		t.Errorf("ForEachCQE round trip: %v allocs/op", allocs)
	}
}

// TestForEachCQEReentrant reaps from inside fn, then closes the ring from
// inside fn: every completion is seen once, and the walk ends at Close.
func TestForEachCQEReentrant(t *testing.T) {
	r := newRing(t, &Config{Entries: 8})
	for i := range 4 {
		sqe(t, r).PrepNop(uint64(i))
	}
	if _, err := r.SubmitAndWait(4, time.Second); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	var inner [8]CQE
	r.ForEachCQE(func(c CQE) bool {
		seen[c.UserData]++
		if c.UserData == 0 {
			for _, d := range inner[:r.PeekCQEs(inner[:])] {
				seen[d.UserData]++
			}
		}
		return true
	})
	for i := range uint64(4) {
		if seen[i] != 1 {
			t.Errorf("completion %d seen %d times", i, seen[i])
		}
	}

	c, err := New(&Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.GetSQE().PrepNop(uint64(i))
	}
	if _, err := c.SubmitAndWait(3, time.Second); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if n := c.ForEachCQE(func(CQE) bool { calls++; c.Close(); return true }); n != 1 || calls != 1 {
		t.Errorf("after Close in fn: %d consumed, fn called %d times; want 1, 1", n, calls)
	}
}

// TestUpdateFilesPartial updates fixed-file slots with an fd that is not
// open: the kernel installs the ones before it, stops, and reports only how
// many it installed (no error when that is more than none). UpdateFiles
// must return that count with the kernel's EBADF, never a negative count.
func TestUpdateFilesPartial(t *testing.T) {
	needFeatures(t, "IORING_RSRC_REGISTER_SPARSE")
	r := newRing(t, nil)
	if err := r.RegisterFiles(8); err != nil {
		t.Fatal(err)
	}
	c, _ := tcpPair(t)
	const notOpen = 1 << 20 // above any fd this test process has
	tests := []struct {
		fds  []int
		want int
	}{
		{[]int{notOpen}, 0},
		{[]int{c, notOpen, c}, 1},
	}
	for _, tt := range tests {
		n, err := r.UpdateFiles(2, tt.fds)
		if n != tt.want || !errors.Is(err, unix.EBADF) {
			t.Errorf("UpdateFiles(2, %v) = %d, %v; want %d, EBADF", tt.fds, n, err, tt.want)
		}
	}
}
