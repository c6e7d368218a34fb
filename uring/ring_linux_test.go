package uring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
)

func TestNop(t *testing.T) {
	configs := []struct {
		name string
		cfg  *Config
	}{
		{"default", nil},
		{"single issuer defer taskrun", &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true}},
		{"coop taskrun", &Config{Entries: 8, CoopTaskrun: true}},
		{"coop and defer taskrun", &Config{Entries: 8, CoopTaskrun: true, SingleIssuer: true, DeferTaskrun: true}},
		{"registered ring fd", &Config{Entries: 8, SingleIssuer: true, RegisterRingFD: true}},
		{"sqpoll", &Config{Entries: 8, SQPoll: true, SQThreadIdle: 10 * time.Millisecond}},
		{"sqpoll pinned", &Config{Entries: 8, SQPoll: true, SQAffinity: true, SQThreadCPU: 0}},
	}
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(t, tc.cfg)
			const n = 20 // more than an 8-entry SQ: exercises SQ-full handling
			var got []CQE
			for i := range n {
				s := r.GetSQE()
				if s == nil {
					if _, err := r.Submit(); err != nil {
						t.Fatal(err)
					}
					got = append(got, reap(t, r, int(r.SQEntries()))...)
					s = sqe(t, r)
				}
				s.PrepNop(uint64(1000 + i))
			}
			got = append(got, reap(t, r, n-len(got))...)
			seen := make(map[uint64]bool)
			for _, c := range got {
				if c.Res != 0 || c.Err() != nil {
					t.Errorf("nop %d: res %d", c.UserData, c.Res)
				}
				seen[c.UserData] = true
			}
			for i := range n {
				if !seen[uint64(1000+i)] {
					t.Errorf("no completion for nop %d", 1000+i)
				}
			}
			if r.EnterCount() == 0 {
				t.Error("EnterCount = 0")
			}
		})
	}
}

func TestSubmitNothingNoSyscall(t *testing.T) {
	r := newRing(t, nil)
	before := r.EnterCount()
	if n, err := r.Submit(); n != 0 || err != nil {
		t.Fatalf("Submit() = %d, %v", n, err)
	}
	if r.EnterCount() != before {
		t.Error("empty Submit entered the kernel")
	}
}

func TestSubmitAndWaitTimeout(t *testing.T) {
	r := newRing(t, nil)
	start := time.Now()
	_, err := r.SubmitAndWait(1, 20*time.Millisecond)
	if !errors.Is(err, unix.ETIME) {
		t.Fatalf("SubmitAndWait on idle ring = %v, want ETIME", err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Errorf("returned after %v, before the timeout", time.Since(start))
	}
}

// TestSubmitAndWaitTimeoutAfterSubmit waits for two completions while
// submitting one NOP: io_uring_enter then reports the SQE it took, not the
// timeout, and SubmitAndWait must still end with ETIME after the timeout,
// with or without SQPOLL.
func TestSubmitAndWaitTimeoutAfterSubmit(t *testing.T) {
	for _, sqpoll := range []bool{false, true} {
		r := newRing(t, &Config{Entries: 4, SQPoll: sqpoll})
		sqe(t, r).PrepNop(1)
		start := time.Now()
		n, err := r.SubmitAndWait(2, 30*time.Millisecond)
		if !errors.Is(err, unix.ETIME) || n != 1 {
			t.Errorf("sqpoll %v: SubmitAndWait(2) with one NOP = %d, %v; want 1, ETIME", sqpoll, n, err)
		}
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("sqpoll %v: returned after %v, before the timeout", sqpoll, d)
		}
		if got := reap(t, r, 1); got[0].UserData != 1 {
			t.Errorf("sqpoll %v: completion %+v", sqpoll, got[0])
		}
	}
}

func TestCloseTwice(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err == nil {
		t.Error("second Close succeeded")
	}
	if _, err := r.Submit(); err == nil {
		t.Error("Submit after Close succeeded")
	}
}

func TestCQEHelpers(t *testing.T) {
	tests := []struct {
		cqe    CQE
		more   bool
		bid    int // -1: none
		notif  bool
		copied bool
		err    error
	}{
		{CQE{Res: 5}, false, -1, false, false, nil},
		{CQE{Res: -int32(unix.ENOBUFS)}, false, -1, false, false, unix.ENOBUFS},
		{CQE{Res: 3, Flags: 1 | 2 | 7<<16}, true, 7, false, false, nil},
		{CQE{Res: -2147483648, Flags: 8}, false, -1, true, true, nil},
		{CQE{Res: 0, Flags: 8}, false, -1, true, false, nil},
	}
	for _, tt := range tests {
		if got := tt.cqe.More(); got != tt.more {
			t.Errorf("%+v.More() = %v", tt.cqe, got)
		}
		id, ok := tt.cqe.BufferID()
		if (tt.bid >= 0) != ok || (ok && int(id) != tt.bid) {
			t.Errorf("%+v.BufferID() = %d, %v", tt.cqe, id, ok)
		}
		if tt.cqe.Notif() != tt.notif || tt.cqe.ZCCopied() != tt.copied {
			t.Errorf("%+v Notif/ZCCopied = %v/%v", tt.cqe, tt.cqe.Notif(), tt.cqe.ZCCopied())
		}
		if err := tt.cqe.Err(); !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("%+v.Err() = %v, want %v", tt.cqe, err, tt.err)
		}
	}
}

