package proxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
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
