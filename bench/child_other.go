//go:build !linux

package bench

func pinProcess(cpus []int) error { return ErrNotSupported }

func selfUsage() (ServerUsage, error) { return ServerUsage{}, ErrNotSupported }

func allowedCPUs() ([]int, error) { return nil, ErrNotSupported }
