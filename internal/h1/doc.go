// Package h1 parses HTTP/1.1 message heads and tracks body framing (RFC 9112,
// RFC 9110) for a gateway: the HTTP/1.1 reverse proxy mode of package proxy.
// It is the module's one HTTP/1.1 parser: the bench servers and load
// generator, and examples/http, use it too.
//
// The parser is deliberately strict wherever leniency lets two parsers on a
// request's path disagree about where a message ends (request smuggling):
//
//   - a line must end in CRLF; a bare LF or a CR not followed by LF is an error
//     (RFC 9112 2.2 lets a recipient accept a bare LF; a gateway must not,
//     because the next hop may not);
//   - obs-fold, whitespace between a field name and its colon, CTLs other than
//     HTAB in field values, and invalid token characters in methods and field
//     names are errors;
//   - Content-Length together with Transfer-Encoding is an error in a request,
//     and differing Content-Length values (repeated fields or a list) are
//     errors; identical repeats are accepted as one value;
//   - a request's Transfer-Encoding must be exactly "chunked"; chunked not last
//     (or twice), or an empty list element or field beside it, is 400 (RFC
//     9112 6.3 #4), another coding before it is 501;
//   - Host must be empty or uri-host [ ":" port ] (RFC 9110 7.2);
//   - only HTTP/1.0 and HTTP/1.1 are accepted (505 otherwise).
//
// Parse methods never allocate once the Headers slice has grown; the slices
// they return point into the caller's buffer and are valid while it is.
// Errors are *Error values whose Status is the response a proxy should send.
//
// All types are plain values: a Request, Response or Body is used by one
// goroutine at a time.
package h1
