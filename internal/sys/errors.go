package sys

import "errors"

// ErrNotSupported is returned on systems (or kernels) that lack a facility:
// every function of this package returns it outside Linux. Package uring
// re-exports it.
var ErrNotSupported = errors.New("not supported on this system")
