package engine

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSteeringProgramLoopLimit builds the pre-6.2 steering program for
// 2046 loops, which the kernel takes (4095 instructions), and for 2047,
// which it would not (4097, past BPF_MAXINSNS): the builder refuses those
// saying why, where it built them and Listen failed with the kernel's
// bare EINVAL ("setsockopt SO_ATTACH_REUSEPORT_CBPF: invalid argument").
func TestSteeringProgramLoopLimit(t *testing.T) {
	cpus := make([]int, maxSteeredLoops+1)
	for i := range cpus {
		cpus[i] = i
	}
	p, err := steeringProgram(cpus[:maxSteeredLoops])
	if err != nil {
		t.Fatalf("%d loops: %v", maxSteeredLoops, err)
	}
	if len(p) > unix.BPF_MAXINSNS {
		t.Fatalf("%d loops: %d instructions, past BPF_MAXINSNS", maxSteeredLoops, len(p))
	}
	if err := attachSteering(p); err != nil {
		t.Errorf("the kernel refused the program for %d loops (%d instructions): %v", maxSteeredLoops, len(p), err)
	}
	// One loop more: the kernel refuses its program, and the builder
	// says why beforehand.
	longer := append(p[:len(p)-2:len(p)-2],
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(maxSteeredLoops)},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: uint32(maxSteeredLoops)},
		p[len(p)-2], p[len(p)-1])
	if err := attachSteering(longer); err != unix.EINVAL {
		t.Errorf("the kernel took a program of %d instructions (%v): the limit is not where maxSteeredLoops puts it", len(longer), err)
	}
	_, err = steeringProgram(cpus)
	if err == nil || !strings.Contains(err.Error(), "steering 2047 loops") || !strings.Contains(err.Error(), "NoSteering") {
		t.Errorf("%d loops: %v, want an error saying the steering cannot take so many, and NoSteering", len(cpus), err)
	}
}

// attachSteering attaches p as a reuseport program to a new SO_REUSEPORT
// TCP socket, as Listen does, and returns the kernel's answer.
func attachSteering(p []unix.SockFilter) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return err
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]})
}
