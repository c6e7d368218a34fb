package proxy

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// forwardAfter returns an upstream serve func that forwards each
// connection to addr once wait returns: the server's SETTINGS come no
// sooner.
func forwardAfter(addr string, wait func()) func(net.Conn) {
	return func(c net.Conn) {
		wait()
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
		up := newUpstream(t, forwardAfter(h.addr, func() { time.Sleep(300 * time.Millisecond) }))
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

// TestH2UpDrainGrowPastServerBound: requests that queued for a connection
// on its way when the drain starts are spread over more connections (up
// to h2_max_connections) once the server's SETTINGS say it takes one
// stream at a time, as outside a drain (TestH2UpGrowPastServerBound), and
// those connections close once idle: the drain ends as the last response
// does. A drain dialed none: the requests ran one at a time on the one
// connection, each response's time added to the drain's, which a few slow
// ones use up, the drain then cutting those left.
func TestH2UpDrainGrowPastServerBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var f inflight
		release := make(chan struct{})
		h := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.enter()
			defer f.leave()
			<-release
			io.WriteString(w, "ok")
		}), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
		})
		gate := make(chan struct{})
		up := newUpstream(t, forwardAfter(h.addr, func() { <-gate }))
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConnections = 3
		p, stop, _ := runLogged(t, cfg, 20*time.Second)
		c, base := h2Client(t, p)
		var got []<-chan string
		for range 3 {
			got = append(got, getAsync(c, base+"/"))
		}
		waitFor(t, "the requests waiting for the connection on its way", func() bool { return serverTotals(p, up.addr).Active == 3 })
		done := make(chan error, 1)
		go func() { done <- stop() }()
		time.Sleep(100 * time.Millisecond) // (the drain under way)
		close(gate)
		deadline := time.Now().Add(5 * time.Second)
		for f.now.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		if n, m := f.now.Load(), h.conns.Load(); n < 3 {
			t.Errorf("%d requests at the server at once over %d connections after 5 s of the drain, want 3 over 3 (h2_max_connections 3)", n, m)
		}
		close(release)
		for _, ch := range got {
			if r := <-ch; r != "200 ok" {
				t.Errorf("a request waiting at the drain: %q, want 200 ok", r)
			}
		}
		c.CloseIdleConnections()
		runEnds(t, done, "the requests ended")
	})
}
