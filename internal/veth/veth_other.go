//go:build !linux

package veth

// Requirements returns ErrNotSupported outside Linux.
func Requirements() error { return ErrNotSupported }

// New returns ErrNotSupported outside Linux.
func New(cfg Config) (*Pair, error) { return nil, ErrNotSupported }

// Close returns ErrNotSupported outside Linux.
func (p *Pair) Close() error { return ErrNotSupported }

// InNetNS returns ErrNotSupported outside Linux.
func InNetNS(nsPath string, fn func() error) error { return ErrNotSupported }
