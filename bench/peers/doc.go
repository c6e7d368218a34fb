// Command peers is the benchmark peers binary: third-party server arms for
// `spindle bench` that spindle's own module must not depend on. It serves
// the "gnet" arm (gnet v2 event loops) with the same flags and control
// protocol as `spindle bench server`; the harness builds it with go build
// from this nested module and runs it as the server child.
//
//	go build -o /tmp/spindle-peers . && /tmp/spindle-peers -arm gnet -listen 127.0.0.1:7000
//
// The module also holds grpcinterop, tests only: grpc-go's interop server
// and client cases through spindle's proxy (HTTP/2 both sides), with
// grpc-go kept out of spindle's module for the same reason.
package main
