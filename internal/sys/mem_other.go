//go:build !linux

package sys

// MapAnon is not supported outside Linux.
func MapAnon(length int, huge bool) ([]byte, PageKind, error) {
	return nil, PageSmall, ErrNotSupported
}

// Unmap is not supported outside Linux.
func Unmap(b []byte) error { return ErrNotSupported }

// Mbind is not supported outside Linux.
func Mbind(b []byte, node int) error { return ErrNotSupported }

// MbindPolicy is not supported outside Linux.
func MbindPolicy(b []byte, mode MemPolicy, node int) error { return ErrNotSupported }

// SetMempolicy is not supported outside Linux.
func SetMempolicy(mode MemPolicy, node int) error { return ErrNotSupported }

// MempolicyOf is not supported outside Linux.
func MempolicyOf(b []byte) (MemPolicy, int, error) { return MPolDefault, -1, ErrNotSupported }
