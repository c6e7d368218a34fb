package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// hashServers starts n HTTP servers that answer with their name (s0,
// s1, ...) and returns their addresses and names by address.
func hashServers(t *testing.T, n int) ([]string, map[string]string) {
	var addrs []string
	names := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })
		addrs = append(addrs, u.addr)
		names[u.addr] = name
	}
	return addrs, names
}

// namedUpstreams starts n TCP servers that write their name (s0, s1, ...)
// to each connection and read it to its end, and returns them, their
// addresses and names by address.
func namedUpstreams(t *testing.T, n int) ([]*upstream, []string, map[string]string) {
	var ups []*upstream
	var addrs []string
	names := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		u := newUpstream(t, func(c net.Conn) {
			io.WriteString(c, name)
			io.Copy(io.Discard, c)
		})
		ups = append(ups, u)
		addrs = append(addrs, u.addr)
		names[u.addr] = name
	}
	return ups, addrs, names
}

// hashWant returns the server's name key h goes to in p's first pool with
// the servers skip lists down: the first of its table walk.
func hashWant(p *Proxy, names map[string]string, h func(*maglev) uint64, skip ...int) string {
	p.mu.RLock()
	pl := p.pools[0]
	p.mu.RUnlock()
	d := dialing{start: pl.maglev.entry(h(pl.maglev))}
walk:
	for {
		i, ok := d.step(pl)
		if !ok {
			return ""
		}
		for _, s := range skip {
			if s == i {
				continue walk
			}
		}
		return names[pl.servers[i].addr]
	}
}

// TestHashHTTP: a pool with balance hash by X-User sends each request to
// its key's server, over two loops: each request of one kept-alive
// HTTP/1.1 connection by its own key (not the connection's first), an
// HTTP/2 client's streams likewise, and a second proxy of the same config
// the same; 30 keys reach all 3 servers; a request without X-User goes
// by its client.
func TestHashHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		addrs, names := hashServers(t, 3)
		mk := func() *Config {
			cfg := h2cConfig(b, addrs...)
			cfg.Engine.CPUs = []int{0, 1}
			cfg.Pools[0].Balance = Hash
			cfg.Pools[0].Hash = &HashConfig{Key: "header:X-User", Seed: 42}
			return cfg
		}
		p1, p2 := startProxy(t, mk()), startProxy(t, mk())
		want := func(k int) string {
			return hashWant(p1, names, func(mg *maglev) uint64 { return sipHash(mg.seed, 0, fmt.Appendf(nil, "user-%d", k)) })
		}
		const keys = 30
		hit := map[string]int{}
		for k := range keys {
			hit[want(k)]++
		}
		if len(hit) != 3 {
			t.Fatalf("30 keys map to %v: want all 3 servers, for the test to mean anything", hit)
		}

		// One kept-alive HTTP/1.1 connection, two rounds of keys, to each
		// proxy.
		for _, p := range []*Proxy{p1, p2} {
			c := dial(t, p)
			br := bufio.NewReader(c)
			for k := range 2 * keys {
				fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: h\r\nX-User: user-%d\r\n\r\n", k%keys)
				resp, body := readResponseFrom(t, c, br, "GET")
				if resp.StatusCode != 200 || body != want(k%keys) || resp.Close {
					t.Fatalf("request %d on one connection (key user-%d): %d %q (close %v), want 200 %q kept", k, k%keys, resp.StatusCode, body, resp.Close, want(k%keys))
				}
			}
		}

		// HTTP/2: a connection's streams, each by its key.
		hc, base := h2Client(t, p1)
		for k := range keys {
			req, _ := http.NewRequest("GET", base+"/y", nil)
			req.Header.Set("X-User", fmt.Sprintf("user-%d", k))
			if resp, body := do(t, hc, req); resp.StatusCode != 200 || string(body) != want(k) {
				t.Fatalf("HTTP/2 key user-%d: %d %q, want 200 %q", k, resp.StatusCode, body, want(k))
			}
		}

		// /metrics has each server's entries, /debug/config the section
		// with its defaults.
		m := scrape(t, p1)
		sum := 0.0
		for _, a := range addrs {
			v := m[`spindle_proxy_server_hash_entries{pool="app",server="`+a+`"}`]
			if v < 20000 || v > 23000 {
				t.Errorf("server %s: %v entries, want about a third of 65537", a, v)
			}
			sum += v
		}
		if sum != DefaultHashTable {
			t.Errorf("entries sum to %v, want %d", sum, DefaultHashTable)
		}
		resp, err := http.Get("http://" + p1.AdminAddr().String() + "/debug/config")
		if err != nil {
			t.Fatal(err)
		}
		var dc struct {
			Pools []struct {
				Balance string
				Hash    *HashConfig
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&dc)
		resp.Body.Close()
		if err != nil || dc.Pools[0].Balance != Hash || dc.Pools[0].Hash == nil || *dc.Pools[0].Hash != (HashConfig{Key: "header:X-User", TableSize: DefaultHashTable, Seed: 42}) {
			t.Errorf("/debug/config: %+v, %v", dc, err)
		}

		// No X-User: the client's address is the key.
		cl, base := client(t, p2)
		byClient := hashWant(p1, names, func(mg *maglev) uint64 { return mg.keyAddr(netip.MustParseAddr("127.0.0.1")) })
		for range 5 {
			if resp, body := get(t, cl, base+"/z"); resp.StatusCode != 200 || body != byClient {
				t.Fatalf("without X-User: %d %q, want 200 %q (by the client)", resp.StatusCode, body, byClient)
			}
		}
	})
}

