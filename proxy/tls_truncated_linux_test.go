package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// untilCloseTLS serves one request on c with a response framed by the
// end of the stream, ended with close_notify and the FIN, or with the FIN
// alone where bare (what an attacker on the path can send in the
// server's name at any record boundary).
func untilCloseTLS(bare bool) func(*tls.Conn) {
	return func(c *tls.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		c.Write([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe first part"))
		if !bare {
			c.Close()
			return
		}
		c.NetConn().(*net.TCPConn).CloseWrite()
		c.NetConn().Read(make([]byte, 1)) // until the proxy closes
	}
}

// TestTLSUpstreamUntilCloseNeedsCloseNotify: a TLS server's response
// without a length (framed by the end of the stream) is passed on as
// whole when the server ends it with close_notify, to an HTTP/1.1 client
// (its end) and an HTTP/2 one (END_STREAM); ended by a FIN alone, which
// anyone on the path can send, it may be cut short: the HTTP/1.1 client
// is reset and the HTTP/2 client's stream too, as for a response cut
// inside its length.
func TestTLSUpstreamUntilCloseNeedsCloseNotify(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		for _, bare := range []bool{false, true} {
			u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, untilCloseTLS(bare))
			for _, h2c := range []bool{false, true} {
				cfg := httpConfig(b, u.addr)
				cfg.Listeners[0].H2C = h2c
				cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
				p := startProxy(t, cfg)
				var c *http.Client
				var base string
				if h2c {
					c, base = h2Client(t, p)
				} else {
					c, base = client(t, p)
				}
				var body []byte
				resp, err := c.Get(base + "/")
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				switch {
				case bare && err == nil:
					t.Errorf("FIN alone, h2c %v: %q read whole, want an error (the response may be cut short)", h2c, body)
				case !bare && (err != nil || string(body) != "the first part"):
					t.Errorf("close_notify, h2c %v: %q, %v; want the body whole", h2c, body, err)
				}
			}
		}
	})
}

// TestTLSUpstreamTCPEndNeedsCloseNotify: in mode tcp, a TLS server's end
// of its stream reaches the client as an end (its FIN) when the server
// sends close_notify; its FIN alone, which anyone on the path can send,
// reaches the client as a reset, not as an end that would read as the
// server's own.
func TestTLSUpstreamTCPEndNeedsCloseNotify(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		for _, bare := range []bool{false, true} {
			u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, func(c *tls.Conn) {
				c.Write([]byte("hello"))
				if bare {
					c.NetConn().(*net.TCPConn).CloseWrite()
				} else {
					c.CloseWrite()
				}
				c.NetConn().Read(make([]byte, 1)) // until the proxy closes
			})
			cfg := testConfig(b, u.addr)
			cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
			p := startProxy(t, cfg)
			c, err := net.Dial("tcp", p.Addr("web").String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			switch {
			case bare && !errors.Is(err, syscall.ECONNRESET):
				t.Errorf("FIN alone: read %q, %v; want a reset", got, err)
			case !bare && (err != nil || string(got) != "hello"):
				t.Errorf("close_notify: read %q, %v; want hello, then the end", got, err)
			}
		}
	})
}

// readEnd is what a server read of the client's stream: its bytes and
// how the stream ended (nil: an end, an error: a reset).
type readEnd struct {
	got []byte
	err error
}

