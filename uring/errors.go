package uring

import (
	"errors"
	"fmt"

	"github.com/spindlenet/spindle/internal/sys"
)

// ErrNotSupported is returned when this system or kernel lacks io_uring or
// one of its features. errors.Is(err, ErrNotSupported) holds for every
// *UnsupportedFeatureError too.
var ErrNotSupported = sys.ErrNotSupported

// UnsupportedFeatureError says which io_uring feature is missing and which
// kernel version introduced it.
type UnsupportedFeatureError struct {
	Feature   string // e.g. "IORING_REGISTER_NAPI"
	MinKernel string // e.g. "6.9"
	Err       error  // the underlying error, usually EINVAL or EOPNOTSUPP
}

// Error implements error.
//
// Any goroutine.
func (e *UnsupportedFeatureError) Error() string {
	msg := fmt.Sprintf("%s not supported (requires >= %s)", e.Feature, e.MinKernel)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNotSupported) true.
//
// Any goroutine.
func (e *UnsupportedFeatureError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the underlying error.
//
// Any goroutine.
func (e *UnsupportedFeatureError) Unwrap() error { return e.Err }

// ErrCancelUnconfirmed is wrapped by the error of Ring.Close when the kernel
// did not confirm the cancel of the requests in flight, so that Close left
// the provided buffers mapped (see Ring.Close).
var ErrCancelUnconfirmed = errors.New("kernel did not confirm the cancel of the requests in flight")