// TestCloseCancelsInFlight arms a multishot receive on a buffer ring, a
// multishot accept and a poll, then checks that the cancel Close starts with
// reaches all three before anything is unmapped, and that Close still
// succeeds afterwards with the buffer ring open.
func TestCloseCancelsInFlight(t *testing.T) {
	needFeatures(t, FeatMultishotRecv, FeatMultishotAccept)
	needKernel(t, "IORING_ASYNC_CANCEL_ANY", "5.19")
	r, err := New(&Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetupBufRing(1, 4, 64); err != nil {
		r.Close()
		t.Fatal(err)
	}
	_, s := tcpPair(t)
	lfd, _ := listenTCP(t)
	sqe(t, r).PrepRecvMultishot(s, 1, false, 0, 1)
	sqe(t, r).PrepAcceptMultishot(lfd, unix.SOCK_CLOEXEC, false, 2)
	sqe(t, r).PrepPollAdd(s, unix.POLLIN, true, 3)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	expectNone(t, r, 5*time.Millisecond) // all three parked
	if n := r.cancelAll(time.Now().Add(closeWait)); n != 3 {
		t.Errorf("cancel before close: %d requests cancelled, want 3", n)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(r.bufRings) != 0 {
		t.Errorf("%d buffer rings left open by Close", len(r.bufRings))
	}
}

// TestPeekOnlyLoop reaps a receive by peeking alone, never waiting: with
// CoopTaskrun or DeferTaskrun the completion is held as task work until the
// owner enters the kernel, and PeekCQEs/ForEachCQE must do that when the
// kernel flags it (IORING_SQ_TASKRUN), or a polling loop stalls forever;
// with NoTaskrunFlag the kernel flags nothing and they must enter anyway. On
// an idle ring, peeking and submitting nothing make no system call, except
// with NoTaskrunFlag: one each.
func TestPeekOnlyLoop(t *testing.T) {
	configs := []struct {
		name string
		cfg  *Config
	}{
		{"default", nil},
		{"coop taskrun", &Config{Entries: 8, CoopTaskrun: true}},
		{"defer taskrun", &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true}},
		{"coop taskrun, no flag", &Config{Entries: 8, CoopTaskrun: true, NoTaskrunFlag: true}},
		{"defer taskrun, no flag", &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true, NoTaskrunFlag: true}},
	}
	for _, tc := range configs {
		for _, foreach := range []bool{false, true} {
			name := tc.name + "/PeekCQEs"
			if foreach {
				name = tc.name + "/ForEachCQE"
			}
			t.Run(name, func(t *testing.T) {
				r := newRing(t, tc.cfg)
				var cq [1]CQE
				before := r.EnterCount()
				if r.PeekCQEs(cq[:]) != 0 || r.ForEachCQE(func(CQE) bool { return true }) != 0 {
					t.Fatal("peeking an idle ring returned completions")
				}
				if _, err := r.Submit(); err != nil {
					t.Fatal(err)
				}
				idle := uint64(0)
				if tc.cfg != nil && tc.cfg.NoTaskrunFlag {
					idle = 3
				}
				if n := r.EnterCount() - before; n != idle {
					t.Errorf("peeking an idle ring twice and submitting nothing entered the kernel %d times, want %d", n, idle)
				}
				if flagged := r.SetupFlags()&sys.IORING_SETUP_TASKRUN_FLAG != 0; tc.cfg != nil && flagged == tc.cfg.NoTaskrunFlag {
					t.Fatalf("IORING_SETUP_TASKRUN_FLAG set %v with NoTaskrunFlag %v", flagged, tc.cfg.NoTaskrunFlag)
				}
				c, s := tcpPair(t)
				buf := offHeap(t, 64)
				sqe(t, r).PrepRecv(s, buf, 0, 1)
				if _, err := r.Submit(); err != nil {
					t.Fatal(err)
				}
				if _, err := unix.Write(c, []byte("peek")); err != nil {
					t.Fatal(err)
				}
				got := 0
				enters := r.EnterCount()
				for deadline := time.Now().Add(5 * time.Second); got == 0 && time.Now().Before(deadline); {
					if foreach {
						got = r.ForEachCQE(func(c CQE) bool { cq[0] = c; return true })
					} else {
						got = r.PeekCQEs(cq[:])
					}
				}
				if got != 1 || cq[0].UserData != 1 || cq[0].Res != 4 || string(buf[:4]) != "peek" {
					t.Fatalf("peek-only loop got %d completions (%+v), buffer %q", got, cq[0], buf[:4])
				}
				// Without COOP/DEFER_TASKRUN the kernel posts the CQE on
				// its own: reaping it took no system call at all.
				if tc.cfg == nil && r.EnterCount() != enters {
					t.Errorf("peeking entered the kernel %d times on a default ring", r.EnterCount()-enters)
				}
			})
		}
	}
}

// TestUseAfterClose calls every Ring method after Close: none may panic or
// reach the old fd number, which the next ring is likely to get (a stale
// registration would land on that ring).
func TestUseAfterClose(t *testing.T) {
	r, err := New(&Config{Entries: 4})
	if err != nil {
		t.Fatal(err)
	}
	oldFd := r.Fd()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	next := newRing(t, &Config{Entries: 4})
	t.Logf("closed ring had fd %d, the next ring got %d", oldFd, next.Fd())
	mem := offHeap(t, 4096)
	calls := map[string]func() error{
		"RegisterFiles":     func() error { return r.RegisterFiles(4) },
		"UnregisterFiles":   r.UnregisterFiles,
		"RegisterBuffers":   func() error { return r.RegisterBuffers([][]byte{mem}) },
		"UnregisterBuffers": r.UnregisterBuffers,
		"UnregisterNAPI":    r.UnregisterNAPI,
		"AddNAPIID":         func() error { return r.AddNAPIID(300) },
		"RemoveNAPIID":      func() error { return r.RemoveNAPIID(300) },
		"UpdateFiles":       func() error { _, err := r.UpdateFiles(0, []int{0}); return err },
		"RegisterNAPI":      func() error { _, err := r.RegisterNAPI(NAPIConfig{}); return err },
		"SetupBufRing":      func() error { _, err := r.SetupBufRing(1, 2, 64); return err },
		"Submit":            func() error { _, err := r.Submit(); return err },
		"SubmitAndWait":     func() error { _, err := r.SubmitAndWait(1, time.Millisecond); return err },
		"Close":             r.Close,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s after Close = %v, want os.ErrClosed", name, err)
		}
	}
	if r.GetSQE() != nil || r.Timespec(time.Second) != nil || r.Fd() != -1 {
		t.Error("GetSQE, Timespec or Fd after Close returned a live value")
	}
	if r.PeekCQEs(make([]CQE, 1)) != 0 || r.ForEachCQE(func(CQE) bool { return true }) != 0 ||
		r.CQReady() != 0 || r.SQReady() != 0 || r.SQDropped() != 0 || r.CQOverflow() != 0 {
		t.Error("a queue accessor after Close returned non-zero")
	}
	if r.SQEntries() != 4 {
		t.Errorf("SQEntries after Close = %d, want the size it had", r.SQEntries())
	}
	if _, err := New(&Config{SQPoll: true, AttachWQ: r}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("New attaching to a closed ring: %v, want os.ErrClosed", err)
	}
	// Nothing reached the next ring: its file table is still free.
	if err := next.RegisterFiles(4); err != nil {
		t.Errorf("the next ring's RegisterFiles: %v (a stale call registered on it?)", err)
	}
}

