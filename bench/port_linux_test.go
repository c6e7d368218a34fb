package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHoldPort: while a port is held, the kernel gives it to no bind to
// port 0 (another test's listener, another package's) and a server still
// listens on it. In a network namespace of its own whose local port range
// is two ports, so that the kernel's choice is not left to chance: the
// port freePort picked and closed was the next bind's, and the server
// started on it then found it taken (EADDRINUSE).
func TestHoldPort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own, whose local port range the test narrows to two ports, needs CAP_SYS_ADMIN (unshare CLONE_NEWNET): root")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread enters a namespace of its own and is never
		// unlocked: it ends with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Error(os.NewSyscallError("unshare", err))
			return
		}
		if err := loopbackUp(); err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("40000 40001"), 0o644); err != nil {
			t.Error(err)
			return
		}
		h, err := holdPort()
		if err != nil {
			t.Error(err)
			return
		}
		defer h.release()
		other, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Errorf("another listener on port 0: %v", err)
			return
		}
		defer other.Close()
		if other.Addr().String() == h.addr {
			t.Errorf("another listener on port 0 got the held %s", h.addr)
		}
		// As a spindle engine's and haproxy's listeners are, and as Go's.
		reusePort := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
			return errors.Join(err, serr)
		}}
		for _, lc := range []net.ListenConfig{reusePort, {}} {
			server, err := lc.Listen(context.Background(), "tcp4", h.addr)
			if err != nil {
				t.Errorf("the server on the held port: %v", err)
				return
			}
			server.Close()
		}
	}()
	<-done
}

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl SIOCGIFFLAGS", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return os.NewSyscallError("ioctl SIOCSIFFLAGS", unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr))
}
