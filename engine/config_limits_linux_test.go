package engine

import (
	"math"
	"testing"
	"time"
)

// TestConfigHugeReadBuffers gives ReadBuffers values whose rounding up to
// a power of two overflows int: New must refuse them, as it refuses any
// above 32768. The rounding loop's doubling reached 1<<63, which is
// negative, then 0, and spun there for good: New never returned.
func TestConfigHugeReadBuffers(t *testing.T) {
	for _, n := range []int{1<<62 + 1, math.MaxInt} {
		res := make(chan error, 1)
		go func() {
			_, err := (&Config{ReadBuffers: n}).withDefaults()
			res <- err
		}()
		select {
		case err := <-res:
			if err == nil {
				t.Errorf("ReadBuffers %d accepted", n)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadBuffers %d: the config's check has not returned after 5s", n)
		}
	}
}

// relayHandler forwards each message an accepted connection receives over
// a connection it dials to peer for it, sends the reply back and closes
// both; Dial's errors go to errs.