// TestSubmitAndWaitNegativeTimeout checks that a timeout already passed (a
// deadline computed with time.Until that lies behind) ends the wait at once
// with ETIME, after submitting, instead of waiting with no timeout at all.
func TestSubmitAndWaitNegativeTimeout(t *testing.T) {
	needFeatures(t, configFeatures(ownerConfig)...)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	owner := startOwner(t, func(r *Ring) {
		r.GetSQE().PrepNop(1)
		n, err := r.SubmitAndWait(2, -time.Millisecond)
		done <- result{n, err}
	})
	if owner.err != nil {
		t.Fatal(owner.err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		// End the wait with a message from another ring.
		sender := newRing(t, nil)
		sqe(t, sender).PrepMsgRing(owner.fd, 0, 77, 0, 1)
		reap(t, sender, 1)
		res = <-done
		t.Fatalf("SubmitAndWait with a negative timeout still waiting after 5s (ended by a message: %d, %v)", res.n, res.err)
	}
	if res.n != 1 || !errors.Is(res.err, unix.ETIME) {
		t.Errorf("SubmitAndWait(2) with one NOP and a negative timeout = %d, %v; want 1, ETIME", res.n, res.err)
	}
}

// TestRegisterRingFDTableFull fills a thread's table of registered rings
// (16 since 5.18): the next RegisterRingFD ring fails with the kernel's
// EBUSY, not as a kernel without IORING_REGISTER_RING_FDS.
func TestRegisterRingFDTableFull(t *testing.T) {
	needFeatures(t, "IORING_REGISTER_RING_FDS")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var rings []*Ring
	defer func() {
		for _, r := range rings {
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		}
	}()
	for range 64 {
		r, err := New(&Config{Entries: 2, RegisterRingFD: true})
		if err == nil {
			rings = append(rings, r)
			continue
		}
		if len(rings) == 0 {
			t.Fatal(err)
		}
		if errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EBUSY) {
			t.Fatalf("ring %d on a thread with %d registered: %v, want EBUSY and not ErrNotSupported", len(rings)+1, len(rings), err)
		}
		return
	}
	t.Fatalf("%d rings registered on one thread, want the kernel's limit of 16", len(rings))
}

