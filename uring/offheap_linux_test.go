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
	r := newRing(t, &Config{Entries: 64, SQThreadCPU: -1})
	arena := newArena(t)
	good := offHeap(t, 256)
	heapSink = make([]byte, 256)
	var stack [256]byte
	gone, _, err := MapAnon(256, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unmap(gone); err != nil {
		t.Fatal(err)
	}
	goodTS, goodMsg := arena.Timespec(), arena.Msghdr(nil, good)
	var stackTS Timespec
	var stackMsg Msghdr
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
		{"goroutine stack", stack[:], &stackTS, &stackMsg, false},
		{"unmapped", gone, nil, nil, false},
	}
	for _, op := range ops {
		for _, m := range mems {
			t.Run(op.name+"/"+m.name, func(t *testing.T) {
				var s SQE // never submitted: only the Prep check matters
				got := func() (p any) {
					defer func() { p = recover() }()
					op.prep(&s, m.b, m.ts, m.msg)
					return nil
				}()
				switch {
				case m.ok && got != nil:
					t.Errorf("panicked on MapAnon memory: %v", got)
				case !m.ok && got != ErrNotOffHeap:
					t.Errorf("recovered %v, want panic(ErrNotOffHeap)", got)
				}
			})
		}
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