// TestHashTCP: a mode tcp listener's hash pool sends each client address
// to its server over two loops (clients from 127.0.0.10 to .29, two
// connections each); a server that refuses has its clients walk on to the
// next entries' servers, the others' clients staying where they were.
func TestHashTCP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ups, addrs, names := namedUpstreams(t, 3)
		cfg := testConfig(b, addrs...)
		cfg.Engine.CPUs = []int{0, 1}
		cfg.Pools[0].Balance = Hash
		p := startProxy(t, cfg)
		src := func(j int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + j)}) }
		got := func(j int) string {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src(j).AsSlice()}, Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", p.Addr("web").String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 2)
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatalf("client %v: %v", src(j), err)
			}
			return string(buf)
		}
		const clients = 20
		hit := map[string]bool{}
		before := make([]string, clients)
		for j := range clients {
			w := hashWant(p, names, func(mg *maglev) uint64 { return mg.keyAddr(src(j)) })
			before[j] = w
			hit[w] = true
			for range 2 {
				if g := got(j); g != w {
					t.Fatalf("client %v: server %s, want %s", src(j), g, w)
				}
			}
		}
		if len(hit) < 2 {
			t.Fatalf("20 clients map to %v: want 2 servers at least, for the test to mean anything", hit)
		}
		ups[1].stop() // s1 refuses from now on
		moved := 0
		for j := range clients {
			w := hashWant(p, names, func(mg *maglev) uint64 { return mg.keyAddr(src(j)) }, 1)
			if before[j] != "s1" && w != before[j] {
				t.Fatalf("client %v: its walk without s1 is %s, not %s", src(j), w, before[j])
			}
			if before[j] == "s1" {
				moved++
			}
			if g := got(j); g != w {
				t.Fatalf("s1 refusing, client %v (was on %s): server %s, want %s", src(j), before[j], g, w)
			}
		}
		if moved == 0 {
			t.Log("no client was on s1")
		}
	})
}