// TestBufRingUseAfterClose calls every BufRing method after its ring's
// Close, which closed the buffer ring too (a handler giving back a buffer
// during shutdown): none may panic; those with an error return
// os.ErrClosed, Buf returns nil and Recycle and Commit do nothing.
func TestBufRingUseAfterClose(t *testing.T) {
	needFeatures(t, "IORING_REGISTER_PBUF_RING")
	r, err := New(&Config{Entries: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.SetupBufRing(1, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Head":      func() error { _, err := b.Head(); return err },
		"Available": func() error { _, err := b.Available(); return err },
		"BundleIDs": func() error {
			_, err := b.BundleIDs(CQE{Res: 10, Flags: sys.IORING_CQE_F_BUFFER}, nil)
			return err
		},
		"Mbind": func() error { return b.Mbind(0) },
		"Close": b.Close,
	}
	for name, call := range calls {
		var err error
		if p := catchPanic(func() { err = call() }); p != nil {
			t.Errorf("%s after Close panicked: %v", name, p)
		} else if !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s after Close = %v, want os.ErrClosed", name, err)
		}
	}
	if p := catchPanic(func() { b.Recycle(0); b.Commit() }); p != nil {
		t.Errorf("Recycle and Commit after Close panicked: %v", p)
	}
	var buf []byte
	if p := catchPanic(func() { buf = b.Buf(0) }); p != nil || buf != nil {
		t.Errorf("Buf after Close = %v (panic %v), want nil", buf, p)
	}
}

// catchPanic runs f and returns what it panicked with, if it did.
func catchPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestCloseOffOwnerThread closes a RegisterRingFD ring from a thread other
// than its owner's. The registration lives in the owner thread's table, so
// that Close could neither cancel (its enter named a slot of the wrong
// table) nor unregister, yet it reported success while the owner thread's
// table kept the ring, armed requests and all, alive. It must refuse and
// leave the ring to its owner, whose Close then frees the slot: 16 rings
// can be registered on the owner thread afterwards.
func TestCloseOffOwnerThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	needFeatures(t, "IORING_REGISTER_RING_FDS")
	r, err := New(&Config{Entries: 2, RegisterRingFD: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // a thread other than the owner's
		defer runtime.UnlockOSThread()
		done <- r.Close()
	}()
	if err := <-done; err == nil {
		t.Error("Close from another thread succeeded")
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close on the owner thread: %v", err)
	}
	var rings []*Ring
	defer func() {
		for _, r := range rings {
			r.Close()
		}
	}()
	for range 16 {
		r, err := New(&Config{Entries: 2, RegisterRingFD: true})
		if err != nil {
			t.Fatalf("ring %d on the owner thread after Close: %v (the closed ring still registered?)", len(rings)+1, err)
		}
		rings = append(rings, r)
	}
}

// TestCloseUnconfirmedCancelLeavesBuffersMapped checks what Close does with
// the provided buffers when the kernel has not confirmed its cancel: a
// request the cancel did not reach may still pick a buffer and write into
// its address, so the buffers must stay mapped (and be counted, and said in
// the error) instead of the address being freed for a new mapping to take.
// A confirmed cancel (a count, or -ENOENT) unmaps them as before. On Linux
// 6.18 the cancel of every request (CancelAny|CancelAll) completes with a
// count whatever it reached, so the results that do not confirm (-1: not
// submitted or no completion within a second; -EALREADY; -EINVAL from a
// kernel without CancelAny) are put in place of the real one through
// cancelHook. Likewise the results of the sync cancel Close then waits for
// running requests with, through syncCancelHook: -EINVAL from a kernel
// without it keyed on an opcode (before 6.6: nothing to wait with, the
// cancel's count stands), -ETIME for a request still running at every call
// until the wait ends, and another error.
func TestCloseUnconfirmedCancelLeavesBuffersMapped(t *testing.T) {
	needKernel(t, "IORING_ASYNC_CANCEL_ANY", "5.19")
	tests := []struct {
		name      string
		res       int32 // replaces cancelAll's result; 1 keeps the real one
		sync      error // replaces each sync cancel's result; nil keeps the real one
		confirmed bool
		why       string // in the error when not confirmed
	}{
		{"real", 1, nil, true, ""},
		{"count", 3, nil, true, ""},
		{"ENOENT", -int32(unix.ENOENT), nil, true, ""},
		{"not submitted or timed out", -1, nil, false, "cancel not submitted, or no completion within 1s"},
		{"EALREADY", -int32(unix.EALREADY), nil, false, "cancel res -114"},
		{"EINVAL", -int32(unix.EINVAL), nil, false, "cancel res -22"},
		{"sync cancel EINVAL", 1, unix.EINVAL, true, ""}, // before 6.6: the count stands, as before
		// The ring submitted nothing but Close's cancel (opcode 14), the
		// one opcode waitRunning asks about.
		{"sync cancel ETIME", 1, unix.ETIME, false, "opcode 14 still running in io-wq after 50ms"},
		{"sync cancel EFAULT", 1, unix.EFAULT, false, "IORING_REGISTER_SYNC_CANCEL of opcode 14: bad address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(&Config{Entries: 8})
			if err != nil {
				t.Fatal(err)
			}
			if tt.sync != nil {
				r.syncCancelHook = func(error) error { return tt.sync }
				r.testCloseWait = 50 * time.Millisecond
			}
			var slabs [][]byte
			want := int64(0)
			for g, size := range []int{64, 4096} {
				b, err := r.SetupBufRing(uint16(g), 4, size)
				if err != nil {
					r.Close()
					t.Fatal(err)
				}
				slab := b.slab[:cap(b.slab)]
				slabs = append(slabs, slab)
				want += int64(cap(slab))
			}
			if tt.res != 1 {
				r.cancelHook = func(int32) int32 { return tt.res }
			}
			before, live := LeftMappedBytes(), sys.LiveMappings()
			err = r.Close()
			left := LeftMappedBytes() - before
			if tt.confirmed {
				if err != nil {
					t.Fatalf("Close after a confirmed cancel (%d): %v", tt.res, err)
				}
				if left != 0 {
					t.Errorf("Close after a confirmed cancel left %d bytes mapped", left)
				}
				for i, s := range slabs {
					if mapped(s) {
						t.Errorf("buffer ring %d still mapped after Close", i)
					}
				}
				if n := sys.LiveMappings(); n != live-5 {
					t.Errorf("%d off-heap mappings after Close, want %d (the ring's scratch, 2 slabs and 2 rings of entries unmapped)", n, live-5)
				}
				return
			}
			t.Cleanup(func() { releaseLeftMapped(slabs...) })
			if !errors.Is(err, ErrCancelUnconfirmed) {
				t.Fatalf("Close after a cancel result %d: %v, want ErrCancelUnconfirmed", tt.res, err)
			}
			if !strings.Contains(err.Error(), strconv.FormatInt(want, 10)+" bytes") {
				t.Errorf("Close error %q does not say the %d bytes left mapped", err, want)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("Close error %q does not say why (%q)", err, tt.why)
			}
			if left != want {
				t.Errorf("LeftMappedBytes grew by %d, want %d (both slabs)", left, want)
			}
			for i, s := range slabs {
				if !mapped(s) {
					t.Errorf("buffer ring %d unmapped by Close although the cancel was not confirmed", i)
				}
			}
			// The slabs stay; the rings of entries, pinned by the kernel
			// and read through its own mapping, go.
			if n := sys.LiveMappings(); n != live-3 {
				t.Errorf("%d off-heap mappings after Close, want %d (the 2 slabs kept)", n, live-3)
			}
			if len(r.bufRings) != 0 {
				t.Errorf("%d buffer rings still listed after Close", len(r.bufRings))
			}
			if err := r.Close(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("second Close: %v, want os.ErrClosed", err)
			}
		})
	}
}

