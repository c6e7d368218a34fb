package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// UpstreamTLSConfig makes a pool's connections to its servers TLS
// (PoolConfig.TLS): the engine dials them with crypto/tls's client
// (engine.Loop.DialTLS), the handshake bounded with the connect by the
// listener's connect_timeout; the proxy's bytes go as they would over
// plain TCP. A connect whose handshake fails (an untrusted or expired
// certificate, a wrong name, a server that is not TLS, or for protocol
// h2 a server that does not choose "h2" by ALPN) is a failed connect as a
// refused one is: the next server is tried, retries and passive health
// count it, and it is counted in
// spindle_proxy_server_tls_handshake_failures_total besides
// spindle_proxy_server_failures_total and logged (one line a second at
// most for each pool, with the number held back since the last). The pool's health
// checks connect over TLS too, with the same configuration. Behind a
// mode tcp listener whose client chose a protocol by ALPN (its tls.alpn),
// that protocol is the one offered to the server, so that both ends speak
// the protocol the client was told: a server that takes ALPN but not that
// protocol fails the handshake (a failed connect: the next server is
// tried), and one that takes no ALPN is used as it is.
//
// The files are read by Validate (so that `spindle proxy -check` names
// one that cannot be read or holds nothing usable) and again by New and
// by each Reload, whose configuration the next connections take; the
// connections open keep theirs.
type UpstreamTLSConfig struct {
	// ServerName is the name sent to the servers (SNI) and checked
	// against their certificates. Default: each server's host as
	// configured in servers (a name, before it is resolved; an IP address,
	// its zone dropped, is checked against the certificate's IP addresses
	// and sent as no SNI).
	ServerName string `yaml:"server_name,omitempty" json:"server_name,omitempty"`
	// CAFile is a PEM file of the certificates the servers' chains are
	// checked against. Default: the system's roots.
	CAFile string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"`
	// InsecureSkipVerify accepts any certificate from the servers,
	// whoever signed it and whatever name it has: the connections are
	// encrypted but anyone on the path can read and change them. For
	// tests only: New and a reload that makes the pool say so in the log.
	// Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty" json:"insecure_skip_verify,omitempty"`
	// CertFile and KeyFile are the proxy's own certificate chain and key
	// (PEM, as TLSConfig.CertFile), for servers that ask for one
	// (mutual TLS). Both or neither. Default none.
	CertFile string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	// MinVersion is the lowest TLS version accepted: "1.2" (the default)
	// or "1.3". The highest is 1.3.
	MinVersion string `yaml:"min_version" json:"min_version"`
}

// setDefaults fills in t's defaults (nil: no TLS).
func (t *UpstreamTLSConfig) setDefaults() {
	if t != nil && t.MinVersion == "" {
		t.MinVersion = TLS12
	}
}

// clientConfigs checks p's tls (defaults filled in), reads its files and
// returns the crypto/tls configs of its connections, by server; nil
// without tls. The error begins with the field's name ("tls.ca_file:").
// Any goroutine.
func (p *PoolConfig) clientConfigs() ([]*tls.Config, error) {
	t := p.TLS
	if t == nil {
		return nil, nil
	}
	base := &tls.Config{MaxVersion: tls.VersionTLS13, InsecureSkipVerify: t.InsecureSkipVerify}
	var err error
	if base.MinVersion, err = minVersion(t.MinVersion); err != nil {
		return nil, err
	}
	if t.CAFile != "" {
		b, err := readPEM(t.CAFile, func(typ string) bool { return typ == "CERTIFICATE" }, "no PEM CERTIFICATE block")
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		base.RootCAs = x509.NewCertPool()
		if !base.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls.ca_file: %s: no certificate could be parsed", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		c, err := loadPair("tls", CertificateConfig{t.CertFile, t.KeyFile})
		if err != nil {
			return nil, err
		}
		base.Certificates = []tls.Certificate{c}
	}
	if p.Protocol == ProtocolH2 {
		base.NextProtos = []string{"h2"}
	}
	cfgs := make([]*tls.Config, len(p.Servers))
	for j, sc := range p.Servers {
		c := base.Clone()
		c.ServerName = t.ServerName
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(sc.Address)
			if err != nil {
				return nil, fmt.Errorf("servers[%d]: %q is not host:port", j, sc.Address)
			}
			if a, err := netip.ParseAddr(host); err == nil {
				// An IP address is checked against the certificate's
				// IP addresses, which have no zone (a link-local
				// server's, "fe80::1%eth0"): with it, crypto/tls took
				// the name for a DNS name, which no certificate has.
				host = a.WithZone("").String()
			}
			c.ServerName = host
		}
		cfgs[j] = c
	}
	return cfgs, nil
}

// upTLS is a TLS pool's client side: the crypto/tls configs its
// connections and health checks take, by server index, which a reload
// that keeps the pool replaces (its files read again) for the connections
// that follow; and each server's session cache, which a pool a reload
// makes anew takes over by address, so that the connections after a
// reload resume their sessions.
type upTLS struct {
	cur    atomic.Pointer[[]*tls.Config]
	caches map[string]tls.ClientSessionCache // by server address; Reload's goroutine (or New's)
}

