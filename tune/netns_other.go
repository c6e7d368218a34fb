//go:build !linux

package tune

import "github.com/spindlenet/spindle/topo"

// InNetNS returns topo.ErrNotSupported on systems other than Linux.
func InNetNS(nsPath string, fn func() error) error { return topo.ErrNotSupported }

// MountNetNSView returns topo.ErrNotSupported on systems other than Linux.
func MountNetNSView(dir string) (cleanup func() error, err error) { return nil, topo.ErrNotSupported }

// netnsCookie returns 0 (unknown) on systems other than Linux.
func netnsCookie() uint64 { return 0 }
