package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadRetiredClients: a kept-alive HTTP client of a listener that a
// reload removed, or whose mode it changed, is not served on under the
// old config: its request in progress gets its whole response, with
// Connection: close, and then EOF; one idle between requests gets EOF at
// once (not after keepalive_timeout). A kept listener's clients stay open
// (the control).
func TestReloadRetiredClients(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, change := range []string{"removed", "mode"} {
			held, release := make(chan struct{}, 1), make(chan struct{})
			u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					held <- struct{}{}
					<-release
				}
				io.WriteString(w, "ok "+r.URL.Path)
			})
			cfgOf := func(web bool, mode string) *Config {
				cfg := httpConfig(b, u.addr)
				cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "keep", Listen: "127.0.0.1:0", Pool: "app", Mode: ModeHTTP})
				cfg.Listeners[0].Mode = mode
				if !web {
					cfg.Listeners = cfg.Listeners[1:]
				}
				return cfg
			}
			p := startProxy(t, cfgOf(true, ModeHTTP))
			get := func(c net.Conn, br *bufio.Reader, path string) {
				t.Helper()
				io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
				if resp, body := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 || body != "ok "+path || resp.Close {
					t.Fatalf("%s: before the reload: %d %q (close %v)", change, resp.StatusCode, body, resp.Close)
				}
			}
			idle := dial(t, p)
			idleBR := bufio.NewReader(idle)
			get(idle, idleBR, "/idle")
			kc, err := net.DialTimeout("tcp", p.Addr("keep").String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			kbr := bufio.NewReader(kc)
			get(kc, kbr, "/kept")
			busy := dial(t, p)
			busyBR := bufio.NewReader(busy)
			get(busy, busyBR, "/first")
			io.WriteString(busy, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
			<-held

			if change == "removed" {
				mustReload(t, p, cfgOf(false, ModeHTTP))
			} else {
				mustReload(t, p, cfgOf(true, ModeTCP))
			}

			// The idle client: EOF at once.
			idle.SetReadDeadline(time.Now().Add(3 * time.Second))
			if n, err := idleBR.Read(make([]byte, 1)); err != io.EOF {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("%s: the idle client of the old listener is still open 3s after the reload", change)
				} else {
					t.Errorf("%s: the idle client of the old listener: %d bytes, %v (want EOF)", change, n, err)
				}
			}
			// The busy one: its response whole, Connection: close, EOF.
			close(release)
			resp, body := readResponseFrom(t, busy, busyBR, "GET")
			if resp.StatusCode != 200 || body != "ok /hold" {
				t.Errorf("%s: the response in progress at the reload: %d %q", change, resp.StatusCode, body)
			}
			if !resp.Close {
				t.Errorf("%s: the response in progress at the reload has no Connection: close", change)
			}
			busy.SetReadDeadline(time.Now().Add(3 * time.Second))
			if n, err := busyBR.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("%s: after its last response, the client of the old listener: %d bytes, %v (want EOF)", change, n, err)
			}
			// The kept listener's client goes on, kept alive.
			get(kc, kbr, "/kept/after")
		}
	})
}
