//go:build !linux

package bench

import "os/exec"

func startPinned(cmd *exec.Cmd, cpus []int) error { return ErrNotSupported }
