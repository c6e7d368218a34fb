// Package grpcinterop holds tests only: gRPC end to end through spindle's
// proxy. grpc-go's interop test server (google.golang.org/grpc/interop)
// serves behind an h2c pool, and grpc-go's interop client cases run through
// an h2c listener of a proxy run in-process, over each engine backend; so do
// many RPCs at once on one client connection and messages larger than every
// flow-control window on the way. grpc-go lives in this nested module so
// that spindle's own module does not depend on it.
package grpcinterop
