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

// TestTLSClientFINBeforeUpgradeAfterBody: a TLS client whose Upgrade
// request has a body, read while the server has yet to answer (the
// proxy reads a client whose request awaits its response only for a body
// or, with abort_on_close, for its end), and whose FIN without
// close_notify follows the body's last bytes before the 101, has that FIN
// reach the server as a reset once the tunnel is made, not as an end that
// would read as the client's own; the exchange is logged CD. With
// close_notify the server reads the body and the end. (The FIN reaches
// the tunnel, whose OnEOF tells the two apart, since the proxy stops
// reading the client once its body went whole and the engine holds what
// comes after, the FIN too, until the tunnel reads on.)
func TestTLSClientFINBeforeUpgradeAfterBody(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		ends := make(chan readEnd, 1)
		answer := make(chan struct{})
		wait := func(c <-chan struct{}) bool {
			select {
			case <-c:
				return true
			case <-time.After(10 * time.Second):
				return false
			}
		}
		u := newUpstream(t, func(c net.Conn) {
			defer c.Close()
			if _, ok := readHeadBytes(c); !ok {
				return
			}
			if !wait(answer) { // until the client's end reached the proxy
				return
			}
			c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			ends <- readEnd{got, err}
			wait(answer) // until the client read the 101
		})
		cfg := httpConfig(b, u.addr)
		path := filepath.Join(t.TempDir(), "http.log")
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path, Format: AccessLogJSON}
		p := startProxy(t, cfg)
		for _, bare := range []bool{false, true} {
			c, err := tls.Dial("tcp", p.Addr("web").String(), &tls.Config{RootCAs: ca.roots, ServerName: "web.test", NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "POST /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\nhe")
			time.Sleep(100 * time.Millisecond) // for the proxy to read the body's start
			io.WriteString(c, "llo")
			if bare {
				c.NetConn().(*net.TCPConn).CloseWrite()
			} else {
				c.CloseWrite()
			}
			time.Sleep(200 * time.Millisecond) // for the end to reach the proxy
			answer <- struct{}{}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "POST"})
			if err == nil && resp.StatusCode != 101 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			if err != nil && !bare {
				// (With the FIN alone the client is reset, which may
				// drop the 101 queued for it.)
				t.Errorf("close_notify: %v, want a 101", err)
			}
			answer <- struct{}{}
			var got readEnd
			select {
			case got = <-ends:
			case <-time.After(10 * time.Second):
				t.Fatalf("FIN alone %v: the server's read did not end", bare)
			}
			local := c.LocalAddr().String()
			c.Close()
			term := "-"
			switch {
			case bare && (!strings.HasPrefix("hello", string(got.got)) || !errors.Is(got.err, syscall.ECONNRESET)):
				t.Errorf("FIN alone: the server read %q, %v; want a reset", got.got, got.err)
			case !bare && (string(got.got) != "hello" || got.err != nil):
				t.Errorf("close_notify: the server read %q, %v; want hello and the end", got.got, got.err)
			}
			if bare {
				term = "CD"
			}
			m := waitLine(t, path, "the exchange's line", func(m map[string]any) bool { return field(m, "client") == local })
			checkFields(t, m, map[string]string{"status": "101", "term": term})
		}
	})
}
