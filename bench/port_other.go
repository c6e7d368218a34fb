//go:build !linux

package bench

// portHold is Linux's; see port_linux.go.
type portHold struct{ addr string }

func holdPort() (*portHold, error) { return nil, ErrNotSupported }

func (h *portHold) release() {}
