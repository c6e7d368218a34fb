package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h1"
)

// Config is a proxy's configuration, read from a YAML file by LoadConfig or
// ParseConfig. A zero field means its default.
type Config struct {
	// Engine holds the options of the engine the data path runs on.
	Engine EngineConfig `yaml:"engine" json:"engine"`
	// Listeners are the addresses the proxy accepts on, at least one.
	Listeners []ListenerConfig `yaml:"listeners" json:"listeners"`
	// Pools are the upstream server pools the listeners send to.
	Pools []PoolConfig `yaml:"pools" json:"pools"`
	// Admin is the admin HTTP server (/metrics, /healthz,
	// /debug/config). Without a listen address there is none.
	Admin AdminConfig `yaml:"admin" json:"admin"`
}

// EngineConfig selects the engine's backend and loops.
type EngineConfig struct {
	// Backend is one of engine.Backends. Default "uring" (falling back
	// to epoll where io_uring cannot be used, as the engine does).
	Backend string `yaml:"backend" json:"backend"`
	// CPUs get one loop each. Default: as engine.Config.CPUs.
	CPUs []int `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	// WriteHighWater is the engine's per-connection write-queue mark in
	// bytes of buffer memory (engine.Config.WriteHighWater): the proxy
	// stops reading a side whose peer's queue holds this much
	// (engine.Conn.QueuedMemory: whole buffers, however few bytes each
	// carries). Default engine.DefaultWriteHighWater (256 KiB), minimum
	// 4096.
	WriteHighWater int `yaml:"write_high_water" json:"write_high_water"`
	// WriteTimeout resets a connection, client or server, whose write
	// queue has had nothing taken from it for this long
	// (engine.Config.WriteTimeout): a peer that stops reading holds its
	// queue (up to write_high_water of buffers) and, through the proxy,
	// its other side's connection for that long, not for good. Default
	// 60s: as long as response_timeout's default, far above the time a
	// peer that reads at all takes to open its receive window again (the
	// kernel takes more of a queue only in steps of up to half the peer's
	// receive buffer, so a peer reading that much more slowly than once
	// per write_timeout is reset), and short enough that a few thousand
	// stalled peers cannot pin the proxy's memory for long. It also
	// bounds a server that stops reading a request body. Positive.
	WriteTimeout Duration `yaml:"write_timeout" json:"write_timeout"`
	// CloseTimeout bounds a close: a connection whose queue has not
	// drained this long after the proxy closed it is reset
	// (engine.Config.CloseTimeout), even while it moves. Default 30s.
	// Positive.
	CloseTimeout Duration `yaml:"close_timeout" json:"close_timeout"`
}

// Listener modes.
const (
	// ModeTCP forwards each client's bytes to a server as they are (L4).
	ModeTCP = "tcp"
	// ModeHTTP is an HTTP/1.1 reverse proxy: requests are parsed,
	// routed by host and path, and sent over keep-alive connections to
	// the servers.
	ModeHTTP = "http"
)

// ListenerConfig is one listening address and the pool it forwards to.
type ListenerConfig struct {
	// Name names the listener in metrics; unique, required.
	Name string `yaml:"name" json:"name"`
	// Listen is "host:port" with a numeric host, "localhost" or an
	// empty host (every address); port 0 picks a free port.
	Listen string `yaml:"listen" json:"listen"`
	// Mode is ModeTCP (the default) or ModeHTTP.
	Mode string `yaml:"mode" json:"mode"`
	// Pool is the name of the pool connections go to; required. In mode
	// http it takes the requests no route matches.
	Pool string `yaml:"pool" json:"pool"`
	// TLS, when set, makes the listener terminate TLS: see TLSConfig.
	// Default none: plain TCP.
	TLS *TLSConfig `yaml:"tls,omitempty" json:"tls,omitempty"`
	// Routes send HTTP requests to pools by host and path (mode http
	// only): the first route that matches a request takes it.
	Routes []RouteConfig `yaml:"routes,omitempty" json:"routes,omitempty"`
	// RequestHeaders (mode http) changes the fields of every request of
	// the listener sent upstream, before its route's (see HeaderRules).
	// Default: none.
	RequestHeaders HeaderRules `yaml:"request_headers,omitempty" json:"request_headers,omitzero"`
	// ResponseHeaders (mode http) changes the fields of every response
	// from upstream the listener's clients get (a 101 included; not an
	// interim 1xx's, nor the proxy's own responses), before its route's.
	// Default: none.
	ResponseHeaders HeaderRules `yaml:"response_headers,omitempty" json:"response_headers,omitzero"`
	// ConnectTimeout bounds each connect to an upstream server: with a
	// pool's tls its handshake too, and with protocol h2c or h2 the
	// arrival of the server's SETTINGS. Default 5s.
	ConnectTimeout Duration `yaml:"connect_timeout" json:"connect_timeout"`
	// IdleTimeout closes both sides of a connection after this long
	// without a byte either way (received, or taken by a peer from a
	// write queue or from what its socket's send buffer holds); a side
	// whose queue a peer has stopped taking is reset.
	// Default 0: never, and then a client that stops reading holds its
	// connection until it reads again or goes away. In mode http it
	// bounds upgraded connections (a 101 makes them a tunnel) only:
	// between requests keepalive_timeout is the client's idle bound, and
	// request_timeout and response_timeout bound an exchange.
	IdleTimeout Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// MaxConns bounds the listener's open client connections; a client
	// over it is accepted and closed at once, and counted. A reload that
	// sets or changes it counts the clients open under the configs
	// before (in the same mode). Default 0: no bound.
	MaxConns int `yaml:"max_conns" json:"max_conns"`
	// RequestTimeout (mode http) bounds the arrival of a request's
	// whole head, from the connection's accept or the request's first
	// byte; past it the client gets 408 and is closed. It also bounds
	// the body of a request a rate_limit refused, read and dropped, from
	// the 429: past it the client is closed. Default 30s.
	RequestTimeout Duration `yaml:"request_timeout,omitempty" json:"request_timeout,omitempty"`
	// ResponseTimeout (mode http) bounds the wait for a server: from
	// the request's head sent to the response's head, counted again
	// from each read of the request's body, and then between two reads
	// of the response's body, or, while the server is not read because
	// the client's queue is full, between two moves of what the client
	// has yet to receive (a client reading slowly is not cut). To an h2c
	// pool it runs to the response's head from the request's arrival
	// (a retry's: its start), its waits for a stream (room in
	// h2_response_hold, in the server's queue) and its connect
	// included: one for the whole wait, per_try_timeout bounding the
	// try from its start at the server. Before
	// the response's head the client gets 504; after it the client's
	// connection is reset. It also bounds a
	// client that is being closed (after a response with Connection:
	// close, an error, keepalive_timeout) and takes nothing of what is
	// queued for it: it is reset rather than held. Default 60s.
	ResponseTimeout Duration `yaml:"response_timeout,omitempty" json:"response_timeout,omitempty"`
	// KeepaliveTimeout (mode http) closes a client that sends no byte
	// of a next request for this long after a response. Default 60s.
	KeepaliveTimeout Duration `yaml:"keepalive_timeout,omitempty" json:"keepalive_timeout,omitempty"`
	// MaxRequestBody (mode http) bounds a request's body, in bytes. A
	// request whose Content-Length is larger gets 413 and a close, and
	// reaches no server. A chunked body is counted as it streams, as sent
	// (chunk-size lines and CRLFs included): past the bound the server's
	// connection is reset and the client gets 413 and a close, or a reset
	// where the server's response has begun. Default 0: no bound (bodies
	// stream through and are never held whole, so the bound is a policy,
	// not what keeps the proxy's memory bounded; nginx's default is 1 MiB,
	// HAProxy has none).
	MaxRequestBody int64 `yaml:"max_request_body" json:"max_request_body"`
	// Upgrades (mode http) lists the protocols a request may upgrade its
	// connection to (a 101 makes it a tunnel), as Upgrade field tokens
	// without a version, compared case-insensitively. A request asking
	// for others is forwarded as a plain request: without them in
	// Upgrade, and without Connection: upgrade where none is left (and
	// without HTTP2-Settings unless h2c is allowed); a 101 to a request
	// that asked none allowed, or to a protocol not allowed, gets the
	// client 502. Default [websocket]; [] allows none. h2c is left out
	// by default as nginx does: a client that upgrades to HTTP/2
	// cleartext through the proxy then sends the server requests the
	// proxy never sees (its routes and bounds do not apply).
	Upgrades Tokens `yaml:"upgrades,omitempty" json:"upgrades,omitzero"`
	// TrustedProxies (mode http) lists the networks (CIDRs, "10.0.0.0/8",
	// "fd00::/8", "127.0.0.1/8" as 127.0.0.0/8; an IPv4-mapped client
	// compares as IPv4) of the clients
	// whose forwarding fields are believed: the proxy appends such a
	// client to the X-Forwarded-For it sent and keeps its
	// X-Forwarded-Proto and X-Forwarded-Host (writing them where absent),
	// X-Real-IP and Forwarded. From any other client those five fields
	// are dropped and the proxy writes its own: X-Forwarded-For: the
	// client, X-Forwarded-Proto: http, X-Forwarded-Host: the request's
	// host (as nginx's set_real_ip_from and Envoy's xff_num_trusted_hops
	// let an edge proxy do). Default none: no client is trusted, so none
	// can forge its address to the servers.
	TrustedProxies Prefixes `yaml:"trusted_proxies,omitempty" json:"trusted_proxies,omitempty"`
	// HeadersWithUnderscores (mode http) is what becomes of a request
	// field whose name has an underscore ("X_User"), which servers that
	// name fields as CGI does (HTTP_X_USER: PHP, WSGI, Rack) read as the
	// one with a hyphen: allow passes it, drop removes it (counted in
	// spindle_proxy_listener_underscore_dropped_total), reject answers
	// the request 400. Default allow, as Envoy and HAProxy (nginx drops
	// them). Whatever it says, the forwarding fields so spelled
	// (X_Forwarded_For, X_Real_IP, ...) are dropped from every client
	// (see TrustedProxies). drop and reject drop such fields of the
	// request's trailer section too (reject's 400 is too late there),
	// beside the fields no request trailer keeps (see doc.go:
	// forwarding, framing, authentication, ...).
	HeadersWithUnderscores string `yaml:"headers_with_underscores,omitempty" json:"headers_with_underscores,omitempty"`
	// AbortOnClose (mode http) ends an HTTP/1.1 client's request at the
	// client's FIN while no response head has come back: while it waits
	// for its connect or for an h2c server's stream (as HAProxy's option
	// abortonclose), and once it went whole to its server too (the
	// server's connection reset, not pooled; an h2c server's stream reset
	// with CANCEL), as nginx's default (proxy_ignore_client_abort off)
	// does: the server's work for a client that went is spared; CD in the
	// access log. Default false: such a FIN is a half close, the response
	// sent and the client then closed, so that a client that sends its
	// request and then its FIN (printf ... | nc -N) is answered whether an
	// idle connection was at hand or one had to be made. Whatever it
	// says, a FIN while the request waits in the pool's queue for a slot
	// (max_conns: overload) ends it. An HTTP/2 client ends a stream with
	// RST_STREAM instead.
	AbortOnClose bool `yaml:"abort_on_close,omitempty" json:"abort_on_close,omitempty"`
	// AccessLog, when set, logs each HTTP exchange (mode http) or each
	// client connection (mode tcp) of the listener: see AccessLogConfig.
	// Default: no access log.
	AccessLog *AccessLogConfig `yaml:"access_log,omitempty" json:"access_log,omitempty"`
	// H2C (mode http) accepts HTTP/2 with prior knowledge (h2c) next to
	// HTTP/1.1 on the listener's socket: a client whose first bytes are
	// the HTTP/2 client preface speaks HTTP/2, each of its streams a
	// request forwarded as HTTP/1.1; others are HTTP/1.1 clients as
	// without it. Default false. The h2c upgrade from HTTP/1.1 is not
	// taken (see Upgrades). Not with TLS, where ALPN offers HTTP/2
	// (TLSConfig.ALPN).
	H2C bool `yaml:"h2c,omitempty" json:"h2c,omitempty"`
	// H2MaxConcurrentStreams (with h2c, or TLS offering h2) is an
	// HTTP/2 client's SETTINGS_MAX_CONCURRENT_STREAMS: the requests it
	// may have in flight on one connection, each on an upstream
	// connection of its own. Default 100.
	H2MaxConcurrentStreams uint32 `yaml:"h2_max_concurrent_streams,omitempty" json:"h2_max_concurrent_streams,omitempty"`
	// H2InitialWindow (with h2c, or TLS offering h2) is each HTTP/2
	// stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE), in bytes:
	// what a request body may have on its way that the upstream has not
	// taken. Default 64 KiB: the proxy holds a stream's body while its
	// upstream connects and returns the window only as the upstream
	// takes the bytes, so the window is the memory a stream may hold
	// (bounded per connection by the 1 MiB connection window as well); a
	// larger one only helps a single upload over a long round trip.
	H2InitialWindow uint32 `yaml:"h2_initial_window,omitempty" json:"h2_initial_window,omitempty"`
	// H2ResponseHold (with h2c, or TLS offering h2) bounds, in bytes,
	// what one HTTP/2 client connection may make the proxy hold of
	// responses from h2c pools its windows do not take: each of its
	// streams with an upstream stream counts the proxy's window to the
	// server (64 KiB, what the server may send unasked), one whose
	// response has all come what is left of it, and the client's write
	// queue past the high-water mark counts too. A stream that would
	// pass it waits, before it goes upstream, for the client to take
	// what is held (response_timeout runs, and goes on from there once
	// it goes upstream: one for the whole wait; 504). Default
	// h2_max_concurrent_streams times 64 KiB (6.4 MiB at its default),
	// at most 2^31-1: no stream waits for it, and a client that does not
	// read holds no more in its write queue besides. Set lower, it bounds
	// such a client tighter at the cost of its streams to h2c pools at
	// once: 1 MiB lets 16 go, the rest waiting (a gRPC client's
	// long-lived streams would). From 64 KiB to 2^31-1.
	H2ResponseHold int64 `yaml:"h2_response_hold,omitempty" json:"h2_response_hold,omitempty"`
	// RateLimit limits the listener's requests (mode http: every
	// request, whatever its route) or new connections (mode tcp): see
	// RateLimitConfig. Default none. Key client limits a client in
	// TrustedProxies by the X-Forwarded-For client it names.
	RateLimit *RateLimitConfig `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty"`

	// Retry (mode http) sends a request that failed again, to another
	// server: see RetryConfig. Default none.
	Retry *RetryConfig `yaml:"retry,omitempty" json:"retry,omitempty"`
}

