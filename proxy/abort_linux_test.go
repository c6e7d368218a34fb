package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// The client's FIN while its request waits for a server to see it, with
// abort_on_close: the request leaves what it waits in and the client is
// closed (CD in the access log), as in the pool's queue for a slot
// (phQueue, where it needs no abort_on_close) and as HAProxy's option
// abortonclose has it; another request gets what it held. Without it the
// FIN is a half close (TestHTTPFinWhileConnectingHalfClose).

// finGone sends the client's FIN and checks that the proxy closes it
// (not at a timeout: the tests' timeouts are far longer than
// closedByProxy's wait).
func finGone(t *testing.T, c *net.TCPConn) {
	t.Helper()
	c.CloseWrite()
	if err := closedByProxy(c); err != nil {
		t.Fatalf("the client's FIN: %v", err)
	}
}

// goneLine waits for the access log's line of the request for target
// and checks that it ended by its client (CD), with no response.
func goneLine(t *testing.T, path, target string, retries string) {
	t.Helper()
	m := waitLine(t, path, target+"'s line", func(m map[string]any) bool { return field(m, "target") == target })
	checkFields(t, m, map[string]string{"term": "CD", "status": "0", "retries": retries})
}

// finGivesSlot sends gone's FIN, gone's request connecting to hole
// (max_conns 1), and checks that the request queued behind it takes the
// slot: it connects in its turn, gone's connect let go of.
func finGivesSlot(t *testing.T, p *Proxy, gone *net.TCPConn, hole string) {
	t.Helper()
	finGone(t, gone)
	waitFor(t, "the next request to take the slot", func() bool {
		pt := poolTotals(p, "app")
		return pt.QueueLength == 0 && pt.QueueServed == 1
	})
	if st := serverTotals(p, hole); st.Active != 1 || st.Connections != 1 {
		t.Errorf("server: %d active, %d connections; want the next request's connect alone", st.Active, st.Connections)
	}
}

// logTo gives cfg's first listener an access log, and returns its path.
func logTo(t *testing.T, cfg *Config) string {
	path := t.TempDir() + "/log"
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	return path
}

// closer returns a func closing ch the first time it is called, called
// at the test's end too.
func closer(t *testing.T, ch chan struct{}) func() {
	var once sync.Once
	f := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(f)
	return f
}

// h2cWaitConfig is h2cPoolConfig with one connection per server, a
// response_timeout far longer than the tests' waits and abort_on_close.
func h2cWaitConfig(b engine.Backend, server string) *Config {
	cfg := h2cPoolConfig(b, server)
	cfg.Listeners[0].AbortOnClose = true
	cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
	cfg.Pools[0].H2MaxConnections = 1
	return cfg
}

// TestHTTPFinWhileConnecting: an HTTP/1.1 client's FIN while its
// request's connect is on its way (a server that does not answer
// connects, connect_timeout 1m) lets the dial go at once: its server's
// slot (max_conns 1) goes to the request waiting behind it, which dials
// in its turn.
func TestHTTPFinWhileConnecting(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		hole := blackholeAddr(t)
		cfg := capConfig(b, ModeHTTP, 1, 1, hole)
		cfg.Listeners[0].AbortOnClose = true
		cfg.Listeners[0].ConnectTimeout = Duration(time.Minute)
		cfg.Pools[0].QueueTimeout = Duration(time.Minute)
		path := logTo(t, cfg)
		p := startProxy(t, cfg)
		gone := rawGet(t, p, "/gone").(*net.TCPConn)
		waitFor(t, "/gone's connect", func() bool { return serverTotals(p, hole).Active == 1 })
		rawGet(t, p, "/next")
		queued(t, p, 1)
		finGivesSlot(t, p, gone, hole)
		goneLine(t, path, "/gone", "0")
	})
}

