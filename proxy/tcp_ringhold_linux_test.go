package proxy

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestTCPQueuedRingHold is TestHTTPQueuedRingHold in mode tcp: 600
// clients of one loop wait in their pool's queue (max_conns 1, its one
// slot held by a client whose tunnel stays open), each holding the bytes
// it sent first, more clients than the ring's 512 buffers; all of them
// reach the queue, a new client of another listener and pool on the same
// loop is served meanwhile, and once the slot frees each client's bytes
// reach the (echo) server whole, also from clients that sent more while
// they waited or their FIN; clients reset while they waited leave the
// queue. (Before: each queued client held the receive buffer its first
// bytes came in, and with the ring taken the loop read no more clients
// on the uring backends.)
func TestTCPQueuedRingHold(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newCapServer(t, true, 0, false)
		other := newUpstream(t, nil)
		cfg := capConfig(b, ModeTCP, 1, 1, up.addr)
		cfg.Pools[0].QueueTimeout = Duration(time.Minute)
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "other", Servers: Servers(other.addr)})
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "other", Listen: "127.0.0.1:0", Pool: "other", ConnectTimeout: cfg.Listeners[0].ConnectTimeout})
		p := startProxy(t, cfg)
		holder := dial(t, p)
		if err := roundTrip(holder, "x"); err != nil {
			t.Fatal(err)
		}
		cs := make([]*net.TCPConn, ringClients)
		for i := range cs {
			cs[i] = dial(t, p)
			if _, err := io.WriteString(cs[i], ringBody(i)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every client to wait in the queue, its bytes held", func() bool { return tcpQueuedHeld(p) == ringClients })

		// Clients 4k+1 send more (held by the engine: they are not read),
		// 4k+2 their FIN, 4k+3 every 40th reset.
		want := make([]string, ringClients)
		reset := 0
		for i, c := range cs {
			want[i] = ringBody(i)
			switch {
			case i%4 == 1:
				more := fmt.Sprintf(" and more of client %d", i)
				if _, err := io.WriteString(c, more); err != nil {
					t.Fatal(err)
				}
				want[i] += more
			case i%4 == 2:
				c.CloseWrite()
			case i%40 == 3:
				c.SetLinger(0)
				c.Close()
				want[i], reset = "", reset+1
			}
		}
		waitFor(t, "the reset clients to leave the queue", func() bool {
			return poolTotals(p, "app").QueueLength == int64(ringClients-reset)
		})
		nc, err := net.DialTimeout("tcp", p.Addr("other").String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := roundTrip(nc, "a new client"); err != nil {
			t.Fatalf("a new client beside %d waiting clients: %v", ringClients-reset, err)
		}

		holder.CloseWrite() // (the echo ends: its slot is let go of)
		var wg sync.WaitGroup
		errs := make(chan error, ringClients)
		for i, c := range cs {
			if want[i] == "" {
				continue
			}
			wg.Go(func() {
				if err := echoedWhole(c, want[i], i%4 == 2); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if pt := poolTotals(p, "app"); pt.QueueLength != 0 || pt.QueueTimeouts != 0 {
			t.Errorf("queue %d, timeouts %d: want 0 and 0", pt.QueueLength, pt.QueueTimeouts)
		}
	})
}

// tcpQueuedHeld returns how many mode tcp clients of p wait in a pool's
// queue holding bytes they sent.
func tcpQueuedHeld(p *Proxy) int {
	n := 0
	onLoops(p, func(ls *loopState) {
		for _, pl := range ls.pools {
			for w := pl.shared.q.qs[ls.id].head; w != nil; w = w.next {
				if s, ok := w.of.(*session); ok && s.hasP {
					n++
				}
			}
		}
	})
	return n
}

// echoedWhole reads want back from c (an echo through the proxy), sends
// c's FIN where finSent is false, and checks that nothing follows.
func echoedWhole(c *net.TCPConn, want string, finSent bool) error {
	c.SetDeadline(time.Now().Add(time.Minute))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read %q of its echo: %w", got, err)
	}
	if string(got) != want {
		return fmt.Errorf("echoed %q, want %q", got, want)
	}
	if !finSent {
		c.CloseWrite()
	}
	if rest, err := io.ReadAll(c); len(rest) > 0 || err != nil {
		return fmt.Errorf("after its echo: %q, %v; want EOF", rest, err)
	}
	return nil
}