// Defaults of the h2c knobs.
const (
	DefaultH2MaxConcurrentStreams = 100
	DefaultH2InitialWindow        = 64 << 10
)

// Tokens is a list of tokens that tells an absent list (nil: the
// default) from an empty one ([]: none).
type Tokens []string

// IsZero reports an absent list, for omitempty and omitzero.
func (t Tokens) IsZero() bool { return t == nil }

// HeadersWithUnderscores's values.
const (
	UnderscoresAllow  = "allow"
	UnderscoresDrop   = "drop"
	UnderscoresReject = "reject"
)

// DefaultUpgrades is an HTTP listener's default upgrades.
var DefaultUpgrades = Tokens{"websocket"}

// TLSConfig makes a listener terminate TLS (ListenerConfig.TLS). The
// engine runs each handshake, on a goroutine of its own bounded by
// HandshakeTimeout, and then the record layer on the loop
// (engine.ListenConfig.TLS); the listener's mode works on the plaintext
// as on a plain listener: mode tcp sends the client's decrypted bytes to
// its server as they are (and the server's, encrypted, back), mode http
// parses the requests (HTTP/1.1, and HTTP/2 where ALPN chose "h2") and
// sends them on with X-Forwarded-Proto: https. A client is accepted
// (counted, and held to max_conns and rate_limit) once its handshake has
// succeeded; one whose handshake fails or times out is closed and counted
// (spindle_proxy_listener_tls_handshake_failures_total).
//
// The certificate files are read by Validate (so that `spindle proxy
// -check` reports a file that cannot be read or a key that does not match
// its certificate) and again by New and by each Reload: a reload (SIGHUP)
// puts in force, for the handshakes that follow, the certificates the
// files hold then, on the socket it keeps (the connections open keep
// their sessions). Turning TLS on or off, or changing handshake_timeout,
// on a socket a reload keeps (the same listen address) is refused: those
// are set when the socket is opened (give the listener another address, or
// restart the proxy). Every other field applies to the next handshakes.
type TLSConfig struct {
	// CertFile is a PEM file holding a certificate chain, the leaf
	// first, and KeyFile its private key (PEM: PKCS #1, PKCS #8 or SEC
	// 1). Both or neither. The pair is the listener's default
	// certificate, the one a client gets whose server name (SNI) matches
	// none of Certificates, or that sends none. Relative paths are from
	// the proxy's working directory.
	CertFile string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	// Certificates are more pairs, picked by the client's server name:
	// crypto/tls takes the first pair (cert_file's, then these in
	// order) whose leaf the name matches (its DNS names, wildcards
	// included) and whose key the client can use, else the first pair.
	// At least one pair in all, here or in cert_file and key_file.
	Certificates []CertificateConfig `yaml:"certificates,omitempty" json:"certificates,omitempty"`
	// MinVersion is the lowest TLS version accepted: "1.2" (the default)
	// or "1.3". The highest is 1.3.
	MinVersion string `yaml:"min_version" json:"min_version"`
	// ALPN lists the application protocols offered (RFC 7301), the
	// listener's preferred first. Default in mode http ["h2",
	// "http/1.1"]: a client that offers h2 speaks HTTP/2 (RFC 9113 3.2),
	// each of its streams a request as an h2c client's are
	// (h2_max_concurrent_streams and h2_initial_window apply), and
	// others HTTP/1.1; ["http/1.1"] serves HTTP/1.1 alone. Mode http
	// takes only "h2" and "http/1.1". Default in mode tcp none: the
	// handshake chooses no protocol and the bytes go to the server as
	// they come. A client that offers protocols, none of them listed,
	// fails its handshake (crypto/tls lets one that offers http/1.1
	// through as if it had offered none); one that offers none is served
	// (mode http: HTTP/1.1). [] offers none.
	ALPN Tokens `yaml:"alpn,omitempty" json:"alpn,omitzero"`
	// HandshakeTimeout bounds a handshake, from the accept: a client
	// that has not completed its own by then is closed, and counted as
	// failed. Default 10s. Positive.
	HandshakeTimeout Duration `yaml:"handshake_timeout" json:"handshake_timeout"`
	// MaxHandshakes caps the listener's handshakes in progress, over
	// all loops (engine.ListenConfig.MaxHandshakes): a client that
	// connects while the listener holds that many is reset at once,
	// before a handshake, and counted
	// (spindle_proxy_listener_tls_handshakes_refused_total{listener},
	// and in spindle_proxy_engine_tls_handshakes_refused_total), so that
	// clients that connect and say nothing hold a bounded number of
	// goroutines and buffers for handshake_timeout. A handshake holds its
	// place from the accept until it succeeds, fails or times out.
	// Default 0: the engine's, 1024 a loop; -1: no cap. Set when the
	// socket opens, as handshake_timeout: a reload keeping the socket
	// cannot change it.
	MaxHandshakes int `yaml:"max_handshakes,omitempty" json:"max_handshakes,omitempty"`
}

// CertificateConfig is a certificate chain and its private key, PEM files
// (see TLSConfig.CertFile); both required.
type CertificateConfig struct {
	CertFile string `yaml:"cert_file" json:"cert_file"`
	KeyFile  string `yaml:"key_file" json:"key_file"`
}

// TLS versions (TLSConfig.MinVersion).
const (
	TLS12 = "1.2"
	TLS13 = "1.3"
)

// DefaultTLSHandshakeTimeout is TLSConfig.HandshakeTimeout's default, the
// engine's (engine.ListenConfig.HandshakeTimeout).
const DefaultTLSHandshakeTimeout = 10 * time.Second

// DefaultHTTPALPN is a mode http listener's default TLSConfig.ALPN.
var DefaultHTTPALPN = Tokens{"h2", "http/1.1"}

// h2CipherSuites are a listener's TLS 1.2 cipher suites where it offers
// h2: ECDHE with an AEAD, none of those RFC 9113 9.2.2 (Appendix A)
// prohibits, which crypto/tls's defaults include (ECDHE with CBC). A
// TLS 1.2 client with none of them fails its handshake, whatever protocol
// it asks for. (TLS 1.3's suites are all AEAD; crypto/tls does not let
// them be chosen.)
var h2CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// maxPEMFile bounds a certificate or key file: a chain is a few KiB.
const maxPEMFile = 1 << 20

// setDefaults fills in t's defaults for a listener in mode (nil: no TLS).
func (t *TLSConfig) setDefaults(mode string) {
	if t == nil {
		return
	}
	if t.MinVersion == "" {
		t.MinVersion = TLS12
	}
	setDuration(&t.HandshakeTimeout, DefaultTLSHandshakeTimeout)
	if t.ALPN == nil && mode == ModeHTTP {
		t.ALPN = slices.Clone(DefaultHTTPALPN)
	}
}

