//go:build !linux

package bench

import "context"

func runHandshakes(context.Context, handshakeLoad) (*LoadResult, *ProxyTLSResult, error) {
	return nil, nil, ErrNotSupported
}
