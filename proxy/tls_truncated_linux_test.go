package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
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