// TestHashReload: a reload that removes a server rebuilds the table: the
// removed server's keys go to the others, and the others' keys (all but
// few: Maglev's) stay; /metrics shows the new shares; a reload back
// restores the first mapping.
func TestHashReload(t *testing.T) {
	addrs, names := hashServers(t, 4)
	mk := func(servers ...string) *Config {
		cfg := httpConfig(engine.BackendEpoll, servers...)
		cfg.Pools[0].Balance = Hash
		cfg.Pools[0].Hash = &HashConfig{Key: "query:u"}
		return cfg
	}
	p := startProxy(t, mk(addrs...))
	cl, base := client(t, p)
	const keys = 200
	ask := func(k int) string {
		resp, body := get(t, cl, fmt.Sprintf("%s/?u=%d", base, k))
		if resp.StatusCode != 200 {
			t.Fatalf("key %d: %d", k, resp.StatusCode)
		}
		return body
	}
	before := make([]string, keys)
	for k := range keys {
		before[k] = ask(k)
	}
	if err := p.Reload(mk(addrs[0], addrs[1], addrs[3])); err != nil {
		t.Fatal(err)
	}
	gone, moved := names[addrs[2]], 0
	for k := range keys {
		got := ask(k)
		if got == gone {
			t.Fatalf("key %d still on the removed server", k)
		}
		if before[k] != gone && got != before[k] {
			moved++
		}
	}
	if moved > keys/20 {
		t.Errorf("%d of %d keys of the servers kept moved, want 5%% at most", moved, keys)
	}
	m := scrape(t, p)
	if v := m[`spindle_proxy_server_hash_entries{pool="app",server="`+addrs[0]+`"}`]; v < 21000 || v > 22700 {
		t.Errorf("after the reload: server 0 has %v entries, want about a third", v)
	}
	if err := p.Reload(mk(addrs...)); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if got := ask(k); got != before[k] {
			t.Fatalf("key %d: %s after the reload back, %s before", k, got, before[k])
		}
	}
}

// TestHashFull: a server at its max_conns is skipped for the next entry's
// server with room, as a server down is: a second client of a key whose
// server holds its one slot goes there, and the key comes back once the
// slot is let go of.
func TestHashFull(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		_, addrs, names := namedUpstreams(t, 3)
		cfg := testConfig(b, addrs...)
		cfg.Pools[0].Balance = Hash
		cfg.Pools[0].MaxConns = 1
		p := startProxy(t, cfg)
		open := func() (net.Conn, string) {
			c := dial(t, p)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 2)
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
			return c, string(buf)
		}
		key := func(mg *maglev) uint64 { return mg.keyAddr(netip.MustParseAddr("127.0.0.1")) }
		own := hashWant(p, names, key)
		var ownIdx int
		for i, a := range addrs {
			if names[a] == own {
				ownIdx = i
			}
		}
		next := hashWant(p, names, key, ownIdx)
		c1, s1 := open()
		if s1 != own {
			t.Fatalf("first client: %s, want %s", s1, own)
		}
		c2, s2 := open()
		if s2 != next {
			t.Fatalf("second client, %s full: %s, want %s (the next entry's)", own, s2, next)
		}
		c1.Close()
		c2.Close()
		waitFor(t, "the slots let go of", func() bool {
			for _, a := range addrs {
				if serverTotals(p, a).Connections != 0 {
					return false
				}
			}
			return true
		})
		if _, s3 := open(); s3 != own {
			t.Fatalf("a client after the slot was let go of: %s, want %s", s3, own)
		}
	})
}

