package sys

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EpollParams is struct epoll_params (include/uapi/linux/eventpoll.h, Linux
// 6.9): the per-epoll-instance busy-poll settings of EPIOCSPARAMS.
type EpollParams struct {
	BusyPollUsecs  uint32 // busy_poll_usecs: 0 disables busy polling
	BusyPollBudget uint16 // busy_poll_budget: above 64 needs CAP_NET_ADMIN
	PreferBusyPoll uint8  // prefer_busy_poll: 0 or 1
	Pad            uint8  // __pad, must be 0
}

// SizeofEpollParams is the size of struct epoll_params.
const SizeofEpollParams = 8

// EpollSetParams applies p to the epoll instance epfd (ioctl EPIOCSPARAMS).
// The kernel reads p during the call only. Safe for concurrent use.
func EpollSetParams(epfd int, p *EpollParams) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(epfd), unix.EPIOCSPARAMS, uintptr(unsafe.Pointer(p)))
	if e != 0 {
		return os.NewSyscallError("ioctl EPIOCSPARAMS", e)
	}
	return nil
}

// EpollGetParams reads the busy-poll settings of epfd (ioctl EPIOCGPARAMS).
// ENOTTY means the kernel predates 6.9. Safe for concurrent use.
func EpollGetParams(epfd int) (EpollParams, error) {
	var p EpollParams
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(epfd), unix.EPIOCGPARAMS, uintptr(unsafe.Pointer(&p)))
	if e != 0 {
		return p, os.NewSyscallError("ioctl EPIOCGPARAMS", e)
	}
	return p, nil
}

// EpollWaitHoldP is epoll_wait(2) without telling the Go scheduler
// (RawSyscall6 of epoll_pwait with no signal mask, which every architecture
// has): the calling goroutine keeps its P while it blocks. The reasons and
// the rules are EnterHoldP's; epoll_wait is never restarted after a signal
// handler, so the runtime's preemption signal ends it with EINTR. events is
// written by the kernel during the call only.
//
//go:noinline
func EpollWaitHoldP(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	if len(events) == 0 {
		return 0, unix.EINVAL
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