// TestCloseAsksKernelAfterStall: Close's thread may not run for longer than
// Close's wait (2.7s was seen at a load of about 14 on 2 CPUs), and Close must
// still ask the kernel before it says the kernel did not confirm. It gave up
// on its own clock instead: a stall before the cancel left the cancel
// unsubmitted ("cancel not submitted"), one after it made Close say that a
// request was still running in io-wq without asking, and either left the
// provided buffers mapped for good. The ring has one poll request armed and
// nothing in io-wq; the stall is a sleep past the deadline, before cancelAll
// (a deadline already passed) or in cancelHook (after the cancel).
func TestCloseAsksKernelAfterStall(t *testing.T) {
	needKernel(t, "IORING_ASYNC_CANCEL_ANY", "5.19")
	const wait = 20 * time.Millisecond
	tests := []struct {
		name  string
		stall func(r *Ring) error
	}{
		{"before the cancel", func(r *Ring) error {
			if n := r.cancelAll(time.Now().Add(-wait)); n != 1 {
				return fmt.Errorf("cancel with its deadline passed: %d requests cancelled, want 1", n)
			}
			return nil
		}},
		{"after the cancel", func(r *Ring) error {
			r.cancelHook = func(res int32) int32 {
				time.Sleep(2 * wait)
				return res
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
			if err != nil {
				t.Fatal(os.NewSyscallError("eventfd", err))
			}
			t.Cleanup(func() { unix.Close(efd) })
			r, err := New(&Config{Entries: 8})
			if err != nil {
				t.Fatal(err)
			}
			r.testCloseWait = wait
			b, err := r.SetupBufRing(1, 4, 64)
			if err != nil {
				r.Close()
				t.Fatal(err)
			}
			slab := b.slab[:cap(b.slab)]
			sqe(t, r).PrepPollAdd(efd, unix.POLLIN, true, 1)
			if _, err := r.Submit(); err != nil {
				r.Close()
				t.Fatal(err)
			}
			if err := tt.stall(r); err != nil {
				t.Error(err)
			}
			before := LeftMappedBytes()
			if err := r.Close(); err != nil {
				t.Cleanup(func() { releaseLeftMapped(slab) })
				t.Fatalf("Close after a stall past its wait, nothing in io-wq: %v", err)
			}
			if n := LeftMappedBytes() - before; n != 0 || mapped(slab) {
				t.Errorf("Close left %d bytes mapped (slab mapped: %v)", n, mapped(slab))
			}
		})
	}
}

// releaseLeftMapped unmaps slabs of buffer rings Close left mapped (whole,
// as BufRing.slab[:cap]) and takes their bytes off LeftMappedBytes, for a
// test whose requests have ended since, or that made Close leave them
// although nothing was in flight (TestMain counts live mappings). A slab
// Close unmapped after all, which the test reports, is refused by Unmap and
// skipped.
func releaseLeftMapped(slabs ...[]byte) {
	for _, b := range slabs {
		if sys.Unmap(b) == nil {
			leftBytes.Add(-int64(cap(b)))
		}
	}
}

// mapped reports whether the pages of b are mapped: msync fails with ENOMEM
// on an address range with unmapped pages.
func mapped(b []byte) bool {
	return unix.Msync(b, unix.MS_ASYNC) == nil
}

// TestCancelAnyMissesRunningRequest pins down the kernel behaviour Close's
// documentation states: the cancel of every request (CancelAny|CancelAll,
// as Close sends it) only asks a request running in an io-wq worker to
// stop, yet completes with a count (0 or 1 here, varying from run to run),
// never -EALREADY, so it looks confirmed while the request may still run.
// The running request is an open of a FIFO with no writer, forced to io-wq
// (FlagAsync), where it blocks; this one ends when asked to stop (-EINTR,
// or -ERESTARTSYS as 6.18 posts it). A cancel keyed on the opcode alone,
// without CancelAll (IORING_ASYNC_CANCEL_OP, 6.6), does say -EALREADY: the
// way Close sees such requests (see TestSyncCancelByOpcodeWaits), unless
// the request ended on the cancel's own ask before the cancel looked again
// (-ENOENT: none running, which is true by then).
func TestCancelAnyMissesRunningRequest(t *testing.T) {
	needKernel(t, "IORING_ASYNC_CANCEL_ANY", "5.19")
	r := newRing(t, &Config{Entries: 8})
	path := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	name := offHeap(t, len(path)+1)
	copy(name, path)
	openFIFO := func(userData uint64) {
		t.Helper()
		s := sqe(t, r)
		s.prep(sys.IORING_OP_OPENAT, unix.AT_FDCWD, sys.SliceAddr(name), 0, 0, userData)
		s.OpFlags = uint32(unix.O_RDONLY | unix.O_CLOEXEC)
		s.SetFlags(FlagAsync)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		waitFIFOOpener(t)
	}
	// interrupted checks the open's completion: ended running, not
	// cancelled before it ran (or opened, if a writer came).
	interrupted := func(c CQE) {
		t.Helper()
		if c.Res >= 0 {
			unix.Close(int(c.Res))
		}
		if c.Res != -int32(unix.EINTR) && c.Res != -512 { // ERESTARTSYS
			t.Errorf("FIFO open: %+v, want -EINTR or -ERESTARTSYS (asked to stop while running)", c)
		}
	}
	byData := func(cs []CQE) map[uint64]CQE {
		m := make(map[uint64]CQE)
		for _, c := range cs {
			m[c.UserData] = c
		}
		return m
	}

	openFIFO(1)
	sqe(t, r).PrepCancel(0, CancelAny|CancelAll, 2)
	got := byData(reap(t, r, 2))
	if c := got[2]; c.Res < 0 {
		t.Errorf("cancel of every request with one running in io-wq: %+v, want a count (the kernel said it, Close's documentation is out of date)", c)
	}
	interrupted(got[1])

	if !kver.AtLeast(kver.Release(), "6.6") {
		return
	}
	// The kernel looks twice (io_try_cancel in the submitter's io-wq, which
	// asks the request to stop and falls through to -ENOENT, then every
	// io-wq of the ring): if the open ends on that first ask before the
	// second look, which a loaded machine makes likely enough (5 in 2,000
	// here with both CPUs busy), the cancel says -ENOENT. So a few tries,
	// each ending the open, until one says -EALREADY.
	const tries = 20
	for i := range tries {
		open, cancel := uint64(3+2*i), uint64(4+2*i)
		openFIFO(open)
		s := sqe(t, r)
		s.PrepCancel(0, sys.IORING_ASYNC_CANCEL_OP, cancel)
		s.Len = sys.IORING_OP_OPENAT
		got = byData(reap(t, r, 2))
		interrupted(got[open])
		switch c := got[cancel]; c.Res {
		case -int32(unix.EALREADY):
			return
		case -int32(unix.ENOENT):
			t.Logf("try %d: the open ended before the cancel's second look: %+v", i+1, c)
		default:
			t.Fatalf("cancel of the running open by opcode: %+v, want -EALREADY", c)
		}
	}
	t.Errorf("cancel of the running open by opcode: -ENOENT in %d tries, want -EALREADY", tries)
}

// waitFIFOOpener waits until an io-wq worker of this process sleeps in a
// FIFO open waiting for a writer (wchan wait_for_partner).
func waitFIFOOpener(t testing.TB) {
	t.Helper()
	waitWorkerIn(t, "wait_for_partner")
}

// waitWorkerIn waits until an io-wq worker of this process sleeps in the
// kernel function wchan.
func waitWorkerIn(t testing.TB, wchan string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			comm, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/comm")
			w, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/wchan")
			if strings.HasPrefix(string(comm), "iou-wrk") && string(w) == wchan {
				return
			}
		}
	}
	t.Fatalf("no io-wq worker waiting in %s within 5s", wchan)
}

