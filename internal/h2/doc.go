// Package h2 implements HTTP/2 (RFC 9113) framing and, in time, a server
// connection, sans-IO: bytes in, events to a handler, bytes out, with no
// goroutines, locks or clocks of its own, and no allocation in steady state.
//
// Framing: ParseFrame parses one frame from a byte slice without copying
// (padding removed, the deprecated priority fields of HEADERS skipped) and
// applies every rule of RFC 9113 section 6 that makes a frame a connection
// or stream error (*Error carries the code and the kind). Append* functions
// encode the frames a server sends.
package h2
