package uring

import (
	"errors"
	"testing"
	"time"
)

var heapSink []byte

// TestGoMemoryRefused hands Go heap, goroutine stack and unmapped memory to
// every Prep method that takes memory: each must panic with ErrNotOffHeap
// before the address reaches the kernel, and accept the same call on memory
// from MapAnon.
func TestGoMemoryRefused(t *testing.T) {
	r := newRing(t, &Config{Entries: 64})
	arena := newArena(t)
	good := offHeap(t, 256)
	heapSink = make([]byte, 256)
	gone, _, err := MapAnon(256, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unmap(gone); err != nil {
		t.Fatal(err)
	}
	goodTS, goodMsg := arena.Timespec(), arena.Msghdr(nil, good)
	ops := []struct {
		name string
		prep func(s *SQE, b []byte, ts *Timespec, msg *Msghdr)
	}{
		{"connect", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepConnect(-1, b[:16], 0) }},
		{"recv", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepRecv(-1, b, 0, 0) }},
		{"send", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepSend(-1, b, 0, 0) }},
		{"send_zc", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepSendZC(-1, b, 0, -1, 0) }},
		{"read", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepRead(-1, b, 0, 0) }},
		{"write", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepWrite(-1, b, 0, 0) }},
		{"read_fixed", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepReadFixed(-1, b, 0, 0, 0) }},
		{"write_fixed", func(s *SQE, b []byte, _ *Timespec, _ *Msghdr) { s.PrepWriteFixed(-1, b, 0, 0, 0) }},
		{"arena msghdr", func(_ *SQE, b []byte, _ *Timespec, _ *Msghdr) { arena.Msghdr(nil, b) }},
		{"arena msghdr name", func(_ *SQE, b []byte, _ *Timespec, _ *Msghdr) { arena.Msghdr(b[:16]) }},
		{"sendmsg", func(s *SQE, _ []byte, _ *Timespec, m *Msghdr) { s.PrepSendmsg(-1, m, 0, 0) }},
		{"timeout", func(s *SQE, _ []byte, ts *Timespec, _ *Msghdr) { s.PrepTimeout(ts, 0, 0, 0) }},
		{"link_timeout", func(s *SQE, _ []byte, ts *Timespec, _ *Msghdr) { s.PrepLinkTimeout(ts, 0, 0) }},
		{"timeout_update", func(s *SQE, _ []byte, ts *Timespec, _ *Msghdr) { s.PrepTimeoutUpdate(1, ts, 0, 0) }},
	}
	mems := []struct {
		name string
		b    []byte
		ts   *Timespec
		msg  *Msghdr
		ok   bool
	}{
		{"MapAnon", good, goodTS, goodMsg, true},
		{"Go heap", heapSink, new(Timespec), new(Msghdr), false},
		{"unmapped", gone, nil, nil, false},
	}
	for _, op := range ops {
		for _, m := range mems {
			t.Run(op.name+"/"+m.name, func(t *testing.T) {
				var s SQE // never submitted: only the Prep check matters
				got := catchPanic(func() { op.prep(&s, m.b, m.ts, m.msg) })
				switch {
				case m.ok && got != nil:
					t.Errorf("panicked on MapAnon memory: %v", got)
				case !m.ok && got != ErrNotOffHeap:
					t.Errorf("recovered %v, want panic(ErrNotOffHeap)", got)
				}
			})
		}
	}
	// Goroutine stack memory, which moves when the stack grows: the
	// buffers below do not escape (go test -gcflags=-m says so), so they
	// live on this goroutine's stack.
	if tsP, bufP := prepOnStack(); tsP != ErrNotOffHeap || bufP != ErrNotOffHeap {
		t.Errorf("stack timespec and buffer: recovered %v and %v, want panic(ErrNotOffHeap)", tsP, bufP)
	}
	// Fixed buffers: refused before the kernel sees them.
	for _, m := range mems[1:] {
		if err := r.RegisterBuffers([][]byte{m.b}); !errors.Is(err, ErrNotOffHeap) {
			t.Errorf("RegisterBuffers(%s) = %v, want ErrNotOffHeap", m.name, err)
		}
	}
	if err := r.RegisterBuffers([][]byte{good}); err != nil {
		t.Fatal(err)
	}
	if err := r.UnregisterBuffers(); err != nil {
		t.Fatal(err)
	}
	// Ring.Timespec is off-heap by construction.
	s := sqe(t, r)
	s.PrepTimeout(r.Timespec(time.Millisecond), 0, 0, 1)
	if c := reap(t, r, 1)[0]; c.UserData != 1 {
		t.Errorf("timeout from Ring.Timespec: %+v", c)
	}
}

// prepOnStack prepares a timeout from, and a receive into, memory on its own
// stack frame and returns what each Prep method panicked with.
//
//go:noinline
func prepOnStack() (tsPanic, bufPanic any) {
	var buf [64]byte
	var ts Timespec
	var s SQE
	return catchPanic(func() { s.PrepTimeout(&ts, 0, 0, 0) }), catchPanic(func() { s.PrepRecv(-1, buf[:], 0, 0) })
}
