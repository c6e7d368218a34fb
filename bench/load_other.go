//go:build !linux

package bench

import "context"

// RunLoad drives load at a server; it is implemented on Linux only.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	return nil, ErrNotSupported
}
