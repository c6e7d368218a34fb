package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// pinProcess pins every thread of the calling process to cpus.
func pinProcess(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := setThreads(&set); err != nil {
		return fmt.Errorf("bench: pin server to CPUs %v: %w", cpus, err)
	}
	if err := checkPinned(set, cpus); err != nil {
		return fmt.Errorf("bench: pin server: %w", err)
	}
	return nil
}

// pinHarness pins every thread of the harness to cpus, the client CPUs,
// for a run: its own work (the reads at each window's edges, the server
// children's control pipes, the Go runtime's threads) ran on any CPU, the
// server's included, beside the server it measures. The load generator's
// threads pin themselves to one client CPU each, and the programs
// startPinned starts are pinned to theirs. restore gives every thread
// the mask the calling thread had. GOMAXPROCS stays what it was
// (setThreads).
func pinHarness(cpus []int) (restore func() error, err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	restore = func() error {
		if err := setThreads(&old); err != nil {
			return fmt.Errorf("bench: unpin the harness: %w", err)
		}
		return nil
	}
	err = setThreads(&set)
	if err == nil {
		err = checkPinned(set, cpus)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: pin the harness to the client CPUs %v: %w", cpus, err), restore())
	}
	return restore, nil
}

// setThreads sets the affinity of every thread of the calling process to
// set. Threads created later inherit the mask from their creator, so
// after two passes that find no new thread every thread has it.
// GOMAXPROCS stays what it was, set from then on: left to its default,
// the runtime follows the narrower mask (Go 1.25) and lowers it to the
// number of CPUs about a second later, after which a pinned harness's load
// threads lose their P to sysmon in each system call, and sysmon wakes
// every 20 µs beside them (TestPinHarnessKeepsGOMAXPROCS).
func setThreads(set *unix.CPUSet) error {
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	done := map[int]bool{}
	for quiet := 0; quiet < 2; {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return os.NewSyscallError("sched_setaffinity", err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// checkPinned returns an error unless the calling thread may run on the
// CPUs of want (cpus) and no others: sched_setaffinity leaves out of a
// mask, without an error, the CPUs outside the caller's cpuset (it fails
// only when none is left), and the report would name CPUs that were never
// used.
func checkPinned(want unix.CPUSet, cpus []int) error {
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(0, &got); err != nil {
		return os.NewSyscallError("sched_getaffinity", err)
	}
	if got == want {
		return nil
	}
	have, err := allowedCPUs()
	if err != nil {
		return err
	}
	what := "CPUs"
	if len(have) == 1 {
		what = "CPU"
	}
	return fmt.Errorf("asked for CPUs %s, the kernel let it run on %s %s only (a cpuset without the others?)", FormatCPUList(cpus), what, FormatCPUList(have))
}

// allowedCPUs returns the CPUs the calling thread may run on, in order.
func allowedCPUs() ([]int, error) { return sys.AllowedCPUs() }

// selfUsage reads the process's CPU time (getrusage) and its threads' run
// times (schedstat). The server runs on while the threads' files are read,
// so the two are read again, up to usageTries times, until the process's
// CPU time moved less than usageSkew across the threads' read (else the
// read it moved least across is kept): a reader descheduled in the middle
// on a loaded machine would otherwise put a thread sum and a process total
// of different moments side by side. counters, when not nil, are the
// server's own counters (counterer): they are read with the CPU time and
// the clock, at the moment the harness places the answer at (MonoNS).
// monoNow is CLOCK_MONOTONIC in ns, the clock of ServerUsage.MonoNS; 0
// where it cannot be read.
func monoNow() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return unix.TimespecToNsec(ts)
}

func selfUsage(counters func() map[string]uint64) (ServerUsage, error) {
	var best ServerUsage
	bestSkew := int64(-1)
	for range usageTries {
		u, skew, err := selfUsageOnce(counters)
		if err != nil {
			return ServerUsage{}, err
		}
		if bestSkew < 0 || skew < bestSkew {
			best, bestSkew = u, skew
		}
		if skew < int64(usageSkew) {
			break
		}
	}
	return best, nil
}

const (
	usageTries = 4
	usageSkew  = time.Millisecond
)

// usageMidRead, when set (by tests), runs between a read's getrusage and
// its threads' read.
var usageMidRead func()

// selfUsageOnce is one read of selfUsage, and how much the process's CPU
// time moved while the threads were read.
func selfUsageOnce(counters func() map[string]uint64) (ServerUsage, int64, error) {
	rusage := func() (int64, unix.Rusage, error) {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			return 0, ru, os.NewSyscallError("getrusage", err)
		}
		return unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime), ru, nil
	}
	t0, ru, err := rusage()
	if err != nil {
		return ServerUsage{}, 0, err
	}
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return ServerUsage{}, 0, os.NewSyscallError("clock_gettime", err)
	}
	var c map[string]uint64
	if counters != nil {
		c = counters()
	}
	if usageMidRead != nil {
		usageMidRead()
	}
	tasks, err := Proc{}.Tasks(0)
	if err != nil {
		return ServerUsage{}, 0, err
	}
	t1, _, err := rusage()
	if err != nil {
		return ServerUsage{}, 0, err
	}
	return ServerUsage{
		UserNS: unix.TimevalToNsec(ru.Utime), SysNS: unix.TimevalToNsec(ru.Stime),
		Nvcsw: ru.Nvcsw, Nivcsw: ru.Nivcsw, Threads: tasks, MonoNS: unix.TimespecToNsec(mono), Counters: c,
	}, t1 - t0, nil
}

// killGroupOnCancel makes cmd the leader of a process group of its own and
// its context's cancellation kill that whole group, so that a build cut
// short (go build's compile and link children, cc's cc1 and ld) leaves no
// process behind; Wait gives up on the group's output after a second.
func killGroupOnCancel(cmd *exec.Cmd) {
	ownGroup(cmd)
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = time.Second
}

// ownGroup makes cmd, once started, the leader of a process group of its
// own, whose group id is its pid.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to process group pgid; a group already gone is
// not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		return os.NewSyscallError("kill", err)
	}
	return nil
}

// pipeUnread is how many bytes wait in pipe f for its reader (FIONREAD, which is TIOCINQ);
// 0 where f is nil or the ioctl fails.
func pipeUnread(f *os.File) int {
	if f == nil {
		return 0
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}
