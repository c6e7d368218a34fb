package bench

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestRunProxyPinsHarness: a proxy run puts every thread of the harness
// (the Go runtime's, the window's readers) on the client CPUs while it
// measures, as the bench and sweep runs do: unpinned, they ran on any CPU,
// the proxy's included, beside the process being measured. Every thread's
// mask is read as each client thread starts (testClientThread), in each
// measurement; GOMAXPROCS stays what it was (the runtime's default given
// back first, as TestPinHarnessKeepsGOMAXPROCS), and at the end every
// thread has its mask back.
func TestRunProxyPinsHarness(t *testing.T) {
	cpus := needTwoAllowedCPUs(t)
	client := cpus[len(cpus)-1:]
	runtime.SetDefaultGOMAXPROCS()
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	type sample struct {
		masks map[string][]int
		procs int
		err   error
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	testClientThread = func() {
		m, err := taskMasks()
		mu.Lock()
		samples = append(samples, sample{m, runtime.GOMAXPROCS(0), err})
		mu.Unlock()
	}
	defer func() { testClientThread = nil }()
	argv, env := testChildCommand()
	rep, err := RunProxy(context.Background(), ProxyConfig{
		Arms: []string{ProxyArmDirect}, Duration: 1500 * time.Millisecond, Reps: 2, Conns: 2,
		ProxyCPUs: cpus[:1], ClientCPUs: client,
		UpstreamCommand: argv, ProxyCommand: []string{"/nonexistent"}, Env: env,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || len(samples) != 2 {
		t.Fatalf("%d results, %d client threads started, want 2 of each", len(rep.Results), len(samples))
	}
	for i, s := range samples {
		if s.err != nil {
			t.Fatalf("measurement %d: %v", i+1, s.err)
		}
		for tid, m := range s.masks {
			if !slices.Equal(m, client) {
				t.Errorf("measurement %d: thread %s may run on CPUs %v, want the client CPUs %v", i+1, tid, m, client)
			}
		}
		if s.procs != procs {
			t.Errorf("measurement %d: GOMAXPROCS %d, %d before the run", i+1, s.procs, procs)
		}
	}
	for tid, m := range threadMasks(t) {
		if !slices.Equal(m, cpus) {
			t.Errorf("after the run: thread %s may run on CPUs %v, want %v", tid, m, cpus)
		}
	}
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS %d after the run, %d before", n, procs)
	}
}
