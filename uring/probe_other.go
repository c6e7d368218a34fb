//go:build !linux

package uring

// Probe returns ErrNotSupported outside Linux, with Features saying why. Any
// goroutine.
func Probe() (*Features, error) {
	return &Features{Disabled: -1, Error: ErrNotSupported.Error()}, ErrNotSupported
}

// HasRecvLimit reports false outside Linux. Any goroutine.
func HasRecvLimit() bool { return false }

// HasShortSendLinkCut reports false outside Linux. Any goroutine.
func HasShortSendLinkCut() bool { return false }

// HasShortSendSkipCleared reports false outside Linux. Any goroutine.
func HasShortSendSkipCleared() bool { return false }

// HasSendZC reports false outside Linux. Any goroutine.
func HasSendZC() bool { return false }

// ProbeSendZC returns ErrNotSupported outside Linux. Any goroutine.
func ProbeSendZC() error { return ErrNotSupported }

// SQThreadCPUError returns ErrNotSupported outside Linux. Any goroutine.
func SQThreadCPUError(cpu int) error { return ErrNotSupported }
