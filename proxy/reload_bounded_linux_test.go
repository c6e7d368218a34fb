package proxy

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadBounded: 1,000 reloads, each making the pools and one
// listener anew, with a request between each two, leave what the loops
// hold bounded: the pools and listeners of the generations no connection
// uses any more are reclaimed (weak pointers to them go nil after a GC),
// and the heap does not grow with the reloads. A client connection open
// on the first generation (mode tcp, its listener since in mode http and
// back 500 times) and a kept HTTP client connection go on working
// throughout, and the first generation's pool is reclaimed once that
// connection ends.
func TestReloadBounded(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		hu, eu := newHTTPUpstream(t, reloadHTTPServer("h")), newUpstream(t, nil)
		cfgOf := func(i int, raw string) *Config {
			cfg := httpConfig(b, hu.addr)
			cfg.Pools = append(cfg.Pools, PoolConfig{Name: "echo", Servers: Servers(eu.addr)})
			cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "raw", Listen: raw, Pool: "echo", ConnectTimeout: Duration(2 * time.Second)})
			if i%2 == 1 {
				for k := range cfg.Pools {
					cfg.Pools[k].Balance = LeastConn // a new pool, its server kept
				}
				cfg.Listeners[1].Mode = ModeHTTP // a new listener on the same socket
			}
			return cfg
		}
		p := startProxy(t, cfgOf(0, "127.0.0.1:0"))
		raw := p.Addr("raw").String()
		p.mu.RLock()
		first := weak.Make(p.pools[1])
		firstLn := weak.Make(p.lns[1])
		p.mu.RUnlock()

		tc, err := net.DialTimeout("tcp", raw, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		if err := roundTrip(tc, "first generation"); err != nil {
			t.Fatal(err)
		}
		hc := dial(t, p)
		br := bufio.NewReader(hc)
		get1 := func(i int) {
			t.Helper()
			fmt.Fprintf(hc, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			hc.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, body := readResponseFrom(t, hc, br, "GET"); body != "h" {
				t.Fatalf("request %d: %q", i, body)
			}
		}
		heap := func() uint64 {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapInuse
		}
		const n = 1000
		var base uint64
		var mid weak.Pointer[pool]
		var midLn weak.Pointer[listener]
		for i := 1; i <= n; i++ {
			mustReload(t, p, cfgOf(i, raw))
			get1(i)
			switch {
			case i == 100:
				base = heap()
			case i == 500:
				p.mu.RLock()
				mid, midLn = weak.Make(p.pools[1]), weak.Make(p.lns[1])
				p.mu.RUnlock()
			case i%100 == 0:
				if err := roundTrip(tc, fmt.Sprint("after reload ", i)); err != nil {
					t.Fatalf("the first generation's connection, after %d reloads: %v", i, err)
				}
			}
		}
		grown := int64(heap()) - int64(base)
		t.Logf("heap in use after %d reloads: %+d bytes since the 100th", n, grown)
		if grown > 256<<10 {
			t.Errorf("heap in use grew %d bytes over %d reloads", grown, n-100)
		}
		if mid.Value() != nil || midLn.Value() != nil {
			t.Errorf("the 500th generation's pool or listener, which no connection uses, is still held")
		}
		if first.Value() == nil || firstLn.Value() == nil {
			t.Fatal("the first generation's pool or listener was reclaimed while a connection uses it")
		}
		if err := roundTrip(tc, "last"); err != nil {
			t.Fatal(err)
		}
		open := p.Engine().Stats().Open
		tc.Close()
		waitFor(t, "the first generation's connection to end", func() bool { return p.Engine().Stats().Open == open-2 })
		if heap(); first.Value() != nil || firstLn.Value() != nil {
			t.Errorf("the first generation's pool or listener is still held after its last connection ended")
		}
	})
}
