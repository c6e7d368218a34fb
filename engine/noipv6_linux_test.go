package engine

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// noIPv6Env marks the child of TestListenWildcardWithoutIPv6.
const noIPv6Env = "SPINDLE_TEST_NO_IPV6_CHILD"

// TestListenWildcardWithoutIPv6 listens on "tcp" ":0" (every address) where
// the kernel makes no IPv6 sockets, as one booted with ipv6.disable=1
// (socket(AF_INET6) fails with EAFNOSUPPORT): it listens on IPv4's
// wildcard, as net.Listen does, and serves. Listen made an IPv6 socket
// only ("::", dual-stack) and failed. In a child process whose seccomp
// filter (TestMain's) refuses AF_INET6 sockets with that error (the
// kernel's IPv6 cannot be switched off short of a reboot).
func TestListenWildcardWithoutIPv6(t *testing.T) {
	if os.Getenv(noIPv6Env) != "" {
		listenWithoutIPv6(t)
		return
	}
	runChild(t, "TestListenWildcardWithoutIPv6", noIPv6Env, nil)
}

// listenWithoutIPv6 is the child of TestListenWildcardWithoutIPv6, denied
// IPv6 sockets by TestMain.
func listenWithoutIPv6(t *testing.T) {
	if fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM, 0); err != unix.EAFNOSUPPORT {
		unix.Close(fd)
		t.Fatalf("socket(AF_INET6) in the child: %v, want EAFNOSUPPORT", err)
	}
	gl, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatalf("net.Listen without IPv6: %v", err)
	}
	gl.Close()
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			_, ln := startListening(t, testConfig(b), &echoHandler{}, "tcp", ":0")
			if a := ln.Addr().(*net.TCPAddr); a.IP.To4() == nil {
				t.Errorf("listening on %v, want IPv4's wildcard", a)
			}
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			c := mustDial(t, "tcp", net.JoinHostPort("127.0.0.1", port))
			if err := roundTrip(c, []byte("no IPv6")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