// TestHTTPFinWhileRetryConnects: an HTTP/1.1 client's FIN while its
// GET's retry connects (its first try's server closed without an
// answer; the other server does not answer connects) lets that dial go
// at once, its count in the retry budget too (retries in flight), and
// the slot (max_conns 1) goes to the request waiting for it.
func TestHTTPFinWhileRetryConnects(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		closer := newUpstream(t, func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
		})
		hole := blackholeAddr(t)
		cfg := capConfig(b, ModeHTTP, 1, 1, closer.addr, hole)
		cfg.Listeners[0].AbortOnClose = true
		cfg.Listeners[0].ConnectTimeout = Duration(time.Minute)
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{RetryReset}, Attempts: 2}
		cfg.Pools[0].QueueTimeout = Duration(time.Minute)
		path := logTo(t, cfg)
		p := startProxy(t, cfg)
		// (Round-robin: the first request goes to the first server.)
		gone := rawGet(t, p, "/gone").(*net.TCPConn)
		waitFor(t, "/gone's retry's connect", func() bool {
			inFlight, _, _ := retryHeld(p, "app")
			return serverTotals(p, hole).Active == 1 && inFlight == 1
		})
		// The next one's own first try goes to the other server: its slot
		// is the retry's, so it tries the first, and waits in the queue.
		rawGet(t, p, "/next")
		queued(t, p, 1)
		if inFlight, _, _ := retryHeld(p, "app"); inFlight != 2 {
			t.Fatalf("%d retries in flight, want 2 (/gone's, /next's)", inFlight)
		}
		finGivesSlot(t, p, gone, hole)
		// (/gone's count goes with its exchange's end, at its close.)
		waitFor(t, "/next's retry alone in flight", func() bool { inFlight, _, _ := retryHeld(p, "app"); return inFlight == 1 })
		goneLine(t, path, "/gone", "1")
	})
}

// pathsApp answers each request with its method and path, as
// echoTargetApp does, and keeps the paths it got.
type pathsApp struct {
	echoTargetApp
	mu    sync.Mutex
	paths []string
}

func (a *pathsApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	a.mu.Lock()
	a.paths = append(a.paths, string(r.Path))
	a.mu.Unlock()
	a.echoTargetApp.OnRequest(s, id, r, end)
}

func (a *pathsApp) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.paths)
}

// gatedH2Up returns an h2c server that serves app on a connection only
// once open is called (its SETTINGS held until then).
func gatedH2Up(t *testing.T) (up *upstream, app *pathsApp, open func()) {
	gate := make(chan struct{})
	app = &pathsApp{}
	up = newUpstream(t, func(c net.Conn) {
		<-gate
		serveH2(c, app)
	})
	return up, app, closer(t, gate)
}

// TestH2UpFinWhileConnectionComes: an HTTP/1.1 client's FIN while its
// request to an h2c pool waits for the connection dialed for it (its
// server's SETTINGS not come) takes the request out of the server's
// queue at once; the server never sees it, and the next request goes on
// that connection.
func TestH2UpFinWhileConnectionComes(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up, app, open := gatedH2Up(t)
		cfg := h2cWaitConfig(b, up.addr)
		path := logTo(t, cfg)
		p := startProxy(t, cfg)
		gone := rawGet(t, p, "/gone").(*net.TCPConn)
		waitFor(t, "/gone to wait for the connection", func() bool {
			w, n := h2Waits(p)
			return w[0] == 1 && n[0] == 1
		})
		finGone(t, gone)
		waitFor(t, "/gone to leave the queue", func() bool { w, _ := h2Waits(p); return w[0] == 0 })
		open()
		next := rawGet(t, p, "/next")
		if st, body := status(t, next); st != 200 || body != "GET /next" {
			t.Errorf("next: %d %q", st, body)
		}
		if got := strings.Join(app.got(), " "); got != "/next" {
			t.Errorf("the server got %q, want /next alone", got)
		}
		if n := up.accepted.Load(); n != 1 {
			t.Errorf("%d connections to the server, want 1", n)
		}
		goneLine(t, path, "/gone", "0")
		waitFor(t, "the server's count of requests in flight to be 0", func() bool { return serverTotals(p, up.addr).Active == 0 })
	})
}

// TestH2UpFinWhileQueued: an HTTP/1.1 client's FIN while its request to
// an h2c pool waits for a stream (one connection of one stream, taken
// by a request the server holds) takes it out of the server's queue at
// once; the server never sees it, and the stream goes to the next
// request once the held one ends.
func TestH2UpFinWhileQueued(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		var mu sync.Mutex
		var paths []string
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
			if r.URL.Path == "/hold" {
				arrived <- struct{}{}
				<-release
			}
			io.WriteString(w, r.URL.Path)
		}), nil)
		free := closer(t, release)
		cfg := h2cWaitConfig(b, up.addr)
		cfg.Pools[0].H2MaxConcurrentStreams = 1
		path := logTo(t, cfg)
		p := startProxy(t, cfg)
		hold := rawGet(t, p, "/hold")
		<-arrived
		gone := rawGet(t, p, "/gone").(*net.TCPConn)
		waitFor(t, "/gone to wait for a stream", func() bool { w, _ := h2Waits(p); return w[0] == 1 })
		finGone(t, gone)
		waitFor(t, "/gone to leave the queue", func() bool { w, _ := h2Waits(p); return w[0] == 0 })
		free()
		if st, body := status(t, hold); st != 200 || body != "/hold" {
			t.Errorf("hold: %d %q", st, body)
		}
		next := rawGet(t, p, "/next")
		if st, body := status(t, next); st != 200 || body != "/next" {
			t.Errorf("next: %d %q", st, body)
		}
		mu.Lock()
		got := strings.Join(paths, " ")
		mu.Unlock()
		if got != "/hold /next" {
			t.Errorf("the server got %q, want /hold /next", got)
		}
		goneLine(t, path, "/gone", "0")
		waitFor(t, "the server's count of requests in flight to be 0", func() bool { return serverTotals(p, up.addr).Active == 0 })
	})
}

