package proxy

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadCheckInProgress: a reload that restarts a pool's health
// checker does not wait for a check in progress (a connect to a server
// that does not answer, or an HTTP request to one that answers nothing,
// bounded by a 30 s timeout): the old checker's
// check is cut short (its context canceled) and says nothing: the kept
// server is neither failed nor marked down by it.
func TestReloadCheckInProgress(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, typ := range []string{HealthTCP, HealthHTTP} {
			// tcp: a connect to a server that does not answer; http: a
			// request to one that accepts and answers nothing.
			var silent string
			var inProgress func() bool
			if typ == HealthTCP {
				silent = blackholeAddr(t)
				inProgress = func() bool { return synSent(t, silent) }
			} else {
				var accepted *atomic.Int64
				silent, accepted = mute(t)
				inProgress = func() bool { return accepted.Load() > 0 }
			}
			u := newUpstream(t, nil) // (a pool changed: its checker restarted)
			health := func(servers ...string) *Config {
				cfg := testConfig(b, servers...)
				cfg.Pools[0].Health = &HealthConfig{Type: typ, Interval: Duration(30 * time.Second), Timeout: Duration(30 * time.Second), Rise: 1, Fall: 1}
				return cfg
			}
			p := startProxy(t, health(silent))
			waitFor(t, typ+": the check in progress", inProgress)
			start := time.Now()
			mustReload(t, p, health(silent, u.addr))
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s: Reload took %v: it waited for the check in progress", typ, d)
			}
			if st := serverTotals(p, silent); !st.Up || st.CheckFailures != 0 {
				t.Errorf("%s: the kept server after the reload: %+v, want up, no check failed (the check cut short says nothing)", typ, st)
			}
		}
	})
}

// synSent reports whether a socket of this host is connecting to addr
// (state SYN_SENT in /proc/net/tcp).
func synSent(t *testing.T, addr string) bool {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	a4 := ap.Addr().As4()
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a4[3], a4[2], a4[1], a4[0], ap.Port())
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 3 && f[2] == want && f[3] == "02" {
			return true
		}
	}
	return false
}

// mute returns the address of a server that accepts connections and
// answers nothing (it reads them until they close), and its count of
// connections accepted.
func mute(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String(), accepted
}
