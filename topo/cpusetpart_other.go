//go:build !linux

package topo

// readCpusetPrivately returns ErrNotSupported on systems other than Linux.
func readCpusetPrivately(h *Host) error { return ErrNotSupported }
