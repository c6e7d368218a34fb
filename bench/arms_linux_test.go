package bench

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestEveryArmServes starts every arm built into this binary as a server
// child, the way the harness does, and drives verified load at it. The
// harness skips an arm that cannot start (and says why in the report), so
// without this test a broken arm would drop out of the smoke run quietly.
// The gnet arm is tested in bench/peers, the c-liburing arm (a program of
// its own) in cpeer_linux_test.go.
func TestEveryArmServes(t *testing.T) {
	skipUnlessLinux(t)
	for _, a := range Arms() {
		if a.Order >= 99 || a.Start == nil {
			continue // test-only arms; peer and program arms
		}
		t.Run(a.Name, func(t *testing.T) {
			argv, env := testChildCommand()
			argv = append(argv, "-arm", a.Name, "-control")
			if runtime.NumCPU() > 1 {
				// SQPOLL gets CPU 1 (shared with the client here: this
				// checks that the arm serves, not how fast).
				argv = append(argv, "-cpus", "0", "-spare-cpus", "1")
			}
			p, err := startServerProc(context.Background(), argv, env)
			if err != nil {
				if strings.HasPrefix(a.Name, "uring") {
					if b, rerr := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); rerr == nil && strings.TrimSpace(string(b)) != "0" {
						t.Skipf("io_uring disabled here (kernel.io_uring_disabled=%s): %v", strings.TrimSpace(string(b)), err)
					}
				}
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := p.stop(); err != nil {
					t.Error(err)
				}
			})
			// Small requests, and 100 KB ones that span many receive
			// buffers (frames split across reads). Under the race detector
			// on a busy machine a 100 ms window could pass with no request
			// sent, so both sizes get half a second, and longer while the
			// server had no CPU in it (100 KB, sqpoll and napi: a handful
			// of replies in the window, some runs none).
			var res *LoadResult
			for _, size := range []int{DefaultPayload, 100 << 10} {
				res = servedLoad(t, LoadConfig{
					Addr: p.hello.Addr, Conns: 4, InFlight: 2, Payload: size, Warmup: 20 * time.Millisecond, Duration: 500 * time.Millisecond,
				}, unserved)
				if res.Answered != res.Sent {
					t.Fatalf("%d-byte payload: %d requests sent in the window, %d answered, %d unanswered", size, res.Sent, res.Answered, res.Unanswered)
				}
			}
			u, err := p.usage()
			if err != nil {
				t.Fatal(err)
			}
			if u.MonoNS <= 0 {
				t.Errorf("usage has no mono_ns: the harness cannot time the child's rusage reads")
			}
			engineArm := a.Name != "go-net"
			if engineArm && u.Counters["waits"]+u.Counters["submits"] == 0 {
				t.Errorf("engine arm reports no kernel waits: %v", u.Counters)
			}
			t.Logf("%.0f req/s, %s", res.Throughput(), res.Hist)
		})
	}
}
