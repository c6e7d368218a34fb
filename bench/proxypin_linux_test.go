package bench

import (
	"context"
	"os"
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
// measurement of the load generator's run and of the --tls-handshakes
// one; GOMAXPROCS stays what it was (the runtime's default given back
// first, as TestPinHarnessKeepsGOMAXPROCS), and at the end every thread
// has its mask back.
func TestRunProxyPinsHarness(t *testing.T) {
	cpus := needTwoAllowedCPUs(t)
	client := cpus[len(cpus)-1:]
	argv, env := testChildCommand()
	for _, tc := range []struct {
		name string
		cfg  ProxyConfig
		// threads is the client threads a measurement starts.
		threads int
	}{
		{"load", ProxyConfig{Arms: []string{ProxyArmDirect}, Reps: 2, Conns: 2, ProxyCommand: []string{"/nonexistent"}}, 1},
		{"tls-handshakes", ProxyConfig{Arms: []string{ProxyArmSpindleEpoll}, TLSHandshakes: true, Reps: 1, Conns: 2,
			ProxyCommand: []string{"env", proxyChildEnv + "=1", os.Args[0]}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			cfg := tc.cfg
			cfg.Duration, cfg.ProxyCPUs, cfg.ClientCPUs, cfg.UpstreamCommand, cfg.Env = 1500*time.Millisecond, cpus[:1], client, argv, env
			rep, err := RunProxy(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != cfg.Reps || len(samples) != cfg.Reps*tc.threads {
				t.Fatalf("%d results, %d client threads started, want %d and %d", len(rep.Results), len(samples), cfg.Reps, cfg.Reps*tc.threads)
			}
			for i, s := range samples {
				if s.err != nil {
					t.Fatalf("client thread %d: %v", i+1, s.err)
				}
				for tid, m := range s.masks {
					if !slices.Equal(m, client) {
						t.Errorf("client thread %d: thread %s may run on CPUs %v, want the client CPUs %v", i+1, tid, m, client)
					}
				}
				if s.procs != procs {
					t.Errorf("client thread %d: GOMAXPROCS %d, %d before the run", i+1, s.procs, procs)
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
		})
	}
}
