package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadListenRespelledKeepsListener: a reload that writes a
// listener's listen address another way ("localhost:P" for
// "127.0.0.1:P", "[::ffff:127.0.0.1]:P") keeps the listener as one whose
// settings alone changed: its socket, its counters and its clients. A
// kept-alive HTTP client goes on being served (it is not retired as a
// client of a listener removed or moved), and the max_conns the reload
// sets counts it: with it open and max_conns 1, a second client is
// turned away.
func TestReloadListenRespelledKeepsListener(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, rawHTTPServer)
		_, port, err := net.SplitHostPort(deadAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		cfgOf := func(host string, maxConns int) *Config {
			cfg := httpConfig(b, u.addr)
			cfg.Listeners[0].Listen = net.JoinHostPort(host, port)
			cfg.Listeners[0].MaxConns = maxConns
			return cfg
		}
		p := startProxy(t, cfgOf("127.0.0.1", 0))
		c := dial(t, p)
		br := bufio.NewReader(c)
		get := func(when string) {
			t.Helper()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || body != "ok" || resp.Close {
				t.Fatalf("%s: %d %q (close %v), want 200 \"ok\" kept alive", when, resp.StatusCode, body, resp.Close)
			}
		}
		get("before the reloads")
		for i, host := range []string{"localhost", "::ffff:127.0.0.1"} {
			mustReload(t, p, cfgOf(host, 1))
			get("after the listen address became " + host)
			if got := p.Addr("web").String(); got != "127.0.0.1:"+port {
				t.Errorf("listening on %s after the reload, want 127.0.0.1:%s", got, port)
			}
			second := dial(t, p)
			second.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := second.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s: a second client with one open and max_conns 1: read %d, %v; want it closed", host, n, err)
			}
			second.Close()
			l := p.Totals().Listeners[0]
			if l.Requests != uint64(i+2) || l.Rejected != uint64(i+1) {
				t.Errorf("%s: listener counted %d requests, %d rejected; want %d, %d (its counters kept)", host, l.Requests, l.Rejected, i+2, i+1)
			}
		}
	})
}
