package bench

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The handshake mode of `spindle bench proxy --tls` (ProxyConfig.TLSHandshakes):
// every request on a connection of its own, with its TLS handshake.

// errHandshakesProtocol is why ProxyConfig.TLSHandshakes takes the tcp and
// http protocols only.
var errHandshakesProtocol = errors.New("bench: proxy: --tls-handshakes takes --protocol tcp or http (h2load makes its connections once)")

// handshakeLoad configures runHandshakes: the load of a --tls-handshakes
// measurement.
type handshakeLoad struct {
	addr string
	// tls is the clients' config (handshakeClientTLS), shared by the
	// slots: its session cache is safe for concurrent use.
	tls *tls.Config
	// framing is the protocol's for one request (LoadConfig's Protocol,
	// Host, Payload with defaults).
	framing LoadConfig
	// slots is the connections open at a time, each a thread of its own
	// pinned to cpus.
	slots          int
	cpus           []int
	warmup, window time.Duration
	// Window is called as LoadConfig.Window is.
	Window func(start, end time.Time)
}

// handshakeDefaults checks c's handshake settings and sets what they
// imply: TLSResume is TLSHandshakes with resumption, TLSHandshakes is TLS
// with a connection per request.
func (c *ProxyConfig) handshakeDefaults() error {
	if c.TLSResume {
		c.TLSHandshakes = true
	}
	if !c.TLSHandshakes {
		return nil
	}
	c.TLS = true
	if c.Protocol != ProxyProtocolTCP && c.Protocol != ProxyProtocolHTTP {
		return errHandshakesProtocol
	}
	return nil
}

// handshakeClientTLS is a handshake measurement's client config, base
// (proxyClientTLS's) with resumption off (SessionTicketsDisabled: the
// ClientHello offers no PSK modes, so no server sends a ticket) or, with
// resume, on, over a session cache of its own: a fresh proxy has fresh
// ticket keys, and a ticket of the arm measured before would only be
// refused.
func handshakeClientTLS(base *tls.Config, resume bool) *tls.Config {
	c := base.Clone()
	if resume {
		// One entry: every connection asks for the same server name.
		c.ClientSessionCache = &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(1)}
	} else {
		c.SessionTicketsDisabled = true
		c.ClientSessionCache = nil
	}
	return c
}

// checkHandshakes returns an error unless res shows TLS 1.3 with alpn and
// proxyTLSCipher on every connection and, without resume, a full handshake on each (none
// resumed); with resume, every connection resumed but those a slot (of
// slots) opened before any session was there to resume: at most one full
// handshake a slot.
func checkHandshakes(res *ProxyTLSResult, slots int, alpn []string, resume bool) error {
	if res == nil {
		return checkTLS(nil, 0, alpn)
	}
	if err := checkTLS(res, res.Handshakes, alpn); err != nil {
		return err
	}
	full := res.Handshakes - res.Resumed
	switch {
	case res.CipherSuite != proxyTLSCipher:
		return fmt.Errorf("the clients' TLS cipher suite was %s, not %s", res.CipherSuite, proxyTLSCipher)
	case res.Handshakes == 0:
		return errors.New("no connection completed its handshake")
	case !resume && res.Resumed != 0:
		return fmt.Errorf("%d of %d connections resumed a session, with resumption off", res.Resumed, res.Handshakes)
	case resume && full > slots:
		return fmt.Errorf("%d of %d connections made a full handshake with resumption on, at most %d (one a slot) expected", full, res.Handshakes, slots)
	}
	return nil
}

// ticketCache is a client session cache that counts the tickets put in
// it: one a NewSessionTicket the client read.
type ticketCache struct {
	tls.ClientSessionCache
	puts atomic.Int64
}

// Put is called by crypto/tls, from any connection's goroutine.
func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	if cs != nil {
		c.puts.Add(1)
	}
	c.ClientSessionCache.Put(key, cs)
}

// tickets is the number of tickets cfg's cache took (ticketCache), 0 for
// another cache or none.
func tickets(cfg *tls.Config) int {
	if c, ok := cfg.ClientSessionCache.(*ticketCache); ok {
		return int(c.puts.Load())
	}
	return 0
}

