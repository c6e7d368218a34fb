package engine

import (
	"fmt"
	"runtime"
	"sync"
)

// spareP counts the loops, of every engine in the process, that run with
// GOMAXPROCS managed by the engines (Config.KeepGOMAXPROCS unset), and
// remembers what the engines did to GOMAXPROCS for them.
var spareP struct {
	sync.Mutex
	loops  int // loops now running
	before int // GOMAXPROCS before the engines raised it; 0 if they did not
	set    int // the value the engines set
	// auto says before was the runtime's default (from the CPU count, the
	// cgroup limit or the GOMAXPROCS variable), which the runtime keeps up
	// to date as the CPU limit changes until someone sets a value.
	auto bool
}

// reserveP accounts for n more loops and makes sure GOMAXPROCS exceeds the
// loops of the process by at least one, raising it if needed. The message
// says what it changed ("" when nothing). Any goroutine.
//
// Why: a loop sleeps in io_uring_enter or epoll_wait most of the time. With
// a P idle, the runtime's monitor (sysmon) leaves a sleeping loop's P alone
// for 10 ms; with none, it takes the P away from every sleep longer than
// 20 µs, wakes every 20 µs to look, and every wake-up of the loop then goes
// through exitsyscall's slow path. At 6,400 requests/s that was 28.6 µs of
// sysmon per request on top of the loop's 16.9 (docs/BENCHMARKS.md, "The
// scheduler and the loops").
func reserveP(n int) string {
	spareP.Lock()
	defer spareP.Unlock()
	spareP.loops += n
	cur := runtime.GOMAXPROCS(0)
	if cur > spareP.loops {
		return ""
	}
	want := spareP.loops + 1
	if spareP.before == 0 || cur != spareP.set {
		// The first raise, or someone set GOMAXPROCS since the last:
		// theirs is the value to come back to.
		spareP.before, spareP.auto = cur, isDefaultGOMAXPROCS(cur)
	}
	runtime.GOMAXPROCS(want)
	spareP.set = want
	return fmt.Sprintf("engine: GOMAXPROCS raised from %d to %d, one more than the %d event loops, so that the Go scheduler leaves sleeping loops their P (Config.KeepGOMAXPROCS)", cur, want, spareP.loops)
}

// releaseP undoes reserveP(n). When no loop is left and GOMAXPROCS still
// has the value the engines set, the earlier value comes back: as the
// runtime's default, kept up to date with the CPU limit, when it was the
// default (or equal to it), else as a set value. A value someone else set
// in between is left alone. Any goroutine.
func releaseP(n int) {
	spareP.Lock()
	defer spareP.Unlock()
	spareP.loops -= n
	if spareP.loops > 0 || spareP.before == 0 {
		return
	}
	if runtime.GOMAXPROCS(0) == spareP.set {
		if spareP.auto {
			runtime.SetDefaultGOMAXPROCS()
		} else {
			runtime.GOMAXPROCS(spareP.before)
		}
	}
	spareP.before, spareP.set, spareP.auto = 0, 0, false
}

// isDefaultGOMAXPROCS reports whether cur, the GOMAXPROCS in effect, is the
// runtime's default. The runtime does not say whether a value was set, so
// this asks for the default (runtime.SetDefaultGOMAXPROCS) and compares:
// a value set equal to the default counts as the default. It leaves
// GOMAXPROCS at cur. Any goroutine; reserveP's caller is about to change
// GOMAXPROCS anyway.
func isDefaultGOMAXPROCS(cur int) bool {
	runtime.SetDefaultGOMAXPROCS()
	if runtime.GOMAXPROCS(0) == cur {
		return true
	}
	runtime.GOMAXPROCS(cur)
	return false
}