// serverConfig checks t (defaults filled in) for a listener in mode, reads
// its certificate files and returns the crypto/tls config of its
// handshakes. The error begins with the field's name ("tls.cert_file:").
// Any goroutine.
func (t *TLSConfig) serverConfig(mode string) (*tls.Config, error) {
	cfg := &tls.Config{MaxVersion: tls.VersionTLS13}
	var err error
	if cfg.MinVersion, err = minVersion(t.MinVersion); err != nil {
		return nil, err
	}
	if t.HandshakeTimeout <= 0 {
		return nil, fmt.Errorf("tls.handshake_timeout: %v is not positive", time.Duration(t.HandshakeTimeout))
	}
	if t.MaxHandshakes < -1 {
		return nil, fmt.Errorf("tls.max_handshakes: %d below -1", t.MaxHandshakes)
	}
	for i, p := range t.ALPN {
		where := fmt.Sprintf("tls.alpn[%d]", i)
		switch {
		case p == "":
			return nil, fmt.Errorf("%s: empty", where)
		case len(p) > 255:
			return nil, fmt.Errorf("%s: %q longer than 255 bytes", where, p)
		case slices.Contains(t.ALPN[:i], p):
			return nil, fmt.Errorf("%s: %q listed twice", where, p)
		case mode == ModeHTTP && p != "h2" && p != "http/1.1":
			return nil, fmt.Errorf("%s: %q is not served in mode %s (want \"h2\" or \"http/1.1\")", where, p, ModeHTTP)
		}
	}
	cfg.NextProtos = slices.Clone(t.ALPN)
	if slices.Contains(t.ALPN, "h2") {
		cfg.CipherSuites = h2CipherSuites
	}
	if t.CertFile != "" || t.KeyFile != "" {
		c, err := loadPair("tls", CertificateConfig{t.CertFile, t.KeyFile})
		if err != nil {
			return nil, err
		}
		cfg.Certificates = append(cfg.Certificates, c)
	}
	for i, pc := range t.Certificates {
		c, err := loadPair(fmt.Sprintf("tls.certificates[%d]", i), pc)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = append(cfg.Certificates, c)
	}
	if len(cfg.Certificates) == 0 {
		return nil, errors.New("tls: no certificate (cert_file and key_file, or certificates)")
	}
	return cfg, nil
}

// minVersion returns crypto/tls's version for a min_version (TLS12 or
// TLS13); the error begins with the field's name.
func minVersion(v string) (uint16, error) {
	switch v {
	case TLS12:
		return tls.VersionTLS12, nil
	case TLS13:
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("tls.min_version: unknown %q (want %q or %q)", v, TLS12, TLS13)
}

// loadPair reads a certificate pair; where names it in the error.
func loadPair(where string, pc CertificateConfig) (tls.Certificate, error) {
	switch {
	case pc.CertFile == "":
		return tls.Certificate{}, fmt.Errorf("%s.cert_file: missing", where)
	case pc.KeyFile == "":
		return tls.Certificate{}, fmt.Errorf("%s.key_file: missing", where)
	}
	certPEM, err := readPEM(pc.CertFile, func(typ string) bool { return typ == "CERTIFICATE" }, "no PEM CERTIFICATE block")
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s.cert_file: %w", where, err)
	}
	keyPEM, err := readPEM(pc.KeyFile, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") }, "no PEM private key block")
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s.key_file: %w", where, err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: cert_file %s, key_file %s: %w", where, pc.CertFile, pc.KeyFile, err)
	}
	return c, nil
}

// readPEM reads a PEM file of at most maxPEMFile bytes (a regular file:
// not a FIFO or device, which a read could wait on or never end) that
// has a block whose type is wanted, else says none (an error naming the
// file).
func readPEM(path string, wanted func(typ string) bool, none string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > maxPEMFile:
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	case len(b) > maxPEMFile:
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil, fmt.Errorf("%s: %s", path, none)
		}
		if wanted(blk.Type) {
			return b, nil
		}
	}
}

// RouteConfig sends the HTTP requests that match it to a pool.
type RouteConfig struct {
	// Name names the route in metrics and the access log; unique among
	// the listener's routes, and not "default" (the name of the
	// listener's pool, for requests no route matches). Default: the
	// host and path prefix ("api.example.com/v1/", "/static/"), or
	// "route<index>" where that is taken or longer than 128 bytes (a
	// name's bound).
	Name string `yaml:"name" json:"name"`
	// Host matches the request's host (the Host header, or the
	// authority of an absolute-form target) without its port and a
	// fully qualified name's final dot, case-insensitively: exactly, or with "*.example.com" any name
	// ending in ".example.com" (not example.com itself); an IPv6
	// address ("[::1]") as an address, however the request writes it
	// ("[0::1]"), and an IPv4 one in dotted decimal ("127.0.0.1") so
	// or as an IPv4-mapped IPv6 literal ("[::ffff:127.0.0.1]",
	// "[::ffff:7f00:1]"). An IPv4-mapped route host, and a name whose
	// last label is all digits but not such an address ("127.1",
	// "127.0.0.01": names to RFC 3986 that resolvers read as one address
	// or another), are refused. Empty: any host.
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
	// PathPrefix matches targets that begin with it, byte for byte (so
	// "/api" matches "/api/x" and "/apis"; write "/api/" for the
	// directory only) but for percent-encoding as RFC 3986 6.2.2 has it:
	// a percent-encoded unreserved character is the character ("/%61pi/"
	// matches "/api/", as a server reads it), other percent-encodings'
	// hex digits are of either case ("%2f" is "%2F", not "/"), and a run
	// of '/' is one ("//api/" matches "/api/", as nginx and Apache read
	// it); not otherwise decoded or normalized (a target whose path has
	// dot-segments gets 400, so "/api/../admin" does not match "/api/").
	// Default "/": every origin-form target (and the asterisk of
	// OPTIONS *).
	PathPrefix string `yaml:"path_prefix" json:"path_prefix"`
	// RateLimit limits the requests the route takes (after the
	// listener's own, if any): see RateLimitConfig. Default none.
	RateLimit *RateLimitConfig `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty"`
	// Pool is the name of the pool the route's requests go to; required.
	Pool string `yaml:"pool" json:"pool"`
	// RewritePrefix, when set, replaces the PathPrefix a request's
	// target begins with in the target sent upstream ("/api/" and "/"
	// send "/api/x?q" as "/x?q", "/api/" as "/"); the query is kept. It
	// begins with "/" and has no dot-segment or "//" (a backslash, %2F
	// and %5C count as "/"); one ending in a separator only with a
	// PathPrefix ending in "/" (else "/api" and "/" would send "/api/x"
	// as "//x", "/api./x" as "/./x"); none with a PathPrefix holding
	// '?' or '#'. OPTIONS * (or an absolute-form target's empty path) is
	// sent as it is. Default: the target as received.
	RewritePrefix string `yaml:"rewrite_prefix,omitempty" json:"rewrite_prefix,omitempty"`
	// HostRewrite, when set, is the Host (HTTP/1.1) or :authority
	// (HTTP/2) sent upstream in place of the request's, and the
	// authority of an absolute-form target; host [":" port].
	// X-Forwarded-Host keeps the request's. Default: the request's.
	HostRewrite string `yaml:"host_rewrite,omitempty" json:"host_rewrite,omitempty"`
	// RequestHeaders changes the fields of the route's requests sent
	// upstream, after the listener's (see HeaderRules). Default: none.
	RequestHeaders HeaderRules `yaml:"request_headers,omitempty" json:"request_headers,omitzero"`
	// ResponseHeaders changes the fields of the responses from upstream
	// to the route's requests, after the listener's. Default: none.
	ResponseHeaders HeaderRules `yaml:"response_headers,omitempty" json:"response_headers,omitzero"`

	// Retry replaces the listener's retry policy for the route's
	// requests: see RetryConfig. Default: the listener's.
	Retry *RetryConfig `yaml:"retry,omitempty" json:"retry,omitempty"`
}

// Balance names a way to pick a pool's server.
const (
	// RoundRobin takes the servers in turn, each as often as its weight
	// says: smooth weighted round-robin (nginx's), with each loop's own
	// state, so that a server of weight 5 beside two of weight 1 takes 5
	// of each 7 clients of a loop, never 5 in a row.
	RoundRobin = "round-robin"
	// LeastConn takes the server with the fewest connections open from
	// the loop that accepted the client for its weight (connections
	// divided by weight; ties in turn).
	LeastConn = "least-conn"
)

// ServerConfig is one server of a pool. In YAML it is either its address,
// a string "host:port", or a map {address: "host:port", weight: N,
// max_conns: N}. As JSON (/debug/config) and YAML (spindle proxy -check)
// it is written as the string where its weight is 1 and it has no
// max_conns of its own, as the map otherwise.
type ServerConfig struct {
	// Address is "host:port": an IP address, or a name resolved when the
	// proxy is made or reloaded.
	Address string `yaml:"address" json:"address"`
	// Weight is the server's share of the pool's new connections
	// against the other servers': 1 to MaxWeight, default 1. There is no
	// weight 0: remove the server instead.
	Weight int `yaml:"weight" json:"weight"`
	// MaxConns, when set, is the server's own connection cap, in place
	// of its pool's max_conns (0: none for this server). Nil: the
	// pool's.
	MaxConns *int `yaml:"max_conns,omitempty" json:"max_conns,omitempty"`
}

// MaxWeight is the largest server weight.
const MaxWeight = 256

// UnmarshalYAML takes a "host:port" string or an {address, weight} map,
// strictly: another key, a key twice or an explicit weight 0 is an error.
// Any goroutine.
func (s *ServerConfig) UnmarshalYAML(n *yaml.Node) error {
	n = unalias(n)
	switch n.Kind {
	case yaml.ScalarNode:
		*s = ServerConfig{Address: n.Value}
		return nil
	case yaml.MappingNode:
	default:
		return fmt.Errorf("line %d: want a server \"host:port\" or {address: \"host:port\", weight: N}", n.Line)
	}
	var v ServerConfig
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := unalias(n.Content[i]), unalias(n.Content[i+1])
		if seen[k.Value] {
			return fmt.Errorf("line %d: server field %q given twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		switch k.Value {
		case "address":
			if val.Kind != yaml.ScalarNode || val.Tag != "!!str" {
				return fmt.Errorf("line %d: server address: want a string \"host:port\"", val.Line)
			}
			v.Address = val.Value
		case "max_conns":
			m, err := strconv.Atoi(val.Value)
			if val.Kind != yaml.ScalarNode || val.Tag != "!!int" || err != nil || m < 0 {
				return fmt.Errorf("line %d: server max_conns: want a whole number, 0 or more", val.Line)
			}
			v.MaxConns = &m
		case "weight":
			w, err := strconv.Atoi(val.Value)
			if val.Kind != yaml.ScalarNode || val.Tag != "!!int" || err != nil {
				return fmt.Errorf("line %d: server weight: want a whole number from 1 to %d", val.Line, MaxWeight)
			}
			if w == 0 {
				return fmt.Errorf("line %d: server weight 0: remove the server instead", val.Line)
			}
			v.Weight = w
		default:
			return fmt.Errorf("line %d: server field %q unknown (want address, weight and max_conns)", k.Line, k.Value)
		}
	}
	if !seen["address"] {
		return fmt.Errorf("line %d: server without an address", n.Line)
	}
	*s = v
	return nil
}

