package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// TestDrainCutResetsQueue: a tunnel still open at the end of Run's drain
// whose client's queue holds data the server sent (a client that does
// not read) is reset, not closed: the queue is dropped, and a FIN after
// it told the client it had the whole stream, the bytes dropped a silent
// truncation.
func TestDrainCutResetsQueue(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) {
			c.Write(make([]byte, 64<<20)) // more than the sockets' buffers hold
			io.Copy(io.Discard, c)
		})
		p, err := New(testConfig(b, u.addr), &Options{Drain: 200 * time.Millisecond, Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(p)
		c := dial(t, p)
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the proxy to hold the server's bytes", func() bool {
			s := p.Engine().Stats()
			return s.PausedReads > 0 && s.BytesRead > s.BytesWritten
		})
		if err := stop(); err != nil {
			t.Error(err)
		}
		s := p.Engine().Stats()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, c)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the client read %d bytes of the %d the proxy read from the server, then %v; want a reset", n, s.BytesRead-1, err)
		}
	})
}

// TestDrainCutResetsTunnel: a tunnel (mode tcp, or the one an HTTP
// upgrade made) still open at the end of Run's drain, its server
// mid-stream and nothing queued either way, is reset both ways: the
// client reads what the server sent and then ECONNRESET, and the server
// ECONNRESET. The proxy closed both sides with a FIN, which told the
// client the server's stream was whole and the server the client's. Its
// line says the proxy cut it (KD); it said "-", a normal end.
func TestDrainCutResetsTunnel(t *testing.T) {
	const resp101 = "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
	for _, upgrade := range []bool{false, true} {
		name := "tcp"
		if upgrade {
			name = "upgrade"
		}
		t.Run(name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				srvErr := make(chan error, 1)
				u := newUpstream(t, func(c net.Conn) {
					if upgrade {
						if _, ok := readHeadBytes(c); !ok {
							return
						}
						c.SetReadDeadline(time.Time{})
						io.WriteString(c, resp101)
					}
					io.WriteString(c, "part")
					_, err := io.Copy(io.Discard, c)
					srvErr <- err
				})
				cfg := testConfig(b, u.addr)
				if upgrade {
					cfg = httpConfig(b, u.addr)
				}
				p, stop, path := runCutLogged(t, cfg)
				c := dial(t, p)
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				if upgrade {
					io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
					if head := rawHead(t, c, br); !strings.HasPrefix(head, "HTTP/1.1 101") {
						t.Fatalf("upgrade: %q", head)
					}
				}
				part := make([]byte, 4)
				if _, err := io.ReadFull(br, part); err != nil || string(part) != "part" {
					t.Fatalf("read %q, %v; want the server's first bytes", part, err)
				}
				if err := stop(); err != nil {
					t.Error(err)
				}
				if n, err := io.Copy(io.Discard, br); !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("the client read %d more bytes, then %v; want a reset", n, err)
				}
				select {
				case err := <-srvErr:
					if !errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("the server read the client's end as %v; want a reset", err)
					}
				case <-time.After(10 * time.Second):
					t.Error("the server's side of the tunnel still open after the drain")
				}
				checkFields(t, waitLine(t, path, "the tunnel's line", func(map[string]any) bool { return true }), map[string]string{"term": "KD"})
			})
		})
	}
}

// TestDrainCutTerm: an HTTP exchange cut at the end of Run's drain, its
// response under way (a head sent, the body still coming, over HTTP/1.1
// and HTTP/2), is logged KD: the proxy cut it. It was logged CD or SD,
// as if the client or the server had closed first, whichever of the two
// connections the engine closed first.
func TestDrainCutTerm(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				release := make(chan struct{})
				u := newUpstream(t, func(c net.Conn) {
					if _, ok := readHeadBytes(c); !ok {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
					<-release
				})
				t.Cleanup(func() { close(release) })
				cfg := httpConfig(b, u.addr)
				if h2c {
					cfg = h2cConfig(b, u.addr)
				}
				p, stop, path := runCutLogged(t, cfg)
				if h2c {
					r := rawH2Get(t, p, 65535, "/")
					r.c.(net.Conn).SetReadDeadline(time.Now().Add(10 * time.Second))
					for {
						f, err := r.next()
						if err != nil {
							t.Fatal(err)
						}
						if f.Type == h2.FrameData && f.StreamID == 1 {
							break
						}
					}
				} else {
					c := dial(t, p)
					io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					br := bufio.NewReader(c)
					rawHead(t, c, br)
					if _, err := io.ReadFull(br, make([]byte, 4)); err != nil {
						t.Fatal(err)
					}
				}
				if err := stop(); err != nil {
					t.Error(err)
				}
				checkFields(t, waitLine(t, path, "the exchange's line", func(map[string]any) bool { return true }), map[string]string{"term": "KD", "status": "200"})
			})
		})
	}
}

