package uring

import (
	"errors"
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
)

// The first kernels with the io-wq registrations.
const (
	iowqAffMin        = "5.14"
	iowqMaxWorkersMin = "5.15"
)

// RegisterIOWQAffinity confines the io-wq workers (threads named
// iou-wrk-<tid>) that run this ring's requests the kernel cannot complete
// inline (FlagAsync, a send or receive that would block and cannot be
// poll-driven, file I/O) to cpus (IORING_REGISTER_IOWQ_AFF, 5.14). Workers
// started afterwards get that affinity; the kernel (6.18) leaves a worker
// running outside it where it is until it idles out.
//
// io-wq belongs to a thread, not to a ring. For a ring without SQPoll the
// kernel sets the io-wq of the calling thread, which runs the requests of
// every ring that thread submits to: call it on the thread that submits
// (the owner goroutine locked to its thread), after New. For an SQPoll ring
// it sets the io-wq of the SQ thread, shared by the rings attached to it
// (AttachWQ).
//
// The kernel refuses (EINVAL) CPUs outside the cpuset of the thread whose
// workers they are, and a calling thread that never created or submitted to
// a ring; a kernel before 5.14 gives an *UnsupportedFeatureError. cpus must
// not be empty, nor name a CPU outside 0..1023. Owner goroutine.
func (r *Ring) RegisterIOWQAffinity(cpus []int) error {
	if err := r.open(); err != nil {
		return err
	}
	if len(cpus) == 0 {
		return fmt.Errorf("uring: io-wq affinity to no CPU: %w", unix.EINVAL)
	}
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return fmt.Errorf("uring: io-wq affinity to CPU %d: %w", c, unix.EINVAL)
		}
		set.Set(c)
	}
	if err := sys.RegisterIOWQAff(r.fd, &set); err != nil {
		return iowqErr(FeatIOWQAff, iowqAffMin, fmt.Sprintf("io-wq affinity to CPUs %v", cpus), err)
	}
	return nil
}

// UnregisterIOWQAffinity lets the io-wq workers RegisterIOWQAffinity
// confined run on any CPU of their thread's cpuset again, from the same
// thread (IORING_UNREGISTER_IOWQ_AFF, 5.14). Owner goroutine.
func (r *Ring) UnregisterIOWQAffinity() error {
	if err := r.open(); err != nil {
		return err
	}
	if err := sys.RegisterNoArg(r.fd, sys.IORING_UNREGISTER_IOWQ_AFF); err != nil {
		return iowqErr(FeatIOWQAff, iowqAffMin, "io-wq affinity", err)
	}
	return nil
}

// RegisterIOWQMaxWorkers bounds the io-wq workers that run the ring's
// requests (IORING_REGISTER_IOWQ_MAX_WORKERS, 5.15): bounded ones (for
// requests on regular files and block devices, and those with no file, a
// NOP say) and unbounded ones (for requests on sockets, pipes and other
// files, whose waits have no bound). 0 leaves a limit as it is; the
// kernel caps a limit at RLIMIT_NPROC. It returns the limits in effect
// before: RegisterIOWQMaxWorkers(0, 0) reads them.
//
// As with RegisterIOWQAffinity the limits are those of a thread's io-wq:
// the calling thread's for a ring without SQPoll (the ring also keeps them,
// and applies them to the io-wq of any thread that submits to it later),
// the SQ thread's for an SQPoll ring. A thread with no io-wq yet reads 0,
// 0. A kernel before 5.15 gives an *UnsupportedFeatureError. Owner
// goroutine.
func (r *Ring) RegisterIOWQMaxWorkers(bounded, unbounded uint32) (prevBounded, prevUnbounded uint32, err error) {
	if err := r.open(); err != nil {
		return 0, 0, err
	}
	if bounded > math.MaxInt32 || unbounded > math.MaxInt32 {
		return 0, 0, fmt.Errorf("uring: io-wq max workers %d, %d above %d: %w", bounded, unbounded, math.MaxInt32, unix.EINVAL)
	}
	counts := [2]uint32{bounded, unbounded}
	if err := sys.RegisterIOWQMaxWorkers(r.fd, &counts); err != nil {
		return 0, 0, iowqErr(FeatIOWQMaxWorkers, iowqMaxWorkersMin, "io-wq max workers", err)
	}
	return counts[0], counts[1], nil
}

// iowqErr describes the kernel's refusal of an io-wq registration: EINVAL
// is a missing opcode on a kernel older than min, an unsupported feature,
// and the kernel's verdict on the argument on a newer one.
func iowqErr(feature, min, what string, err error) error {
	serr := os.NewSyscallError("io_uring_register", err)
	if errors.Is(err, unix.EINVAL) && !kver.AtLeast(kver.Release(), min) {
		return unsupported(feature, min, serr)
	}
	return fmt.Errorf("uring: %s: %w", what, serr)
}