// unalias returns the node an alias refers to, else n.
func unalias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// plain reports s written as its address alone: weight 1 (or 0, the
// default) and no max_conns of its own.
func (s ServerConfig) plain() bool { return (s.Weight == 1 || s.Weight == 0) && s.MaxConns == nil }

// serverMap is ServerConfig as a map, for MarshalYAML and MarshalJSON.
type serverMap struct {
	Address  string `yaml:"address" json:"address"`
	Weight   int    `yaml:"weight" json:"weight"`
	MaxConns *int   `yaml:"max_conns,omitempty" json:"max_conns,omitempty"`
}

// MarshalYAML writes s as its address where it is plain, else as the
// map. Any goroutine.
func (s ServerConfig) MarshalYAML() (any, error) {
	if s.plain() {
		return s.Address, nil
	}
	return serverMap(s), nil
}

// MarshalJSON writes s as MarshalYAML does. Any goroutine.
func (s ServerConfig) MarshalJSON() ([]byte, error) {
	if s.plain() {
		return json.Marshal(s.Address)
	}
	return json.Marshal(serverMap(s))
}

// Servers returns ServerConfigs of weight 1 for addresses. Any goroutine.
func Servers(addrs ...string) []ServerConfig {
	s := make([]ServerConfig, len(addrs))
	for i, a := range addrs {
		s[i] = ServerConfig{Address: a, Weight: 1}
	}
	return s
}

// PoolConfig is a set of upstream servers.
type PoolConfig struct {
	// Name is what listeners refer to; unique, required.
	Name string `yaml:"name" json:"name"`
	// Servers are the pool's servers, at least one, no duplicates: each
	// a "host:port" address, or {address: "host:port", weight: N} (see
	// ServerConfig). A
	// host name (localhost included) is resolved once, when the proxy is
	// made (New), to the first address it resolves to (whichever family
	// that is); a name that does not resolve is an error from New. The
	// data path never resolves: a name's later changes are not seen
	// until the proxy is made again or reloaded (Proxy.Reload resolves
	// every name again). The config (and -check) keeps the
	// name as given; metrics name the address.
	Servers []ServerConfig `yaml:"servers" json:"servers"`
	// Balance is RoundRobin (the default), LeastConn or Hash; all follow
	// the servers' weights.
	Balance string `yaml:"balance" json:"balance"`
	// Hash (balance hash) is the key and the table (see HashConfig).
	// Default {key: client, table_size: 65537, seed: 0}.
	Hash *HashConfig `yaml:"hash,omitempty" json:"hash,omitempty"`
	// Health turns on active health checks (TCP connects, or HTTP
	// requests). Without it every server counts as up (unless Passive
	// ejects it).
	Health *HealthConfig `yaml:"health" json:"health,omitempty"`
	// Passive turns on passive health: consecutive failed connects from
	// the data path (and with http_errors, failed HTTP exchanges) eject a
	// server for a cooldown. Without it failed connects are only counted. A server takes new connections only
	// while neither the active checks nor passive health mark it down.
	Passive *PassiveConfig `yaml:"passive,omitempty" json:"passive,omitempty"`
	// MaxIdle (mode http) is how many idle keep-alive connections each
	// loop keeps to each server for the next requests. Default 16; -1
	// keeps none (a connection per request). A reload that lowers it
	// closes the idle ones past it.
	MaxIdle int `yaml:"max_idle" json:"max_idle"`
	// IdleTimeout (mode http) closes an idle kept connection after this
	// long unused. Default 60s.
	IdleTimeout Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// Protocol (mode http) is what requests are sent to the servers
	// over: ProtocolHTTP1 ("http1", the default: HTTP/1.1 keep-alive
	// connections, a request at a time each), ProtocolH2C ("h2c":
	// HTTP/2 with prior knowledge, cleartext, many streams on each
	// connection; gRPC needs it) or ProtocolH2 ("h2": HTTP/2 over the
	// pool's tls, chosen by ALPN; the h2c fields apply to it as to h2c).
	// A pool with h2c or h2 takes no mode tcp listener.
	Protocol string `yaml:"protocol" json:"protocol"`
	// H2MaxConcurrentStreams (protocol h2c) bounds the streams in flight
	// on each upstream connection: the lower of it and the server's
	// SETTINGS_MAX_CONCURRENT_STREAMS (Envoy's max_concurrent_streams,
	// HAProxy's max-reuse per connection). Default 100.
	H2MaxConcurrentStreams int `yaml:"h2_max_concurrent_streams,omitempty" json:"h2_max_concurrent_streams,omitempty"`
	// H2MaxConnections (protocol h2c) bounds the connections each loop
	// opens to each server (Envoy's max_connections, per loop here): a
	// stream finding them all full waits for a stream to end, up to
	// the listener's response_timeout (then 504), which runs on once it
	// goes to the server: one from its arrival to the response head. A
	// connection that takes
	// no new stream, after the server's GOAWAY or retired for the early
	// resets sent on it, counts no more while its streams finish. Default
	// 4.
	H2MaxConnections int `yaml:"h2_max_connections,omitempty" json:"h2_max_connections,omitempty"`
	// H2PingInterval (protocol h2c) sends a PING on an upstream
	// connection that has received nothing for this long, idle or
	// carrying streams (Envoy's connection_keepalive.interval, Go's
	// ReadIdleTimeout); 0, the default, sends none. A gRPC server's
	// keepalive policy (grpc-go: a PING more often than every 5 minutes
	// with streams open, every 2 hours without, unless it permits more)
	// answers too many with GOAWAY ENHANCE_YOUR_CALM: set it to what the
	// servers permit.
	H2PingInterval Duration `yaml:"h2_ping_interval,omitempty" json:"h2_ping_interval,omitempty"`
	// H2PingTimeout (protocol h2c) is how long a PING's ACK may take:
	// a connection without it is dead, closed at once (no GOAWAY) with
	// its streams. Default 15s.
	H2PingTimeout Duration `yaml:"h2_ping_timeout,omitempty" json:"h2_ping_timeout,omitempty"`
	// MaxConns (protocol http1) caps the connections the proxy has open
	// to each server of the pool, over all loops: connecting, in use
	// and idle kept-alive ones alike (HAProxy's server maxconn, Envoy's
	// max_connections). A server at its cap is skipped for another of
	// the pool with room; where every server up is at its cap, the
	// client (mode tcp) or request (mode http) waits in the pool's queue
	// for a slot. A server's own max_conns replaces it. Default 0: no
	// cap. Not with protocol h2c (h2_max_connections bounds its
	// connections, per loop).
	MaxConns int `yaml:"max_conns,omitempty" json:"max_conns,omitempty"`
	// MaxQueue (with a max_conns) bounds the pool's queue, over all
	// loops: a client or request finding it full is refused at once
	// (mode http: 503, logged UO). Default 1024 (Envoy's
	// max_pending_requests); -1: no bound.
	MaxQueue int `yaml:"max_queue,omitempty" json:"max_queue,omitempty"`
	// QueueTimeout (with a max_conns) bounds the wait in the queue
	// (HAProxy's timeout queue): past it the request gets 503 (logged
	// SQ), a mode tcp client is closed. The wait is not in the
	// listener's connect_timeout or response_timeout, which start after
	// it. Default 5s.
	QueueTimeout Duration `yaml:"queue_timeout,omitempty" json:"queue_timeout,omitempty"`
	// TLS, when set, makes the connections to the pool's servers TLS
	// (health checks included): see UpstreamTLSConfig. Required by
	// protocol h2, refused with h2c. Default none: plain TCP.
	TLS *UpstreamTLSConfig `yaml:"tls,omitempty" json:"tls,omitempty"`
}

// Defaults of a pool's queue (with max_conns).
const (
	DefaultMaxQueue     = 1024
	DefaultQueueTimeout = 5 * time.Second
)

// serverMaxConns is server j's connection cap: its own max_conns, else
// the pool's; 0 for none.
func (p *PoolConfig) serverMaxConns(j int) int {
	if m := p.Servers[j].MaxConns; m != nil {
		return *m
	}
	return p.MaxConns
}

// capped reports whether a server of p has a connection cap.
func (p *PoolConfig) capped() bool {
	for j := range p.Servers {
		if p.serverMaxConns(j) > 0 {
			return true
		}
	}
	return false
}

// Pool protocols (PoolConfig.Protocol).
const (
	ProtocolHTTP1 = "http1"
	ProtocolH2C   = "h2c"
	// ProtocolH2 is HTTP/2 over TLS (the pool's tls, ALPN "h2"): as h2c
	// in all else.
	ProtocolH2 = "h2"
)

// isH2 reports whether p sends requests over HTTP/2 (protocol h2c or h2).
func (p *PoolConfig) isH2() bool { return p.Protocol == ProtocolH2C || p.Protocol == ProtocolH2 }

// Defaults of an h2c pool.
const (
	DefaultPoolH2MaxConcurrentStreams = 100
	DefaultPoolH2MaxConnections       = 4
	DefaultPoolH2PingTimeout          = 15 * time.Second
)

