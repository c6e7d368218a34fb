//go:build !linux

package bench

import (
	"os/exec"
	"syscall"
)

func startPinned(cmd *exec.Cmd, cpus []int) error { return ErrNotSupported }

func signalGroup(pgid int, sig syscall.Signal) error { return ErrNotSupported }
