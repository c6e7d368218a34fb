//go:build !linux

package bench

import "context"

// Wakeup runs the wake-up experiment; it is implemented on Linux only.
func Wakeup(ctx context.Context, cfg WakeupConfig) (*WakeupReport, error) {
	return nil, ErrNotSupported
}
