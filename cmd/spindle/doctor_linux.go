package main

import "golang.org/x/sys/unix"

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
