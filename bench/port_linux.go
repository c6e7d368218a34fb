package bench

import (
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// portHold keeps a loopback port for a server the harness starts on it,
// a program that cannot report a port it picked (haproxy, nginx, a spindle
// proxy, an http2-server child): a socket bound to it with SO_REUSEADDR
// that never listens. While it is open the kernel's search for a free
// port (a bind to port 0, a connect's local port) passes the port by, in
// this process and in every other (go test runs packages side by side);
// the server's listening socket, with SO_REUSEADDR as every arm's has, is
// bound to it all the same. A port picked, closed and then given to the
// server (freePort) could be taken by anyone in between: the server then
// failed to start, or, both with SO_REUSEPORT, shared the port.
type portHold struct {
	fd   int
	addr string
}

// holdPort returns a hold on a free loopback port; release it once the
// server listens on it (or failed to).
func holdPort() (*portHold, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(call string, err error) (*portHold, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(call, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt SO_REUSEADDR", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail("bind", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	return &portHold{fd: fd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))}, nil
}

// release closes the hold: the server's listener, if it listens, keeps
// the port. Once only.
func (h *portHold) release() { unix.Close(h.fd) }
