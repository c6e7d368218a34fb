package engine

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lingerCounter counts OnData calls, and lingers (CloseLinger) at the
// first.
type lingerCounter struct {
	BaseHandler
	data   atomic.Uint64
	closes atomic.Int64
}

func (h *lingerCounter) OnData(c *Conn, b Buffer) bool {
	h.data.Add(1)
	c.CloseLinger(5*time.Second, 1<<20)
	return false
}

func (h *lingerCounter) OnClose(*Conn, error) { h.closes.Add(1) }

// TestReadsCountsDeliveries: Stats.Reads, documented as OnData
// deliveries, also counted the receives dropped while a connection
// lingered (CloseLinger) or closed. It must equal the OnData calls.
func TestReadsCountsDeliveries(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &lingerCounter{}
			e, addr := startEngine(t, testConfig(b), h)
			c := mustDial(t, "tcp", addr)
			if _, err := c.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			// The engine's FIN: it lingers, dropping what comes next.
			if _, err := io.ReadAll(c); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if _, err := c.Write([]byte(strings.Repeat("dropped ", i+1))); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond) // separate receives
			}
			c.(*net.TCPConn).CloseWrite()
			waitFor(t, "the linger to end", func() bool { return h.closes.Load() == 1 })
			s := e.Stats()
			if s.Reads != h.data.Load() {
				t.Errorf("Stats.Reads is %d, OnData was called %d times", s.Reads, h.data.Load())
			}
			if want := uint64(len("request") + 8*15); s.BytesRead != want {
				t.Errorf("Stats.BytesRead is %d, want every byte received, dropped ones too: %d", s.BytesRead, want)
			}
		})
	}
}
