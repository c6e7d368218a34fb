package main

import "github.com/spindlenet/spindle/internal/sys"

// firstAllowedCPU returns the first CPU the calling thread may run on
// (under taskset or a cpuset, not necessarily 0).
func firstAllowedCPU() (int, error) {
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		return 0, err
	}
	if len(cpus) == 0 {
		return 0, nil
	}
	return cpus[0], nil
}
