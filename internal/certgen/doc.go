// Package certgen makes throwaway X.509 certificates for loopback TLS: a
// self-signed certificate (New), which is also a CA, and leaves it signs
// (Cert.Issue), each with a fresh ECDSA P-256 key, valid from an hour ago
// for a day. The tests of engine, proxy and examples use it for their
// CAs, server and client certificates, and bench for the certificate its
// --tls runs' proxies serve. Nothing it makes is meant to outlive a run.
package certgen
