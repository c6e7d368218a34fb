package main

import "github.com/spindlenet/spindle/internal/sys"

// allowedCPUs returns the CPUs the calling thread may run on, ascending
// (under taskset or a cpuset, not necessarily from 0).
func allowedCPUs() ([]int, error) { return sys.AllowedCPUs() }
