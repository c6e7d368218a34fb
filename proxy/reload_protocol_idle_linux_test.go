package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadToH2CClosesHTTP1InUse: an HTTP/1.1 connection in use when a
// reload makes its pool an h2c one is closed once its exchange ends, as
// the idle ones are at the reload: the pool in force takes no HTTP/1.1
// connection, so one kept would sit idle to the server until
// idle_timeout (60s here).
func TestReloadToH2CClosesHTTP1InUse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		held, release := make(chan struct{}), make(chan struct{})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				held <- struct{}{}
				<-release
			}
			io.WriteString(w, r.Proto)
		}))
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		var closed atomic.Int64
		srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		addr := srv.Listener.Addr().String()
		cfgOf := func(protocol string) *Config {
			cfg := httpConfig(b, addr)
			cfg.Pools[0].Protocol = protocol
			return cfg
		}
		p := startProxy(t, cfgOf(ProtocolHTTP1))
		c := dial(t, p)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
		<-held
		mustReload(t, p, cfgOf(ProtocolH2C))
		close(release)
		if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || body != "HTTP/1.1" {
			t.Fatalf("the request in progress at the reload: %d %q", resp.StatusCode, body)
		}
		waitFor(t, "the HTTP/1.1 connection closed, none idle", func() bool {
			return closed.Load() == 1 && serverTotals(p, addr).Idle == 0
		})
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || body != "HTTP/2.0" {
			t.Errorf("a request after the reload: %d %q, want 200 over HTTP/2", resp.StatusCode, body)
		}
	})
}
