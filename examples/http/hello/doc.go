// Package hello is the handler of examples/http: a minimal HTTP/1.1 server
// that answers every request with "hello, world". It parses request heads
// itself (no net/http), allocation-free when requests arrive whole.
package hello
