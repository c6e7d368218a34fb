package proxy

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// healthMaxHead bounds the response head an HTTP health check reads.
const healthMaxHead = 16 << 10

// check runs the health checks of pl until the proxy stops (or a reload
// stops it): each server is checked on its own schedule, in a goroutine
// of its own, every interval a check (a TCP connect, or an HTTP request)
// bounded by the timeout, so a server that answers nothing holds back no
// other's checks or state. The schedules are spread: server i of n has
// its first check i/n of the interval after the start (firstCheck), and
// each interval after is varied a little at random (nextCheck). Rise
// consecutive passes mark a down server up, fall consecutive failures
// mark an up server down. Servers start up. Its own goroutine; it
// returns once every server's has ended.
func (p *Proxy) check(ctx context.Context, pl *pool) {
	defer p.checkers.Done()
	var wg sync.WaitGroup
	iv := time.Duration(pl.health.Interval)
	for i, s := range pl.servers {
		pr := newProber(pl.health, s.addr, pl.cfg.Servers[i].Address, pl.h2)
		if pl.tls != nil {
			pr.tls = func() *tls.Config { return pl.tlsFor(i) } // (a reload that keeps pl replaces it)
			pr.alpnH2 = pl.h2
			if pr.h2 != nil {
				pr.h2.Scheme = schemeHTTPS
			}
		}
		first := firstCheck(iv, i, len(pl.servers))
		wg.Go(func() { checkServer(ctx, pl.health, s, &pr, first) })
	}
	wg.Wait()
}

// checkSpread is the share of the interval by which each wait between
// two checks of a server is varied at random, either way: 1/20, 5 %
// (HAProxy's spread-checks, whose manual finds 2 to 5 % good).
const checkSpread = 20

// firstCheck returns when server i of a pool of n has its first check
// after its pool's checker starts: i/n of the interval iv in (as HAProxy
// starts a backend's checks), so that a pool's checks go out evenly over
// the interval rather than in one burst at every tick. The first
// server's is at once.
func firstCheck(iv time.Duration, i, n int) time.Duration {
	return iv / time.Duration(n) * time.Duration(i)
}

// nextCheck returns the wait from a check's start to the next's: the
// interval iv varied at random by up to iv/checkSpread either way, the
// same on average, so that schedules that began together (proxies
// started or reloaded at once, each checking the same servers) drift
// apart rather than stay in step. Any goroutine.
func nextCheck(iv time.Duration) time.Duration {
	d := iv / checkSpread
	return iv - d + rand.N(2*d+1)
}

// checkServer runs s's health checks with pr until ctx is done, the
// first after first (firstCheck), each next one nextCheck after the last
// began, or at once where that is past (a check that ran out an interval
// long timeout, a pause of the process: missed checks are not made up).
// Its own goroutine, the only writer of s's active health state.
func checkServer(ctx context.Context, h *HealthConfig, s *server, pr *prober, first time.Duration) {
	iv := time.Duration(h.Interval)
	next := time.Now().Add(first)
	t := time.NewTimer(first)
	defer t.Stop()
	passes, fails := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok := pr.probe(ctx)
		if ctx.Err() != nil {
			return // a check cut short by the stop says nothing
		}
		if ok {
			s.checkPasses.Add(1)
			fails = 0
			passes++
			if s.down.Load() && passes >= h.Rise {
				s.down.Store(false)
				s.cameUp()
			}
		} else {
			passes = 0
			fails++
			s.checkFails.Add(1)
			if !s.down.Load() && fails >= h.Fall {
				s.down.Store(true)
			}
		}
		next = next.Add(nextCheck(iv))
		if now := time.Now(); next.Before(now) {
			next = now
		}
		t.Reset(time.Until(next))
	}
}

// prober checks one server: its request (neither req nor h2 for a TCP
// check) and buffer are made once, for every check.
type prober struct {
	addr    string // resolved
	timeout time.Duration
	req     []byte // type http of an http1 pool: the request
	expect  []statusRange
	buf     []byte
	resp    h1.Response
	h2      *h2.Request // type http of an h2c or h2 pool: the request, over HTTP/2 with prior knowledge (h2c) or ALPN's (h2)
	// tls returns the config of a TLS pool's checks, the one its
	// connections take; nil for a plain pool.
	tls    func() *tls.Config
	alpnH2 bool // the server must choose h2 by ALPN (protocol h2)
}

