package engine

import (
	"fmt"
	"testing"
	"time"
)

// setStopped stands for n timers set in the heap's next free slot and
// stopped again, without setting them: each would have taken one seq.
func (h *timerHeap) setStopped(n uint64) { h.seq += n }

// TestStaleTimerCancelsNoLaterTimer: a Timer that ran or was stopped
// cancels nothing when its slot holds another timer, however many timers
// the slot held in between: also 2^31-1 and 2^32-1 of them, after which a
// 32-bit count per slot (stepped at each set and each end, or at each
// set) came back to the stale handle's and its Stop cancelled the new one.
func TestStaleTimerCancelsNoLaterTimer(t *testing.T) {
	for _, how := range []string{"stopped", "ran"} {
		for _, n := range []uint64{0, 1, 1<<31 - 1, 1<<32 - 1, 1 << 32} {
			t.Run(fmt.Sprintf("%s/%d", how, n), func(t *testing.T) {
				l := &Loop{}
				ran := false
				stale := l.AfterFunc(0, func() { ran = true })
				if how == "stopped" {
					if !stale.Stop() {
						t.Fatal("Stop of a pending timer reported false")
					}
				} else if l.timers.runExpired(nanotime()); !ran {
					t.Fatal("the due timer did not run")
				}
				l.timers.setStopped(n)
				fresh := l.AfterFunc(time.Hour, func() {})
				if fresh.ref.s != stale.ref.s {
					t.Fatalf("the new timer is in slot %d, not the stale one's %d", fresh.ref.s, stale.ref.s)
				}
				if stale.Stop() {
					t.Error("Stop of the stale Timer cancelled the slot's new timer")
				}
				if !fresh.Stop() {
					t.Error("the new timer was not pending")
				}
			})
		}
	}
}
