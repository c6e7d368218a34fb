package uring

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// Config configures New. A nil *Config means the defaults documented on each
// field.
type Config struct {
	// Entries is the SQ size, rounded up to a power of two by the kernel
	// and clamped to 32768 (5.1). Default 256.
	Entries uint32
	// CQEntries is the CQ size (IORING_SETUP_CQSIZE, 5.5), rounded up to a
	// power of two and clamped to 65536 like Entries; at least the SQ
	// size. Default twice the SQ size.
	CQEntries uint32
	// SingleIssuer tells the kernel only the creating thread submits
	// (IORING_SETUP_SINGLE_ISSUER, 6.0). The owner goroutine must be locked
	// to its OS thread. Default false.
	SingleIssuer bool
	// DeferTaskrun runs completion work only when the owner waits for
	// completions (IORING_SETUP_DEFER_TASKRUN, 6.1); needs SingleIssuer,
	// excludes SQPoll. Default false.
	DeferTaskrun bool
	// CoopTaskrun avoids interrupting the owner thread to run completion work
	// (IORING_SETUP_COOP_TASKRUN, 5.19); not with SQPoll. Default false.
	CoopTaskrun bool
	// NoTaskrunFlag leaves out IORING_SETUP_TASKRUN_FLAG (5.19), which
	// DeferTaskrun and CoopTaskrun otherwise set: the kernel then does not
	// mark pending completion work in the SQ ring (IORING_SQ_TASKRUN), which
	// spares it an atomic operation on the shared ring when it queues the
	// first such work and another when the work runs. PeekCQEs, ForEachCQE
	// and Submit cannot tell then that completions are held back, so they
	// enter the kernel (GETEVENTS, no wait) whenever they would have looked
	// at the flag: PeekCQEs and ForEachCQE each time the CQ runs out before
	// dst does or fn stops, Submit every time, also with nothing to submit.
	// For an owner that reaps what its waits bring, as an event loop does.
	// Needs DeferTaskrun or CoopTaskrun. Default false.
	NoTaskrunFlag bool
	// SQPoll starts a kernel thread that polls the SQ (IORING_SETUP_SQPOLL;
	// 5.1, without privileges since 5.11). Default false.
	SQPoll bool
	// SQAffinity pins the SQPOLL thread to SQThreadCPU
	// (IORING_SETUP_SQ_AFF, 5.1). Only with SQPoll. Default false: the
	// thread runs wherever the scheduler puts it.
	SQAffinity bool
	// SQThreadCPU is the CPU the SQPOLL thread is pinned to when SQAffinity
	// is set; ignored otherwise. Default 0. The kernel refuses a CPU that
	// does not exist, is offline or is outside the calling thread's cpuset
	// (not its affinity): New fails, naming the reason where
	// SQThreadCPUError can tell it.
	SQThreadCPU int
	// SQThreadIdle is how long the SQPOLL thread spins before sleeping
	// (millisecond resolution, rounded up, 5.1). Default (0) is the
	// kernel's 1 s.
	SQThreadIdle time.Duration
	// AttachWQ shares the SQPOLL thread and io-wq of another ring
	// (IORING_SETUP_ATTACH_WQ, 5.6). That ring may be closed by its owner
	// at the same time: New then fails with os.ErrClosed. Default nil.
	AttachWQ *Ring
	// RegisterRingFD registers the ring fd with the owner thread
	// (IORING_REGISTER_RING_FDS, 5.18), making io_uring_enter cheaper. The
	// owner goroutine must be locked to its OS thread. A thread registers
	// at most 16 rings: New fails with EBUSY beyond. Default false.
	RegisterRingFD bool
}

// Validate reports combinations the kernel refuses, before any system call.
// A nil *Config is valid. Any goroutine.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	switch {
	case c.DeferTaskrun && !c.SingleIssuer:
		return errors.New("uring: DeferTaskrun needs SingleIssuer")
	case c.DeferTaskrun && c.SQPoll:
		return errors.New("uring: DeferTaskrun and SQPoll exclude each other")
	case c.NoTaskrunFlag && !c.DeferTaskrun && !c.CoopTaskrun:
		return errors.New("uring: NoTaskrunFlag needs DeferTaskrun or CoopTaskrun")
	case c.SQPoll && c.CoopTaskrun:
		return errors.New("uring: CoopTaskrun has no meaning with SQPoll (the kernel refuses it)")
	case !c.SQPoll && c.SQThreadIdle != 0:
		return errors.New("uring: SQThreadIdle needs SQPoll")
	case c.SQAffinity && !c.SQPoll:
		return errors.New("uring: SQAffinity needs SQPoll")
	case c.SQAffinity && c.SQThreadCPU < 0:
		return fmt.Errorf("uring: negative SQThreadCPU %d", c.SQThreadCPU)
	case c.SQThreadIdle < 0:
		return errors.New("uring: negative SQThreadIdle")
	case c.CQEntries != 0 && ringSize(c.CQEntries, maxCQEntries) < c.sqSize():
		return fmt.Errorf("uring: CQEntries %d below the SQ size %d", c.CQEntries, c.sqSize())
	}
	return nil
}

// The largest SQ and CQ (IORING_MAX_ENTRIES, IORING_MAX_CQ_ENTRIES): larger
// sizes are clamped (IORING_SETUP_CLAMP, which New always sets).
const (
	maxSQEntries = 1 << 15
	maxCQEntries = 1 << 16
)

// ringSize is the number of entries the kernel makes of n: clamped to max,
// then rounded up to a power of two (io_uring_fill_params).
func ringSize(n, max uint32) uint32 {
	n = min(n, max)
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

// sqSize is the SQ size the kernel makes of c.Entries, or of its default.
func (c *Config) sqSize() uint32 {
	if c.Entries == 0 {
		return ringSize(256, maxSQEntries)
	}
	return ringSize(c.Entries, maxSQEntries)
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Entries == 0 {
		out.Entries = 256
	}
	if out.CQEntries == 0 {
		out.CQEntries = 2 * out.sqSize()
	}
	return out
}
