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
