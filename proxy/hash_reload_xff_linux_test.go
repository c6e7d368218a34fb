package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestHashReloadRekeysWaiterByForwardedClient: a request (HTTP/1.1,
// HTTP/2) of a client trusted_proxies lists, waiting in its pool's queue
// when a reload makes the pool hash by key client (where it did
// round-robin, or by another seed) and raises its max_conns, goes to the
// server its X-Forwarded-For client has in the new table, as the same
// request arriving after the reload does, not to its direct peer's.
func TestHashReloadRekeysWaiterByForwardedClient(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, client := range []string{"h1", "h2"} {
			for _, change := range []string{"round-robin", "seed"} {
				t.Run(client+"-"+change, func(t *testing.T) { rekeysForwarded(t, b, client, change) })
			}
		}
	})
}

func rekeysForwarded(t *testing.T, b engine.Backend, client, change string) {
	y, z := newCapServer(t, false, 0, true), newCapServer(t, false, 0, true)
	servers := []ServerConfig{{Address: y.addr, Weight: 1}, {Address: z.addr, Weight: 1}}
	// A seed after the reload at which the forwarded client's key and the
	// peer's fall at different servers.
	peer, fwd := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.7")
	var mg *maglev
	var after uint64
	for after = 1; ; after++ {
		mg = newMaglev(&HashConfig{Key: HashKeyClient, TableSize: DefaultHashTable, Seed: after}, servers)
		if mg.table[mg.entry(mg.keyAddr(peer))] != mg.table[mg.entry(mg.keyAddr(fwd))] {
			break
		}
	}
	want, other := y, z
	if mg.table[mg.entry(mg.keyAddr(fwd))] == 1 {
		want, other = z, y
	}
	mk := func(maxConns int, hash bool, seed uint64) *Config {
		cfg := capConfig(b, ModeHTTP, 1, maxConns, y.addr, z.addr)
		cfg.Listeners[0].H2C = client == "h2"
		cfg.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		if hash {
			cfg.Pools[0].Balance = Hash
			cfg.Pools[0].Hash = &HashConfig{Seed: seed}
		}
		return cfg
	}
	p := startProxy(t, mk(1, change == "seed", after+1000))

	// One request held at each server (at max_conns 1), then the waiter.
	var held []net.Conn
	get := func(path string) net.Conn {
		c := dial(t, p)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: %v\r\n\r\n", path, fwd)
		return c
	}
	held = append(held, rawGet(t, p, "/a"), rawGet(t, p, "/b"))
	waitFor(t, "a request at each server", func() bool { return len(y.got()) == 1 && len(z.got()) == 1 })
	var h2done <-chan string
	if client == "h2" {
		hc, url := h2Client(t, p)
		req, _ := http.NewRequest("GET", url+"/waits", nil)
		req.Header.Set("X-Forwarded-For", fwd.String())
		h2done = doAsync(hc, req)
	} else {
		held = append(held, get("/waits"))
	}
	queued(t, p, 1)

	mustReload(t, p, mk(2, true, after))
	waitFor(t, "the waiter at a server", func() bool { return len(y.got())+len(z.got()) == 3 })
	if g := want.got(); len(g) != 2 || g[1] != "/waits" {
		t.Errorf("the waiter went to the server its forwarded client's key does not have (%s got %q, %s got %q)", want.addr, g, other.addr, other.got())
	}
	releaseWaiters(t, []*capServer{y, z}, held, h2done)
}
