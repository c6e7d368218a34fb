//go:build !linux

package main

// firstAllowedCPU returns 0: the wake-up experiment runs on Linux only.
func firstAllowedCPU() (int, error) { return 0, nil }
