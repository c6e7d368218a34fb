// Package hello is the handler of examples/http: a minimal HTTP/1.1 and
// h2c server that answers every request with "hello, world". It parses
// HTTP/1.1 requests with internal/h1, the module's strict HTTP/1.1 parser
// (no net/http); a connection that starts with the HTTP/2 client preface
// (prior knowledge, no Upgrade) is served by an internal/h2 Server, fed
// from the engine's receive buffers without copying. Either way it
// allocates nothing per request once a connection's buffers have grown.
package hello
