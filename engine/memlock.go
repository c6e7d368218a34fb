package engine

import (
	"fmt"
	"math"
	"os"
)

// The uring backends' ring sizes (uringBackend.init), which LockedMemory
// counts.
const (
	uringSQEntries = 1024
	uringCQEntries = 8192
)

// probeRingsLocked is what LockedMemory allows for the small rings the
// engine makes and closes to probe the kernel (8 entries: one page of
// rings, one of SQEs, each): the kernel frees a closed ring, and gives
// back its pages, from a work item, so up to three of them may still count
// when a loop makes its own.
const probeRingsLocked = 3 * 2 * 4096

// LockedMemory returns the bytes of locked memory an engine with cfg and
// the given number of loops takes from RLIMIT_MEMLOCK, on a kernel that
// charges io_uring memory regions to it (Linux 6.18, where this was
// measured), in a process without CAP_IPC_LOCK: the kernel's
// io_create_region (io_uring/memmap.c) adds each region's pages to the
// user's locked memory (__io_account_mem, io_uring/rsrc.c), and fails the
// ring's setup or registration with ENOMEM past the limit. The regions of a
// uring loop are its rings (the CQEs, the SQ index array and a page for
// the header), its SQEs and its provided buffer ring (16 bytes an entry,
// Config.ReadBuffers entries); with Config.SendZCThreshold the send slab's
// first region, registered as a fixed buffer, counts too (io_account_mem,
// a huge page whole). The receive and send buffers themselves are plain
// memory and do not count. The epoll backends lock nothing: 0.
//
// The limit is the process's, and the count the user's: every process of
// the user that runs io_uring without CAP_IPC_LOCK takes from the same
// count. An error is a Config New would refuse, or more loops than a
// uint64 counts the bytes of (some 8.7×10^13 default loops, where an
// engine runs one loop a CPU). Any goroutine.
func LockedMemory(cfg *Config, loops int) (uint64, error) {
	c, err := cfg.withDefaults()
	if err != nil || !c.Backend.isURing() || loops <= 0 {
		return 0, err
	}
	page := uint64(os.Getpagesize())
	align := func(n uint64) uint64 { return (n + page - 1) / page * page }
	perLoop := align(uringCQEntries*16+uringSQEntries*4+page) + align(uringSQEntries*64) + align(uint64(c.ReadBuffers)*16)
	if c.SendZCThreshold > 0 {
		perLoop += align(uint64(max(regionSize/c.ReadBufferSize, 1) * c.ReadBufferSize))
	}
	// Past 2^64 the product would wrap around to a figure far too small.
	if uint64(loops) > (math.MaxUint64-probeRingsLocked)/perLoop {
		return 0, fmt.Errorf("engine: %d loops of %d bytes each take more locked memory than 64 bits count", loops, perLoop)
	}
	return uint64(loops)*perLoop + probeRingsLocked, nil
}
