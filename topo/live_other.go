//go:build !linux

package topo

// ReadLive returns ErrNotSupported on systems other than Linux.
func ReadLive() (*Host, error) { return nil, ErrNotSupported }

// ReadRootWithNetlink returns ErrNotSupported on systems other than Linux.
func ReadRootWithNetlink(root string) (*Host, error) { return nil, ErrNotSupported }
