package sys

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDenySyscall runs itself in a child process (the filter is
// irreversible), denies io_uring_setup there and checks that the call fails
// with the chosen errno while other calls still work.
func TestDenySyscall(t *testing.T) {
	if os.Getenv("SPINDLE_SECCOMP_CHILD") == "1" {
		if err := DenySyscall(unix.SYS_IO_URING_SETUP, unix.EPERM); err != nil {
			t.Fatalf("DenySyscall: %v", err)
		}
		var p Params
		_, err := Setup(4, &p)
		if !errors.Is(err, unix.EPERM) {
			t.Fatalf("io_uring_setup after the filter: %v, want EPERM", err)
		}
		if _, err := os.Getwd(); err != nil {
			t.Fatalf("an allowed call failed: %v", err)
		}
		return
	}
	if auditArch == 0 {
		t.Skip("seccomp filter: architecture not mapped to an AUDIT_ARCH value")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDenySyscall$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SPINDLE_SECCOMP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestDenySocketFamily denies IPv6 sockets in a child process: socket(2)
// of AF_INET6 fails with EAFNOSUPPORT (as with ipv6.disable=1), and of
// AF_INET and AF_UNIX still works.
func TestDenySocketFamily(t *testing.T) {
	if os.Getenv("SPINDLE_SECCOMP_CHILD") == "1" {
		if err := DenySocketFamily(unix.AF_INET6, unix.EAFNOSUPPORT); err != nil {
			t.Fatalf("DenySocketFamily: %v", err)
		}
		if _, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM, 0); err != unix.EAFNOSUPPORT {
			t.Fatalf("socket(AF_INET6) after the filter: %v, want EAFNOSUPPORT", err)
		}
		for _, family := range []int{unix.AF_INET, unix.AF_UNIX} {
			fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatalf("socket(%d) after the filter: %v", family, err)
			}
			unix.Close(fd)
		}
		return
	}
	if auditArch == 0 {
		t.Skip("seccomp filter: architecture not mapped to an AUDIT_ARCH value")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDenySocketFamily$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SPINDLE_SECCOMP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