// PassiveConfig configures a pool's passive health: Fails consecutive
// failed connects to a server (refused or timed out, from any loop), or
// HTTPErrors consecutive failed HTTP exchanges with it, eject it for a
// cooldown; after the cooldown it takes connections again, and its next
// connect (or exchange) decides: a success clears the count, a failure
// ejects it for longer (Cooldown times the ejections in a row, up to
// MaxCooldown). Fails and Cooldown are required.
type PassiveConfig struct {
	// Fails is the number of consecutive failed connects that eject a
	// server; at least 1.
	Fails int `yaml:"fails" json:"fails"`
	// Cooldown is how long an ejected server gets no new connections the
	// first time; positive. A server ejected again without a success in
	// between is ejected for Cooldown times the number of its ejections
	// in a row (2x, 3x, ...), up to MaxCooldown, as Envoy's
	// base_ejection_time; its first success after an ejection brings it
	// back to Cooldown.
	Cooldown Duration `yaml:"cooldown" json:"cooldown"`
	// HTTPErrors (pools of mode http listeners) is the number of
	// consecutive failed HTTP exchanges with a server that eject it, as
	// Envoy's outlier detection (consecutive_5xx) and HAProxy's observe
	// layer7 with error-limit do: a response with a status
	// HTTPErrorStatuses lists, a server that does not answer within
	// response_timeout once the whole request reached it (not one that
	// had less of it, the request having waited for room at an h2c
	// server: a stream to end, or h2_response_hold), one that closes
	// or resets its connection before a complete response head, or a
	// response head the proxy refuses whatever the request (malformed, a
	// 101 unasked, 1xx past 16): the exchanges the access log shows with
	// such a status from upstream, ST, SD before a response and PH, but for
	// a chunked response to HTTP/1.0 (the client's version's doing), which
	// neither counts nor clears the count. In an h2c pool a server's
	// RST_STREAM before the head (SR) counts too, but for CANCEL and
	// NO_ERROR (a server ending a stream on purpose, as gRPC's deadlines
	// do), which neither count nor clear the count. Any other response clears it; a
	// request retried on a new connection (a stale kept-alive one closed
	// under it) counts once, by how the retry ends. What happens after a
	// response head (a body cut short) is not counted. The count is apart
	// from Fails'. Default 0: HTTP exchanges are not watched. A pool that
	// no mode http listener or route uses cannot have it.
	HTTPErrors int `yaml:"http_errors,omitempty" json:"http_errors,omitempty"`
	// HTTPErrorStatuses (with HTTPErrors) lists the response statuses
	// that count as failed exchanges: codes and ranges from 500 to 599,
	// comma-separated ("500-599", "502-504"). Default
	// "500,502-504,506-599": every 5xx as Envoy's consecutive_5xx but 501
	// and 505, which answer the request's method and version (a client's
	// choice: counting them would let any client eject the servers by
	// sending an unknown method).
	HTTPErrorStatuses string `yaml:"http_error_statuses,omitempty" json:"http_error_statuses,omitempty"`
	// MaxCooldown bounds an ejection's length as it grows with repeated
	// ejections; at least Cooldown. Default: 10 times Cooldown where
	// HTTPErrors is set, else Cooldown (every ejection lasts Cooldown,
	// as before HTTPErrors existed).
	MaxCooldown Duration `yaml:"max_cooldown,omitempty" json:"max_cooldown,omitempty"`
	// MaxEjectedPercent bounds the share of the pool's servers out at
	// once, from 0 to 100, that passive health ejects to: servers it has
	// ejected and servers the active checks hold down count alike, and an
	// ejection that would pass the bound is not made (and counted, each
	// time). The bound is the servers' number times the percent over 100,
	// rounded down, but at least 1 and, below 100, at most all servers but
	// one: below 100 passive health never ejects the last server up (the
	// checks may still take it down), and at any percent above 0 it can
	// eject one server of a pool the checks hold none of down (Envoy's
	// rule; Envoy counts ejected hosts only, its panic threshold covering
	// the rest). 0 ejects none: passive health only counts (to watch what
	// it would do). Default 100: no bound.
	MaxEjectedPercent *int `yaml:"max_ejected_percent,omitempty" json:"max_ejected_percent,omitempty"`
}

// DefaultMaxEjectedPercent is PassiveConfig.MaxEjectedPercent's default.
const DefaultMaxEjectedPercent = 100

// DefaultHTTPErrorStatuses is PassiveConfig.HTTPErrorStatuses' default.
const DefaultHTTPErrorStatuses = "500,502-504,506-599"

// maxCooldownFactor is MaxCooldown's default, in cooldowns, where
// HTTPErrors is set.
const maxCooldownFactor = 10

// Health check types.
const (
	// HealthTCP checks a server with a TCP connect.
	HealthTCP = "tcp"
	// HealthHTTP checks a server with an HTTP/1.1 GET: it passes on a
	// response whose status Expect lists.
	HealthHTTP = "http"
)

// HealthConfig configures a pool's active health checks.
type HealthConfig struct {
	// Type is HealthTCP (the default) or HealthHTTP. An HTTP check
	// connects, sends "GET <path> HTTP/1.1" with Host, "Connection:
	// close" and "User-Agent: spindle-health", and reads the response's
	// head (up to 16 KiB; the body is not read); it passes on a status
	// Expect lists. The timeout covers the connect and the response. An
	// h2c pool's check speaks HTTP/2 with prior knowledge: the GET as a
	// stream, with :authority host and the user-agent.
	Type string `yaml:"type" json:"type"`
	// Path (type http) is the request's target: an origin-form path,
	// beginning with "/". Default "/".
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// Host (type http) is the request's Host: a name or address with an
	// optional port. Default: the server's address as configured
	// ("app1.internal:8080", "10.0.0.1:80").
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
	// Expect (type http) lists the statuses that pass: codes and ranges
	// separated by commas ("200", "200-399", "200,204,300-302"), each
	// from 100 to 599. Default "200-399".
	Expect string `yaml:"expect,omitempty" json:"expect,omitempty"`
	// Interval is the time between checks of a server, on average:
	// each wait is varied at random by up to 5 % either way, and the
	// pool's servers have their first checks spread over an interval
	// (doc.go). Default 2s, minimum 10ms.
	Interval Duration `yaml:"interval" json:"interval"`
	// Timeout bounds one check: its connect (and with type http, the
	// response's head). Default 1s, at most Interval.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Rise is the number of consecutive passed checks that mark a down
	// server up. Default 2.
	Rise int `yaml:"rise" json:"rise"`
	// Fall is the number of consecutive failed checks that mark an up
	// server down. Default 3.
	Fall int `yaml:"fall" json:"fall"`
}

// AdminConfig configures the admin HTTP server.
type AdminConfig struct {
	// Listen is the admin server's "host:port". Default "": no admin
	// server.
	Listen string `yaml:"listen" json:"listen,omitempty"`
}

// Duration is a time.Duration written in a config as a Go duration string
// ("1.5s", "300ms").
type Duration time.Duration

// Prefixes is a list of networks, read from YAML as CIDR strings with
// errors that name the line.
type Prefixes []netip.Prefix

// UnmarshalYAML reads a list of CIDRs ("10.0.0.0/8", "fd00::/8").
func (ps *Prefixes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: trusted_proxies: want a list of networks such as [\"10.0.0.0/8\"]", n.Line)
	}
	out := make(Prefixes, 0, len(n.Content))
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: trusted_proxies: want a network such as \"10.0.0.0/8\"", e.Line)
		}
		p, err := netip.ParsePrefix(e.Value)
		if err != nil {
			why := ""
			if !strings.Contains(e.Value, "/") {
				why = " (no '/')"
			}
			return fmt.Errorf("line %d: trusted_proxies: %q is not a network such as \"10.0.0.0/8\"%s", e.Line, e.Value, why)
		}
		out = append(out, p)
	}
	*ps = out
	return nil
}

// UnmarshalYAML takes a Go duration string. Any goroutine.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, why := durationOf(n)
	if why != "" {
		return fmt.Errorf("line %d: %s", n.Line, why)
	}
	*d = Duration(v)
	return nil
}

// durationOf returns the duration node n holds, or why it holds none
// (for an error that names n's line, and where scalars checks it, its
// field).
func durationOf(n *yaml.Node) (time.Duration, string) {
	if n.Kind != yaml.ScalarNode {
		return 0, "want a duration such as \"5s\""
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Sprintf("%q is not a duration such as \"5s\" or \"250ms\"", n.Value)
	}
	return v, ""
}

// MarshalYAML writes d as a Go duration string. Any goroutine.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes d as a Go duration string. Any goroutine.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Defaults.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultWriteTimeout   = 60 * time.Second
	DefaultCloseTimeout   = 30 * time.Second
	DefaultHealthInterval = 2 * time.Second
	DefaultHealthTimeout  = time.Second
	DefaultRise           = 2
	DefaultFall           = 3
	DefaultHealthPath     = "/"
	DefaultHealthExpect   = "200-399"

	DefaultRequestTimeout   = 30 * time.Second
	DefaultResponseTimeout  = 60 * time.Second
	DefaultKeepaliveTimeout = 60 * time.Second
	DefaultMaxIdle          = 16
	DefaultPoolIdleTimeout  = 60 * time.Second
)

