package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// h2Waits returns, for each server of p's first pool, the requests
// waiting in its queues and its HTTP/2 connections, over the loops (read
// on them).
func h2Waits(p *Proxy) (wait, conns []int) {
	pl := p.pools[0]
	wait, conns = make([]int, len(pl.servers)), make([]int, len(pl.servers))
	for k, el := range p.e.Loops() {
		done := make(chan struct{})
		el.Post(func() {
			for i, srv := range pl.servers {
				wait[i] += len(srv.loops[k].h2.wait)
				conns[i] += len(srv.loops[k].h2.conns)
			}
			close(done)
		})
		<-done
	}
	return wait, conns
}

// loseH2Writes makes every write to p's HTTP/2 connections open now
// fail, as a write the engine could not queue does (read on the loops).
func loseH2Writes(p *Proxy) {
	lost := errors.New("test: write lost")
	for k, el := range p.e.Loops() {
		done := make(chan struct{})
		el.Post(func() {
			for _, srv := range p.pools[0].servers {
				for _, u := range srv.loops[k].h2.conns {
					u.writev = func([][]byte) (int, error) { return 0, lost }
				}
			}
			close(done)
		})
		<-done
	}
}

// TestH2UpWaitRecordAfterRetry: an HTTP/1.1 client's PUT whose stream
// opened at once on a server's connection, and whose first write there
// was lost (the connection fails, the stream is reset, the request is
// retried), waits in the other server's queue, a connection to it on its
// way; the client's reset takes it out of that queue (the record of it
// was overwritten by the first server's, whose queue it was not in, and
// the request stayed in the other's, to be started after its client
// went).
func TestH2UpWaitRecordAfterRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var silent [2]atomic.Bool
		var ups [2]*upstream
		for i := range ups {
			ups[i] = newUpstream(t, func(c net.Conn) {
				if silent[i].Load() {
					io.Copy(io.Discard, c) // (no SETTINGS: the connection stays on its way)
					return
				}
				serveH2(c, echoTargetApp{})
			})
		}
		cfg := h2cPoolConfig(b, ups[0].addr, ups[1].addr)
		cfg.Pools[0].H2MaxConnections = 1
		cfg.Listeners[0].ConnectTimeout = Duration(30 * time.Second)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"reset"}}
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		// Round-robin: a GET to each server opens a connection to it.
		var order [2]int
		for k := range 2 {
			before := ups[1].accepted.Load()
			if st, got := send(t, c, br, "GET", nil); st != 200 || got != "GET /" {
				t.Fatalf("GET %d: %d %q", k, st, got)
			}
			if ups[1].accepted.Load() > before {
				order[k] = 1
			}
		}
		first, other := order[0], order[1]
		if first == other || ups[0].accepted.Load() != 1 || ups[1].accepted.Load() != 1 {
			t.Fatalf("the GETs went to servers %v (connections accepted: %d, %d)", order, ups[0].accepted.Load(), ups[1].accepted.Load())
		}
		// The other server's connection goes, and the next one to it stays
		// silent; the next request goes to the first server, whose
		// connection loses its writes.
		silent[other].Store(true)
		ups[other].mu.Lock()
		for uc := range ups[other].conns {
			uc.Close()
		}
		ups[other].mu.Unlock()
		waitFor(t, "the proxy to let go of the closed connection", func() bool { _, n := h2Waits(p); return n[other] == 0 })
		loseH2Writes(p)
		fmt.Fprintf(c, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
		waitFor(t, "the PUT to wait for the other server", func() bool { w, _ := h2Waits(p); return w[other] == 1 })
		c.SetLinger(0) // (a reset: a FIN after a whole request is a half close)
		c.Close()
		// (The silent connection's connect timeout, 30s, would take it out
		// of the queue too: the check ends well before.)
		end := time.Now().Add(3 * time.Second)
		for w, _ := h2Waits(p); w[other] != 0; w, _ = h2Waits(p) {
			if time.Now().After(end) {
				t.Fatalf("3s after its client's reset the PUT still waits for server %d: queues %v", other, w)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
