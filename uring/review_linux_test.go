package uring

import (
	"math"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestTimespecSlotsAcrossWrap checks Ring.Timespec's promise that a slot is
// reused only after TimespecSlots more calls, also where the call counter
// wraps: from a counter 100 calls short of 2^32 (where a ring that handed out
// one timespec a microsecond is after 72 minutes), 200 calls must give 200
// distinct slots. Counted modulo 2^32, the slot after 2^32-1 (slot 95) was
// slot 0 again, handed out 96 calls before.
func TestTimespecSlotsAcrossWrap(t *testing.T) {
	r := newRing(t, nil)
	r.tsNext = math.MaxUint32 - 99
	seen := make(map[*Timespec]int, sys.TimespecSlots)
	for i := range sys.TimespecSlots {
		ts := r.Timespec(time.Duration(i))
		if j, dup := seen[ts]; dup {
			t.Fatalf("call %d got the slot of call %d: reused after %d calls, want %d", i, j, i-j, sys.TimespecSlots)
		}
		seen[ts] = i
	}
}
