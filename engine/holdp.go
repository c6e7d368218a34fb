package engine

import (
	"fmt"
	"runtime"
	"sync"
)

// heldPs counts the loops, of every engine in the process, that wait
// holding their P (Config.WaitHoldsP), and remembers what the
// engines did to GOMAXPROCS for them.
var heldPs struct {
	sync.Mutex
	loops  int // loops now running that wait holding their P
	before int // GOMAXPROCS before the engines raised it; 0 if they did not
	set    int // the value the engines set
}

// holdPs accounts for n more loops that wait holding their P and makes sure
// GOMAXPROCS leaves one P for the rest of the process, raising it if needed.
// The message says what it changed ("" when nothing). Any goroutine.
func holdPs(n int) string {
	heldPs.Lock()
	defer heldPs.Unlock()
	heldPs.loops += n
	cur := runtime.GOMAXPROCS(0)
	if cur > heldPs.loops {
		return ""
	}
	want := heldPs.loops + 1
	if heldPs.before == 0 {
		heldPs.before = cur
	}
	runtime.GOMAXPROCS(want)
	heldPs.set = want
	return fmt.Sprintf("engine: GOMAXPROCS raised from %d to %d: %d loops wait holding their P and one P stays for other goroutines (Config.WaitHoldsP)", cur, want, heldPs.loops)
}

// releasePs undoes holdPs(n). When no loop holds its P any more and
// GOMAXPROCS still has the value the engines set, the earlier value comes
// back; a value someone else set in between is left alone. Any goroutine.
func releasePs(n int) {
	heldPs.Lock()
	defer heldPs.Unlock()
	heldPs.loops -= n
	if heldPs.loops > 0 || heldPs.before == 0 {
		return
	}
	if runtime.GOMAXPROCS(0) == heldPs.set {
		runtime.GOMAXPROCS(heldPs.before)
	}
	heldPs.before, heldPs.set = 0, 0
}
