package proxy

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// delayedTo returns an upstream serve func that forwards each connection
// to addr after d: the server's SETTINGS come d after the connect.
func delayedTo(addr string, d time.Duration) func(net.Conn) {
	return func(c net.Conn) {
		time.Sleep(d)
		s, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer s.Close()
		// (Copies that hide ReadFrom: a splice's pipes outlive the test.)
		go func() { io.Copy(struct{ io.Writer }{s}, struct{ io.Reader }{c}); s.(*net.TCPConn).CloseWrite() }()
		io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{s})
	}
}

// TestH2UpGrowPastServerBound: requests that queued for a connection on
// its way, as many as h2_max_concurrent_streams assumed it would take,
// are spread over more connections (up to h2_max_connections) once the
// server's SETTINGS say it takes fewer (MAX_CONCURRENT_STREAMS 1): they
// were left to the one connection, one at a time, a connection dialed
// only for a request arriving later.
func TestH2UpGrowPastServerBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var f inflight
		h := newH2CUp(t, slowOK(&f, 300*time.Millisecond), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
		})
		up := newUpstream(t, delayedTo(h.addr, 300*time.Millisecond))
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConnections = 4
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		start := time.Now()
		parallelGets(t, c, base+"/", 8)
		if n, m := h.conns.Load(), f.max.Load(); n < 2 || m < 2 {
			t.Errorf("%d upstream connections, %d streams in flight at most (in %v), want more than 1 each (h2_max_connections 4)",
				n, m, time.Since(start).Round(time.Millisecond))
		}
	})
}