// TestHTTPAbortOnClose: with abort_on_close, an HTTP/1.1 client's FIN
// once its request went whole to the server, no response head come,
// ends the request: the client is closed, the server's connection reset
// (not pooled) or, to an h2c pool, its stream reset, the server's
// handler seeing its request gone; CD in the access log. Without it the
// FIN is a half close: the response comes, and then the close.
func TestHTTPAbortOnClose(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2c := range []bool{false, true} {
			for _, abort := range []bool{false, true} {
				t.Run(fmt.Sprintf("h2c=%v,abort_on_close=%v", h2c, abort), func(t *testing.T) {
					arrived, gone, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
					h := func(w http.ResponseWriter, r *http.Request) {
						arrived <- struct{}{}
						select {
						case <-r.Context().Done():
							gone <- struct{}{}
						case <-release:
							io.WriteString(w, "ok")
						}
					}
					var cfg *Config
					var addr string
					if h2c {
						addr = newH2CUp(t, http.HandlerFunc(h), nil).addr
						cfg = h2cPoolConfig(b, addr)
					} else {
						addr = newHTTPUpstream(t, h).addr
						cfg = httpConfig(b, addr)
					}
					cfg.Listeners[0].AbortOnClose = abort
					cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
					path := logTo(t, cfg)
					p := startProxy(t, cfg)
					c := rawGet(t, p, "/x").(*net.TCPConn)
					<-arrived
					if !abort {
						c.CloseWrite()
						close(release)
						if st, body := status(t, c); st != 200 || body != "ok" {
							t.Errorf("after a half close: %d %q, want 200 ok", st, body)
						}
						return
					}
					defer close(release)
					finGone(t, c)
					select {
					case <-gone:
					case <-time.After(10 * time.Second):
						t.Fatal("the server's handler did not see its request go")
					}
					goneLine(t, path, "/x", "0")
					waitFor(t, "the server's count of requests in flight to be 0", func() bool { return serverTotals(p, addr).Active == 0 })
					if st := serverTotals(p, addr); st.Idle != 0 {
						t.Errorf("%d idle connections: the aborted request's was pooled", st.Idle)
					}
				})
			}
		}
	})
}

// TestHTTPFinWhileConnectingHalfClose: without abort_on_close, an
// HTTP/1.1 client that sends its request and then its FIN (printf ... |
// nc -N) is answered though its request needed a connect: the first
// server does not answer connects, so the FIN comes while the request
// connects, and after connect_timeout the next server answers it, to an
// HTTP/1.1 pool; to an h2c pool, the FIN comes while the request waits
// for its server's SETTINGS.
func TestHTTPFinWhileConnectingHalfClose(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		t.Run("http1", func(t *testing.T) {
			hole := blackholeAddr(t)
			u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
			cfg := httpConfig(b, hole, u.addr)
			cfg.Listeners[0].ConnectTimeout = Duration(300 * time.Millisecond)
			p := startProxy(t, cfg)
			c := rawGet(t, p, "/half").(*net.TCPConn)
			waitFor(t, "the connect to the first server", func() bool { return serverTotals(p, hole).Active == 1 })
			c.CloseWrite()
			if st, body := status(t, c); st != 200 || body != "/half" {
				t.Errorf("half-closed client: %d %q, want 200 /half", st, body)
			}
		})
		t.Run("h2c", func(t *testing.T) {
			up, _, open := gatedH2Up(t)
			cfg := h2cPoolConfig(b, up.addr)
			p := startProxy(t, cfg)
			c := rawGet(t, p, "/half").(*net.TCPConn)
			waitFor(t, "the request to wait for the connection", func() bool {
				w, n := h2Waits(p)
				return w[0] == 1 && n[0] == 1
			})
			// (Without abort_on_close the client is not read while its
			// request waits: the FIN is seen with the response, as a
			// half close.)
			c.CloseWrite()
			open()
			if st, body := status(t, c); st != 200 || body != "GET /half" {
				t.Errorf("half-closed client: %d %q, want 200 GET /half", st, body)
			}
		})
	})
}
