//go:build !linux

package bench

// Wire is the "wire" topology (two network namespaces joined by a veth
// pair); it exists on Linux only.
type Wire struct{ Loopback }

// NewWire returns ErrNotSupported outside Linux.
func NewWire(tag string) (*Wire, error) { return nil, ErrNotSupported }

// WireRequirements returns ErrNotSupported outside Linux.
func WireRequirements() error { return ErrNotSupported }

// SetServerRPS returns ErrNotSupported outside Linux.
func (w *Wire) SetServerRPS(cpus []int) error { return ErrNotSupported }
