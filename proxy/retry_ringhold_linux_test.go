package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestRetryHeldBuffersLoop: the received buffers HTTP/1.1 clients'
// request bodies are kept in for retries are bounded over all the pools
// of a loop, not a pool at a time: five pools with retries, each with 8
// clients whose PUT bodies come in 16 reads each (640 buffers, 128 a
// pool, more than the ring's 512), to a server that holds its responses.
// While they wait the loop's held buffers stay within the bound and a
// new client's GET is answered; once the server answers each PUT gets
// its 200 with its body whole. (Before: each pool held its 128, and the
// loop read no more of the bodies on the uring backends once the ring
// was taken.)
func TestRetryHeldBuffersLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const pools, perPool, reads, piece = 5, 8, maxHeldBufs, 10
		release := make(chan struct{})
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/new/x" {
				io.WriteString(w, "other")
				return
			}
			body, _ := io.ReadAll(r.Body)
			<-release
			fmt.Fprintf(w, "ok %s %s", r.Method, sum(body))
		})
		free := closer(t, release)
		cfg := retryConfig(b, &RetryConfig{On: []string{"503"}}, u.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
		for j := 1; j < pools; j++ {
			name := fmt.Sprintf("p%d", j)
			cfg.Pools = append(cfg.Pools, PoolConfig{Name: name, Servers: Servers(u.addr)})
			cfg.Listeners[0].Routes = append(cfg.Listeners[0].Routes, RouteConfig{PathPrefix: "/" + name + "/", Pool: name})
		}
		p := startProxy(t, cfg)
		cs := make([]*net.TCPConn, pools*perPool)
		bodies := make([]string, len(cs))
		for i := range cs {
			cs[i] = dial(t, p)
			cs[i].SetNoDelay(true)
			bodies[i] = strings.Repeat(string(rune('a'+i%26)), reads*piece)
			if _, err := fmt.Fprintf(cs[i], "PUT /p%d/c%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", i%pools, i, reads*piece); err != nil {
				t.Fatal(err)
			}
		}
		// A read each: every client's piece is read before the next goes.
		for k := 1; k <= reads; k++ {
			for i, c := range cs {
				if _, err := io.WriteString(c, bodies[i][(k-1)*piece:k*piece]); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, fmt.Sprintf("piece %d of every body read", k), func() bool {
				n := 0
				onLoops(p, func(ls *loopState) {
					for _, s := range ls.sessions {
						if s.reqBody.Data() == int64(k*piece) {
							n++
						}
					}
				})
				return n == len(cs)
			})
			if n := loopHeldBufs(p); n > maxLoopHeldBufs {
				t.Fatalf("piece %d: %d buffers held for retries on the loop, want %d at most", k, n, maxLoopHeldBufs)
			}
		}
		newClientGet(t, p, "/new/x", "other", fmt.Sprintf("beside %d bodies kept for retries", len(cs)))

		free()
		for i, c := range cs {
			resp, got := readResponseFrom(t, c, bufio.NewReader(c), "PUT")
			if want := "ok PUT " + sum([]byte(bodies[i])); resp.StatusCode != 200 || got != want {
				t.Fatalf("client %d: %d %q, want 200 %q", i, resp.StatusCode, got, want)
			}
		}
		if n := loopHeldBufs(p); n != 0 {
			t.Errorf("%d buffers held for retries after the responses, want 0", n)
		}
	})
}

// loopHeldBufs sums the received buffers held for retries over p's
// loops (read racily, as /metrics does).
func loopHeldBufs(p *Proxy) int64 {
	var n int64
	for _, ls := range p.loops {
		n += ls.retryHeld.bufs.load()
	}
	return n
}
