//go:build !linux

package bench

import (
	"os"
	"os/exec"
	"syscall"
)

func pinProcess(cpus []int) error { return ErrNotSupported }

func pinHarness(cpus []int) (func() error, error) { return nil, ErrNotSupported }

func selfUsage(func() map[string]uint64) (ServerUsage, error) { return ServerUsage{}, ErrNotSupported }

func monoNow() int64 { return 0 }

func allowedCPUs() ([]int, error) { return nil, ErrNotSupported }

// killGroupOnCancel leaves cmd as it is outside Linux.
func killGroupOnCancel(cmd *exec.Cmd) {}

func signalGroup(pgid int, sig syscall.Signal) error { return ErrNotSupported }

func pipeUnread(f *os.File) int { return 0 }
