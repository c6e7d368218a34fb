package bench

import (
	"errors"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startPinned starts cmd as the leader of a process group of its own,
// pinned to cpus from its first instruction: the fork happens on a locked
// thread whose affinity is set to cpus for it (a child inherits its
// forking thread's mask, and its threads and workers inherit the child's),
// so a program the harness cannot pin from inside (haproxy, nginx) is
// pinned all the same. The thread's mask is restored after the fork; a
// thread whose mask cannot be restored is not handed back to the runtime
// (it exits with its goroutine).
func startPinned(cmd *exec.Cmd, cpus []int) error {
	ownGroup(cmd)
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var old unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			runtime.UnlockOSThread()
			done <- os.NewSyscallError("sched_getaffinity", err)
			return
		}
		err := unix.SchedSetaffinity(0, &set)
		if err != nil {
			err = os.NewSyscallError("sched_setaffinity", err)
		} else {
			// The child would get the mask the kernel narrowed.
			err = checkPinned(set, cpus)
		}
		if err == nil {
			err = cmd.Start()
		}
		if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
			if err == nil {
				// The child runs: stop it, for its caller
				// knows of no process to stop.
				signalGroup(cmd.Process.Pid, unix.SIGKILL)
				cmd.Wait()
			}
			done <- errors.Join(err, os.NewSyscallError("sched_setaffinity (restore)", rerr))
			return // still locked: the thread exits
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}
