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

// EpollBusyPollUsable reads the busy-poll settings of a new epoll instance:
// nil where the kernel has them (6.9), ENOTTY where it predates them. The
// engine checks it before it runs epoll-busypoll; spindle doctor reports it.
func EpollBusyPollUsable() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	defer unix.Close(fd)
	_, err = EpollGetParams(fd)
	return err
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