// TestTLSClientTCPEndNeedsCloseNotify: in mode tcp, a TLS client's end of
// its stream reaches the server, plain or TLS, as an end (its FIN, or
// close_notify) when the client sends close_notify, logged "-"; its FIN
// alone, which anyone on the path can send, reaches the server as a
// reset, not as an end that would read as the client's own, and resets
// the client too; it is logged as the client's abort (CD).
func TestTLSClientTCPEndNeedsCloseNotify(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		for _, tlsPool := range []bool{false, true} {
			ends := make(chan readEnd, 1)
			cfg := testConfig(b)
			if tlsPool {
				u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, func(c *tls.Conn) {
					got, err := io.ReadAll(c)
					ends <- readEnd{got, err}
				})
				cfg.Pools[0].Servers = Servers(u.addr)
				cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
			} else {
				u := newUpstream(t, func(c net.Conn) {
					got, err := io.ReadAll(c)
					ends <- readEnd{got, err}
				})
				cfg.Pools[0].Servers = Servers(u.addr)
			}
			path := filepath.Join(t.TempDir(), "tcp.log")
			cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
			cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path, Format: AccessLogJSON}
			p := startProxy(t, cfg)
			for _, bare := range []bool{false, true} {
				c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(c, "hello"); err != nil {
					t.Fatal(err)
				}
				if bare {
					err = c.NetConn().(*net.TCPConn).CloseWrite()
				} else {
					err = c.CloseWrite()
				}
				if err != nil {
					t.Fatal(err)
				}
				var end readEnd
				select {
				case end = <-ends:
				case <-time.After(10 * time.Second):
					t.Fatalf("TLS pool %v, FIN alone %v: the server's read did not end", tlsPool, bare)
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, cerr := io.ReadAll(c)
				c.Close()
				switch {
				case bare && (!errors.Is(end.err, syscall.ECONNRESET) || !errors.Is(cerr, syscall.ECONNRESET)):
					t.Errorf("TLS pool %v, FIN alone: the server read %q, %v, the client %v; want resets", tlsPool, end.got, end.err, cerr)
				case !bare && (end.err != nil || string(end.got) != "hello" || cerr != nil):
					t.Errorf("TLS pool %v, close_notify: the server read %q, %v, the client %v; want hello, then the ends", tlsPool, end.got, end.err, cerr)
				}
				local := c.LocalAddr().String()
				want := "-"
				if bare {
					want = "CD"
				}
				m := waitLine(t, path, "the connection's line", func(m map[string]any) bool { return field(m, "client") == local })
				checkFields(t, m, map[string]string{"client_bytes": "5", "term": want})
			}
		}
	})
}

// TestTLSClientCutWhileConnecting: a TLS client that sends hello and
// its FIN without close_notify while the proxy still connects, to a
// server that does not answer, has what it sent held until a server
// takes it (the proxy reads nothing more of a client while it connects):
// the next server gets a reset (which may drop hello, still queued for
// it), not hello and an end that would read as the client's own; the client is reset and the connection
// logged CD, and the session dials nobody after (the silent server's
// connect failed once, the next server connected once).
func TestTLSClientCutWhileConnecting(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		hole := blackholeAddr(t)
		ends := make(chan readEnd, 1)
		u := newUpstream(t, func(c net.Conn) {
			got, err := io.ReadAll(c)
			ends <- readEnd{got, err}
		})
		cfg := testConfig(b, hole, u.addr)
		const timeout = 300 * time.Millisecond
		cfg.Listeners[0].ConnectTimeout = Duration(timeout)
		path := filepath.Join(t.TempDir(), "tcp.log")
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path, Format: AccessLogJSON}
		p := startProxy(t, cfg)
		c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "hello"); err != nil {
			t.Fatal(err)
		}
		if err := c.NetConn().(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		var end readEnd
		select {
		case end = <-ends:
		case <-time.After(10 * time.Second):
			t.Fatal("the next server's read did not end")
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, cerr := io.ReadAll(c)
		if !strings.HasPrefix("hello", string(end.got)) || !errors.Is(end.err, syscall.ECONNRESET) || !errors.Is(cerr, syscall.ECONNRESET) {
			t.Errorf("the server read %q, %v, the client %v; want resets (after hello, or what of it the reset left)", end.got, end.err, cerr)
		}
		m := waitLine(t, path, "the connection's line", func(map[string]any) bool { return true })
		checkFields(t, m, map[string]string{"server": u.addr, "client_bytes": "5", "term": "CD"})
		time.Sleep(2 * timeout) // for a dial that should not be
		if h, n := serverTotals(p, hole), serverTotals(p, u.addr); h.Failures != 1 || h.Connects != 0 || n.Connects != 1 || n.Failures != 0 || u.accepted.Load() != 1 || h.Active+n.Active != 0 {
			t.Errorf("silent server: %d failures, %d connects; next: %d connects, %d failures, %d accepted; %d active; want 1, 0; 1, 0, 1; 0",
				h.Failures, h.Connects, n.Connects, n.Failures, u.accepted.Load(), h.Active+n.Active)
		}
	})
}

