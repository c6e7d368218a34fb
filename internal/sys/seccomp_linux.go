package sys

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// auditArch is the AUDIT_ARCH_* value seccomp reports for this build
// (include/uapi/linux/audit.h); 0 when this file does not know the
// architecture, in which case DenySyscall refuses rather than guess.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}[runtime.GOARCH]

// DenySyscall installs a seccomp filter on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC, after PR_SET_NO_NEW_PRIVS) that makes system
// call nr fail with errno and lets every other call through. It cannot be
// undone: it is for test child processes that must see a kernel without a
// feature (for example io_uring_setup failing with EPERM, as under a
// container runtime's default profile).
func DenySyscall(nr uintptr, errno unix.Errno) error {
	if auditArch == 0 {
		return ErrNotSupported
	}
	return installFilter(append(loadNr(),
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(nr)},
		fail(errno),
		allow,
	))
}

// allow lets a system call through.
var allow = unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}

// fail makes a system call fail with errno.
func fail(errno unix.Errno) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | (uint32(errno) & unix.SECCOMP_RET_DATA)}
}

// loadNr starts a filter: a system call of another architecture is let
// through, and the call's number is loaded. struct seccomp_data
// (include/uapi/linux/seccomp.h): int nr at offset 0, __u32 arch at
// offset 4.
func loadNr() []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: auditArch},
		allow,
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},
	}
}

// DenySocketFamily is DenySyscall for socket(2) of one address family:
// socket(family, ...) fails with errno, as socket(AF_INET6, ...) does with
// EAFNOSUPPORT on a kernel booted with ipv6.disable=1. It cannot be undone:
// it is for test child processes.
func DenySocketFamily(family int, errno unix.Errno) error {
	if auditArch == 0 {
		return ErrNotSupported
	}
	// The first argument, a 64-bit slot at offset 16 of struct
	// seccomp_data: its low 32 bits first on the little-endian amd64 and
	// arm64.
	return installFilter(append(loadNr(),
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.SYS_SOCKET},
		unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 16},
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(family)},
		fail(errno),
		allow,
	))
}

// DenySyscallWithArg is DenySyscall for the calls of nr whose argument arg
// (counted from 0; its low 32 bits) is not zero: io_uring_enter with SQEs
// to submit (arg 1, to_submit) fails, as when the kernel cannot allocate
// requests, while one that only waits goes through. It cannot be undone:
// it is for test child processes.
func DenySyscallWithArg(nr uintptr, arg int, errno unix.Errno) error {
	if auditArch == 0 {
		return ErrNotSupported
	}
	// Argument arg is the 64-bit slot at offset 16+8*arg of struct
	// seccomp_data, its low 32 bits first on amd64 and arm64.
	return installFilter(append(loadNr(),
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: uint32(nr)},
		unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: uint32(16 + 8*arg)},
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: 0},
		fail(errno),
		allow,
	))
}

// installFilter installs prog as DenySyscall says.
func installFilter(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// no_new_privs is per thread, and seccomp checks the calling thread's:
	// both calls on one thread (without CAP_SYS_ADMIN, seccomp refuses a
	// thread without it with EACCES).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	// seccomp(2) copies the program before it returns, so a Go pointer is
	// fine here; Syscall (not Raw) because it may take the sighand lock
	// across all threads for TSYNC.
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case e != 0:
		return os.NewSyscallError("seccomp", e)
	case r != 0:
		// TSYNC could not synchronise thread r: no filter was installed.
		return fmt.Errorf("seccomp: thread %d could not take the filter (TSYNC); none installed", r)
	}
	return nil
}
