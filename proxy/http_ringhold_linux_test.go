package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestHTTPQueuedRingHold: HTTP/1.1 clients whose requests wait in their
// pool's queue (max_conns 1, its one slot held by a request the server
// does not answer) do not take the loop's receive ring from its other
// connections. 600 clients of one loop each send a POST whose head and
// body come in one read, more than the ring's 512 buffers; all of them
// reach the queue, a new client's GET to another pool is answered
// meanwhile, and once the slot frees each POST's body reaches the server
// whole. (Before: each queued request held the receive buffer its head
// and body came in, and with the ring taken the loop read no more
// clients on the uring backends.)
func TestHTTPQueuedRingHold(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { holdThenEcho(w, r, release) })
		cfg := capConfig(b, ModeHTTP, 1, 1, u.addr)
		cfg.Pools[0].QueueTimeout = Duration(time.Minute)
		ringHold(t, cfg, release, func(p *Proxy) bool { return serverTotals(p, u.addr).Active == 1 },
			"every POST to wait in the queue", func(p *Proxy) int { return int(poolTotals(p, "app").QueueLength) })
	})
}

// TestH2UpQueuedRingHold is TestHTTPQueuedRingHold to an h2c pool of one
// connection whose server takes one stream at a time: the POSTs wait for
// a stream.
func TestH2UpQueuedRingHold(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { holdThenEcho(w, r, release) }), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
		})
		cfg := h2cWaitConfig(b, u.addr)
		ringHold(t, cfg, release, func(p *Proxy) bool { return serverTotals(p, u.addr).Active == 1 },
			"every POST to wait for a stream", func(p *Proxy) int { w, _ := h2Waits(p); return w[0] })
	})
}

// TestH2UpWindowClosedRingHold is TestHTTPQueuedRingHold to an h2c pool
// of one connection whose server reads no request body until release
// (its connection window 64 KiB): the 600 POSTs' heads go first and
// their streams open, then their bodies come, most to wait for the
// window.
func TestH2UpWindowClosedRingHold(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		free := closer(t, release)
		var entered atomic.Int64
		u := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered.Add(1)
			<-release
			holdThenEcho(w, r, release)
		}), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000, MaxReceiveBufferPerConnection: 64 << 10}
		})
		cfg := h2cPoolConfig(b, u.addr)
		cfg.Pools[0].H2MaxConcurrentStreams, cfg.Pools[0].H2MaxConnections = 1000, 1
		cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
		p := ringHoldProxy(t, cfg)
		cs := make([]net.Conn, ringClients)
		for i := range cs {
			cs[i] = dial(t, p)
			if _, err := fmt.Fprintf(cs[i], "POST /c%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", i, len(ringBody(i))); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every POST's stream to open", func() bool { return entered.Load() == ringClients })
		for i, c := range cs {
			if _, err := io.WriteString(c, ringBody(i)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every body read (held, or sent whole)", func() bool {
			n := 0
			onLoops(p, func(ls *loopState) {
				for _, s := range ls.sessions {
					if s.h2 != nil && (s.hasP || s.reqDone) {
						n++
					}
				}
			})
			return n == ringClients
		})
		ringFree(t, p, cs, free, nil)
	})
}

// holdThenEcho answers /hold once release closes, any other request at
// once, with its path and body.
func holdThenEcho(w http.ResponseWriter, r *http.Request, release chan struct{}) {
	if r.URL.Path == "/hold" {
		<-release
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s", r.URL.Path, body)
}

// ringClients is how many clients the ring-hold tests hold a request
// of: more than the ring's 512 buffers.
const ringClients = 600

// ringBody is client i's request body in the ring-hold tests.
func ringBody(i int) string { return fmt.Sprintf("body of client %d %s", i, strings.Repeat("x", 1000)) }

// ringHoldProxy starts a proxy for cfg with a pool "other" (its server
// answering "other") for the paths under /new/.
func ringHoldProxy(t *testing.T, cfg *Config) *Proxy {
	other := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other") })
	cfg.Pools = append(cfg.Pools, PoolConfig{Name: "other", Servers: Servers(other.addr)})
	cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/new/", Pool: "other"}}
	return startProxy(t, cfg)
}

// ringHold runs the ring-hold tests on cfg, one loop whose pool "app" is
// served by holdThenEcho: a GET /hold (held until release closes; held
// says when it is), then 600 clients' POSTs with their bodies in one
// write (waiting counts those waiting), then ringFree.
func ringHold(t *testing.T, cfg *Config, release chan struct{}, held func(*Proxy) bool, what string, waiting func(*Proxy) int) {
	free := closer(t, release)
	p := ringHoldProxy(t, cfg)
	hold := rawGet(t, p, "/hold")
	waitFor(t, "/hold to reach the server", func() bool { return held(p) })
	cs := make([]net.Conn, ringClients)
	for i := range cs {
		cs[i] = dial(t, p)
		if _, err := fmt.Fprintf(cs[i], "POST /c%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", i, len(ringBody(i)), ringBody(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, what, func() bool { return waiting(p) == ringClients })
	ringFree(t, p, cs, free, hold)
}

// ringFree checks that a new client's GET to pool "other" is answered
// while the POSTs of cs wait, then frees the server (and hold's answer,
// where hold is not nil) and checks that each POST's body reached it
// whole.
func ringFree(t *testing.T, p *Proxy, cs []net.Conn, free func(), hold net.Conn) {
	newClientGet(t, p, "/new/x", "other", fmt.Sprintf("beside %d waiting requests", len(cs)))

	free()
	if hold != nil {
		if st, body := status(t, hold); st != 200 || body != "/hold " {
			t.Fatalf("/hold: %d %q", st, body)
		}
	}
	for i, c := range cs {
		if st, body := status(t, c); st != 200 || body != fmt.Sprintf("/c%d %s", i, ringBody(i)) {
			t.Fatalf("client %d: %d %q", i, st, body)
		}
	}
}

// newClientGet checks that a new client's GET for path is answered 200
// with want, beside what the test holds (beside says what).
func newClientGet(t *testing.T, p *Proxy, path, want, beside string) {
	t.Helper()
	c := dial(t, p)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a new client's GET %s: %v", beside, err)
	}
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err != nil || string(got) != want {
		t.Fatalf("a new client's GET %s: %s, %d bytes of body (want %d), %v", beside, resp.Status, len(got), len(want), err)
	}
}