// LoadConfig reads and parses the config file at path. Any goroutine.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a YAML config strictly (an unknown field is an
// error, and so is a number with a fraction where a whole one is
// wanted; a value of the wrong kind is named by its field and line),
// fills in the defaults and validates it. Any goroutine.
func ParseConfig(data []byte) (*Config, error) {
	// The values are checked first, so that the field of a wrong one is
	// named (the decoder's errors name its line only).
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := scalars(&doc, reflect.TypeFor[Config](), ""); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config is empty")
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: more than one YAML document")
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// scalars checks the values in node n that the type decoded from it, t,
// takes as scalars, naming the field (key) and line of a wrong one, which
// the decoder's errors do not name: a duration (Duration), a whole number
// within its type's range, true or false, a string. It refuses a number
// with a fraction ("0.5") where t has an integer: yaml.v3 decodes a float
// into an int truncated, so that max_conns: 0.5 or max_request_body: 0.9
// would be 0, no bound at all; a whole number written as a float ("1e3")
// is that number. Types that decode themselves (UnmarshalYAML) check
// their own; an empty value (null) is the field's zero, as the decoder
// has it.
func scalars(n *yaml.Node, t reflect.Type, key string) error {
	n = unalias(n)
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			if err := scalars(c, t, key); err != nil {
				return err
			}
		}
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if t == reflect.TypeFor[Duration]() {
		if _, why := durationOf(n); why != "" {
			return fmt.Errorf("line %d: %s: %s", n.Line, key, why)
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a whole number", n.Line, key)
		}
		if n.ShortTag() == "!!float" {
			if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
				return fmt.Errorf("line %d: %s: %s is not a whole number", n.Line, key, n.Value)
			}
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			lo, hi := "0", strconv.FormatUint(math.MaxUint64>>(64-t.Bits()), 10)
			if t.Kind() <= reflect.Int64 {
				lo, hi = strconv.FormatInt(math.MinInt64>>(64-t.Bits()), 10), strconv.FormatInt(math.MaxInt64>>(64-t.Bits()), 10)
			}
			return fmt.Errorf("line %d: %s: %q is not a whole number from %s to %s", n.Line, key, n.Value, lo, hi)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want true or false", n.Line, key)
		}
		if n.Decode(new(bool)) != nil {
			return fmt.Errorf("line %d: %s: %q is not true or false", n.Line, key, n.Value)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a string", n.Line, key)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if err := scalars(c, t.Elem(), key); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := scalars(n.Content[i+1], t.Elem(), unalias(n.Content[i]).Value); err != nil {
					return err
				}
			}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := unalias(n.Content[i]).Value, n.Content[i+1]
			if k == "<<" {
				// A merge key: its map (or each of a list of maps) is
				// this struct's too.
				vs := []*yaml.Node{v}
				if u := unalias(v); u.Kind == yaml.SequenceNode {
					vs = u.Content
				}
				for _, m := range vs {
					if err := scalars(m, t, key); err != nil {
						return err
					}
				}
				continue
			}
			for j := range t.NumField() {
				f := t.Field(j)
				if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name == k {
					if err := scalars(v, f.Type, k); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	return nil
}

// SetDefaults fills in every zero field that has a default. Any goroutine.
func (c *Config) SetDefaults() {
	if c.Engine.Backend == "" {
		c.Engine.Backend = string(engine.BackendURing)
	}
	if c.Engine.WriteHighWater == 0 {
		c.Engine.WriteHighWater = engine.DefaultWriteHighWater
	}
	setDuration(&c.Engine.WriteTimeout, DefaultWriteTimeout)
	setDuration(&c.Engine.CloseTimeout, DefaultCloseTimeout)
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.ConnectTimeout == 0 {
			l.ConnectTimeout = Duration(DefaultConnectTimeout)
		}
		if l.Mode == "" {
			l.Mode = ModeTCP
		}
		if a := l.AccessLog; a != nil && a.Format == "" {
			a.Format = AccessLogJSON
		}
		l.TLS.setDefaults(l.Mode)
		l.setRateDefaults()
		l.setRetryDefaults()
		if l.Mode != ModeHTTP {
			continue
		}
		setDuration(&l.RequestTimeout, DefaultRequestTimeout)
		setDuration(&l.ResponseTimeout, DefaultResponseTimeout)
		setDuration(&l.KeepaliveTimeout, DefaultKeepaliveTimeout)
		if l.servesH2() {
			if l.H2MaxConcurrentStreams == 0 {
				l.H2MaxConcurrentStreams = DefaultH2MaxConcurrentStreams
			}
			if l.H2InitialWindow == 0 {
				l.H2InitialWindow = DefaultH2InitialWindow
			}
			if l.H2ResponseHold == 0 {
				// After h2_max_concurrent_streams' default: no stream waits.
				l.H2ResponseHold = min(int64(l.H2MaxConcurrentStreams)*upH2Window, 1<<31-1)
			}
		}
		if l.Upgrades == nil {
			l.Upgrades = slices.Clone(DefaultUpgrades)
		}
		if l.HeadersWithUnderscores == "" {
			l.HeadersWithUnderscores = UnderscoresAllow
		}
		for j := range l.Routes {
			if l.Routes[j].PathPrefix == "" {
				l.Routes[j].PathPrefix = "/"
			}
		}
		nameRoutes(l.Routes)
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		if p.Balance == "" {
			p.Balance = RoundRobin
		}
		if p.Balance == Hash {
			if p.Hash == nil {
				p.Hash = &HashConfig{}
			}
			p.Hash.setDefaults()
		}
		if p.MaxIdle == 0 {
			p.MaxIdle = DefaultMaxIdle
		}
		setDuration(&p.IdleTimeout, DefaultPoolIdleTimeout)
		if p.Protocol == "" {
			p.Protocol = ProtocolHTTP1
		}
		if p.isH2() {
			if p.H2MaxConcurrentStreams == 0 {
				p.H2MaxConcurrentStreams = DefaultPoolH2MaxConcurrentStreams
			}
			if p.H2MaxConnections == 0 {
				p.H2MaxConnections = DefaultPoolH2MaxConnections
			}
			setDuration(&p.H2PingTimeout, DefaultPoolH2PingTimeout)
		}
		p.TLS.setDefaults()
		for j := range p.Servers {
			if p.Servers[j].Weight == 0 {
				p.Servers[j].Weight = 1
			}
		}
		if p.capped() {
			if p.MaxQueue == 0 {
				p.MaxQueue = DefaultMaxQueue
			}
			setDuration(&p.QueueTimeout, DefaultQueueTimeout)
		}
		if ps := p.Passive; ps != nil {
			if ps.MaxCooldown == 0 {
				ps.MaxCooldown = ps.Cooldown
				if ps.HTTPErrors > 0 {
					ps.MaxCooldown = Duration(math.MaxInt64) // (saturated)
					if ps.Cooldown <= math.MaxInt64/maxCooldownFactor {
						ps.MaxCooldown = ps.Cooldown * maxCooldownFactor
					}
				}
			}
			if ps.MaxEjectedPercent == nil {
				ps.MaxEjectedPercent = new(DefaultMaxEjectedPercent)
			}
			if ps.HTTPErrors > 0 && ps.HTTPErrorStatuses == "" {
				ps.HTTPErrorStatuses = DefaultHTTPErrorStatuses
			}
		}
		if h := p.Health; h != nil {
			if h.Type == "" {
				h.Type = HealthTCP
			}
			if h.Type == HealthHTTP {
				if h.Path == "" {
					h.Path = DefaultHealthPath
				}
				if h.Expect == "" {
					h.Expect = DefaultHealthExpect
				}
			}
			if h.Interval == 0 {
				h.Interval = Duration(DefaultHealthInterval)
			}
			if h.Timeout == 0 {
				h.Timeout = Duration(min(DefaultHealthTimeout, time.Duration(h.Interval)))
			}
			if h.Rise == 0 {
				h.Rise = DefaultRise
			}
			if h.Fall == 0 {
				h.Fall = DefaultFall
			}
		}
	}
}

// setDuration sets *d to def if it is zero.
func setDuration(d *Duration, def time.Duration) {
	if *d == 0 {
		*d = Duration(def)
	}
}

// Validate reports the first problem of c (after SetDefaults), naming the
// field and its index. Any goroutine.
func (c *Config) Validate() error {
	if !slices.Contains(engine.Backends, engine.Backend(c.Engine.Backend)) {
		return fmt.Errorf("engine.backend: unknown backend %q (want one of %v)", c.Engine.Backend, engine.Backends)
	}
	for i, cpu := range c.Engine.CPUs {
		if cpu < 0 {
			return fmt.Errorf("engine.cpus[%d]: negative CPU %d", i, cpu)
		}
		if slices.Contains(c.Engine.CPUs[:i], cpu) {
			return fmt.Errorf("engine.cpus[%d]: CPU %d given twice", i, cpu)
		}
	}
	if c.Engine.WriteHighWater < 4096 {
		return fmt.Errorf("engine.write_high_water: %d below 4096", c.Engine.WriteHighWater)
	}
	if c.Engine.WriteTimeout <= 0 {
		return fmt.Errorf("engine.write_timeout: %v is not positive", time.Duration(c.Engine.WriteTimeout))
	}
	if c.Engine.CloseTimeout <= 0 {
		return fmt.Errorf("engine.close_timeout: %v is not positive", time.Duration(c.Engine.CloseTimeout))
	}
	if len(c.Pools) == 0 {
		return errors.New("pools: none defined")
	}
	pools := map[string]bool{}
	for i, p := range c.Pools {
		where := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" {
			return fmt.Errorf("%s.name: missing", where)
		}
		where = fmt.Sprintf("pools[%d] (%s)", i, p.Name)
		if pools[p.Name] {
			return fmt.Errorf("%s.name: pool %q defined twice", where, p.Name)
		}
		pools[p.Name] = true
		if len(p.Servers) == 0 {
			return fmt.Errorf("%s.servers: none listed", where)
		}
		seen := map[string]bool{}
		for j, sc := range p.Servers {
			s := sc.Address
			host, ap, err := serverAddr(s)
			if err != nil {
				return fmt.Errorf("%s.servers[%d]: %w", where, j, err)
			}
			if sc.Weight < 1 || sc.Weight > MaxWeight {
				return fmt.Errorf("%s.servers[%d].weight: %d not from 1 to %d", where, j, sc.Weight, MaxWeight)
			}
			// An IPv4-mapped IPv6 address is its IPv4 address on the wire;
			// names are compared as names here (New checks what they
			// resolve to).
			key := strings.ToLower(net.JoinHostPort(host, strconv.Itoa(int(ap.Port()))))
			if ap.Addr().IsValid() {
				key = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
			}
			if seen[key] {
				return fmt.Errorf("%s.servers[%d]: %q listed twice", where, j, s)
			}
			seen[key] = true
			if m := sc.MaxConns; m != nil && *m < 0 {
				return fmt.Errorf("%s.servers[%d].max_conns: negative %d", where, j, *m)
			}
		}
		if err := p.validateQueue(); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
		if p.Balance != RoundRobin && p.Balance != LeastConn && p.Balance != Hash {
			return fmt.Errorf("%s.balance: unknown %q (want %q, %q or %q)", where, p.Balance, RoundRobin, LeastConn, Hash)
		}
		if h := p.Health; h != nil {
			switch {
			case time.Duration(h.Interval) < 10*time.Millisecond:
				return fmt.Errorf("%s.health.interval: %v below 10ms", where, time.Duration(h.Interval))
			case h.Timeout <= 0:
				return fmt.Errorf("%s.health.timeout: %v is not positive", where, time.Duration(h.Timeout))
			case h.Timeout > h.Interval:
				return fmt.Errorf("%s.health.timeout: %v longer than the interval %v", where, time.Duration(h.Timeout), time.Duration(h.Interval))
			case h.Rise < 1:
				return fmt.Errorf("%s.health.rise: %d below 1", where, h.Rise)
			case h.Fall < 1:
				return fmt.Errorf("%s.health.fall: %d below 1", where, h.Fall)
			}
			if err := h.validateType(p.Servers); err != nil {
				return fmt.Errorf("%s.health.%w", where, err)
			}
		}
		if p.MaxIdle < -1 {
			return fmt.Errorf("%s.max_idle: %d below -1", where, p.MaxIdle)
		}
		if p.IdleTimeout <= 0 {
			return fmt.Errorf("%s.idle_timeout: %v is not positive", where, time.Duration(p.IdleTimeout))
		}
		if err := p.validateProtocol(); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
		if _, err := p.clientConfigs(); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
		if ps := p.Passive; ps != nil {
			if ps.Fails < 1 {
				return fmt.Errorf("%s.passive.fails: %d below 1", where, ps.Fails)
			}
			if ps.Cooldown <= 0 {
				return fmt.Errorf("%s.passive.cooldown: %v is not positive", where, time.Duration(ps.Cooldown))
			}
			if ps.HTTPErrors < 0 {
				return fmt.Errorf("%s.passive.http_errors: negative %d", where, ps.HTTPErrors)
			}
			if ps.HTTPErrorStatuses != "" {
				if ps.HTTPErrors == 0 {
					return fmt.Errorf("%s.passive.http_error_statuses: only with http_errors", where)
				}
				if _, err := errorStatuses(ps.HTTPErrorStatuses); err != nil {
					return fmt.Errorf("%s.passive.http_error_statuses: %w", where, err)
				}
			}
			if ps.MaxCooldown < ps.Cooldown {
				return fmt.Errorf("%s.passive.max_cooldown: %v below the cooldown %v", where, time.Duration(ps.MaxCooldown), time.Duration(ps.Cooldown))
			}
			if pct := ps.MaxEjectedPercent; pct != nil && (*pct < 0 || *pct > 100) {
				return fmt.Errorf("%s.passive.max_ejected_percent: %d not from 0 to 100", where, *pct)
			}
		}
	}
	if len(c.Listeners) == 0 {
		return errors.New("listeners: none defined")
	}
	names := map[string]bool{}
	addrs := map[netip.AddrPort]string{}
	for i, l := range c.Listeners {
		where := fmt.Sprintf("listeners[%d]", i)
		if l.Name == "" {
			return fmt.Errorf("%s.name: missing", where)
		}
		where = fmt.Sprintf("listeners[%d] (%s)", i, l.Name)
		if names[l.Name] {
			return fmt.Errorf("%s.name: listener %q defined twice", where, l.Name)
		}
		names[l.Name] = true
		ap, err := listenAddr(l.Listen)
		if err != nil {
			return fmt.Errorf("%s.listen: %w", where, err)
		}
		if name := overlaps(addrs, ap); name != "" {
			return fmt.Errorf("%s.listen: %q overlaps listener %q", where, l.Listen, name)
		}
		if ap.Port() != 0 {
			addrs[ap] = l.Name
		}
		if l.Pool == "" {
			return fmt.Errorf("%s.pool: missing", where)
		}
		if !pools[l.Pool] {
			return fmt.Errorf("%s.pool: no pool named %q", where, l.Pool)
		}
		if l.ConnectTimeout <= 0 {
			return fmt.Errorf("%s.connect_timeout: %v is not positive", where, time.Duration(l.ConnectTimeout))
		}
		if l.IdleTimeout < 0 {
			return fmt.Errorf("%s.idle_timeout: negative %v", where, time.Duration(l.IdleTimeout))
		}
		if l.MaxConns < 0 {
			return fmt.Errorf("%s.max_conns: negative %d", where, l.MaxConns)
		}
		if err := l.validateMode(pools); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
		if t := l.TLS; t != nil {
			if _, err := t.serverConfig(l.Mode); err != nil {
				return fmt.Errorf("%s.%w", where, err)
			}
		}
		if err := l.AccessLog.validate(); err != nil {
			return fmt.Errorf("%s.access_log.%w", where, err)
		}
		if err := l.validateRateLimits(); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
	}
	if err := c.validateHTTPErrors(); err != nil {
		return err
	}
	if err := c.validateH2CPools(); err != nil {
		return err
	}
	if err := c.validateHash(); err != nil {
		return err
	}
	if err := c.validateRetries(); err != nil {
		return err
	}
	if a := c.Admin.Listen; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("admin.listen: %q is not host:port", a)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("admin.listen: %q: port %q is not a number from 0 to 65535", a, port)
		}
		// (A host name is left to net.Listen to resolve.)
		if ap, err := listenAddr(a); err == nil {
			if name := overlaps(addrs, ap); name != "" {
				return fmt.Errorf("admin.listen: %q overlaps listener %q", a, name)
			}
		}
	}
	return nil
}

