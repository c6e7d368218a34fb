package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// TestAccessLogWriteTimeoutTerm: a side reset by write_timeout (it took
// nothing of its queue) is logged as that side's timeout, CT for the
// client and ST for the server (HAProxy cD and sD), in a tunnel and in an
// HTTP exchange (a client not reading its response; a server not reading
// the request's body: 502). They were logged CD and SD, which say that
// the side closed or reset its connection.
func TestAccessLogWriteTimeoutTerm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		http   bool
		client bool // the client stalls (else the server)
		want   map[string]string
	}{
		{"tcp client", false, true, map[string]string{"term": "CT"}},
		{"tcp server", false, false, map[string]string{"term": "ST"}},
		{"http client", true, true, map[string]string{"term": "CT", "status": "200"}},
		{"http server", true, false, map[string]string{"term": "ST", "status": "502"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				const size = 64 << 20 // more than the sockets' buffers and the queue hold
				release := make(chan struct{})
				u := newUpstream(t, func(c net.Conn) {
					if tc.http {
						if _, ok := readHeadBytes(c); !ok {
							return
						}
					}
					if !tc.client {
						<-release // reads nothing
						return
					}
					if tc.http {
						fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
					}
					c.Write(make([]byte, size))
				})
				t.Cleanup(func() { close(release) })
				path := filepath.Join(t.TempDir(), "access.log")
				cfg := testConfig(b, u.addr)
				if tc.http {
					cfg = httpConfig(b, u.addr)
					cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
				}
				cfg.Engine.WriteTimeout = Duration(300 * time.Millisecond)
				cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
				p := startProxy(t, cfg)
				c := dialSmall(t, p)
				switch {
				case tc.http && tc.client:
					io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				case tc.http:
					fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
					go c.Write(make([]byte, size))
				case tc.client:
					io.WriteString(c, "x")
				default:
					go c.Write(make([]byte, size))
				}
				checkFields(t, waitLine(t, path, "the line", func(map[string]any) bool { return true }), tc.want)
			})
		})
	}
}

// TestAccessLogH2WriteTimeoutTerm: as TestAccessLogWriteTimeoutTerm for
// HTTP/2 clients: the streams of one reset for write_timeout (it took
// nothing of its connection's queue, its windows open) are logged CT,
// not CD, and a stream whose HTTP/1.1 server took nothing of the
// request's body for write_timeout ST (502), not SD.
func TestAccessLogH2WriteTimeoutTerm(t *testing.T) {
	const size = 64 << 20 // more than the sockets' buffers and the queue hold
	t.Run("client", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(size))
				w.Write(make([]byte, size))
			})
			p, path := h2TimeoutProxy(t, b, u.addr)
			r := rawH2Get(t, p, 1<<30, "/")
			if _, err := r.c.(net.Conn).Write(h2.AppendWindowUpdate(nil, 0, 1<<30)); err != nil {
				t.Fatal(err)
			}
			checkFields(t, waitLine(t, path, "the stream's line", func(map[string]any) bool { return true }), map[string]string{"term": "CT", "status": "200"})
		})
	})
	t.Run("server", func(t *testing.T) {
		forBackends(t, func(t *testing.T, b engine.Backend) {
			release := make(chan struct{})
			u := newUpstream(t, func(c net.Conn) {
				readHeadBytes(c)
				<-release // reads nothing of the body
			})
			t.Cleanup(func() { close(release) })
			p, path := h2TimeoutProxy(t, b, u.addr)
			hc, base := h2Client(t, p)
			go func() {
				if resp, err := hc.Post(base+"/", "application/octet-stream", bytes.NewReader(make([]byte, size))); err == nil {
					resp.Body.Close()
				}
			}()
			checkFields(t, waitLine(t, path, "the stream's line", func(map[string]any) bool { return true }), map[string]string{"term": "ST", "status": "502"})
		})
	})
}

// h2TimeoutProxy runs an h2c proxy to server with a write_timeout of
// 300ms and an access log, whose path it returns.
func h2TimeoutProxy(t *testing.T, b engine.Backend, server string) (*Proxy, string) {
	cfg := h2cConfig(b, server)
	cfg.Engine.WriteTimeout = Duration(300 * time.Millisecond)
	cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
	path := filepath.Join(t.TempDir(), "access.log")
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	return startProxy(t, cfg), path
}

// TestAccessLogH2UpWriteTimeoutTerm: a request to an h2c pool whose
// server takes nothing of the connection for write_timeout (it read the
// preface and opened its windows, then stopped reading: the request's
// body fills the socket and the queue) is answered 502 and logged ST,
// the server's timeout, as over HTTP/1.1 (TestAccessLogWriteTimeoutTerm),
// from an HTTP/1.1 client and an HTTP/2 one. The connection's end was
// logged SD, as if the server had closed it.
func TestAccessLogH2UpWriteTimeoutTerm(t *testing.T) {
	const size = 64 << 20 // more than the sockets' buffers and the queue hold
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				release := make(chan struct{})
				u := newUpstream(t, func(c net.Conn) {
					if _, err := io.ReadFull(c, make([]byte, len(h2.ClientPreface))); err != nil {
						return
					}
					out := h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: 1<<31 - 1}})
					out = h2.AppendWindowUpdate(out, 0, 1<<31-1-65535)
					c.Write(h2.AppendSettingsAck(out))
					<-release // reads nothing more
				})
				t.Cleanup(func() { close(release) })
				cfg := h2cPoolConfig(b, u.addr)
				cfg.Listeners[0].H2C = h2c
				cfg.Engine.WriteTimeout = Duration(300 * time.Millisecond)
				cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
				path := filepath.Join(t.TempDir(), "access.log")
				cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
				p := startProxy(t, cfg)
				if h2c {
					hc, base := h2Client(t, p)
					go func() {
						if resp, err := hc.Post(base+"/", "application/octet-stream", bytes.NewReader(make([]byte, size))); err == nil {
							resp.Body.Close()
						}
					}()
				} else {
					c := dial(t, p)
					fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
					go c.Write(make([]byte, size))
				}
				checkFields(t, waitLine(t, path, "the line", func(map[string]any) bool { return true }), map[string]string{"term": "ST", "status": "502"})
			})
		})
	}
}
