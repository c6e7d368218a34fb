package engine

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/leakcheck"
	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/uring"
)

// TestMain raises RLIMIT_NOFILE for the many-connection tests and checks
// that the engines the tests ran left no fds, goroutines or mappings (the
// engine's and every internal/sys.MapAnon one: slabs and buffer rings)
// behind, but for the receive rings a ring's unconfirmed Close left mapped
// on purpose (ringLeftMappings), saying what it knows of those left
// (leftMapped). A child of TestLoopOffMainThread runs
// mainThreadChild instead; a child of TestListenWildcardWithoutIPv6 is
// denied IPv6 sockets first, before package net probes what the kernel has
// (leakcheck.Run listens).
func TestMain(m *testing.M) {
	if b := os.Getenv(mainThreadEnv); b != "" {
		os.Exit(mainThreadChild(Backend(b)))
	}
	if os.Getenv(noIPv6Env) != "" {
		if err := sys.DenySocketFamily(unix.AF_INET6, unix.EAFNOSUPPORT); err != nil {
			fmt.Printf("%s: %v\n", seccompRefused, err)
			os.Exit(0)
		}
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 65536 {
		want := unix.Rlimit{Cur: 65536, Max: rl.Max}
		if want.Max < want.Cur {
			want.Max = want.Cur
		}
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) != nil {
			want.Cur = rl.Max
			want.Max = rl.Max
			unix.Setrlimit(unix.RLIMIT_NOFILE, &want)
		}
	}
	engine := leakcheck.Unchanged("engine mappings", func() int { return int(liveMappings.Load()) })
	offHeap := leakcheck.Unchanged("off-heap mappings", func() int { return sys.LiveMappings() - int(ringLeftMappings.Load()) })
	left := leftMapped()
	os.Exit(leakcheck.Run(m, leakcheck.Explained(engine, left), leakcheck.Explained(offHeap, left)))
}

// leftMapped returns, for the leak checks of mappings, what the counts of
// memory left mapped on purpose say of the mappings left: a send slab or a
// receive ring that a loop whose ring's Close could not confirm its
// requests ended left (LeftMappedBytes, uring.LeftMappedBytes grew) and
// that no test accounted for, or, where neither grew, a mapping that code
// or a test forgot to unmap.
func leftMapped() func() string {
	recvBefore, slabBefore := uring.LeftMappedBytes(), LeftMappedBytes()
	return func() string {
		return fmt.Sprintf("receive buffers left mapped by rings' Closes: %d bytes (%d before the tests), the tests accounting for %d receive rings; send slabs left mapped: %d bytes (%d before); engine mappings: %d",
			uring.LeftMappedBytes(), recvBefore, ringLeftMappings.Load(), LeftMappedBytes(), slabBefore, liveMappings.Load())
	}
}
