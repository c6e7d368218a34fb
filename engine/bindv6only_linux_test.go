package engine

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// bindV6OnlyEnv marks the child of TestDialMappedIPv4WithBindV6Only: it runs
// in a network namespace of its own whose net.ipv6.bindv6only is 1.
const bindV6OnlyEnv = "SPINDLE_TEST_BINDV6ONLY_CHILD"

// TestDialMappedIPv4WithBindV6Only dials "tcp" to an IPv4-mapped address
// ([::ffff:127.0.0.1]) on a host whose new IPv6 sockets are IPv6-only by
// default (net.ipv6.bindv6only=1, a distribution's or an administrator's
// choice): it connects, as net.Dial does, which dials such an address
// over IPv4. Dial made an IPv6 socket of the default kind, which cannot
// reach an IPv4-mapped address: OnClose with ENETUNREACH. In a child
// process in a network namespace of its own, whose sysctl the test sets
// (the host's stays as it is).
func TestDialMappedIPv4WithBindV6Only(t *testing.T) {
	if os.Getenv(bindV6OnlyEnv) != "" {
		dialMappedIPv4(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own, where the test sets bindv6only without touching the host's, needs CAP_SYS_ADMIN (unshare CLONE_NEWNET): root")
	}
	if _, err := os.Stat("/proc/sys/net/ipv6/bindv6only"); err != nil {
		t.Skipf("no IPv6 (booted with ipv6.disable=1?): %v", err)
	}
	runChild(t, "TestDialMappedIPv4WithBindV6Only", bindV6OnlyEnv, &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNET})
}

// dialMappedIPv4 is the child of TestDialMappedIPv4WithBindV6Only.
func dialMappedIPv4(t *testing.T) {
	if err := loopbackUp(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/bindv6only", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	mapped := net.JoinHostPort("::ffff:127.0.0.1", strconv.Itoa(gl.Addr().(*net.TCPAddr).Port))
	c, err := net.Dial("tcp", mapped)
	if err != nil {
		t.Fatalf("net.Dial(%q): %v", mapped, err)
	}
	c.Close()
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			res := make(chan error, 1)
			h := &BaseHandlerFunc{
				open: func(c *Conn) { res <- nil; c.Close() },
				closed: func(c *Conn, err error) {
					if err != nil {
						res <- err
					}
				},
			}
			e, _ := startEngine(t, testConfig(b), h)
			l := e.Loops()[0]
			l.Post(func() {
				if _, err := l.Dial("tcp", mapped, 5*time.Second); err != nil {
					res <- err
				}
			})
			if err := <-res; err != nil {
				t.Errorf("Dial(%q), where net.Dial connects: %v", mapped, err)
			}
		})
	}
}

// loopbackUp sets lo up in the process's network namespace.
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
