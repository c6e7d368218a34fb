package testnet

import (
	"fmt"
	"net"
	"syscall"
	"testing"
)

// RefusedAddr returns a loopback "127.0.0.1:port" on which a connect is
// refused for as long as the test runs. The port stays bound by a socket
// that never listens: a port merely closed again could be handed by the
// kernel to the next listener any test process opens (go test runs
// packages side by side), and the "refused" address would answer.
// SO_REUSEADDR on that socket keeps the kernel's search for a free port
// (bind to port 0) off it but lets a test listen on it on purpose, to
// bring the address back.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(sa.(*syscall.SockaddrInet4).Port))
}
