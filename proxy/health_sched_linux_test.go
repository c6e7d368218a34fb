package proxy

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestHealthCheckSilentServer: each server of a pool is checked on its own
// schedule, its state moved as soon as its check ends: one that accepts
// and answers nothing, each of its checks running out the timeout (500
// ms, the interval), does not hold back another's fall or rise, which
// follows its failed or passed check at once (fails: a check round waited
// for every server's check before judging any, so the other's state moved
// only once the silent one's timed out, up to 500 ms after its own check).
func TestHealthCheckSilentServer(t *testing.T) {
	silent, accepted := mute(t)
	// first[up]: when b first answered a check 200 (up) or 503, UnixNano.
	var status atomic.Int64
	var first [2]atomic.Int64
	status.Store(200)
	b := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		st := status.Load()
		w.WriteHeader(int(st))
		i := 0
		if st == 200 {
			i = 1
		}
		first[i].CompareAndSwap(0, time.Now().UnixNano())
	})
	cfg := httpConfig(engine.BackendEpoll, silent, b.addr)
	cfg.Pools[0].Health = &HealthConfig{Type: HealthHTTP, Path: "/healthz", Interval: Duration(500 * time.Millisecond), Timeout: Duration(500 * time.Millisecond), Rise: 1, Fall: 1}
	p := startProxy(t, cfg)
	waitFor(t, "a check of the silent server in progress", func() bool { return accepted.Load() > 0 })

	for _, up := range []bool{false, true} {
		i := 0
		if up {
			i = 1
		}
		first[i].Store(0)
		status.Store([]int64{503, 200}[i])
		waitFor(t, "b's state moved", func() bool { return serverTotals(p, b.addr).Up == up })
		if d := time.Since(time.Unix(0, first[i].Load())); d > 200*time.Millisecond {
			t.Errorf("b marked up=%v %v after its check answered: the silent server's check held it back", up, d)
		}
	}
}

// TestHealthChecksSpread: the checks of a pool's servers go out spread
// over the interval, not all at once: four servers checked every 2 s
// have their first checks 0.5 s apart (1.5 s from the first to the
// last); every checker started together and connected within a few
// milliseconds of the others before. The bound, a quarter of the
// interval, leaves a second of slack for a loaded machine.
func TestHealthChecksSpread(t *testing.T) {
	const n, iv = 4, 2 * time.Second
	var first [n]atomic.Int64 // each server's first check, UnixNano
	addrs := make([]string, n)
	for i := range n {
		addrs[i] = newUpstream(t, func(net.Conn) { first[i].CompareAndSwap(0, time.Now().UnixNano()) }).addr
	}
	cfg := testConfig(engine.BackendEpoll, addrs...)
	cfg.Pools[0].Health = &HealthConfig{Type: HealthTCP, Interval: Duration(iv), Timeout: Duration(time.Second), Rise: 1, Fall: 1}
	startProxy(t, cfg)
	waitFor(t, "every server checked", func() bool {
		for i := range first {
			if first[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	lo, hi := first[0].Load(), first[0].Load()
	for i := range first {
		lo, hi = min(lo, first[i].Load()), max(hi, first[i].Load())
	}
	if span := time.Duration(hi - lo); span < iv/4 {
		t.Errorf("the %d servers' first checks within %v of each other, want spread over the interval (%v)", n, span, iv)
	}
}
