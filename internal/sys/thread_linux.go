package sys

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// LockedThread runs fn on the calling goroutine locked to an OS thread that
// is never unlocked (STYLE.md rule 5), so that the runtime ends the thread
// with the goroutine and nothing fn changed on it (network or mount
// namespace, CPU affinity) reaches another goroutine. That thread is never
// the process's main thread: the runtime does not end the main thread but
// parks it for good, with fn's changes, which /proc/self (so /proc/net and
// the affinity of the process's id) then shows for the whole process. On
// the main thread LockedThread holds it and runs fn on another, returning
// once fn has returned or ended its goroutine (runtime.Goexit).
func LockedThread(fn func()) {
	runtime.LockOSThread()
	if OffMainThread(func() { LockedThread(fn) }) {
		return
	}
	fn()
}

// OffMainThread, called locked to its thread (runtime.LockOSThread), keeps
// the process's main thread from a goroutine that will change it for good:
// on the main thread it runs again on a new goroutine (which locks its own
// thread), waits for it, unlocks the main thread unchanged and reports
// true; on any other thread it does nothing and reports false.
func OffMainThread(again func()) bool {
	if unix.Gettid() != unix.Getpid() {
		return false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		again()
	}()
	<-done
	runtime.UnlockOSThread() // unchanged
	return true
}
