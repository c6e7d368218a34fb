// Package uring is spindle's io_uring binding: rings, SQEs, CQEs,
// registration (fixed buffers, provided buffer rings, sparse fixed files,
// NAPI busy polling) and a feature probe.
//
// A Ring has one owner goroutine. Every method of Ring, SQE and BufRing must
// be called from that goroutine unless its documentation says otherwise. With
// Config.SingleIssuer, Config.DeferTaskrun or Config.RegisterRingFD the owner
// goroutine must also be locked to its OS thread (runtime.LockOSThread)
// before New and for the ring's whole life, because the kernel ties those
// modes to the creating thread.
//
// The hot path does not allocate: GetSQE, the Prep methods, Submit,
// SubmitAndWait, PeekCQEs, ForEachCQE, and BufRing.Recycle and Commit
// (TestZeroAllocs, TestForEachCQE). user_data is an integer the caller chooses (a
// handle: slot index and generation), never a Go pointer. Memory the kernel
// reads or writes after a call returns (buffers, socket addresses, msghdrs
// and timespecs given to Prep methods, fixed buffers, buffer rings) must come
// from MapAnon, directly or through Arena and BufRing: Prep methods panic
// with ErrNotOffHeap and RegisterBuffers fails for any other memory, Go heap,
// goroutine stack or pinned, before the kernel can see it.
//
// A negative CQE result is a unix.Errno (CQE.Err). Missing kernel features
// are reported as ErrNotSupported or *UnsupportedFeatureError, and Probe
// tells which features this kernel has.
//
// The package works on Linux only; elsewhere New and Probe return
// ErrNotSupported.
package uring
