package proxy

import (
	"context"
	"net"
	"sync"
	"time"
)

// check runs the health checks of pl until the proxy stops: every
// interval a TCP connect to each server, all at once, each bounded by the
// timeout. Rise consecutive passes mark a down server up, fall consecutive
// failures mark an up server down. Servers start up. Its own goroutine.
func (p *Proxy) check(ctx context.Context, pl *pool) {
	defer p.checkers.Done()
	h := pl.health
	n := len(pl.servers)
	passes, fails := make([]int, n), make([]int, n)
	ok := make([]bool, n)
	d := net.Dialer{Timeout: time.Duration(h.Timeout)}
	t := time.NewTicker(time.Duration(h.Interval))
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for i, s := range pl.servers {
			wg.Go(func() {
				c, err := d.DialContext(ctx, "tcp", s.addr)
				if err == nil {
					c.Close()
				}
				ok[i] = err == nil
			})
		}
		wg.Wait()
		if ctx.Err() != nil {
			return // a check cut short by the stop says nothing
		}
		for i, s := range pl.servers {
			if ok[i] {
				s.checkPasses.Add(1)
				fails[i] = 0
				passes[i]++
				if s.down.Load() && passes[i] >= h.Rise {
					s.down.Store(false)
				}
				continue
			}
			passes[i] = 0
			fails[i]++
			s.checkFails.Add(1)
			if !s.down.Load() && fails[i] >= h.Fall {
				s.down.Store(true)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