// TestDrainCutUpstreamFirstTerm: an exchange waiting for its response on
// a kept upstream connection when Run's drain runs out, the engine
// cutting that connection before the client's (its slot comes first), is
// logged KD with no status, over HTTP/1.1 and HTTP/2: the proxy cut it.
// The upstream's end (net.ErrClosed) was taken for a server's close: the
// request was sent again (a reused connection, a GET), the dial refused
// by the stopping loop, and the exchange logged 503 NS.
func TestDrainCutUpstreamFirstTerm(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				u := newUpstream(t, func(c net.Conn) {
					if _, ok := readHeadBytes(c); !ok {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					readHeadBytes(c)
					c.SetReadDeadline(time.Time{})
					io.Copy(io.Discard, c) // answers nothing more
				})
				cfg := httpConfig(b, u.addr)
				cfg.Listeners[0].H2C = h2c
				cutAfterKept(t, cfg, u.addr, h2c, map[string]string{"term": "KD", "status": "0", "reused": "true"})
			})
		})
	}
}

// firstOnly answers "/1" with "ok" and holds every other request
// unanswered until its client goes.
var firstOnly = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/1" {
		io.WriteString(w, "ok")
		return
	}
	<-r.Context().Done() // answers nothing more
})

// TestDrainCutH2UpstreamFirstTerm: as TestDrainCutUpstreamFirstTerm with
// an h2c pool: a stream waiting for its response on an HTTP/2 upstream
// connection the engine's stop cut before the client's is logged KD. It
// was logged 502 SD, the connection's end taken for the server's (and
// counted a failure for passive health).
func TestDrainCutH2UpstreamFirstTerm(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				u := newH2CUp(t, firstOnly, nil)
				cfg := h2cPoolConfig(b, u.addr)
				cfg.Listeners[0].H2C = h2c
				cutAfterKept(t, cfg, u.addr, h2c, map[string]string{"term": "KD", "status": "0"})
			})
		})
	}
}

// runCutLogged runs a proxy on cfg with an access log (its path returned)
// and a drain of 200 ms, which the tests let run out.
func runCutLogged(t *testing.T, cfg *Config) (p *Proxy, stop func() error, path string) {
	t.Helper()
	return runLogged(t, cfg, 200*time.Millisecond)
}

