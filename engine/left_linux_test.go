package engine

import (
	"testing"
	"time"
)

// TestLeftClosedWhenLoopLeaves: a loop whose ring broke has its Left
// closed while the other loop, serving on, has not (a function posted to
// the loop that left never runs: Left tells a caller waiting for one to
// stop waiting).
func TestLeftClosedWhenLoopLeaves(t *testing.T) {
	e := runBreakable(t, &echoHandler{})
	l0, l1 := e.Loops()[0], e.Loops()[1]
	l1.Post(func() { fillSQ(l1.be.(*uringBackend)) })
	select {
	case <-l1.Left():
	case <-time.After(10 * time.Second):
		t.Fatal("loop 1's Left not closed 10 s after its submission failed")
	}
	ran := make(chan struct{})
	l0.Post(func() { close(ran) })
	select {
	case <-ran:
	case <-l0.Left():
		t.Fatal("loop 0's Left closed, the loop serving on")
	case <-time.After(10 * time.Second):
		t.Fatal("a function posted to loop 0 did not run in 10 s")
	}
}
