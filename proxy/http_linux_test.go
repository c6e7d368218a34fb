package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// httpUpstream is a net/http server standing for a proxied server: it
// counts the connections it accepts.
type httpUpstream struct {
	addr     string
	accepted atomic.Int64
	srv      *http.Server
	ln       net.Listener
}

func newHTTPUpstream(t *testing.T, h http.HandlerFunc) *httpUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &httpUpstream{addr: ln.Addr().String(), ln: ln}
	u.srv = &http.Server{Handler: h, ConnState: func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			u.accepted.Add(1)
		}
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		u.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		u.srv.Close()
		<-done
	})
	return u
}

// httpConfig is testConfig with the listener in mode http.
func httpConfig(b engine.Backend, servers ...string) *Config {
	cfg := testConfig(b, servers...)
	cfg.Listeners[0].Mode = ModeHTTP
	return cfg
}

// client returns an http.Client through p's listener "web", its
// connections closed at the test's end.
func client(t *testing.T, p *Proxy) (*http.Client, string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, "http://" + p.Addr("web").String()
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestHTTPKeepAlive: 100 requests on one client connection are answered
// over one upstream connection, taken back from the loop's idle pool each
// time; the server sees X-Forwarded-For and Via.
func TestHTTPKeepAlive(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s xff=%s via=%s", r.Method, r.URL.Path, r.Header.Get("X-Forwarded-For"), r.Header.Get("Via"))
		})
		p := startProxy(t, httpConfig(b, u.addr))
		c, base := client(t, p)
		for i := range 100 {
			resp, body := get(t, c, fmt.Sprintf("%s/x/%d", base, i))
			if want := fmt.Sprintf("GET /x/%d xff=127.0.0.1 via=1.1 spindle", i); resp.StatusCode != 200 || body != want {
				t.Fatalf("request %d: %d %q, want 200 %q", i, resp.StatusCode, body, want)
			}
		}
		if n := u.accepted.Load(); n != 1 {
			t.Errorf("upstream accepted %d connections for 100 keep-alive requests, want 1", n)
		}
		st := serverTotals(p, u.addr)
		if st.Requests != 100 || st.ReusedRequests != 99 || st.NewRequests != 1 {
			t.Errorf("server totals %+v, want 100 requests, 99 reused", st)
		}
		lt := p.Totals().Listeners[0]
		if lt.Requests != 100 || lt.ResponsesUpstream[1] != 100 {
			t.Errorf("listener totals %+v", lt)
		}
	})
}

var _ = bufio.NewReader
var _ = bytes.Equal
var _ = sha256.New
var _ = rand.New
var _ = strings.Contains
var _ sync.Mutex
