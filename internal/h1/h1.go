package h1

import "strconv"

// Header is one field line of a message head. Name is as received (compare it
// case-insensitively); Value has its surrounding optional whitespace trimmed.
// Both point into the buffer given to Parse.
type Header struct{ Name, Value []byte }

// Framing says how the end of a message body is found (RFC 9112 6.3).
type Framing uint8

const (
	// NoBody: the message has no body.
	NoBody Framing = iota
	// Length: the body is ContentLength bytes.
	Length
	// Chunked: the body uses the chunked transfer coding.
	Chunked
	// UntilClose: the body ends when the server closes the connection
	// (responses only).
	UntilClose
)

// String returns the framing's name.
func (f Framing) String() string {
	switch f {
	case NoBody:
		return "NoBody"
	case Length:
		return "Length"
	case Chunked:
		return "Chunked"
	case UntilClose:
		return "UntilClose"
	}
	return "Framing(" + strconv.Itoa(int(f)) + ")"
}

// Limits bounds what Parse accepts. A zero field means its default.
type Limits struct {
	// MaxHead is the largest head in bytes, start line and final CRLF
	// included (default 16 KiB). Larger heads are 431 errors.
	MaxHead int
	// MaxHeaders is the most field lines a head may have (default 100).
	// More are 431 errors.
	MaxHeaders int
	// MaxTarget is the longest request target (default 8 KiB). Longer
	// targets are 414 errors.
	MaxTarget int
}

// MaxConnectionOptions is the most elements the Connection fields of a head
// may list in all, empty ones included; more are an error (431 in a
// request, 502 in a response). HopByHop looks a name up in these lists, so
// forwarding a head's fields costs their number times the lists' length:
// without the bound, a 16 KiB head with 8,000 options and 100 fields cost
// 800,000 comparisons (about 10 ms on the loop) to forward. Connection
// names a few options in practice (close, keep-alive, upgrade, the fields
// they take along).
const MaxConnectionOptions = 32

// Default limits.
const (
	DefaultMaxHead    = 16 << 10
	DefaultMaxHeaders = 100
	DefaultMaxTarget  = 8 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxHead <= 0 {
		l.MaxHead = DefaultMaxHead
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = DefaultMaxHeaders
	}
	if l.MaxTarget <= 0 {
		l.MaxTarget = DefaultMaxTarget
	}
	return l
}

// Error is a malformed or unacceptable message. Status is the response a
// proxy should send for it: 400, 414, 431, 501 or 505 for requests, 502 for
// responses and bodies read from an upstream (a proxy reading a request body
// that fails sends 400 instead). Errors returned by this package are shared
// values: do not modify them.
type Error struct {
	Status int
	Reason string
}

// Error implements error.
func (e *Error) Error() string { return "h1: " + strconv.Itoa(e.Status) + " " + e.Reason }

func bad(reason string) *Error { return &Error{Status: 400, Reason: reason} }
func badResp(reason string) *Error {
	return &Error{Status: 502, Reason: reason}
}

var (
	errBareLF          = bad("line ends in LF without CR")
	errBareCR          = bad("CR not followed by LF")
	errLeadingLines    = bad("too many empty lines before the request line")
	errObsFold         = bad("obsolete line folding or whitespace before a field line")
	errSpaceBeforeColn = bad("whitespace between field name and colon")
	errFieldName       = bad("invalid field name")
	errFieldValue      = bad("invalid character in field value")
	errMethod          = bad("invalid method")
	errTarget          = bad("invalid request target")
	errRequestLine     = bad("malformed request line")
	errVersion         = bad("malformed HTTP version")
	errHost            = bad("missing, repeated or invalid Host")
	errHostTarget      = bad("Host differs from the request target's authority")
	errContentLength   = bad("invalid Content-Length")
	errCLMismatch      = bad("differing Content-Length values")
	errCLAndTE         = bad("both Content-Length and Transfer-Encoding")
	errTE              = bad("chunked is not the final transfer coding, or appears twice")
	errTE10            = bad("Transfer-Encoding in an HTTP/1.0 message")
	errTEUnsupported   = &Error{Status: 501, Reason: "transfer coding other than chunked"}
	errVersionUnsupp   = &Error{Status: 505, Reason: "HTTP version not supported"}
	errHeadTooLarge    = &Error{Status: 431, Reason: "head too large"}
	errTooManyHeaders  = &Error{Status: 431, Reason: "too many header fields"}
	errTargetTooLong   = &Error{Status: 414, Reason: "request target too long"}
	errConnOptions     = &Error{Status: 431, Reason: "too many Connection options"}

	errStatusLine     = badResp("malformed status line")
	errRespVersion    = badResp("unsupported HTTP version")
	errRespCL         = badResp("invalid Content-Length")
	errRespCLMismatch = badResp("differing Content-Length values")
	errRespTE         = badResp("Transfer-Encoding whose final coding is not chunked, or with an empty element")
	errResp101        = badResp("101 without an Upgrade listed in Connection")
	errRespTE10       = badResp("Transfer-Encoding in an HTTP/1.0 response")
	errRespHead       = badResp("head too large")
	errRespHeaders    = badResp("too many header fields")
	errRespConnOpts   = badResp(errConnOptions.Reason)

	errChunkSize    = badResp("invalid chunk size")
	errChunkTooBig  = badResp("chunk size overflows")
	errChunkLine    = badResp("chunk-size line too long")
	errChunkExt     = badResp("invalid chunk extension")
	errChunkBWS     = badResp("whitespace ending a chunk-size line")
	errChunkCRLF    = badResp("chunk data not followed by CRLF")
	errTrailer      = badResp("invalid trailer field")
	errTrailerLarge = badResp("trailer section too large")
	errTrailerField = badResp("framing or routing field in trailer section")
)

// respErr maps a head error found while parsing a response to 502.
func respErr(e *Error) *Error {
	switch e {
	case errHeadTooLarge:
		return errRespHead
	case errTooManyHeaders:
		return errRespHeaders
	}
	if e.Status == 502 {
		return e
	}
	return respErrs[e]
}

// respErrs holds 502 twins of the syntax errors shared by both directions.
var respErrs = func() map[*Error]*Error {
	m := map[*Error]*Error{}
	for _, e := range []*Error{errBareLF, errBareCR, errObsFold, errSpaceBeforeColn, errFieldName, errFieldValue} {
		m[e] = badResp(e.Reason)
	}
	return m
}()
