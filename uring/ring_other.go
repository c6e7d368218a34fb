//go:build !linux

package uring

import "time"

// Ring is an io_uring instance; outside Linux it cannot be created.
type Ring struct{}

// BufRing is a provided buffer ring; outside Linux it cannot be created.
type BufRing struct{}

// New returns ErrNotSupported outside Linux. Any goroutine.
func New(cfg *Config) (*Ring, error) { return nil, ErrNotSupported }

// Close returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) Close() error { return ErrNotSupported }

// CloseOnto returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) CloseOnto(fd int) error { return ErrNotSupported }

// LeftMappedBytes returns 0 outside Linux. Any goroutine.
func LeftMappedBytes() int64 { return 0 }

// Fd returns -1 outside Linux. Any goroutine.
func (r *Ring) Fd() int { return -1 }

// EnterCount returns 0 outside Linux. Any goroutine.
func (r *Ring) EnterCount() uint64 { return 0 }

// InterruptCount returns 0 outside Linux. Any goroutine.
func (r *Ring) InterruptCount() uint64 { return 0 }

// GetSQE returns nil outside Linux. Owner goroutine.
func (r *Ring) GetSQE() *SQE { return nil }

// Submit returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) Submit() (int, error) { return 0, ErrNotSupported }

// SubmitAndWait returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) SubmitAndWait(waitNr uint32, timeout time.Duration) (int, error) {
	return 0, ErrNotSupported
}

// HasMinWait returns false outside Linux. Any goroutine.
func (r *Ring) HasMinWait() bool { return false }

// SubmitAndWaitMin returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) SubmitAndWaitMin(waitNr uint32, minWait, timeout time.Duration) (int, error) {
	return 0, ErrNotSupported
}

// PeekCQEs returns 0 outside Linux. Owner goroutine.
func (r *Ring) PeekCQEs(dst []CQE) int { return 0 }

// CQReady returns 0 outside Linux. Owner goroutine.
func (r *Ring) CQReady() uint32 { return 0 }

// Timespec returns nil outside Linux. Owner goroutine.
func (r *Ring) Timespec(d time.Duration) *Timespec { return nil }

// RegisterBuffers returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) RegisterBuffers(bufs [][]byte) error { return ErrNotSupported }

// UnregisterBuffers returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) UnregisterBuffers() error { return ErrNotSupported }

// RegisterFiles returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) RegisterFiles(n int) error { return ErrNotSupported }

// UpdateFiles returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) UpdateFiles(off int, fds []int) (int, error) { return 0, ErrNotSupported }

// UnregisterFiles returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) UnregisterFiles() error { return ErrNotSupported }

// RegisterNAPI returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) RegisterNAPI(c NAPIConfig) (NAPIConfig, error) { return NAPIConfig{}, ErrNotSupported }

// UnregisterNAPI returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) UnregisterNAPI() error { return ErrNotSupported }

// RegisterIOWQAffinity returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) RegisterIOWQAffinity(cpus []int) error { return ErrNotSupported }

// UnregisterIOWQAffinity returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) UnregisterIOWQAffinity() error { return ErrNotSupported }

// RegisterIOWQMaxWorkers returns ErrNotSupported outside Linux. Owner
// goroutine.
func (r *Ring) RegisterIOWQMaxWorkers(bounded, unbounded uint32) (uint32, uint32, error) {
	return 0, 0, ErrNotSupported
}

// AddNAPIID returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) AddNAPIID(id uint32) error { return ErrNotSupported }

// RemoveNAPIID returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) RemoveNAPIID(id uint32) error { return ErrNotSupported }

// SetupBufRing returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) SetupBufRing(group uint16, entries int, bufSize int) (*BufRing, error) {
	return nil, ErrNotSupported
}

// SetupBufRingPages returns ErrNotSupported outside Linux. Owner goroutine.
func (r *Ring) SetupBufRingPages(group uint16, entries int, bufSize int, huge bool) (*BufRing, error) {
	return nil, ErrNotSupported
}

// Buf returns nil outside Linux. Any goroutine.
func (b *BufRing) Buf(id uint16) []byte { return nil }

// Recycle does nothing outside Linux. Owner goroutine.
func (b *BufRing) Recycle(id uint16) {}

// Commit does nothing outside Linux. Owner goroutine.
func (b *BufRing) Commit() {}

// Head returns ErrNotSupported outside Linux. Owner goroutine.
func (b *BufRing) Head() (uint16, error) { return 0, ErrNotSupported }

// Close returns ErrNotSupported outside Linux. Owner goroutine.
func (b *BufRing) Close() error { return ErrNotSupported }

// ForEachCQE returns 0 outside Linux. Owner goroutine.
func (r *Ring) ForEachCQE(fn func(CQE) bool) int { return 0 }

// SetupFlags returns 0 outside Linux. Any goroutine.
func (r *Ring) SetupFlags() uint32 { return 0 }

// KernelFeatures returns 0 outside Linux. Any goroutine.
func (r *Ring) KernelFeatures() uint32 { return 0 }

// SQEntries returns 0 outside Linux. Any goroutine.
func (r *Ring) SQEntries() uint32 { return 0 }

// CQEntries returns 0 outside Linux. Any goroutine.
func (r *Ring) CQEntries() uint32 { return 0 }

// SQReady returns 0 outside Linux. Owner goroutine.
func (r *Ring) SQReady() uint32 { return 0 }

// SQTail returns 0 outside Linux. Owner goroutine.
func (r *Ring) SQTail() uint32 { return 0 }

// SQConsumed returns false outside Linux. Owner goroutine.
func (r *Ring) SQConsumed(pos uint32) bool { return false }

// CQOverflowPending returns false outside Linux. Owner goroutine.
func (r *Ring) CQOverflowPending() bool { return false }

// SQDropped returns 0 outside Linux. Owner goroutine.
func (r *Ring) SQDropped() uint32 { return 0 }

// CQOverflow returns 0 outside Linux. Owner goroutine.
func (r *Ring) CQOverflow() uint32 { return 0 }

// Group returns 0 outside Linux. Any goroutine.
func (b *BufRing) Group() uint16 { return 0 }

// Entries returns 0 outside Linux. Any goroutine.
func (b *BufRing) Entries() int { return 0 }

// BufSize returns 0 outside Linux. Any goroutine.
func (b *BufRing) BufSize() int { return 0 }

// PageKind returns PageSmall outside Linux. Any goroutine.
func (b *BufRing) PageKind() PageKind { return PageSmall }

// Mbind returns ErrNotSupported outside Linux. Any goroutine.
func (b *BufRing) Mbind(node int) error { return ErrNotSupported }

// Available returns ErrNotSupported outside Linux. Owner goroutine.
func (b *BufRing) Available() (int, error) { return 0, ErrNotSupported }

// BundleIDs returns ErrNotSupported outside Linux. Owner goroutine.
func (b *BufRing) BundleIDs(c CQE, dst []uint16) ([]uint16, error) { return dst, ErrNotSupported }
