package proxy

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// mutePeer returns a server that accepts and reads all, but never writes
// (a hung server, or an HTTP/1.1 server waiting for the rest of what it
// takes for a request), counting the connections whose peer closed them
// in closed.
func mutePeer(closed *atomic.Int64) func(net.Conn) {
	return func(c net.Conn) {
		io.Copy(io.Discard, c)
		closed.Add(1)
	}
}

// TestH2UpNoSettingsFailsConnect: a server of an h2c pool that accepts
// the connection but never sends its SETTINGS has failed to connect
// once connect_timeout has run out: the connection is closed, counted as
// a failed connect (passive health ejects the server), and the requests
// waiting for it go to the next server, else get 502 SC, in a drain too.
// They waited for their response_timeout (504), the connection stayed
// open with no idle time (only h2_ping_interval would have closed it),
// the server was never ejected, and a drain was held to its end by it.
// A server that answers the preface with HTTP/1.1 and closes failed to
// connect too: it counted as connected, and was never ejected.
func TestH2UpNoSettingsFailsConnect(t *testing.T) {
	cfgOf := func(b engine.Backend, servers ...string) *Config {
		cfg := h2cPoolConfig(b, servers...)
		cfg.Listeners[0].ConnectTimeout = Duration(200 * time.Millisecond)
		cfg.Listeners[0].ResponseTimeout = Duration(5 * time.Second)
		return cfg
	}
	// A server that never speaks HTTP/2, silent or answering the preface
	// as HTTP/1.1, beside a good one: ejected at its first failed connect,
	// every request served by the other.
	for _, bad := range []struct {
		name   string
		handle func(c net.Conn, closed *atomic.Int64)
	}{
		{"mute server", func(c net.Conn, closed *atomic.Int64) { mutePeer(closed)(c) }},
		{"http1 server", func(c net.Conn, _ *atomic.Int64) {
			c.Read(make([]byte, 64)) // the preface's first bytes
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				var closed atomic.Int64
				up := newUpstream(t, func(c net.Conn) { bad.handle(c, &closed) })
				var first atomic.Bool
				good := newUpstream(t, rawH2Up("", &first))
				cfg := cfgOf(b, up.addr, good.addr)
				cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Minute)}
				p := startProxy(t, cfg)
				c, base := h2Client(t, p)
				for k := range 4 {
					if resp, body := do(t, c, mustReq(t, "GET", base+"/x", nil)); resp.StatusCode != 200 || string(body) != "ok" {
						t.Fatalf("request %d: %d %q, want 200 ok from the other server", k, resp.StatusCode, body)
					}
				}
				st := serverTotals(p, up.addr)
				if st.Failures != 1 || st.EjectionsConnect != 1 || st.Connects != 0 || up.accepted.Load() != 1 {
					t.Errorf("the %s: %d failures, %d connect ejections, %d connects, %d accepted; want 1, 1, 0, 1",
						bad.name, st.Failures, st.EjectionsConnect, st.Connects, up.accepted.Load())
				}
				if bad.name == "mute server" {
					waitFor(t, "the mute server's connection closed", func() bool { return closed.Load() == 1 })
				}
			})
		})
	}
	t.Run("only server", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			var closed atomic.Int64
			mute := newUpstream(t, mutePeer(&closed))
			p := startProxy(t, cfgOf(b, mute.addr))
			c, base := h2Client(t, p)
			if resp, _ := do(t, c, mustReq(t, "GET", base+"/x", nil)); resp.StatusCode != 502 {
				t.Fatalf("request: %d, want 502", resp.StatusCode)
			}
			if n := p.Totals().Listeners[0].Failed; n != 1 {
				t.Errorf("%d clients counted failed to connect, want 1", n)
			}
			waitFor(t, "the mute server's connection closed", func() bool { return closed.Load() == 1 })
		})
	})
	t.Run("drain", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			var closed atomic.Int64
			mute := newUpstream(t, mutePeer(&closed))
			p, stop := runProxy(t, cfgOf(b, mute.addr))
			c, base := h2Client(t, p)
			res := getAsync(c, base+"/x")
			waitFor(t, "the connection to the mute server", func() bool { return mute.accepted.Load() == 1 })
			done := make(chan error, 1)
			go func() { done <- stop() }()
			if got := <-res; !strings.HasPrefix(got, "502 ") {
				t.Errorf("the request waiting at the drain: %q, want 502", got)
			}
			runEnds(t, done, "the request ended")
			if n := p.Totals().Listeners[0].Failed; n != 1 {
				t.Errorf("%d clients counted failed to connect, want 1", n)
			}
		})
	})
}
