package proxy

import (
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
