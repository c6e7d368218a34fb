package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWaitHoldsPGOMAXPROCS checks what Run does to GOMAXPROCS: with
// WaitHoldsP it leaves one P beyond the loops that wait holding theirs
// (raising it and saying so), serves, and restores the old value when the
// engine stops; without it, GOMAXPROCS is not touched.
func TestWaitHoldsPGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, b := range []Backend{BackendURing, BackendEpoll} {
		for _, hold := range []bool{true, false} {
			name := string(b)
			if hold {
				name += "/hold"
			}
			t.Run(name, func(t *testing.T) {
				var mu sync.Mutex
				var logs []string
				cfg := &Config{Backend: b, CPUs: []int{firstCPU(t)}, WaitHoldsP: hold,
					Logf: func(f string, a ...any) {
						mu.Lock()
						logs = append(logs, fmt.Sprintf(f, a...))
						mu.Unlock()
					}}
				e, err := New(cfg, &echoHandler{})
				if err != nil {
					t.Fatal(err)
				}
				ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- e.Run(ctx) }()
				var runErr error
				var once sync.Once
				stop := func() error {
					once.Do(func() { cancel(); runErr = <-done })
					return runErr
				}
				defer stop()
				if err := echoOnce(ln.Addr().String(), 1, 64<<10, 4096, nil); err != nil {
					t.Fatal(err)
				}
				want := 1
				if hold {
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
				mu.Lock()
				said := strings.Contains(strings.Join(logs, "\n"), "GOMAXPROCS raised")
				mu.Unlock()
				if said != hold {
					t.Errorf("logged the raise: %v, raised: %v (%q)", said, hold, logs)
				}
			})
		}
	}
}

// firstCPU is the first CPU the test may run on.
func firstCPU(t *testing.T) int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			return c
		}
	}
	t.Fatal("no allowed CPU")
	return -1
}
