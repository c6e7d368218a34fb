package proxy

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// holdLoops blocks every loop of p until the returned release is called
// (or 5 s pass), returning once all of them are held: what happens on
// the sockets meanwhile reaches the loops together, in one iteration.
func holdLoops(t *testing.T, p *Proxy) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	held := make(chan struct{})
	loops := p.Engine().Loops()
	for _, l := range loops {
		l.Post(func() {
			held <- struct{}{}
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
			}
		})
	}
	for range loops {
		<-held
	}
	return func() { close(ch) }
}

// TestServerResetBeforeBodyTerm: a server that resets its connection
// while the request's body is still coming, the rest of the body reaching
// the loop in the same iteration as the reset (the upstream refuses the
// write, net.ErrClosed, before its OnClose), is answered 502 and logged
// SD, the server's close, for an HTTP/1.1 client and an HTTP/2 one's
// stream. It was logged KD, the drain's cut: the refused write's
// net.ErrClosed was taken for the engine's stop.
func TestServerResetBeforeBodyTerm(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				heads := make(chan net.Conn, 1)
				u := newUpstream(t, func(c net.Conn) {
					if _, ok := readHeadBytes(c); !ok {
						return
					}
					heads <- c
					io.Copy(io.Discard, c)
				})
				cfg := httpConfig(b, u.addr)
				cfg.Listeners[0].H2C = h2c
				path := filepath.Join(t.TempDir(), "access.log")
				cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
				p := startProxy(t, cfg)
				c := dial(t, p)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				rest := []byte("67890")
				if h2c {
					enc := hpack.NewEncoder()
					block := enc.StartBlock(nil)
					for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}, {"content-length", "10"}} {
						block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
					}
					out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
					out = h2.AppendHeaders(out, 1, block, false, h2.MinMaxFrameSize)
					c.Write(h2.AppendData(out, 1, []byte("12345"), false))
					rest = h2.AppendData(nil, 1, rest, true)
				} else {
					io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
				}
				var sc net.Conn
				select {
				case sc = <-heads:
				case <-time.After(10 * time.Second):
					t.Fatal("the request's head did not reach the server")
				}
				release := holdLoops(t, p)
				sc.(*net.TCPConn).SetLinger(0)
				sc.Close() // a reset
				time.Sleep(50 * time.Millisecond)
				c.Write(rest)
				time.Sleep(50 * time.Millisecond)
				release()
				if !h2c {
					if head := rawHead(t, c, bufio.NewReader(c)); !strings.HasPrefix(head, "HTTP/1.1 502") {
						t.Errorf("response %q, want a 502", head)
					}
				}
				checkFields(t, waitLine(t, path, "the line", func(map[string]any) bool { return true }), map[string]string{"term": "SD", "status": "502"})
			})
		})
	}
}
