package engine

import "testing"

// TestStaleBufferReleasePanics: releasing a Buffer again once its id has
// come back for a later receive panics, as a second Release does, also
// after the id carried 2^31-1 receives in between, where a 32-bit count
// per id (two steps a receive) came back to the stale Buffer's and the
// release took the later Buffer's id from its handler instead.
func TestStaleBufferReleasePanics(t *testing.T) {
	for _, copied := range []bool{false, true} {
		id := int32(0)
		if copied {
			id = -1 // a send-slab chunk (MaxQueuedReadBuffers)
		}
		l := &Loop{}
		stale := l.own(id, 0)
		l.disown(id, stale)
		// As if the id had carried 2^31-1 more receives, each given and
		// released.
		if copied {
			l.ownedCopies[0] += 1<<32 - 2
		} else {
			l.owned[0] += 1<<32 - 2
		}
		if fresh := l.own(id, 0); fresh == stale {
			t.Errorf("id %d: the later receive has the stale Buffer's count %d", id, fresh)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("id %d: releasing the stale Buffer did not panic", id)
				}
			}()
			l.disown(id, stale)
		}()
	}
}
