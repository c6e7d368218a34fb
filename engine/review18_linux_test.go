package engine

import (
	"math"
	"testing"
	"time"
)

// TestCloseTimeoutUnderLongWriteTimeout: the sweep that checks
// CloseTimeout came every 200th of WriteTimeout at the most often (its
// stall count keeps to a byte), so with a WriteTimeout of an hour a Close
// to a peer that reads nothing waited 18 s for a CloseTimeout of 300 ms,
// and with math.MaxInt64 (its arithmetic overflowing) 533 days. A Close's
// queue must be reset at CloseTimeout within its own sweep period (here
// bounded at 5 s: what counts is that it happens), and with no
// CloseTimeout a huge WriteTimeout must not reset anything.
func TestCloseTimeoutUnderLongWriteTimeout(t *testing.T) {
	for _, wto := range []time.Duration{time.Hour, math.MaxInt64} {
		t.Run(wto.String(), func(t *testing.T) {
			testPeerNotReading(t, func(c *Conn) { c.Close() }, func(cfg *Config, bound bool) {
				cfg.WriteTimeout = wto
				cfg.CloseTimeout = -1
				if bound {
					cfg.CloseTimeout = 300 * time.Millisecond
				}
			})
		})
	}
}
