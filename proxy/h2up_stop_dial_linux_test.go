package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// loopStopping reports whether loop k of p has seen the engine stop: its
// Dial refuses (engine.ErrClosed, the address never looked at), or it
// ran no posted function for a second (it has exited).
func loopStopping(p *Proxy, k int) bool {
	l := p.e.Loops()[k]
	refused := make(chan bool, 1)
	l.Post(func() {
		_, err := l.Dial("tcp", "", 0)
		refused <- errors.Is(err, engine.ErrClosed)
	})
	select {
	case r := <-refused:
		return r
	case <-time.After(time.Second):
		return true
	}
}

// h2ClientOver returns an http.Client speaking HTTP/2 with prior
// knowledge over c, its one connection.
func h2ClientOver(t *testing.T, c net.Conn) *http.Client {
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	var once atomic.Bool
	tr := &http.Transport{Protocols: &pr, DisableCompression: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if once.Swap(true) {
				return nil, errors.New("one connection only")
			}
			return c, nil
		}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// TestH2UpDialRefusedAtStopKilled: a request to an h2c pool whose walk
// goes on while its loop stops (here a reload, posted to the loop as the
// engine stopped, that removed the server it waited for), its dial to
// the next server refused by the stopping loop, ends as the stop ends
// the requests it cuts: KD, no response, no client counted as failed to
// connect (no server failed), as where the stop cuts the connection it
// waited for. It was answered 502 and logged SC, every server said to
// have failed to connect, and counted in the listener's failed. An
// HTTP/1.1 client's request and an HTTP/2 client's stream alike.
func TestH2UpDialRefusedAtStopKilled(t *testing.T) {
	for _, client := range []string{"http1", "h2"} {
		t.Run(client, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				read := make(chan struct{}, 1)
				var closed atomic.Int64
				mute := newUpstream(t, prefaceThen(read, mutePeer(&closed)))
				var first atomic.Bool
				good := newUpstream(t, rawH2Up("", &first))
				var path string
				cfgOf := func(servers ...string) *Config {
					cfg := h2cPoolConfig(b, servers...)
					cfg.Engine.CPUs = []int{0, 1}
					cfg.Listeners[0].ConnectTimeout = Duration(time.Minute)
					cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
					if path == "" {
						path = logTo(t, cfg)
					} else {
						cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
					}
					return cfg
				}
				p, stop := runProxy(t, cfgOf(mute.addr, good.addr))
				t.Cleanup(func() { stop() })
				if len(p.e.Loops()) < 2 {
					t.Skip("needs two loops (two CPUs): the second tells when the engine stopped")
				}
				// Round-robin: the request goes to the mute server first,
				// and waits for its SETTINGS.
				c := onLoop(t, p, 0)
				if client == "http1" {
					sendGet(t, c, "/x")
				} else {
					res := getAsync(h2ClientOver(t, c), "http://x/x")
					t.Cleanup(func() { <-res })
				}
				<-read

				// Loop 0 is held while the reload removing the mute server
				// is posted to it and the engine stops: it applies the
				// reload as it stops, before it closes its connections.
				held, free := make(chan struct{}), make(chan struct{})
				p.e.Loops()[0].Post(func() {
					close(held)
					<-free
				})
				<-held
				reloaded := make(chan error, 1)
				go func() { reloaded <- p.Reload(cfgOf(good.addr)) }()
				waitFor(t, "loop 1 to apply the reload (posted to loop 0 first)", func() bool {
					applied := make(chan bool, 1)
					p.e.Loops()[1].Post(func() { applied <- len(p.loops[1].pools[0].servers) == 1 })
					return <-applied
				})
				done := make(chan error, 1)
				go func() { done <- stop() }()
				waitFor(t, "the engine to stop", func() bool { return loopStopping(p, 1) })
				close(free)
				runEnds(t, done, "the engine's stop")
				if err := <-reloaded; err != nil && !errors.Is(err, ErrStopped) {
					t.Errorf("Reload: %v", err)
				}

				var line map[string]any
				for _, m := range logLines(t, path) {
					if field(m, "target") == "/x" {
						line = m
					}
				}
				if line == nil {
					t.Fatal("no access-log line for /x")
				}
				checkFields(t, line, map[string]string{"status": "0", "term": "KD"})
				if n := p.Totals().Listeners[0].Failed; n != 0 {
					t.Errorf("%d clients counted failed to connect, want 0", n)
				}
				if n := good.accepted.Load(); n != 0 {
					t.Errorf("the server left was connected %d times, want 0 (its dial refused)", n)
				}
			})
		})
	}
}