// proxyHandshakeNote says what a --tls-handshakes run measured.
func proxyHandshakeNote(resume bool) string {
	hs := "a full handshake on every connection: the client offers no resumption (crypto/tls SessionTicketsDisabled: no psk_key_exchange_modes in its ClientHello; a ticket a server sends anyway is read and dropped, and shows in the server's bytes a connection), and the run fails unless every connection's handshake was a full one"
	if resume {
		hs = "session resumption: the client keeps the last ticket it was sent (one cache per measurement, shared by the slots) and offers it on every connection, PSK with (EC)DHE key exchange; the slots' first connections, made before any ticket came, are full handshakes; the run fails where more than one a slot was, and the TLS line counts the resumed ones and the tickets the servers sent"
	}
	return "a TLS 1.3 handshake per request: each connection slot opens a connection, completes the handshake (X25519, TLS_AES_128_GCM_SHA256, the certificate verified), sends one request, reads and verifies the reply, then the client closes first (its close_notify and FIN in one segment, the server's close_notify and FIN read, then close: TIME_WAIT is on the client's side, and no reset is sent) and opens the next; " + hs + "; req/s is connections (handshakes) per second, the proxy CPU per request is per connection (handshake, request, reply, close), and the latency runs from the connect to the verified reply; each slot is a thread of its own blocking in poll, and every thread of the bench process is pinned to the client CPUs while it runs (the clients' garbage collection included); the client's CPU is the bench process's (getrusage RUSAGE_SELF) over the window"
}

// ProxyTimeWait counts the sockets in TIME_WAIT (/proc/net/tcp and tcp6)
// at the end of a --tls-handshakes measurement that went into it during
// the measurement (the time left on their 60 s timer says when), by the
// side that closed first: ClientSide those of the
// clients' connections to the proxy (remote port the proxy's), ProxySide
// those of the proxy's end of them (local port the proxy's), ToUpstream
// those of connections to the upstream (remote port the upstream's: the
// proxy closed first) and UpstreamSide those the upstream closed first
// (local port the upstream's). Total is every socket in TIME_WAIT on the
// host at the end, those of earlier measurements (60 s) and other
// programs' included.
type ProxyTimeWait struct {
	ClientSide   int `json:"client_side"`
	ProxySide    int `json:"proxy_side"`
	ToUpstream   int `json:"to_upstream"`
	UpstreamSide int `json:"upstream_side"`
	Total        int `json:"total"`
}

// tcpTimeWait is the TCP state number of TIME_WAIT in /proc/net/tcp.
const tcpTimeWait = "06"

// timeWaitLen is how long a socket stays in TIME_WAIT: Linux's
// TCP_TIMEWAIT_LEN, which no setting changes.
const timeWaitLen = 60 * time.Second

// twSocket is a socket in TIME_WAIT: its local and remote addresses (as
// /proc/net/tcp has them, hex ADDR:PORT) and their ports, and the time
// left on its timer.
type twSocket struct {
	local, remote         string
	localPort, remotePort int
	left                  time.Duration
}

// readTimeWait returns the sockets in TIME_WAIT under root's
// /proc/net/tcp and tcp6 (root "" is "/").
func readTimeWait(root string) ([]twSocket, error) {
	var socks []twSocket
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(root, "/proc/net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue
		}
		if err != nil {
			return nil, err
		}
		socks, err = readTimeWaitIn(f, socks)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
	}
	return socks, nil
}

// readTimeWaitIn appends the TIME_WAIT sockets of r, a /proc/net/tcp
// table, to socks.
func readTimeWaitIn(r io.Reader, socks []twSocket) ([]twSocket, error) {
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false // the header
			continue
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when ...
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			return socks, fmt.Errorf("line %q: too few fields", sc.Text())
		}
		if f[3] != tcpTimeWait {
			continue
		}
		s := twSocket{local: f[1], remote: f[2]}
		var err error
		if s.localPort, err = hexPort(f[1]); err != nil {
			return socks, err
		}
		if s.remotePort, err = hexPort(f[2]); err != nil {
			return socks, err
		}
		// The timer's time left, in clock ticks (USER_HZ), in hex.
		_, when, ok := strings.Cut(f[5], ":")
		ticks, err := strconv.ParseUint(when, 16, 32)
		if !ok || err != nil {
			return socks, fmt.Errorf("line %q: timer %q", sc.Text(), f[5])
		}
		s.left = time.Duration(ticks) * time.Duration(ClockTick)
		socks = append(socks, s)
	}
	return socks, sc.Err()
}

