package proxy

import (
	"net"
	"net/netip"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestHashReloadRekeysWaiter: a request (HTTP/1.1, HTTP/2) or mode tcp
// client waiting in its pool's queue when a reload makes the pool hash
// by another seed, or hash where it did round-robin, and raises its
// max_conns, goes to the server its key (its client: key client) has in
// the new table, as one arriving after the reload does, and not where
// the hash it got before (none, or the old seed's) falls in it.
func TestHashReloadRekeysWaiter(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, client := range []string{"h1", "h2", "tcp"} {
			for _, change := range []string{"round-robin", "seed"} {
				t.Run(client+"-"+change, func(t *testing.T) { rekeysWaiter(t, b, client, change) })
			}
		}
	})
}

func rekeysWaiter(t *testing.T, b engine.Backend, client, change string) {
	tcp := client == "tcp"
	y, z := newCapServer(t, tcp, 0, !tcp), newCapServer(t, tcp, 0, !tcp)
	servers := []ServerConfig{{Address: y.addr, Weight: 1}, {Address: z.addr, Weight: 1}}
	// The seeds before (round-robin: none) and after, such that the
	// waiter's hash before (0 without one) falls at another server in
	// the new table than its key's.
	peer := netip.MustParseAddr("127.0.0.1")
	var before, after uint64
	var mg *maglev
	for after = 1; ; after++ {
		mg = newMaglev(&HashConfig{Key: HashKeyClient, TableSize: DefaultHashTable, Seed: after}, servers)
		stale := uint64(0)
		if change == "seed" {
			before = after + 1000
			stale = (&maglev{seed: before}).keyAddr(peer)
		}
		if mg.table[mg.entry(stale)] != mg.table[mg.entry(mg.keyAddr(peer))] {
			break
		}
	}
	want, other := y, z
	if mg.table[mg.entry(mg.keyAddr(peer))] == 1 {
		want, other = z, y
	}
	mk := func(maxConns int, hash bool, seed uint64) *Config {
		mode := ModeHTTP
		if tcp {
			mode = ModeTCP
		}
		cfg := capConfig(b, mode, 1, maxConns, y.addr, z.addr)
		cfg.Listeners[0].H2C = client == "h2"
		if hash {
			cfg.Pools[0].Balance = Hash
			cfg.Pools[0].Hash = &HashConfig{Seed: seed}
		}
		return cfg
	}
	p := startProxy(t, mk(1, change == "seed", before))

	// One connection held at each server (at max_conns 1), then the
	// waiter.
	var held []net.Conn
	var h2done <-chan string
	if tcp {
		held = append(held, dial(t, p), dial(t, p))
		waitFor(t, "a client at each server", func() bool { return y.open.Load() == 1 && z.open.Load() == 1 })
		held = append(held, dial(t, p))
	} else {
		held = append(held, rawGet(t, p, "/a"), rawGet(t, p, "/b"))
		waitFor(t, "a request at each server", func() bool { return len(y.got()) == 1 && len(z.got()) == 1 })
		if client == "h2" {
			hc, url := h2Client(t, p)
			h2done = getAsync(hc, url+"/waits")
		} else {
			held = append(held, rawGet(t, p, "/waits"))
		}
	}
	queued(t, p, 1)

	mustReload(t, p, mk(2, true, after))
	if tcp {
		waitFor(t, "the waiter connected", func() bool { return y.open.Load()+z.open.Load() == 3 })
		if want.open.Load() != 2 || other.open.Load() != 1 {
			t.Errorf("the waiter went to the server its key does not have (%s: %d connections, %s: %d)",
				want.addr, want.open.Load(), other.addr, other.open.Load())
		}
		return // (the echo servers end at the clients' close)
	}
	waitFor(t, "the waiter at a server", func() bool { return len(y.got())+len(z.got()) == 3 })
	if g := want.got(); len(g) != 2 || g[1] != "/waits" {
		t.Errorf("the waiter went to the server its key does not have (%s got %q, %s got %q)", want.addr, g, other.addr, other.got())
	}
	releaseWaiters(t, []*capServer{y, z}, held, h2done)
}

// releaseWaiters lets the requests the servers hold answer, and checks
// that each held client (HTTP/1.1 connections, and the HTTP/2 stream that
// waited where h2done is not nil) got 200.
func releaseWaiters(t *testing.T, servers []*capServer, held []net.Conn, h2done <-chan string) {
	t.Helper()
	for _, cs := range servers {
		for range cs.got() {
			cs.hold <- struct{}{}
		}
	}
	for _, c := range held {
		if st, _ := status(t, c); st != 200 {
			t.Errorf("status %d", st)
		}
	}
	if h2done != nil {
		if got := <-h2done; got != "200 /waits" {
			t.Errorf("the waiting stream: %s", got)
		}
	}
}
