//go:build !linux

package main

// allowedCPUs returns CPU 0: the wake-up experiment runs on Linux only.
func allowedCPUs() ([]int, error) { return []int{0}, nil }