// validateHTTPErrors refuses passive.http_errors on a pool that no mode
// http listener sends requests to (as its pool or a route's): it would
// count nothing.
func (c *Config) validateHTTPErrors() error {
	httpPools := map[string]bool{}
	for _, l := range c.Listeners {
		if l.Mode != ModeHTTP {
			continue
		}
		httpPools[l.Pool] = true
		for _, r := range l.Routes {
			httpPools[r.Pool] = true
		}
	}
	for i, p := range c.Pools {
		if ps := p.Passive; ps != nil && ps.HTTPErrors > 0 && !httpPools[p.Name] {
			return fmt.Errorf("pools[%d] (%s).passive.http_errors: no mode %s listener uses the pool (it counts HTTP exchanges)", i, p.Name, ModeHTTP)
		}
	}
	return nil
}

// validateQueue checks p's max_conns, max_queue and queue_timeout; the
// error begins with the field's name.
func (p *PoolConfig) validateQueue() error {
	switch {
	case p.MaxConns < 0:
		return fmt.Errorf("max_conns: negative %d", p.MaxConns)
	case p.isH2() && (p.MaxConns != 0 || slices.ContainsFunc(p.Servers, func(s ServerConfig) bool { return s.MaxConns != nil })):
		return fmt.Errorf("max_conns: not with protocol %s (h2_max_connections bounds its connections, per server and loop)", p.Protocol)
	case !p.capped():
		if p.MaxQueue != 0 || p.QueueTimeout != 0 {
			return errors.New("max_queue, queue_timeout: only with a max_conns (of the pool or a server)")
		}
		return nil
	case p.MaxQueue < -1:
		return fmt.Errorf("max_queue: %d below -1", p.MaxQueue)
	case p.MaxQueue == 0:
		return errors.New("max_queue: 0 (give -1 for no bound)")
	case p.QueueTimeout <= 0:
		return fmt.Errorf("queue_timeout: %v is not positive", time.Duration(p.QueueTimeout))
	}
	return nil
}

// validateProtocol checks p's protocol and the fields that belong to it;
// the error begins with the field's name.
func (p *PoolConfig) validateProtocol() error {
	switch p.Protocol {
	case ProtocolHTTP1:
		if p.H2MaxConcurrentStreams != 0 || p.H2MaxConnections != 0 {
			return fmt.Errorf("h2_max_concurrent_streams, h2_max_connections: only with protocol %s or %s", ProtocolH2C, ProtocolH2)
		}
		if p.H2PingInterval != 0 || p.H2PingTimeout != 0 {
			return fmt.Errorf("h2_ping_interval, h2_ping_timeout: only with protocol %s or %s", ProtocolH2C, ProtocolH2)
		}
		return nil
	case ProtocolH2C:
		if p.TLS != nil {
			return fmt.Errorf("tls: not with protocol %s, HTTP/2 over cleartext (protocol %s is HTTP/2 over TLS)", ProtocolH2C, ProtocolH2)
		}
	case ProtocolH2:
		if p.TLS == nil {
			return fmt.Errorf("protocol: %s is HTTP/2 over TLS and needs tls (protocol %s is HTTP/2 over cleartext)", ProtocolH2, ProtocolH2C)
		}
	default:
		return fmt.Errorf("protocol: unknown %q (want %q, %q or %q)", p.Protocol, ProtocolHTTP1, ProtocolH2C, ProtocolH2)
	}
	if n := p.H2MaxConcurrentStreams; n < 1 || n > 1<<31-1 {
		return fmt.Errorf("h2_max_concurrent_streams: %d is not from 1 to 2147483647", n)
	}
	if n := p.H2MaxConnections; n < 1 || n > 1<<16 {
		return fmt.Errorf("h2_max_connections: %d is not from 1 to 65536", n)
	}
	if d := p.H2PingInterval; d < 0 {
		return fmt.Errorf("h2_ping_interval: negative %v", time.Duration(d))
	}
	if d := p.H2PingTimeout; d <= 0 {
		return fmt.Errorf("h2_ping_timeout: %v is not positive", time.Duration(d))
	}
	return nil
}

// validateH2CPools refuses an h2c or h2 pool as a mode tcp listener's: an L4
// tunnel carries the client's bytes, whatever protocol they are.
func (c *Config) validateH2CPools() error {
	h2c := map[string]string{} // pool: its HTTP/2 protocol
	for _, p := range c.Pools {
		if p.isH2() {
			h2c[p.Name] = p.Protocol
		}
	}
	for i, l := range c.Listeners {
		if proto := h2c[l.Pool]; l.Mode == ModeTCP && proto != "" {
			return fmt.Errorf("listeners[%d] (%s).pool: pool %q has protocol %s, which a mode %s listener cannot send to (it passes bytes, not requests)", i, l.Name, l.Pool, proto, ModeTCP)
		}
	}
	return nil
}

