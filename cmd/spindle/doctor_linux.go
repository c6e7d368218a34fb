package main

import (
	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// epollBusyPollErr is sys.EpollBusyPollUsable, which engine.New checks
// before it runs epoll-busypoll.
func epollBusyPollErr() error { return sys.EpollBusyPollUsable() }

// loopbackNAPIID connects a TCP pair over 127.0.0.1, moves one byte and
// returns SO_INCOMING_NAPI_ID of the receiving socket.
func loopbackNAPIID() (int, error) {
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return 0, err
	}
	if err := unix.Listen(lfd, 1); err != nil {
		return 0, err
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return 0, err
	}
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(cfd)
	if err := unix.Connect(cfd, sa); err != nil {
		return 0, err
	}
	sfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		return 0, err
	}
	defer unix.Close(sfd)
	if _, err := unix.Write(cfd, []byte{1}); err != nil {
		return 0, err
	}
	var b [1]byte
	if _, err := unix.Read(sfd, b[:]); err != nil {
		return 0, err
	}
	return unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
}

// ethtoolDriver returns the driver the kernel names for interface name
// (ETHTOOL_GDRVINFO, as `ethtool -i` prints it), "" when it cannot tell.
// A veth says "veth" here, where topo's Driver is "" for want of a bound
// device.
func ethtoolDriver(name string) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}
