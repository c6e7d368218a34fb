package bench

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// startPinned starts cmd as the leader of a process group of its own,
// pinned to cpus from its first instruction: the fork happens on a locked
// thread whose affinity is set to cpus for it (a child inherits its
// forking thread's mask, and its threads and workers inherit the child's),
// so a program the harness cannot pin from inside (haproxy, nginx) is
// pinned all the same.
//
// The child gets SIGKILL when that thread ends (PR_SET_PDEATHSIG): a
// harness killed, or dead of a fatal error, leaves no proxy running pinned
// to skew the next run (its own process group keeps it from the signals
// of the harness's terminal, and its stdin does not end it). So the
// thread stays locked, and alive, until the child has exited (a pidfd
// says when, without reaping it: the caller's Wait does): a thread handed
// back to the runtime could end with a goroutine that locked it later,
// and the child with it. Its mask is restored after the fork.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	ownGroup(cmd)
	cmd.SysProcAttr.Pdeathsig = unix.SIGKILL
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
		rerr := unix.SchedSetaffinity(0, &old)
		if rerr != nil {
			rerr = os.NewSyscallError("sched_setaffinity (restore)", rerr)
		}
		switch {
		case err != nil && rerr == nil:
			runtime.UnlockOSThread()
			fallthrough
		case err != nil:
			done <- errors.Join(err, rerr)
			return // still locked if its mask is wrong: the thread exits
		case rerr != nil:
			// The child runs: stop it, for its caller knows of no
			// process to stop. The thread exits.
			signalGroup(cmd.Process.Pid, unix.SIGKILL)
			cmd.Wait()
			done <- rerr
			return
		}
		done <- nil
		waitExit(cmd.Process.Pid)
	}()
	return <-done
}

// waitExit blocks until process pid has exited (it may not be reaped yet:
// that is its Wait's).
func waitExit(pid int) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		// No descriptor to spare (EMFILE): look every 100 ms. A zombie
		// is there until its Wait, which ends the look.
		for unix.Kill(pid, 0) == nil {
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}
