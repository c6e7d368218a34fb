// Package h2 implements HTTP/2 (RFC 9113) framing and both sides of a
// connection, sans-IO: bytes in, events to a Handler, bytes out. It has no
// goroutines, locks, timers or net.Conn of its own, so that spindle's
// engine can run it on a loop goroutine (FeedTail from OnData, Pending to
// Conn.Write), and it does not allocate in steady state. FeedTail is Feed
// for reads that end anywhere: whole frames are fed from the read itself,
// only the frame a read ends in is copied (at most one frame of the largest
// size accepted, and its header).
//
// # Framing
//
// ParseFrame parses one frame from a byte slice without copying (padding
// removed, the deprecated priority fields of HEADERS skipped) and applies
// every rule of RFC 9113 section 6 that makes a frame a connection or a
// stream error; *Error carries the error code and the kind. Frames of
// unknown types parse and are ignored (5.5). The Append* functions encode
// the frames a server sends; AppendHeaders splits a header block into
// HEADERS and CONTINUATION frames at the peer's SETTINGS_MAX_FRAME_SIZE.
//
// # Server
//
// A Server checks the client preface and the first SETTINGS, decodes header
// blocks with package hpack and validates requests (8.2, 8.3.1: lowercase
// names, no connection-specific fields, te only "trailers", pseudo-headers
// first, once each and known, :method :scheme :path present and :path
// non-empty, Host equal to :authority, no userinfo in :authority,
// content-length against the DATA received; and what a request line could
// not carry: :method a token, :path without whitespace or control
// characters, :scheme and :authority or Host of RFC 3986's characters).
// A malformed request is a stream error PROTOCOL_ERROR; the HPACK table
// stays in step whatever the block holds.
//
// CONNECT (8.5) is accepted in its plain form: :method and :authority only;
// the stream's DATA is the tunnel's bytes, in both directions, and it is
// the handler's to open the tunnel. Extended CONNECT (RFC 8441, :protocol)
// is not supported: SETTINGS_ENABLE_CONNECT_PROTOCOL is not sent and
// :protocol is malformed.
//
// Streams follow the state machine of 5.1 (idle, open, half-closed either
// way, closed); client stream ids are odd and increasing, so every odd id
// up to the highest opened that is not open is closed (even ids, a
// server's, stay idle: no push); frames the peer sent
// before seeing our RST_STREAM are ignored (DATA charged to the connection
// window) on every stream a peer keeping to MaxConcurrentStreams can still
// send on, the last MaxConcurrentStreams + MaxEarlyResets we reset while
// it could; WINDOW_UPDATE, RST_STREAM and PRIORITY are ignored on any
// closed stream, DATA and HEADERS on others are the peer's errors;
// HEADERS past SETTINGS_MAX_CONCURRENT_STREAMS is refused
// (REFUSED_STREAM). Flow control is applied both ways (6.9): the peer's
// INITIAL_WINDOW_SIZE changes move open streams' send windows, possibly
// below zero; WriteData sends what the windows allow (WriteDataTo the same
// without copying the body into Pending) and OnWritable says when to go
// on, to the blocked streams in the order they opened; the handler returns
// received bytes with Consumed, which sends WINDOW_UPDATEs (a proxy calls
// it when its upstream took the bytes, for backpressure). Shutdown sends
// GOAWAY in two phases (6.8): 2^31-1 and a PING, then, at the PING's ACK,
// the last stream id, so that requests crossing the first are served
// (ShutdownNow sends the final one at once, for a peer that does not
// answer); open streams finish; Done says when to close.
//
// Abuse bounds (Config): rapid reset (CVE-2023-44487: streams reset before
// their response ended or sent DATA, refused, or reset for a stream error,
// by the Server or, on a stream it marked Local, by the handler,
// MaxEarlyResets, each stream completed giving one back, but those the
// handler answered as Local);
// CONTINUATION flood (CVE-2024-27316: a header block's encoded size is
// bounded by MaxHeaderListSize + MaxFrameSize and its CONTINUATION count,
// before it is decoded); control frame floods (SETTINGS, PING, PRIORITY,
// WINDOW_UPDATE, RST_STREAM, GOAWAY, empty DATA and CONTINUATION share
// MaxControlFrames, refilled by requests and by the DATA we send); a peer
// that does not read (MaxOutput: PINGs go unanswered, a SETTINGS or a
// stream error ends the connection, the WINDOW_UPDATEs its DATA earns
// are merged into those not yet sent); an HPACK bomb (the decoder's bound on
// the decoded list: 431); the HPACK table (HeaderTableSize, at most
// MaxHeaderTableSize, and 4096 until our SETTINGS is acknowledged).
//
// # Client
//
// A Client is the other side, for a proxy's HTTP/2 upstreams (gRPC needs
// h2 and trailers end to end), on the same code as the Server wherever the
// logic is the same (conn: output, flow control both ways, SETTINGS, PING,
// WINDOW_UPDATE, header blocks, abuse bounds, WriteData, WriteDataTo,
// WriteTrailers, Reset, Consumed, Shutdown). NewClient puts the client
// preface and our SETTINGS (SETTINGS_ENABLE_PUSH 0) in Pending; Feed takes
// the server's frames, its SETTINGS first, applied and acknowledged.
// Request opens a stream (odd ids, increasing) with a request's header
// section. Responses are validated (8.3.2 and 8.2 as requests are: one
// valid :status and no other pseudo-header, 101 refused, 1xx interim
// responses told apart from the final one and never with END_STREAM, no
// DATA before the final one, lowercase names, no connection-specific
// fields, content-length against DATA (ignored in a 2xx to CONNECT), no
// DATA byte in a response to HEAD or a 204 or 304 whatever its
// content-length, trailers with END_STREAM and no pseudo-header): a
// malformed one is a stream error PROTOCOL_ERROR, a header list above
// MaxHeaderListSize is reset CANCEL.
// The server's GOAWAY and REFUSED_STREAM are told to the handler as
// unprocessed streams, safe to send again on another connection (6.8,
// 8.7). A connection takes no new streams (Available, CanOpen; Request's
// ErrMaxStreams, ErrNoStream, ErrStreamIDs) at the server's
// MAX_CONCURRENT_STREAMS (100 until its SETTINGS say), after GOAWAY either
// way, when the stream ids are used up, or after a failure. The caller owns
// time: SettingsPending says our SETTINGS await their ACK (Abort with
// SETTINGS_TIMEOUT when too long), Ping and OnPingAck measure round trips
// and find a dead upstream. The Server's abuse bounds guard the Client too
// (header block size and CONTINUATION count, the control-frame budget,
// which the ACKs of our PINGs do not spend and requests and the response
// DATA frames we receive refill, MaxOutput, and stream errors through
// MaxEarlyResets).
// Not in the Client: a connection pool (the
// caller's: one Client is one connection), server push (SETTINGS_ENABLE_PUSH
// 0 is sent; PUSH_PROMISE, or the server's ENABLE_PUSH 1, is a connection
// error), the h2c upgrade, TLS, and any checking of the request the
// caller gives Request (it sends what it is given).
//
// Not implemented: server push (never; SETTINGS_ENABLE_PUSH is a client's
// setting and is not sent); priorities (PRIORITY frames and the priority
// fields of HEADERS are accepted, counted and ignored; RFC 9218 too); the
// h2c upgrade from HTTP/1.1 (prior knowledge only); TLS and ALPN (the
// caller's: a Server runs over any byte stream); a Server's PINGs and
// SETTINGS timeouts (the caller owns time); the peer's
// SETTINGS_MAX_HEADER_LIST_SIZE is advisory and not enforced on responses.
package h2
