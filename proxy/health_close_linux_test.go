package proxy

import (
	"crypto/tls"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// TestHealthTLSCloseBounded: a TLS check's close_notify is bounded by
// the check's timeout. The server completes the handshake and then reads
// nothing: the check's request (a 16 MiB path) fills the connection, its
// write fails at the timeout, and close_notify finds no room, unless an
// ACK came after the write went to sleep (the kernel then takes a small
// write without waking the large one), which it did in about half the
// checks: ten are made (with five, 2 runs of 3 failed before the fix).
// crypto/tls gives close_notify a write deadline of its own, 5 s from the
// Close, over the check's, and the deferred stop that would close the
// socket ran before the Close: a check whose close_notify found no room
// returned 5 s after its timeout. The bound checked is crypto/tls's less
// a second, far above the timeout.
func TestHealthTLSCloseBounded(t *testing.T) {
	ca := newTestCA(t)
	var handshakes atomic.Int32
	release := make(chan struct{})
	u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, func(c *tls.Conn) {
		if c.Handshake() == nil {
			handshakes.Add(1)
			<-release // (reads nothing until the test ends)
		}
	})
	t.Cleanup(func() { close(release) }) // (before newTLSUp's, which waits for serve)
	const timeout = 150 * time.Millisecond
	h := &HealthConfig{Type: HealthHTTP, Path: "/" + strings.Repeat("a", 16<<20), Timeout: Duration(timeout)}
	pr := newProber(h, u.addr, "app.test", false)
	cc := &tls.Config{RootCAs: ca.roots, ServerName: "app.test"}
	pr.tls = func() *tls.Config { return cc }
	for i := range 10 {
		start := time.Now()
		if pr.probe(t.Context()) {
			t.Fatal("the check passed, want it failed")
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("check %d took %v with a timeout of %v: its close_notify was not bounded by the timeout", i, took, timeout)
		}
	}
	if n := handshakes.Load(); n < 5 {
		t.Errorf("%d of the 10 checks completed their handshake, want 5 at least: the others wrote no request", n)
	}
}

// serveGoAway serves c as HTTP/2 (200 to each request) and records in
// seen the code of the GOAWAY it sent, -1 for none.
func serveGoAway(c net.Conn, seen *closeSeen[int64]) {
	code := int64(-1)
	serveH2(c, goAwayApp{code: &code})
	seen.add(code)
}

// goAwayApp answers each request 200 (earlyApp) and records the code of
// the client's GOAWAY.
type goAwayApp struct {
	earlyApp
	code *int64
}

func (a goAwayApp) OnGoAway(_ *h2.Server, code h2.ErrCode, _ []byte) { *a.code = int64(code) }

// TestHealthH2GoAway: an HTTP check of an HTTP/2 pool ends its
// connection with GOAWAY(NO_ERROR), over TLS before close_notify (after
// it the server could read nothing), as the pool's own connections end:
// the server sees a client's graceful end, not a connection dropped.
// Protocols h2c and h2.
func TestHealthH2GoAway(t *testing.T) {
	for _, proto := range []string{ProtocolH2C, ProtocolH2} {
		t.Run(proto, func(t *testing.T) {
			var seen closeSeen[int64]
			var addr string
			var tc *UpstreamTLSConfig
			if proto == ProtocolH2 {
				ca := newTestCA(t)
				addr = newTLSUp(t, ca, "app", []string{"app.test"}, func(c *tls.Config) { c.NextProtos = []string{"h2"} }, nil,
					func(c *tls.Conn) { serveGoAway(c, &seen) }).addr
				tc = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
			} else {
				addr = newUpstream(t, func(c net.Conn) { serveGoAway(c, &seen) }).addr
			}
			cfg := httpConfig(engine.BackendEpoll, addr)
			cfg.Pools[0].Protocol, cfg.Pools[0].TLS = proto, tc
			cfg.Pools[0].Health = &HealthConfig{Type: HealthHTTP, Path: "/", Interval: Duration(time.Second), Timeout: Duration(time.Second), Rise: 1, Fall: 1}
			p := startProxy(t, cfg)
			waitFor(t, "2 checks passed and ended", func() bool { return len(seen.get()) >= 2 && p.Totals().Servers[0].CheckPasses >= 2 })
			if ends := seen.get()[:2]; ends[0] != int64(h2.NoError) || ends[1] != int64(h2.NoError) {
				t.Errorf("the checks' GOAWAY codes %v (-1: none), want NO_ERROR (%d) from each", ends, h2.NoError)
			}
		})
	}
}
