package proxy

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// replayConn is a net.Conn whose reads give first what was read from it
// before (r).
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// prefaceThen returns a server that reads the client's preface, says so
// on read, and then does then with the connection (the preface to be
// read again).
func prefaceThen(read chan<- struct{}, then func(net.Conn)) func(net.Conn) {
	return func(c net.Conn) {
		pre := make([]byte, len(h2.ClientPreface))
		if _, err := io.ReadFull(c, pre); err != nil {
			return
		}
		read <- struct{}{}
		then(replayConn{c, io.MultiReader(bytes.NewReader(pre), c)})
	}
}

// TestH2UpConnectionsGaugeFromSettings: spindle_proxy_server_h2_connections
// counts an h2c server's connection from its SETTINGS, which make the
// connect one of connects_total, to its close: not while it waits for
// them (the preface sent), nor one that failed before them (a mute
// server past connect_timeout, one that closed), so that the gauge never
// holds a connect counted failed. It counted the connection from its TCP
// connect, the failed ones until their close.
func TestH2UpConnectionsGaugeFromSettings(t *testing.T) {
	cfgOf := func(b engine.Backend, server string) *Config {
		cfg := h2cPoolConfig(b, server)
		cfg.Listeners[0].ConnectTimeout = Duration(time.Second)
		cfg.Listeners[0].ResponseTimeout = Duration(10 * time.Second)
		return cfg
	}
	// counts returns the server's gauge and connect counters from /metrics.
	counts := func(t *testing.T, p *Proxy, addr string) (open, connects, failures float64) {
		m := scrape(t, p)
		l := `{pool="app",server="` + addr + `"}`
		return m["spindle_proxy_server_h2_connections"+l], m["spindle_proxy_server_connects_total"+l], m["spindle_proxy_server_connect_failures_total"+l]
	}
	check := func(t *testing.T, p *Proxy, addr, when string, open, connects, failures float64) {
		t.Helper()
		if o, c, f := counts(t, p, addr); o != open || c != connects || f != failures {
			t.Errorf("%s: h2_connections %v, connects %v, failures %v; want %v, %v, %v", when, o, c, f, open, connects, failures)
		}
	}
	t.Run("settings late", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			read, release := make(chan struct{}, 1), make(chan struct{})
			var first atomic.Bool
			up := newUpstream(t, prefaceThen(read, func(c net.Conn) {
				<-release
				rawH2Up("", &first)(c)
			}))
			p := startProxy(t, cfgOf(b, up.addr))
			c, base := h2Client(t, p)
			res := getAsync(c, base+"/x")
			<-read
			check(t, p, up.addr, "the preface sent, no SETTINGS yet", 0, 0, 0)
			close(release)
			if got := <-res; !strings.HasPrefix(got, "200 ") {
				t.Fatalf("request: %q, want 200", got)
			}
			check(t, p, up.addr, "the SETTINGS and the response in", 1, 1, 0)
			up.stop() // (the server closes the connection)
			waitFor(t, "the gauge back to 0", func() bool { o, _, _ := counts(t, p, up.addr); return o == 0 })
			check(t, p, up.addr, "the server closed the connection", 0, 1, 0)
		})
	})
	t.Run("mute server", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			read := make(chan struct{}, 1)
			var closed atomic.Int64
			up := newUpstream(t, prefaceThen(read, mutePeer(&closed)))
			p := startProxy(t, cfgOf(b, up.addr))
			c, base := h2Client(t, p)
			res := getAsync(c, base+"/x")
			<-read
			check(t, p, up.addr, "the preface sent, no SETTINGS", 0, 0, 0)
			if got := <-res; !strings.HasPrefix(got, "502 ") {
				t.Fatalf("request: %q, want 502 at connect_timeout", got)
			}
			check(t, p, up.addr, "connect_timeout ran out", 0, 0, 1)
		})
	})
	t.Run("closed before settings", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			read := make(chan struct{}, 1)
			up := newUpstream(t, prefaceThen(read, func(net.Conn) {}))
			p := startProxy(t, cfgOf(b, up.addr))
			c, base := h2Client(t, p)
			if got := <-getAsync(c, base+"/x"); !strings.HasPrefix(got, "502 ") {
				t.Fatalf("request: %q, want 502", got)
			}
			<-read
			check(t, p, up.addr, "the server closed before its SETTINGS", 0, 0, 1)
		})
	})
}
