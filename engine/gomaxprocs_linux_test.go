package engine

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGOMAXPROCS checks what Run does to GOMAXPROCS: by default it leaves
// one P beyond the loops (raising it and saying so), serves, and restores
// the old value when the engine stops; with KeepGOMAXPROCS, GOMAXPROCS is
// not touched.
func TestGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, b := range []Backend{BackendURing, BackendEpoll} {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%v", b, keep), func(t *testing.T) {
				var logs logLines
				cfg := &Config{Backend: b, CPUs: []int{allowedCPUList(t)[0]}, KeepGOMAXPROCS: keep, Logf: logs.logf}
				e := newEngine(t, cfg, &echoHandler{})
				ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
				if err != nil {
					t.Fatal(err)
				}
				stop := runUntilStopped(t, e)
				if err := echoOnce(ln.Addr().String(), 1, 64<<10, 4096, nil); err != nil {
					t.Fatal(err)
				}
				raise := !keep
				want := 1
				if raise {
					want = 2
				}
				if got := runtime.GOMAXPROCS(0); got != want {
					t.Errorf("GOMAXPROCS %d while the engine runs, want %d", got, want)
				}
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if got := runtime.GOMAXPROCS(0); got != 1 {
					t.Errorf("GOMAXPROCS %d after the engine stopped, want 1 back", got)
				}
				if said := logs.count("GOMAXPROCS raised") > 0; said != raise {
					t.Errorf("logged the raise: %v, raised: %v (%q)", said, raise, logs.all())
				}
			})
		}
	}
}

// runUntilStopped runs e and returns stop, which cancels Run and returns
// its error; the test's cleanup calls it too, and only the first call stops.
func runUntilStopped(t *testing.T, e *Engine) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// logLines collects an engine's Logf lines. Any goroutine.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// count is the number of lines containing s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestGoWorkFromCallbacks checks that Go work a loop callback hands to the
// runtime runs while the loop waits in the kernel (a loop on one CPU,
// GOMAXPROCS as Run sets it): a Go timer armed from the callback, which the
// runtime keeps on the loop's P, fires; and a goroutine the callback makes
// runnable, which the runtime puts on the loop's own P (runnext), runs.
func TestGoWorkFromCallbacks(t *testing.T) {
	for _, tc := range []struct {
		name, what string
		// open runs in OnOpen and reports, on done, how long its work
		// took to run.
		open func(done chan<- time.Duration) func(c *Conn)
	}{
		{"timer", "a 5ms timer armed on the loop fired", func(done chan<- time.Duration) func(c *Conn) {
			return func(c *Conn) {
				armed := time.Now()
				time.AfterFunc(5*time.Millisecond, func() { done <- time.Since(armed) })
			}
		}},
		{"readied goroutine", "the goroutine the loop readied ran", func(done chan<- time.Duration) func(c *Conn) {
			wake := make(chan time.Time)
			go func() { done <- time.Since(<-wake) }()
			return func(c *Conn) { wake <- time.Now() }
		}},
	} {
		for _, b := range []Backend{BackendURing, BackendEpoll} {
			t.Run(tc.name+"/"+string(b), func(t *testing.T) {
				done := make(chan time.Duration, 1)
				cfg := testConfig(b)
				cfg.CPUs = []int{allowedCPUList(t)[0]}
				_, addr := startEngine(t, cfg, &BaseHandlerFunc{open: tc.open(done)})
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				select {
				case d := <-done:
					t.Logf("%s after %v", tc.what, d)
				case <-time.After(10 * time.Second):
					t.Fatalf("never: %s, while the loop waited", tc.what)
				}
			})
		}
	}
}

// TestGOMAXPROCSDefault checks that an engine started with GOMAXPROCS at
// the runtime's default gives it back as that default, and that an
// explicit value above it is told apart. (The runtime does not expose
// whether it is in default mode; what can be checked is the value and
// isDefaultGOMAXPROCS's answer.)
func TestGOMAXPROCSDefault(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	if !isDefaultGOMAXPROCS(def) || runtime.GOMAXPROCS(0) != def {
		t.Fatalf("GOMAXPROCS %d right after SetDefaultGOMAXPROCS is not seen as the default", def)
	}
	runtime.GOMAXPROCS(def + 1)
	if isDefaultGOMAXPROCS(def+1) || runtime.GOMAXPROCS(0) != def+1 {
		t.Fatalf("explicit GOMAXPROCS %d seen as the default %d, or not left as it was (now %d)", def+1, def, runtime.GOMAXPROCS(0))
	}
	runtime.SetDefaultGOMAXPROCS()
	cpus := allowedCPUList(t)
	if len(cpus) < def {
		t.Skipf("the default GOMAXPROCS %d exceeds the %d CPUs this process may use; the engine would not raise it", def, len(cpus))
	}
	cfg := testConfig(BackendURing)
	cfg.CPUs = cpus[:def]
	e := newEngine(t, cfg, &echoHandler{})
	stop := runUntilStopped(t, e)
	waitFor(t, "the engine to raise GOMAXPROCS", func() bool { return runtime.GOMAXPROCS(0) == def+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("GOMAXPROCS %d after the engine stopped, want the default %d back", got, def)
	}
}

// TestGOMAXPROCSSetInBetween has the application set GOMAXPROCS between two
// engines' raises: when both are done, the application's value comes back,
// not the one from before the first raise.
func TestGOMAXPROCSSetInBetween(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if reserveP(1) == "" { // engine A: 1 -> 2
		t.Fatal("GOMAXPROCS 1 not raised for one loop")
	}
	runtime.GOMAXPROCS(3) // the application's own
	reserveP(3)           // engine B: 4 loops in all -> 5
	releaseP(3)
	releaseP(1)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS %d once both engines stopped; the application had set 3", got)
	}
}