// TestCloseSyncCancelsSubmittedOpcodes counts the IORING_REGISTER_SYNC_CANCEL
// calls Close makes (through syncCancelHook) on a ring that has nothing
// running: one for each opcode the ring has submitted (NOP and POLL_ADD here,
// and Close's own ASYNC_CANCEL), each finding none (-ENOENT), not one for
// every opcode the kernel has (about 60 on 6.18).
func TestCloseSyncCancelsSubmittedOpcodes(t *testing.T) {
	needFeatures(t, FeatSyncCancelOp)
	r, err := New(&Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		r.Close()
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	for range 2 {
		sqe(t, r).PrepNop(1)
	}
	sqe(t, r).PrepPollAdd(fds[0], unix.POLLIN, false, 2) // parked on the empty pipe: cancelled by Close
	if _, err := r.SubmitAndWait(2, time.Second); err != nil {
		r.Close()
		t.Fatal(err)
	}
	var calls int
	r.syncCancelHook = func(err error) error {
		calls++
		if err != unix.ENOENT {
			t.Errorf("sync cancel call %d: %v, want ENOENT (nothing running)", calls, err)
		}
		return err
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if want := 3; calls != want {
		t.Errorf("Close made %d sync cancel calls, want %d (NOP, POLL_ADD, ASYNC_CANCEL)", calls, want)
	}
}

// TestCloseSyncCancelsUnknownOpcode: a request with an opcode the kernel
// does not have (completed at once with -EINVAL) is recorded like any
// other, and the sync cancel Close makes for it finds none (-ENOENT). Were
// it refused with EINVAL instead, waitRunning would take the ring for one
// on a kernel before 6.6 and stop waiting for the opcodes after it.
func TestCloseSyncCancelsUnknownOpcode(t *testing.T) {
	needFeatures(t, FeatSyncCancelOp)
	r, err := New(&Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	sqe(t, r).prep(255, -1, 0, 0, 0, 1)
	if c := reap(t, r, 1)[0]; c.Res != -int32(unix.EINVAL) {
		r.Close()
		t.Fatalf("opcode 255: res %d, want -EINVAL", c.Res)
	}
	var ops []int
	r.syncCancelHook = func(err error) error {
		if err != unix.ENOENT {
			t.Errorf("sync cancel call %d: %v, want ENOENT", len(ops)+1, err)
		}
		ops = append(ops, len(ops))
		return err
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 {
		t.Errorf("Close made %d sync cancel calls, want 2 (opcode 255 and its own ASYNC_CANCEL)", len(ops))
	}
}

// TestCloseSQPollSharedThread: two SQPoll rings sharing an SQ thread
// (AttachWQ), each with a buffer ring, close without error in either
// order; the first does not wait for the thread, which exits only with the
// second, and the second has waited for it to exit when its Close returns.
func TestCloseSQPollSharedThread(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL", "IORING_SETUP_ATTACH_WQ")
	for _, firstAttached := range []bool{false, true} {
		a, err := New(&Config{Entries: 8, SQPoll: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(&Config{Entries: 8, SQPoll: true, AttachWQ: a})
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		if a.sqThread == 0 || b.sqThread != a.sqThread {
			t.Errorf("SQ threads %d and %d, want one, shared", a.sqThread, b.sqThread)
		}
		for _, r := range []*Ring{a, b} {
			if _, err := r.SetupBufRing(1, 4, 4096); err != nil {
				t.Fatal(err)
			}
		}
		first, last := a, b
		if firstAttached {
			first, last = b, a
		}
		start := time.Now()
		if err := first.Close(); err != nil {
			t.Fatalf("first Close: %v", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("first Close took %v: it waited for the SQ thread its peer keeps", d)
		}
		if !isSQThread(a.sqThread) {
			t.Fatal("the SQ thread exited with a ring still open")
		}
		if err := last.Close(); err != nil {
			t.Fatalf("last Close: %v", err)
		}
		if isSQThread(a.sqThread) {
			t.Error("the SQ thread is still there after the last Close")
		}
		sqThreads.mu.Lock()
		if n, ok := sqThreads.users[a.sqThread]; ok {
			t.Errorf("SQ thread %d still counted with %d users", a.sqThread, n)
		}
		sqThreads.mu.Unlock()
	}
}

// TestCloseWaitsForRunningRequest runs a read that selected a provided
// buffer and is still running in an io-wq worker when Close begins: a read
// of a file forced there (FlagAsync), held in the copy into its buffer by a
// userfaultfd fault. The cancel of every request only asks it to stop (it
// does not: a kernel-mode fault retries) and completes with a count, so
// Close must look for requests still running (IORING_REGISTER_SYNC_CANCEL
// by opcode, 6.6) and wait for them. Released within the wait, the read
// ends before Close returns, which then unmaps the buffers. Never released,
// it is still running when the wait ends: Close says ErrCancelUnconfirmed
// and leaves the buffers mapped, and the read, released afterwards, writes
// into buffer 0. With a plain ring, with DeferTaskrun (where the end of
// the read wakes no sync cancel waiting for it) and with SQPoll (the SQ
// thread submits the read, into its own io-wq, from the SQEs flush
// published: the read's opcode must be among those Close asks about).
func TestCloseWaitsForRunningRequest(t *testing.T) {
	needFeatures(t, FeatSyncCancelOp)
	for _, cfg := range []Config{{Entries: 8}, {Entries: 8, SingleIssuer: true, DeferTaskrun: true}, {Entries: 8, SQPoll: true}} {
		for _, released := range []bool{true, false} {
			name := fmt.Sprintf("deferTaskrun=%v/sqpoll=%v/released=%v", cfg.DeferTaskrun, cfg.SQPoll, released)
			t.Run(name, func(t *testing.T) {
				needFeatures(t, configFeatures(&cfg)...)
				if cfg.SingleIssuer {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread() // after Close: the ring is gone
				}
				r, err := New(&cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { // on the owner thread, on a skip or failure before the Close below
					if !r.closed {
						r.Close()
					}
				}()
				b, err := r.SetupBufRing(1, 4, 4096)
				if err != nil {
					t.Fatal(err)
				}
				slab := b.slab[:cap(b.slab)]
				data, release := runningRead(t, r, b)
				var freed atomic.Bool
				if released {
					time.AfterFunc(50*time.Millisecond, func() {
						freed.Store(true)
						release()
					})
				} else {
					r.testCloseWait = 200 * time.Millisecond
				}
				before := LeftMappedBytes()
				err = r.Close()
				if released {
					if err != nil {
						t.Fatalf("Close with the running read released 50ms after it began: %v", err)
					}
					if !freed.Load() {
						t.Fatal("Close returned before the read it should wait for was released")
					}
					if mapped(slab) || LeftMappedBytes() != before {
						t.Errorf("buffers left mapped (%d bytes) after a confirmed Close", LeftMappedBytes()-before)
					}
					return
				}
				if !errors.Is(err, ErrCancelUnconfirmed) {
					t.Fatalf("Close with a read still running in io-wq: %v, want ErrCancelUnconfirmed (the read's buffer is mapped: %v)", err, mapped(slab))
				}
				if !mapped(slab) || LeftMappedBytes()-before != int64(len(slab)) {
					t.Fatalf("Close left %d bytes mapped (slab mapped: %v), want the %d of the slab", LeftMappedBytes()-before, mapped(slab), len(slab))
				}
				release()
				for deadline := time.Now().Add(5 * time.Second); !bytes.Equal(slab[:len(data)], data); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the read, released after Close, did not write into buffer 0 within 5s")
					}
				}
				t.Cleanup(func() { releaseLeftMapped(slab) }) // the read has written: nothing refers to the slab
			})
		}
	}
}

// TestSyncCancelByOpcodeWaits pins down the kernel behaviour Close's wait
// for running requests rests on, with a read held running in io-wq
// (runningRead): IORING_REGISTER_SYNC_CANCEL with CancelAny, like the cancel
// of every request, returns at once with a count while the read still runs;
// keyed on the read's opcode (IORING_ASYNC_CANCEL_OP, 6.6) it waits, and
// says -ETIME when the read outlasts its timeout, and returns once the read
// has ended (released, it delivers its data into a provided buffer), or
// says -ENOENT if it already has. The
// read is asked to stop by every such call, and goes on.
func TestSyncCancelByOpcodeWaits(t *testing.T) {
	needFeatures(t, FeatSyncCancelOp)
	r := newRing(t, &Config{Entries: 8})
	b, err := r.SetupBufRing(1, 4, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data, release := runningRead(t, r, b)
	syncCancel := func(flags uint32, d time.Duration) error {
		reg := sys.SyncCancelReg{Flags: flags, Opcode: sys.IORING_OP_READ, Timeout: sys.Timespec{Nsec: int64(d)}}
		for {
			if err := sys.SyncCancel(r.fd, &reg); err != unix.EINTR {
				return err
			}
		}
	}
	if err := syncCancel(sys.IORING_ASYNC_CANCEL_ANY, 100*time.Millisecond); err != nil {
		t.Errorf("sync cancel of any request with a read running: %v, want a count (it does not wait)", err)
	}
	if err := syncCancel(sys.IORING_ASYNC_CANCEL_OP, 20*time.Millisecond); err != unix.ETIME {
		t.Errorf("sync cancel of the running read by opcode, 20ms: %v, want ETIME (the read goes on when asked to stop)", err)
	}
	release()
	// Released, the read ends soon, perhaps before the call (ENOENT); with
	// a plain ring its end wakes the sync cancel waiting for it (nil; the
	// half second is only an upper bound).
	if err := syncCancel(sys.IORING_ASYNC_CANCEL_OP, 500*time.Millisecond); err != nil && err != unix.ENOENT {
		t.Errorf("sync cancel of the read by opcode once released: %v, want nil or ENOENT (it ended)", err)
	}
	c := reap(t, r, 1)[0]
	if id, ok := c.BufferID(); c.Res != int32(len(data)) || !ok || !bytes.Equal(b.Buf(id)[:len(data)], data) {
		t.Errorf("released read: %+v, want its %d bytes in a provided buffer", c, len(data))
	}
	if err := syncCancel(sys.IORING_ASYNC_CANCEL_OP, 20*time.Millisecond); err != unix.ENOENT {
		t.Errorf("sync cancel by opcode with nothing in flight: %v, want ENOENT", err)
	}
}

// runningRead starts a read of a file into a buffer of b, forced to io-wq,
// and waits until it is held there in the copy into the buffer (a
// userfaultfd fault on b's buffers, whose pages were never touched). It
// returns the bytes the read will deliver and the release that lets it go
// on (idempotent; also run at cleanup).
func runningRead(t *testing.T, r *Ring, b *BufRing) (data []byte, release func()) {
	t.Helper()
	data = make([]byte, 100)
	for i := range data {
		data[i] = pattern(i)
	}
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, fd)
	release = holdWrites(t, b.slab[:cap(b.slab)])
	s := sqe(t, r)
	s.prep(sys.IORING_OP_READ, fd, 0, uint32(len(data)), 0, 1)
	s.SetBufGroup(b.Group())
	s.SetFlags(FlagAsync)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	waitWorkerIn(t, "handle_userfault")
	return data, release
}

// userfaultfd ioctls (include/uapi/linux/userfaultfd.h).
const (
	uffdAPI                 = 0xAA
	uffdioAPI               = 0xc018aa3f // _IOWR(0xAA, 0x3F, struct uffdio_api)
	uffdioRegister          = 0xc020aa00 // _IOWR(0xAA, 0x00, struct uffdio_register)
	uffdRegisterModeMissing = 1
)

// holdWrites makes every write into mem, whose pages must never have been
// touched, wait in the kernel (handle_userfault), writes by the kernel
// (copy_to_user) included, until release closes the userfaultfd; the faults
// then resolve as usual (zero pages) and the writes go on. release is
// idempotent and also runs at cleanup. It skips t where userfaultfd is
// missing or may not hold kernel-mode faults.
func holdWrites(t *testing.T, mem []byte) (release func()) {
	t.Helper()
	ufd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
	switch e {
	case 0:
	case unix.ENOSYS:
		t.Skip("userfaultfd not supported (CONFIG_USERFAULTFD)")
	case unix.EPERM:
		t.Skip("userfaultfd of kernel-mode faults needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1")
	default:
		t.Fatalf("userfaultfd: %v", e)
	}
	var once sync.Once
	release = func() { once.Do(func() { unix.Close(int(ufd)) }) }
	t.Cleanup(release)
	// The ioctl arguments off the Go heap: their address goes to the kernel
	// as an integer.
	arg := offHeap(t, 32)
	binary.NativeEndian.PutUint64(arg, uffdAPI) // struct uffdio_api {api, features, ioctls}
	if err := ioctlAddr(int(ufd), uffdioAPI, arg); err != nil {
		t.Fatalf("UFFDIO_API: %v", err)
	}
	clear(arg) // struct uffdio_register {range {start, len}, mode, ioctls}
	binary.NativeEndian.PutUint64(arg[0:], sys.SliceAddr(mem))
	binary.NativeEndian.PutUint64(arg[8:], uint64(len(mem)))
	binary.NativeEndian.PutUint64(arg[16:], uffdRegisterModeMissing)
	if err := ioctlAddr(int(ufd), uffdioRegister, arg); err != nil {
		t.Fatalf("UFFDIO_REGISTER: %v", err)
	}
	return release
}

// ioctlAddr calls ioctl(fd, req, arg) with the address of arg, which must
// be off the Go heap.
func ioctlAddr(fd int, req uintptr, arg []byte) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(sys.SliceAddr(arg))); e != 0 {
		return e
	}
	return nil
}

// TestCloseOnto: CloseOnto closes the ring as Close does, but leaves its fd
// number naming the file given, not a ring: a MSG_RING another ring then
// submits with the number fails with -EBADFD, where after Close it would
// reach whatever ring took the number. The ring's file goes with the
// number's: an SQPoll ring's SQ thread exits, which Close of one with a
// buffer ring waits for (held open, CloseOnto would fail after ten seconds
// with ErrCancelUnconfirmed).
func TestCloseOnto(t *testing.T) {
	for _, sqpoll := range []bool{false, true} {
		t.Run(fmt.Sprintf("sqpoll=%v", sqpoll), func(t *testing.T) {
			a := newRing(t, &Config{Entries: 4})
			b, err := New(&Config{Entries: 4, SQPoll: sqpoll})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.SetupBufRing(1, 8, 4096); err != nil {
				b.Close()
				t.Fatal(err)
			}
			ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
			if err != nil {
				b.Close()
				t.Fatal(err)
			}
			defer unix.Close(ev)
			fd := b.Fd()
			if err := b.CloseOnto(ev); err != nil {
				t.Fatalf("CloseOnto: %v", err)
			}
			defer unix.Close(fd)
			if got := b.Fd(); got != -1 {
				t.Errorf("Fd after CloseOnto = %d, want -1", got)
			}
			if err := b.Close(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("Close after CloseOnto = %v, want os.ErrClosed", err)
			}
			if what, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil || what != "anon_inode:[eventfd]" {
				t.Errorf("the closed ring's fd number %d names %q (%v), want the eventfd", fd, what, err)
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("fd %d: F_GETFD = %#x, %v; want close-on-exec", fd, flags, err)
			}
			sqe(t, a).PrepMsgRing(fd, 0, 1, 0, 2)
			if _, err := a.SubmitAndWait(1, time.Second); err != nil {
				t.Fatal(err)
			}
			if got := reap(t, a, 1); got[0].UserData != 2 || got[0].Res != -int32(unix.EBADFD) {
				t.Errorf("MSG_RING to the closed ring's number: completion %+v, want user_data 2, res -EBADFD", got[0])
			}
		})
	}
}

// TestCloseOntoBadFd: a CloseOnto whose dup3 fails (fd not open) says so,
// and leaves the number the ring's own, open until the caller closes it:
// never freed for another file while a MSG_RING may still name it.
func TestCloseOntoBadFd(t *testing.T) {
	b, err := New(&Config{Entries: 4})
	if err != nil {
		t.Fatal(err)
	}
	fd := b.Fd()
	err = b.CloseOnto(1 << 20)
	if !errors.Is(err, unix.EBADF) || !strings.Contains(err.Error(), "dup3") {
		t.Errorf("CloseOnto of a closed fd = %v, want dup3's EBADF", err)
	}
	if what, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil || what != "anon_inode:[io_uring]" {
		t.Errorf("fd %d names %q (%v), want the ring, still open", fd, what, err)
	}
	if err := unix.Close(fd); err != nil {
		t.Errorf("closing the ring's number: %v", err)
	}
}
