package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ThreadCPUTime returns the calling thread's CPU time in nanoseconds
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID)), 0 if the clock cannot be read.
// The vDSO serves no CPU-time clock, so this is a system call; it never
// blocks, so it is a RawSyscall (STYLE.md rule 4), which spares an event
// loop that reads it around every wait the scheduler's entry and exit.
func ThreadCPUTime() int64 {
	var ts unix.Timespec
	_, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_THREAD_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		return 0
	}
	return ts.Nano()
}
