package engine

import (
	"sync/atomic"
	"testing"
)

// TestTakePlace drives takePlace, the admission of a TLS handshake under
// ListenConfig.MaxHandshakes, step by step: meanwhile runs once another
// loop's work between the attempt's load of the count and its swap. A
// refusal must leave the count as it found it, so that an attempt made
// meanwhile by another loop with a place free takes it: with an add undone
// past the cap, the refused attempt's +1 made it refuse too.
func TestTakePlace(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held, most int64
		// meanwhile is another loop's work: it may give a place back
		// (Add(-1)) or call takePlace itself.
		meanwhile func(t *testing.T, held *atomic.Int64, most int64)
		want      bool
		wantHeld  int64
	}{
		{"free", 0, 1, nil, true, 1},
		{"full", 1, 1, nil, false, 1},
		{"no cap", 5, -1, nil, true, 6},
		{
			// The attempt reads the cap full; meanwhile the place is
			// given back and another loop's attempt takes it.
			"full, a place given back and taken meanwhile", 1, 1,
			func(t *testing.T, held *atomic.Int64, most int64) {
				held.Add(-1)
				if !takePlace(held, most, nil) {
					t.Error("another loop's attempt, with the place free, was refused")
				}
			},
			false, 1,
		},
		{
			// The attempt reads a place free; another loop takes it
			// first: the swap fails, and the attempt, reading the cap
			// full, refuses.
			"free, taken meanwhile", 0, 1,
			func(t *testing.T, held *atomic.Int64, most int64) {
				if !takePlace(held, most, nil) {
					t.Error("another loop's attempt, with the place free, was refused")
				}
			},
			false, 1,
		},
		{
			// The count changes under the attempt, a place still
			// free: the swap fails, and the attempt takes a place on
			// its second try.
			"free, another given back meanwhile", 1, 2,
			func(t *testing.T, held *atomic.Int64, most int64) { held.Add(-1) },
			true, 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held atomic.Int64
			held.Store(tc.held)
			var loaded func()
			if tc.meanwhile != nil {
				once := false
				loaded = func() {
					if !once {
						once = true
						tc.meanwhile(t, &held, tc.most)
					}
				}
			}
			if got := takePlace(&held, tc.most, loaded); got != tc.want {
				t.Errorf("takePlace = %v, want %v", got, tc.want)
			}
			if n := held.Load(); n != tc.wantHeld {
				t.Errorf("%d places held after, want %d", n, tc.wantHeld)
			}
		})
	}
}
