package proxy

import (
	"strings"
	"testing"
)

// testPool returns a pool of servers of the weights given, as loop 0's
// tables hold it (no engine): pickServer's inputs.
func testPool(leastConn bool, weights ...int) (*loopState, *pool) {
	pl := &pool{leastConn: leastConn, loops: []*poolLoop{newPoolLoop(len(weights))}}
	ls := &loopState{id: 0}
	for _, w := range weights {
		pl.cfg.Servers = append(pl.cfg.Servers, ServerConfig{Address: "127.0.0.1:1", Weight: w})
		pl.servers = append(pl.servers, &server{now: func() int64 { return 0 }, loops: []*srvLoop{new(srvLoop)}})
	}
	return ls, pl
}

// stats returns the loop's stats of each of pl's servers.
func stats(ls *loopState, pl *pool) []*srvStats {
	var st []*srvStats
	for i := range pl.servers {
		st = append(st, ls.stats(pl, i))
	}
	return st
}

// picks returns the servers n picks choose, as a string of indexes.
func picks(ls *loopState, pl *pool, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte('0' + byte(pickServer(ls, pl, 0)))
	}
	return b.String()
}

// TestSmoothWRR: round-robin over weights 5:1:1 gives each server its
// weight's share of every 7 picks exactly, spread out as nginx's smooth
// weighted round-robin does (the heavy server never 5 in a row: at most 4, across two rounds); equal
// weights are plain round-robin; a down server's share goes to the others
// by their weights.
func TestSmoothWRR(t *testing.T) {
	ls, pl := testPool(false, 5, 1, 1)
	seq := picks(ls, pl, 70)
	if want := strings.Repeat("0010200", 10); seq != want {
		t.Errorf("5:1:1 picks %s, want %s (nginx's order)", seq, want)
	}
	for i, want := range []int{50, 10, 10} {
		if got := strings.Count(seq, string(rune('0'+i))); got != want {
			t.Errorf("server %d took %d of 70, want %d", i, got, want)
		}
	}
	if strings.Contains(seq, "00000") {
		t.Errorf("5:1:1 picks %s: a run of 5 of the heavy server", seq)
	}

	ls, pl = testPool(false, 1, 1, 1)
	if seq := picks(ls, pl, 9); seq != "012012012" {
		t.Errorf("1:1:1 picks %s, want 012012012", seq)
	}

	ls, pl = testPool(false, 3, 2, 1)
	pl.servers[1].down.Store(true)
	seq = picks(ls, pl, 40)
	if n0, n1, n2 := strings.Count(seq, "0"), strings.Count(seq, "1"), strings.Count(seq, "2"); n0 != 30 || n1 != 0 || n2 != 10 {
		t.Errorf("3:2:1 with server 1 down: %d/%d/%d of 40 (%s), want 30/0/10", n0, n1, n2, seq)
	}
	pl.servers[1].down.Store(false)
	seq = picks(ls, pl, 60)
	if n0, n1, n2 := strings.Count(seq, "0"), strings.Count(seq, "1"), strings.Count(seq, "2"); n0 != 30 || n1 != 20 || n2 != 10 {
		t.Errorf("3:2:1 up again: %d/%d/%d of 60 (%s), want 30/20/10", n0, n1, n2, seq)
	}
}

// TestLeastConnWeights: least-conn compares connections per weight: a
// server of weight 3 holding 5 (5/3) is taken before one of weight 1
// holding 2; ties go in turn.
func TestLeastConnWeights(t *testing.T) {
	ls, pl := testPool(true, 3, 1)
	st := stats(ls, pl)
	st[0].active.add(5)
	st[1].active.add(2)
	if got := pickServer(ls, pl, 0); got != 0 {
		t.Errorf("5 conns at weight 3 vs 2 at weight 1: picked %d, want 0", got)
	}
	st[0].active.add(2) // 7/3 > 2/1
	if got := pickServer(ls, pl, 0); got != 1 {
		t.Errorf("7 conns at weight 3 vs 2 at weight 1: picked %d, want 1", got)
	}
	// Opened as picked, connections share 3:1.
	ls, pl = testPool(true, 3, 1)
	st = stats(ls, pl)
	for range 40 {
		st[pickServer(ls, pl, 0)].active.inc()
	}
	if a, b := st[0].active.load(), st[1].active.load(); a != 30 || b != 10 {
		t.Errorf("40 connections kept open at 3:1: %d and %d, want 30 and 10", a, b)
	}
	pl.servers[0].down.Store(true)
	if got := pickServer(ls, pl, 0); got != 1 {
		t.Errorf("server 0 down: picked %d, want 1", got)
	}
	// Ties (equal weights, equal counts) go in turn.
	ls, pl = testPool(true, 2, 2, 2)
	if seq := picks(ls, pl, 6); seq != "012012" {
		t.Errorf("ties picked %s, want 012012", seq)
	}
}