// upSessionCache is the number of sessions a server's cache keeps: one
// per loop is what resumption needs; the rest is slack for tickets a
// server sends in numbers (TLS 1.3 may send several).
const upSessionCache = 64

// newUpTLS returns pl's client side with cfgs (clientConfigs) in force,
// the session caches of old (the pool pl replaces; nil for none) kept
// for the servers pl keeps (keepCaches). Reload's goroutine (or New's).
func newUpTLS(pl *pool, cfgs []*tls.Config, old *pool) *upTLS {
	var from *upTLS
	if old != nil {
		from = old.tls
	}
	u := &upTLS{caches: keepCaches(pl, cfgs, from)}
	u.cur.Store(&cfgs)
	return u
}

// keepCaches gives cfgs (clientConfigs, for pl's servers) the session
// caches from has for them (from: the client side in force, nil for none)
// and new ones for the others, and returns them by server address; all
// new where cfgs present another client certificate than from's (mTLS: a
// certificate renewed), whose sessions would show the servers the old one
// when resumed. Reload's goroutine (or New's).
func keepCaches(pl *pool, cfgs []*tls.Config, from *upTLS) map[string]tls.ClientSessionCache {
	if from != nil && !sameClientCert(*from.cur.Load(), cfgs) {
		from = nil
	}
	caches := make(map[string]tls.ClientSessionCache, len(pl.servers))
	for j, s := range pl.servers {
		var c tls.ClientSessionCache
		if from != nil {
			c = from.caches[s.addr]
		}
		if c == nil {
			c = tls.NewLRUClientSessionCache(upSessionCache)
		}
		caches[s.addr] = c
		cfgs[j].ClientSessionCache = c
	}
	return caches
}

// sameClientCert reports whether the client configs a and b (a pool's,
// clientConfigs: every server's has the pool's certificate) present the
// same certificate chain, or none both.
func sameClientCert(a, b []*tls.Config) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return slices.EqualFunc(a[0].Certificates, b[0].Certificates, func(x, y tls.Certificate) bool {
		return slices.EqualFunc(x.Certificate, y.Certificate, bytes.Equal)
	})
}

// tlsFor returns the crypto/tls config of connections to server i of pl;
// nil for a plain pool. Any goroutine.
func (pl *pool) tlsFor(i int) *tls.Config {
	if pl.tls == nil {
		return nil
	}
	return (*pl.tls.cur.Load())[i]
}

// dial dials server i of pl from loop l, over TLS where pl has tls, with
// timeout bounding the connect and the handshake; proto, where not "",
// is then the one protocol offered to the server by ALPN (mode tcp: the
// one its TLS client chose, dialing.proto). Loop goroutine.
func (pl *pool) dial(l *engine.Loop, i int, timeout time.Duration, proto string) (*engine.Conn, error) {
	if cfg := pl.tlsFor(i); cfg != nil {
		if proto != "" {
			cfg = cfg.Clone()
			cfg.NextProtos = []string{proto}
		}
		return l.DialTLS("tcp", pl.servers[i].addr, timeout, cfg)
	}
	return l.Dial("tcp", pl.servers[i].addr, timeout)
}

// errNoH2 fails a connection to an h2 pool's server that did not choose
// h2 by ALPN.
var errNoH2 = errors.New("the server did not choose h2 by ALPN (protocol h2 needs it)")

// tlsFailure reports whether err, a failed connect's, is its TLS
// handshake's (the engine's "tls handshake" *net.OpError, a timeout
// during the handshake included), or errNoH2.
func tlsFailure(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "tls handshake" || errors.Is(err, errNoH2)
}

// dialFailed counts a failed connect to server i of pl, err its error
// (nil where unknown): in the server's failures (st, its loop's
// counters), in its TLS handshake failures and the log where the
// handshake failed, and for passive health. Loop goroutine.
func (p *Proxy) dialFailed(pl *pool, i int, st *srvStats, err error) {
	st.failures.inc()
	if err != nil && pl.tls != nil && tlsFailure(err) {
		st.tlsFailed.inc()
		pl.shared.tlsLog.logf(p, "proxy: pool %s: server %s: TLS handshake failed: %v", pl.name, pl.servers[i].addr, err)
	}
	pl.servers[i].connectFailed(pl)
}

// logLimit lets one log line through every logLimitEvery, the lines held
// back in between counted and said in the next line let through. Each
// pool has its own (poolShared.tlsLog) and each listener its own
// (lnLogs), both following the name over reloads, so that a noisy one
// holds back no other's lines.
type logLimit struct {
	next atomic.Int64 // unix nanoseconds from which a line goes through
	held atomic.Uint64
}

// logLimitEvery is a logLimit's interval.
const logLimitEvery = time.Second

// logf logs format and args through p's Logf unless a line went through
// less than logLimitEvery ago. Any goroutine.
func (r *logLimit) logf(p *Proxy, format string, args ...any) {
	now := p.now()
	n := r.next.Load()
	if now < n || !r.next.CompareAndSwap(n, now+int64(logLimitEvery)) {
		r.held.Add(1)
		return
	}
	if h := r.held.Swap(0); h > 0 {
		format += " (%d more such lines held back)"
		args = append(args, h)
	}
	p.opt.Logf(format, args...)
}
