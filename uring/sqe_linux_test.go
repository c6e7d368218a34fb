package uring

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrepPollAddMaskAsKernelReadsIt checks that the kernel reads
// PrepPollAdd's poll mask as given. On a big-endian machine it swaps the
// 16-bit halves of sqe->poll32_events after reading the field
// (io_poll_parse_events, 6.18), a relic of the 16-bit poll_events, so the
// SQE must hold them swapped, as liburing's io_uring_prep_poll_add writes
// them: written as given, POLLIN reached the kernel as 1<<16 on s390x, a
// poll that waited for errors and hang-ups alone. Pure logic: the kernel's
// reading is done here, so on a little-endian machine it passes either way,
// and it runs on a big-endian GOARCH under a user-mode emulator
// (GOARCH=s390x go test -c, then qemu-s390x).
func TestPrepPollAddMaskAsKernelReadsIt(t *testing.T) {
	bigEndian := slices.Contains([]string{"mips64", "ppc64", "s390x"}, runtime.GOARCH)
	for _, events := range []uint32{unix.POLLIN, unix.POLLOUT, unix.POLLIN | unix.POLLRDHUP, unix.EPOLLEXCLUSIVE | unix.POLLIN} {
		var s SQE
		s.PrepPollAdd(3, events, false, 1)
		got := s.OpFlags // read as the kernel does, as a native 32-bit word
		if bigEndian {
			got = got>>16 | got<<16 // swahw32
		}
		if got != events {
			t.Errorf("PrepPollAdd(%#x) on %s: the kernel reads %#x (poll32_events %#x)", events, runtime.GOARCH, got, s.OpFlags)
		}
	}
}
