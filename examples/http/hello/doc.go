// Package hello is the handler of examples/http: a minimal HTTP/1.1 server
// that answers every request with "hello, world". It parses requests with
// internal/h1, the module's strict HTTP/1.1 parser (no net/http), and
// allocates nothing per request once a connection's buffers have grown.
package hello
