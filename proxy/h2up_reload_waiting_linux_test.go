package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestH2UpTLSReloadServesWaitingRequest: a request waiting for room on
// an h2 pool's server (its one connection full: h2_max_connections 1,
// one stream each) when a reload changes how the pool's connections are
// secured (server_name) is served by a connection dialed under the new
// settings, while the stream in flight finishes on the old connection.
// The reload failed it over as if its server had failed to connect:
// with a pool of one server, 502 at once. The same where a reload that
// changed something else (idle_timeout) came between the connection's
// dial and that reload: the connection's pool (the generation it was
// dialed for) is not the one the TLS reload replaced.
func TestH2UpTLSReloadServesWaitingRequest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, between := range []bool{false, true} {
			t.Run(map[bool]string{false: "one reload", true: "after another reload"}[between], func(t *testing.T) {
				tlsReloadWaiting(t, b, between)
			})
		}
	})
}

// tlsReloadWaiting is TestH2UpTLSReloadServesWaitingRequest, with a
// reload of idle_timeout before the one of server_name where between.
func tlsReloadWaiting(t *testing.T, b engine.Backend, between bool) {
	ca := newTestCA(t)
	caPath := caFile(t, ca, "ca.pem")
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	u := newTLSUp(t, ca, "app", []string{"app.test", "other.test"}, func(c *tls.Config) { c.NextProtos = []string{"h2"} },
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				entered <- struct{}{}
				<-release
			}
			io.WriteString(w, "ok "+r.URL.Path)
		}, nil)
	t.Cleanup(free) // (before the server's close, which waits for its handlers)
	cfgOf := func(name string, idle time.Duration) *Config {
		cfg := h2cPoolConfig(b, u.addr)
		cfg.Pools[0].Protocol = ProtocolH2
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: name, CAFile: caPath}
		cfg.Pools[0].IdleTimeout = Duration(idle)
		cfg.Pools[0].H2MaxConnections = 1
		cfg.Pools[0].H2MaxConcurrentStreams = 1
		cfg.Listeners[0].ResponseTimeout = Duration(10 * time.Second)
		return cfg
	}
	p := startProxy(t, cfgOf("app.test", time.Minute))
	c, base := h2Client(t, p)
	slow := getAsync(c, base+"/slow")
	<-entered
	next := getAsync(c, base+"/next")
	waitFor(t, "the second request to wait for room", func() bool { w, _ := h2Waits(p); return w[0] == 1 })
	if between {
		mustReload(t, p, cfgOf("app.test", 2*time.Minute))
	}
	mustReload(t, p, cfgOf("other.test", 2*time.Minute))
	if got := <-next; got != "200 ok /next" {
		t.Errorf("the request waiting at the reload: %q, want \"200 ok /next\"", got)
	}
	free()
	if got := <-slow; got != "200 ok /slow" {
		t.Errorf("the stream in flight at the reload: %q, want \"200 ok /slow\"", got)
	}
	if got := <-getAsync(c, base+"/after"); got != "200 ok /after" {
		t.Errorf("a request after the reload: %q, want \"200 ok /after\"", got)
	}
	if sni, _, _ := u.seen(); !slices.Equal(sni, []string{"app.test", "other.test"}) {
		t.Errorf("handshakes with SNI %q, want [app.test other.test]: one before the reload, one after under its server_name", sni)
	}
}
