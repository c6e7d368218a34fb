package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// pinProcess pins every thread of the calling process to cpus. Threads
// created later inherit the mask from their creator, so after two passes
// that find no new thread the whole process is pinned.
func pinProcess(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
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
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("bench: pin server to CPUs %v: %w", cpus, os.NewSyscallError("sched_setaffinity", err))
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

// allowedCPUs returns the CPUs the calling thread may run on, in order.
func allowedCPUs() ([]int, error) { return sys.AllowedCPUs() }

func selfUsage() (ServerUsage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return ServerUsage{}, os.NewSyscallError("getrusage", err)
	}
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return ServerUsage{}, os.NewSyscallError("clock_gettime", err)
	}
	tasks, err := Proc{}.Tasks(0)
	if err != nil {
		return ServerUsage{}, err
	}
	return ServerUsage{
		UserNS: unix.TimevalToNsec(ru.Utime), SysNS: unix.TimevalToNsec(ru.Stime),
		Nvcsw: ru.Nvcsw, Nivcsw: ru.Nivcsw, Threads: tasks, MonoNS: unix.TimespecToNsec(mono),
	}, nil
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