// TestHashBoundedHTTP: with balance_factor 125 over 3 servers, a key's
// second request while its first is in flight on the key's server goes to
// the next entry's (the bound: ceil(1.25*2/3) = 1 in flight each); once
// the first is answered, the key's requests go to its server again.
func TestHashBoundedHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		var addrs []string
		names := map[string]string{}
		for i := range 3 {
			name := fmt.Sprintf("s%d", i)
			u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					<-release
				}
				io.WriteString(w, name)
			})
			addrs = append(addrs, u.addr)
			names[u.addr] = name
		}
		cfg := httpConfig(b, addrs...)
		cfg.Pools[0].Balance = Hash
		cfg.Pools[0].Hash = &HashConfig{Key: "header:X-User", BalanceFactor: 125}
		p := startProxy(t, cfg)
		key := func(mg *maglev) uint64 { return sipHash(mg.seed, 0, []byte("hot")) }
		own := hashWant(p, names, key)
		ownIdx := 0
		for i, a := range addrs {
			if names[a] == own {
				ownIdx = i
			}
		}
		next := hashWant(p, names, key, ownIdx)
		send := func(c net.Conn, path string) {
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: h\r\nX-User: hot\r\n\r\n", path)
		}
		c1, c2 := dial(t, p), dial(t, p)
		send(c1, "/hold")
		waitFor(t, "the held request in flight", func() bool { return serverTotals(p, addrs[ownIdx]).Active == 1 })
		send(c2, "/x")
		if resp, body := readResponse(t, c2, "GET"); resp.StatusCode != 200 || body != next {
			t.Fatalf("second request of the key, its server holding one: %d %q, want %q (the next entry's)", resp.StatusCode, body, next)
		}
		close(release)
		if resp, body := readResponse(t, c1, "GET"); resp.StatusCode != 200 || body != own {
			t.Fatalf("held request: %d %q, want %q", resp.StatusCode, body, own)
		}
		waitFor(t, "nothing in flight", func() bool { return serverTotals(p, addrs[ownIdx]).Active == 0 })
		send(c2, "/y")
		if resp, body := readResponse(t, c2, "GET"); resp.StatusCode != 200 || body != own {
			t.Fatalf("after: %d %q, want %q", resp.StatusCode, body, own)
		}
	})
}

// TestHashHostKey: key header:Host sends a host to one server whichever
// protocol its clients speak: an HTTP/1.1 request's Host field and an
// HTTP/2 request's :authority (which a client sends instead of Host, as
// RFC 9113 8.3.1 asks) are hashed alike (HTTP/2 clients went by their
// address before, apart from their host's HTTP/1.1 clients).
func TestHashHostKey(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		addrs, names := hashServers(t, 3)
		cfg := h2cConfig(b, addrs...)
		cfg.Pools[0].Balance = Hash
		cfg.Pools[0].Hash = &HashConfig{Key: "header:Host", Seed: 7}
		p := startProxy(t, cfg)
		want := func(k int) string {
			return hashWant(p, names, func(mg *maglev) uint64 { return sipHash(mg.seed, 0, fmt.Appendf(nil, "host-%d", k)) })
		}
		const keys = 12
		hit := map[string]bool{}
		for k := range keys {
			hit[want(k)] = true
		}
		if len(hit) < 2 {
			t.Fatalf("%d hosts map to %v: want more than one server, for the test to mean anything", keys, hit)
		}
		c := dial(t, p)
		br := bufio.NewReader(c)
		hc, base := h2Client(t, p)
		for k := range keys {
			fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: host-%d\r\n\r\n", k)
			if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || body != want(k) {
				t.Errorf("HTTP/1.1 Host host-%d: %d %q, want 200 %q", k, resp.StatusCode, body, want(k))
			}
			req, _ := http.NewRequest("GET", base+"/x", nil)
			req.Host = fmt.Sprintf("host-%d", k)
			if resp, body := do(t, hc, req); resp.StatusCode != 200 || string(body) != want(k) {
				t.Errorf("HTTP/2 :authority host-%d: %d %q, want 200 %q", k, resp.StatusCode, body, want(k))
			}
		}
	})
}

// TestHashAllocs: requests to a hash pool take no allocation
// (TestHTTPAllocs and TestH2Allocs with balance hash): by header:Host
// (the HTTP/2 client's :authority), and by client behind trusted_proxies
// (X-Forwarded-For read through the field closure).
func TestHashAllocs(t *testing.T) {
	for _, key := range []string{"header:Host", "client"} {
		hash := func(cfg *Config) {
			cfg.Pools[0].Balance = Hash
			cfg.Pools[0].Hash = &HashConfig{Key: key, TableSize: 251}
			cfg.Listeners[0].TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}
		t.Run("h1-"+key, func(t *testing.T) { httpAllocs(t, engine.BackendEpoll, hash) })
		t.Run("h2-"+key, func(t *testing.T) {
			cfg := h2cConfig(engine.BackendEpoll, newUpstream(t, rawHTTPServer).addr)
			hash(cfg)
			h2AllocsZero(t, startProxy(t, cfg), 10)
		})
	}
}
