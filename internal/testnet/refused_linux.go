package testnet

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
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
	_, addr := boundSocket(t)
	return addr
}

// BlackholeAddr returns a loopback "127.0.0.1:port" whose connects hang
// for as long as the test runs: a listener with a backlog of 0 that never
// accepts, its queue filled, so the kernel drops further SYNs.
func BlackholeAddr(t testing.TB) string {
	t.Helper()
	fd, addr := boundSocket(t)
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // this one hung: the queue is full
		}
		t.Cleanup(func() { c.Close() })
		if i == 8 {
			t.Fatalf("%s accepts every connect: cannot make a server that does not answer", addr)
		}
	}
}

// boundSocket returns a TCP socket bound to a free loopback port with
// SO_REUSEADDR, closed when the test ends, and its address.
func boundSocket(t testing.TB) (int, string) {
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
	return fd, net.JoinHostPort("127.0.0.1", fmt.Sprint(sa.(*syscall.SockaddrInet4).Port))
}