// countTimeWait counts the sockets of socks, read since after a start,
// that went into TIME_WAIT after it, by the ports of the proxy and the
// upstream (ProxyTimeWait), and every one of socks. One went in after
// the start when it has more than timeWaitLen - since left on its timer
// and is not one of before (read at the start), the same addresses with
// less time left than then: the timer counts in clock ticks, and those
// that went in just before the start, while it was read, would pass the
// first test.
func countTimeWait(before, socks []twSocket, since time.Duration, proxyPort, upstreamPort int) ProxyTimeWait {
	tw := ProxyTimeWait{Total: len(socks)}
	old := map[[2]string]time.Duration{}
	for _, s := range before {
		old[[2]string{s.local, s.remote}] = s.left
	}
	for _, s := range socks {
		if s.left < timeWaitLen-since {
			continue
		}
		if left, ok := old[[2]string{s.local, s.remote}]; ok && s.left <= left {
			continue
		}
		switch {
		case s.remotePort == proxyPort:
			tw.ClientSide++
		case s.localPort == proxyPort:
			tw.ProxySide++
		case s.remotePort == upstreamPort:
			tw.ToUpstream++
		case s.localPort == upstreamPort:
			tw.UpstreamSide++
		}
	}
	return tw
}

// hexPort is the port of a /proc/net/tcp address (ADDR:PORT, in hex).
func hexPort(addr string) (int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("address %q: no port", addr)
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return 0, fmt.Errorf("address %q: %w", addr, err)
	}
	return int(p), nil
}

// portOf is the port of addr (host:port), 0 when it has none.
func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	p, _ := strconv.Atoi(addr[i+1:])
	return p
}

// tcpSysctls reads, under root, the TCP settings a --tls-handshakes run's
// connection churn depends on, for its note: "name value" each, or the
// error reading it.
func tcpSysctls(root string) string {
	var parts []string
	for _, name := range []string{"tcp_tw_reuse", "ip_local_port_range", "tcp_max_tw_buckets"} {
		b, err := os.ReadFile(filepath.Join(root, "/proc/sys/net/ipv4", name))
		v := strings.Join(strings.Fields(string(b)), "–")
		if err != nil {
			v = "unread (" + err.Error() + ")"
		}
		parts = append(parts, "net.ipv4."+name+" "+v)
	}
	return strings.Join(parts, ", ")
}

// proxyChurnNote says how a --tls-handshakes run's connections end and
// what the host's TCP settings make of it (sysctls: tcpSysctls).
func proxyChurnNote(sysctls string) string {
	return "connection churn: the client closes first, so the TIME_WAIT of each connection to the proxy is on the client's side (the report counts, per measurement, the sockets that went into TIME_WAIT during it: on the client's side, the proxy's, the proxy's to the upstream, the upstream's); the client's ephemeral ports are reused from TIME_WAIT on loopback (tcp_tw_reuse 2, the default, or 1), and past tcp_max_tw_buckets the kernel drops new TIME_WAIT sockets instead (dmesg: \"time wait bucket table overflow\"), the same for every arm; here " + sysctls
}

// proxyTimeWaitLine is a --tls-handshakes report's line on the sockets in
// TIME_WAIT at its measurements' ends (ProxyResult.TimeWait), per arm the
// most of each count over its measurements, or "".
func proxyTimeWaitLine(rep *ProxyReport) string {
	if !rep.Config.TLSHandshakes {
		return ""
	}
	var arms []string
	most := map[string]*ProxyTimeWait{}
	for _, res := range rep.Results {
		if res.TimeWait == nil {
			continue
		}
		m := most[res.Arm]
		if m == nil {
			m = &ProxyTimeWait{}
			most[res.Arm] = m
			arms = append(arms, res.Arm)
		}
		tw := res.TimeWait
		m.ClientSide, m.ProxySide = max(m.ClientSide, tw.ClientSide), max(m.ProxySide, tw.ProxySide)
		m.ToUpstream, m.UpstreamSide, m.Total = max(m.ToUpstream, tw.ToUpstream), max(m.UpstreamSide, tw.UpstreamSide), max(m.Total, tw.Total)
	}
	var parts []string
	for _, a := range arms {
		m := most[a]
		parts = append(parts, fmt.Sprintf("%s %d / %d / %d / %d of %d", a, m.ClientSide, m.ProxySide, m.ToUpstream, m.UpstreamSide, m.Total))
	}
	return fmt.Sprintf("- sockets gone into TIME_WAIT during a measurement, the most over each arm's (client side / proxy side / proxy to upstream / upstream side, of all on the host at its end): %s\n", strings.Join(parts, "; "))
}