// TestTLSClientTunnelEndNeedsCloseNotify: in a tunnel an Upgrade made,
// a TLS client's FIN without close_notify, sent after the 101 or before
// it (after the request and its first tunnel bytes), reaches the server
// as a reset (which may drop those bytes, still queued for it), not as an
// end that would read as the client's own, and the exchange is logged CD; with close_notify the
// server reads the bytes and the end.
func TestTLSClientTunnelEndNeedsCloseNotify(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		ends := make(chan readEnd, 1)
		wait101 := make(chan bool, 1) // whether the server waits before its 101
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			if <-wait101 {
				time.Sleep(200 * time.Millisecond) // for the client's FIN to reach the proxy first
			}
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			got, err := io.ReadAll(brw.Reader)
			ends <- readEnd{got, err}
		})
		cfg := httpConfig(b, u.addr)
		path := filepath.Join(t.TempDir(), "http.log")
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path, Format: AccessLogJSON}
		p := startProxy(t, cfg)
		for _, tc := range []struct {
			name         string
			bare, before bool
		}{{"close_notify", false, false}, {"FIN alone after the 101", true, false}, {"FIN alone before the 101", true, true}} {
			wait101 <- tc.before
			c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nearly")
			br := bufio.NewReader(c)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			end := func() {
				if !tc.bare {
					c.CloseWrite()
				} else {
					c.NetConn().(*net.TCPConn).CloseWrite()
				}
			}
			if tc.before {
				end()
			}
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err == nil && resp.StatusCode != 101 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			if err != nil && !tc.before {
				t.Fatalf("%s: %v, want a 101", tc.name, err)
			}
			if !tc.before {
				end()
			}
			var got readEnd
			select {
			case got = <-ends:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the server's read did not end", tc.name)
			}
			local := c.LocalAddr().String()
			c.Close()
			term := "-"
			switch {
			case tc.bare && (!strings.HasPrefix("early", string(got.got)) || !errors.Is(got.err, syscall.ECONNRESET)):
				t.Errorf("%s: the server read %q, %v; want a reset (after early, or what of it the reset left)", tc.name, got.got, got.err)
			case !tc.bare && (string(got.got) != "early" || got.err != nil):
				t.Errorf("%s: the server read %q, %v; want early and the end", tc.name, got.got, got.err)
			}
			if tc.bare {
				term = "CD"
			}
			m := waitLine(t, path, "the exchange's line", func(m map[string]any) bool { return field(m, "client") == local })
			checkFields(t, m, map[string]string{"status": "101", "term": term})
		}
	})
}

// TestTLSUpstreamTCPCutResetsServer: in mode tcp, a TLS server's FIN
// without close_notify, the client's stream still open, ends the server's
// connection with a reset, not with close_notify, which would tell the
// server that the client's stream ended whole when the client was reset.
func TestTLSUpstreamTCPCutResetsServer(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		ends := make(chan readEnd, 1)
		u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, func(c *tls.Conn) {
			c.Write([]byte("hello"))
			c.NetConn().(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			ends <- readEnd{got, err}
		})
		cfg := testConfig(b, u.addr)
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		p := startProxy(t, cfg)
		c := dial(t, p)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the client: %v, want a reset", err)
		}
		select {
		case end := <-ends:
			if len(end.got) != 0 || end.err == nil {
				t.Errorf("the server read %q, %v; want an error (the client's stream did not end)", end.got, end.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server's read did not end")
		}
	})
}
