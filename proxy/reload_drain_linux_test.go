package proxy

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadDuringDrainRefused: a reload while Run drains is refused
// with ErrStopped, counted, and changes nothing: the listener it adds is
// not opened, and the request in progress when the drain began gets its
// whole response, with Connection: close, from the server it was sent to.
func TestReloadDuringDrainRefused(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		held, release := make(chan struct{}), make(chan struct{})
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				held <- struct{}{}
				<-release
			}
			io.WriteString(w, "u")
		})
		other := newHTTPUpstream(t, reloadHTTPServer("other"))
		cfg := httpConfig(b, u.addr)
		p, stop := runProxy(t, cfg)
		c := dial(t, p)
		io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
		<-held
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		// Run marks itself stopping, then posts the drain to the loops
		// (Proxy.drainHTTP): the response must not be released before
		// the loop knows, or it goes out as any other (ci48b, epoll:
		// "200 "u" (close false)").
		waitFor(t, "the drain to begin on every loop", func() bool {
			p.mu.RLock()
			stopping := p.stopping
			p.mu.RUnlock()
			draining := stopping
			if stopping {
				onLoops(p, func(ls *loopState) { draining = draining && ls.draining })
			}
			return draining
		})
		next := httpConfig(b, other.addr)
		next.Listeners = append(next.Listeners, ListenerConfig{Name: "two", Listen: "127.0.0.1:0", Pool: "app", Mode: ModeHTTP})
		if err := p.Reload(next); !errors.Is(err, ErrStopped) {
			t.Errorf("Reload during the drain: %v, want ErrStopped", err)
		}
		if p.Addr("two") != nil || p.Config() != cfg {
			t.Errorf("a reload refused during the drain changed the config in force")
		}
		if n := p.reload.failed.Load(); n != 1 {
			t.Errorf("%d reloads counted as refused, want 1", n)
		}
		close(release)
		resp, body := readResponseFrom(t, c, bufio.NewReader(c), "GET")
		if resp.StatusCode != 200 || body != "u" || !resp.Close {
			t.Errorf("the request in progress at the drain: %d %q (close %v), want 200 \"u\" with Connection: close", resp.StatusCode, body, resp.Close)
		}
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run still draining 10s after its last client's response")
		}
	})
}