// validateMode checks l's mode and the fields that belong to it; the error
// begins with the field's name.
func (l *ListenerConfig) validateMode(pools map[string]bool) error {
	switch l.Mode {
	case ModeTCP:
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"routes", len(l.Routes) > 0},
			{"request_headers", !l.RequestHeaders.IsZero()},
			{"response_headers", !l.ResponseHeaders.IsZero()},
			{"request_timeout", l.RequestTimeout != 0},
			{"response_timeout", l.ResponseTimeout != 0},
			{"keepalive_timeout", l.KeepaliveTimeout != 0},
			{"max_request_body", l.MaxRequestBody != 0},
			{"upgrades", l.Upgrades != nil},
			{"trusted_proxies", l.TrustedProxies != nil},
			{"headers_with_underscores", l.HeadersWithUnderscores != ""},
			{"h2c", l.H2C},
			{"abort_on_close", l.AbortOnClose},
			{"h2_max_concurrent_streams", l.H2MaxConcurrentStreams != 0},
			{"h2_initial_window", l.H2InitialWindow != 0},
			{"h2_response_hold", l.H2ResponseHold != 0},
		} {
			if f.set {
				return fmt.Errorf("%s: only in mode %s", f.name, ModeHTTP)
			}
		}
		return nil
	case ModeHTTP:
	default:
		return fmt.Errorf("mode: unknown %q (want %q or %q)", l.Mode, ModeTCP, ModeHTTP)
	}
	for _, f := range []struct {
		name string
		d    Duration
	}{{"request_timeout", l.RequestTimeout}, {"response_timeout", l.ResponseTimeout}, {"keepalive_timeout", l.KeepaliveTimeout}} {
		if f.d <= 0 {
			return fmt.Errorf("%s: %v is not positive", f.name, time.Duration(f.d))
		}
	}
	if l.MaxRequestBody < 0 {
		return fmt.Errorf("max_request_body: negative %d", l.MaxRequestBody)
	}
	if l.H2C && l.TLS != nil {
		return errors.New("h2c: HTTP/2 over cleartext, not on a tls listener (HTTP/2 over TLS is tls.alpn's \"h2\", offered by default)")
	}
	if !l.servesH2() && (l.H2MaxConcurrentStreams != 0 || l.H2InitialWindow != 0 || l.H2ResponseHold != 0) {
		return errors.New("h2_max_concurrent_streams, h2_initial_window, h2_response_hold: only with h2c: true, or tls with \"h2\" in its alpn")
	}
	if w := l.H2InitialWindow; l.servesH2() && (w < 65535 || w > 1<<31-1) {
		return fmt.Errorf("h2_initial_window: %d is not from 65535 to 2147483647", w)
	}
	if h := l.H2ResponseHold; l.servesH2() && (h < upH2Window || h > 1<<31-1) {
		return fmt.Errorf("h2_response_hold: %d is not from %d (a stream's window to an h2c pool's server) to 2147483647", h, upH2Window)
	}
	for i, u := range l.Upgrades {
		if !validToken(u) {
			return fmt.Errorf("upgrades[%d]: %q is not a protocol name (a token, no version)", i, u)
		}
	}
	switch u := l.HeadersWithUnderscores; u {
	case UnderscoresAllow, UnderscoresDrop, UnderscoresReject:
	default:
		return fmt.Errorf("headers_with_underscores: unknown %q (want %s, %s or %s)", u, UnderscoresAllow, UnderscoresDrop, UnderscoresReject)
	}
	for i, p := range l.TrustedProxies {
		switch {
		case !p.IsValid():
			return fmt.Errorf("trusted_proxies[%d]: not a valid prefix", i)
		case p.Addr().Is4In6():
			return fmt.Errorf("trusted_proxies[%d]: %v is IPv4-mapped (clients compare as IPv4: write %v)", i, p, unmapPrefix(p))
		}
	}
	if err := l.RequestHeaders.validate(); err != nil {
		return fmt.Errorf("request_headers.%w", err)
	}
	if err := l.ResponseHeaders.validate(); err != nil {
		return fmt.Errorf("response_headers.%w", err)
	}
	for i, r := range l.Routes {
		where := fmt.Sprintf("routes[%d]", i)
		if err := validHost(r.Host); err != nil {
			return fmt.Errorf("%s.host: %w", where, err)
		}
		if !strings.HasPrefix(r.PathPrefix, "/") {
			return fmt.Errorf("%s.path_prefix: %q does not begin with /", where, r.PathPrefix)
		}
		if i := strings.IndexFunc(r.PathPrefix, func(c rune) bool { return c <= ' ' || c >= 0x7f }); i >= 0 {
			return fmt.Errorf("%s.path_prefix: %q has a space, control or non-ASCII byte at %d", where, r.PathPrefix, i)
		}
		if r.Pool == "" {
			return fmt.Errorf("%s.pool: missing", where)
		}
		if err := r.validateRewrites(); err != nil {
			return fmt.Errorf("%s.%w", where, err)
		}
		if !pools[r.Pool] {
			return fmt.Errorf("%s.pool: no pool named %q", where, r.Pool)
		}
	}
	return validRouteNames(l.Routes)
}

// servesH2 reports whether a mode http listener takes HTTP/2 clients:
// with prior knowledge (h2c), or by ALPN ("h2" in tls.alpn, defaults
// filled in).
func (l *ListenerConfig) servesH2() bool {
	return l.H2C || l.TLS != nil && slices.Contains(l.TLS.ALPN, "h2")
}

// unmapPrefix returns an IPv4-mapped prefix's IPv4 prefix (the bits of
// its IPv4 part; none where it is shorter than the mapping's 96).
func unmapPrefix(p netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0)).Masked()
}

// validateType checks h's type and the fields of type http; servers are
// the pool's (their addresses are the default Host). The error begins
// with the field's name.
func (h *HealthConfig) validateType(servers []ServerConfig) error {
	switch h.Type {
	case HealthTCP:
		for _, f := range []struct{ name, v string }{{"path", h.Path}, {"host", h.Host}, {"expect", h.Expect}} {
			if f.v != "" {
				return fmt.Errorf("%s: only with type %s", f.name, HealthHTTP)
			}
		}
		return nil
	case HealthHTTP:
	default:
		return fmt.Errorf("type: unknown %q (want %q or %q)", h.Type, HealthTCP, HealthHTTP)
	}
	if !strings.HasPrefix(h.Path, "/") {
		return fmt.Errorf("path: %q does not begin with /", h.Path)
	}
	if i := strings.IndexFunc(h.Path, func(c rune) bool { return c <= ' ' || c >= 0x7f }); i >= 0 {
		return fmt.Errorf("path: %q has a space, control or non-ASCII byte at %d", h.Path, i)
	}
	if h.Host != "" && !h1.ValidAuthority([]byte(h.Host)) {
		return fmt.Errorf("host: %q is not a host name or address with an optional port", h.Host)
	}
	if h.Host == "" {
		for i, s := range servers {
			if !h1.ValidAuthority([]byte(s.Address)) {
				return fmt.Errorf("host: missing, and servers[%d] %q cannot be one (give host)", i, s.Address)
			}
		}
	}
	if _, err := parseExpect(h.Expect); err != nil {
		return fmt.Errorf("expect: %w", err)
	}
	return nil
}

// statusRange is a range of statuses, lo to hi inclusive.
type statusRange struct{ lo, hi int }

// parseExpect parses a health check's expect: "200", "200-399",
// "200,204,300-302".
func parseExpect(e string) ([]statusRange, error) {
	var rs []statusRange
	for part := range strings.SplitSeq(e, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		l, err1 := strconv.Atoi(strings.TrimSpace(lo))
		h, err2 := strconv.Atoi(strings.TrimSpace(hi))
		switch {
		case err1 != nil || err2 != nil:
			return nil, fmt.Errorf("%q: %q is not a status or a range such as 200-399", e, part)
		case l < 100 || l > 599 || h < 100 || h > 599:
			return nil, fmt.Errorf("%q: %q is not within 100-599", e, part)
		case l > h:
			return nil, fmt.Errorf("%q: %q is an empty range", e, part)
		}
		rs = append(rs, statusRange{l, h})
	}
	return rs, nil
}

// statusSet is a set of the statuses 500 to 599.
type statusSet [2]uint64

// has reports status in the set.
func (ss *statusSet) has(status int) bool {
	k := uint(status - 500)
	return k < 100 && ss[k/64]&(1<<(k%64)) != 0
}

// errorStatuses parses passive.http_error_statuses: statuses and ranges
// as expect's, from 500 to 599.
func errorStatuses(e string) (statusSet, error) {
	var ss statusSet
	rs, err := parseExpect(e)
	if err != nil {
		return ss, err
	}
	for _, r := range rs {
		if r.lo < 500 {
			return ss, fmt.Errorf("%q: %d is below 500 (a response below 500 clears the count)", e, r.lo)
		}
		for st := r.lo; st <= r.hi; st++ {
			k := uint(st - 500)
			ss[k/64] |= 1 << (k % 64)
		}
	}
	return ss, nil
}

// expected reports status within one of rs.
func expected(rs []statusRange, status int) bool {
	for _, r := range rs {
		if status >= r.lo && status <= r.hi {
			return true
		}
	}
	return false
}

// validToken reports an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHost checks a route's host: empty, a name or IP address (IPv6 in
// brackets, not IPv4-mapped; IPv4 in dotted decimal) without a port, or
// "*." and a name. A name's last label is not all digits (RFC 3696 2: no
// top-level domain is), so that an IPv4 address written otherwise
// ("127.1", "127.0.0.01"), which requests would name only so written
// and resolvers read as this or another address, is refused.
func validHost(h string) error {
	if h == "" {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") && name == h {
		a, err := netip.ParseAddr(name[1 : len(name)-1])
		if err != nil || !a.Is6() {
			return fmt.Errorf("%q is not a bracketed IPv6 address", h)
		}
		if a.Is4In6() {
			return fmt.Errorf("%q is IPv4-mapped (requests for either route alike: write %v)", h, a.Unmap())
		}
		return nil
	}
	if name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("%q is not a host name (want a name such as example.com or *.example.com, without a port)", h)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("%q: %q is not allowed in a host name (want a name such as example.com or *.example.com, without a port)", h, c)
		}
	}
	if last := name[strings.LastIndexByte(name, '.')+1:]; strings.Trim(last, "0123456789") == "" {
		if a, err := netip.ParseAddr(name); err != nil || !a.Is4() || name != h {
			return fmt.Errorf("%q is neither a host name (its last label is all digits) nor an IPv4 address in dotted decimal (such as 192.0.2.1)", h)
		}
	}
	return nil
}

// overlaps returns the name of the listener in addrs that ap cannot be
// bound beside (the same port, on the same or an unspecified address), ""
// for none; port 0 overlaps nothing.
func overlaps(addrs map[netip.AddrPort]string, ap netip.AddrPort) string {
	if ap.Port() == 0 {
		return ""
	}
	for o, name := range addrs {
		if o.Port() == ap.Port() && (o.Addr() == ap.Addr() || o.Addr().IsUnspecified() || ap.Addr().IsUnspecified()) {
			return name
		}
	}
	return ""
}

// serverAddr parses an upstream "host:port": a numeric host gives a valid
// address; a name gives an invalid one, and New resolves it.
func serverAddr(s string) (host string, ap netip.AddrPort, err error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("%q is not host:port", s)
	}
	if host == "" {
		return "", netip.AddrPort{}, fmt.Errorf("%q: empty host", s)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", netip.AddrPort{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, port)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host, netip.AddrPortFrom(netip.Addr{}, uint16(p)), nil // a name
	}
	if a.IsUnspecified() {
		return "", netip.AddrPort{}, fmt.Errorf("%q: unspecified address", s)
	}
	return host, netip.AddrPortFrom(a, uint16(p)), nil
}

// listenAddr parses a listen "host:port", for Validate's overlap checks:
// an empty host is the unspecified IPv6 address (dual-stack, as the engine
// listens), and an IPv4-mapped IPv6 address is its IPv4 address (a
// dual-stack socket bound to it takes that address's connections).
func listenAddr(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not host:port", s)
	}
	switch host {
	case "":
		host = "::"
	case "localhost":
		host = "127.0.0.1"
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: host %q is not an IP address, \"localhost\" or empty", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: port %q is not a number from 0 to 65535", s, port)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

// YAML returns c as a config file (durations as Go duration strings), as
// `spindle proxy -check` prints it. Any goroutine.
func (c *Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