// TestPickAllocs: a pick allocates nothing.
func TestPickAllocs(t *testing.T) {
	for _, lc := range []bool{false, true} {
		ls, pl := testPool(lc, 5, 1, 1)
		if n := testing.AllocsPerRun(100, func() { pickServer(ls, pl, 0) }); n != 0 {
			t.Errorf("least-conn %v: %v allocations per pick", lc, n)
		}
	}
}

// reloadPool returns pl's pool as a reload makes it anew with the weights
// given, one a server: pl's servers kept (as many as there are weights),
// new ones after them; and applies that generation on ls's loop.
func reloadPool(ls *loopState, pl *pool, weights ...int) *pool {
	npl := &pool{leastConn: pl.leastConn, loops: []*poolLoop{newPoolLoop(len(weights))}}
	g := &generation{made: []*pool{npl}}
	for i, w := range weights {
		npl.cfg.Servers = append(npl.cfg.Servers, ServerConfig{Address: "127.0.0.1:1", Weight: w})
		if i < len(pl.servers) {
			npl.servers = append(npl.servers, pl.servers[i])
			g.kept = append(g.kept, pl.servers[i])
			continue
		}
		npl.servers = append(npl.servers, &server{now: func() int64 { return 0 }, loops: []*srvLoop{newSrvLoop()}})
	}
	g.pools = g.made
	ls.apply(0, g)
	return npl
}

// TestSmoothWRRReload: a reload that changes a pool's weights, or adds a
// server to it, starts its smooth weighted round-robin afresh on every
// loop: the new weights' sequence from its start, as for a new pool, with
// no run of picks to a kept server whose current weight the old weights
// left high.
func TestSmoothWRRReload(t *testing.T) {
	ls, pl := testPool(false, 256, 1)
	// Half a round: server 1's current weight is left at +128, server 0's
	// at -128; carried over, 1:1 gave server 1 the next 128 picks in a row.
	picks(ls, pl, 128)
	npl := reloadPool(ls, pl, 1, 1)
	if seq := picks(ls, npl, 8); seq != "01010101" {
		t.Errorf("256:1 reloaded as 1:1 picks %s, want 01010101", seq)
	}

	ls, pl = testPool(false, 256, 1)
	picks(ls, pl, 128)
	npl = reloadPool(ls, pl, 1, 1, 1) // weights 1:1, a server added
	if seq := picks(ls, npl, 9); seq != "012012012" {
		t.Errorf("256:1 reloaded as 1:1:1 (server 2 added) picks %s, want 012012012", seq)
	}
}

// TestSmoothWRROldPool: a pool a reload made anew shares its servers with
// the pool it replaced, which requests begun before the reload may still
// pick from (a retry): picks from the old pool must not move the new
// pool's sequence.
func TestSmoothWRROldPool(t *testing.T) {
	ls, old := testPool(false, 256, 1)
	made := &pool{loops: []*poolLoop{newPoolLoop(2)}, servers: old.servers}
	made.cfg.Servers = []ServerConfig{{Address: "127.0.0.1:1", Weight: 1}, {Address: "127.0.0.1:1", Weight: 1}}
	var seq strings.Builder
	for range 8 {
		picks(ls, old, 1) // a retry on the old pool between two picks
		seq.WriteString(picks(ls, made, 1))
	}
	if got := seq.String(); got != "01010101" {
		t.Errorf("1:1 picks %s beside picks from the 256:1 pool it replaced, want 01010101", got)
	}
}