// runLogged runs a proxy on cfg with an access log (its path returned)
// and a drain of drain.
func runLogged(t *testing.T, cfg *Config, drain time.Duration) (p *Proxy, stop func() error, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "access.log")
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	p, err := New(cfg, &Options{Drain: drain, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	return p, run(p), path
}

// cutAfterKept runs a proxy on cfg, whose upstream at upAddr answers the
// first request ("/1", with "ok") and nothing after: a first client's
// exchange leaves the upstream connection in the slot after the client's,
// and a second client (over HTTP/2 with h2c) takes a slot after both, its
// request ("/2") waiting on that connection when the drain runs out, so
// that the engine's stop cuts the upstream connection first. The second
// exchange's line must have the fields of want.
func cutAfterKept(t *testing.T, cfg *Config, upAddr string, h2c bool, want map[string]string) {
	t.Helper()
	p, stop, path := runCutLogged(t, cfg)
	c1 := dial(t, p)
	c1.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c1)
	io.WriteString(c1, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
	rawHead(t, c1, br)
	if _, err := io.ReadFull(br, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	if h2c {
		rawH2Get(t, p, 65535, "/2")
	} else {
		c2 := dial(t, p)
		io.WriteString(c2, "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	waitFor(t, "the request on the upstream connection", func() bool { return serverTotals(p, upAddr).Requests == 2 })
	if err := stop(); err != nil {
		t.Error(err)
	}
	checkFields(t, waitLine(t, path, "the cut exchange's line", func(m map[string]any) bool { return field(m, "target") == "/2" }), want)
}

// TestDrainCutCountsNoConnectFailure: a connect the engine's stop cuts
// or refuses when Run's drain runs out is no failed connect: no server's
// failures, passive health's count or ejection (fails 1), no client
// counted failed, as with an HTTP/1.1 pool; the request or connection is
// logged KD.
//   - h2c (HTTP/2 and HTTP/1.1 clients): a request waits for a stream on
//     the connection to the first server (one stream at a time,
//     h2_max_connections 1), which the stop cuts before its client. The
//     request was failed over to the second server, whose dial the
//     stopping loop refused: that counted against the second server, and
//     the request was answered 502 SC.
//   - tcp: a client's connect (its turn in the max_conns queue, to a
//     server that answers no SYN) is under way in the slot before the
//     client's. The cut counted a failed connect, and the client SC.
func TestDrainCutCountsNoConnectFailure(t *testing.T) {
	for _, h2c := range []bool{true, false} {
		t.Run(map[bool]string{true: "h2c/h2", false: "h2c/http1"}[h2c], func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				u1 := newH2CUp(t, firstOnly, func(s *http.Server) {
					s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
				})
				u2 := newH2CUp(t, slowProto("u2", nil), nil)
				cfg := h2cPoolConfig(b, u1.addr, u2.addr)
				cfg.Pools[0].Servers[0].Weight = 100 // (the first ~50 picks)
				cfg.Pools[0].H2MaxConnections = 1
				cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Minute)}
				p, stop, path := runCutLogged(t, cfg)
				// A first client's request dials the connection to u1, in
				// the slot after its own; the next clients' come after both.
				c1 := dial(t, p)
				c1.SetReadDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c1, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
				rawHead(t, c1, bufio.NewReader(c1))
				c, base := client(t, p)
				if h2c {
					c, base = h2Client(t, p)
				}
				getAsync(c, base+"/slow")
				waitFor(t, "the slow stream at the server", func() bool { return serverTotals(p, u1.addr).H2Streams == 2 })
				getAsync(c, base+"/x")
				waitFor(t, "the second request waiting", func() bool { return serverTotals(p, u1.addr).Active == 2 })
				if err := stop(); err != nil {
					t.Error(err)
				}
				checkFields(t, waitLine(t, path, "the waiting request's line", func(m map[string]any) bool { return field(m, "target") == "/x" }),
					map[string]string{"term": "KD"})
				noConnectFailed(t, p)
			})
		})
	}
	t.Run("tcp", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			addr := listenNoAccept(t)
			cfg := testConfig(b, addr)
			cfg.Pools[0].MaxConns = 1
			cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Minute)}
			p, stop, path := runCutLogged(t, cfg)
			c1 := dial(t, p)
			waitFor(t, "the first client's connection", func() bool { return serverTotals(p, addr).Connects == 1 })
			dial(t, p)
			waitFor(t, "the second client in the queue", func() bool { return p.Totals().Pools[0].QueueLength == 1 })
			// Its connect takes a slot the first client's leave free,
			// before its own: the first client resets (a close would
			// leave its connection half open, the server never ending
			// its side).
			c1.SetLinger(0)
			c1.Close()
			waitFor(t, "the second client's connect", func() bool { return p.Totals().Pools[0].QueueServed == 1 })
			if err := stop(); err != nil {
				t.Error(err)
			}
			checkFields(t, waitLine(t, path, "the second client's line", func(m map[string]any) bool { return field(m, "server") == "-" }),
				map[string]string{"term": "KD"})
			noConnectFailed(t, p)
		})
	})
}

// noConnectFailed fails the test where p counted a failed connect: a
// server's failures, passive health's count or ejection, or a client
// whose connects all failed.
func noConnectFailed(t *testing.T, p *Proxy) {
	t.Helper()
	for _, st := range p.Totals().Servers {
		if st.Failures != 0 || st.ConsecutiveFails != 0 || st.EjectionsConnect != 0 || !st.Up {
			t.Errorf("server %s after the stop: %d failures, %d in a row, %d ejections, up %v; want none and up",
				st.Server, st.Failures, st.ConsecutiveFails, st.EjectionsConnect, st.Up)
		}
	}
	if n := p.Totals().Listeners[0].Failed; n != 0 {
		t.Errorf("%d clients counted failed to connect, want 0", n)
	}
}

// listenNoAccept returns the address of a TCP socket on loopback that
// listens with a backlog of 0 and accepts nothing: once one connection
// fills its accept queue, the kernel drops the SYNs of the next, whose
// connects hang until their timeout.
func listenNoAccept(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
