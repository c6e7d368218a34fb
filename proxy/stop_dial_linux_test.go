package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// tcpOnLoop returns a client connection to p's listener web (mode tcp)
// that loop k serves: connections landing on another loop are closed.
func tcpOnLoop(t *testing.T, p *Proxy, k int) net.Conn {
	t.Helper()
	var ln *listener
	onLoops(p, func(ls *loopState) {
		if ls.id == k {
			ln = ls.lns[0]
		}
	})
	for range 200 {
		total, mine := p.Totals().Listeners[0].Active, ln.stats[k].active.load()
		c := dialFromCPU(t, p, p.cfg.Engine.CPUs[k])
		waitFor(t, "the client's session", func() bool { return p.Totals().Listeners[0].Active > total })
		if ln.stats[k].active.load() > mine {
			return c
		}
		c.Close()
		waitFor(t, "the client on the other loop to leave", func() bool { return p.Totals().Listeners[0].Active == total })
	}
	t.Fatalf("no connection on loop %d", k)
	return nil
}

// TestDialRefusedAtStopKilled: a request (mode tcp: a client) of an
// HTTP/1.1 pool whose walk goes on as its loop stops, its dial refused
// by the stopping loop, ends as the stop ends those it cuts: KD, no
// response, the client reset, nothing counted against a server or as
// the listener's failed or no-server clients. Here it waits in the
// pool's queue for the one server at its max_conns, whose slot a
// request (a client) on the other loop holds; the stop cuts that one
// there first, and the slot freed wakes the queue's loop, held until the
// engine stopped, which serves the queue as it stops, before it cuts its
// own connections. An HTTP/1.1 request and an HTTP/2 stream were
// answered 503 and logged NS, though a server was up, and counted as the
// proxy's 5xx responses; a tcp client was closed (a FIN: an orderly end
// of the server's stream, where the stop resets what it cuts).
func TestDialRefusedAtStopKilled(t *testing.T) {
	for _, client := range []string{"http1", "h2", "tcp"} {
		t.Run(client, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				var closed atomic.Int64
				mute := newUpstream(t, mutePeer(&closed))
				mode := ModeHTTP
				if client == "tcp" {
					mode = ModeTCP
				}
				cfg := capConfig(b, mode, 2, 1, mute.addr)
				if mode == ModeHTTP {
					cfg.Listeners[0].H2C = client == "h2"
					cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
				}
				p, stop, path := runLogged(t, cfg, 200*time.Millisecond)
				t.Cleanup(func() { stop() })
				if len(p.e.Loops()) < 2 {
					t.Skip("needs two loops (two CPUs): a slot freed on one wakes the other's queue")
				}

				// The first request, on loop 1, holds the server's one
				// slot; the second, on loop 0, waits in the queue.
				var first, c net.Conn
				if client == "tcp" {
					tcpOnLoop(t, p, 1) // open until the test's cleanup
				} else {
					first = onLoop(t, p, 1)
					sendGet(t, first, "/hold")
				}
				// (The slot held is the first request's: a tcp client that
				// landed on loop 0 before it and was closed has let go of
				// its own.)
				waitFor(t, "the first request's connection", func() bool {
					st := serverTotals(p, mute.addr)
					return st.Connections == 1 && st.Active == 1 && p.Totals().Pools[0].QueueLength == 0
				})
				if client == "tcp" {
					c = tcpOnLoop(t, p, 0)
				} else {
					c = onLoop(t, p, 0)
				}
				switch client {
				case "http1":
					sendGet(t, c, "/x")
				case "h2":
					res := getAsync(h2ClientOver(t, c), "http://x/x")
					t.Cleanup(func() { <-res })
				}
				waitFor(t, "the second request in the queue", func() bool { return p.Totals().Pools[0].QueueLength == 1 })

				// Loop 0 is held until the engine stopped and loop 1, as
				// it stopped, cut the first request, freed the slot and
				// posted loop 0 its queue's serve.
				held, release := make(chan struct{}), make(chan struct{})
				free := closer(t, release)
				var q *waitQueue
				p.e.Loops()[0].Post(func() {
					q = &p.loops[0].pools[0].queue().qs[0]
					close(held)
					<-release
				})
				<-held
				if q.kick.Load() {
					t.Fatal("loop 0's queue served before the stop")
				}
				accepted := mute.accepted.Load()
				done := make(chan error, 1)
				go func() { done <- stop() }()
				waitFor(t, "loop 1's stop to free the slot and wake loop 0's queue", func() bool { return q.kick.Load() })
				waitFor(t, "loop 1 past its stop's closes", func() bool { return loopStopping(p, 1) })
				free()
				runEnds(t, done, "the engine's stop")
				if client != "h2" {
					// (The HTTP/2 client's connection is its http.Client's.)
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if n, err := io.Copy(io.Discard, c); n != 0 || !errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("the client read %d bytes, then %v; want a reset", n, err)
					}
				}

				want := map[string]string{"status": "0", "term": "KD"}
				if client == "tcp" {
					want = map[string]string{"server": "-", "term": "KD"}
				}
				var line map[string]any
				for _, m := range logLines(t, path) {
					if field(m, "client") == c.LocalAddr().String() {
						line = m
					}
				}
				if line == nil {
					t.Fatal("no access-log line for the request in the queue")
				}
				checkFields(t, line, want)
				noConnectFailed(t, p)
				lt := p.Totals().Listeners[0]
				if lt.NoServer != 0 || lt.ResponsesProxy[4] != 0 {
					t.Errorf("%d clients counted as finding no server, %d 5xx responses of the proxy; want none", lt.NoServer, lt.ResponsesProxy[4])
				}
				if n := mute.accepted.Load() - accepted; n != 0 {
					t.Errorf("the server was connected %d times at the stop, want 0 (the dial refused)", n)
				}
			})
		})
	}
}