// newProber returns the prober of the server at addr (resolved), given as
// configured in the config (the default Host); h2c: the server speaks
// HTTP/2 with prior knowledge (an h2c pool's).
func newProber(h *HealthConfig, addr, configured string, h2c bool) prober {
	pr := prober{addr: addr, timeout: time.Duration(h.Timeout)}
	if h.Type != HealthHTTP {
		return pr
	}
	host := h.Host
	if host == "" {
		host = configured
	}
	pr.expect, _ = parseExpect(h.Expect) // (validated)
	pr.buf = make([]byte, healthMaxHead)
	if h2c {
		pr.h2 = &h2.Request{Method: []byte("GET"), Scheme: []byte("http"), Authority: []byte(host), Path: []byte(h.Path),
			Fields: []hpack.Field{{Name: []byte("user-agent"), Value: []byte("spindle-health")}}}
		return pr
	}
	pr.req = []byte("GET " + h.Path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\nUser-Agent: spindle-health\r\n\r\n")
	return pr
}

// probe runs one check: it passes on a connect (type tcp), or on a
// response head with an expected status read before the timeout (type
// http; interim 1xx heads are skipped, as a client does). A TLS pool's
// connect is its TCP connect and TLS handshake (for protocol h2, one
// where the server chose h2 by ALPN), within the timeout, and a check
// whose handshake succeeded ends with close_notify, unless the timeout
// has passed. The check ends within its timeout, whatever the server
// reads. The server's checker goroutine.
func (pr *prober) probe(ctx context.Context) bool {
	deadline := time.Now().Add(pr.timeout)
	d := net.Dialer{Deadline: deadline}
	raw, err := d.DialContext(ctx, "tcp", pr.addr)
	if err != nil {
		return false
	}
	if pr.req == nil && pr.h2 == nil && pr.tls == nil {
		raw.Close()
		return true
	}
	// c is what the check reads, writes and closes at its end: over
	// TLS the tls.Conn, whose Close sends close_notify before it closes
	// raw, so that the server sees the check end cleanly rather than a
	// truncation. A stop, or the timeout's passing, closes raw, ending a
	// read or write in progress: close_notify's too, which crypto/tls
	// gives a deadline of its own, 5 s from the Close, over raw's (a
	// server that reads nothing would otherwise hold the check that
	// long past its timeout: TestHealthTLSCloseBounded). A check so cut
	// short sends no close_notify.
	c := raw
	bound, cancel := context.WithDeadline(ctx, deadline)
	stop := context.AfterFunc(bound, func() { raw.Close() })
	defer func() {
		c.Close()
		stop()
		cancel()
	}()
	raw.SetDeadline(deadline)
	if pr.tls != nil {
		tc := tls.Client(raw, pr.tls())
		c = tc
		if tc.Handshake() != nil || pr.alpnH2 && tc.ConnectionState().NegotiatedProtocol != "h2" {
			return false
		}
		if pr.req == nil && pr.h2 == nil {
			return true
		}
	}
	if pr.h2 != nil {
		return pr.probeH2(c)
	}
	if _, err := c.Write(pr.req); err != nil {
		return false
	}
	lim := h1.Limits{MaxHead: healthMaxHead}
	have := 0
	for {
		if have > 0 {
			n, err := pr.resp.Parse(pr.buf[:have], false, lim)
			if err != nil {
				return false
			}
			if n > 0 {
				st := pr.resp.Status
				if st >= 200 || st == 101 {
					return expected(pr.expect, st)
				}
				have = copy(pr.buf, pr.buf[n:have]) // an interim 1xx: the next head decides
				continue
			}
		}
		if have == len(pr.buf) {
			return false // a head larger than healthMaxHead
		}
		m, err := c.Read(pr.buf[have:])
		have += m
		if err != nil && m == 0 {
			return false
		}
	}
}

// probeH2 runs an HTTP check over HTTP/2 with prior knowledge on c: the
// preface, SETTINGS and the GET as one stream; it passes on a final
// response head with an expected status (interim ones skipped), and fails
// on the stream's reset, a connection error, or the deadline. A check
// that got its answer (a final head or the stream's reset) ends the
// connection with GOAWAY(NO_ERROR), as the pool's own connections end
// (upH2.shutdown), before the close (over TLS, close_notify):
// TestHealthH2GoAway.
func (pr *prober) probeH2(c net.Conn) bool {
	var r h2Probe
	cl := h2.NewClient(&r, nil)
	if _, err := cl.Request(pr.h2, true); err != nil {
		return false
	}
	var tail []byte
	for {
		if r.status > 0 || r.failed {
			// The answer is in: GOAWAY goes with what is pending, its
			// write's failure deciding nothing.
			cl.Shutdown()
			c.Write(cl.Pending())
			return r.status > 0 && expected(pr.expect, r.status)
		}
		if out := cl.Pending(); len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return false
			}
			cl.Written(len(out))
		}
		n, err := c.Read(pr.buf)
		if n > 0 && cl.FeedTail(&tail, pr.buf[:n]) != nil {
			return false
		}
		if err != nil && r.status == 0 {
			return false
		}
	}
}

// h2Probe is a health check's h2.ClientHandler: the final status, or the
// stream's failure.
type h2Probe struct {
	status int
	failed bool
}

func (r *h2Probe) OnResponse(c *h2.Client, id uint32, resp *h2.Response, end bool) {
	if resp.Status >= 200 {
		r.status = resp.Status
	}
}
func (r *h2Probe) OnData(c *h2.Client, id uint32, p []byte, end bool)    { c.Consumed(id, len(p)) }
func (r *h2Probe) OnTrailers(*h2.Client, uint32, []hpack.Field)          {}
func (r *h2Probe) OnReset(*h2.Client, uint32, h2.ErrCode, h2.ResetCause) { r.failed = true }
func (r *h2Probe) OnWritable(*h2.Client, uint32)                         {}
func (r *h2Probe) OnGoAway(*h2.Client, h2.ErrCode, uint32, []byte)       {}
func (r *h2Probe) OnPingAck(*h2.Client, [8]byte)                         {}
