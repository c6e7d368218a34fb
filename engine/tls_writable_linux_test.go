package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// openOrder echoes, and counts callbacks for connections it has not seen
// open: a handler's OnWritable, OnData or OnEOF must follow its OnOpen.
type openOrder struct {
	echoHandler
	early atomic.Int64
}

func (h *openOrder) OnOpen(c *Conn) { c.SetContext(true) }
func (h *openOrder) OnWritable(c *Conn) {
	if c.Context() == nil {
		h.early.Add(1)
	}
}

// TestTLSWritableBeforeOpen: a high-water mark no larger than one
// send chunk (ReadBufferSize, 16 KiB by default) makes the handshake's own
// flight reach the mark, QueuedMemory counting its chunk whole; once they drain the
// engine calls OnWritable for a connection whose OnOpen has not come, one
// the handler has never been given.
func TestTLSWritableBeforeOpen(t *testing.T) {
	for _, b := range testBackends {
		for _, past := range []bool{false, true} {
			name := string(b)
			if past {
				name += "/readpast"
			}
			t.Run(name, func(t *testing.T) {
				cfg := testConfig(b)
				// At the default 16 KiB ReadBufferSize a mark of 16 KiB
				// or less does it: the flight's first chunk counts whole.
				cfg.WriteHighWater = 16 << 10
				cfg.ReadPastHighWater = past
				h := &openOrder{}
				_, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS(), HandshakeTimeout: time.Minute})
				for range 3 {
					c, err := dialTLS(addr, clientTLS(0))
					if err != nil {
						t.Fatal(err)
					}
					c.SetDeadline(time.Now().Add(20 * time.Second))
					if err := roundTrip(c, []byte("ping")); err != nil {
						t.Fatal(err)
					}
					c.Close()
				}
				if n := h.early.Load(); n > 0 {
					t.Errorf("OnWritable called %d times before OnOpen", n)
				}
			})
		}
	}
}
